//! Watch conformance: replay strictly after a resourceVersion, 410 for a too old one, bookmarks,
//! timeoutSeconds, sendInitialEvents, selector-aware ADDED/DELETED, and kube-rs watchers
//! recovering from expired histories, cut watches and restarts.

mod common;

use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubeferry_sim::SimConfig;
use serde_json::json;

use common::{start, start_with};

fn cm(name: &str, label: &str) -> ConfigMap {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"x": label}}}))
        .expect("a config map")
}

async fn next_event<S>(stream: &mut S) -> WatchEvent<ConfigMap>
where
    S: Stream<Item = Result<WatchEvent<ConfigMap>, kube::Error>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("an event in time")
        .expect("the stream goes on")
        .expect("a decodable event")
}

fn describe(event: &WatchEvent<ConfigMap>) -> String {
    match event {
        WatchEvent::Added(c) => format!("ADDED {}", c.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Modified(c) => {
            format!("MODIFIED {}", c.metadata.name.clone().unwrap_or_default())
        }
        WatchEvent::Deleted(c) => {
            format!("DELETED {}", c.metadata.name.clone().unwrap_or_default())
        }
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(s) => format!("ERROR {} {}", s.code, s.reason),
    }
}

#[tokio::test]
async fn replays_strictly_after_the_version_and_follows_selectors() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let a = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("a");
    cms.create(&PostParams::default(), &cm("b", "1"))
        .await
        .expect("b");
    let rv = a.metadata.resource_version.clone().expect("rv");
    let mut all = Box::pin(
        cms.watch(&WatchParams::default(), &rv)
            .await
            .expect("watch"),
    );
    assert_eq!(describe(&next_event(&mut all).await), "ADDED b");

    let mut selected = Box::pin(
        cms.watch(&WatchParams::default().labels("x=1"), "0")
            .await
            .expect("watch"),
    );
    assert_eq!(describe(&next_event(&mut selected).await), "ADDED a");
    assert_eq!(describe(&next_event(&mut selected).await), "ADDED b");
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "2"}}})),
    )
    .await
    .expect("relabel");
    assert_eq!(
        describe(&next_event(&mut selected).await),
        "DELETED a",
        "leaving the selection is a deletion"
    );
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .expect("relabel");
    assert_eq!(
        describe(&next_event(&mut selected).await),
        "ADDED a",
        "entering it is an addition"
    );
    cms.delete("b", &Default::default()).await.expect("deleted");
    assert_eq!(describe(&next_event(&mut selected).await), "DELETED b");
    assert_eq!(describe(&next_event(&mut all).await), "MODIFIED a");
}

#[tokio::test]
async fn too_old_versions_get_410_and_bookmarks_and_timeouts_work() {
    let mut config = SimConfig::for_tests();
    config.watch_history = 2;
    config.timings.bookmark_interval = Duration::from_millis(50);
    let sim = start_with(config).await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("a");
    for name in ["b", "c", "d"] {
        cms.create(&PostParams::default(), &cm(name, "1"))
            .await
            .expect("created");
    }
    let rv = first.metadata.resource_version.clone().expect("rv");
    let mut stale = Box::pin(
        cms.watch(&WatchParams::default(), &rv)
            .await
            .expect("watch"),
    );
    match next_event(&mut stale).await {
        WatchEvent::Error(s) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
            assert!(
                s.message.starts_with("too old resource version: "),
                "{}",
                s.message
            );
        }
        other => panic!("expected ERROR 410, got {}", describe(&other)),
    }

    let current = sim.cluster.resource_version().to_string();
    let mut bookmarks = Box::pin(
        cms.watch(&WatchParams::default().timeout(1), &current)
            .await
            .expect("watch"),
    );
    match next_event(&mut bookmarks).await {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, current),
        other => panic!("expected a bookmark, got {}", describe(&other)),
    }
    // timeoutSeconds=1 ends the stream.
    let rest: Vec<_> = tokio::time::timeout(Duration::from_secs(5), bookmarks.collect::<Vec<_>>())
        .await
        .expect("the stream ends after its timeout");
    assert!(
        rest.iter()
            .all(|e| matches!(e, Ok(WatchEvent::Bookmark(_))))
    );
}

#[tokio::test]
async fn send_initial_events_ends_with_a_marked_bookmark() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("a");
    let wp = WatchParams::streaming_lists();
    let mut stream = Box::pin(cms.watch(&wp, "0").await.expect("watch"));
    let mut seen = Vec::new();
    loop {
        let event = next_event(&mut stream).await;
        if let WatchEvent::Bookmark(b) = &event {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
            break;
        }
        seen.push(describe(&event));
    }
    assert!(seen.contains(&"ADDED a".to_string()), "{seen:?}");
}

/// A kube-rs watcher sees every change even when its watch expires, is cut, or the server
/// restarts.
#[tokio::test]
async fn watchers_recover_from_expiry_cuts_and_restarts() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let stream = watcher(cms.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects();
    let (tx, mut names) = tokio::sync::mpsc::unbounded_channel::<String>();
    let drain = tokio::spawn(async move {
        let mut stream = Box::pin(stream);
        while let Some(item) = stream.next().await {
            if let Ok(c) = item
                && tx.send(c.metadata.name.unwrap_or_default()).is_err()
            {
                return;
            }
        }
    });
    let watches_opened = |n: u64| {
        let cluster = &sim.cluster;
        common::eventually(
            "a watch to be open",
            Duration::from_secs(10),
            // The n-th watch request arrived and its stream is open (the earlier one ended).
            move || async move {
                (cluster.request_count("watch", "configmaps") >= n && cluster.open_watches() >= 1)
                    .then_some(())
            },
        )
    };
    cms.create(&PostParams::default(), &cm("one", "1"))
        .await
        .expect("one");
    expect_name(&mut names, "one").await;
    watches_opened(1).await;
    assert_eq!(sim.cluster.expire_watches(), 1);
    common::eventually(
        "the 410 to make the watcher relist",
        Duration::from_secs(10),
        || async { (sim.cluster.request_count("list", "configmaps") >= 2).then_some(()) },
    )
    .await;
    cms.create(&PostParams::default(), &cm("two", "1"))
        .await
        .expect("two");
    expect_name(&mut names, "two").await;
    watches_opened(2).await;
    assert_eq!(sim.cluster.cut_watches(), 1);
    cms.create(&PostParams::default(), &cm("three", "1"))
        .await
        .expect("three");
    expect_name(&mut names, "three").await;
    sim.cluster.restart();
    let created = loop {
        match cms.create(&PostParams::default(), &cm("four", "1")).await {
            Ok(c) => break c,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    assert_eq!(created.metadata.name.as_deref(), Some("four"));
    expect_name(&mut names, "four").await;
    drain.abort();
}

async fn expect_name(names: &mut tokio::sync::mpsc::UnboundedReceiver<String>, name: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let next = tokio::time::timeout_at(deadline, names.recv())
            .await
            .unwrap_or_else(|_| panic!("{name} seen in time"));
        match next {
            Some(n) if n == name => return,
            Some(_) => continue,
            None => panic!("the watcher ended"),
        }
    }
}
