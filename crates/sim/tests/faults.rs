//! Fault injection and counters: Status errors with Retry-After, latency, held requests,
//! dropped connections, lost responses, stalled watches, unreachability, per-identity rules, the admin endpoints.

mod common;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kubeferry_sim::{FaultAction, FaultRule};
use serde_json::json;

use common::{client_for, eventually, raw, start};

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
    )
    .expect("cm")
}

#[tokio::test]
async fn errors_match_verbs_resources_and_lapse() {
    let sim = start().await;
    let c = &common::client_without_retries(&sim.cluster.kubeconfig_yaml("sim")).await;
    sim.cluster.add_fault(
        FaultRule::new(FaultAction::error(503))
            .verbs(&["list"])
            .resources(&["configmaps"])
            .times(1),
    );
    sim.cluster.add_fault(
        FaultRule::new(FaultAction::error_retry_after(429, 2))
            .verbs(&["create"])
            .resources(&["configmaps"])
            .times(1),
    );
    let r = raw(c, "GET", "/api/v1/namespaces/default/configmaps", None, "").await;
    assert_eq!(r.code, 503);
    assert_eq!(r.json()["reason"], json!("ServiceUnavailable"));
    let r = raw(c, "GET", "/api/v1/namespaces/default/configmaps", None, "").await;
    assert_eq!(r.code, 200, "the rule lapsed after one use");
    let r = raw(c, "GET", "/api/v1/namespaces/default/pods", None, "").await;
    assert_eq!(r.code, 200);
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}).to_string();
    let r = raw(
        c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        &body,
    )
    .await;
    assert_eq!(r.code, 429);
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("2")
    );
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Too many requests, please try again later.", "reason": "TooManyRequests",
               "details": {"retryAfterSeconds": 2}, "code": 429})
    );
    assert!(
        sim.cluster
            .object("", "configmaps", "default", "x")
            .is_none(),
        "a refused request does nothing"
    );
    let r = raw(
        c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        &body,
    )
    .await;
    assert_eq!(r.code, 201);
    let id = sim.cluster.add_fault(
        FaultRule::new(FaultAction::error_retry_after(500, 1)).resources(&["jobs.batch"]),
    );
    let r = raw(c, "GET", "/apis/batch/v1/namespaces/default/jobs", None, "").await;
    assert_eq!(
        (r.code, r.json()["reason"].clone()),
        (500, json!("InternalError"))
    );
    assert!(sim.cluster.remove_fault(id));
    let r = raw(c, "GET", "/apis/batch/v1/namespaces/default/jobs", None, "").await;
    assert_eq!(r.code, 200);
}

#[tokio::test]
async fn rules_can_target_one_identity() {
    let sim = start().await;
    let user = "system:serviceaccount:default:runner";
    sim.cluster
        .add_fault(FaultRule::new(FaultAction::error(403)).users(&[user]));
    let runner = client_for(
        &sim.cluster
            .kubeconfig_yaml_with_token("runner", &sim.cluster.token_for("default", "runner")),
    )
    .await;
    let r = raw(
        &runner,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        None,
        "",
    )
    .await;
    assert_eq!(r.code, 403);
    let r = raw(
        &sim.client,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        None,
        "",
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(sim.cluster.request_count_by_user(user), 1);
    let counters = sim.cluster.counters();
    assert!(
        counters.iter().any(|(k, n)| k.verb == "list"
            && k.resource == "configmaps"
            && k.user == user
            && *n == 1)
    );
}

#[tokio::test]
async fn latency_delays_and_connections_drop_or_lose_answers() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    sim.cluster.add_fault(
        FaultRule::new(FaultAction::Latency { millis: 2_000 })
            .verbs(&["get"])
            .times(1),
    );
    let slow = tokio::time::timeout(Duration::from_millis(100), cms.get_opt("x")).await;
    assert!(slow.is_err(), "the answer is held back");

    sim.cluster.add_fault(
        FaultRule::new(FaultAction::DropConnection)
            .verbs(&["create"])
            .times(1),
    );
    let dropped = cms.create(&PostParams::default(), &cm("dropped")).await;
    assert!(
        matches!(dropped, Err(ref e) if !matches!(e, kube::Error::Api(_))),
        "{dropped:?}"
    );
    assert!(
        sim.cluster
            .object("", "configmaps", "default", "dropped")
            .is_none(),
        "nothing happened"
    );

    sim.cluster.add_fault(
        FaultRule::new(FaultAction::LoseResponse)
            .verbs(&["create"])
            .times(1),
    );
    let lost = cms.create(&PostParams::default(), &cm("landed")).await;
    assert!(
        matches!(lost, Err(ref e) if !matches!(e, kube::Error::Api(_))),
        "{lost:?}"
    );
    assert!(
        sim.cluster
            .object("", "configmaps", "default", "landed")
            .is_some(),
        "the write committed"
    );
    let again = cms.create(&PostParams::default(), &cm("landed")).await;
    assert!(
        matches!(again, Err(kube::Error::Api(ref s)) if s.code == 409),
        "a retry meets AlreadyExists"
    );
}

#[tokio::test]
async fn held_requests_wait_undone_until_the_rule_is_removed() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let hold = sim.cluster.add_fault(
        FaultRule::new(FaultAction::Hold)
            .verbs(&["create"])
            .times(1),
    );
    let held = tokio::spawn({
        let cms = cms.clone();
        async move { cms.create(&PostParams::default(), &cm("held")).await }
    });
    // The request has arrived (it is counted) ...
    eventually("the create to arrive", Duration::from_secs(10), || async {
        (sim.cluster.request_count("create", "configmaps") > 0).then_some(())
    })
    .await;
    // ... and stays undone: a write in the meantime takes the name first.
    cms.create(&PostParams::default(), &cm("held"))
        .await
        .expect("the rule was used up by the held request: this one passes");
    assert!(!held.is_finished(), "held until the rule is removed");
    assert!(
        sim.cluster.remove_fault(hold),
        "a used-up hold is still there to remove"
    );
    let answer = held.await.expect("joined");
    assert!(
        matches!(answer, Err(kube::Error::Api(ref s)) if s.code == 409),
        "handled after the release, against the cluster as it is then: {answer:?}"
    );
    assert!(!sim.cluster.remove_fault(hold), "removed once");

    // Clearing every rule lets go too.
    sim.cluster
        .add_fault(FaultRule::new(FaultAction::Hold).verbs(&["get"]));
    let get = tokio::spawn({
        let cms = cms.clone();
        async move { cms.get_opt("held").await }
    });
    eventually("the get to arrive", Duration::from_secs(10), || async {
        (sim.cluster.request_count("get", "configmaps") > 0).then_some(())
    })
    .await;
    sim.cluster.clear_faults();
    let found = get.await.expect("joined").expect("answered");
    assert!(found.is_some());
}

/// Waits until the server answers a list again.
async fn answering_again(cms: &Api<ConfigMap>) {
    common::eventually("the server to answer again", Duration::from_secs(5), || {
        let cms = cms.clone();
        async move { cms.list(&ListParams::default()).await.ok() }
    })
    .await;
}

/// A stalled watch sends nothing, and a cut still ends it, cleanly.
async fn silent_until_cut<S>(sim: &common::Sim, watch: &mut S)
where
    S: futures::Stream + Unpin,
    S::Item: std::fmt::Debug,
{
    let nothing = tokio::time::timeout(Duration::from_millis(200), watch.next()).await;
    assert!(nothing.is_err(), "a stalled watch sends nothing");
    assert!(sim.cluster.cut_watches() > 0);
    let ended = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("the cut ends the stall and the stream");
    assert!(ended.is_none(), "ended cleanly: {ended:?}");
}

#[tokio::test]
async fn watches_can_stall_and_the_server_can_vanish() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    sim.cluster.add_fault(
        FaultRule::new(FaultAction::StallWatch)
            .verbs(&["watch"])
            .times(1),
    );
    let mut stalled = Box::pin(
        cms.watch(&WatchParams::default().timeout(1), "0")
            .await
            .expect("watch opens"),
    );
    cms.create(&PostParams::default(), &cm("unseen"))
        .await
        .expect("created");
    silent_until_cut(&sim, &mut stalled).await;

    let mut open = Box::pin(
        cms.watch(&WatchParams::default().disable_bookmarks(), "0")
            .await
            .expect("watch"),
    );
    match tokio::time::timeout(Duration::from_secs(5), open.next()).await {
        Ok(Some(Ok(WatchEvent::Added(c)))) => {
            assert_eq!(c.metadata.name.as_deref(), Some("unseen"))
        }
        other => panic!("expected ADDED, got {other:?}"),
    }
    assert!(sim.cluster.abort_watches() > 0);
    let ended = tokio::time::timeout(Duration::from_secs(5), open.next())
        .await
        .expect("the stream ends");
    assert!(
        !matches!(ended, Some(Ok(_))),
        "an aborted watch errors or ends: {ended:?}"
    );

    sim.cluster.unreachable_for(Duration::from_secs(600));
    common::eventually("the port to refuse", Duration::from_secs(5), || async {
        tokio::net::TcpStream::connect(sim.cluster.addr())
            .await
            .err()
    })
    .await;
    let refused = cms.list(&ListParams::default()).await;
    assert!(
        matches!(refused, Err(ref e) if !matches!(e, kube::Error::Api(_))),
        "no answer at all, not even on a connection opened before: {refused:?}"
    );
    // The server can be brought back before its time.
    sim.cluster.reachable_again();
    answering_again(&cms).await;
}

#[tokio::test]
async fn a_stalled_watch_still_ends_when_cut() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let mut watch = open_watch(&cms, "before-stall").await;
    assert!(sim.cluster.stall_watches(Duration::from_secs(600)) > 0);
    cms.create(&PostParams::default(), &cm("queued"))
        .await
        .expect("created");
    silent_until_cut(&sim, &mut watch).await;

    // Going down and coming back at once still drops every open connection.
    let mut open = open_watch(&cms, "before-blip").await;
    sim.cluster.unreachable_for(Duration::from_secs(600));
    sim.cluster.reachable_again();
    let dropped = tokio::time::timeout(Duration::from_secs(5), open.next())
        .await
        .expect("the connection drops");
    assert!(!matches!(dropped, Some(Ok(_))), "{dropped:?}");
    answering_again(&cms).await;
}

#[tokio::test]
async fn the_admin_endpoints_drive_faults_and_counters() {
    let sim = start().await;
    let admin = &sim.client;
    let rule = json!({"match": {"verbs": ["get"], "resources": ["pods"]}, "action": {"type": "error", "code": 500}, "times": 1});
    let r = raw(
        admin,
        "POST",
        "/sim/faults",
        Some("application/json"),
        &rule.to_string(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text());
    assert!(r.json()["id"].is_u64());
    let r = raw(admin, "GET", "/api/v1/namespaces/default/pods/x", None, "").await;
    assert_eq!(r.code, 500);
    let r = raw(admin, "GET", "/sim/counters", None, "").await;
    let counters = r.json();
    assert!(
        counters.as_array().is_some_and(|a| a
            .iter()
            .any(|c| c["verb"] == "get" && c["resource"] == "pods" && c["count"] == 1)),
        "{counters}"
    );
    let r = raw(admin, "POST", "/sim/tokens/default/runner", None, "").await;
    let token = r.json()["token"].as_str().unwrap_or_default().to_string();
    assert_eq!(token, sim.cluster.token_for("default", "runner"));
    let runner = client_for(&sim.cluster.kubeconfig_yaml_with_token("runner", &token)).await;
    let r = raw(&runner, "GET", "/sim/counters", None, "").await;
    assert_eq!(r.code, 403, "only the admin may use them");
    let r = raw(admin, "POST", "/sim/watches/expire", None, "").await;
    assert_eq!(r.code, 200);
    let r = raw(admin, "DELETE", "/sim/counters", None, "").await;
    assert_eq!(r.code, 200);
    assert_eq!(sim.cluster.request_count("", ""), 0);
}

/// A watch on config maps that has delivered one event, so it is known to be open.
async fn open_watch(
    cms: &Api<ConfigMap>,
    name: &str,
) -> std::pin::Pin<Box<impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + use<>>> {
    let rv = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list version");
    let mut stream = Box::pin(
        cms.watch(&WatchParams::default().disable_bookmarks(), &rv)
            .await
            .expect("watch opens"),
    );
    cms.create(&PostParams::default(), &cm(name))
        .await
        .expect("created");
    match tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
        Ok(Some(Ok(WatchEvent::Added(c)))) => {
            assert_eq!(c.metadata.name.as_deref(), Some(name))
        }
        other => panic!("expected ADDED {name}, got {other:?}"),
    }
    stream
}

#[tokio::test]
async fn the_admin_endpoints_list_add_and_remove_fault_rules() {
    let sim = start().await;
    let admin = &common::client_without_retries(&sim.cluster.kubeconfig_yaml("sim")).await;
    let mut ids = Vec::new();
    for code in [503, 500] {
        let rule = json!({"match": {"verbs": ["list"], "resources": ["configmaps"]}, "action": {"type": "error", "code": code}});
        let r = raw(
            admin,
            "POST",
            "/sim/faults",
            Some("application/json"),
            &rule.to_string(),
        )
        .await;
        assert_eq!(r.code, 200, "{}", r.text());
        ids.push(r.json()["id"].as_u64().expect("an id"));
    }
    let r = raw(admin, "GET", "/sim/faults", None, "").await;
    assert_eq!(r.code, 200);
    let listed = r.json();
    let listed_ids: Vec<u64> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|f| f["id"].as_u64())
        .collect();
    assert_eq!(listed_ids, ids, "{listed}");
    assert_eq!(listed[0]["rule"]["action"]["code"], json!(503), "{listed}");
    let list_path = "/api/v1/namespaces/default/configmaps";
    assert_eq!(raw(admin, "GET", list_path, None, "").await.code, 503);

    let r = raw(
        admin,
        "DELETE",
        &format!("/sim/faults/{}", ids[0]),
        None,
        "",
    )
    .await;
    assert_eq!((r.code, r.json()), (200, json!({"removed": true})));
    let r = raw(
        admin,
        "DELETE",
        &format!("/sim/faults/{}", ids[0]),
        None,
        "",
    )
    .await;
    assert_eq!(r.json(), json!({"removed": false}), "removed only once");
    assert_eq!(
        raw(admin, "GET", list_path, None, "").await.code,
        500,
        "the other rule still applies"
    );

    let r = raw(admin, "DELETE", "/sim/faults", None, "").await;
    assert_eq!(r.code, 200);
    assert_eq!(
        raw(admin, "GET", "/sim/faults", None, "").await.json(),
        json!([])
    );
    assert_eq!(raw(admin, "GET", list_path, None, "").await.code, 200);
}

#[tokio::test]
async fn the_admin_endpoints_stall_cut_and_abort_watches() {
    let sim = start().await;
    let admin = &sim.client;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");

    let mut stalled = open_watch(&cms, "before-stall").await;
    let r = raw(admin, "POST", "/sim/watches/stall?millis=300", None, "").await;
    assert_eq!(r.code, 200, "{}", r.text());
    assert!(r.json()["watches"].as_u64() >= Some(1), "{}", r.text());
    cms.create(&PostParams::default(), &cm("during-stall"))
        .await
        .expect("created");
    match tokio::time::timeout(Duration::from_secs(5), stalled.next()).await {
        Ok(Some(Ok(WatchEvent::Added(c)))) => assert_eq!(
            c.metadata.name.as_deref(),
            Some("during-stall"),
            "a stall delays events, it loses none"
        ),
        other => panic!("expected ADDED after the stall, got {other:?}"),
    }
    drop(stalled);

    let mut cut = open_watch(&cms, "before-cut").await;
    let r = raw(admin, "POST", "/sim/watches/cut", None, "").await;
    assert_eq!(r.code, 200);
    assert!(r.json()["watches"].as_u64() >= Some(1), "{}", r.text());
    let ended = tokio::time::timeout(Duration::from_secs(5), cut.next())
        .await
        .expect("the cut watch ends");
    assert!(ended.is_none(), "a cut watch ends cleanly: {ended:?}");

    let mut aborted = open_watch(&cms, "before-abort").await;
    let r = raw(admin, "POST", "/sim/watches/abort", None, "").await;
    assert_eq!(r.code, 200);
    assert!(r.json()["watches"].as_u64() >= Some(1), "{}", r.text());
    let ended = tokio::time::timeout(Duration::from_secs(5), aborted.next())
        .await
        .expect("the aborted watch ends");
    assert!(
        !matches!(ended, Some(Ok(_))),
        "an aborted watch errors or ends: {ended:?}"
    );

    let r = raw(admin, "POST", "/sim/watches/sideways", None, "").await;
    assert_eq!(r.code, 400);
}

#[tokio::test]
async fn the_admin_endpoints_make_the_server_unreachable_and_restart_it() {
    let sim = start().await;
    let admin = &sim.client;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("kept"))
        .await
        .expect("created");

    let mut watch = open_watch(&cms, "watched").await;
    let r = raw(admin, "POST", "/sim/restart", None, "").await;
    assert_eq!(r.code, 200, "{}", r.text());
    let ended = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("the restart ends open watches");
    assert!(!matches!(ended, Some(Ok(_))), "{ended:?}");
    let kept = common::eventually("the server to serve again", Duration::from_secs(5), || {
        let cms = cms.clone();
        async move { cms.get_opt("kept").await.ok() }
    })
    .await;
    assert!(kept.is_some(), "objects survive a restart");

    let r = raw(admin, "POST", "/sim/unreachable?millis=500", None, "").await;
    assert_eq!(r.code, 200, "{}", r.text());
    let refused = common::eventually("connections to be refused", Duration::from_secs(5), || {
        let cms = cms.clone();
        async move {
            match cms.list(&ListParams::default()).await {
                Err(e) if !matches!(e, kube::Error::Api(_)) => Some(e),
                _ => None,
            }
        }
    })
    .await;
    assert!(!refused.to_string().is_empty());
    common::eventually("the server to answer again", Duration::from_secs(5), || {
        let cms = cms.clone();
        async move { cms.get_opt("kept").await.ok().flatten() }
    })
    .await;
}
