//! Tests of the object store: versions, history replay, snapshots at a resourceVersion.

use serde_json::json;

use super::*;

fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}})
}

#[test]
fn versions_increase_and_history_replays_strictly_after() {
    let store = Store::new(100);
    let a = ObjectKey::new(pods(), "default", "a");
    let b = ObjectKey::new(pods(), "default", "b");
    let created = store.create(&a, pod("a")).expect("create a");
    assert_eq!(meta::resource_version(&created), Some(1));
    store.create(&b, pod("b")).expect("create b");
    let written = store
        .update::<StoreError>(&a, |cur| {
            let mut next = (**cur).clone();
            next["spec"] = json!({"x": 1});
            Ok(Change::Replace(next))
        })
        .expect("update a");
    assert_eq!(meta::resource_version(&written.object), Some(3));
    assert!(matches!(
        store.create(&a, pod("a")),
        Err(StoreError::AlreadyExists(_))
    ));

    let (replay, _rx) = store.subscribe_from(&pods(), 1).expect("in history");
    let rvs: Vec<u64> = replay.iter().map(|e| e.rv).collect();
    assert_eq!(rvs, vec![2, 3]);
    assert_eq!(replay[1].event_type, EventType::Modified);
}

#[test]
fn history_is_bounded_and_too_old_versions_are_refused() {
    let store = Store::new(2);
    for name in ["a", "b", "c", "d"] {
        store
            .create(&ObjectKey::new(pods(), "default", name), pod(name))
            .expect("create");
    }
    assert!(matches!(
        store.subscribe_from(&pods(), 1),
        Err(StoreError::TooOld {
            requested: 1,
            oldest: 3
        })
    ));
    assert_eq!(store.subscribe_from(&pods(), 2).expect("kept").0.len(), 2);
    store.compact();
    assert!(store.subscribe_from(&pods(), 3).is_err());
    assert!(store.subscribe_from(&pods(), 4).is_ok());
}

#[test]
fn list_at_rebuilds_an_earlier_snapshot() {
    let store = Store::new(100);
    let a = ObjectKey::new(pods(), "default", "a");
    store.create(&a, pod("a")).expect("create a");
    store
        .create(&ObjectKey::new(pods(), "default", "b"), pod("b"))
        .expect("create b");
    store.remove(&a).expect("remove a");
    let now: Vec<String> = store
        .list(&pods(), None)
        .0
        .iter()
        .map(|o| meta::name(o).to_string())
        .collect();
    assert_eq!(now, vec!["b"]);
    let then: Vec<String> = store
        .list_at(&pods(), None, 1)
        .expect("in history")
        .iter()
        .map(|o| meta::name(o).to_string())
        .collect();
    assert_eq!(then, vec!["a"]);
}

#[test]
fn owner_index_follows_owner_references() {
    let store = Store::new(100);
    let mut child = pod("child");
    child["metadata"]["ownerReferences"] =
        json!([{"uid": "owner-1", "name": "j", "kind": "Job", "apiVersion": "batch/v1"}]);
    let key = ObjectKey::new(pods(), "default", "child");
    store.create(&key, child).expect("create");
    assert_eq!(store.dependents_of("owner-1"), vec![key.clone()]);
    assert_eq!(store.key_of_uid("uid-child"), Some(key.clone()));
    store.remove(&key).expect("remove");
    assert!(store.dependents_of("owner-1").is_empty());
    assert_eq!(store.key_of_uid("uid-child"), None);
}

#[test]
fn generated_names_are_cut_on_character_boundaries() {
    let long = "é".repeat(40);
    let name = meta::generate_name(&long);
    assert_eq!(name.chars().count(), 29 + 5);
    assert_eq!(meta::generate_name("job-").len(), 9);
}

#[test]
fn human_durations_read_like_kubectl() {
    let table = [
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (50 * 3600, "2d2h"),
        (400 * 86400, "400d"),
    ];
    for (seconds, want) in table {
        assert_eq!(meta::human_duration(seconds), want, "{seconds}");
    }
}

#[test]
fn followers_see_every_change_however_far_behind() {
    let store = Store::new(10);
    let mut follower = store.follow();
    let mut lagging = store.subscribe();
    let changes = BROADCAST_CAPACITY + 10;
    for i in 0..changes {
        let name = format!("p{i}");
        store
            .create(&ObjectKey::new(pods(), "default", &name), pod(&name))
            .expect("create");
    }
    assert!(matches!(
        lagging.try_recv(),
        Err(broadcast::error::TryRecvError::Lagged(_))
    ));
    let mut rvs = Vec::new();
    while let Ok(event) = follower.try_recv() {
        rvs.push(event.rv);
    }
    assert_eq!(rvs, (1..=changes as u64).collect::<Vec<_>>());
    drop(follower);
    store
        .create(&ObjectKey::new(pods(), "default", "last"), pod("last"))
        .expect("create");
    assert!(store.inner.lock().followers.is_empty());
}
