use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

use super::*;

/// Config maps stand in for any resource: the "job" is the `job` label, the view the `v` key.
fn object(name: &str, job: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("job".to_string(), job.to_string())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("v".to_string(), value.to_string())].into()),
        ..ConfigMap::default()
    }
}

fn view(object: &ConfigMap) -> Option<Entry<String>> {
    Some(Entry {
        name: object.metadata.name.clone()?,
        job: object.metadata.labels.as_ref()?.get("job")?.clone(),
        view: object.data.as_ref()?.get("v")?.clone(),
    })
}

fn run(state: &RwLock<State<String>>, event: watcher::Event<ConfigMap>) -> Vec<String> {
    apply(state, event, &view, &ReflectorSettings::default())
}

#[test]
fn initial_list_syncs_and_indexes_by_job() {
    let state = RwLock::new(State::default());
    run(&state, watcher::Event::Init);
    assert_eq!(
        run(&state, watcher::Event::InitApply(object("p1", "j1", "a"))),
        ["j1"]
    );
    run(&state, watcher::Event::InitApply(object("p2", "j1", "b")));
    run(&state, watcher::Event::InitApply(object("p3", "j2", "c")));
    assert!(!read(&state).health.synced);
    run(&state, watcher::Event::InitDone);
    let state = read(&state);
    assert!(state.health.synced);
    assert_eq!(state.by_job.0["j1"].len(), 2);
    assert_eq!(state.by_job.0["j2"].len(), 1);
}

#[test]
fn an_object_named_as_its_job_is_found_without_an_index_entry() {
    let state = RwLock::new(State::default());
    run(&state, watcher::Event::Apply(object("j1", "j1", "the job")));
    run(&state, watcher::Event::Apply(object("p1", "j1", "its pod")));
    run(
        &state,
        watcher::Event::Apply(object("j2", "j3", "another job's")),
    );
    {
        let state = read(&state);
        assert_eq!(state.by_job.0["j1"], ["p1"]);
        let views: Vec<&str> = entries_of(&state, "j1").map(|e| e.view.as_str()).collect();
        assert_eq!(views, ["the job", "its pod"]);
        // An object named as a job it does not belong to is not that job's.
        assert_eq!(entries_of(&state, "j2").count(), 0);
        assert_eq!(entries_of(&state, "j3").count(), 1);
    }
    run(&state, watcher::Event::Delete(object("j1", "j1", "ended")));
    run(&state, watcher::Event::Delete(object("p1", "j1", "gone")));
    let state = read(&state);
    assert!(!state.by_job.0.contains_key("j1"));
    let gone: Vec<&str> = tombstones_of(&state, "j1")
        .map(|t| t.last.as_str())
        .collect();
    assert_eq!(gone, ["ended", "gone"]);
    assert_eq!(entries_of(&state, "j1").count(), 0);
}

#[test]
fn deleted_events_leave_the_final_state() {
    let state = RwLock::new(State::default());
    run(&state, watcher::Event::Apply(object("p1", "j1", "running")));
    let changed = run(&state, watcher::Event::Delete(object("p1", "j1", "final")));
    assert_eq!(changed, ["j1"]);
    let state = read(&state);
    assert!(state.objects.is_empty());
    assert!(state.by_job.0.is_empty());
    let tombstone = &state.tombstones["p1"];
    assert_eq!(tombstone.departure, Departure::Deleted);
    assert_eq!(tombstone.last, "final");
    assert_eq!(tombstone.job, "j1");
}

#[test]
fn objects_missing_from_a_relist_vanish_with_their_last_seen_state() {
    let state = RwLock::new(State::default());
    run(&state, watcher::Event::Apply(object("p1", "j1", "seen")));
    run(&state, watcher::Event::Apply(object("p2", "j2", "kept")));
    // A 410 made the watcher relist; p1 was deleted meanwhile.
    run(&state, watcher::Event::Init);
    run(
        &state,
        watcher::Event::InitApply(object("p2", "j2", "kept2")),
    );
    let changed = run(&state, watcher::Event::InitDone);
    assert_eq!(changed, ["j1"]);
    let state = read(&state);
    assert_eq!(state.objects["p2"].view, "kept2");
    let tombstone = &state.tombstones["p1"];
    assert_eq!(tombstone.departure, Departure::Vanished);
    assert_eq!(tombstone.last, "seen");
}

#[test]
fn a_recreated_object_loses_its_tombstone() {
    let state = RwLock::new(State::default());
    run(&state, watcher::Event::Apply(object("p1", "j1", "a")));
    run(&state, watcher::Event::Delete(object("p1", "j1", "a")));
    run(&state, watcher::Event::Apply(object("p1", "j1", "b")));
    let state = read(&state);
    assert!(!state.tombstones.contains_key("p1"));
    assert_eq!(state.objects["p1"].view, "b");
}

#[test]
fn tombstones_are_bounded() {
    let settings = ReflectorSettings {
        max_tombstones: 3,
        ..ReflectorSettings::default()
    };
    let state = RwLock::new(State::default());
    for i in 0..10 {
        let name = format!("p{i}");
        apply(
            &state,
            watcher::Event::Apply(object(&name, "j", "x")),
            &view,
            &settings,
        );
        apply(
            &state,
            watcher::Event::Delete(object(&name, "j", "x")),
            &view,
            &settings,
        );
    }
    let state = read(&state);
    assert_eq!(state.tombstones.len(), 3);
    for kept in ["p7", "p8", "p9"] {
        assert!(state.tombstones.contains_key(kept), "{kept}");
    }
    assert_eq!(
        state.tombstones_by_job.0["j"].len(),
        3,
        "the index is pruned too"
    );
}

#[test]
fn ignored_objects_change_nothing() {
    let state = RwLock::new(State::default());
    let mut unlabelled = object("p1", "j1", "a");
    unlabelled.metadata.labels = None;
    assert!(run(&state, watcher::Event::Apply(unlabelled)).is_empty());
    assert!(read(&state).objects.is_empty());
}

#[test]
fn tombstones_are_found_by_job_until_the_object_returns() {
    let state = RwLock::new(State::default());
    run(&state, watcher::Event::Apply(object("p1", "j1", "running")));
    run(&state, watcher::Event::Apply(object("p2", "j1", "running")));
    run(&state, watcher::Event::Delete(object("p1", "j1", "final")));
    {
        let state = read(&state);
        let names: Vec<&String> = state.tombstones_by_job.0["j1"].iter().collect();
        assert_eq!(names, ["p1"]);
    }
    // The same name again (a new object): its tombstone goes, and so does the index entry.
    run(&state, watcher::Event::Apply(object("p1", "j1", "again")));
    let state = read(&state);
    assert!(state.tombstones.is_empty());
    assert!(state.tombstones_by_job.0.is_empty());
}

#[test]
fn refusals_name_the_verb_the_server_refused() {
    use kube::core::Status;
    let forbidden = || kube::Error::Api(Status::failure("no", "Forbidden").with_code(403).boxed());
    let other = || {
        kube::Error::Api(
            Status::failure("down", "InternalError")
                .with_code(500)
                .boxed(),
        )
    };
    let verb = |error: watcher::Error| refusal_of(&error).map(|(verb, _)| verb);
    assert_eq!(
        verb(watcher::Error::InitialListFailed(forbidden())),
        Some("list")
    );
    assert_eq!(
        verb(watcher::Error::WatchStartFailed(forbidden())),
        Some("watch")
    );
    assert_eq!(
        verb(watcher::Error::WatchFailed(forbidden())),
        Some("watch")
    );
    let status = Status::failure("no", "Forbidden").with_code(403).boxed();
    assert_eq!(verb(watcher::Error::WatchError(status)), Some("watch"));
    assert_eq!(verb(watcher::Error::InitialListFailed(other())), None);
    assert_eq!(verb(watcher::Error::NoResourceVersion), None);

    let mut health = WatchHealth::default();
    assert!(health.refused().is_none());
    health.forbidden = Some(Refusal {
        verb: "watch",
        message: "no".into(),
        at: Instant::now(),
    });
    assert_eq!(health.refused().map(|r| r.verb), Some("watch"));
}

#[test]
fn an_event_ends_a_refusal() {
    let state = RwLock::new(State::default());
    write(&state).health.forbidden = Some(Refusal {
        verb: "watch",
        message: "no".into(),
        at: Instant::now(),
    });
    run(&state, watcher::Event::Apply(object("p1", "j1", "a")));
    assert!(read(&state).health.forbidden.is_none());
}

#[test]
fn a_failure_is_over_only_once_the_server_has_answered() {
    let state = RwLock::new(State::default());
    let failing = |state: &RwLock<State<String>>| read(state).health.failing.is_some();
    // A restart after a failure: the relist is asked for, its objects come, then it completes.
    write(&state).health.failing = Some("connection refused".into());
    run(&state, watcher::Event::Init);
    assert!(failing(&state), "nothing answered yet");
    run(&state, watcher::Event::InitApply(object("p1", "j1", "a")));
    assert!(failing(&state), "the list has not completed");
    run(&state, watcher::Event::InitDone);
    assert!(!failing(&state));
    // A watch event is an answer too.
    write(&state).health.failing = Some("reset".into());
    run(&state, watcher::Event::Apply(object("p1", "j1", "b")));
    assert!(!failing(&state));
}
