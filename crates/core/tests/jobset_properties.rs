//! Properties of the JobSet status mapping: reading arbitrary JobSet status JSON never panics;
//! the order in which the child Jobs and pods arrive never changes the answer; time alone
//! changes it only at the instant the mapping named; an outcome the JobSet showed never changes
//! when later noise arrives (deletions, cancel marks, the child Jobs and pods going away, the
//! JobSet vanishing, time passing).

mod common;
mod jobset_support;
// Not every helper is used by every test binary.
#[allow(dead_code)]
mod shared;

use jiff::Timestamp;
use jobset_support::{NAME, Pod1, Seen, at, child, condition, counts, jobset, views};
use kubeferry_core::container::{CancelMark, MappingConfig, PodView};
use kubeferry_core::jobset::{ChildJobView, JobSetMapped, JobSetView, jobset_status};
use kubeferry_core::{ExecutionInfo, JobState};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use shared::{after_each_noise, later};

fn map(
    view: &JobSetView,
    jobs: &[ChildJobView],
    pods: &[PodView],
    seen: Seen,
    now: Timestamp,
) -> Option<JobSetMapped> {
    jobset_status(
        &seen.observe(view),
        jobs,
        pods,
        now,
        &MappingConfig::default(),
        None,
    )
}

/// Arbitrary JSON of a few levels, with the field names of a JobSet's status now and then.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        select(
            &[
                "True",
                "False",
                "Completed",
                "Failed",
                "2025-06-10T08:00:00Z",
                "x"
            ][..]
        )
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                select(
                    &[
                        "conditions",
                        "type",
                        "status",
                        "reason",
                        "message",
                        "lastTransitionTime",
                        "restarts",
                        "terminalState",
                        "replicatedJobsStatus",
                        "name",
                        "ready",
                    ][..]
                )
                .prop_map(str::to_string),
                inner,
                0..5,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The children of the scenarios the properties run over, by name.
fn scenario(name: &str) -> (Value, Vec<(Value, Option<Value>)>) {
    let failed_by = |job: &str, at_s: i64| {
        condition(
            "Failed",
            "FailedJobs",
            &format!(
                "jobset failed due to one or more job failures (first failed job: {NAME}-{job})"
            ),
            at_s,
        )
    };
    match name {
        "succeeded" => (
            jobset(json!({
                "conditions": [condition("Completed", "AllJobsCompleted", "jobset completed successfully", 40)],
                "terminalState": "Completed",
                "replicatedJobsStatus": counts(&[("leader", 0, 1, 0, 0), ("workers", 0, 2, 0, 0)]),
            })),
            vec![
                child("leader", 0, 0, Pod1::Succeeded(5, 30)),
                child("workers", 0, 0, Pod1::Succeeded(4, 35)),
                child("workers", 1, 0, Pod1::Succeeded(6, 38)),
            ],
        ),
        "oom_killed_worker" => (
            jobset(json!({
                "conditions": [failed_by("workers-1", 31)],
                "terminalState": "Failed",
            })),
            vec![
                child("leader", 0, 0, Pod1::Running(5)),
                child("workers", 0, 0, Pod1::Running(6)),
                child("workers", 1, 0, Pod1::OomKilled(7, 29)),
            ],
        ),
        "max_restarts" => (
            jobset(json!({
                "conditions": [condition("Failed", "ReachedMaxRestarts", &format!("jobset failed due to reaching max number of restarts (first failed job: {NAME}-leader-0)"), 150)],
                "restarts": 1,
                "terminalState": "Failed",
            })),
            vec![
                child("leader", 0, 1, Pod1::Exited(105, 148, 3)),
                child("workers", 0, 1, Pod1::Running(104)),
            ],
        ),
        "running" => (
            jobset(
                json!({"replicatedJobsStatus": counts(&[("leader", 1, 0, 0, 1), ("workers", 0, 0, 0, 2)])}),
            ),
            vec![
                child("leader", 0, 0, Pod1::Running(5)),
                child("workers", 0, 0, Pod1::ImagePull(3)),
                child("workers", 1, 0, Pod1::None),
            ],
        ),
        "pulling" => (
            jobset(json!({})),
            vec![
                child("leader", 0, 0, Pod1::ImagePull(3)),
                child("workers", 0, 0, Pod1::None),
            ],
        ),
        "restarting" => (
            jobset(json!({"restarts": 1})),
            vec![
                child("leader", 0, 1, Pod1::None),
                child("workers", 0, 0, Pod1::Exited(5, 28, 1)),
            ],
        ),
        other => panic!("no scenario {other}"),
    }
}

const SCENARIOS: &[&str] = &[
    "succeeded",
    "oom_killed_worker",
    "max_restarts",
    "running",
    "pulling",
    "restarting",
];
const TERMINAL: &[&str] = &["succeeded", "oom_killed_worker", "max_restarts"];

fn scenario_views(name: &str) -> (JobSetView, Vec<ChildJobView>, Vec<PodView>) {
    let (object, children) = scenario(name);
    views(&object, &children)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn reading_arbitrary_statuses_never_panics(status in json_value(), now in shared::timestamp()) {
        let (_, children) = scenario("running");
        let (view, jobs, pods) = views(&jobset(status), &children);
        prop_assert!(map(&view, &jobs, &pods, Seen::Present, now).is_some());
    }

    #[test]
    fn the_order_of_jobs_and_pods_does_not_matter(
        name in select(SCENARIOS),
        seed in any::<u64>(),
        now in (0i64..4000).prop_map(at),
    ) {
        let (view, jobs, pods) = scenario_views(name);
        let expected = map(&view, &jobs, &pods, Seen::Present, now);
        let (mut jobs, mut pods) = (jobs, pods);
        // A deterministic shuffle from the seed.
        let mut state = seed | 1;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for i in (1..jobs.len()).rev() {
            jobs.swap(i, next(i + 1));
        }
        for i in (1..pods.len()).rev() {
            pods.swap(i, next(i + 1));
        }
        prop_assert_eq!(map(&view, &jobs, &pods, Seen::Present, now), expected);
    }

    /// Whoever carries out the mapping's actions looks again only at `recheck_at` when nothing
    /// changes: so no instant before it may answer otherwise, and without one, none at all.
    #[test]
    fn time_alone_changes_the_answer_only_at_the_recheck_instant(
        name in select(SCENARIOS),
        seen in shared::seen(),
        now in (-30i64..4000).prop_map(at),
        later in 1i64..100_000,
    ) {
        let (view, jobs, pods) = scenario_views(name);
        let Some(mapped) = map(&view, &jobs, &pods, seen, now) else {
            return Ok(());
        };
        if mapped.info.is_terminal() || mapped.action.is_some() {
            prop_assert_eq!(mapped.recheck_at, None);
            return Ok(());
        }
        let then = shared::before_recheck(now, later, mapped.recheck_at)
            .map_err(TestCaseError::fail)?;
        let again = map(&view, &jobs, &pods, seen, then);
        prop_assert_eq!(again.map(|m| m.info), Some(mapped.info), "at {}", then);
    }
}

/// When every scenario's story is over.
const SETTLED: i64 = 3600;

/// Something that may happen to a JobSet, its Jobs and pods after the outcome.
#[derive(Clone, Debug)]
enum Noise {
    /// The JobSet's deletion is requested (its TTL, kubeferry's retention, someone else).
    DeleteJobSet(i64),
    /// A cancel is requested (too late: the outcome stands).
    MarkCancel(i64),
    /// The child Jobs and their pods are gone, or can no longer be read: the state stays; the
    /// details of a failure come from the JobSet's own words instead.
    LoseChildren,
    /// The JobSet disappears.
    Vanish(bool),
    /// Time passes.
    Later(i64),
}

fn noise() -> impl Strategy<Value = Noise> {
    let t = || SETTLED..SETTLED + 3600;
    prop_oneof![
        t().prop_map(Noise::DeleteJobSet),
        t().prop_map(Noise::MarkCancel),
        Just(Noise::LoseChildren),
        any::<bool>().prop_map(Noise::Vanish),
        (0i64..86_400).prop_map(Noise::Later),
    ]
}

struct World {
    view: JobSetView,
    jobs: Vec<ChildJobView>,
    pods: Vec<PodView>,
    seen: Seen,
    now: Timestamp,
    lost_children: bool,
}

impl shared::World for World {
    type Noise = Noise;

    fn apply(&mut self, noise: &Noise) {
        match *noise {
            Noise::DeleteJobSet(t) => {
                self.view.deletion_timestamp.get_or_insert(at(t));
            }
            Noise::MarkCancel(t) => {
                self.view.cancel_mark.get_or_insert(CancelMark {
                    requested_at: Some(at(t)),
                    requested_by: None,
                });
            }
            Noise::LoseChildren => {
                self.jobs.clear();
                self.pods.clear();
                self.lost_children = true;
            }
            Noise::Vanish(final_state) => self.seen.vanish(final_state),
            Noise::Later(seconds) => self.now = later(self.now, seconds),
        }
    }

    fn map(&self) -> Option<ExecutionInfo> {
        map(&self.view, &self.jobs, &self.pods, self.seen, self.now).map(|m| m.info)
    }
}

fn state(info: &Option<ExecutionInfo>) -> Option<JobState> {
    info.as_ref().map(|i| i.state)
}

#[test]
fn the_terminal_scenarios_are_terminal() {
    for name in TERMINAL {
        let (view, jobs, pods) = scenario_views(name);
        let mapped = map(&view, &jobs, &pods, Seen::Present, at(SETTLED)).expect("mapped");
        assert!(mapped.info.is_terminal(), "{name}: {mapped:?}");
    }
}

shared::terminal_outcomes_survive_later_noise!(
    TERMINAL,
    noise(),
    |name: &&str, noises: &[Noise]| {
        let (view, jobs, pods) = scenario_views(name);
        let mut world = World {
            view,
            jobs,
            pods,
            seen: Seen::Present,
            now: at(SETTLED),
            lost_children: false,
        };
        after_each_noise(
            &mut world,
            noises,
            |_| false,
            |world, before, after, noise| {
                if world.lost_children {
                    prop_assert_eq!(state(after), state(before), "{} after {:?}", name, noise);
                } else {
                    prop_assert_eq!(after, before, "{} after {:?}", name, noise);
                }
                Ok(())
            },
        )
    }
);
