//! The executor: one entry point for every kind of job on one cluster.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kubeferry_core::spec::JobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use rand::Rng;
use tracing::warn;

use crate::cluster::Cluster;
use crate::container::{ContainerJobs, ContainerSettings, SelectorEvent};
use crate::error::{Error, Result};
use crate::jobset::{JobSetSettings, JobSets};
use crate::kind::{Answers, Kind, Watches};
use crate::logs::{FollowOptions, Tail, TailOptions};
use crate::protocol;
use crate::records::{RecordSettings, Records};
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
    /// Why the Spark watches are left out (a cluster that cannot run Spark jobs), if they are.
    pub spark_refused: Option<Error>,
}

/// The health of a namespace's watches ([`Executor::namespace_health`]).
#[derive(Clone, Debug)]
pub struct NamespaceHealth {
    /// Every watch by resource: the container jobs' Jobs, pods and refusal events, the outcome
    /// records, then the Spark driver pods and each operator's applications, then JobSets.
    pub watches: Vec<(String, WatchHealth)>,
    /// Whether the Spark watches have started (they start once the operators are discovered).
    pub spark_started: bool,
}

/// Where a container job's newest attempt runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The newest attempt's pod.
    pub pod: String,
    /// The node it was scheduled to, once it was.
    pub node: Option<String>,
    /// How many attempts' pods exist.
    pub attempts: usize,
}

/// Submits, tracks, cancels and reads the logs of jobs on one cluster.
///
/// Stateless apart from its watch caches: everything it knows lives in Kubernetes, so any number
/// of executors (processes, replicas) can serve the same jobs.
#[derive(Clone)]
pub struct Executor {
    cluster: Cluster,
    container: Arc<ContainerJobs>,
    spark: Arc<SparkJobs>,
    jobset: Arc<JobSets>,
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
            settings.container.reflector.clone(),
            settings.records,
            settings.container.sync_timeout,
        );
        let container = Arc::new(ContainerJobs::new(
            cluster.clone(),
            settings.container,
            records.clone(),
        ));
        let spark = SparkJobs::new(cluster.clone(), settings.spark, records.clone());
        let jobset = JobSets::new(cluster.clone(), settings.jobset, records.clone());
        Self {
            cluster,
            container,
            spark,
            jobset,
            records,
            keep_log,
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The container job backend.
    #[cfg(feature = "internals")]
    pub fn container_jobs(&self) -> &ContainerJobs {
        &self.container
    }

    /// The Spark job backend.
    #[cfg(feature = "internals")]
    pub fn spark_jobs(&self) -> &SparkJobs {
        &self.spark
    }

    /// The JobSet backend.
    #[cfg(feature = "internals")]
    pub fn jobsets(&self) -> &JobSets {
        &self.jobset
    }

    /// Starts watching the container jobs of `namespace`, if that is not done yet: its first
    /// status query then pays for no list, and its settler looks after its jobs from now on.
    pub fn watch(&self, namespace: &str) {
        self.container.watch(namespace);
    }

    /// Starts watching the Spark jobs of `namespace` (their driver pods, and the
    /// SparkApplications of every operator the cluster serves, which this discovers).
    pub async fn watch_spark(&self, namespace: &str) -> Result<()> {
        self.spark.watch(namespace).await.map(|_| ())
    }

    /// Notifications naming the jobs of `namespace` whose objects changed, by kind, starting
    /// the watches if need be; what tells a job's status is [`Executor::status`]. The Spark
    /// watches of a cluster that cannot run Spark jobs are left out, and
    /// [`Subscription::spark_refused`] says why.
    pub async fn subscribe(&self, namespace: &str) -> Subscription {
        let mut receivers: Vec<_> = self
            .container
            .watch(namespace)
            .subscribe()
            .into_iter()
            .map(|receiver| (JobKind::Job, receiver))
            .collect();
        // An outcome is answered once it is recorded: a record is a change of its job (of
        // either kind; a name that is not a job of that kind is nobody's).
        let records = self.records.watch(namespace);
        for kind in JobKind::ALL {
            receivers.push((kind, records.subscribe()));
        }
        // The JobSets' watches, on a cluster that serves them.
        if self.jobset.installed().await.unwrap_or(false)
            && let Ok(watch) = self.jobset.watch(namespace).await
        {
            receivers.extend(
                watch
                    .subscribe()
                    .into_iter()
                    .map(|receiver| (JobKind::JobSet, receiver)),
            );
        }
        match self.spark.watch(namespace).await {
            Ok(watch) => {
                receivers.extend(
                    watch
                        .subscribe()
                        .into_iter()
                        .map(|receiver| (JobKind::SparkApp, receiver)),
                );
                Subscription {
                    changes: receivers,
                    spark_refused: None,
                }
            }
            Err(error) => Subscription {
                changes: receivers,
                spark_refused: Some(error),
            },
        }
    }

    /// The health of every watch of `namespace`, starting the container watches if need be.
    pub fn namespace_health(&self, namespace: &str) -> NamespaceHealth {
        let mut watches = self.container.watch(namespace).health();
        watches.push(self.records.namespace_health(namespace));
        let spark = self.spark.existing(namespace);
        if let Some(spark) = &spark {
            watches.extend(spark.health());
        }
        if let Some(jobset) = self.jobset.existing(namespace) {
            watches.extend(jobset.health());
        }
        NamespaceHealth {
            watches,
            spark_started: spark.is_some(),
        }
    }

    /// The health of every watch of every watched namespace: namespace, resource, health.
    pub fn health(&self) -> Vec<(String, String, WatchHealth)> {
        let mut all = health_of(&*self.container);
        all.extend(health_of(&*self.spark));
        all.extend(health_of(&*self.jobset));
        all.extend(self.records.health());
        all
    }

    /// Where a container job's newest attempt runs, from the watch cache (no request); `None`
    /// for a Spark job, or a namespace not watched.
    pub fn placement(&self, id: &ExecutionId) -> Option<Placement> {
        if id.kind != JobKind::Job {
            return None;
        }
        let watch = self.container.existing(&id.namespace)?;
        let mut pods = watch.live_pods_of(&id.name);
        pods.sort_by(kubeferry_core::container::oldest_attempt_first);
        let attempts = pods.len();
        let pod = pods.pop()?;
        Some(Placement {
            pod: pod.name.clone(),
            node: pod.node_name,
            attempts,
        })
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
        match &spec.or_keep_log(self.keep_log) {
            JobSpec::Container(spec) => {
                self.container.submit_or_find(spec, job_id, namespace).await
            }
            JobSpec::Spark(spec) => self.spark.submit_or_find(spec, job_id, namespace).await,
            JobSpec::JobSet(spec) => self.jobset.submit_or_find(spec, job_id, namespace).await,
        }
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
        let object = match &spec.or_keep_log(self.keep_log) {
            JobSpec::Container(spec) => {
                self.container
                    .dry_run(spec, job_id, namespace, mode)
                    .await?
            }
            JobSpec::Spark(spec) => self.spark.dry_run(spec, job_id, namespace, mode).await?,
            JobSpec::JobSet(spec) => self.jobset.dry_run(spec, job_id, namespace, mode).await?,
        };
        Ok(vec![object])
    }

    /// The job's whole story: its status, what happened to it in time order (from its object,
    /// its pods' ends and their events, or once they are gone from its outcome record), where
    /// its time went and what to do about how it ended. A handful of reads; writes nothing.
    pub async fn describe(&self, id: &ExecutionId) -> Result<Description> {
        self.check(id)?;
        match id.kind {
            JobKind::Job => crate::describe::describe(&*self.container, id).await,
            JobKind::SparkApp => crate::describe::describe(&*self.spark, id).await,
            JobKind::JobSet => crate::describe::describe(&*self.jobset, id).await,
        }
    }

    /// The job's status.
    pub async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        self.check(id)?;
        match id.kind {
            JobKind::Job => self.container.status(id).await,
            JobKind::SparkApp => self.spark.status(id).await,
            JobKind::JobSet => self.jobset.status(id).await,
        }
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
        match id.kind {
            JobKind::Job => protocol::wait(&*self.container, id, timeout, on_change).await,
            JobKind::SparkApp => protocol::wait(&*self.spark, id, timeout, on_change).await,
            JobKind::JobSet => protocol::wait(&*self.jobset, id, timeout, on_change).await,
        }
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
        match id.kind {
            JobKind::Job => protocol::cancel(&*self.container, id, requester).await,
            JobKind::SparkApp => protocol::cancel(&*self.spark, id, requester).await,
            JobKind::JobSet => protocol::cancel(&*self.jobset, id, requester).await,
        }
    }

    /// The end of the job's log: the newest attempt's main container (a Spark job's driver
    /// container), or with `previous` the attempt before it; a Spark driver's log is readable
    /// as long as its pod is kept. Never silently empty: without a log, the warning says why,
    /// and once the pods are gone the log is the last words kept with the job's outcome.
    pub async fn tail(&self, id: &ExecutionId, options: &TailOptions) -> Result<Tail> {
        self.check(id)?;
        // The last words are the job's own: its log when the caller chose no part of it.
        let whole_job = options.index.is_none() && options.replica.is_none();
        match id.kind {
            JobKind::Job => protocol::tail(&*self.container, id, options, whole_job).await,
            JobKind::SparkApp => protocol::tail(&*self.spark, id, options, whole_job).await,
            JobKind::JobSet => {
                let options = self.jobset_log_defaults(id, options.clone()).await?;
                protocol::tail(&*self.jobset, id, &options, whole_job).await
            }
        }
    }

    /// Follows the job's log, attempt after attempt, until the job ends.
    pub fn follow(
        &self,
        id: &ExecutionId,
        options: FollowOptions,
    ) -> Result<impl Stream<Item = Result<String>> + Send + 'static> {
        self.check(id)?;
        let whole_job = options.index.is_none() && options.replica.is_none();
        Ok(match id.kind {
            JobKind::Job => {
                protocol::follow(self.container.clone(), id.clone(), options, whole_job).boxed()
            }
            JobKind::SparkApp => {
                protocol::follow(self.spark.clone(), id.clone(), options, whole_job).boxed()
            }
            JobKind::JobSet => {
                let jobsets = self.jobset.clone();
                let id = id.clone();
                futures::stream::once(async move {
                    let (replica, index) =
                        match log_defaults(&jobsets, &id, options.replica.clone(), options.index)
                            .await
                        {
                            Ok(defaults) => defaults,
                            Err(error) => {
                                return futures::stream::once(async { Err(error) }).boxed();
                            }
                        };
                    let options = FollowOptions {
                        replica,
                        index,
                        ..options
                    };
                    protocol::follow(jobsets, id, options, whole_job).boxed()
                })
                .flatten()
                .boxed()
            }
        })
    }

    /// A JobSet's log options with their defaults: the first replicated job, its Job 0.
    async fn jobset_log_defaults(
        &self,
        id: &ExecutionId,
        options: TailOptions,
    ) -> Result<TailOptions> {
        let (replica, index) =
            log_defaults(&self.jobset, id, options.replica.clone(), options.index).await?;
        Ok(TailOptions {
            replica,
            index,
            ..options
        })
    }

    /// How many jobs of each watched namespace are in each state (every kind together, every
    /// state, zeros included), counted as their statuses change: reading it costs the same
    /// with ten jobs or a hundred thousand, and no API request.
    pub fn jobs_by_state(&self) -> Vec<(String, JobState, usize)> {
        let mut counts: std::collections::BTreeMap<String, [usize; JobState::ALL.len()]> =
            std::collections::BTreeMap::new();
        for (namespace, state, count) in Answers::jobs_by_state(&*self.container)
            .into_iter()
            .chain(Answers::jobs_by_state(&*self.spark))
            .chain(Answers::jobs_by_state(&*self.jobset))
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

    /// The managed jobs of a namespace, of every kind, oldest first. A kind kubeferry may not
    /// list here (its Role grants only the other kind) is left out with a warning.
    pub async fn list(&self, namespace: &str, selector: Option<&str>) -> Result<Vec<JobSummary>> {
        let container = protocol::list(&*self.container, Some(namespace), selector).await;
        let spark = protocol::list(&*self.spark, Some(namespace), selector).await;
        let jobsets = protocol::list(&*self.jobset, Some(namespace), selector).await;
        let jobs = either_kind(container, spark, "jobs not listed")?;
        let jobs = with_jobsets(jobs, jobsets, "jobs not listed")?;
        self.with_recorded(jobs, Some(namespace), selector).await
    }

    /// The managed jobs of every namespace, of every kind, oldest first (as
    /// [`Executor::list`], with cluster-wide lists: kubeferry needs to be allowed to list jobs
    /// and pods in every namespace).
    pub async fn list_all_namespaces(&self, selector: Option<&str>) -> Result<Vec<JobSummary>> {
        let container = protocol::list(&*self.container, None, selector).await;
        // With no Spark operator installed, an empty Spark list asked nothing of the server:
        // it must not stand in for container jobs kubeferry may not list.
        let spark_installed = self
            .spark
            .installed()
            .await
            .is_ok_and(|operators| !operators.is_empty());
        let jobs = if spark_installed {
            let spark = protocol::list(&*self.spark, None, selector).await;
            either_kind(container, spark, "jobs not listed")?
        } else {
            container?
        };
        let jobsets = protocol::list(&*self.jobset, None, selector).await;
        let jobs = with_jobsets(jobs, jobsets, "jobs not listed")?;
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
        let candidates = [
            (JobKind::Job, self.container.object_names(job_id)),
            (JobKind::SparkApp, self.spark.object_names(job_id)),
            (JobKind::JobSet, self.jobset.object_names(job_id)),
        ];
        for (kind, names) in candidates {
            for name in names {
                let id = ExecutionId::new(self.cluster.name(), kind, namespace, name);
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
        crate::selector::merge(vec![
            self.container.matching(namespace, selector).boxed(),
            self.spark.matching(namespace, selector).boxed(),
            self.jobset.matching(namespace, selector).boxed(),
        ])
    }

    /// Managed jobs of a namespace whose job ids are not in `known`; deleted when `delete`. A
    /// kind kubeferry may not list here is left out with a warning.
    pub async fn sweep(
        &self,
        namespace: &str,
        known: &HashSet<String>,
        delete: bool,
    ) -> Result<Vec<Orphan>> {
        let container = protocol::sweep(&*self.container, namespace, known, delete).await;
        let spark = protocol::sweep(&*self.spark, namespace, known, delete).await;
        let jobsets = protocol::sweep(&*self.jobset, namespace, known, delete).await;
        // Outcome records are not orphans: they are bounded, and expire after their retention.
        let orphans = either_kind(container, spark, "jobs not swept")?;
        with_jobsets(orphans, jobsets, "jobs not swept")
    }

    /// Lets go of every object of `namespace` that kubeferry's finalizer holds until its
    /// outcome is recorded, whatever its job id, and answers their execution ids: the step
    /// before uninstalling kubeferry (docs/INVARIANTS.md). An object let go before its outcome
    /// was recorded keeps the guarantees of Kubernetes alone: deleted, it is gone.
    pub async fn release_all(&self, namespace: &str) -> Result<Vec<ExecutionId>> {
        let container = protocol::release_all(&*self.container, namespace).await;
        let spark = protocol::release_all(&*self.spark, namespace).await;
        let jobsets = protocol::release_all(&*self.jobset, namespace).await;
        let released = either_kind(container, spark, "jobs not released")?;
        with_jobsets(released, jobsets, "jobs not released")
    }
}

/// The replicated job and Job index whose log a JobSet's log is: the ones asked for, else the
/// first replicated job of the JobSet's spec and its Job 0.
async fn log_defaults(
    jobsets: &JobSets,
    id: &ExecutionId,
    replica: Option<String>,
    index: Option<u32>,
) -> Result<(Option<String>, Option<u32>)> {
    let replica = match replica {
        Some(replica) => Some(replica),
        None => jobsets.first_replicated_job(id).await?,
    };
    Ok((replica, Some(index.unwrap_or(0))))
}

/// The health of every watch of every namespace `jobs` watches: namespace, resource, health.
fn health_of<J: Kind>(jobs: &J) -> Vec<(String, String, WatchHealth)> {
    jobs.namespaces()
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

/// The results of both kinds together. A kind that is forbidden is left out with a warning,
/// unless both are (then the first error is the answer); any other error is the answer.
fn either_kind<T>(container: Result<Vec<T>>, spark: Result<Vec<T>>, what: &str) -> Result<Vec<T>> {
    match (container, spark) {
        (Ok(mut a), Ok(b)) => {
            a.extend(b);
            Ok(a)
        }
        (Err(error @ Error::Forbidden { .. }), Ok(b)) => {
            warn!(message = what, kind = "container", %error);
            Ok(b)
        }
        (Ok(a), Err(error @ Error::Forbidden { .. })) => {
            warn!(message = what, kind = "spark", %error);
            Ok(a)
        }
        (Err(error), _) | (_, Err(error)) => Err(error),
    }
}

/// The other kinds' results with the JobSets'. JobSets kubeferry may not list are left out with
/// a warning (a cluster that does not serve JobSets lists none and asks nothing of them).
fn with_jobsets<T>(jobs: Vec<T>, jobsets: Result<Vec<T>>, what: &str) -> Result<Vec<T>> {
    match jobsets {
        Ok(jobsets) => {
            let mut jobs = jobs;
            jobs.extend(jobsets);
            Ok(jobs)
        }
        Err(error @ Error::Forbidden { .. }) => {
            warn!(message = what, kind = "jobset", %error);
            Ok(jobs)
        }
        Err(error) => Err(error),
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
