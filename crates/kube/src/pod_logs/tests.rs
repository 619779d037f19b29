use super::*;

#[test]
fn last_bytes_never_splits_a_character() {
    assert_eq!(last_bytes("hello", 10), "hello");
    assert_eq!(last_bytes("hello", 3), "llo");
    assert_eq!(last_bytes("hello", 0), "");
    // "é" is two bytes, "€" three.
    let text = "aé€b";
    assert_eq!(text.len(), 7);
    assert_eq!(last_bytes(text, 5), "€b");
    assert_eq!(last_bytes(text, 4), "€b");
    assert_eq!(last_bytes(text, 3), "b");
    assert_eq!(last_bytes(text, 6), "é€b");
    for max in 0..=text.len() {
        let cut = last_bytes(text, max);
        assert!(cut.len() <= max);
        assert!(text.ends_with(cut));
    }
}

#[test]
fn timestamps_split_off() {
    let (time, text) = split_timestamp("2026-01-02T03:04:05.123456789Z hello world").unwrap();
    assert_eq!(time.to_string(), "2026-01-02T03:04:05.123456789Z");
    assert_eq!(text, "hello world");
    let (_, empty) = split_timestamp("2026-01-02T03:04:05Z").unwrap();
    assert_eq!(empty, "");
    assert!(split_timestamp("no time here").is_none());
}

#[test]
fn resumed_streams_skip_lines_already_delivered() {
    let mut resume = Resume::default();
    let first = [
        "2026-01-02T03:04:04.5Z a",
        "2026-01-02T03:04:05.1Z b",
        "2026-01-02T03:04:05.1Z c",
    ];
    let delivered: Vec<_> = first.iter().filter_map(|l| resume.accept(l)).collect();
    assert_eq!(delivered, ["a", "b", "c"]);

    // The stream broke; it re-opens at the second of the last line.
    let since = resume.since().unwrap();
    assert_eq!(since.to_string(), "2026-01-02T03:04:05Z");
    let replay = [
        "2026-01-02T03:04:05.1Z b",
        "2026-01-02T03:04:05.1Z c",
        "2026-01-02T03:04:05.1Z d",
        "2026-01-02T03:04:05.9Z e",
    ];
    let delivered: Vec<_> = replay.iter().filter_map(|l| resume.accept(l)).collect();
    assert_eq!(delivered, ["d", "e"]);

    // A second break: only e is at the last time.
    resume.since();
    let replay = ["2026-01-02T03:04:05.9Z e", "2026-01-02T03:04:06Z f"];
    let delivered: Vec<_> = replay.iter().filter_map(|l| resume.accept(l)).collect();
    assert_eq!(delivered, ["f"]);
}

#[test]
fn identical_lines_at_the_same_time_are_all_delivered() {
    let mut resume = Resume::default();
    let lines = ["2026-01-02T03:04:05Z x", "2026-01-02T03:04:05Z x"];
    let delivered: Vec<_> = lines.iter().filter_map(|l| resume.accept(l)).collect();
    assert_eq!(delivered, ["x", "x"]);
}
