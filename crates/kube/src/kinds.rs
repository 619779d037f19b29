//! The table of kinds: every kind of job behind one object-safe face, registered in one place
//! (as Kueue's `RegisterIntegration` does), so that the executor writes each operation once,
//! as a lookup by `JobKind` or a loop over the table.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kubeferry_core::spec::JobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use tokio::sync::broadcast;
use tracing::warn;

use crate::container::ContainerJobs;
use crate::error::{Error, Result};
use crate::jobset::JobSets;
use crate::kind::{Answers, KindHealth, Watches};
use crate::logs::{FollowOptions, Tail, TailOptions};
use crate::pod::Pods;
use crate::protocol;
use crate::replies::Placement;
use crate::replies::{CancelOutcome, Description, DryRun, JobSummary, Orphan, Submission};
use crate::selector::SelectorEvent;
use crate::spark::SparkJobs;
use crate::tracker::WatchHealth;

/// What the executor asks of a kind, whichever it is: the operations written once over
/// [`Answers`] (`protocol.rs`, `describe.rs`), with their futures boxed.
pub(crate) trait Entry: Send + Sync {
    /// The kind, as execution ids name it.
    fn job_kind(&self) -> JobKind;

    fn status<'a>(&'a self, id: &'a ExecutionId) -> BoxFuture<'a, Result<ExecutionInfo>>;

    fn describe<'a>(&'a self, id: &'a ExecutionId) -> BoxFuture<'a, Result<Description>>;

    /// Notifications naming the jobs of `id`'s namespace that changed, and how often a
    /// waiter looks again when nothing changes.
    fn changes<'a>(
        &'a self,
        id: &'a ExecutionId,
    ) -> BoxFuture<'a, Result<Vec<broadcast::Receiver<String>>>>;

    fn recheck_interval(&self) -> Duration;

    fn cancel<'a>(
        &'a self,
        id: &'a ExecutionId,
        requester: &'a str,
    ) -> BoxFuture<'a, Result<CancelOutcome>>;

    fn tail<'a>(
        &'a self,
        id: &'a ExecutionId,
        options: &'a TailOptions,
    ) -> BoxFuture<'a, Result<Tail>>;

    fn follow(
        &self,
        id: &ExecutionId,
        options: FollowOptions,
    ) -> BoxStream<'static, Result<String>>;

    fn list<'a>(
        &'a self,
        namespace: Option<&'a str>,
        selector: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<JobSummary>>>;

    /// Whether the cluster serves the kind (so that a list of it asked the server).
    fn served(&self) -> BoxFuture<'_, bool>;

    fn sweep<'a>(
        &'a self,
        namespace: &'a str,
        known: &'a HashSet<String>,
        delete: bool,
    ) -> BoxFuture<'a, Result<Vec<Orphan>>>;

    fn release_all<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<Vec<ExecutionId>>>;

    fn matching(&self, namespace: &str, selector: &str) -> BoxStream<'static, SelectorEvent>;

    fn object_names(&self, job_id: &str) -> Vec<String>;

    fn jobs_by_state(&self) -> Vec<(String, JobState, usize)>;

    /// The health of every watch of every watched namespace: namespace, resource, health.
    fn health(&self) -> Vec<(String, String, WatchHealth)>;

    /// The health of `namespace`'s watches.
    fn namespace_health(&self, namespace: &str) -> KindHealth;

    /// A subscriber's notifications for `namespace`, its watches started if need be; none
    /// on a cluster that does not serve the kind.
    fn subscribe<'a>(
        &'a self,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<broadcast::Receiver<String>>>>;

    fn placement(&self, id: &ExecutionId) -> Option<Placement>;
}

impl<K: Answers> Entry for Arc<K> {
    fn job_kind(&self) -> JobKind {
        K::JOB_KIND
    }

    fn status<'a>(&'a self, id: &'a ExecutionId) -> BoxFuture<'a, Result<ExecutionInfo>> {
        Answers::status(&**self, id).boxed()
    }

    fn describe<'a>(&'a self, id: &'a ExecutionId) -> BoxFuture<'a, Result<Description>> {
        crate::describe::describe(&**self, id).boxed()
    }

    fn changes<'a>(
        &'a self,
        id: &'a ExecutionId,
    ) -> BoxFuture<'a, Result<Vec<broadcast::Receiver<String>>>> {
        crate::kind::Kind::changes(&**self, id).boxed()
    }

    fn recheck_interval(&self) -> Duration {
        crate::kind::Kind::recheck_interval(&**self)
    }

    fn cancel<'a>(
        &'a self,
        id: &'a ExecutionId,
        requester: &'a str,
    ) -> BoxFuture<'a, Result<CancelOutcome>> {
        protocol::cancel(&**self, id, requester).boxed()
    }

    fn tail<'a>(
        &'a self,
        id: &'a ExecutionId,
        options: &'a TailOptions,
    ) -> BoxFuture<'a, Result<Tail>> {
        async move {
            // The last words are the job's own: its log when the caller chose no part of it.
            let whole_job = options.index.is_none() && options.replica.is_none();
            let (replica, index) = self
                .log_part(id, options.replica.clone(), options.index)
                .await?;
            let options = TailOptions {
                replica,
                index,
                ..options.clone()
            };
            protocol::tail(&**self, id, &options, whole_job).await
        }
        .boxed()
    }

    fn follow(
        &self,
        id: &ExecutionId,
        options: FollowOptions,
    ) -> BoxStream<'static, Result<String>> {
        let whole_job = options.index.is_none() && options.replica.is_none();
        let (jobs, id) = (self.clone(), id.clone());
        futures::stream::once(async move {
            match jobs
                .log_part(&id, options.replica.clone(), options.index)
                .await
            {
                Ok((replica, index)) => {
                    let options = FollowOptions {
                        replica,
                        index,
                        ..options
                    };
                    protocol::follow(jobs, id, options, whole_job).boxed()
                }
                Err(error) => futures::stream::once(async { Err(error) }).boxed(),
            }
        })
        .flatten()
        .boxed()
    }

    fn list<'a>(
        &'a self,
        namespace: Option<&'a str>,
        selector: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<JobSummary>>> {
        protocol::list(&**self, namespace, selector).boxed()
    }

    fn served(&self) -> BoxFuture<'_, bool> {
        crate::kind::Kind::served(&**self).boxed()
    }

    fn sweep<'a>(
        &'a self,
        namespace: &'a str,
        known: &'a HashSet<String>,
        delete: bool,
    ) -> BoxFuture<'a, Result<Vec<Orphan>>> {
        protocol::sweep(&**self, namespace, known, delete).boxed()
    }

    fn release_all<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<Vec<ExecutionId>>> {
        protocol::release_all(&**self, namespace).boxed()
    }

    fn matching(&self, namespace: &str, selector: &str) -> BoxStream<'static, SelectorEvent> {
        crate::kind::Kind::matching(self, namespace, selector)
    }

    fn object_names(&self, job_id: &str) -> Vec<String> {
        crate::kind::Kind::object_names(&**self, job_id)
    }

    fn jobs_by_state(&self) -> Vec<(String, JobState, usize)> {
        Answers::jobs_by_state(&**self)
    }

    fn health(&self) -> Vec<(String, String, WatchHealth)> {
        crate::kind::Kind::namespaces(&**self)
            .watched()
            .into_iter()
            .flat_map(|(namespace, watch)| {
                watch
                    .health()
                    .into_iter()
                    .map(move |(resource, health)| (namespace.clone(), resource, health))
            })
            .collect()
    }

    fn namespace_health(&self, namespace: &str) -> KindHealth {
        crate::kind::Kind::namespace_health(&**self, namespace)
    }

    fn subscribe<'a>(
        &'a self,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<broadcast::Receiver<String>>>> {
        async move {
            Ok(crate::kind::Kind::subscribed(&**self, namespace)
                .await?
                .map(|watch| watch.subscribe())
                .unwrap_or_default())
        }
        .boxed()
    }

    fn placement(&self, id: &ExecutionId) -> Option<Placement> {
        crate::kind::Kind::placement(&**self, id)
    }
}

/// Every kind of job of one cluster: the one place that names each.
pub(crate) struct Kinds {
    pub(crate) container: Arc<ContainerJobs>,
    pub(crate) spark: Arc<SparkJobs>,
    pub(crate) jobset: Arc<JobSets>,
    pub(crate) pod: Arc<Pods>,
}

impl Kinds {
    /// The kind `kind`.
    pub(crate) fn get(&self, kind: JobKind) -> &dyn Entry {
        match kind {
            JobKind::Job => &self.container,
            JobKind::SparkApp => &self.spark,
            JobKind::JobSet => &self.jobset,
            JobKind::Pod => &self.pod,
        }
    }

    /// Every kind, in [`JobKind::ALL`]'s order.
    pub(crate) fn all(&self) -> [&dyn Entry; JobKind::ALL.len()] {
        JobKind::ALL.map(|kind| self.get(kind))
    }

    /// Submits `spec` as its kind does ([`crate::Executor::submit_or_find`]).
    pub(crate) async fn submit_or_find(
        &self,
        spec: &JobSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<Submission> {
        match spec {
            JobSpec::Container(spec) => {
                self.container.submit_or_find(spec, job_id, namespace).await
            }
            JobSpec::Spark(spec) => self.spark.submit_or_find(spec, job_id, namespace).await,
            JobSpec::JobSet(spec) => self.jobset.submit_or_find(spec, job_id, namespace).await,
            JobSpec::Pod(spec) => self.pod.submit_or_find(spec, job_id, namespace).await,
        }
    }

    /// The object `spec` would be created as ([`crate::Executor::dry_run`]).
    pub(crate) async fn dry_run(
        &self,
        spec: &JobSpec,
        job_id: &str,
        namespace: &str,
        mode: DryRun,
    ) -> Result<serde_json::Value> {
        match spec {
            JobSpec::Container(spec) => self.container.dry_run(spec, job_id, namespace, mode).await,
            JobSpec::Spark(spec) => self.spark.dry_run(spec, job_id, namespace, mode).await,
            JobSpec::JobSet(spec) => self.jobset.dry_run(spec, job_id, namespace, mode).await,
            JobSpec::Pod(spec) => self.pod.dry_run(spec, job_id, namespace, mode).await,
        }
    }
}

/// Every kind's results together (each tagged with its kind, and whether the cluster serves
/// it). An error other than a refusal is the answer (the first one). A kind kubeferry may not
/// read is left out with a warning while a kind the cluster serves answered; a kind it does not
/// serve asked the server nothing, and its empty answer must not stand in for a refused one:
/// then the first refusal is the answer.
pub(crate) fn together<T>(
    results: Vec<(JobKind, bool, Result<Vec<T>>)>,
    what: &str,
) -> Result<Vec<T>> {
    let answered = results
        .iter()
        .any(|(_, served, result)| *served && result.is_ok());
    let mut all = Vec::new();
    let mut refused = Vec::new();
    for (kind, _, result) in results {
        match result {
            Ok(items) => all.extend(items),
            Err(error @ Error::Forbidden { .. }) => refused.push((kind, error)),
            Err(error) => return Err(error),
        }
    }
    if !answered && !refused.is_empty() {
        return Err(refused.swap_remove(0).1);
    }
    for (kind, error) in refused {
        warn!(message = what, kind = %kind, %error);
    }
    Ok(all)
}

#[cfg(test)]
mod tests;
