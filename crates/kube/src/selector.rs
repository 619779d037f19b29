//! Following which managed jobs of a namespace match a label selector: one label-scoped watch
//! per kind of object (Jobs, each installed operator's SparkApplications), merged into one
//! stream of [`SelectorEvent`]s.

use std::collections::HashSet;
use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kubeferry_core::JobKind;
use kubeferry_core::marks::{MANAGED_SELECTOR, job_id_of};
use serde::de::DeserializeOwned;
use tracing::warn;

use crate::cluster::Cluster;
use crate::error::Result;

/// A change in which managed jobs of a namespace match a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectorEvent {
    /// The job matches: it was listed, appeared, or changed.
    Matches {
        /// Its kind.
        kind: JobKind,
        /// Its object's name.
        name: String,
        /// The caller's job id, as the object carries it.
        job_id: Option<String>,
    },
    /// The job no longer matches: deleted, relabelled, or missing from a relist.
    Left(JobKind, String),
    /// Every job matching at this moment has been reported (after the first list of every
    /// kind, and after each relist).
    Listed,
}

/// The managed selector with the caller's `selector` added.
pub(crate) fn managed(selector: &str) -> String {
    match selector.trim() {
        "" => MANAGED_SELECTOR.to_string(),
        extra => format!("{MANAGED_SELECTOR},{extra}"),
    }
}

/// One watch of the objects of `api` matching `selector` (already including the managed
/// label), relisting on 410 and reconnecting with backoff. A failing watch is retried and
/// logged, not yielded; one refused for lack of permission before it ever listed counts as
/// listed (with nothing).
pub(crate) fn label_watch<K>(
    api: Api<K>,
    kind: JobKind,
    namespace: &str,
    selector: &str,
    watch_timeout: Duration,
) -> impl Stream<Item = SelectorEvent> + Send + 'static + use<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let timeout = u32::try_from(watch_timeout.as_secs()).unwrap_or(290).max(1);
    let config = watcher::Config::default().labels(selector).timeout(timeout);
    let namespace = namespace.to_string();
    let selector = selector.to_string();
    let mut known: HashSet<String> = HashSet::new();
    let mut relisted: Option<HashSet<String>> = None;
    let mut failing = false;
    let mut ever_listed = false;
    watcher(api, config).default_backoff().flat_map(move |event| {
        let name_of = |object: &K| object.meta().name.clone().unwrap_or_default();
        let matches = |object: &K, name: String| SelectorEvent::Matches {
            kind,
            name,
            job_id: job_id_of(object.meta()),
        };
        let events = match event {
            Ok(event) => {
                failing = false;
                match event {
                    watcher::Event::Init => {
                        relisted = Some(HashSet::new());
                        Vec::new()
                    }
                    watcher::Event::InitApply(object) => {
                        let name = name_of(&object);
                        if let Some(seen) = relisted.as_mut() {
                            seen.insert(name.clone());
                        }
                        known.insert(name.clone());
                        vec![matches(&object, name)]
                    }
                    watcher::Event::InitDone => {
                        let seen = relisted.take().unwrap_or_default();
                        let mut events: Vec<SelectorEvent> = known
                            .difference(&seen)
                            .map(|name| SelectorEvent::Left(kind, name.clone()))
                            .collect();
                        known = seen;
                        ever_listed = true;
                        events.push(SelectorEvent::Listed);
                        events
                    }
                    watcher::Event::Apply(object) => {
                        let name = name_of(&object);
                        known.insert(name.clone());
                        vec![matches(&object, name)]
                    }
                    watcher::Event::Delete(object) => {
                        let name = name_of(&object);
                        known.remove(&name);
                        vec![SelectorEvent::Left(kind, name)]
                    }
                }
            }
            Err(error) => {
                if !failing {
                    warn!(message = "selector watch failed; retrying", namespace = %namespace, selector = %selector, %error);
                }
                failing = true;
                // A kind the service may not list (a Role for container jobs only, on a
                // cluster with a Spark operator) has nothing to report: it counts as listed,
                // so that the other kinds' listing is announced.
                if !ever_listed && crate::tracker::refusal_of(&error).is_some() {
                    ever_listed = true;
                    vec![SelectorEvent::Listed]
                } else {
                    Vec::new()
                }
            }
        };
        futures::stream::iter(events)
    })
}

/// The events of several streams as one: `Listed` once every stream has listed (and at each
/// relist of any of them after that). No streams: `Listed` at once.
pub(crate) fn merge(
    streams: Vec<BoxStream<'static, SelectorEvent>>,
) -> impl Stream<Item = SelectorEvent> + Send + 'static {
    let count = streams.len();
    if count == 0 {
        return futures::stream::iter([SelectorEvent::Listed]).boxed();
    }
    let tagged = streams
        .into_iter()
        .enumerate()
        .map(|(index, stream)| stream.map(move |event| (index, event)).boxed());
    let mut listed: HashSet<usize> = HashSet::new();
    futures::stream::select_all(tagged)
        .filter_map(move |(index, event)| {
            let event = match event {
                SelectorEvent::Listed => {
                    let first_of_all = listed.len() < count;
                    listed.insert(index);
                    // Before every stream has listed, only the last one to list says so.
                    (!first_of_all || listed.len() == count).then_some(SelectorEvent::Listed)
                }
                other => Some(other),
            };
            futures::future::ready(event)
        })
        .boxed()
}

/// Follows which managed jobs of `kind` in `namespace` match `selector` (narrowed to
/// kubeferry's own): one watch per API `served` finds the cluster serving (none on a cluster
/// that serves none: the stream then only says it has listed), each request lasting `timeout`.
/// While `served` fails (the API server unreachable, discovery refused), it is asked again
/// with `cluster`'s backoff, each failure logged, and the stream does not report its listing
/// done.
pub(crate) fn after_discovery<K, D, F>(
    (cluster, kind): (Cluster, JobKind),
    namespace: &str,
    selector: &str,
    timeout: Duration,
    served: D,
) -> BoxStream<'static, SelectorEvent>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    D: Fn() -> F + Send + 'static,
    F: Future<Output = Result<Vec<Api<K>>>> + Send,
{
    let (namespace, selector) = (namespace.to_string(), selector.to_string());
    futures::stream::once(async move {
        let mut attempt = 0;
        let apis = loop {
            match served().await {
                Ok(apis) => break apis,
                Err(error) => {
                    let retry = &cluster.settings().retry;
                    let delay = retry.backoff(attempt).max(retry.base);
                    warn!(message = "cannot discover what the cluster serves; trying again", %kind, namespace = %namespace, %error, retry_in = ?delay);
                    tokio::time::sleep(delay).await;
                    attempt = attempt.saturating_add(1);
                }
            }
        };
        let watches = apis
            .into_iter()
            .map(|api| label_watch(api, kind, &namespace, &selector, timeout).boxed());
        merge(watches.collect())
    })
    .flatten()
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn merged_streams_say_listed_once_all_have_listed_then_at_each_relist() {
        let matches = |kind, name: &str| SelectorEvent::Matches {
            kind,
            name: name.to_string(),
            job_id: None,
        };
        let job = |name: &str| matches(JobKind::Job, name);
        let app = |name: &str| matches(JobKind::SparkApp, name);
        let jobs = futures::stream::iter([job("a"), SelectorEvent::Listed]).boxed();
        let apps =
            futures::stream::iter([app("b"), SelectorEvent::Listed, SelectorEvent::Listed]).boxed();
        let events: Vec<SelectorEvent> = merge(vec![jobs, apps]).collect().await;
        let listed = events
            .iter()
            .filter(|e| **e == SelectorEvent::Listed)
            .count();
        assert_eq!(listed, 2, "{events:?}");
        let first_listed = events
            .iter()
            .position(|e| *e == SelectorEvent::Listed)
            .unwrap();
        assert!(events[..first_listed].contains(&job("a")), "{events:?}");
        assert!(events[..first_listed].contains(&app("b")), "{events:?}");
        let none: Vec<SelectorEvent> = merge(Vec::new()).collect().await;
        assert_eq!(none, [SelectorEvent::Listed]);
    }
}
