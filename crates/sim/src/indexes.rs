//! Completion indexes of Indexed Jobs: the compressed interval strings of
//! `status.completedIndexes` and `status.failedIndexes` (`1,3-5,7`), the per-pod index and
//! failure-count annotations, and the `successPolicy` rules (KEP-3850, KEP-3998).

use std::collections::BTreeSet;

use serde_json::Value;

/// The annotation and label with a pod's completion index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The annotation with the number of counted failures of the pod's index before it.
pub const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// The annotation with the number of failures of the pod's index the pod failure policy ignored.
pub const INDEX_IGNORED_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-ignored-failure-count";
/// The variable every container of an Indexed Job's pod gets.
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// Reads an interval string as the Job controller does: corrupt intervals are skipped,
/// intervals from `completions` on are dropped and the last one is clipped.
pub fn parse(text: &str, completions: i64) -> BTreeSet<i64> {
    let mut out = BTreeSet::new();
    if text.is_empty() {
        return out;
    }
    for interval in text.split(',') {
        let mut limits = interval.splitn(2, '-');
        let Some(Ok(first)) = limits.next().map(|f| f.trim().parse::<i64>()) else {
            continue;
        };
        if first >= completions {
            break;
        }
        let last = match limits.next() {
            Some(l) => match l.trim().parse::<i64>() {
                Ok(l) => l.min(completions - 1),
                Err(_) => continue,
            },
            None => first,
        };
        out.extend(first.max(0)..=last);
    }
    out
}

/// The compressed form: runs of three or more as `first-last`, pairs as `a,b`.
pub fn format(indexes: &BTreeSet<i64>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        parts.push(match last - first {
            0 => first.to_string(),
            1 => format!("{first},{last}"),
            _ => format!("{first}-{last}"),
        });
    }
    parts.join(",")
}

/// Whether an interval string is well formed for `completions` indexes: the API server's
/// check of `successPolicy.rules[].succeededIndexes` (ordered, non-overlapping, in range).
pub fn validate(text: &str, completions: Option<i64>) -> Result<(), String> {
    let mut previous: Option<i64> = None;
    for interval in text.split(',') {
        let mut limits = interval.splitn(2, '-');
        let number = |s: Option<&str>| -> Result<i64, String> {
            s.unwrap_or("")
                .parse::<i64>()
                .map_err(|_| format!("error parsing {interval:?}: not a number"))
        };
        let first = number(limits.next())?;
        let last = match limits.next() {
            Some(l) => number(Some(l))?,
            None => first,
        };
        if first < 0 || last < first {
            return Err(format!("{interval:?} is not a valid interval"));
        }
        if let Some(c) = completions
            && last >= c
        {
            return Err(format!(
                "too large totalIndexes: {last} must be less than completions {c}"
            ));
        }
        if previous.is_some_and(|p| first <= p) {
            return Err(format!(
                "overlapping or out of order intervals at {interval:?}"
            ));
        }
        previous = Some(last);
    }
    Ok(())
}

/// A pod's completion index, when it has a valid one.
pub fn of_pod(pod: &Value) -> Option<i64> {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(COMPLETION_INDEX))
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|i| *i >= 0)
}

/// A numeric annotation of a pod (0 when absent or invalid, as the controller reads it).
pub fn count_of(pod: &Value, annotation: &str) -> i64 {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(annotation))
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|n| (0..=i64::from(i32::MAX)).contains(n))
        .unwrap_or(0)
}

/// The message of the first `successPolicy` rule the succeeded indexes meet.
pub fn match_success_policy(
    policy: Option<&Value>,
    completions: i64,
    succeeded: &BTreeSet<i64>,
) -> Option<String> {
    let rules = policy?.get("rules")?.as_array()?;
    if succeeded.is_empty() {
        return None;
    }
    for (index, rule) in rules.iter().enumerate() {
        let count = rule.get("succeededCount").and_then(Value::as_i64);
        let matched = match rule.get("succeededIndexes").and_then(Value::as_str) {
            Some(text) => {
                let required = parse(text, completions);
                if required.is_empty() {
                    continue;
                }
                let done = required.intersection(succeeded).count() as i64;
                match count {
                    Some(c) => done >= c,
                    None => done == required.len() as i64,
                }
            }
            None => count.is_some_and(|c| succeeded.len() as i64 >= c),
        };
        if matched {
            return Some(format!("Matched rules at index {index}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(items: &[i64]) -> BTreeSet<i64> {
        items.iter().copied().collect()
    }

    #[test]
    fn intervals_are_written_as_the_controller_writes_them() {
        assert_eq!(format(&set(&[])), "");
        assert_eq!(format(&set(&[0])), "0");
        assert_eq!(format(&set(&[0, 1])), "0,1");
        assert_eq!(format(&set(&[1, 3, 4, 5, 7])), "1,3-5,7");
        assert_eq!(format(&set(&[0, 1, 2, 9, 10])), "0-2,9,10");
    }

    #[test]
    fn intervals_are_read_back_clipped_to_the_completions() {
        assert_eq!(parse("1,3-5,7", 10), set(&[1, 3, 4, 5, 7]));
        assert_eq!(parse("0,1", 10), set(&[0, 1]));
        assert_eq!(parse("2-8", 5), set(&[2, 3, 4]));
        assert_eq!(parse("1,x,6,2", 5), set(&[1]));
        assert_eq!(parse("", 5), set(&[]));
    }

    #[test]
    fn succeeded_indexes_are_validated_like_the_api_server() {
        assert!(validate("0-2,4", Some(5)).is_ok());
        assert!(validate("0-5", Some(5)).is_err());
        assert!(validate("3,1", Some(5)).is_err());
        assert!(validate("1-2,2", Some(5)).is_err());
        assert!(validate("a", Some(5)).is_err());
        assert!(validate("2-1", None).is_err());
    }

    #[test]
    fn success_rules_match_in_order() {
        let policy = json!({"rules": [
            {"succeededIndexes": "0-2", "succeededCount": 4},
            {"succeededIndexes": "0,3"},
            {"succeededCount": 3},
        ]});
        assert_eq!(
            match_success_policy(Some(&policy), 10, &set(&[0, 3])),
            Some("Matched rules at index 1".into())
        );
        assert_eq!(
            match_success_policy(Some(&policy), 10, &set(&[5, 6, 7])),
            Some("Matched rules at index 2".into())
        );
        assert_eq!(match_success_policy(Some(&policy), 10, &set(&[0, 5])), None);
        assert_eq!(match_success_policy(None, 10, &set(&[0])), None);
        let subset = json!({"rules": [{"succeededIndexes": "1-4", "succeededCount": 3}]});
        assert_eq!(
            match_success_policy(Some(&subset), 10, &set(&[1, 2, 4])),
            Some("Matched rules at index 0".into())
        );
    }

    #[test]
    fn pod_indexes_and_counts_come_from_annotations() {
        let pod = json!({"metadata": {"annotations": {
            COMPLETION_INDEX: "3", INDEX_FAILURE_COUNT: "2", INDEX_IGNORED_FAILURE_COUNT: "-1"
        }}});
        assert_eq!(of_pod(&pod), Some(3));
        assert_eq!(count_of(&pod, INDEX_FAILURE_COUNT), 2);
        assert_eq!(count_of(&pod, INDEX_IGNORED_FAILURE_COUNT), 0);
        assert_eq!(of_pod(&json!({"metadata": {}})), None);
    }
}
