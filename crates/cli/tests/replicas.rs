//! Three replicas on one simulated cluster, each a separate `kubeferry serve` process: jobs
//! submitted on the first, read on the second, cancelled on the third;
//! the third is killed with SIGKILL in the middle of a cancel and started again. Every job
//! ends with the right status on every replica, and the cluster holds each job exactly once:
//! none duplicated, none lost. Being processes, the replicas share nothing but Kubernetes, and
//! the killed one dies the way a pod dies, with its watches, connections and in-flight
//! requests cut off mid-way.

// The service's test helpers, shared: here their replicas run `kubeferry serve`.
#[path = "../../server/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;

use common::*;
use hyper::http::StatusCode;
use serde_json::{Value, json};

/// What each job should end as.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Succeeds,
    Fails,
    Cancelled,
}

fn job(job_id: &str, script: &str) -> Value {
    json!({
        "jobId": job_id,
        "spec": {"name": "replicated", "image": "busybox", "command": ["sh", "-c", script]},
    })
}

#[tokio::test]
async fn three_replicas_one_killed_and_restarted_agree_on_every_job() {
    let sim = Sim::start().await;
    let first = Process::start(&sim, "first").await;
    let second = Process::start(&sim, "second").await;
    let third = Process::start(&sim, "third").await;
    let gate = Gate::new(sim.dir.path(), "replicas");

    let mut plan: BTreeMap<String, (Expect, Value)> = BTreeMap::new();
    for i in 0..4 {
        let script = format!("{}; echo done-{i}", gate.wait());
        plan.insert(
            format!("ok-{i}"),
            (Expect::Succeeds, job(&format!("ok-{i}"), &script)),
        );
    }
    for i in 0..2 {
        let script = format!("{}; exit 2", gate.wait());
        plan.insert(
            format!("fail-{i}"),
            (Expect::Fails, job(&format!("fail-{i}"), &script)),
        );
    }
    for i in 0..3 {
        plan.insert(
            format!("cancel-{i}"),
            (Expect::Cancelled, job(&format!("cancel-{i}"), "sleep 120")),
        );
    }

    // Submit everything on the first replica.
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for (job_id, (_, body)) in &plan {
        ids.insert(job_id.clone(), first.api.submit(body.clone()).await);
    }
    // Read on the second: every job is there and running.
    for id in ids.values() {
        second.api.wait_for(id, "STARTED").await;
    }
    // Submitting again on the third gives the same ids: nothing new is created.
    for (job_id, (_, body)) in &plan {
        assert_eq!(&third.api.resubmit(body.clone()).await, &ids[job_id]);
    }

    // Cancel on the third; then kill it while it cancels another job.
    let cancel = |api: &Api, id: &str| {
        let (api, path) = (api.clone(), format!("/v1/jobs/{id}/cancel"));
        async move { api.post(&path, &json!({})).await }
    };
    let reply = cancel(&third.api, &ids["cancel-0"]).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text());
    let in_flight = {
        let (api, path) = (
            third.api.clone(),
            format!("/v1/jobs/{}/cancel", ids["cancel-1"]),
        );
        tokio::spawn(async move { api.try_post(&path, &json!({})).await })
    };
    third.kill().await;
    let _ = in_flight.await;

    // The others go on answering while it is down.
    for id in ids.values() {
        assert_eq!(second.api.job(id).await.status, StatusCode::OK);
    }

    // Started again, it answers for every job and cancelling again is harmless.
    let third = Process::start(&sim, "third-again").await;
    for job_id in ["cancel-1", "cancel-2"] {
        let reply = cancel(&third.api, &ids[job_id]).await;
        assert!(
            reply.status == StatusCode::ACCEPTED || reply.status == StatusCode::NOT_FOUND,
            "{}",
            reply.text()
        );
    }
    for (job_id, (expect, body)) in &plan {
        if *expect != Expect::Cancelled {
            assert_eq!(&third.api.resubmit(body.clone()).await, &ids[job_id]);
        }
    }
    gate.open();

    // Every job ends as planned, on every replica.
    for (job_id, (expect, _)) in &plan {
        let id = &ids[job_id];
        for (replica, api) in [
            ("first", &first.api),
            ("second", &second.api),
            ("third", &third.api),
        ] {
            match expect {
                Expect::Succeeds => {
                    let info = api.wait_final(id).await;
                    assert_eq!(info["state"], "SUCCEEDED", "{replica}: {info}");
                    assert_eq!(info["exitCode"], 0, "{replica}: {info}");
                }
                Expect::Fails => {
                    let info = api.wait_final(id).await;
                    assert_eq!(info["state"], "FAILED", "{replica}: {info}");
                    assert_eq!(info["exitCode"], 2, "{replica}: {info}");
                }
                Expect::Cancelled => {
                    // The cancelled Job is deleted. Replicas that watched it go report
                    // CANCELLED; one started after it went finds no such job, which a caller
                    // that cancelled settles as cancelled.
                    let state = eventually(&format!("{job_id} cancelled on {replica}"), || async {
                        let reply = api.job(id).await;
                        let body = reply.json();
                        match (reply.status, body["state"].as_str(), body["code"].as_str()) {
                            (StatusCode::OK, Some("CANCELLED"), _) => Some("CANCELLED"),
                            (StatusCode::NOT_FOUND, _, Some("no_such_job")) => Some("gone"),
                            _ => None,
                        }
                    })
                    .await;
                    if replica != "third" {
                        assert_eq!(state, "CANCELLED", "{replica}: {job_id}");
                    }
                }
            }
        }
    }

    // The cluster holds every finished job exactly once, each run exactly once, and nothing
    // of the cancelled ones once their names are let go (`nameHold`).
    let mut expected: Vec<&str> = plan
        .iter()
        .filter(|(_, (expect, _))| *expect != Expect::Cancelled)
        .map(|(job_id, _)| job_id.as_str())
        .collect();
    expected.sort();
    let job_ids_now = || async {
        let mut job_ids: Vec<String> = sim
            .jobs("default")
            .await
            .into_iter()
            .map(|(_, id)| id)
            .collect();
        job_ids.sort();
        job_ids
    };
    eventually("the cancelled jobs' names to be let go", || async {
        let job_ids = job_ids_now().await;
        (!job_ids.iter().any(|id| id.starts_with("cancel-"))).then_some(())
    })
    .await;
    assert_eq!(job_ids_now().await, expected, "no job duplicated or lost");
    let jobs = sim.jobs("default").await;
    eventually("the cancelled jobs' pods to be gone", || async {
        let pods = sim.pods("default").await;
        (pods.len() == expected.len()).then_some(pods)
    })
    .await;
    let pods = sim.pods("default").await;
    for (name, _) in &jobs {
        let runs = pods.iter().filter(|(_, job)| job == name).count();
        assert_eq!(runs, 1, "{name} ran {runs} times");
    }

    // And every replica lists the same jobs: the cancelled ones too, from their outcome
    // records.
    let mut expected: Vec<&str> = plan.keys().map(|job_id| job_id.as_str()).collect();
    expected.sort();
    for api in [&first.api, &second.api, &third.api] {
        let list = api.get("/v1/jobs?namespace=default").await.json();
        let mut listed: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["jobId"].as_str().unwrap())
            .collect();
        listed.sort();
        assert_eq!(listed, expected);
    }
    third.kill().await;
    for replica in [first, second] {
        let status = replica.terminate().await;
        assert!(status.success(), "{status}");
    }
}

#[tokio::test]
async fn the_process_stops_gracefully_on_sigterm() {
    let sim = Sim::start().await;
    let process = Process::start(&sim, "graceful").await;
    let id = process.api.submit(shell_job("survivor", "sleep 120")).await;
    process.api.wait_for(&id, "STARTED").await;
    let mut events = Events::new(process.api.open(&format!("/v1/jobs/{id}/events")).await);
    assert_eq!(events.next().await.unwrap().data["state"], "STARTED");

    let status = process.terminate().await;
    assert!(status.success(), "{status}");
    // The stream ended rather than holding the shutdown up; the job runs on regardless.
    while events.next().await.is_some() {}
    let log = std::fs::read_to_string(sim.dir.path().join("graceful.log")).unwrap();
    assert!(
        log.contains("\"message\":\"stop signal received\""),
        "{log}"
    );
    assert!(log.contains("\"message\":\"stopped\""), "{log}");
    assert_eq!(sim.jobs("default").await.len(), 1);
}

#[tokio::test]
async fn a_replica_that_never_answered_for_a_job_keeps_its_start_time_after_cancel() {
    // A caller behind a load balancer may get STARTED from one replica and its next answer
    // from another: the start time must not vanish from that answer.
    let sim = Sim::start().await;
    let first = sim.serve().await;
    let second = sim.serve().await;
    let id = first.api.submit(shell_job("seen-once", "sleep 120")).await;
    let started = first.api.wait_for(&id, "STARTED").await;
    let reply = first
        .api
        .post(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    first.api.wait_for(&id, "CANCELLED").await;

    let cancelled = second.api.wait_for(&id, "CANCELLED").await;
    assert_eq!(cancelled["startedAt"], started["startedAt"], "{cancelled}");
    first.stop().await;
    second.stop().await;
}
