//! What the property tests of both kinds' mappings share.

use jiff::{SignedDuration, Timestamp};
use kubeferry_core::ExecutionInfo;
use kubeferry_core::container::CancelMark;
use kubeferry_core::observation::ManagedMeta;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;

use crate::common::{Seen, at};

/// An instant `later` seconds after `now`, but before `recheck` when the mapping named one;
/// `Err` when that instant is not after `now` (a recheck must be to come).
pub fn before_recheck(
    now: Timestamp,
    later: i64,
    recheck: Option<Timestamp>,
) -> Result<Timestamp, String> {
    let then = now + SignedDuration::from_secs(later);
    match recheck {
        Some(recheck) if recheck <= now => Err(format!("{recheck} is not after {now}")),
        Some(recheck) => Ok(then.min(recheck - SignedDuration::from_nanos(1))),
        None => Ok(then),
    }
}

/// A timestamp around the fixtures' story, now and then at the ends of the range.
pub fn timestamp() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        8 => (-30i64..4000).prop_map(at),
        1 => Just(Timestamp::UNIX_EPOCH),
        1 => Just(Timestamp::MAX),
    ]
}

/// One of `words`, or nothing.
pub fn text(words: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    proptest::option::of(select(words).prop_map(str::to_string))
}

/// Present twice as often as gone.
pub fn seen() -> impl Strategy<Value = Seen> {
    prop_oneof![
        2 => Just(Seen::Present),
        1 => any::<bool>().prop_map(|final_state| Seen::Vanished { final_state }),
    ]
}

/// The metadata of an arbitrary managed object named `name`.
pub fn managed_meta(
    name: &str,
    uid: &str,
    (created_at, deletion_timestamp): (Option<Timestamp>, Option<Timestamp>),
    cancel: Option<Option<Timestamp>>,
    recorded_outcome: Option<Result<ExecutionInfo, String>>,
) -> ManagedMeta {
    ManagedMeta {
        name: name.to_string(),
        namespace: "ns".to_string(),
        uid: uid.to_string(),
        job_id: Some("job".to_string()),
        spec_hash: None,
        keep_log: None,
        resource_version: None,
        created_at,
        deletion_timestamp,
        held: cancel.map(|_| 0),
        cancel_mark: cancel.map(|requested_at| CancelMark {
            requested_at,
            requested_by: None,
        }),
        recorded_outcome,
        kept_outcome: None,
        kept_annotated: false,
    }
}

/// `seconds` after `now` (`now` itself beyond the representable range).
pub fn later(now: Timestamp, seconds: i64) -> Timestamp {
    now.checked_add(SignedDuration::from_secs(seconds))
        .unwrap_or(now)
}

/// Asserts that every `expected` name is among `names`.
#[track_caller]
pub fn assert_covers<'a>(names: impl IntoIterator<Item = &'a str>, expected: &[&str]) {
    let names: Vec<&str> = names.into_iter().collect();
    for expected in expected {
        assert!(
            names.contains(expected),
            "{expected} missing from {names:?}"
        );
    }
}

/// A job's objects and time, as noise changes them after its outcome.
pub trait World {
    /// What may happen after the outcome.
    type Noise: std::fmt::Debug;

    /// Lets `noise` happen.
    fn apply(&mut self, noise: &Self::Noise);

    /// The status the mapping reports now.
    fn map(&self) -> Option<ExecutionInfo>;
}

/// Checks that `world`'s answer is terminal, then lets each of `noises` happen that `skip`
/// does not leave out, and checks the answer after each with `check(world, before, after,
/// noise)`.
pub fn after_each_noise<W: World>(
    world: &mut W,
    noises: &[W::Noise],
    skip: impl Fn(&W::Noise) -> bool,
    check: impl Fn(
        &W,
        &Option<ExecutionInfo>,
        &Option<ExecutionInfo>,
        &W::Noise,
    ) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let before = world.map();
    prop_assert!(before.as_ref().is_some_and(ExecutionInfo::is_terminal));
    for noise in noises {
        if skip(noise) {
            continue;
        }
        world.apply(noise);
        check(world, &before, &world.map(), noise)?;
    }
    Ok(())
}

/// Defines the property `terminal_outcomes_survive_later_noise`: for a case picked from
/// `$cases` and one to five noises from `$noise`, `$check(case, noises)` holds. A macro, so
/// that proptest keeps each kind's regressions with its own test file.
macro_rules! terminal_outcomes_survive_later_noise {
    ($cases:expr, $noise:expr, $check:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(400))]

            #[test]
            fn terminal_outcomes_survive_later_noise(
                pick in any::<prop::sample::Index>(),
                noises in proptest::collection::vec($noise, 1..6),
            ) {
                let cases = $cases;
                ($check)(&cases[pick.index(cases.len())], &noises)?;
            }
        }
    };
}
pub(crate) use terminal_outcomes_survive_later_noise;
