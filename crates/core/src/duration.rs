//! kubeferry's one duration grammar, read alike in job files, on the command line and in the service's configuration file.
//!
//! A duration is one or more parts `<whole number><unit>`, with units `d`, `h`, `m`, `s` and
//! `ms`, largest first and each at most once: `500ms`, `90s`, `10m`, `1h30m`, `2d`. There are no
//! fractions, signs or spaces (`1.5h`, `-5s`, `1 h` are refused), and a bare number is refused
//! with a hint, since whether `600` means seconds or milliseconds is a guess. Where Kubernetes
//! counts a field in whole seconds (a job file's `timeout`), the job file refuses `ms` parts
//! that do not add up to whole seconds.

use std::fmt;
use std::str::FromStr;

/// A duration written in kubeferry's grammar (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(std::time::Duration);

impl Duration {
    /// The duration as the standard library's.
    pub fn get(self) -> std::time::Duration {
        self.0
    }
}

impl From<std::time::Duration> for Duration {
    fn from(duration: std::time::Duration) -> Self {
        Duration(duration)
    }
}

impl From<Duration> for std::time::Duration {
    fn from(duration: Duration) -> Self {
        duration.0
    }
}

/// Why a text is not a duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text does not follow the grammar.
    #[error(
        "{0:?} is not a duration: write whole numbers with units d, h, m, s or ms, largest first, e.g. 500ms, 90s, 10m, 1h30m, 2d"
    )]
    Malformed(String),
    /// A number without a unit.
    #[error("{0:?} has no unit; write {0}s for seconds")]
    NoUnit(String),
    /// A negative duration.
    #[error("{0:?} is negative; a duration is zero or more")]
    Negative(String),
    /// More than fits.
    #[error("{0:?} is too long")]
    TooLong(String),
}

const UNITS: [(&str, u128); 5] = [
    ("ms", 1),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
];

impl FromStr for Duration {
    type Err = DurationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let malformed = || DurationError::Malformed(text.to_string());
        if text.starts_with('-') {
            return Err(DurationError::Negative(text.to_string()));
        }
        if text.is_empty() {
            return Err(malformed());
        }
        if text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(DurationError::NoUnit(text.to_string()));
        }
        let mut millis: u128 = 0;
        let mut last_unit = u128::MAX;
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(malformed());
            }
            let number: u128 = rest[..digits].parse().map_err(|_| malformed())?;
            rest = &rest[digits..];
            // `ms` first: `m` alone would take its first letter.
            let (unit, size) = UNITS
                .iter()
                .find(|(unit, _)| rest.starts_with(unit))
                .ok_or_else(malformed)?;
            if *size >= last_unit {
                return Err(malformed());
            }
            last_unit = *size;
            rest = &rest[unit.len()..];
            millis = number
                .checked_mul(*size)
                .and_then(|part| millis.checked_add(part))
                .ok_or_else(|| DurationError::TooLong(text.to_string()))?;
        }
        let millis = u64::try_from(millis).map_err(|_| DurationError::TooLong(text.to_string()))?;
        Ok(Duration(std::time::Duration::from_millis(millis)))
    }
}

/// Writes the duration in the grammar, largest unit first (`1h30m`, `500ms`, `0s`); what it
/// writes reads back as the same duration, to the millisecond.
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut millis = self.0.as_millis();
        if millis == 0 {
            return f.write_str("0s");
        }
        for (unit, size) in [
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1_000),
            ("ms", 1),
        ] {
            if millis >= size {
                write!(f, "{}{unit}", millis / size)?;
                millis %= size;
            }
        }
        Ok(())
    }
}

impl serde::Serialize for Duration {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Duration {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses `text` in the grammar: the command line's value parser and the configuration file's
/// reader.
pub fn parse(text: &str) -> Result<std::time::Duration, DurationError> {
    text.parse::<Duration>().map(Duration::get)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as Std;

    #[test]
    fn the_grammar_reads_whole_parts_largest_first() {
        let cases = [
            ("90s", Std::from_secs(90)),
            ("10m", Std::from_secs(600)),
            ("60m", Std::from_secs(3600)),
            ("1h30m", Std::from_secs(5400)),
            ("2d", Std::from_secs(172_800)),
            ("1d2h3m4s", Std::from_secs(93_784)),
            ("0s", Std::ZERO),
            ("500ms", Std::from_millis(500)),
            ("1s500ms", Std::from_millis(1500)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn everything_else_is_refused_with_a_reason() {
        for bad in [
            "", "m", "1x", "1.5h", "1.5s", "1m1h", "1s1s", "1ms1s", "1w", "h", "1 h", " 1h", "1h ",
            "1h30", "PT1H", "1 hour", "later",
        ] {
            assert!(
                matches!(parse(bad), Err(DurationError::Malformed(_))),
                "{bad:?}: {:?}",
                parse(bad)
            );
        }
        assert_eq!(parse("600"), Err(DurationError::NoUnit("600".into())));
        assert!(parse("600").unwrap_err().to_string().contains("600s"));
        assert!(parse("-5s").unwrap_err().to_string().contains("negative"));
        assert!(matches!(
            parse("99999999999999999999d"),
            Err(DurationError::TooLong(_))
        ));
    }

    #[test]
    fn what_is_written_reads_back() {
        for millis in [
            0u64, 1, 999, 1000, 1500, 60_000, 5_400_000, 93_784_000, 90_061_001,
        ] {
            let duration = Duration::from(Std::from_millis(millis));
            let text = duration.to_string();
            assert_eq!(text.parse::<Duration>(), Ok(duration), "{text}");
        }
        assert_eq!(Duration::from(Std::from_secs(5400)).to_string(), "1h30m");
        assert_eq!(Duration::from(Std::from_millis(500)).to_string(), "500ms");
    }
}
