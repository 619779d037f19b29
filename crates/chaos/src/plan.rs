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
    /// Cancels before the start, while running and at the moment of the end.
    Cancel,
    /// One job submitted through two replicas at once, and cancelled through two at once.
    Concurrent,
    /// A cancelled job id submitted again (a durable outcome record keeps it from running
    /// again; not built yet).
    Resubmit,
    /// A finished job's pods deleted by an administrator; its outcome must not change (a
    /// durable outcome record keeps it; not built yet).
    PodLoss,
    /// A cancelled job whose Job is gone must still read CANCELLED on a replica started, or
    /// whose watch listed again, after the deletion (a durable outcome record keeps it; not
    /// built yet). Left out, "no such job" is accepted for such a job, as the API documents
    /// it today.
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
}

impl Scenario {
    /// Every scenario and its name on the command line.
    pub const ALL: [(Scenario, &'static str); 21] = [
        (Scenario::Success, "success"),
        (Scenario::Exit, "exit"),
        (Scenario::Oom, "oom"),
        (Scenario::Deadline, "deadline"),
        (Scenario::Unpullable, "unpullable"),
        (Scenario::Spark, "spark"),
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

/// One job of the schedule.
#[derive(Clone, Debug)]
pub struct JobPlan {
    /// The caller's job id.
    pub job_id: String,
    /// When it is submitted, from the start of the fault phase.
    pub submit_at: Duration,
    /// What it runs.
    pub work: Work,
    /// Submitted through two replicas at once.
    pub duplicate_submit: bool,
    /// Waited for through a replica's event stream as well.
    pub wait: bool,
    /// Cancelled, and when.
    pub cancel: Option<CancelAt>,
    /// Cancelled through two replicas at once.
    pub concurrent_cancel: bool,
    /// Submitted again once its cancel answered.
    pub resubmit: bool,
    /// Its pods deleted once it ended.
    pub delete_pods_after_end: bool,
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
        if self.resubmit {
            words.push("resubmit after cancel".into());
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

/// Everything one seed does.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The jobs.
    pub jobs: Vec<JobPlan>,
    /// The faults, with when they start from the start of the fault phase.
    pub faults: Vec<(Duration, Fault)>,
    /// The replica kills.
    pub kills: Vec<Kill>,
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
    let fault_phase = Duration::from_millis((shape.jobs as u64 * 40).max(8_000));
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
    let submit_window = fault_phase.as_millis() as u64 * 3 / 4;
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
        // 0: no cancel; 1: before the start; 2: while running; 3: about when it ends.
        let cancel_kind = if shape.has(Scenario::Cancel) && rng.random_bool(0.2) {
            rng.random_range(1..=3)
        } else {
            0
        };
        // A job cancelled while running runs long enough for the cancel to find it running.
        let millis = if cancel_kind == 2 {
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
        jobs.push(JobPlan {
            job_id: format!("c{seed}-{n}"),
            submit_at: ms(&mut rng, 0, submit_window),
            work,
            duplicate_submit: concurrent && rng.random_bool(0.15),
            wait: rng.random_bool(0.3),
            concurrent_cancel: concurrent && cancel.is_some() && rng.random_bool(0.4),
            resubmit: cancel.is_some() && shape.has(Scenario::Resubmit) && rng.random_bool(0.3),
            delete_pods_after_end: shape.has(Scenario::PodLoss) && rng.random_bool(0.1),
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
            ]),
        );
        assert!(
            p.jobs
                .iter()
                .all(|j| !j.resubmit && !j.delete_pods_after_end)
        );
        assert!(
            p.faults
                .iter()
                .all(|(_, f)| !matches!(f, Fault::DrainNode { .. }))
        );
        assert!(p.kills.is_empty());
        let full = plan(3, &shape(&[]));
        assert!(full.jobs.iter().any(|j| j.delete_pods_after_end));
        assert!(!full.kills.is_empty());
    }
}
