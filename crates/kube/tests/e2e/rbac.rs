//! kubeferry under exactly the Role `kubeferry rbac` prints, bound to a service account on a
//! cluster that enforces RBAC; and the error that names the permission when one is missing.

use std::collections::HashSet;

use futures::StreamExt;
use kubeferry_core::{JobKind, JobState};
use kubeferry_kube::Error;
use kubeferry_kube::Executor;
use kubeferry_kube::logs::{FollowOptions, TailOptions};
use kubeferry_kube::rbac::{self, Permission};
use kubeferry_sim::SimConfig;

use crate::support::*;

async fn rbac_env() -> Env {
    let config = SimConfig {
        rbac: true,
        ..SimConfig::for_tests()
    };
    Env::start_with(config, Settings::fast()).await
}

/// An executor running as service account `name`, bound to a Role `name` with `permissions`.
async fn executor_with(env: &Env, name: &str, permissions: &[Permission]) -> Executor {
    let role = rbac::role(name, Some(NS), permissions);
    let (account, binding) = rbac::binding(name, name, Some(NS));
    for object in [
        serde_json::to_value(&role).unwrap(),
        serde_json::to_value(&account).unwrap(),
        serde_json::to_value(&binding).unwrap(),
    ] {
        env.sim
            .create(NS, object)
            .expect("the RBAC objects are created");
    }
    executor_as(&env.sim, &env.sim.token_for(NS, name), &env.settings).await
}

/// The printed permissions less one verb on one resource (leaked: `Permission` holds static
/// slices, and a test makes ten of them).
fn without(resource: &str, verb: &str) -> Vec<Permission> {
    let verbs: &'static [&'static str] = Box::leak(
        rbac::permissions(&JobKind::ALL)
            .iter()
            .find(|p| p.resource == resource)
            .expect("a resource of the Role")
            .verbs
            .iter()
            .copied()
            .filter(|v| *v != verb)
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    rbac::permissions(&JobKind::ALL)
        .into_iter()
        .map(|p| {
            if p.resource == resource {
                Permission { verbs, ..p }
            } else {
                p
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_lifecycle_runs_under_exactly_the_printed_role() {
    let env = rbac_env().await;
    // `kubeferry rbac` prints the Role for every kind of job.
    let kubeferry = executor_with(&env, "kubeferry", &rbac::permissions(&JobKind::ALL)).await;
    let gate = Gate::new();
    let script = format!("echo one; echo two; {}; echo three", gate.wait("a"));
    let spec = spec_of(&shell("lifecycle", &script, ""));

    let id = kubeferry.submit(&spec, "lifecycle-1", NS).await.unwrap();
    let running = status_until(&kubeferry, &id, "running", is(JobState::Started)).await;
    assert!(running.started_at.is_some());
    let tail = eventually("the first lines", || async {
        let text = kubeferry
            .tail(&id, &TailOptions::default())
            .await
            .unwrap()
            .log;
        (text == "one\ntwo\n").then_some(text)
    })
    .await;
    assert_eq!(tail, "one\ntwo\n");
    let follow = kubeferry
        .follow(
            &id,
            FollowOptions {
                reopen_delay: std::time::Duration::from_millis(20),
                ..FollowOptions::default()
            },
        )
        .unwrap();
    gate.open("a");
    let lines: Vec<String> = within("the follow", follow.map(|line| line.unwrap()).collect()).await;
    assert_eq!(lines, ["one\n", "two\n", "three\n"]);
    let (outcome, _) = wait_on(&kubeferry, &id).await;
    assert_eq!(outcome.state, JobState::Succeeded);

    let doomed = kubeferry
        .submit(
            &spec_of(&shell("doomed", &gate.wait("never"), "")),
            "doomed-1",
            NS,
        )
        .await
        .unwrap();
    status_until(&kubeferry, &doomed, "running", is(JobState::Started)).await;
    kubeferry.cancel(&doomed).await.unwrap();
    let (cancelled, _) = wait_on(&kubeferry, &doomed).await;
    assert_eq!(cancelled.state, JobState::Cancelled);
    // Both outcomes are kept, as the Role allows: each job's record.
    for (job, state) in [(&id, "SUCCEEDED"), (&doomed, "CANCELLED")] {
        let record = eventually("the outcome record", || async {
            env.sim.object(
                "",
                "configmaps",
                NS,
                &kubeferry_core::record::record_name(JobKind::Job, &job.name),
            )
        })
        .await;
        let outcome: serde_json::Value =
            serde_json::from_str(record["data"]["outcome"].as_str().expect("an outcome")).unwrap();
        assert_eq!(outcome["state"], state, "{outcome:#}");
    }
    // The cancelled Job, held by kubeferry's finalizer until its record was kept, is let go.
    eventually("the cancelled Job to go", || async {
        env.sim
            .object("batch", "jobs", NS, &doomed.name)
            .is_none()
            .then_some(())
    })
    .await;

    let orphan = kubeferry
        .submit(&spec_of(&shell("orphan", "echo lost", "")), "orphan-1", NS)
        .await
        .unwrap();
    let listed = kubeferry.list(NS, None).await.unwrap();
    let ids: HashSet<_> = listed.iter().map(|j| j.id.clone()).collect();
    assert!(ids.contains(&id) && ids.contains(&orphan), "{listed:#?}");
    let known: HashSet<String> = ["lifecycle-1".to_string()].into();
    let swept = kubeferry.sweep(NS, &known, true).await.unwrap();
    assert_eq!(swept.len(), 1);
    assert_eq!(swept[0].id, orphan);
    // Everything above ran as the service account.
    let user = format!("system:serviceaccount:{NS}:kubeferry");
    assert!(env.sim.request_count_by_user(&user) > 0);
}

fn assert_forbidden(error: Error, verb: &str, resource: &str) {
    match &error {
        Error::Forbidden {
            verb: v,
            resource: r,
            namespace,
            ..
        } => {
            assert_eq!((*v, r.as_str(), namespace.as_str()), (verb, resource, NS));
            let text = error.to_string();
            assert!(
                text.contains(&format!("permission to {verb} {resource}")),
                "{text}"
            );
        }
        other => panic!("expected Forbidden to {verb} {resource}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_missing_permission_is_named() {
    let env = rbac_env().await;
    // The jobs are made by the admin; each case's executor lacks one verb of the Role.
    let gate = Gate::new();
    let running = env
        .submit(&shell(
            "target",
            &format!("echo hi; {}", gate.wait("never")),
            "",
        ))
        .await;
    let finished = env.submit(&shell("finished", "echo done", "")).await;
    env.status_until(&running, "running", is(JobState::Started))
        .await;
    env.wait(&finished).await;
    let spec = spec_of(&shell("new", "echo new", ""));

    for (resource, verb) in [
        ("jobs", "create"),
        ("jobs", "get"),
        ("jobs", "list"),
        ("jobs", "watch"),
        ("jobs", "patch"),
        ("pods", "list"),
        ("pods", "watch"),
        ("pods/log", "get"),
        // Last: a cancel refused only its delete has marked and recorded the job, and a
        // settler of the replicas allowed to delete then finishes it.
        ("jobs", "delete"),
    ] {
        let account = format!("no-{}-{verb}", resource.replace('/', "-"));
        let kubeferry = executor_with(&env, &account, &without(resource, verb)).await;
        let named = match resource {
            "jobs" => "jobs.batch",
            other => other,
        };
        let error = match (resource, verb) {
            ("jobs", "create") => kubeferry.submit(&spec, "new-1", NS).await.map(|_| ()),
            // Cancel reads the Job, marks it, deletes it.
            ("jobs", "get" | "patch" | "delete") => kubeferry.cancel(&running).await.map(|_| ()),
            ("pods/log", "get") => kubeferry
                .tail(&running, &TailOptions::default())
                .await
                .map(|_| ()),
            // Lists and watches are the tracker's: every status query needs them. A refused
            // watch follows a permitted list, so the first answer may still come from it.
            _ => Err(eventually("the refusal", || async {
                kubeferry.status(&running).await.err()
            })
            .await),
        }
        .expect_err(&format!("without {verb} {resource}"));
        assert_forbidden(error, verb, named);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_events_jobs_are_tracked_and_only_the_refusal_reason_is_missing() {
    let env = rbac_env().await;
    // A Role applied before kubeferry read events.
    let older_role: Vec<Permission> = rbac::permissions(&JobKind::ALL)
        .into_iter()
        .filter(|p| p.resource != "events")
        .collect();
    let kubeferry = executor_with(&env, "no-events", &older_role).await;
    let refused = kubeferry
        .submit(
            &spec_of(&shell("refused", "echo never", "serviceAccount: robot")),
            "refused-1",
            NS,
        )
        .await
        .unwrap();
    let fine = kubeferry
        .submit(&spec_of(&shell("fine", "echo ran", "")), "fine-1", NS)
        .await
        .unwrap();
    let (outcome, _) = wait_on(&kubeferry, &fine).await;
    assert_eq!(outcome.state, JobState::Succeeded, "{outcome:?}");
    // The events watch was refused, and the Job controller was refused a pod meanwhile.
    let watch = kubeferry.container_jobs().watch(NS);
    eventually("the events watch to be refused", || async {
        watch.refusals.health().refused().map(|_| ())
    })
    .await;
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(env.admin_client().await, NS);
    eventually("a FailedCreate event", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("FailedCreate")
                    && e.involved_object.name.as_deref() == Some(refused.name.as_str())
            })
            .then_some(())
    })
    .await;
    let info = kubeferry
        .status(&refused)
        .await
        .expect("no permission error");
    assert_eq!(
        (info.state, info.message.as_str()),
        (
            JobState::Queued,
            "waiting for the Job controller to create a pod"
        ),
        "{info:?}"
    );
}
