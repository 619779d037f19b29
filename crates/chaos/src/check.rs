//! The checker: every recorded answer of every replica against the invariants and against
//! what the simulated cluster really did (docs/INVARIANTS.md, I1, I2, I3, I4, I7).

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A job's state as one answer gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// `QUEUED`, `STARTED`, `SUCCEEDED`, `FAILED`, `CANCELLING`, `CANCELLED`.
    pub state: String,
    /// The reason (`Completed`, `Error`, `OOMKilled`, ...).
    pub reason: String,
    /// The main container's exit code, when the answer gives one.
    pub exit_code: Option<i64>,
    /// `user`, `infrastructure` or `configuration` for a failure.
    pub failure_class: Option<String>,
}

impl Seen {
    /// Whether the state is final (never to change).
    pub fn is_terminal(&self) -> bool {
        matches!(self.state.as_str(), "SUCCEEDED" | "FAILED" | "CANCELLED")
    }

    /// What must be the same in every terminal answer: state, reason and exit code.
    fn outcome(&self) -> (&str, &str, Option<i64>) {
        (&self.state, &self.reason, self.exit_code)
    }
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.state, self.reason)?;
        if let Some(code) = self.exit_code {
            write!(f, " exit={code}")?;
        }
        if let Some(class) = &self.failure_class {
            write!(f, " class={class}")?;
        }
        Ok(())
    }
}

/// Which request an answer was to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `POST /v1/jobs`.
    Submit,
    /// `GET /v1/jobs/{id}`.
    Status,
    /// `POST /v1/jobs/{id}/cancel`.
    Cancel,
    /// A `status` event of `GET /v1/jobs/{id}/events` (waiting for the end).
    Wait,
    /// The status query to every replica once the faults stopped and the jobs ended.
    Final,
}

/// What an answer said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// A job's state (a status answer, or the job of a cancel answer).
    Job(Seen),
    /// A submission accepted, with the execution id.
    Submitted(String),
    /// 404 `no_such_job`.
    NoSuchJob,
    /// Any other answer of the service (a 4xx or 5xx), with its status and code.
    Error(u16, String),
    /// No answer: the connection failed or timed out (a killed replica, a slow one).
    NoAnswer(String),
}

impl std::fmt::Display for Said {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Said::Job(seen) => write!(f, "{seen}"),
            Said::Submitted(id) => write!(f, "submitted {id}"),
            Said::NoSuchJob => write!(f, "404 no_such_job"),
            Said::Error(status, code) => write!(f, "{status} {code}"),
            Said::NoAnswer(why) => write!(f, "no answer ({why})"),
        }
    }
}

/// One answer of one replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Microseconds since the run started, when the request was sent (for an event of a
    /// stream: when the stream was opened). Finer than the milliseconds shown: an answer asked
    /// for within the millisecond a terminal one arrived is ordered by it.
    pub sent_us: u64,
    /// Microseconds since the run started, when the answer arrived.
    pub at_us: u64,
    /// Which replica (its index; a restarted replica keeps its index).
    pub replica: usize,
    /// How many times that replica had been started when it answered (1 for the first).
    pub incarnation: u32,
    /// The request.
    pub op: Op,
    /// The answer.
    pub said: Said,
}

/// An outcome the cluster's truth allows a job to end with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allowed {
    /// The main container exited 0 on its own.
    Succeeded,
    /// The main container exited on its own with this code (OOMKilled when the runtime said so).
    Failed {
        /// Its exit code.
        exit_code: i64,
        /// Whether the runtime reported OOMKilled.
        oom: bool,
    },
    /// The Job's deadline expired first.
    DeadlineExceeded,
    /// An eviction, preemption or node loss took the pod before its container ended.
    Infrastructure,
    /// The image could not be pulled (a configuration failure).
    Configuration,
    /// A cancel was marked on the Job before the container ended on its own.
    Cancelled,
    /// Someone else deleted the Job before the container ended on its own.
    DeletedExternally,
}

impl Allowed {
    /// Whether a terminal answer is this outcome; `details_lost`: the pods that held the
    /// exit code and the container's reason may be gone, so a user failure without them is
    /// this outcome too.
    fn admits(&self, seen: &Seen, details_lost: bool) -> bool {
        let class = seen.failure_class.as_deref();
        match self {
            Allowed::Succeeded => seen.state == "SUCCEEDED",
            Allowed::Failed { .. } if details_lost && seen.exit_code.is_none() => {
                seen.state == "FAILED" && class == Some("user")
            }
            Allowed::Failed { exit_code, oom } => {
                seen.state == "FAILED"
                    && seen.exit_code == Some(*exit_code)
                    && class == Some("user")
                    && (seen.reason == "OomKilled") == *oom
            }
            Allowed::DeadlineExceeded => {
                seen.state == "FAILED" && seen.reason == "DeadlineExceeded"
            }
            Allowed::Infrastructure => seen.state == "FAILED" && class == Some("infrastructure"),
            Allowed::Configuration => seen.state == "FAILED" && class == Some("configuration"),
            Allowed::Cancelled => seen.state == "CANCELLED",
            Allowed::DeletedExternally => {
                seen.state == "FAILED"
                    && seen.reason == "DeletedExternally"
                    && class == Some("infrastructure")
            }
        }
    }
}

/// What the simulated cluster did for one job id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Truth {
    /// Jobs created with this job id.
    pub jobs_created: u32,
    /// Pods created for those Jobs.
    pub pods_created: u32,
    /// The outcomes a terminal answer may give (empty: the job has not ended in the cluster).
    pub allowed: Vec<Allowed>,
    /// The Job was deleted after a cancel was marked on it.
    pub gone_after_cancel: bool,
    /// A pod of the Job was deleted while the Job stayed (a drain, a lost node, an
    /// administrator) before the job's outcome was recorded: what only the pod showed went
    /// with it before any replica's answer stood (a terminal answer is given once recorded).
    pub pod_gone_unrecorded: bool,
    /// The main container was OOM-killed while its pod was being stopped, in the second its
    /// disruption began, and before the job's outcome was recorded its pod already showed
    /// the deletion's grace period cut to 0: the picture of a kill before the disruption.
    pub stop_order_hidden: bool,
    /// What happened, in words, for the evidence.
    pub story: String,
}

/// Everything recorded for one job id.
#[derive(Clone, Debug, Default)]
pub struct JobHistory {
    /// What the plan made of it (`exit`, `cancel-during`, ...), for the evidence.
    pub scenario: String,
    /// Every answer, in the order they arrived.
    pub answers: Vec<Answer>,
    /// What the cluster did.
    pub truth: Truth,
    /// How many replicas were asked for their final answer (replicas `0..replicas`).
    pub replicas: usize,
}

/// One broken invariant and its evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant, as a short name (`terminal-changed`, `wrong-outcome`, ...).
    pub kind: &'static str,
    /// The job id, or `replica-N` for a replica's own failure.
    pub subject: String,
    /// What was seen.
    pub evidence: String,
}

/// What no process could have read from the API: kept apart from the violations, with their
/// evidence, so that a run still shows how often it happens.
const BEYOND_THE_API: &[&str] = &["oom-unreadable", "order-unreadable"];

impl Violation {
    /// Whether what was seen is beyond what the API showed anyone (see [`BEYOND_THE_API`]).
    pub fn beyond_the_api(&self) -> bool {
        BEYOND_THE_API.contains(&self.kind)
    }
}

/// An OOM kill answered as the exit code of a user failure, its pod gone: the runtime's
/// `OOMKilled` lived only in the pod's status, and the Job's verdict (the pod failure policy
/// rule kubeferry adds) names the exit code alone. Every replica that never read the pod
/// answers this; one that did and said `OOMKilled` is a disagreement, still a violation.
fn oom_unreadable(truth: &Truth, seen: &Seen) -> bool {
    truth.pod_gone_unrecorded
        && seen.state == "FAILED"
        && seen.reason == "Error"
        && seen.failure_class.as_deref() == Some("user")
        && truth.allowed.iter().any(|allowed| {
            matches!(allowed, Allowed::Failed { exit_code, oom: true } if seen.exit_code == Some(*exit_code))
        })
}

/// An OOM kill during a disruption's stop answered as the OOM kill, when the API no longer
/// showed the order by the time the outcome was recorded: the kill, the disruption's
/// condition and the deletion share one second, and the kubelet's final delete has set the
/// grace period to 0, so the pod reads as one OOM-killed and then evicted at once (an ended
/// pod is deleted with no grace). Only a process that kept the pod's earlier state could
/// tell; kubeferry answers from what the API shows (docs/statuses.md, "Disruptions after the
/// container's own end"). Replicas that disagree are still a violation.
fn order_unreadable(truth: &Truth, seen: &Seen) -> bool {
    truth.stop_order_hidden
        && seen.state == "FAILED"
        && seen.reason == "OomKilled"
        && truth.allowed.contains(&Allowed::Infrastructure)
}

/// A job's scenario, truth and answers, as the evidence shows them.
pub fn describe(job_id: &str, history: &JobHistory) -> String {
    format!(
        "{job_id}: scenario {}; truth: {} (allows {:?}); answers:{}",
        history.scenario,
        history.truth.story,
        history.truth.allowed,
        answers_text(history, None)
    )
}

/// Microseconds as milliseconds, to the microsecond.
fn ms(us: u64) -> String {
    format!("{}.{:03}ms", us / 1000, us % 1000)
}

fn answers_text(history: &JobHistory, only: Option<usize>) -> String {
    let mut text = String::new();
    for a in &history.answers {
        let unanswered = matches!(a.said, Said::NoAnswer(_)) && a.op != Op::Final;
        if only.is_some_and(|r| r != a.replica) || unanswered {
            continue;
        }
        let _ = write!(
            text,
            "\n    {:>11} r{}#{} {:?} (asked {}): {}",
            ms(a.at_us),
            a.replica,
            a.incarnation,
            a.op,
            ms(a.sent_us),
            a.said
        );
    }
    text
}

/// Checks one job's history; every violation found. With `accept_cancelled_gone`, for a job
/// whose Job was deleted by its cancel (and its pods with it), "no such job" is accepted and
/// terminal answers are compared by state alone (the gap docs/INVARIANTS.md names until a
/// durable outcome record exists: what the pods held, exit code and reason, goes with them);
/// otherwise those are a changed terminal answer, a disagreement and a lost job.
pub fn check_job(
    job_id: &str,
    history: &JobHistory,
    accept_cancelled_gone: bool,
) -> Vec<Violation> {
    let mut found = Vec::new();
    let details_lost = accept_cancelled_gone && history.truth.gone_after_cancel;
    let tolerated = |said: &Said| details_lost && *said == Said::NoSuchJob;
    let same = |a: &Seen, b: &Seen| {
        if details_lost {
            a.state == b.state
        } else {
            a.outcome() == b.outcome()
        }
    };
    let mut violation = |kind: &'static str, what: String, only: Option<usize>| {
        found.push(Violation {
            kind,
            subject: job_id.to_string(),
            evidence: format!(
                "{what}; scenario {}; truth: {}; answers:{}",
                history.scenario,
                history.truth.story,
                answers_text(history, only)
            ),
        });
    };
    let truth = &history.truth;

    // I2: one run per job id, and every submission names the same execution.
    if truth.jobs_created > 1 || truth.pods_created > 1 {
        violation(
            "second-run",
            format!(
                "{} Jobs and {} pods were created for one job id",
                truth.jobs_created, truth.pods_created
            ),
            None,
        );
    }
    let mut ids: Vec<&str> = history
        .answers
        .iter()
        .filter_map(|a| match &a.said {
            Said::Submitted(id) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() > 1 {
        violation(
            "second-execution",
            format!("submissions answered different execution ids {ids:?}"),
            None,
        );
    }

    // I1: per replica, a terminal answer never changes (a restarted replica included: the
    // answer is the service's, not one process's).
    let mut first_terminal: BTreeMap<usize, &Answer> = BTreeMap::new();
    let mut changed_on: Vec<usize> = Vec::new();
    for a in &history.answers {
        let seen = match &a.said {
            Said::Job(seen) => Some(seen),
            said if tolerated(said) => continue,
            Said::NoSuchJob => None,
            _ => continue,
        };
        match (first_terminal.get(&a.replica), seen) {
            (None, Some(seen)) if seen.is_terminal() => {
                first_terminal.insert(a.replica, a);
            }
            // Only an answer asked for after the terminal one arrived comes after it: one
            // asked before may have been computed before it, whatever order they arrive in.
            (Some(first), seen) if !changed_on.contains(&a.replica) && a.sent_us >= first.at_us => {
                let Said::Job(before) = &first.said else {
                    continue;
                };
                if !seen.is_some_and(|s| same(s, before)) {
                    changed_on.push(a.replica);
                    violation(
                        "terminal-changed",
                        format!(
                            "replica {} answered {before} at {}, then {} at {}",
                            a.replica,
                            ms(first.at_us),
                            a.said,
                            ms(a.at_us)
                        ),
                        Some(a.replica),
                    );
                }
            }
            _ => {}
        }
    }

    // I7: every replica's terminal answer is the same.
    let terminals: Vec<(usize, &Seen)> = first_terminal
        .iter()
        .filter_map(|(r, a)| match &a.said {
            Said::Job(seen) => Some((*r, seen)),
            _ => None,
        })
        .collect();
    if let Some((r0, first)) = terminals.first()
        && let Some((r1, other)) = terminals.iter().find(|(_, s)| !same(s, first))
    {
        violation(
            "replicas-disagree",
            format!("replica {r0} answered {first}, replica {r1} answered {other}"),
            None,
        );
    }

    // I1: the terminal answer is what the cluster did.
    let mut wrong: Vec<&Seen> = Vec::new();
    for a in &history.answers {
        if let Said::Job(seen) = &a.said
            && seen.is_terminal()
            && !truth
                .allowed
                .iter()
                .any(|allowed| allowed.admits(seen, details_lost))
            && !wrong.iter().any(|w| w.outcome() == seen.outcome())
        {
            wrong.push(seen);
            violation(
                if oom_unreadable(truth, seen) {
                    "oom-unreadable"
                } else if order_unreadable(truth, seen) {
                    "order-unreadable"
                } else {
                    "wrong-outcome"
                },
                format!(
                    "replica {} answered {seen}, the cluster allows {:?}",
                    a.replica, truth.allowed
                ),
                None,
            );
        }
    }

    // I3: a job the cluster ran is found by every replica at the end.
    if truth.jobs_created > 0 {
        for a in &history.answers {
            if a.op == Op::Final && a.said == Said::NoSuchJob && !tolerated(&a.said) {
                violation(
                    "lost",
                    format!("replica {} answered no such job at the end", a.replica),
                    None,
                );
            }
        }
    }
    let accepted = history
        .answers
        .iter()
        .any(|a| matches!(a.said, Said::Submitted(_)));
    if accepted && truth.jobs_created == 0 {
        violation(
            "lost",
            "a submission was accepted but no Job was ever created".into(),
            None,
        );
    }

    // I4: every job ends within the bound after the faults stop, on every replica.
    if accepted {
        let unended: Vec<usize> = (0..history.replicas)
            .filter(|r| {
                let last = history
                    .answers
                    .iter()
                    .rfind(|a| a.op == Op::Final && a.replica == *r);
                !last.is_some_and(|a| match &a.said {
                    Said::Job(seen) => seen.is_terminal(),
                    said => tolerated(said),
                })
            })
            .collect();
        if !unended.is_empty() {
            violation(
                "stuck",
                format!(
                    "not terminal on replicas {unended:?} within the bound after the faults stopped"
                ),
                None,
            );
        }
    }
    found
}

/// Checks every job's history (see [`check_job`]).
pub fn check_all(
    histories: &BTreeMap<String, JobHistory>,
    accept_cancelled_gone: bool,
) -> Vec<Violation> {
    histories
        .iter()
        .flat_map(|(id, h)| check_job(id, h, accept_cancelled_gone))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(state: &str, reason: &str, exit_code: Option<i64>, class: Option<&str>) -> Said {
        Said::Job(Seen {
            state: state.into(),
            reason: reason.into(),
            exit_code,
            failure_class: class.map(str::to_string),
        })
    }

    fn answer(at_ms: u64, replica: usize, op: Op, said: Said) -> Answer {
        Answer {
            sent_us: at_ms * 1000,
            at_us: at_ms * 1000,
            replica,
            incarnation: 1,
            op,
            said,
        }
    }

    fn failed_with_3() -> JobHistory {
        JobHistory {
            scenario: "exit".into(),
            truth: Truth {
                jobs_created: 1,
                pods_created: 1,
                allowed: vec![Allowed::Failed {
                    exit_code: 3,
                    oom: false,
                }],
                gone_after_cancel: false,
                pod_gone_unrecorded: false,
                stop_order_hidden: false,
                story: "main exited 3 (Error)".into(),
            },
            answers: vec![
                answer(1, 0, Op::Submit, Said::Submitted("sim/job/chaos/a".into())),
                answer(2, 1, Op::Status, seen("STARTED", "Running", None, None)),
                answer(
                    3,
                    0,
                    Op::Status,
                    seen("FAILED", "Error", Some(3), Some("user")),
                ),
                answer(
                    4,
                    1,
                    Op::Status,
                    seen("FAILED", "Error", Some(3), Some("user")),
                ),
                answer(
                    5,
                    0,
                    Op::Final,
                    seen("FAILED", "Error", Some(3), Some("user")),
                ),
                answer(
                    5,
                    1,
                    Op::Final,
                    seen("FAILED", "Error", Some(3), Some("user")),
                ),
            ],
            replicas: 2,
        }
    }

    fn kinds(history: &JobHistory) -> Vec<&'static str> {
        check_job("a", history, false)
            .into_iter()
            .map(|v| v.kind)
            .collect()
    }

    /// Edits every terminal answer of the history, or only replica `only`'s.
    fn terminal_answers(history: &mut JobHistory, only: Option<usize>, edit: impl Fn(&mut Seen)) {
        for a in &mut history.answers {
            if let Said::Job(seen) = &mut a.said
                && seen.is_terminal()
                && only.is_none_or(|replica| a.replica == replica)
            {
                edit(seen);
            }
        }
    }

    /// The kinds of the violations found, those beyond the API left out.
    fn violation_kinds(history: &JobHistory) -> Vec<&'static str> {
        check_job("a", history, false)
            .into_iter()
            .filter(|v| !v.beyond_the_api())
            .map(|v| v.kind)
            .collect()
    }

    #[test]
    fn an_oom_kill_no_replica_could_read_is_beyond_the_api_and_a_seen_one_is_not() {
        let oom_gone = |pod_gone: bool| {
            let mut history = failed_with_3();
            history.truth.allowed = vec![Allowed::Failed {
                exit_code: 137,
                oom: true,
            }];
            history.truth.pod_gone_unrecorded = pod_gone;
            terminal_answers(&mut history, None, |seen| seen.exit_code = Some(137));
            history
        };
        // Every replica answered the exit code alone, the pod gone: apart from the violations.
        let found = check_job("a", &oom_gone(true), false);
        assert_eq!(
            found.iter().map(|v| v.kind).collect::<Vec<_>>(),
            ["oom-unreadable"]
        );
        assert!(found[0].beyond_the_api());
        // The pod still there to read: a wrong outcome.
        let found = check_job("a", &oom_gone(false), false);
        assert_eq!(
            found.iter().map(|v| v.kind).collect::<Vec<_>>(),
            ["wrong-outcome"]
        );
        assert!(!found[0].beyond_the_api());
        // One replica read it: the other's answer is a disagreement, a violation.
        let mut history = oom_gone(true);
        terminal_answers(&mut history, Some(1), |seen| {
            seen.reason = "OomKilled".into();
        });
        let kinds = violation_kinds(&history);
        assert!(kinds.contains(&"replicas-disagree"), "{kinds:?}");
    }

    #[test]
    fn an_oom_kill_whose_order_the_api_hid_is_beyond_it_and_a_disagreement_is_not() {
        let killed_while_stopping = |hidden: bool| {
            let mut history = failed_with_3();
            history.truth.allowed = vec![Allowed::Infrastructure];
            history.truth.stop_order_hidden = hidden;
            terminal_answers(&mut history, None, |seen| {
                seen.reason = "OomKilled".into();
                seen.exit_code = Some(137);
            });
            history
        };
        // Every replica read the kill as the container's own, the order hidden: apart.
        let found = check_job("a", &killed_while_stopping(true), false);
        assert_eq!(
            found.iter().map(|v| v.kind).collect::<Vec<_>>(),
            ["order-unreadable"]
        );
        assert!(found[0].beyond_the_api());
        // The order still readable when the outcome was recorded: a wrong outcome.
        let found = check_job("a", &killed_while_stopping(false), false);
        assert_eq!(
            found.iter().map(|v| v.kind).collect::<Vec<_>>(),
            ["wrong-outcome"]
        );
        // One replica said the disruption: the answers disagree, a violation.
        let mut history = killed_while_stopping(true);
        terminal_answers(&mut history, Some(1), |seen| {
            *seen = Seen {
                state: "FAILED".into(),
                reason: "Evicted".into(),
                exit_code: Some(137),
                failure_class: Some("infrastructure".into()),
            };
        });
        let kinds = violation_kinds(&history);
        assert!(kinds.contains(&"replicas-disagree"), "{kinds:?}");
    }

    #[test]
    fn a_consistent_true_history_has_no_violation() {
        assert_eq!(kinds(&failed_with_3()), Vec::<&str>::new());
    }

    #[test]
    fn a_terminal_answer_that_changes_once_the_pods_are_gone_is_reported() {
        let mut history = failed_with_3();
        history.answers.push(answer(
            6,
            1,
            Op::Final,
            seen("FAILED", "BackoffLimitExceeded", None, Some("user")),
        ));
        let violations = check_job("a", &history, false);
        let found: Vec<_> = violations.iter().map(|v| v.kind).collect();
        assert_eq!(found, ["terminal-changed", "wrong-outcome"]);
        assert!(
            violations[0].evidence.contains("BackoffLimitExceeded"),
            "{}",
            violations[0].evidence
        );
    }

    #[test]
    fn an_answer_asked_for_before_a_terminal_one_arrived_may_be_older() {
        let mut history = failed_with_3();
        // Asked at 2 ms, answered at 5 ms, after the terminal answer of 4 ms: computed first.
        let mut overtaken = answer(5, 1, Op::Status, seen("STARTED", "Running", None, None));
        overtaken.sent_us = 2_000;
        history.answers.insert(4, overtaken.clone());
        assert_eq!(kinds(&history), Vec::<&str>::new());
        // Asked a microsecond before the terminal answer arrived, in the same millisecond.
        overtaken.sent_us = 3_999;
        history.answers[4] = overtaken.clone();
        assert_eq!(kinds(&history), Vec::<&str>::new());
        // Asked at 4 ms, as the terminal answer arrived: a change.
        overtaken.sent_us = 4_000;
        history.answers[4] = overtaken;
        assert_eq!(kinds(&history), ["terminal-changed"]);
    }

    #[test]
    fn replicas_that_disagree_and_a_false_outcome_are_reported() {
        let mut history = failed_with_3();
        history.answers[4] = answer(
            5,
            0,
            Op::Final,
            seen("FAILED", "Evicted", Some(3), Some("infrastructure")),
        );
        history
            .answers
            .retain(|a| !(a.replica == 0 && a.op == Op::Status));
        assert_eq!(kinds(&history), ["replicas-disagree", "wrong-outcome"]);
    }

    #[test]
    fn a_second_run_a_lost_job_and_a_stuck_job_are_reported() {
        let mut history = failed_with_3();
        history.truth.jobs_created = 2;
        history.replicas = 4;
        history
            .answers
            .push(answer(7, 2, Op::Final, Said::NoSuchJob));
        assert_eq!(kinds(&history), ["second-run", "lost", "stuck"]);
        let stuck = check_job("a", &history, false).pop().unwrap();
        assert!(
            stuck.evidence.contains("replicas [2, 3]"),
            "{}",
            stuck.evidence
        );
    }

    #[test]
    fn a_cancelled_job_gone_is_lost_unless_that_gap_is_accepted() {
        let mut history = failed_with_3();
        history.truth.allowed = vec![Allowed::Cancelled];
        history.truth.gone_after_cancel = true;
        history.answers = vec![
            answer(1, 0, Op::Submit, Said::Submitted("sim/job/chaos/a".into())),
            answer(2, 0, Op::Status, seen("CANCELLED", "Cancelled", None, None)),
            answer(3, 0, Op::Final, Said::NoSuchJob),
            answer(3, 1, Op::Final, seen("CANCELLED", "Cancelled", None, None)),
        ];
        assert_eq!(kinds(&history), ["terminal-changed", "lost", "stuck"]);
        assert!(check_job("a", &history, true).is_empty());
    }

    #[test]
    fn a_cancel_at_the_end_that_took_the_pods_loses_only_details_when_that_gap_is_accepted() {
        let mut history = failed_with_3();
        history.truth.allowed.push(Allowed::Cancelled);
        history.truth.gone_after_cancel = true;
        // One replica saw the pod's exit code; one read the Job alone after the pods went.
        history.answers[4] = answer(
            5,
            0,
            Op::Final,
            seen("FAILED", "BackoffLimitExceeded", None, Some("user")),
        );
        history
            .answers
            .retain(|a| !(a.replica == 0 && a.op == Op::Status));
        assert_eq!(kinds(&history), ["replicas-disagree", "wrong-outcome"]);
        assert!(check_job("a", &history, true).is_empty());
        // A different state is still a disagreement.
        history.answers[3] = answer(5, 0, Op::Final, seen("CANCELLED", "Cancelled", None, None));
        let accepted: Vec<_> = check_job("a", &history, true)
            .into_iter()
            .map(|v| v.kind)
            .collect();
        assert_eq!(accepted, ["replicas-disagree"]);
    }

    #[test]
    fn a_job_deleted_externally_must_answer_so_and_never_run_again() {
        let mut history = failed_with_3();
        history.truth.allowed = vec![Allowed::DeletedExternally];
        let deleted = || seen("FAILED", "DeletedExternally", None, Some("infrastructure"));
        history.answers = vec![
            answer(1, 0, Op::Submit, Said::Submitted("sim/job/chaos/a".into())),
            answer(2, 0, Op::Final, deleted()),
            answer(2, 1, Op::Final, deleted()),
        ];
        assert_eq!(kinds(&history), Vec::<&str>::new());
        // Forgotten, then run again by a submission of its job id: the second run's outcome.
        history.truth.jobs_created = 2;
        history.truth.pods_created = 2;
        history.answers[1] = answer(2, 0, Op::Status, Said::NoSuchJob);
        history.answers[2] = answer(
            3,
            0,
            Op::Final,
            seen("FAILED", "Error", Some(3), Some("user")),
        );
        history.answers.push(answer(
            3,
            1,
            Op::Final,
            seen("FAILED", "Error", Some(3), Some("user")),
        ));
        assert_eq!(kinds(&history), ["second-run", "wrong-outcome"]);
    }

    #[test]
    fn a_cancel_allowed_by_the_truth_is_not_a_violation() {
        let mut history = failed_with_3();
        history.truth.allowed.push(Allowed::Cancelled);
        history.answers = vec![
            answer(1, 0, Op::Submit, Said::Submitted("sim/job/chaos/a".into())),
            answer(
                2,
                1,
                Op::Cancel,
                seen("CANCELLING", "CancelRequested", None, None),
            ),
            answer(3, 0, Op::Final, seen("CANCELLED", "Cancelled", None, None)),
            answer(3, 1, Op::Final, seen("CANCELLED", "Cancelled", None, None)),
        ];
        assert_eq!(kinds(&history), Vec::<&str>::new());
    }
}
