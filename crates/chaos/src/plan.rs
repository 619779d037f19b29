//! The schedule of one seed, drawn up front from the seed alone: which jobs are submitted
//! when, through which replicas, with which cancels, and which faults and replica kills
//! happen when. The same seed gives the same schedule.

use std::collections::BTreeSet;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A kind of scenario a run may leave out (`--without`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// Jobs that exit 0.
    Success,
    /// Jobs that exit with a code of their own.
    Exit,
    /// Jobs killed for their memory.
    Oom,
    /// Jobs past their deadline.
    Deadline,
    /// Jobs whose image cannot be pulled.
    Unpullable,
    /// Spark applications, under the apache and the Kubeflow operator, that succeed or fail
    /// with an exit code.
    Spark,
    /// Some of the container jobs (success, exit, OOM, deadline, unpullable) run as bare pods
    /// (`kind: Pod`) instead of Jobs.
    Pods,
    /// Cancels before the start, while running and at the moment of the end.
    Cancel,
    /// One job submitted through two replicas at once, and cancelled through two at once.
    Concurrent,
    /// A cancelled job id submitted again (its outcome record keeps it from running again).
    Resubmit,
    /// A finished job's pods deleted by an administrator; its outcome must not change (its
    /// outcome record keeps it).
    PodLoss,
    /// A cancelled job whose Job is gone must still read CANCELLED on a replica started, or
    /// whose watch listed again, after the deletion (its outcome record keeps it). Left out,
    /// "no such job" is accepted for such a job.
    CancelledGone,
    /// API errors: 5xx, and 429 with Retry-After.
    Errors,
    /// Writes committed whose answer is lost, and connections dropped unanswered.
    LostResponses,
    /// Latency on every request.
    Latency,
    /// Watches cut, stalled and expired (410).
    Watches,
    /// The API server unreachable for a while, or restarted.
    Outages,
    /// Running pods evicted by the kubelet (the failed pod stays).
    Evictions,
    /// Running pods preempted (marked, then deleted).
    Preemptions,
    /// A node lost (its pods fail with NodeLost and are deleted) and later restored.
    NodeLoss,
    /// A node drained (every pod on it evicted through the Eviction API and deleted, finished
    /// ones too) and later restored.
    Drains,
    /// Replicas killed and started again.
    Kills,
    /// Every replica down for a while, and meanwhile Jobs deleted by someone else (as
    /// `kubectl delete job` does, Background propagation), some after they ended, some while
    /// running; each answers its first run's outcome (DeletedExternally for one deleted while
    /// running) once the replicas are back, and a submission of its job id again creates
    /// nothing.
    Unwatched,
    /// A job's outcome record (its ConfigMap) deleted by hand while its Job is still there;
    /// the job id is then submitted again: it must not run again, and its answers must not
    /// change.
    RecordLoss,
}

impl Scenario {
    /// Every scenario and its name on the command line.
    pub const ALL: [(Scenario, &'static str); 24] = [
        (Scenario::Success, "success"),
        (Scenario::Exit, "exit"),
        (Scenario::Oom, "oom"),
        (Scenario::Deadline, "deadline"),
        (Scenario::Unpullable, "unpullable"),
        (Scenario::Spark, "spark"),
        (Scenario::Pods, "pods"),
        (Scenario::Cancel, "cancel"),
        (Scenario::Concurrent, "concurrent"),
        (Scenario::Resubmit, "resubmit"),
        (Scenario::PodLoss, "pod-loss"),
        (Scenario::CancelledGone, "cancelled-gone"),
        (Scenario::Errors, "errors"),
        (Scenario::LostResponses, "lost-responses"),
        (Scenario::Latency, "latency"),
        (Scenario::Watches, "watches"),
        (Scenario::Outages, "outages"),
        (Scenario::Evictions, "evictions"),
        (Scenario::Preemptions, "preemptions"),
        (Scenario::NodeLoss, "node-loss"),
        (Scenario::Drains, "drains"),
        (Scenario::Kills, "kills"),
        (Scenario::Unwatched, "unwatched"),
        (Scenario::RecordLoss, "record-loss"),
    ];

    /// The scenario a command-line name means.
    pub fn parse(name: &str) -> Result<Scenario, String> {
        Scenario::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(s, _)| *s)
            .ok_or_else(|| {
                let names: Vec<&str> = Scenario::ALL.iter().map(|(_, n)| *n).collect();
                format!(
                    "--without: unknown scenario {name:?}; the scenarios are {}",
                    names.join(", ")
                )
            })
    }

    /// Its command-line name.
    pub fn name(self) -> &'static str {
        Scenario::ALL
            .iter()
            .find(|(s, _)| *s == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }
}

/// What a job's container does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// Sleeps, then exits with the code.
    Exit {
        /// Milliseconds of sleep.
        millis: u64,
        /// Exit code.
        code: i32,
    },
    /// Allocates far past its memory limit.
    Oom,
    /// Sleeps past its 1 s deadline.
    Deadline,
    /// An image that can never be pulled.
    Unpullable,
    /// A Spark application whose driver runs a while, then ends with the code.
    Spark {
        /// `apache` or `kubeflow`.
        operator: &'static str,
        /// Whole seconds the driver runs.
        seconds: u64,
        /// Exit code.
        code: i32,
    },
}

/// When a job is cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelAt {
    /// Right after the submission answered.
    Before,
    /// This long after the submission answered.
    After(Duration),
}

/// What someone else does to a job while every replica is down (the plan's blackout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwatched {
    /// Deletes its Job once it ended (or as the replicas come back, if it has not).
    AfterEnd,
    /// Deletes its Job while it runs.
    WhileRunning,
    /// Deletes its outcome record once there is one; its Job stays (`record-loss`).
    RecordDeleted,
}

/// One job of the schedule.
#[derive(Clone, Debug)]
pub struct JobPlan {
    /// The caller's job id.
    pub job_id: String,
    /// When it is submitted, from the start of the fault phase.
    pub submit_at: Duration,
    /// What it runs.
    pub work: Work,
    /// Run as a bare pod (`kind: Pod`), not a Job.
    pub bare: bool,
    /// Submitted through two replicas at once.
    pub duplicate_submit: bool,
    /// Waited for through a replica's event stream as well.
    pub wait: bool,
    /// Cancelled, and when.
    pub cancel: Option<CancelAt>,
    /// Cancelled through two replicas at once.
    pub concurrent_cancel: bool,
    /// Submitted again once it ended (or its cancel answered).
    pub resubmit: bool,
    /// Its pods deleted once it ended (before its record, if that is deleted too).
    pub delete_pods_after_end: bool,
    /// Its Job or its outcome record deleted by someone else while no replica runs (the
    /// plan's blackout).
    pub unwatched: Option<Unwatched>,
    /// Its outcome record deleted by hand once it ended, its Job still there.
    pub delete_record: bool,
    /// A seed for the job's own choices (replicas, polling).
    pub seed: u64,
}

impl JobPlan {
    /// The scenario words of the evidence.
    pub fn describe(&self) -> String {
        let mut words = vec![match &self.work {
            Work::Exit { millis, code } => format!("exit {code} after {millis}ms"),
            Work::Oom => "oom".into(),
            Work::Deadline => "deadline".into(),
            Work::Unpullable => "unpullable".into(),
            Work::Spark {
                operator,
                seconds,
                code,
            } => format!("spark ({operator}) exit {code} after {seconds}s"),
        }];
        if self.bare {
            words.push("as a bare pod".into());
        }
        if self.duplicate_submit {
            words.push("duplicate submit".into());
        }
        if self.wait {
            words.push("waited for".into());
        }
        match self.cancel {
            Some(CancelAt::Before) => words.push("cancel before start".into()),
            Some(CancelAt::After(d)) => words.push(format!("cancel after {}ms", d.as_millis())),
            None => {}
        }
        if self.concurrent_cancel {
            words.push("concurrent cancel".into());
        }
        match self.unwatched {
            Some(Unwatched::AfterEnd) => {
                words.push("Job deleted after its end, no replica running".into())
            }
            Some(Unwatched::WhileRunning) => {
                words.push("Job deleted while running, no replica running".into())
            }
            Some(Unwatched::RecordDeleted) => {
                words.push("outcome record deleted after the end, no replica running".into())
            }
            None => {}
        }
        if self.delete_record {
            words.push("outcome record deleted after the end".into());
        }
        if self.resubmit {
            words.push(if self.cancel.is_some() {
                "resubmit after cancel".into()
            } else {
                "resubmit after the end".into()
            });
        }
        if self.delete_pods_after_end {
            words.push("pods deleted after the end".into());
        }
        words.join(", ")
    }
}

/// A fault of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Requests of kubeferry's identity answered with this code (and Retry-After for 429)
    /// for a while.
    Errors {
        /// 500, 503 or 429.
        code: u16,
        /// Verbs (empty: all).
        verbs: Vec<&'static str>,
        /// How long.
        lasting: Duration,
    },
    /// The next writes of kubeferry commit but their answers are lost.
    LoseResponses {
        /// `create`, `patch` or `delete`.
        verb: &'static str,
        /// How many.
        times: u32,
    },
    /// The next requests of kubeferry get their connection dropped unanswered.
    DropConnections {
        /// How many.
        times: u32,
    },
    /// Every request of kubeferry waits this long, for a while.
    Latency {
        /// Milliseconds.
        millis: u64,
        /// How long.
        lasting: Duration,
    },
    /// Every open watch cut.
    CutWatches,
    /// Every open watch stalled.
    StallWatches(Duration),
    /// Every open watch expired (410 Gone on resuming).
    ExpireWatches,
    /// The API server unreachable.
    Unreachable(Duration),
    /// The API server restarted (its watch history forgotten).
    Restart,
    /// A running pod evicted by the kubelet.
    Evict,
    /// A running pod preempted.
    Preempt,
    /// A node lost, then restored.
    LoseNode {
        /// Which of the nodes (index).
        node: usize,
        /// How long until it is restored.
        lasting: Duration,
    },
    /// A node drained (its finished pods evicted too), then restored.
    DrainNode {
        /// Which of the nodes (index).
        node: usize,
        /// How long until it is restored.
        lasting: Duration,
    },
}

/// A replica kill of the schedule.
#[derive(Clone, Debug)]
pub struct Kill {
    /// When, from the start of the fault phase.
    pub at: Duration,
    /// Which replica.
    pub replica: usize,
    /// How long it stays down.
    pub down: Duration,
}

/// Every replica down at once, and unwatched jobs' Jobs deleted meanwhile.
#[derive(Clone, Debug)]
pub struct Blackout {
    /// When every replica is killed, from the start of the fault phase.
    pub at: Duration,
    /// How long they all stay down.
    pub down: Duration,
}

/// Everything one seed does.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The jobs.
    pub jobs: Vec<JobPlan>,
    /// The faults, with when they start from the start of the fault phase.
    pub faults: Vec<(Duration, Fault)>,
    /// The replica kills.
    pub kills: Vec<Kill>,
    /// Every replica down at once (the `unwatched` jobs' Jobs deleted meanwhile).
    pub blackout: Option<Blackout>,
    /// How long the fault phase lasts.
    pub fault_phase: Duration,
}

/// What shapes a plan.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Jobs per seed.
    pub jobs: usize,
    /// Replicas of the service.
    pub replicas: usize,
    /// Nodes of the cluster.
    pub nodes: usize,
    /// Scenarios left out.
    pub without: BTreeSet<Scenario>,
}

impl Shape {
    fn has(&self, s: Scenario) -> bool {
        !self.without.contains(&s)
    }
}

fn ms(rng: &mut StdRng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo..=hi))
}

/// The plan of a seed.
pub fn plan(seed: u64, shape: &Shape) -> Plan {
    let mut rng = StdRng::seed_from_u64(seed);
    // About 40 ms of fault phase per job, at least 8 s: the jobs overlap, the faults hit them.
    // A blackout adds 8 s: up to 5 s waiting for the unwatched jobs' Jobs, up to 4 s down.
    let base_ms = (shape.jobs as u64 * 40).max(8_000);
    let blackout_ms = if shape.has(Scenario::Unwatched) {
        8_000
    } else {
        0
    };
    let fault_phase = Duration::from_millis(base_ms + blackout_ms);
    let mut works: Vec<(u32, Scenario)> = vec![
        (30, Scenario::Success),
        (30, Scenario::Exit),
        (3, Scenario::Oom),
        (5, Scenario::Deadline),
        (5, Scenario::Unpullable),
        (8, Scenario::Spark),
    ];
    works.retain(|(_, s)| shape.has(*s));
    if works.is_empty() {
        works.push((1, Scenario::Success));
    }
    let total: u32 = works.iter().map(|(w, _)| w).sum();
    let mut jobs = Vec::with_capacity(shape.jobs);
    let phase_ms = fault_phase.as_millis() as u64;
    let submit_window = phase_ms * 3 / 4;
    // Over before the faults stop (the run waits at most 5 s for the unwatched jobs' Jobs, and
    // never past the point that leaves `down` and 500 ms before the end of the fault phase).
    let blackout = shape.has(Scenario::Unwatched).then(|| Blackout {
        at: ms(&mut rng, base_ms * 30 / 100, base_ms * 45 / 100),
        down: ms(&mut rng, 2_500, 4_000),
    });
    for n in 0..shape.jobs {
        let mut pick = rng.random_range(0..total);
        let mut scenario = works[0].1;
        for (w, s) in &works {
            if pick < *w {
                scenario = *s;
                break;
            }
            pick -= w;
        }
        // A container job submitted shortly before the blackout, its Job (or its record, with
        // record-loss) deleted during it.
        let unwatched = match &blackout {
            Some(_) if matches!(scenario, Scenario::Success | Scenario::Exit) => {
                if rng.random_bool(0.12) {
                    let kinds = if shape.has(Scenario::RecordLoss) {
                        3
                    } else {
                        2
                    };
                    Some(
                        [
                            Unwatched::AfterEnd,
                            Unwatched::WhileRunning,
                            Unwatched::RecordDeleted,
                        ][rng.random_range(0..kinds)],
                    )
                } else {
                    None
                }
            }
            _ => None,
        };
        // 0: no cancel; 1: before the start; 2: while running; 3: about when it ends.
        let cancel_kind =
            if unwatched.is_none() && shape.has(Scenario::Cancel) && rng.random_bool(0.2) {
                rng.random_range(1..=3)
            } else {
                0
            };
        // A job cancelled while running runs long enough for the cancel to find it running.
        let millis = if unwatched == Some(Unwatched::WhileRunning) {
            // Still running when the blackout starts and its Job is deleted.
            rng.random_range(8_000..=10_000)
        } else if matches!(
            unwatched,
            Some(Unwatched::AfterEnd | Unwatched::RecordDeleted)
        ) {
            rng.random_range(100..=800)
        } else if cancel_kind == 2 {
            rng.random_range(3_000..=5_000)
        } else {
            rng.random_range(100..=2_500)
        };
        let work = match scenario {
            Scenario::Exit => Work::Exit {
                millis,
                code: [1, 2, 3, 4, 7, 42, 126][rng.random_range(0..7)],
            },
            Scenario::Oom => Work::Oom,
            Scenario::Deadline => Work::Deadline,
            Scenario::Unpullable => Work::Unpullable,
            Scenario::Spark => Work::Spark {
                operator: ["apache", "kubeflow"][rng.random_range(0..2)],
                seconds: rng.random_range(1..=3),
                code: [0, 0, 3][rng.random_range(0..3)],
            },
            _ => Work::Exit { millis, code: 0 },
        };
        let cancel = match cancel_kind {
            0 => None,
            1 => Some(CancelAt::Before),
            2 => Some(CancelAt::After(ms(&mut rng, 200, 1_500))),
            // About when the container ends (it starts a little after the submission).
            _ => Some(CancelAt::After(ms(&mut rng, millis, millis + 400))),
        };
        let concurrent = shape.has(Scenario::Concurrent);
        let submit_at = match (&blackout, unwatched) {
            // Accepted, and started, before every replica goes.
            (Some(b), Some(_)) => {
                let at = b.at.as_millis() as u64;
                ms(&mut rng, at.saturating_sub(2_500), at.saturating_sub(1_200))
            }
            _ => ms(&mut rng, 0, submit_window),
        };
        // A container job as a bare pod, now and then. Its pod is its object, so neither a
        // Job deleted by someone else nor its pods deleted after the end apply; nor does its
        // record deleted by hand: a drain or a lost node deletes a finished pod, and with its
        // record gone too nothing in the cluster remembers the run (as for a Job deleted by
        // someone else, which no scenario combines with a lost record either).
        let bare = shape.has(Scenario::Pods)
            && unwatched.is_none()
            && !matches!(scenario, Scenario::Spark)
            && rng.random_bool(0.25);
        let delete_record =
            !bare && unwatched.is_none() && shape.has(Scenario::RecordLoss) && rng.random_bool(0.1);
        let resubmit_cancelled =
            cancel.is_some() && shape.has(Scenario::Resubmit) && rng.random_bool(0.3);
        jobs.push(JobPlan {
            job_id: format!("c{seed}-{n}"),
            submit_at,
            work,
            duplicate_submit: concurrent && rng.random_bool(0.15),
            wait: rng.random_bool(0.3),
            concurrent_cancel: concurrent && cancel.is_some() && rng.random_bool(0.4),
            resubmit: resubmit_cancelled || unwatched.is_some() || delete_record,
            // Half the jobs whose record is deleted lose their pods first: the Job alone is left.
            delete_pods_after_end: !bare
                && shape.has(Scenario::PodLoss)
                && rng.random_bool(if delete_record { 0.5 } else { 0.1 }),
            bare,
            unwatched,
            delete_record,
            cancel,
            seed: rng.random(),
        });
    }
    jobs.sort_by_key(|j| j.submit_at);

    let mut kinds: Vec<Scenario> = [
        Scenario::Errors,
        Scenario::LostResponses,
        Scenario::Latency,
        Scenario::Watches,
        Scenario::Outages,
        Scenario::Evictions,
        Scenario::Preemptions,
        Scenario::NodeLoss,
        Scenario::Drains,
    ]
    .into_iter()
    .filter(|s| shape.has(*s))
    .collect();
    if shape.nodes < 2 {
        // Losing or draining the only node leaves nothing to run on.
        kinds.retain(|s| !matches!(s, Scenario::NodeLoss | Scenario::Drains));
    }
    let mut faults = Vec::new();
    if !kinds.is_empty() {
        let count = fault_phase.as_millis() as u64 / 500;
        for _ in 0..count {
            let at = ms(&mut rng, 0, fault_phase.as_millis() as u64 - 1_000);
            let fault = match kinds[rng.random_range(0..kinds.len())] {
                Scenario::Errors => Fault::Errors {
                    code: [500, 503, 429][rng.random_range(0..3)],
                    verbs: [
                        vec![],
                        vec!["get", "list"],
                        vec!["create"],
                        vec!["patch", "delete"],
                        vec!["watch"],
                    ][rng.random_range(0..5)]
                    .clone(),
                    lasting: ms(&mut rng, 200, 1_500),
                },
                Scenario::LostResponses => {
                    if rng.random_bool(0.7) {
                        Fault::LoseResponses {
                            verb: ["create", "patch", "delete"][rng.random_range(0..3)],
                            times: rng.random_range(1..=3),
                        }
                    } else {
                        Fault::DropConnections {
                            times: rng.random_range(1..=4),
                        }
                    }
                }
                Scenario::Latency => Fault::Latency {
                    millis: rng.random_range(50..=600),
                    lasting: ms(&mut rng, 300, 2_000),
                },
                Scenario::Watches => match rng.random_range(0..3) {
                    0 => Fault::CutWatches,
                    1 => Fault::StallWatches(ms(&mut rng, 500, 3_000)),
                    _ => Fault::ExpireWatches,
                },
                Scenario::Outages => {
                    if rng.random_bool(0.7) {
                        Fault::Unreachable(ms(&mut rng, 300, 2_500))
                    } else {
                        Fault::Restart
                    }
                }
                Scenario::Evictions => Fault::Evict,
                Scenario::Preemptions => Fault::Preempt,
                Scenario::NodeLoss => Fault::LoseNode {
                    node: rng.random_range(0..shape.nodes),
                    lasting: ms(&mut rng, 500, 2_000),
                },
                _ => Fault::DrainNode {
                    node: rng.random_range(0..shape.nodes),
                    lasting: ms(&mut rng, 500, 2_000),
                },
            };
            faults.push((at, fault));
        }
        faults.sort_by_key(|(at, _)| *at);
    }
    let mut kills = Vec::new();
    if shape.has(Scenario::Kills) && shape.replicas > 1 {
        let count = (fault_phase.as_millis() as u64 / 2_500).max(1);
        for _ in 0..count {
            kills.push(Kill {
                at: ms(&mut rng, 0, fault_phase.as_millis() as u64 - 1_000),
                replica: rng.random_range(0..shape.replicas),
                down: ms(&mut rng, 100, 1_500),
            });
        }
        kills.sort_by_key(|k| k.at);
    }
    Plan {
        jobs,
        faults,
        kills,
        blackout,
        fault_phase,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(without: &[Scenario]) -> Shape {
        Shape {
            jobs: 50,
            replicas: 3,
            nodes: 3,
            without: without.iter().copied().collect(),
        }
    }

    #[test]
    fn a_seed_always_gives_the_same_plan() {
        let a = plan(7, &shape(&[]));
        let b = plan(7, &shape(&[]));
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let c = plan(8, &shape(&[]));
        assert_ne!(format!("{a:?}"), format!("{c:?}"));
    }

    #[test]
    fn scenarios_left_out_never_appear() {
        let p = plan(
            3,
            &shape(&[
                Scenario::PodLoss,
                Scenario::Resubmit,
                Scenario::Drains,
                Scenario::Kills,
                Scenario::Unwatched,
                Scenario::RecordLoss,
            ]),
        );
        assert!(p.jobs.iter().all(|j| !j.resubmit
            && !j.delete_pods_after_end
            && j.unwatched.is_none()
            && !j.delete_record));
        assert!(p.blackout.is_none());
        assert!(
            p.faults
                .iter()
                .all(|(_, f)| !matches!(f, Fault::DrainNode { .. }))
        );
        assert!(p.kills.is_empty());
        let full = plan(3, &shape(&[]));
        assert!(full.jobs.iter().any(|j| j.delete_pods_after_end));
        assert!(full.jobs.iter().any(|j| j.delete_record && j.resubmit));
        assert!(!full.kills.is_empty());
    }

    #[test]
    fn unwatched_jobs_are_submitted_before_the_blackout_and_resubmitted() {
        let mut shape = shape(&[]);
        shape.jobs = 100;
        let p = plan(5, &shape);
        let blackout = p.blackout.expect("a blackout");
        assert!(blackout.at + blackout.down < p.fault_phase);
        let unwatched: Vec<_> = p.jobs.iter().filter(|j| j.unwatched.is_some()).collect();
        for kind in [
            Unwatched::AfterEnd,
            Unwatched::WhileRunning,
            Unwatched::RecordDeleted,
        ] {
            assert!(
                unwatched.iter().any(|j| j.unwatched == Some(kind)),
                "{kind:?}"
            );
        }
        for job in unwatched {
            assert!(job.submit_at < blackout.at, "{job:?}");
            assert!(job.resubmit && job.cancel.is_none(), "{job:?}");
            assert!(matches!(job.work, Work::Exit { .. }), "{job:?}");
        }
    }
}
