//! Sets of completion indexes in Kubernetes' interval notation (`"0,3-5,7"`): the form of an
//! Indexed Job's `status.completedIndexes` and `status.failedIndexes` and of a success policy
//! rule's `succeededIndexes` (Kubernetes API reference, `JobStatus` and `SuccessPolicyRule`).

use std::fmt;

/// A set of indexes as ascending, non-overlapping, inclusive intervals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexSet {
    intervals: Vec<(u32, u32)>,
}

impl IndexSet {
    /// Parses an interval string: comma-separated indexes and `first-last` ranges, in
    /// ascending order, none overlapping another. The empty string is the empty set.
    pub fn parse(text: &str) -> Result<IndexSet, String> {
        let mut intervals: Vec<(u32, u32)> = Vec::new();
        if text.trim().is_empty() {
            return Ok(IndexSet { intervals });
        }
        for part in text.split(',') {
            let number = |s: &str| {
                s.parse::<u32>().map_err(|_| {
                    format!("{part:?} is not an index or a range of indexes such as 3 or 3-5")
                })
            };
            let (first, last) = match part.split_once('-') {
                Some((first, last)) => (number(first)?, number(last)?),
                None => {
                    let index = number(part)?;
                    (index, index)
                }
            };
            if first > last {
                return Err(format!("{part:?}: the first index is above the last"));
            }
            if let Some(&(_, previous)) = intervals.last()
                && first <= previous
            {
                return Err(format!(
                    "{part:?} overlaps or comes before the index {previous} listed earlier; list indexes in ascending order"
                ));
            }
            intervals.push((first, last));
        }
        Ok(IndexSet { intervals })
    }

    /// How many indexes the set holds.
    pub fn len(&self) -> u64 {
        self.intervals
            .iter()
            .map(|&(first, last)| u64::from(last - first) + 1)
            .sum()
    }

    /// Whether the set holds no index.
    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// Whether the set holds `index`.
    pub fn contains(&self, index: u32) -> bool {
        self.intervals
            .iter()
            .any(|&(first, last)| (first..=last).contains(&index))
    }

    /// The largest index in the set.
    pub fn max(&self) -> Option<u32> {
        self.intervals.last().map(|&(_, last)| last)
    }

    /// The indexes in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.intervals
            .iter()
            .flat_map(|&(first, last)| first..=last)
    }
}

impl fmt::Display for IndexSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(first, last)) in self.intervals.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if first == last {
                write!(f, "{first}")?;
            } else {
                write!(f, "{first}-{last}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_job_controller_writes() {
        let set = IndexSet::parse("0,3-5,7").unwrap();
        assert_eq!(set.len(), 5);
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 3, 4, 5, 7]);
        assert!(set.contains(4) && !set.contains(6));
        assert_eq!(set.max(), Some(7));
        assert_eq!(set.to_string(), "0,3-5,7");
        assert!(IndexSet::parse("").unwrap().is_empty());
        assert_eq!(IndexSet::parse("1-1").unwrap().len(), 1);
    }

    #[test]
    fn refuses_what_kubernetes_refuses() {
        for (text, expected) in [
            ("a", "\"a\" is not an index"),
            ("1,,2", "\"\" is not an index"),
            ("-1", "\"-1\" is not an index"),
            ("5-3", "the first index is above the last"),
            ("3,1", "\"1\" overlaps or comes before the index 3"),
            ("1-4,4", "\"4\" overlaps or comes before the index 4"),
            (" 1", "\" 1\" is not an index"),
        ] {
            let error = IndexSet::parse(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
