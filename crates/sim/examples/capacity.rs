//! The simulated cluster's own capacity on this machine, so that benchmarks of kubeferry know it
//! is not the bottleneck: `cargo run --release -p kubeferry-sim --example capacity`.
//!
//! Measures GETs/s and creates/s through kube-rs over HTTPS (16 concurrent clients), watch
//! events/s delivered to 100 watchers, resident memory with 10,000 stored pods, and (in a fresh
//! process, so that its memory is its own) the time and memory to run 10,000 Jobs to completion,
//! each a real process.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kubeferry_sim::{NodeConfig, SimCluster, SimConfig};
use serde_json::json;

const CLIENTS: usize = 16;
const PHASE: Duration = Duration::from_secs(3);
const WATCHERS: usize = 100;
const WATCH_EVENTS: usize = 1_000;
const PODS: usize = 10_000;
const JOBS: usize = 10_000;
/// The argument that makes the process measure the Jobs phase only.
const JOBS_PHASE: &str = "--jobs-phase";

type Error = Box<dyn std::error::Error + Send + Sync>;

async fn client(cluster: &SimCluster) -> Result<kube::Client, Error> {
    let kubeconfig = Kubeconfig::from_yaml(&cluster.kubeconfig_yaml("bench"))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    config.default_retry = false;
    Ok(kube::Client::try_from(config)?)
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .map(|v| v.trim().trim_end_matches("kB").trim().to_string())
            })
        })
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"bench": "yes"}}, "data": {"k": "v"}}))
        .unwrap_or_default()
}

async fn rate<F, Fut>(clients: &[kube::Client], f: F) -> f64
where
    F: Fn(kube::Client, usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let done = done.clone();
        let c = c.clone();
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < PHASE {
                if f(c.clone(), i, n).await {
                    done.fetch_add(1, Ordering::Relaxed);
                }
                n += 1;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn is_complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// Runs `total` Jobs (one pod each, running `true`) to completion on 20 nodes of 500 pods,
/// created by `CLIENTS` clients, and prints the table row: time and resident memory.
async fn jobs_phase(total: usize) -> Result<(), Error> {
    let cluster = SimCluster::start(SimConfig {
        nodes: (1..=20)
            .map(|i| NodeConfig {
                pods: 500,
                cpu: "1000".into(),
                memory: "4Ti".into(),
                ..NodeConfig::named(format!("sim-node-{i}"))
            })
            .collect(),
        ..SimConfig::default()
    })
    .await?;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(client(&cluster).await?);
    }
    let before = rss_bytes();
    let jobs: Api<Job> = Api::namespaced(clients[0].clone(), "default");
    let watch = tokio::spawn(async move {
        let mut complete = std::collections::HashSet::new();
        let mut events = Box::pin(watcher(jobs, watcher::Config::default()));
        while complete.len() < total {
            match events.next().await {
                Some(Ok(watcher::Event::Apply(job) | watcher::Event::InitApply(job)))
                    if is_complete(&job) =>
                {
                    complete.insert(job.metadata.name.unwrap_or_default());
                }
                Some(_) => {}
                None => break,
            }
        }
        complete.len()
    });
    let start = Instant::now();
    let mut makers = Vec::new();
    for (w, c) in clients.iter().enumerate() {
        let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
        makers.push(tokio::spawn(async move {
            let mut i = w;
            while i < total {
                let job: Job = serde_json::from_value(json!({
                    "apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": format!("j-{i}"), "labels": {"app.kubernetes.io/managed-by": "kubeferry"}},
                    "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}]}}}
                }))
?;
                jobs.create(&PostParams::default(), &job).await?;
                i += CLIENTS;
            }
            Ok::<(), Error>(())
        }));
    }
    for m in makers {
        m.await??;
    }
    let created_secs = start.elapsed().as_secs_f64();
    let complete = tokio::time::timeout(Duration::from_secs(1200), watch).await??;
    let secs = start.elapsed().as_secs_f64();
    let after = rss_bytes();
    let peak = peak_rss_bytes();
    println!(
        "| {complete} Jobs run to completion (real processes) | {secs:.1} s ({:.0} Jobs/s; all created after {created_secs:.1} s); resident memory {:.0} MiB after (+{:.0} MiB over the empty cluster, peak {:.0} MiB) |",
        complete as f64 / secs,
        after as f64 / 1048576.0,
        after.saturating_sub(before) as f64 / 1048576.0,
        peak as f64 / 1048576.0,
    );
    cluster.shutdown().await;
    Ok(())
}

fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmHWM:")
                    .map(|v| v.trim().trim_end_matches("kB").trim().to_string())
            })
        })
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    if std::env::args().any(|a| a == JOBS_PHASE) {
        // `--jobs-phase N` runs N Jobs instead.
        let total = std::env::args()
            .skip_while(|a| a != JOBS_PHASE)
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(JOBS);
        return jobs_phase(total).await;
    }
    let cluster = SimCluster::start(SimConfig {
        watch_history: 20_000,
        ..SimConfig::default()
    })
    .await?;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(client(&cluster).await?);
    }
    let admin = clients[0].clone();
    let baseline_rss = rss_bytes();

    // Memory with 10,000 pods (stored, never scheduled: the kubelet would run 10,000 processes).
    let before_pods = baseline_rss;
    let pods_api: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let start = Instant::now();
    let mut makers = Vec::new();
    for (w, c) in clients.iter().enumerate() {
        let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
        makers.push(tokio::spawn(async move {
            let mut i = w;
            while i < PODS {
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("p-{i}"), "labels": {"app.kubernetes.io/managed-by": "kubeferry", "kubeferry.dev/job-id": format!("job-{i}")}},
                    "spec": {"schedulerName": "parked", "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "echo hello"],
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
                }))
?;
                pods.create(&PostParams::default(), &pod).await?;
                i += CLIENTS;
            }
            Ok::<(), Error>(())
        }));
    }
    for m in makers {
        m.await??;
    }
    let pod_create_secs = start.elapsed().as_secs_f64();
    let with_pods = rss_bytes();
    let start = Instant::now();
    let listed = pods_api.list(&ListParams::default()).await?.items.len();
    let list_secs = start.elapsed().as_secs_f64();

    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    cms.create(&PostParams::default(), &cm("target")).await?;
    let gets = rate(&clients, |c, _, _| async move {
        Api::<ConfigMap>::namespaced(c, "default")
            .get("target")
            .await
            .is_ok()
    })
    .await;

    let creates = rate(&clients, |c, i, n| async move {
        Api::<ConfigMap>::namespaced(c, "default")
            .create(&PostParams::default(), &cm(&format!("c-{i}-{n}")))
            .await
            .is_ok()
    })
    .await;

    // Watch fan-out: every watcher must see every event.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fan"}});
    cluster.create("", ns)?;
    let received = Arc::new(AtomicU64::new(0));
    let mut watchers = Vec::new();
    let rv = cluster.resource_version().to_string();
    for i in 0..WATCHERS {
        let api: Api<ConfigMap> = Api::namespaced(clients[i % CLIENTS].clone(), "fan");
        let stream = api
            .watch(&WatchParams::default().disable_bookmarks(), &rv)
            .await?;
        let received = received.clone();
        watchers.push(tokio::spawn(async move {
            let mut stream = Box::pin(stream);
            let mut seen = 0;
            while seen < WATCH_EVENTS {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(_))) => {
                        seen += 1;
                        received.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Ok(_)) => {}
                    _ => return,
                }
            }
        }));
    }
    let fan: Api<ConfigMap> = Api::namespaced(admin.clone(), "fan");
    let start = Instant::now();
    let mut creators = Vec::new();
    for (w, c) in clients.iter().enumerate() {
        let fan: Api<ConfigMap> = Api::namespaced(c.clone(), "fan");
        creators.push(tokio::spawn(async move {
            let mut i = w;
            while i < WATCH_EVENTS {
                let _ = fan
                    .create(&PostParams::default(), &cm(&format!("w-{i}")))
                    .await;
                i += CLIENTS;
            }
        }));
    }
    for c in creators {
        c.await?;
    }
    for w in watchers {
        let _ = tokio::time::timeout(Duration::from_secs(60), w).await;
    }
    let fan_out_secs = start.elapsed().as_secs_f64();
    let delivered = received.load(Ordering::Relaxed);
    let _ = fan.list(&ListParams::default().limit(1)).await?;

    println!(
        "kubeferry-sim capacity (release build, {} cores, kube-rs over HTTPS, {CLIENTS} clients)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("| measure | value |");
    println!("|---|---|");
    println!("| GETs/s (one config map) | {gets:.0} |");
    println!("| creates/s (config maps) | {creates:.0} |");
    println!(
        "| watch events/s delivered to {WATCHERS} watchers ({WATCH_EVENTS} creates each seen by all) | {:.0} ({delivered} events in {fan_out_secs:.2} s) |",
        delivered as f64 / fan_out_secs
    );
    println!(
        "| pod creates/s ({PODS} pods) | {:.0} |",
        PODS as f64 / pod_create_secs
    );
    println!("| LIST of {listed} pods | {:.0} ms |", list_secs * 1000.0);
    println!(
        "| resident memory at start | {:.1} MiB |",
        baseline_rss as f64 / 1048576.0
    );
    println!(
        "| resident memory with {PODS} pods | {:.1} MiB (+{:.1} MiB, {:.1} KiB per pod) |",
        with_pods as f64 / 1048576.0,
        (with_pods.saturating_sub(before_pods)) as f64 / 1048576.0,
        (with_pods.saturating_sub(before_pods)) as f64 / 1024.0 / PODS as f64
    );
    println!(
        "(memory is measured right after the pod creates, before the LIST; client and server share the process, so it includes both, and the watch history of the last {} changes)",
        20_000
    );
    cluster.shutdown().await;
    let jobs = tokio::process::Command::new(std::env::current_exe()?)
        .arg(JOBS_PHASE)
        .output()
        .await?;
    print!("{}", String::from_utf8_lossy(&jobs.stdout));
    if !jobs.status.success() {
        return Err(format!(
            "the Jobs phase failed: {}",
            String::from_utf8_lossy(&jobs.stderr)
        )
        .into());
    }
    Ok(())
}
