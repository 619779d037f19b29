//! The executor: one entry point for every kind of job on one cluster.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use futures::future::BoxFuture;
use kubeferry_core::spec::JobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use rand::Rng;

use crate::cluster::Cluster;
use crate::container::{ContainerJobs, ContainerSettings, SelectorEvent};
use crate::error::{Error, Result};
use crate::jobset::{JobSetSettings, JobSets};
use crate::kind::Shared;
use crate::kind::{Kind, KindHealth};
use crate::kinds::{Entry, Kinds, together};
use crate::logs::{FollowOptions, Tail, TailOptions};
use crate::pod::Pods;
use crate::protocol;
use crate::records::{RecordSettings, Records};
// The reply of `Executor::placement`, also named from here.
pub use crate::replies::Placement;
use crate::replies::{CancelOutcome, Description, DryRun, JobSummary, Orphan, Submission};
use crate::spark::{SparkJobs, SparkSettings};
use crate::tracker::WatchHealth;

/// Settings of every backend.
#[derive(Clone, Debug, Default)]
pub struct ExecutorSettings {
    /// Container jobs.
    pub container: ContainerSettings,
    /// Spark jobs.
    pub spark: SparkSettings,
    /// JobSets.
    pub jobset: JobSetSettings,
    /// The durable outcome records of every kind.
    pub records: RecordSettings,
}

/// The notifications of a namespace's watches ([`Executor::subscribe`]).
pub struct Subscription {
    /// Each watch's notifications, naming the jobs of its kind whose objects changed.
    pub changes: Vec<(JobKind, tokio::sync::broadcast::Receiver<String>)>,
    /// The kinds whose watches are left out, and why (a cluster that cannot run Spark jobs).
    pub refused: Vec<(JobKind, Error)>,
}

/// The health of a namespace's watches ([`Executor::namespace_health`]).
#[derive(Clone, Debug)]
pub struct NamespaceHealth {
    /// Every watch by resource: each kind's in [`JobKind::ALL`]'s order (the container jobs'
    /// Jobs, pods and refusal events first), then the outcome records'.
    pub watches: Vec<(String, WatchHealth)>,
    /// The kinds whose watches have not started yet, and are waited for: they start once the
    /// cluster's resources of the kind are discovered (the Spark operators).
    pub starting: Vec<JobKind>,
}

/// Submits, tracks, cancels and reads the logs of jobs on one cluster.
///
/// Stateless apart from its watch caches: everything it knows lives in Kubernetes, so any number
/// of executors (processes, replicas) can serve the same jobs.
#[derive(Clone)]
pub struct Executor {
    cluster: Cluster,
    kinds: Arc<Kinds>,
    records: Arc<Records>,
    /// How much of its log a job's record keeps when its file does not say.
    keep_log: Option<kubeferry_core::marks::KeepLog>,
}

impl Executor {
    /// An executor for `cluster`.
    pub fn new(cluster: Cluster, settings: ExecutorSettings) -> Self {
        let keep_log = settings.records.keep_log;
        let records = Records::new(
            cluster.clone(),
            settings.container.watching.reflector.clone(),
            settings.records,
            settings.container.watching.sync_timeout,
        );
        let shared = Shared {
            cluster: cluster.clone(),
            records: records.clone(),
        };
        let kinds = Kinds {
            // A bare pod is mapped, named and timed as a container job.
            pod: Pods::new(&shared, settings.container.clone()),
            container: ContainerJobs::new(&shared, settings.container),
            spark: SparkJobs::new(&shared, settings.spark),
            jobset: JobSets::new(&shared, settings.jobset),
        };
        Self {
            cluster,
            kinds: Arc::new(kinds),
            records,
            keep_log,
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The container job backend, whose watch caches the crate's tests look into.
    #[cfg(feature = "internals")]
    pub fn container_jobs(&self) -> &ContainerJobs {
        &self.kinds.container
    }

    /// The Spark job backend, whose watch caches the crate's Spark tests look into.
    #[cfg(feature = "internals")]
    pub fn spark_jobs(&self) -> &SparkJobs {
        &self.kinds.spark
    }

    /// Starts watching the container jobs of `namespace`, if that is not done yet: its first
    /// status query then pays for no list, and its settler looks after its jobs from now on.
    pub fn watch(&self, namespace: &str) {
        self.kinds.container.watch(namespace);
    }

    /// Starts watching the Spark jobs of `namespace` (their driver pods, and the
    /// SparkApplications of every operator the cluster serves, which this discovers).
    pub async fn watch_spark(&self, namespace: &str) -> Result<()> {
        self.kinds.spark.watch(namespace).await.map(|_| ())
    }

    /// Notifications naming the jobs of `namespace` whose objects changed, by kind, starting
    /// the watches if need be; what tells a job's status is [`Executor::status`]. The watches
    /// of a kind the cluster cannot run (Spark jobs without an operator) are left out, and
    /// [`Subscription::refused`] says why.
    pub async fn subscribe(&self, namespace: &str) -> Subscription {
        let mut changes = Vec::new();
        let mut refused = Vec::new();
        for kind in self.kinds.all() {
            match kind.subscribe(namespace).await {
                Ok(receivers) => {
                    changes.extend(receivers.into_iter().map(|r| (kind.job_kind(), r)))
                }
                Err(error) => refused.push((kind.job_kind(), error)),
            }
        }
        // An outcome is answered once it is recorded: a record is a change of its job (of
        // any kind; a name that is not a job of that kind is nobody's).
        let records = self.records.watch(namespace);
        for kind in JobKind::ALL {
            changes.push((kind, records.subscribe()));
        }
        Subscription { changes, refused }
    }

    /// The health of every watch of `namespace`, starting the container watches if need be.
    pub fn namespace_health(&self, namespace: &str) -> NamespaceHealth {
        let mut watches = Vec::new();
        let mut starting = Vec::new();
        for kind in self.kinds.all() {
            match kind.namespace_health(namespace) {
                KindHealth::Started(health) => watches.extend(health),
                KindHealth::Starting => starting.push(kind.job_kind()),
                KindHealth::Unused => {}
            }
        }
        watches.push(self.records.namespace_health(namespace));
        NamespaceHealth { watches, starting }
    }

    /// The health of every watch of every watched namespace: namespace, resource, health.
    pub fn health(&self) -> Vec<(String, String, WatchHealth)> {
        let mut all: Vec<_> = self
            .kinds
            .all()
            .into_iter()
            .flat_map(|kind| kind.health())
            .collect();
        all.extend(self.records.health());
        all
    }

    /// Where a container job's newest attempt runs, from the watch cache (no request); `None`
    /// for a Spark job, or a namespace not watched.
    pub fn placement(&self, id: &ExecutionId) -> Option<Placement> {
        self.kinds.get(id.kind).placement(id)
    }

    /// Checks that an id names this cluster: an id of another cluster is a configuration error,
    /// never "no such job" (callers would settle a running job as failed or cancelled).
    pub fn check(&self, id: &ExecutionId) -> Result<()> {
        if id.cluster != self.cluster.name() {
            return Err(Error::WrongCluster {
                id: id.clone(),
                configured: self.cluster.name().to_string(),
            });
        }
        Ok(())
    }

    /// Submits a job under the caller's `job_id` into `namespace`. The same job id submitted
    /// again (a retry after a lost response, another replica) yields the same execution id and
    /// runs the job once.
    pub async fn submit(
        &self,
        spec: &JobSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<ExecutionId> {
        Ok(self.submit_or_find(spec, job_id, namespace).await?.id)
    }

    /// [`Executor::submit`], saying whether the job id already named a job (running, or ended
    /// with its outcome recorded), in which case nothing was created.
    pub async fn submit_or_find(
        &self,
        spec: &JobSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<Submission> {
        self.kinds
            .submit_or_find(&spec.or_keep_log(self.keep_log), job_id, namespace)
            .await
    }

    /// The objects a submission of `spec` under `job_id` would create, as kubeferry builds
    /// them ([`DryRun::Client`]) or as the API server would store them ([`DryRun::Server`]):
    /// nothing is created, no outcome record is read and no watch starts. The server's
    /// refusal (its validation, an admission webhook, a quota) is the error.
    pub async fn dry_run(
        &self,
        spec: &JobSpec,
        job_id: &str,
        namespace: &str,
        mode: DryRun,
    ) -> Result<Vec<serde_json::Value>> {
        let object = self
            .kinds
            .dry_run(&spec.or_keep_log(self.keep_log), job_id, namespace, mode)
            .await?;
        Ok(vec![object])
    }

    /// The job's whole story: its status, what happened to it in time order (from its object,
    /// its pods' ends and their events, or once they are gone from its outcome record), where
    /// its time went and what to do about how it ended. A handful of reads; writes nothing.
    pub async fn describe(&self, id: &ExecutionId) -> Result<Description> {
        self.check(id)?;
        self.kinds.get(id.kind).describe(id).await
    }

    /// The job's status.
    pub async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        self.check(id)?;
        self.kinds.get(id.kind).status(id).await
    }

    /// Waits for the job to end (at most `timeout`), calling `on_change` with each new status.
    /// Costs no API requests while the namespace's watches are healthy.
    pub async fn wait(
        &self,
        id: &ExecutionId,
        timeout: Option<Duration>,
        on_change: impl FnMut(&ExecutionInfo),
    ) -> Result<ExecutionInfo> {
        self.check(id)?;
        wait(self.kinds.get(id.kind), id, timeout, on_change).await
    }

    /// Cancels the job; returns at once. A job that already ended keeps its outcome; the cancel
    /// mark goes on with a resourceVersion precondition (so an outcome reached meanwhile is
    /// seen, not overwritten), then the object is deleted with its pods.
    /// The job's mark and outcome record name who asked: the user this process runs as and
    /// its host ([`Executor::cancel_for`] names a caller).
    pub async fn cancel(&self, id: &ExecutionId) -> Result<CancelOutcome> {
        self.cancel_as(id, &crate::records::requester(None)).await
    }

    /// [`Executor::cancel`] on behalf of `caller` (a service's word for whom it acts, such as
    /// `token ci-bot`), named with this host in the job's mark and outcome record.
    pub async fn cancel_for(&self, id: &ExecutionId, caller: &str) -> Result<CancelOutcome> {
        self.cancel_as(id, &crate::records::requester(Some(caller)))
            .await
    }

    async fn cancel_as(&self, id: &ExecutionId, requester: &str) -> Result<CancelOutcome> {
        self.check(id)?;
        self.kinds.get(id.kind).cancel(id, requester).await
    }

    /// The end of the job's log: the newest attempt's main container (a Spark job's driver
    /// container, a JobSet's first replicated job's Job 0), or with `previous` the attempt
    /// before it; a Spark driver's log is readable as long as its pod is kept. Never silently
    /// empty: without a log, the warning says why, and once the pods are gone the log is the
    /// last words kept with the job's outcome.
    pub async fn tail(&self, id: &ExecutionId, options: &TailOptions) -> Result<Tail> {
        self.check(id)?;
        self.kinds.get(id.kind).tail(id, options).await
    }

    /// Follows the job's log, attempt after attempt, until the job ends.
    pub fn follow(
        &self,
        id: &ExecutionId,
        options: FollowOptions,
    ) -> Result<impl Stream<Item = Result<String>> + Send + 'static> {
        self.check(id)?;
        Ok(self.kinds.get(id.kind).follow(id, options))
    }

    /// How many jobs of each watched namespace are in each state (every kind together, every
    /// state, zeros included), counted as their statuses change: reading it costs the same
    /// with ten jobs or a hundred thousand, and no API request.
    pub fn jobs_by_state(&self) -> Vec<(String, JobState, usize)> {
        let mut counts: std::collections::BTreeMap<String, [usize; JobState::ALL.len()]> =
            std::collections::BTreeMap::new();
        for (namespace, state, count) in self
            .kinds
            .all()
            .into_iter()
            .flat_map(|kind| kind.jobs_by_state())
        {
            let slot = JobState::ALL.iter().position(|s| *s == state).unwrap_or(0);
            counts.entry(namespace).or_default()[slot] += count;
        }
        counts
            .into_iter()
            .flat_map(|(namespace, by_state)| {
                JobState::ALL
                    .iter()
                    .zip(by_state)
                    .map(move |(state, count)| (namespace.clone(), *state, count))
            })
            .collect()
    }

    /// `each` of every kind, their results together ([`together`]): a kind kubeferry may
    /// not read here is left out with a warning.
    async fn every_kind<'a, T>(
        &'a self,
        what: &str,
        each: impl Fn(&'a dyn Entry) -> BoxFuture<'a, Result<Vec<T>>>,
    ) -> Result<Vec<T>> {
        let mut results = Vec::new();
        for kind in self.kinds.all() {
            results.push((kind, each(kind).await));
        }
        // Whether each kind is served matters only beside a refusal (and costs a discovery).
        let refused = results
            .iter()
            .any(|(_, result)| matches!(result, Err(Error::Forbidden { .. })));
        let mut tagged = Vec::new();
        for (kind, result) in results {
            let served = refused && kind.served().await;
            tagged.push((kind.job_kind(), served, result));
        }
        together(tagged, what)
    }

    /// The managed jobs of a namespace, of every kind, oldest first. A kind kubeferry may not
    /// list here (its Role grants only the other kinds) is left out with a warning.
    pub async fn list(&self, namespace: &str, selector: Option<&str>) -> Result<Vec<JobSummary>> {
        let jobs = self
            .every_kind("jobs not listed", |kind| {
                kind.list(Some(namespace), selector)
            })
            .await?;
        self.with_recorded(jobs, Some(namespace), selector).await
    }

    /// The managed jobs of every namespace, of every kind, oldest first (as
    /// [`Executor::list`], with cluster-wide lists: kubeferry needs to be allowed to list jobs
    /// and pods in every namespace).
    pub async fn list_all_namespaces(&self, selector: Option<&str>) -> Result<Vec<JobSummary>> {
        let jobs = self
            .every_kind("jobs not listed", |kind| kind.list(None, selector))
            .await?;
        self.with_recorded(jobs, None, selector).await
    }

    /// The listed jobs with those known only from their outcome records (their objects gone:
    /// cancelled, deleted, expired after their TTL), within the records' retention, oldest
    /// first. A record keeps the job id's label and no other: a label selector finds a job
    /// whose objects are gone only by its job id.
    async fn with_recorded(
        &self,
        mut jobs: Vec<JobSummary>,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<JobSummary>> {
        let listed: HashSet<ExecutionId> = jobs.iter().map(|job| job.id.clone()).collect();
        for (namespace, record) in self.records.listed(namespace, selector).await? {
            let id = ExecutionId::new(self.cluster.name(), record.kind, &namespace, &record.object);
            if listed.contains(&id) {
                continue;
            }
            jobs.push(JobSummary {
                id,
                job_id: record.job_id,
                created_at: record.created_at,
                status: record.outcome,
                pod: None,
                node: None,
                attempts: 0,
            });
        }
        jobs.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(jobs)
    }

    /// The jobs of a namespace submitted under the caller's `job_id`, of every kind: the
    /// objects that carry it (found by its `kubeferry.dev/job-id` label, and checked against
    /// the full job id they carry), else the run whose outcome is recorded under the name the
    /// job id gives (its object may be gone). Usually one; empty when the job id names no job
    /// here.
    pub async fn find_by_job_id(&self, namespace: &str, job_id: &str) -> Result<Vec<JobSummary>> {
        let selector = format!(
            "{}={}",
            kubeferry_core::marks::JOB_ID_LABEL,
            kubeferry_core::marks::job_id_label_value(job_id)
        );
        let mut jobs = self.list(namespace, Some(&selector)).await?;
        jobs.retain(|job| job.job_id.as_deref() == Some(job_id));
        if !jobs.is_empty() {
            return Ok(jobs);
        }
        // No object carries it: a run whose object is gone answers from its outcome record.
        for kind in self.kinds.all() {
            for name in kind.object_names(job_id) {
                let id = ExecutionId::new(self.cluster.name(), kind.job_kind(), namespace, name);
                match self.status(&id).await {
                    Ok(status) => jobs.push(JobSummary {
                        id,
                        job_id: Some(job_id.to_string()),
                        created_at: None,
                        status,
                        pod: None,
                        node: None,
                        attempts: 0,
                    }),
                    Err(error) if error.is_no_such_job() => {}
                    // A kind this cluster does not serve (or kubeferry may not read) holds
                    // no job of it.
                    Err(
                        Error::Forbidden { .. }
                        | Error::SparkUnavailable { .. }
                        | Error::JobSetUnavailable { .. },
                    ) => {}
                    Err(error) if error.is_not_found() => {}
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(jobs)
    }

    /// Follows which managed jobs of a namespace, of every kind, match a label selector (each
    /// kind's `matching`); `Listed` comes once every kind has listed.
    pub fn matching(
        &self,
        namespace: &str,
        selector: &str,
    ) -> impl Stream<Item = SelectorEvent> + Send + 'static {
        crate::selector::merge(
            self.kinds
                .all()
                .into_iter()
                .map(|kind| kind.matching(namespace, selector))
                .collect(),
        )
    }

    /// Managed jobs of a namespace whose job ids are not in `known`; deleted when `delete`. A
    /// kind kubeferry may not list here is left out with a warning.
    pub async fn sweep(
        &self,
        namespace: &str,
        known: &HashSet<String>,
        delete: bool,
    ) -> Result<Vec<Orphan>> {
        // Outcome records are not orphans: they are bounded, and expire after their retention.
        self.every_kind("jobs not swept", |kind| {
            kind.sweep(namespace, known, delete)
        })
        .await
    }

    /// Lets go of every object of `namespace` that kubeferry's finalizer holds until its
    /// outcome is recorded, whatever its job id, and answers their execution ids: the step
    /// before uninstalling kubeferry (docs/INVARIANTS.md). An object let go before its outcome
    /// was recorded keeps the guarantees of Kubernetes alone: deleted, it is gone.
    pub async fn release_all(&self, namespace: &str) -> Result<Vec<ExecutionId>> {
        self.every_kind("jobs not released", |kind| kind.release_all(namespace))
            .await
    }
}

/// A fresh job id for a job named `name`: the name and 8 random characters. Generated once per
/// submission and reused on every retry of it.
pub fn generate_job_id(name: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let suffix: String = (0..8)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{name}-{suffix}")
}

/// Waits for the job to end, calling `on_change` with each new status. Costs no API requests
/// while the watches are healthy: changes come from them.
async fn wait(
    jobs: &dyn Entry,
    id: &ExecutionId,
    timeout: Option<Duration>,
    mut on_change: impl FnMut(&ExecutionInfo),
) -> Result<ExecutionInfo> {
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut changes = jobs.changes(id).await?;
    let mut last: Option<ExecutionInfo> = None;
    loop {
        let info = jobs.status(id).await?;
        if last.as_ref() != Some(&info) {
            on_change(&info);
            last = Some(info.clone());
        }
        if info.is_terminal() {
            return Ok(info);
        }
        let until_deadline = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = protocol::any_changed(&mut changes, &id.name) => {}
            _ = tokio::time::sleep(jobs.recheck_interval()) => {}
            _ = until_deadline => {
                return Err(Error::WaitTimeout {
                    id: id.clone(),
                    after: timeout.unwrap_or_default(),
                    state: info.state,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_are_fresh_and_named() {
        let a = generate_job_id("hello");
        let b = generate_job_id("hello");
        assert!(a.starts_with("hello-") && a.len() == "hello-".len() + 8);
        assert_ne!(a, b);
    }
}
