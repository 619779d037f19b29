//! One seed's run: the simulated cluster with RBAC enforced, replicas of the service under the
//! Role `kubeferry rbac` prints, the plan's jobs, faults and kills, then the quiet phase, the
//! final answers and the check.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use hyper::Method;
use kubeferry_core::JobKind;
use kubeferry_kube::rbac;
use kubeferry_server::config::{
    AuthConfig, ClusterConfig, ClusterSource, Config, Limits, Timeouts,
};
use kubeferry_sim::controllers::spark::with_spark_operators;
use kubeferry_sim::{FaultAction, FaultRule, NodeConfig, SimCluster, SimConfig};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::check::{self, Answer, JobHistory, Op, Said, Violation};
use crate::http::{self, Http};
use crate::plan::{
    self, Blackout, CancelAt, Fault, JobPlan, Plan, Scenario, Shape, Unwatched, Work,
};
use crate::truth::Observer;

/// The namespace the jobs run in.
const NAMESPACE: &str = "chaos";
/// The service account (and Role) the replicas run as.
const ACCOUNT: &str = "kubeferry";
/// The replicas' identity at the API server: the faults hit its requests only, so the
/// harness's own reads and deletes go through.
const USER: &str = "system:serviceaccount:chaos:kubeferry";
/// The cluster name execution ids carry.
const CLUSTER: &str = "sim";

/// The settings of a run besides the plan's shape.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The plan's shape.
    pub shape: Shape,
    /// How long after the faults stop every replica must be ready.
    pub ready_bound: Duration,
    /// How long after the faults stop every job must be terminal on every replica.
    pub end_bound: Duration,
}

/// What one seed found.
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Jobs submitted.
    pub jobs: usize,
    /// Faults injected.
    pub faults: usize,
    /// Replica kills.
    pub kills: usize,
    /// Answers recorded.
    pub answers: usize,
    /// How many jobs ended in each state (by their final answers), e.g. `FAILED=12`.
    pub ends: BTreeMap<String, usize>,
    /// Violations, with evidence.
    pub violations: Vec<Violation>,
    /// Every job's recorded answers and truth.
    pub histories: BTreeMap<String, JobHistory>,
    /// The faults and kills, with their times.
    pub schedule: Vec<String>,
    /// How long the seed took.
    pub took: Duration,
    /// How long, after the faults stopped, the replicas took to be ready, the callers to see
    /// their jobs end, and every replica to answer a final state.
    pub after_quiet: [Duration; 3],
}

/// The replicas' longest backoff before a failed watch is started again.
const WATCH_RESTART_CAP: Duration = Duration::from_secs(5);

/// Replica timings: the service's defaults (what a deployment runs), shortened only where a
/// run of seconds would otherwise wait minutes: the image pull and container-creation graces,
/// the window in which reads fail fast after the API server was unreachable, the recheck
/// interval, the watches' longest restart backoff and the shutdown timeout.
fn timeouts() -> Timeouts {
    Timeouts {
        shutdown: Duration::from_secs(2),
        unreachable_window: Duration::from_secs(2),
        recheck: Duration::from_millis(200),
        image_pull_grace: Duration::from_secs(1),
        create_container_error_grace: Duration::from_secs(1),
        // Readiness after the faults is checked within --ready-bound, which must leave room
        // for the longest restart backoff of a watch that failed many times.
        watch_restart: WATCH_RESTART_CAP,
        ..Timeouts::default()
    }
}

/// A replica slot. An in-process replica stands for a process: it runs on a runtime of its
/// own, and a kill shuts that runtime down without any graceful step (every task of the
/// replica, its watches, settlers and connections, stops where it is), as SIGKILL would.
struct Slot {
    runtime: Option<tokio::runtime::Runtime>,
    running: Option<kubeferry_server::Running>,
    addr: Option<SocketAddr>,
    incarnation: u32,
}

/// The replicas.
struct Replicas {
    config: Config,
    slots: Vec<Mutex<Slot>>,
    /// Every replica is to stay down (the plan's blackout): a killed one is not started again
    /// until this is over.
    held: AtomicBool,
}

impl Replicas {
    fn new(config: Config, count: usize) -> Replicas {
        Replicas {
            config,
            slots: (0..count)
                .map(|_| {
                    Mutex::new(Slot {
                        runtime: None,
                        running: None,
                        addr: None,
                        incarnation: 0,
                    })
                })
                .collect(),
            held: AtomicBool::new(false),
        }
    }

    /// Starts replica `index` (it listens at once; readiness follows).
    async fn start(&self, index: usize) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("replica-{index}"))
            .enable_all()
            .build()?;
        let config = self.config.clone();
        let running = runtime
            .spawn(async move { kubeferry_server::start(config).await })
            .await?
            .with_context(|| format!("replica {index} does not start"))?;
        let mut slot = self.slots[index].lock();
        if slot.runtime.is_some() {
            // Started meanwhile by another restart (the blackout's and a kill's at once): one
            // replica per slot, and a runtime is never dropped on an async thread.
            drop(slot);
            runtime.shutdown_background();
            drop(running);
            return Ok(());
        }
        slot.addr = Some(running.addr());
        slot.running = Some(running);
        slot.runtime = Some(runtime);
        slot.incarnation += 1;
        Ok(())
    }

    /// Kills replica `index` (the SIGKILL of an in-process replica: its runtime stops).
    fn kill(&self, index: usize) -> bool {
        let mut slot = self.slots[index].lock();
        let Some(runtime) = slot.runtime.take() else {
            return false;
        };
        slot.addr = None;
        runtime.shutdown_background();
        drop(slot.running.take());
        true
    }

    fn is_down(&self, index: usize) -> bool {
        self.slots[index].lock().runtime.is_none()
    }

    fn held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }

    /// Starts replica `index` again until it runs (a start can fail while the API server is
    /// unreachable: tried again, as a supervisor restarts a crashed process), once no
    /// blackout holds it down.
    async fn restart(&self, index: usize) {
        while self.is_down(index) {
            if self.held() || self.start(index).await.is_err() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    /// The address and incarnation of replica `index`, when it runs.
    fn addr(&self, index: usize) -> (Option<SocketAddr>, u32) {
        let slot = self.slots[index].lock();
        (slot.addr, slot.incarnation)
    }

    fn kill_all(&self) {
        for index in 0..self.slots.len() {
            self.kill(index);
        }
    }
}

/// Who was asked, and when.
#[derive(Clone, Copy)]
struct Asked {
    replica: usize,
    incarnation: u32,
    sent_us: u64,
}

/// Everything the tasks of one run share.
struct Shared {
    sim: SimCluster,
    replicas: Replicas,
    http: Http,
    observer: Observer,
    admin: kube::Client,
    histories: Mutex<BTreeMap<String, JobHistory>>,
    started: Instant,
    /// When the faults stop and the bounds start.
    quiet_at: Instant,
    /// No blackout is to come or under way: it is over (the replicas started again), or the
    /// plan has none.
    blackout_over: AtomicBool,
    settings: Settings,
}

impl Shared {
    /// Microseconds since the run started.
    fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    fn record(&self, job_id: &str, asked: Asked, op: Op, said: Said) {
        let Asked {
            replica,
            incarnation,
            sent_us,
        } = asked;
        let answer = Answer {
            sent_us,
            at_us: self.now_us(),
            replica,
            incarnation,
            op,
            said,
        };
        self.histories
            .lock()
            .entry(job_id.to_string())
            .or_default()
            .answers
            .push(answer);
    }

    /// Asks replica `index`; a replica that is down gives no answer.
    async fn ask(
        &self,
        index: usize,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> (Result<http::Raw, String>, Asked) {
        let (addr, incarnation) = self.replicas.addr(index);
        let asked = Asked {
            replica: index,
            incarnation,
            sent_us: self.now_us(),
        };
        match addr {
            Some(addr) => (self.http.call(addr, method, path, body).await, asked),
            None => (Err("replica down".into()), asked),
        }
    }

    async fn status(&self, job_id: &str, exec_id: &str, index: usize, op: Op) -> Said {
        let (raw, asked) = self
            .ask(index, Method::GET, &format!("/v1/jobs/{exec_id}"), None)
            .await;
        let said = http::status_said(raw);
        if !matches!(said, Said::NoAnswer(_)) {
            self.record(job_id, asked, op, said.clone());
        }
        said
    }

    async fn cancel(&self, job_id: &str, exec_id: &str, index: usize) -> Said {
        let (raw, asked) = self
            .ask(
                index,
                Method::POST,
                &format!("/v1/jobs/{exec_id}/cancel"),
                None,
            )
            .await;
        let said = http::cancel_said(raw);
        self.record(job_id, asked, Op::Cancel, said.clone());
        said
    }

    async fn submit(&self, job_id: &str, body: &Value, index: usize) -> Said {
        let (raw, asked) = self.ask(index, Method::POST, "/v1/jobs", Some(body)).await;
        let said = http::submit_said(raw);
        self.record(job_id, asked, Op::Submit, said.clone());
        said
    }

    fn replica_count(&self) -> usize {
        self.replicas.slots.len()
    }
}

fn spec(work: &Work) -> Value {
    match work {
        Work::Exit { millis, code } => json!({
            "name": "work", "image": "busybox:1.36", "command": ["sh", "-c"],
            "args": [format!("sleep {}.{:03}; echo done; exit {code}", millis / 1000, millis % 1000)],
        }),
        Work::Oom => json!({
            "name": "hungry", "image": "busybox:1.36", "command": ["sh", "-c"],
            "args": ["python3 -c 'import time; x = b\"x\" * (160 * 1024 * 1024); time.sleep(20)'"],
            "resources": {"memory": "32Mi", "limits": {"memory": "32Mi"}},
        }),
        Work::Deadline => json!({
            "name": "slow", "image": "busybox:1.36", "command": ["sh", "-c"],
            "args": ["sleep 30"], "timeout": "1s",
        }),
        Work::Spark {
            operator,
            seconds,
            code,
        } => {
            let account = if *operator == "apache" {
                "spark"
            } else {
                "spark-operator-spark"
            };
            let exit = if *code == 0 {
                String::new()
            } else {
                format!(", 'exit={code}'")
            };
            Value::String(format!(
                "kind: SparkJob\nname: pi\noperator: {operator}\nsparkVersion: \"3.5.3\"\n\
                 image: apache/spark:3.5.3\n\
                 mainApplicationFile: local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar\n\
                 mainClass: org.apache.spark.examples.SparkPi\n\
                 args: ['10', 'sleep={seconds}'{exit}]\nserviceAccount: {account}\n\
                 driver: {{cores: 1, memory: 512m}}\nexecutor: {{cores: 1, memory: 512m, instances: 1}}\n"
            ))
        }
        Work::Unpullable => json!({
            "name": "nopull", "image": "registry.invalid/nothing:1", "command": ["sh", "-c"],
            "args": ["true"],
        }),
    }
}

/// Submits through replica `first`, then through any until one accepts (a caller retries
/// what got no answer or a 5xx), at most until the end bound. The execution id, if accepted.
async fn submit_until_accepted(
    shared: &Shared,
    job: &JobPlan,
    body: &Value,
    first: usize,
    rng: &mut StdRng,
) -> Option<String> {
    let give_up = shared.quiet_at + shared.settings.end_bound;
    let mut index = first;
    loop {
        match shared.submit(&job.job_id, body, index).await {
            Said::Submitted(id) => return Some(id),
            Said::Error(status, _) if status < 500 && status != 429 => return None,
            _ => {}
        }
        if Instant::now() > give_up {
            return None;
        }
        index = rng.random_range(0..shared.replica_count());
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..400))).await;
    }
}

/// Cancels through one replica until it is accepted (202), retrying what got no answer, a
/// 5xx or a 409.
async fn cancel_until_accepted(
    shared: &Shared,
    job: &JobPlan,
    exec_id: &str,
    index: usize,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let give_up = shared.quiet_at + shared.settings.end_bound;
    let mut index = index;
    loop {
        match shared.cancel(&job.job_id, exec_id, index).await {
            Said::Job(_) | Said::NoSuchJob => return,
            Said::Error(status, _) if status < 500 && status != 409 && status != 429 => {
                return;
            }
            _ => {}
        }
        if Instant::now() > give_up {
            return;
        }
        index = rng.random_range(0..shared.replica_count());
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..400))).await;
    }
}

/// Deletes a job's pods as an administrator would (`kubectl delete pod`).
async fn delete_pods(shared: &Shared, job_id: &str) {
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(shared.admin.clone(), NAMESPACE);
    for (_, name) in shared.observer.pods_of(job_id) {
        for _ in 0..20 {
            match api.delete(&name, &Default::default()).await {
                Ok(_) | Err(kube::Error::Api(_)) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

/// Deletes a job's Job as someone else would (`kubectl delete job`: Background propagation,
/// the garbage collector deletes its pods), if it exists.
async fn delete_job(shared: &Shared, job_id: &str) {
    let Some((namespace, name)) = shared.observer.job_object(job_id) else {
        return;
    };
    shared.observer.deleting_job(job_id);
    let api: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(shared.admin.clone(), &namespace);
    for _ in 0..20 {
        match api
            .delete(&name, &kube::api::DeleteParams::background())
            .await
        {
            Ok(_) | Err(kube::Error::Api(_)) => break,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Deletes a job's outcome records by hand, once kubeferry is done with them: a record
/// exists and the job's object was let go with its copy (a terminal answer may come a moment
/// before both are seen; not after `give_up`), while its Job is still there. Whether it did.
/// A record deleted in the moment between its write and the release, while every process
/// dies, is a gap docs/INVARIANTS.md names, not one this harness looks for.
async fn delete_records(shared: &Shared, job_id: &str, give_up: Instant) -> bool {
    let records = loop {
        let records = shared.observer.records_of(job_id);
        if (!records.is_empty() && shared.observer.released(job_id)) || Instant::now() > give_up {
            break records;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    if records.is_empty() || shared.observer.job_object(job_id).is_none() {
        return false;
    }
    for (namespace, name) in records {
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(shared.admin.clone(), &namespace);
        for _ in 0..20 {
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {
                    shared.observer.record_deleted(job_id);
                    break;
                }
                Err(kube::Error::Api(_)) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    true
}

/// The blackout: once the unwatched jobs' Jobs, and the records to delete, exist (their
/// submissions may take a while under the faults; not past a bound that leaves the blackout
/// over before the faults stop), every replica killed at once and held down; meanwhile the
/// unwatched jobs' Jobs deleted, those meant to end first once their Job has its verdict, or
/// their outcome records deleted; then every replica started again.
async fn blackout(shared: Arc<Shared>, blackout: Blackout, jobs: Vec<JobPlan>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xb1ac_0a70);
    let unwatched: Vec<(String, Unwatched)> = jobs
        .into_iter()
        .filter_map(|job| job.unwatched.map(|when| (job.job_id, when)))
        .collect();
    tokio::time::sleep_until(shared.started + blackout.at).await;
    let latest = (shared.started + blackout.at + Duration::from_secs(5))
        .min(shared.quiet_at - blackout.down - Duration::from_millis(500));
    while Instant::now() < latest
        && unwatched.iter().any(|(job_id, when)| {
            // A record to delete is written, and its object let go, by a replica before they
            // all go.
            shared.observer.job_object(job_id).is_none()
                || (*when == Unwatched::RecordDeleted
                    && (shared.observer.records_of(job_id).is_empty()
                        || !shared.observer.released(job_id)))
        })
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shared.replicas.held.store(true, Ordering::SeqCst);
    shared.replicas.kill_all();
    let back = Instant::now() + blackout.down;
    let deletes = unwatched.into_iter().map(|(job_id, when)| {
        let shared = shared.clone();
        let pause = Duration::from_millis(rng.random_range(100..800));
        async move {
            tokio::time::sleep(pause).await;
            let latest = back - Duration::from_millis(300);
            match when {
                Unwatched::RecordDeleted => {
                    delete_records(&shared, &job_id, latest).await;
                    return;
                }
                Unwatched::AfterEnd => {
                    // Its end, seen by no replica; as the replicas come back at the latest.
                    while !shared.observer.job_finished(&job_id) && Instant::now() < latest {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                Unwatched::WhileRunning => {}
            }
            delete_job(&shared, &job_id).await;
        }
    });
    futures::future::join_all(deletes).await;
    tokio::time::sleep_until(back).await;
    shared.replicas.held.store(false, Ordering::SeqCst);
    futures::future::join_all((0..shared.replica_count()).map(|i| shared.replicas.restart(i)))
        .await;
    shared.blackout_over.store(true, Ordering::SeqCst);
}

/// Waits for a job through replicas' event streams until one sends a final state, each
/// `status` event recorded; a stream that breaks (a killed replica) is opened again on any.
async fn wait_for_end(shared: Arc<Shared>, job_id: String, exec_id: String, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let give_up = shared.quiet_at + shared.settings.end_bound;
    while Instant::now() < give_up {
        let index = rng.random_range(0..shared.replica_count());
        let (addr, incarnation) = shared.replicas.addr(index);
        if let Some(addr) = addr {
            // An event was computed some time after the stream opened, no earlier.
            let asked = Asked {
                replica: index,
                incarnation,
                sent_us: shared.now_us(),
            };
            let path = format!("/v1/jobs/{exec_id}/events");
            let ended = shared
                .http
                .follow_events(addr, &path, give_up, |name, data| {
                    if name != "status" {
                        // `gone` or `error`: this stream says no more.
                        return true;
                    }
                    let Some(seen) = http::seen(data) else {
                        return false;
                    };
                    let terminal = seen.is_terminal();
                    shared.record(&job_id, asked, Op::Wait, Said::Job(seen));
                    terminal
                })
                .await;
            if ended.is_ok() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..400))).await;
    }
}

/// One job's life as a caller lives it: submit, maybe cancel, poll any replica until it ends.
async fn drive(shared: Arc<Shared>, job: JobPlan) {
    if let Some(waiting) = poll(shared, job).await {
        let _ = waiting.await;
    }
}

/// [`drive`], returning the event-stream waiter it started, if any.
async fn poll(shared: Arc<Shared>, job: JobPlan) -> Option<tokio::task::JoinHandle<()>> {
    let mut rng = StdRng::seed_from_u64(job.seed);
    tokio::time::sleep_until(shared.started + job.submit_at).await;
    let mut spec = spec(&job.work);
    if job.bare {
        spec["kind"] = json!("Pod");
    }
    let body = json!({"jobId": job.job_id, "spec": spec, "namespace": NAMESPACE});
    let replicas = shared.replica_count();
    let exec_id = if job.duplicate_submit && replicas > 1 {
        let first = rng.random_range(0..replicas);
        let second = (first + rng.random_range(1..replicas)) % replicas;
        let (mut rng_a, mut rng_b) = (
            StdRng::seed_from_u64(rng.random()),
            StdRng::seed_from_u64(rng.random()),
        );
        let (a, b) = tokio::join!(
            submit_until_accepted(&shared, &job, &body, first, &mut rng_a),
            submit_until_accepted(&shared, &job, &body, second, &mut rng_b),
        );
        a.or(b)
    } else {
        let first = rng.random_range(0..replicas);
        submit_until_accepted(&shared, &job, &body, first, &mut rng).await
    };
    let exec_id = exec_id?;
    let waiting = job.wait.then(|| {
        tokio::spawn(wait_for_end(
            shared.clone(),
            job.job_id.clone(),
            exec_id.clone(),
            rng.random(),
        ))
    });
    let submitted = Instant::now();
    let mut cancel_at = job.cancel.map(|c| match c {
        CancelAt::Before => submitted,
        CancelAt::After(d) => submitted + d,
    });
    let mut resubmit = job.resubmit;
    let mut delete_record = job.delete_record;
    let mut pods_deleted = !job.delete_pods_after_end;
    let mut polls_after_end = 0;
    let give_up = shared.quiet_at + shared.settings.end_bound;
    loop {
        if let Some(at) = cancel_at
            && Instant::now() >= at
        {
            cancel_at = None;
            let index = rng.random_range(0..replicas);
            if job.concurrent_cancel && replicas > 1 {
                let other = (index + rng.random_range(1..replicas)) % replicas;
                let (a, b) = (rng.random(), rng.random());
                tokio::join!(
                    cancel_until_accepted(&shared, &job, &exec_id, index, a),
                    cancel_until_accepted(&shared, &job, &exec_id, other, b),
                );
            } else {
                cancel_until_accepted(&shared, &job, &exec_id, index, rng.random()).await;
            }
        }
        let index = rng.random_range(0..replicas);
        let said = shared
            .status(&job.job_id, &exec_id, index, Op::Status)
            .await;
        // A cancelled job whose Job is gone reads "no such job" where no outcome outlives it:
        // its caller, having cancelled it, takes that as the end.
        let cancelled_gone = job.cancel.is_some() && cancel_at.is_none() && said == Said::NoSuchJob;
        // An unwatched job's end counts once the blackout is over (its Job deleted by then);
        // "no such job" then ends it too (the checker judges that answer).
        let unwatched_over = shared.blackout_over.load(Ordering::SeqCst);
        let unwatched_gone = job.unwatched.is_some() && unwatched_over && said == Said::NoSuchJob;
        let ended = matches!(&said, Said::Job(seen) if seen.is_terminal())
            && (job.unwatched.is_none() || unwatched_over);
        if ended || cancelled_gone || unwatched_gone {
            if !pods_deleted {
                pods_deleted = true;
                delete_pods(&shared, &job.job_id).await;
            }
            if delete_record {
                delete_record = false;
                let give_up = Instant::now() + Duration::from_secs(10);
                if delete_records(&shared, &job.job_id, give_up).await {
                    let pause = rng.random_range(200..1_500);
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
            }
            if resubmit && cancel_at.is_none() {
                // The same job id again, once cancelled (or ended before the cancel came), its
                // Job deleted unwatched or its record deleted: it must not run again.
                resubmit = false;
                let first = rng.random_range(0..replicas);
                let _ = submit_until_accepted(&shared, &job, &body, first, &mut rng).await;
            }
            polls_after_end += 1;
            if polls_after_end > 3 && cancel_at.is_none() && !resubmit {
                return waiting;
            }
        }
        if Instant::now() > give_up {
            return waiting;
        }
        let pause = if cancel_at.is_some() {
            50..150
        } else {
            150..500
        };
        tokio::time::sleep(Duration::from_millis(rng.random_range(pause))).await;
    }
}

fn node_name(index: usize) -> String {
    format!("sim-node-{}", index + 1)
}

/// Injects the plan's faults at their times; restores what lasts.
async fn inject(shared: Arc<Shared>, faults: Vec<(Duration, Fault)>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_fa17);
    let mut restores = Vec::new();
    for (at, fault) in faults {
        tokio::time::sleep_until(shared.started + at).await;
        let sim = &shared.sim;
        let ours = |action: FaultAction| FaultRule::new(action).users(&[USER]);
        let lasting = |id, d: Duration| {
            let shared = shared.clone();
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                shared.sim.remove_fault(id);
            })
        };
        match fault {
            Fault::Errors {
                code,
                verbs,
                lasting: d,
            } => {
                let action = FaultAction::Error {
                    code,
                    message: None,
                    retry_after_seconds: (code == 429 || code == 503).then_some(1),
                };
                let id = sim.add_fault(ours(action).verbs(&verbs));
                restores.push(lasting(id, d));
            }
            Fault::LoseResponses { verb, times } => {
                sim.add_fault(
                    ours(FaultAction::LoseResponse)
                        .verbs(&[verb])
                        .resources(&["jobs.batch"])
                        .times(times),
                );
            }
            Fault::DropConnections { times } => {
                sim.add_fault(ours(FaultAction::DropConnection).times(times));
            }
            Fault::Latency { millis, lasting: d } => {
                let id = sim.add_fault(ours(FaultAction::Latency { millis }));
                restores.push(lasting(id, d));
            }
            Fault::CutWatches => {
                sim.cut_watches();
            }
            Fault::StallWatches(d) => {
                sim.stall_watches(d);
            }
            Fault::ExpireWatches => {
                sim.expire_watches();
            }
            Fault::Unreachable(d) => sim.unreachable_for(d),
            Fault::Restart => sim.restart(),
            Fault::Evict | Fault::Preempt => {
                let running = shared.observer.running_pods();
                if running.is_empty() {
                    continue;
                }
                let (namespace, name) = &running[rng.random_range(0..running.len())];
                shared
                    .observer
                    .disrupting(namespace, name, sim.resource_version());
                let _ = if fault == Fault::Evict {
                    sim.evict_pod(namespace, name)
                } else {
                    sim.preempt_pod(namespace, name)
                };
            }
            Fault::LoseNode { node, lasting: d } | Fault::DrainNode { node, lasting: d } => {
                let name = node_name(node);
                let _ = if matches!(fault, Fault::LoseNode { .. }) {
                    sim.lose_node(&name)
                } else {
                    sim.drain_node(&name)
                };
                let shared = shared.clone();
                restores.push(tokio::spawn(async move {
                    tokio::time::sleep(d).await;
                    let _ = shared.sim.restore_node(&name);
                }));
            }
        }
    }
    for restore in restores {
        let _ = restore.await;
    }
}

/// Kills replicas at the plan's times and starts them again after their down time.
async fn kill(shared: Arc<Shared>, kills: Vec<plan::Kill>) {
    let mut restarts = Vec::new();
    for k in kills {
        tokio::time::sleep_until(shared.started + k.at).await;
        if !shared.replicas.kill(k.replica) {
            continue;
        }
        let shared = shared.clone();
        restarts.push(tokio::spawn(async move {
            tokio::time::sleep(k.down).await;
            shared.replicas.restart(k.replica).await;
        }));
    }
    for restart in restarts {
        let _ = restart.await;
    }
}

/// Whether replica `index` answers `/readyz` with 200 before `deadline`; if not, its last
/// answer.
async fn ready(
    replicas: &Replicas,
    http: &Http,
    index: usize,
    deadline: Instant,
) -> Result<(), String> {
    loop {
        let last = match replicas.addr(index) {
            (Some(addr), _) => match http.call(addr, Method::GET, "/readyz", None).await {
                Ok((200, _)) => return Ok(()),
                Ok((status, body)) => format!("{status} {body}"),
                Err(why) => why,
            },
            (None, _) => "down".to_string(),
        };
        if Instant::now() > deadline {
            return Err(last);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// After the faults: asks every replica about a job until it answers a terminal state (or
/// the bound passes); its last answer is recorded as the final one.
async fn settle(shared: &Shared, job_id: &str, exec_id: &str) {
    let deadline = shared.quiet_at + shared.settings.end_bound;
    for index in 0..shared.replica_count() {
        loop {
            let (raw, asked) = shared
                .ask(index, Method::GET, &format!("/v1/jobs/{exec_id}"), None)
                .await;
            let said = http::status_said(raw);
            let terminal = matches!(&said, Said::Job(seen) if seen.is_terminal());
            let past = Instant::now() > deadline;
            // "No such job" is final too: the checker judges it against the cluster's truth.
            if terminal || said == Said::NoSuchJob || past {
                // No answer by the bound is recorded too: the evidence says why it is missing.
                shared.record(job_id, asked, Op::Final, said);
                break;
            }
            if !matches!(said, Said::NoAnswer(_)) {
                shared.record(job_id, asked, Op::Status, said);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn start_cluster(nodes: usize) -> anyhow::Result<(SimCluster, tempfile::TempDir, Config)> {
    let mut config = with_spark_operators(SimConfig {
        rbac: true,
        nodes: (0..nodes)
            .map(|n| NodeConfig::named(node_name(n)))
            .collect(),
        ..SimConfig::for_tests()
    });
    // Drivers only: executors would only add processes on this machine.
    config.spark.executors = false;
    config.spark.release_delay = Duration::from_millis(100);
    let sim = SimCluster::start(config).await?;
    sim.create(
        "",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    )?;
    // The drivers' service accounts, as the operators' Helm charts create them.
    for name in ["spark", "spark-operator-spark"] {
        sim.create(
            NAMESPACE,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
        )?;
    }
    // Exactly the Role `kubeferry rbac` prints, bound to the replicas' service account.
    let role = rbac::role(ACCOUNT, Some(NAMESPACE), &rbac::permissions(&JobKind::ALL));
    let (account, binding) = rbac::binding(ACCOUNT, ACCOUNT, Some(NAMESPACE));
    for object in [
        serde_json::to_value(&role)?,
        serde_json::to_value(&account)?,
        serde_json::to_value(&binding)?,
    ] {
        sim.create(NAMESPACE, object)?;
    }
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig_as(&kubeconfig, CLUSTER, &sim.token_for(NAMESPACE, ACCOUNT))?;
    let config = Config {
        listen: "127.0.0.1:0".parse()?,
        tls: None,
        auth: AuthConfig::Anonymous,
        clusters: vec![ClusterConfig {
            name: Some(CLUSTER.into()),
            source: ClusterSource::Kubeconfig {
                path: Some(kubeconfig),
                context: Some(CLUSTER.into()),
            },
            spark_operator: None,
        }],
        namespaces: vec![NAMESPACE.into()],
        name_prefix: String::new(),
        templates_dir: None,
        timeouts: timeouts(),
        limits: Limits::default(),
    };
    Ok((sim, dir, config))
}

async fn admin_client(sim: &SimCluster) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml(CLUSTER))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Runs one seed.
pub async fn run(seed: u64, settings: &Settings) -> anyhow::Result<Outcome> {
    let began = std::time::Instant::now();
    let plan: Plan = plan::plan(seed, &settings.shape);
    let (sim, _dir, config) = start_cluster(settings.shape.nodes).await?;
    let observer = Observer::default();
    tokio::spawn(observer.clone().follow(sim.follow()));
    let admin = admin_client(&sim).await?;
    let replicas = Replicas::new(config, settings.shape.replicas);
    for index in 0..settings.shape.replicas {
        replicas.start(index).await?;
    }
    let http = Http::new(Duration::from_secs(25));
    let startup = Instant::now() + Duration::from_secs(30);
    for index in 0..settings.shape.replicas {
        if let Err(last) = ready(&replicas, &http, index, startup).await {
            replicas.kill_all();
            bail!("replica {index} is not ready before any fault: {last}");
        }
    }
    let started = Instant::now();
    let shared = Arc::new(Shared {
        sim,
        replicas,
        http,
        observer,
        admin,
        histories: Mutex::new(BTreeMap::new()),
        started,
        quiet_at: started + plan.fault_phase,
        blackout_over: AtomicBool::new(plan.blackout.is_none()),
        settings: settings.clone(),
    });
    for job in &plan.jobs {
        shared
            .histories
            .lock()
            .entry(job.job_id.clone())
            .or_default()
            .scenario = job.describe();
    }
    let faults = tokio::spawn(inject(shared.clone(), plan.faults.clone(), seed));
    let kills = tokio::spawn(kill(shared.clone(), plan.kills.clone()));
    let blackout = plan
        .blackout
        .clone()
        .map(|b| tokio::spawn(self::blackout(shared.clone(), b, plan.jobs.clone(), seed)));
    let drivers: Vec<_> = plan
        .jobs
        .iter()
        .map(|job| tokio::spawn(drive(shared.clone(), job.clone())))
        .collect();

    // The faults stop: rules cleared, the API server reachable, nodes back, every replica up.
    tokio::time::sleep_until(shared.quiet_at).await;
    let _ = faults.await;
    let _ = kills.await;
    if let Some(blackout) = blackout {
        let _ = blackout.await;
    }
    shared.blackout_over.store(true, Ordering::SeqCst);
    shared.sim.clear_faults();
    shared.sim.reachable_again();
    for node in 0..settings.shape.nodes {
        let _ = shared.sim.restore_node(&node_name(node));
    }
    let mut violations = Vec::new();
    for index in 0..shared.replica_count() {
        shared.replicas.restart(index).await;
    }
    for index in 0..shared.replica_count() {
        let deadline = shared.quiet_at + settings.ready_bound;
        if let Err(last) = ready(&shared.replicas, &shared.http, index, deadline).await {
            violations.push(Violation {
                kind: "unready",
                subject: format!("replica-{index}"),
                evidence: format!(
                    "/readyz not 200 within {:?} after the faults stopped; it answered {last}",
                    settings.ready_bound
                ),
            });
        }
    }
    let ready_after = shared.quiet_at.elapsed();
    for driver in drivers {
        let _ = driver.await;
    }
    let drivers_after = shared.quiet_at.elapsed();
    // Every job, on every replica, to its end.
    let exec_ids: Vec<(String, String)> = {
        let histories = shared.histories.lock();
        histories
            .iter()
            .filter_map(|(job_id, h)| {
                h.answers.iter().find_map(|a| match &a.said {
                    Said::Submitted(id) => Some((job_id.clone(), id.clone())),
                    _ => None,
                })
            })
            .collect()
    };
    futures::future::join_all(exec_ids.iter().map(|(job_id, exec_id)| {
        let shared = shared.clone();
        async move { settle(&shared, job_id, exec_id).await }
    }))
    .await;
    let settled_after = shared.quiet_at.elapsed();
    let mut histories = std::mem::take(&mut *shared.histories.lock());
    for (job_id, history) in histories.iter_mut() {
        history.truth = shared.observer.truth(job_id);
        history.replicas = shared.replica_count();
    }
    let accept_cancelled_gone = settings.shape.without.contains(&Scenario::CancelledGone);
    violations.extend(check::check_all(&histories, accept_cancelled_gone));
    shared.replicas.kill_all();
    let mut ends = BTreeMap::new();
    for history in histories.values() {
        let end = history
            .answers
            .iter()
            .find_map(|a| match (&a.op, &a.said) {
                (Op::Final, Said::Job(seen)) => Some(seen.state.clone()),
                (Op::Final, said) => Some(said.to_string()),
                _ => None,
            })
            .unwrap_or_else(|| "never accepted".into());
        *ends.entry(end).or_insert(0) += 1;
    }
    Ok(Outcome {
        seed,
        schedule: plan
            .faults
            .iter()
            .map(|(at, f)| format!("{:>7}ms {f:?}", at.as_millis()))
            .chain(plan.blackout.iter().map(|b| {
                format!(
                    "{:>7}ms every replica killed for {}ms (unwatched Jobs, records deleted)",
                    b.at.as_millis(),
                    b.down.as_millis()
                )
            }))
            .chain(plan.kills.iter().map(|k| {
                format!(
                    "{:>7}ms kill replica {} for {}ms",
                    k.at.as_millis(),
                    k.replica,
                    k.down.as_millis()
                )
            }))
            .collect(),
        answers: histories.values().map(|h| h.answers.len()).sum(),
        ends,
        histories,
        jobs: plan.jobs.len(),
        faults: plan.faults.len(),
        kills: plan.kills.len(),
        violations,
        took: began.elapsed(),
        after_quiet: [ready_after, drivers_after, settled_after],
    })
}
