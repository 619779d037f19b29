//! Spark jobs through the API, under each Spark operator of the simulated cluster: the
//! cluster's configured operator and the service's name prefix apply, a job runs to SUCCEEDED
//! with its driver's log, another is cancelled, selector streams follow them, readiness and
//! metrics count their watches, and the configured no-status timeout fails a job whose
//! operator never writes a status.

mod common;

use std::time::Duration;

use common::*;
use hyper::http::StatusCode;
use kubeferry_core::JobKind;
use kubeferry_core::marks::object_name;
use kubeferry_core::record::record_name;
use kubeferry_core::spark::SparkOperator;
use kubeferry_server::config::Config;
use kubeferry_sim::SimConfig;
use kubeferry_sim::controllers::spark::{SparkFault, SparkFaults, with_spark_operators};
use serde_json::{Value, json};

/// A simulated cluster running both Spark operators, and its operators' faults.
async fn spark_sim() -> (Sim, SparkFaults) {
    let mut config = with_spark_operators(SimConfig::for_tests());
    config.spark.release_delay = Duration::from_millis(100);
    let faults = config.spark.faults.clone();
    (Sim::start_with(config).await, faults)
}

/// A service whose cluster runs Spark jobs on `operator` unless a job file names one, with
/// the name prefix `kf`.
fn spark_config(sim: &Sim, operator: SparkOperator) -> Config {
    let mut config = sim.config();
    config.clusters[0].spark_operator = Some(operator);
    config.name_prefix = "kf".into();
    config
}

/// A SparkPi job file naming no operator, with labels `flow: spark`, whose driver waits for
/// `gate` (or, with `exit=N` among `args`, ends so).
fn spark_job(job_id: &str, args: &[String]) -> Value {
    let args: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    json!({
        "jobId": job_id,
        "spec": format!(
            "kind: SparkJob\nname: spark-pi\nsparkVersion: \"3.5.3\"\nimage: apache/spark:3.5.3\nmainApplicationFile: local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar\nmainClass: org.apache.spark.examples.SparkPi\nargs: [{}]\ndriver: {{cores: 1, memory: 512m}}\nexecutor: {{cores: 1, memory: 512m, instances: 1}}\nlabels: {{flow: spark}}\n",
            args.join(", ")
        ),
    })
}

#[tokio::test]
async fn spark_jobs_run_log_and_cancel_through_the_api_under_each_operator() {
    for operator in SparkOperator::ALL {
        let (sim, _) = spark_sim().await;
        let service = Service::start(spark_config(&sim, operator)).await;
        let api = &service.api;
        let mut events = Events::new(
            api.open("/v1/events?namespace=default&selector=flow%3Dspark")
                .await,
        );
        assert_eq!(events.next().await.unwrap().event, "listed");

        let gate = Gate::new(sim.dir.path(), &format!("spark-{operator}"));
        let until = format!("until={}", gate.path().display());
        let ok = api
            .submit(spark_job("pi", &["10".into(), until.clone()]))
            .await;
        let doomed = api
            .submit(spark_job(
                "doomed",
                &["10".into(), format!("{until}-never")],
            ))
            .await;
        // The cluster's operator runs them, under names with the configured prefix.
        for id in [&ok, &doomed] {
            let name = id.rsplit('/').next().unwrap();
            assert!(id.starts_with("sim/sparkapp/default/kf-"), "{id}");
            assert!(
                sim.sim
                    .object(operator.group(), "sparkapplications", "default", name)
                    .is_some(),
                "{operator}: {id}"
            );
        }

        let running = api.wait_for(&ok, "STARTED").await;
        assert!(running["startedAt"].is_string(), "{running}");
        let log = eventually("the driver's log", || async {
            let reply = api.get(&format!("/v1/jobs/{ok}/logs")).await;
            let log = reply.json()["log"].as_str().unwrap_or_default().to_string();
            log.contains("Running Spark application SparkPi")
                .then_some(log)
        })
        .await;
        assert!(!log.contains("Pi is roughly"), "{log}");

        api.wait_for(&doomed, "STARTED").await;
        let reply = api
            .post(&format!("/v1/jobs/{doomed}/cancel"), &json!({}))
            .await;
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text());
        let cancelled = api.wait_for(&doomed, "CANCELLED").await;
        assert_eq!(cancelled["reason"], "Cancelled", "{cancelled}");

        gate.open();
        let end = api.wait_for(&ok, "SUCCEEDED").await;
        assert_eq!(end["exitCode"], 0, "{end}");
        assert_eq!(end["startedAt"], running["startedAt"], "{end}");

        // The selector stream followed both Spark jobs to their ends.
        let mut ended = std::collections::BTreeMap::new();
        while ended.len() < 2 {
            let event = events.next_named("status").await.unwrap();
            let id = event.data["id"].as_str().unwrap().to_string();
            assert!(id == ok || id == doomed, "{event:?}");
            let state = event.data["state"].as_str().unwrap().to_string();
            if matches!(state.as_str(), "SUCCEEDED" | "CANCELLED") {
                ended.insert(id, state);
            }
        }
        assert_eq!(ended[&ok], "SUCCEEDED");
        assert_eq!(ended[&doomed], "CANCELLED");

        // Readiness lists the Spark watches; metrics count the Spark job and the watches.
        let ready = api.get("/readyz").await.json();
        let watches: Vec<&str> = ready["clusters"][0]["namespaces"][0]["watches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["resource"].as_str().unwrap())
            .collect();
        assert_eq!(
            watches,
            [
                "jobs.batch",
                "pods",
                "events",
                "pods (spark drivers)",
                "sparkapplications.spark.apache.org",
                "sparkapplications.sparkoperator.k8s.io",
                // Started by the event stream's subscription to the namespace.
                "pods (bare)",
                "configmaps"
            ]
        );
        let metrics = api.get("/metrics").await.text();
        for expected in [
            "kubeferry_jobs{cluster=\"sim\",namespace=\"default\",state=\"SUCCEEDED\"} 1",
            "kubeferry_watch_synced{cluster=\"sim\",namespace=\"default\",resource=\"sparkapplications.spark.apache.org\"} 1",
            "kubeferry_watch_synced{cluster=\"sim\",namespace=\"default\",resource=\"pods (spark drivers)\"} 1",
            "kubeferry_watch_restarts_total{cluster=\"sim\",namespace=\"default\",resource=\"sparkapplications.sparkoperator.k8s.io\"} 0",
        ] {
            assert!(
                metrics.contains(expected),
                "{expected} missing from\n{metrics}"
            );
        }
        service.stop().await;
    }
}

#[tokio::test]
async fn the_configured_no_status_timeout_fails_a_job_whose_operator_writes_no_status() {
    let (sim, faults) = spark_sim().await;
    let mut config = spark_config(&sim, SparkOperator::Apache);
    config.timeouts.no_status = Duration::from_millis(300);
    let service = Service::start(config).await;
    let api = &service.api;
    faults.set_for(&object_name("kf", "silent"), Some(SparkFault::NoStatus));
    let id = api.submit(spark_job("silent", &[])).await;
    let end = api.wait_final(&id).await;
    assert_eq!(end["state"], "FAILED", "{end}");
    assert_eq!(end["reason"], "NoStatusTimeout", "{end}");
    let name = id.rsplit('/').next().unwrap();
    application_deleted(&sim, name).await;
    service.stop().await;
}

/// Waits until the apache SparkApplication `name` is gone from `default`.
async fn application_deleted(sim: &Sim, name: &str) {
    eventually("the silent application to be deleted", || async {
        sim.sim
            .object("spark.apache.org", "sparkapplications", "default", name)
            .is_none()
            .then_some(())
    })
    .await;
}

/// I4 with nobody asking: a SparkApplication whose operator never writes a status, tracked by
/// a service that no one queries, is failed at the no-status timeout by the namespace's
/// settler: its outcome recorded, the application deleted. Asked at last, the service answers
/// that record.
#[tokio::test]
async fn an_application_without_a_status_fails_at_its_timeout_though_nobody_asks() {
    let (sim, faults) = spark_sim().await;
    let mut config = spark_config(&sim, SparkOperator::Apache);
    config.timeouts.no_status = Duration::from_millis(300);
    let service = Service::start(config).await;
    faults.set_for(&object_name("kf", "unasked"), Some(SparkFault::NoStatus));
    let id = service.api.submit(spark_job("unasked", &[])).await;
    let submitted = sim.sim.counters();
    // Nobody asks the service anything: only the cluster is looked at.
    let name = id.rsplit('/').next().unwrap();
    let record = eventually("the recorded outcome", || async {
        sim.sim.object(
            "",
            "configmaps",
            "default",
            &record_name(JobKind::SparkApp, name),
        )
    })
    .await;
    let outcome: Value =
        serde_json::from_str(record["data"]["outcome"].as_str().expect("an outcome")).unwrap();
    assert_eq!(outcome["state"], "FAILED", "{outcome:#}");
    assert_eq!(outcome["reason"], "NoStatusTimeout", "{outcome:#}");
    application_deleted(&sim, name).await;
    // What the settler wrote, and nothing read per job: no GET of the application.
    let made = requests_between(&submitted, &sim.sim.counters());
    assert_eq!(
        made.get("get sparkapplications.spark.apache.org"),
        None,
        "{made:?}"
    );
    assert_eq!(made.get("create configmaps"), Some(&1), "{made:?}");
    // Asked at last, the service answers the recorded outcome (its time to the second, as
    // every answer gives times).
    let info = service.api.job(&id).await.json();
    let recorded_end: jiff::Timestamp = outcome["finishedAt"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        (&info["state"], &info["reason"], &info["finishedAt"]),
        (
            &outcome["state"],
            &outcome["reason"],
            &json!(kubeferry_server::api::model::format_time(recorded_end))
        ),
        "{info:#}"
    );
    service.stop().await;
}

/// The requests the service made between two snapshots of the cluster's counters, as
/// `verb resource` with their counts (watches left out: they are long-lived, not per call).
fn requests_between(
    before: &std::collections::BTreeMap<kubeferry_sim::CounterKey, u64>,
    after: &std::collections::BTreeMap<kubeferry_sim::CounterKey, u64>,
) -> std::collections::BTreeMap<String, u64> {
    let mut made = std::collections::BTreeMap::new();
    for (key, count) in after {
        let count = count - before.get(key).copied().unwrap_or(0);
        if count > 0 && key.verb != "watch" {
            *made
                .entry(format!("{} {}", key.verb, key.resource))
                .or_default() += count;
        }
    }
    made
}

/// The Kubernetes requests (watches aside) that one listing and one sweep of `default` make.
async fn list_and_sweep_requests(
    sim: &Sim,
    api: &Api,
) -> (
    std::collections::BTreeMap<String, u64>,
    std::collections::BTreeMap<String, u64>,
) {
    let before = sim.sim.counters();
    let reply = api.get("/v1/jobs?namespace=default").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let listing = requests_between(&before, &sim.sim.counters());
    let before = sim.sim.counters();
    let reply = api
        .post(
            "/v1/sweep",
            &json!({"knownJobIds": [], "namespace": "default"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    (listing, requests_between(&before, &sim.sim.counters()))
}

#[tokio::test]
async fn what_a_list_and_a_sweep_cost_with_and_without_spark_operators() {
    let list = |made: &[(&str, u64)]| -> std::collections::BTreeMap<String, u64> {
        made.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    // Without a Spark operator: the Jobs and their pods, the bare pods, the outcome records (for
    // jobs whose objects are gone), and whether the cluster serves JobSets (it serves none:
    // nothing more is asked of them; the answer is kept a while, so the sweep asks nothing).
    // A sweep lists the Jobs and the bare pods.
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let (listing, sweep) = list_and_sweep_requests(&sim, &service.api).await;
    assert_eq!(
        listing,
        list(&[
            ("get /apis/jobset.x-k8s.io/v1alpha2", 1),
            ("list configmaps", 1),
            ("list jobs.batch", 1),
            ("list pods", 2)
        ])
    );
    assert_eq!(sweep, list(&[("list jobs.batch", 1), ("list pods", 1)]));
    service.stop().await;

    // With both: also the driver pods and each operator's SparkApplications.
    let (sim, _) = spark_sim().await;
    let service = Service::start(spark_config(&sim, SparkOperator::Apache)).await;
    let (listing, sweep) = list_and_sweep_requests(&sim, &service.api).await;
    assert_eq!(
        listing,
        list(&[
            ("get /apis/jobset.x-k8s.io/v1alpha2", 1),
            ("list configmaps", 1),
            ("list jobs.batch", 1),
            ("list pods", 3),
            ("list sparkapplications.spark.apache.org", 1),
            ("list sparkapplications.sparkoperator.k8s.io", 1),
        ])
    );
    assert_eq!(
        sweep,
        list(&[
            ("list jobs.batch", 1),
            ("list pods", 1),
            ("list sparkapplications.spark.apache.org", 1),
            ("list sparkapplications.sparkoperator.k8s.io", 1),
        ])
    );
    service.stop().await;
}

#[tokio::test]
async fn a_role_for_container_jobs_only_keeps_the_replica_ready_and_names_what_spark_lacks() {
    // A cluster with a Spark operator installed, and a service whose Role covers container
    // jobs only, and is older than kubeferry's reading of events: its Spark watches and its
    // watch of events are refused, which must not keep it unready.
    let mut sim_config = with_spark_operators(SimConfig::for_tests());
    sim_config.rbac = true;
    let sim = Sim::start_with(sim_config).await;
    let namespace = "default";
    let granted: Vec<_> = kubeferry_kube::rbac::permissions(&[kubeferry_core::JobKind::Job])
        .into_iter()
        .filter(|permission| permission.resource != "events")
        .collect();
    let role = kubeferry_kube::rbac::role("kubeferry", Some(namespace), &granted);
    let (account, binding) =
        kubeferry_kube::rbac::binding("kubeferry", "kubeferry", Some(namespace));
    for object in [
        serde_json::to_value(&account).unwrap(),
        serde_json::to_value(&role).unwrap(),
        serde_json::to_value(&binding).unwrap(),
    ] {
        sim.sim.create(namespace, object).unwrap();
    }
    let token = sim.sim.token_for(namespace, "kubeferry");
    let kubeconfig = sim.dir.path().join("kubeconfig-containers-only");
    sim.sim
        .write_kubeconfig_as(&kubeconfig, CLUSTER, &token)
        .unwrap();
    let mut config = spark_config(&sim, SparkOperator::Apache);
    config.clusters[0].source = kubeferry_server::config::ClusterSource::Kubeconfig {
        path: Some(kubeconfig),
        context: Some(CLUSTER.into()),
    };
    config.namespaces = vec![namespace.into()];
    // Ready (the start waits for it), though the Spark watches are refused.
    let service = Service::start(config).await;
    let api = &service.api;
    let readiness = api.get("/readyz").await;
    assert_eq!(readiness.status, StatusCode::OK, "{}", readiness.text());
    let refused: Vec<String> = readiness.json()["clusters"][0]["namespaces"][0]["watches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|watch| watch["synced"] == false)
        .map(|watch| watch["resource"].as_str().unwrap().to_string())
        .collect();
    assert!(
        refused.iter().any(|r| r == "events") && refused.iter().any(|r| r.starts_with("spark")),
        "{}",
        readiness.text()
    );

    // Selector streams announce their listing: the refused kind has nothing to list.
    let mut events = Events::new(api.open("/v1/events?namespace=default").await);
    assert_eq!(events.next_named("listed").await.unwrap().event, "listed");
    let id = api.submit(shell_job("plain", "echo ok")).await;
    api.wait_for(&id, "SUCCEEDED").await;
    let body = api
        .post("/v1/jobs", &spark_job("pi", &["exit=0".into()]))
        .await
        .error(StatusCode::BAD_GATEWAY, "kubernetes_forbidden");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("sparkapplications"), "{message}");
    service.stop().await;
}
