//! What the property tests of both kinds' mappings share.

use jiff::{SignedDuration, Timestamp};

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
