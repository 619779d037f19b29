//! Prometheus metrics: HTTP requests and latencies, jobs by status, Kubernetes API requests and
//! errors, and the watches' health.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use kubeferry_kube::Executor;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::clusters::ApiStats;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    cluster: String,
    namespace: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    cluster: String,
    verb: String,
    resource: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchLabels {
    cluster: String,
    namespace: String,
    resource: String,
}

fn latency_histogram() -> Histogram {
    // 0.25 ms to about 8 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

/// The service's metrics.
pub struct Metrics {
    registry: Registry,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
    jobs: Family<JobLabels, Gauge>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// One cluster, as seen by the Kubernetes collector.
#[derive(Clone)]
pub struct ClusterSource {
    /// The cluster's name.
    pub name: String,
    /// Its API request counts.
    pub stats: Arc<ApiStats>,
    /// Its executor (for the watches' health).
    pub executor: Executor,
}

impl Metrics {
    /// Metrics for these clusters.
    pub fn new(clusters: Vec<ClusterSource>) -> Self {
        let mut registry = Registry::with_prefix("kubeferry");
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            http_requests.clone(),
        );
        let http_duration: Family<RouteLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "http_request_duration_seconds",
            "Time to answer HTTP requests (to the first byte for streams), by method and route",
            http_duration.clone(),
        );
        let jobs = Family::<JobLabels, Gauge>::default();
        registry.register(
            "jobs",
            "Jobs in the watch caches, by cluster, namespace and state (computed at each scrape)",
            jobs.clone(),
        );
        registry.register_collector(Box::new(KubeCollector { clusters }));
        Self {
            registry,
            http_requests,
            http_duration,
            jobs,
        }
    }

    /// Records one answered HTTP request.
    pub fn observe_request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        self.http_requests
            .get_or_create(&HttpLabels {
                method: method.to_string(),
                route: route.to_string(),
                status,
            })
            .inc();
        self.http_duration
            .get_or_create(&RouteLabels {
                method: method.to_string(),
                route: route.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Sets the jobs by state (container and Spark together) from each executor's counts,
    /// kept as statuses change: a scrape reads them, at the same cost with ten jobs or a
    /// hundred thousand, and asks the API server nothing.
    pub fn refresh_jobs(&self, clusters: &[(String, Executor)]) {
        self.jobs.clear();
        for (cluster, executor) in clusters {
            for (namespace, state, count) in executor.jobs_by_state() {
                self.jobs
                    .get_or_create(&JobLabels {
                        cluster: cluster.clone(),
                        namespace,
                        state: state.as_str().to_string(),
                    })
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
            }
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            let _ = writeln!(text, "# metrics could not be encoded");
        }
        text
    }
}

/// Reads the Kubernetes request counts and the watches' health at each scrape.
struct KubeCollector {
    clusters: Vec<ClusterSource>,
}

impl std::fmt::Debug for KubeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KubeCollector")
    }
}

impl Collector for KubeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut requests = Vec::new();
        let mut errors = Vec::new();
        let mut restarts = Vec::new();
        let mut synced = Vec::new();
        for cluster in &self.clusters {
            for ((kind, answer), count) in cluster.stats.snapshot() {
                let labels = ApiLabels {
                    cluster: cluster.name.clone(),
                    verb: kind.verb.to_string(),
                    resource: kind.resource.clone(),
                    code: answer.map_or_else(|| "none".to_string(), |c| c.to_string()),
                };
                if answer.is_none_or(|code| code >= 400) {
                    errors.push((labels.clone(), count));
                }
                requests.push((labels, count));
            }
            let watches = cluster.executor.health();
            for (namespace, resource, health) in watches {
                let labels = WatchLabels {
                    cluster: cluster.name.clone(),
                    namespace,
                    resource,
                };
                restarts.push((labels.clone(), health.restarts));
                let current = health.synced && health.failing.is_none();
                synced.push((labels, i64::from(current)));
            }
        }
        encode_counters(
            &mut encoder,
            "kubernetes_requests",
            "Kubernetes API requests made, by cluster, verb, resource and HTTP status (none: no response)",
            requests,
        )?;
        encode_counters(
            &mut encoder,
            "kubernetes_request_errors",
            "Kubernetes API requests that failed (status 400 or more, or no response)",
            errors,
        )?;
        encode_counters(
            &mut encoder,
            "watch_restarts",
            "Times a watch failed and was re-established, by cluster, namespace and resource",
            restarts,
        )?;
        let metric = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(
            "watch_synced",
            "1 while a watch is listed and current",
            None,
            metric.metric_type(),
        )?;
        for (labels, value) in synced {
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

fn encode_counters<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: Vec<(L, u64)>,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(0u64);
    let mut family = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    for (labels, value) in values {
        ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}
