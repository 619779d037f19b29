//! The simulated Spark operators: each operator's state sequence, driver pod shape, restarts,
//! timeouts, retention and TTL, and the faults they can be made to suffer.

mod common;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, LogParams, WatchEvent, WatchParams};
use kubeferry_sim::SimConfig;
use kubeferry_sim::controllers::spark::{SparkFault, with_spark_operators};
use serde_json::{Value, json};

use common::{Sim, eventually, start_with};

const DEADLINE: Duration = Duration::from_secs(20);

fn resource(group: &str, version: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: "SparkApplication".into(),
        plural: "sparkapplications".into(),
    }
}

fn apache_api(sim: &Sim) -> Api<DynamicObject> {
    Api::namespaced_with(
        sim.client.clone(),
        "default",
        &resource("spark.apache.org", "v1"),
    )
}

fn kubeflow_api(sim: &Sim) -> Api<DynamicObject> {
    Api::namespaced_with(
        sim.client.clone(),
        "default",
        &resource("sparkoperator.k8s.io", "v1beta2"),
    )
}

fn spark_config() -> SimConfig {
    let mut config = with_spark_operators(SimConfig::for_tests());
    config.spark.release_delay = Duration::from_millis(50);
    config
}

async fn spark_sim() -> Sim {
    start_with(spark_config()).await
}

fn apache_app(name: &str, args: &[&str], tolerations: Value) -> Value {
    json!({
        "apiVersion": "spark.apache.org/v1",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "mainClass": "org.apache.spark.examples.SparkPi",
            "jars": "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar",
            "driverArgs": args,
            "runtimeVersions": {"sparkVersion": "3.5.3"},
            "sparkConf": {
                "spark.kubernetes.container.image": "apache/spark:3.5.3",
                "spark.kubernetes.authenticate.driver.serviceAccountName": "spark",
                "spark.executor.instances": "1",
                "spark.driver.memory": "512m",
                "spark.executor.memory": "512m",
                "spark.kubernetes.driverEnv.GREETING": "hello",
            },
            "driverSpec": {"podTemplateSpec": {"metadata": {"labels": {"team": "data"}, "annotations": {"note": "driver"}}}},
            "executorSpec": {"podTemplateSpec": {"metadata": {"labels": {"team": "data"}}}},
            "applicationTolerations": tolerations,
        }
    })
}

fn kubeflow_app(name: &str, args: &[&str], extra: Value) -> Value {
    let mut app = json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "sparkVersion": "3.5.3",
            "image": "apache/spark:3.5.3",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar",
            "arguments": args,
            "driver": {"cores": 1, "memory": "512m", "serviceAccount": "spark-operator-spark", "labels": {"team": "data"}, "env": [{"name": "GREETING", "value": "hello"}]},
            "executor": {"cores": 1, "memory": "512m", "instances": 1, "labels": {"team": "data"}},
            "restartPolicy": {"type": "Never"},
        }
    });
    if let (Some(spec), Some(extra)) = (app["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    app
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    api.get_opt(name)
        .await
        .expect("the application is readable")
        .map(|o| serde_json::to_value(o).expect("json"))
}

fn apache_state(app: &Value) -> &str {
    app.pointer("/status/currentState/currentStateSummary")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn apache_history(app: &Value) -> Vec<String> {
    let mut entries: Vec<(u64, String)> = app
        .pointer("/status/stateTransitionHistory")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.parse().expect("numeric keys"),
                        v["currentStateSummary"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    entries.into_iter().map(|(_, s)| s).collect()
}

fn kubeflow_state(app: &Value) -> &str {
    app.pointer("/status/applicationState/state")
        .and_then(Value::as_str)
        .unwrap_or("<none>")
}

/// Waits until the application satisfies `done`.
async fn until(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, DEADLINE, || async {
        get(api, name).await.filter(|app| done(app))
    })
    .await
}

/// Every Kubeflow state the application goes through, from creation until `last`.
async fn kubeflow_states(
    api: &Api<DynamicObject>,
    from: &str,
    name: &str,
    last: &[&str],
) -> Vec<String> {
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = api.watch(&params, from).await.expect("watch").boxed();
    let mut states: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while let Ok(next) = tokio::time::timeout_at(deadline, events.try_next()).await {
        let Some(event) = next.expect("the watch goes on") else {
            break;
        };
        let object = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => o,
            _ => continue,
        };
        let app = serde_json::to_value(object).expect("json");
        let state = kubeflow_state(&app).to_string();
        if states.last() != Some(&state) {
            states.push(state.clone());
        }
        if last.contains(&state.as_str()) {
            return states;
        }
    }
    panic!("{name} did not reach {last:?}; seen {states:?}");
}

/// The API error behind a refused write.
fn api_error(error: kubeferry_sim::SimError) -> kubeferry_sim::api::status::ApiError {
    match error {
        kubeferry_sim::SimError::Api(e) => e,
        other => panic!("not an API error: {other}"),
    }
}

/// The status of an application as it first stood in each state it went through, up to one of
/// `last`.
async fn kubeflow_statuses(
    api: &Api<DynamicObject>,
    from: &str,
    name: &str,
    last: &str,
) -> Vec<(String, Value)> {
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = api.watch(&params, from).await.expect("watch").boxed();
    let mut seen: Vec<(String, Value)> = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while let Ok(next) = tokio::time::timeout_at(deadline, events.try_next()).await {
        let Some(event) = next.expect("the watch goes on") else {
            break;
        };
        let object = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => o,
            _ => continue,
        };
        let app = serde_json::to_value(object).expect("json");
        let state = kubeflow_state(&app).to_string();
        if seen.last().map(|(s, _)| s) != Some(&state) {
            seen.push((state.clone(), app["status"].clone()));
        }
        if state == last {
            return seen;
        }
    }
    panic!("{name} did not reach {last}; seen {seen:?}");
}

/// Lets each of `runs` runs of a Kubeflow application's driver, started with `take=<gate>`, end
/// once the operator saw it running: a driver that ends first goes from `SUBMITTED` straight to
/// its end.
async fn release_each_run(api: &Api<DynamicObject>, name: &str, gate: &std::path::Path, runs: u64) {
    for run in 1..=runs {
        until(api, name, "the run to be seen running", |app| {
            kubeflow_state(app) == "RUNNING" && app["status"]["executionAttempts"] == run
        })
        .await;
        std::fs::write(gate, "").expect("the gate opens");
    }
}

/// A file whose creation lets a driver started with `until=<file>` finish (or, with
/// `take=<file>`, one run of it).
fn release_file(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "kubeferry-sim-spark-{name}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

async fn pod(sim: &Sim, name: &str) -> Option<Pod> {
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    pods.get_opt(name).await.expect("pods are readable")
}

async fn log_of(sim: &Sim, name: &str, container: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let params = LogParams {
        container: Some(container.to_string()),
        ..LogParams::default()
    };
    pods.logs(name, &params).await.expect("the log is readable")
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn exit_code(pod: &Pod) -> Option<i32> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "spark-kubernetes-driver")?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

#[tokio::test]
async fn apache_application_runs_through_its_states_to_succeeded() {
    let sim = spark_sim().await;
    let api = apache_api(&sim);
    let release = release_file("apache-pi");
    let until_arg = format!("until={}", release.display());
    sim.cluster
        .create(
            "default",
            apache_app(
                "pi",
                &["10", &until_arg],
                json!({"restartConfig": {"restartPolicy": "Never"}}),
            ),
        )
        .expect("created");
    // The driver pod as Spark shapes it, while it runs.
    let driver = eventually("the driver pod", DEADLINE, || pod(&sim, "pi-0-driver")).await;
    let labels = driver.metadata.labels.clone().unwrap_or_default();
    for (key, value) in [
        ("spark.operator/spark-app-name", "pi"),
        ("spark-role", "driver"),
        ("spark-app-name", "pi"),
        ("spark-version", "3.5.3"),
        ("team", "data"),
    ] {
        assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}");
    }
    assert!(labels["spark-app-selector"].starts_with("spark-"));
    let owner = &driver.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("SparkApplication", "pi", Some(true))
    );
    let spec = driver.spec.as_ref().expect("spec");
    let container = &spec.containers[0];
    assert_eq!(container.name, "spark-kubernetes-driver");
    assert_eq!(container.command, None);
    assert_eq!(
        container.args.as_deref().unwrap_or_default()[..5],
        [
            "driver",
            "--properties-file",
            "/opt/spark/conf/spark.properties",
            "--class",
            "org.apache.spark.examples.SparkPi"
        ]
    );
    assert_eq!(spec.service_account_name.as_deref(), Some("spark"));
    assert!(
        container
            .env
            .as_ref()
            .expect("env")
            .iter()
            .any(|e| e.name == "GREETING" && e.value.as_deref() == Some("hello"))
    );

    until(&api, "pi", "the executors to run", |app| {
        apache_state(app) == "RunningHealthy"
    })
    .await;
    std::fs::write(&release, "").expect("the driver is released");
    let app = until(&api, "pi", "the application to be released", |app| {
        apache_state(app) == "ResourceReleased"
    })
    .await;
    assert_eq!(
        apache_history(&app),
        [
            "Submitted",
            "DriverRequested",
            "DriverStarted",
            "DriverReady",
            "RunningHealthy",
            "Succeeded",
            "ResourceReleased"
        ]
    );
    let succeeded = &app["status"]["stateTransitionHistory"]["5"];
    assert_eq!(
        succeeded["message"],
        "Spark application completed successfully."
    );
    assert_eq!(
        succeeded
            .pointer("/lastObservedDriverStatus/containerStatuses/0/state/terminated/exitCode"),
        Some(&json!(0))
    );
    assert_eq!(
        app["status"]["currentAttemptSummary"]["attemptInfo"]["id"],
        0
    );
    assert!(
        app["metadata"]["finalizers"]
            .as_array()
            .expect("finalizers")
            .contains(&json!("sparkapplications.spark.apache.org/finalizer"))
    );
    // Released: the driver and the executor are gone.
    eventually("the pods to go", DEADLINE, || async {
        let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
        let left = pods
            .list(&ListParams::default().labels("spark.operator/spark-app-name=pi"))
            .await
            .expect("list");
        left.items.is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn apache_failed_driver_is_retained_with_its_exit_code_and_log() {
    let sim = spark_sim().await;
    let api = apache_api(&sim);
    sim.cluster
        .create(
            "default",
            apache_app(
                "fails",
                &["exit=3"],
                json!({"restartConfig": {"restartPolicy": "Never"}, "resourceRetainPolicy": "OnFailure"}),
            ),
        )
        .expect("created");
    let app = until(&api, "fails", "the application to end", |app| {
        apache_state(app) == "TerminatedWithoutReleaseResources"
    })
    .await;
    let history = apache_history(&app);
    assert_eq!(history[history.len() - 2], "Failed", "{history:?}");
    let driver = pod(&sim, "fails-0-driver")
        .await
        .expect("the driver is kept");
    assert_eq!(exit_code(&driver), Some(3));
    let log = log_of(&sim, "fails-0-driver", "spark-kubernetes-driver").await;
    assert!(
        log.contains("INFO SparkContext: Submitted application: SparkPi"),
        "{log}"
    );
    assert!(log.contains("asked to exit with code 3"), "{log}");

    // Kept for a while only: released after resourceRetainDurationMillis.
    sim.cluster
        .create(
            "default",
            apache_app(
                "briefly",
                &["exit=3"],
                json!({"restartConfig": {"restartPolicy": "Never"}, "resourceRetainPolicy": "Always", "resourceRetainDurationMillis": 100}),
            ),
        )
        .expect("created");
    let app = until(&api, "briefly", "the release", |app| {
        apache_state(app) == "ResourceReleased"
    })
    .await;
    let history = apache_history(&app);
    assert_eq!(
        history[history.len() - 3..],
        [
            "Failed",
            "TerminatedWithoutReleaseResources",
            "ResourceReleased"
        ]
    );
    eventually("the driver to go", DEADLINE, || async {
        pod(&sim, "briefly-0-driver").await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn apache_driver_that_never_starts_times_out() {
    let sim = spark_sim().await;
    let api = apache_api(&sim);
    let mut app = apache_app(
        "stuck",
        &["10"],
        json!({
            "restartConfig": {"restartPolicy": "Never"},
            "applicationTimeoutConfig": {"driverStartTimeoutMillis": 300},
        }),
    );
    app["spec"]["sparkConf"]["spark.kubernetes.container.image"] =
        json!("registry.invalid/spark:1");
    sim.cluster.create("default", app).expect("created");
    let app = until(&api, "stuck", "the start timeout", |app| {
        apache_state(app) == "ResourceReleased"
    })
    .await;
    assert_eq!(
        apache_history(&app),
        [
            "Submitted",
            "DriverRequested",
            "DriverStartTimedOut",
            "ResourceReleased"
        ]
    );
    let timed_out = &app["status"]["stateTransitionHistory"]["2"];
    assert!(
        timed_out
            .pointer("/lastObservedDriverStatus/containerStatuses/0/state/waiting/reason")
            .and_then(Value::as_str)
            .is_some_and(|r| r.contains("ImagePull") || r == "ErrImagePull"),
        "{timed_out}"
    );
}

#[tokio::test]
async fn apache_driver_templates_add_sidecars_and_an_unready_driver_times_out() {
    let sim = spark_sim().await;
    let api = apache_api(&sim);
    let mut app = apache_app(
        "sidecar",
        &["sleep=30"],
        json!({
            "restartConfig": {"restartPolicy": "Never"},
            "resourceRetainPolicy": "Always",
            "applicationTimeoutConfig": {"driverReadyTimeoutMillis": 300},
        }),
    );
    // The first container is the one Spark builds the driver on; the others run beside it.
    // This sidecar's image cannot be pulled, so the pod never becomes Ready.
    app["spec"]["driverSpec"]["podTemplateSpec"]["spec"] = json!({"containers": [
        {"name": "spark-kubernetes-driver"},
        {"name": "proxy", "image": "registry.invalid/proxy:1", "command": ["sleep", "30"]}
    ]});
    sim.cluster.create("default", app).expect("created");
    let app = until(&api, "sidecar", "the ready timeout", |app| {
        apache_state(app) == "TerminatedWithoutReleaseResources"
    })
    .await;
    assert_eq!(
        apache_history(&app),
        [
            "Submitted",
            "DriverRequested",
            "DriverStarted",
            "DriverReadyTimedOut",
            "TerminatedWithoutReleaseResources"
        ]
    );
    assert_eq!(
        app["status"]["stateTransitionHistory"]["3"]["message"],
        json!(
            "The driver has not responded to the initial health check request within the allotted start-up time. This can be configured by setting .spec.applicationTolerations.applicationTimeoutConfig."
        )
    );
    let driver = pod(&sim, "sidecar-0-driver").await.expect("kept");
    let names: Vec<&str> = driver
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["spark-kubernetes-driver", "proxy"]);
    assert!(
        log_of(&sim, "sidecar-0-driver", "spark-kubernetes-driver")
            .await
            .contains("Running Spark application SparkPi")
    );

    // The template's first container names the driver's container.
    let mut named = apache_app(
        "named",
        &["10"],
        json!({"restartConfig": {"restartPolicy": "Never"}, "resourceRetainPolicy": "Always"}),
    );
    named["spec"]["driverSpec"]["podTemplateSpec"]["spec"] =
        json!({"containers": [{"name": "main"}]});
    sim.cluster.create("default", named).expect("created");
    until(&api, "named", "the run to end", |app| {
        apache_state(app) == "TerminatedWithoutReleaseResources"
    })
    .await;
    let driver = pod(&sim, "named-0-driver").await.expect("kept");
    assert_eq!(
        driver.spec.map(|s| s.containers[0].name.clone()).as_deref(),
        Some("main")
    );
}

#[tokio::test]
async fn kubeflow_driver_sidecars_run_beside_the_driver() {
    let sim = spark_sim().await;
    let api = kubeflow_api(&sim);
    let app = kubeflow_app(
        "with-sidecar",
        &["10"],
        json!({"driver": {"cores": 1, "memory": "512m", "serviceAccount": "spark-operator-spark",
                          "sidecars": [{"name": "logger", "image": "busybox:1.36", "command": ["sh", "-c", "echo from the sidecar; sleep 30"]}]}}),
    );
    sim.cluster.create("default", app).expect("created");
    until(&api, "with-sidecar", "completion", |app| {
        kubeflow_state(app) == "COMPLETED"
    })
    .await;
    let driver = pod(&sim, "with-sidecar-driver").await.expect("kept");
    let names: Vec<String> = driver
        .spec
        .map(|s| s.containers.into_iter().map(|c| c.name).collect())
        .unwrap_or_default();
    assert_eq!(names, ["spark-kubernetes-driver", "logger"]);
    common::eventually("the sidecar's own log", Duration::from_secs(10), || async {
        (log_of(&sim, "with-sidecar-driver", "logger").await == "from the sidecar\n").then_some(())
    })
    .await;
    assert!(
        log_of(&sim, "with-sidecar-driver", "spark-kubernetes-driver")
            .await
            .contains("Pi is roughly")
    );
}

#[tokio::test]
async fn apache_restarts_on_failure_until_the_attempts_run_out() {
    let sim = spark_sim().await;
    let api = apache_api(&sim);
    // Each attempt's driver fails only once the test saw it running healthy: a driver that
    // fails first goes from `DriverReady` straight to `Failed`.
    let gate = release_file("apache-flaky");
    let take = format!("take={}", gate.display());
    sim.cluster
        .create(
            "default",
            apache_app(
                "flaky",
                &["exit=1", &take],
                json!({"restartConfig": {"restartPolicy": "OnFailure", "maxRestartAttempts": 1, "restartBackoffMillis": 10}}),
            ),
        )
        .expect("created");
    for attempt in 0..2 {
        until(&api, "flaky", "the attempt to run healthy", |app| {
            apache_state(app) == "RunningHealthy"
                && app["status"]["currentAttemptSummary"]["attemptInfo"]["id"] == attempt
        })
        .await;
        std::fs::write(&gate, "").expect("the gate opens");
    }
    let app = until(&api, "flaky", "the restarts to run out", |app| {
        apache_state(app) == "ResourceReleased"
    })
    .await;
    let history = apache_history(&app);
    assert_eq!(
        history,
        [
            "Submitted",
            "DriverRequested",
            "DriverStarted",
            "DriverReady",
            "RunningHealthy",
            "Failed",
            "ScheduledToRestart",
            "DriverRequested",
            "DriverStarted",
            "DriverReady",
            "RunningHealthy",
            "Failed",
            "ResourceReleased"
        ]
    );
    assert_eq!(
        app["status"]["currentAttemptSummary"]["attemptInfo"]["id"],
        1
    );
    assert_eq!(
        app["status"]["currentState"]["message"],
        "The maximum number of restart attempts (1) has been exceeded."
    );
}

#[tokio::test]
async fn apache_application_expires_after_its_ttl_and_deletion_releases_the_driver() {
    let sim = spark_sim().await;
    let api = apache_api(&sim);
    sim.cluster
        .create(
            "default",
            apache_app(
                "short",
                &["10"],
                json!({"restartConfig": {"restartPolicy": "Never"}, "ttlAfterStopMillis": 50}),
            ),
        )
        .expect("created");
    eventually("the application to expire", DEADLINE, || async {
        get(&api, "short").await.is_none().then_some(())
    })
    .await;

    // A running application that is deleted: the operator releases its driver, notes it, and
    // lets the application go.
    sim.cluster
        .create(
            "default",
            apache_app(
                "long",
                &["sleep=30"],
                json!({"restartConfig": {"restartPolicy": "Never"}}),
            ),
        )
        .expect("created");
    until(&api, "long", "the application to run", |app| {
        apache_state(app) == "RunningHealthy"
    })
    .await;
    let mut events = api
        .watch(
            &WatchParams::default().fields("metadata.name=long"),
            &sim.cluster.resource_version().to_string(),
        )
        .await
        .expect("watch")
        .boxed();
    api.delete("long", &Default::default())
        .await
        .expect("deleted");
    let mut last_state = String::new();
    while let Some(event) = events.next().await {
        match event.expect("event") {
            WatchEvent::Modified(o) => {
                last_state = apache_state(&serde_json::to_value(o).expect("json")).to_string();
            }
            WatchEvent::Deleted(_) => break,
            _ => {}
        }
    }
    assert_eq!(last_state, "ResourceReleased");
    assert!(
        pod(&sim, "long-0-driver")
            .await
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
    );
}

#[tokio::test]
async fn kubeflow_application_runs_through_its_states_to_completed() {
    let sim = spark_sim().await;
    let api = kubeflow_api(&sim);
    let from = sim.cluster.resource_version().to_string();
    let gate = release_file("kubeflow-pi");
    let take = format!("take={}", gate.display());
    sim.cluster
        .create("default", kubeflow_app("pi", &["10", &take], json!({})))
        .expect("created");
    let (states, ()) = tokio::join!(
        kubeflow_states(&api, &from, "pi", &["COMPLETED", "FAILED"]),
        release_each_run(&api, "pi", &gate, 1)
    );
    assert_eq!(
        states,
        [
            "<none>",
            "",
            "SUBMITTED",
            "RUNNING",
            "SUCCEEDING",
            "COMPLETED"
        ]
    );
    let app = get(&api, "pi").await.expect("kept");
    let status = &app["status"];
    assert_eq!(status["driverInfo"]["podName"], "pi-driver");
    assert_eq!(
        (
            status["submissionAttempts"].as_i64(),
            status["executionAttempts"].as_i64()
        ),
        (Some(1), Some(1))
    );
    assert!(status["terminationTime"].is_string());
    assert!(
        status["executorState"]
            .as_object()
            .is_some_and(|m| m.values().all(|s| s == "COMPLETED") && m.len() == 1),
        "{status}"
    );
    // The driver stays, with its labels and its log, as long as the application.
    let driver = pod(&sim, "pi-driver").await.expect("kept");
    for (key, value) in [
        ("sparkoperator.k8s.io/app-name", "pi"),
        ("spark-role", "driver"),
        ("sparkoperator.k8s.io/launched-by-spark-operator", "true"),
        ("team", "data"),
    ] {
        assert_eq!(label(&driver, key), Some(value), "{key}");
    }
    assert_eq!(
        label(&driver, "sparkoperator.k8s.io/submission-id"),
        status["submissionID"].as_str()
    );
    assert_eq!(exit_code(&driver), Some(0));
    let log = log_of(&sim, "pi-driver", "spark-kubernetes-driver").await;
    assert!(log.contains("Pi is roughly 3.14"), "{log}");
}

#[tokio::test]
async fn kubeflow_failed_driver_reports_its_exit_code_and_reruns_on_failure() {
    let sim = spark_sim().await;
    let api = kubeflow_api(&sim);
    let from = sim.cluster.resource_version().to_string();
    let gate = release_file("kubeflow-fails");
    let take = format!("take={}", gate.display());
    sim.cluster
        .create(
            "default",
            kubeflow_app(
                "fails",
                &["exit=2", &take],
                json!({"restartPolicy": {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1, "onSubmissionFailureRetries": 1, "onSubmissionFailureRetryInterval": 1}}),
            ),
        )
        .expect("created");
    let (states, ()) = tokio::join!(
        kubeflow_states(&api, &from, "fails", &["FAILED"]),
        release_each_run(&api, "fails", &gate, 2)
    );
    assert_eq!(
        states,
        [
            "<none>",
            "",
            "SUBMITTED",
            "RUNNING",
            "FAILING",
            "PENDING_RERUN",
            "SUBMITTED",
            "RUNNING",
            "FAILING",
            "FAILED"
        ]
    );
    let app = get(&api, "fails").await.expect("kept");
    assert_eq!(
        app["status"]["applicationState"]["errorMessage"],
        "driver container failed with ExitCode: 2, Reason: Error"
    );
    assert_eq!(app["status"]["executionAttempts"], 2);
}

#[tokio::test]
async fn kubeflow_submission_failure_is_retried_then_fails() {
    let sim = spark_sim().await;
    let api = kubeflow_api(&sim);
    let from = sim.cluster.resource_version().to_string();
    let mut app = kubeflow_app(
        "nosa",
        &["10"],
        json!({"restartPolicy": {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1, "onSubmissionFailureRetries": 1, "onSubmissionFailureRetryInterval": 1}}),
    );
    app["spec"]["driver"]["serviceAccount"] = json!("missing");
    sim.cluster.create("default", app).expect("created");
    let states = kubeflow_states(&api, &from, "nosa", &["FAILED"]).await;
    assert_eq!(
        states,
        ["<none>", "", "SUBMISSION_FAILED", "FAILED"],
        "two failed submissions in a row leave the state SUBMISSION_FAILED in between"
    );
    let app = get(&api, "nosa").await.expect("kept");
    assert_eq!(app["status"]["submissionAttempts"], 2);
    let error = app["status"]["applicationState"]["errorMessage"]
        .as_str()
        .expect("an error");
    assert!(
        error.starts_with("failed to run spark-submit") && error.contains("missing"),
        "{error}"
    );
}

#[tokio::test]
async fn kubeflow_application_expires_after_its_ttl() {
    let sim = spark_sim().await;
    let api = kubeflow_api(&sim);
    sim.cluster
        .create(
            "default",
            kubeflow_app("short", &["10"], json!({"timeToLiveSeconds": 0})),
        )
        .expect("created");
    eventually("the application to expire", DEADLINE, || async {
        get(&api, "short").await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn operators_can_be_made_to_misbehave() {
    let config = spark_config();
    let faults = config.spark.faults.clone();
    let sim = start_with(config).await;
    let (apache, kubeflow) = (apache_api(&sim), kubeflow_api(&sim));
    let rules = json!({"restartConfig": {"restartPolicy": "Never"}});
    faults.set_for("odd-a", Some(SparkFault::UnreadableStatus));
    faults.set_for("odd-k", Some(SparkFault::UnreadableStatus));
    faults.set_for("silent", Some(SparkFault::NoStatus));
    faults.set_for("liar", Some(SparkFault::FailWithDriverRunning));
    faults.set_for("liar-k", Some(SparkFault::FailWithDriverRunning));

    sim.cluster
        .create("default", apache_app("silent", &["10"], rules.clone()))
        .expect("created");
    for name in ["odd-a", "liar"] {
        let args: &[&str] = if name == "liar" {
            &["sleep=30"]
        } else {
            &["10"]
        };
        sim.cluster
            .create("default", apache_app(name, args, rules.clone()))
            .expect("created");
    }
    for name in ["odd-k", "liar-k"] {
        let args: &[&str] = if name == "liar-k" {
            &["sleep=30"]
        } else {
            &["10"]
        };
        sim.cluster
            .create("default", kubeflow_app(name, args, json!({})))
            .expect("created");
    }
    for (api, name) in [(&apache, "odd-a"), (&kubeflow, "odd-k")] {
        let app = until(api, name, "the odd status", |app| {
            app.get("status").is_some()
        })
        .await;
        assert_eq!(app["status"], json!({"phase": "Running"}));
    }
    // The operator handled "silent" before "odd-a" (its queue is first in, first out), and
    // left it alone: no status, no finalizer, no driver.
    let silent = get(&apache, "silent").await.expect("there");
    assert!(silent.get("status").is_none(), "{silent}");
    assert!(silent["metadata"].get("finalizers").is_none());
    assert!(pod(&sim, "silent-0-driver").await.is_none());

    let app = until(&apache, "liar", "the failure", |app| {
        apache_state(app) == "TerminatedWithoutReleaseResources"
    })
    .await;
    assert!(apache_history(&app).contains(&"Failed".to_string()));
    let app = until(&kubeflow, "liar-k", "the failure", |app| {
        kubeflow_state(app) == "FAILED"
    })
    .await;
    assert!(app["status"]["terminationTime"].is_string());
    for driver in ["liar-0-driver", "liar-k-driver"] {
        let pod = pod(&sim, driver).await.expect("kept");
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running"),
            "{driver}"
        );
    }
}

/// Every path of a status (object keys joined by `/`; history keys and executor names, which
/// differ from run to run, as `*`), down to `depth` levels.
fn shape(value: &Value, prefix: &str, depth: usize, variable: &[&str], out: &mut Vec<String>) {
    let Some(map) = value.as_object() else {
        return;
    };
    for (key, child) in map {
        let key = if variable.iter().any(|v| prefix.ends_with(v)) {
            "*"
        } else {
            key.as_str()
        };
        let path = format!("{prefix}/{key}");
        if !out.contains(&path) {
            out.push(path.clone());
        }
        if depth > 1 {
            shape(child, &path, depth - 1, variable, out);
        }
    }
}

fn fixture(path: &str) -> Value {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../core/tests/fixtures/spark")
        .join(path);
    let text = std::fs::read_to_string(&file).expect("the fixture is readable");
    serde_saphyr::from_str(&text).expect("the fixture parses")
}

#[tokio::test]
async fn statuses_have_the_shape_the_operators_write() {
    let sim = spark_sim().await;
    sim.cluster
        .create(
            "default",
            apache_app(
                "shape-a",
                &["10"],
                json!({"restartConfig": {"restartPolicy": "Never"}}),
            ),
        )
        .expect("created");
    sim.cluster
        .create("default", kubeflow_app("shape-k", &["10"], json!({})))
        .expect("created");
    let apache = until(&apache_api(&sim), "shape-a", "the end", |app| {
        apache_state(app) == "ResourceReleased"
    })
    .await;
    let kubeflow = until(&kubeflow_api(&sim), "shape-k", "the end", |app| {
        kubeflow_state(app) == "COMPLETED"
    })
    .await;
    // The operator's own fields, to the depth that is the operator's (below it, pod statuses
    // are the kubelet's).
    let cases = [
        (
            apache,
            fixture("apache/succeeded/app.yaml"),
            &["stateTransitionHistory"][..],
            3,
            &[][..],
        ),
        (
            kubeflow,
            fixture("kubeflow/completed/app.yaml"),
            &["executorState"][..],
            2,
            // No UI service is simulated.
            &[
                "/driverInfo/webUIAddress",
                "/driverInfo/webUIPort",
                "/driverInfo/webUIServiceName",
            ][..],
        ),
    ];
    for (simulated, real, variable, depth, absent) in cases {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        shape(&simulated["status"], "", depth, variable, &mut ours);
        shape(&real["status"], "", depth, variable, &mut theirs);
        ours.sort();
        theirs.retain(|p| !absent.contains(&p.as_str()));
        theirs.sort();
        assert_eq!(ours, theirs);
    }
}

/// The operator's status details through a failed run and its rerun: `terminationTime` is set
/// when the driver ends (FAILING), not later; PENDING_RERUN clears it with the error, the
/// driver's details, the executors' states and the application id.
#[tokio::test]
async fn kubeflow_status_details_follow_the_operator_through_a_rerun() {
    let sim = spark_sim().await;
    let api = kubeflow_api(&sim);
    let from = sim.cluster.resource_version().to_string();
    let gate = release_file("kubeflow-rerun");
    let take = format!("take={}", gate.display());
    sim.cluster
        .create(
            "default",
            kubeflow_app(
                "rerun",
                &["exit=3", &take],
                json!({"restartPolicy": {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}}),
            ),
        )
        .expect("created");
    let (seen, ()) = tokio::join!(
        kubeflow_statuses(&api, &from, "rerun", "FAILED"),
        release_each_run(&api, "rerun", &gate, 2)
    );
    let states: Vec<&str> = seen.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        states,
        [
            "<none>",
            "",
            "SUBMITTED",
            "RUNNING",
            "FAILING",
            "PENDING_RERUN",
            "SUBMITTED",
            "RUNNING",
            "FAILING",
            "FAILED"
        ]
    );
    let status = |i: usize| &seen[i].1;
    for running in [2, 3] {
        assert!(
            status(running).get("terminationTime").is_none(),
            "{}: {}",
            states[running],
            status(running)
        );
    }
    let failing = status(4);
    assert!(failing["terminationTime"].is_string(), "{failing}");
    assert_eq!(
        failing["applicationState"]["errorMessage"],
        "driver container failed with ExitCode: 3, Reason: Error"
    );
    assert_eq!(failing["driverInfo"]["podName"], "rerun-driver");
    assert!(failing["sparkApplicationId"].is_string());
    let rerun = status(5);
    assert_eq!(rerun["applicationState"], json!({"state": "PENDING_RERUN"}));
    assert_eq!(rerun["driverInfo"], json!({}));
    for cleared in ["terminationTime", "sparkApplicationId", "executorState"] {
        assert!(rerun.get(cleared).is_none(), "{cleared}: {rerun}");
    }
    assert_eq!(rerun["executionAttempts"], 1, "the attempts stay");
    let app = get(&api, "rerun").await.expect("kept");
    assert_eq!(
        app["status"]["terminationTime"],
        status(8)["terminationTime"],
        "FAILED keeps the time the driver ended"
    );
}

/// The operator's validating webhook refuses names that are not DNS-1035 labels and the Spark
/// properties it reserves, as the API server answers a webhook's denial; nothing is created.
#[tokio::test]
async fn kubeflow_webhook_denies_bad_names_and_reserved_properties() {
    let sim = spark_sim().await;
    let api = kubeflow_api(&sim);
    let webhook = "admission webhook \"validate-sparkoperator-k8s-io-v1beta2-sparkapplication.sparkoperator.k8s.io\" denied the request";
    let denied = sim
        .cluster
        .create("default", kubeflow_app("9lives", &["1"], json!({})))
        .map_err(api_error)
        .expect_err("denied");
    assert_eq!((denied.code, denied.reason), (403, "Forbidden"));
    assert_eq!(
        denied.message,
        format!(
            "{webhook}: invalid SparkApplication name \"9lives\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        )
    );
    for (key, why) in [
        (
            "spark.kubernetes.driver.container.image",
            "use the image field on the CRD instead",
        ),
        (
            "spark.kubernetes.executor.container.image",
            "use the image field on the CRD instead",
        ),
        (
            "spark.kubernetes.driver.master",
            "this value is managed by the operator",
        ),
        (
            "spark.kubernetes.authenticate.oauthToken",
            "authentication credentials are managed by the operator",
        ),
        (
            "spark.kubernetes.authenticate.driver.serviceAccountName",
            "configure the service account via the CRD spec instead",
        ),
    ] {
        let denied = sim
            .cluster
            .create(
                "default",
                kubeflow_app("reserved", &["1"], json!({"sparkConf": {key: "x"}})),
            )
            .map_err(api_error)
            .expect_err("denied");
        assert_eq!(denied.code, 403);
        assert_eq!(
            denied.message,
            format!("{webhook}: sparkConf key \"{key}\" is not allowed: {why}")
        );
    }
    let denied = sim
        .cluster
        .create(
            "default",
            kubeflow_app(
                "elsewhere",
                &["1"],
                json!({"sparkConf": {"spark.kubernetes.namespace": "other"}}),
            ),
        )
        .map_err(api_error)
        .expect_err("denied");
    assert_eq!(
        denied.message,
        format!(
            "{webhook}: sparkConf key \"spark.kubernetes.namespace\" is not allowed: must equal the application namespace \"default\", got \"other\""
        )
    );
    for name in ["9lives", "reserved", "elsewhere"] {
        assert!(get(&api, name).await.is_none(), "{name} was not created");
    }
    sim.cluster
        .create("default", kubeflow_app("lives9", &["1"], json!({})))
        .expect("a name that starts with a letter is admitted");
}

/// Every leaf of `value` (a scalar, an empty list or an empty map) with its JSON pointer.
fn leaves(value: &Value, at: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                leaves(child, format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                leaves(child, format!("{at}/{i}"), out);
            }
        }
        leaf => out.push((at, leaf.clone())),
    }
}

/// The bundled CRD schemas keep every field of the applications the project's status fixtures
/// hold (objects in the shape the real operators write) and of what the simulated operators
/// write: nothing is pruned, nothing is refused.
#[tokio::test]
async fn the_bundled_schemas_keep_every_field_of_the_operators_applications() {
    use kubeferry_sim::CrdBundle;
    use kubeferry_sim::crd_schema::{apply, version_schema};
    let schema_of = |bundle: CrdBundle, version: &str| {
        let crd = kubeferry_sim::crds::bundle(bundle)
            .into_iter()
            .find(|c| c["spec"]["names"]["plural"] == "sparkapplications")
            .expect("bundled");
        version_schema(&crd, version).expect("a schema").clone()
    };
    let apache = schema_of(CrdBundle::SparkApache, "v1");
    let kubeflow = schema_of(CrdBundle::SparkKubeflow, "v1beta2");
    let check = |schema: &Value, object: &Value, what: &str| {
        let mut admitted = object.clone();
        let errors = apply(schema, &mut admitted, None);
        assert!(errors.is_empty(), "{what}: {errors:?}");
        let mut before = Vec::new();
        leaves(object, String::new(), &mut before);
        // A `null` (Go's zero time) is pruned as a real API server prunes it: the stored
        // object reads the same to the operator's typed client.
        let lost: Vec<&String> = before
            .iter()
            .filter(|(_, value)| !value.is_null())
            .filter(|(path, value)| admitted.pointer(path) != Some(value))
            .map(|(path, _)| path)
            .collect();
        assert!(lost.is_empty(), "{what}: pruned {lost:?}");
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/spark");
    let mut checked = 0;
    for (operator, schema) in [("apache", &apache), ("kubeflow", &kubeflow)] {
        let mut cases: Vec<String> = std::fs::read_dir(dir.join(operator))
            .expect("fixtures")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            // These hold statuses no operator writes, on purpose.
            .filter(|name| !name.starts_with("unknown") && !name.starts_with("unparseable"))
            .collect();
        cases.sort();
        for case in cases {
            let path = format!("{operator}/{case}/app.yaml");
            if dir.join(&path).exists() {
                check(schema, &fixture(&path), &path);
                checked += 1;
            }
        }
    }
    assert!(checked > 40, "{checked} fixtures");

    let sim = spark_sim().await;
    sim.cluster
        .create(
            "default",
            apache_app(
                "keep-a",
                &["exit=2"],
                json!({"restartConfig": {"restartPolicy": "Never"}}),
            ),
        )
        .expect("created");
    sim.cluster
        .create("default", kubeflow_app("keep-k", &["10"], json!({})))
        .expect("created");
    let ended_apache = until(&apache_api(&sim), "keep-a", "the end", |app| {
        apache_state(app) == "ResourceReleased"
    })
    .await;
    let ended_kubeflow = until(&kubeflow_api(&sim), "keep-k", "the end", |app| {
        kubeflow_state(app) == "COMPLETED"
    })
    .await;
    check(
        &apache,
        &ended_apache,
        "the simulated apache operator's application",
    );
    check(
        &kubeflow,
        &ended_kubeflow,
        "the simulated Kubeflow operator's application",
    );
}

/// A spec update carries the stored status over as it is, even a status the schema would
/// prune (one a misbehaving operator wrote): a main-resource write is not the status's writer.
#[tokio::test]
async fn a_spec_update_leaves_the_status_as_the_operator_wrote_it() {
    let config = spark_config();
    let faults = config.spark.faults.clone();
    let sim = start_with(config).await;
    let api = kubeflow_api(&sim);
    faults.set_for("odd", Some(SparkFault::UnreadableStatus));
    sim.cluster
        .create("default", kubeflow_app("odd", &["10"], json!({})))
        .expect("created");
    until(&api, "odd", "the odd status", |app| {
        app["status"] == json!({"phase": "Running"})
    })
    .await;
    let patched = api
        .patch(
            "odd",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"arguments": ["20"], "unknown": 1}})),
        )
        .await
        .expect("patched");
    let patched = serde_json::to_value(patched).expect("json");
    assert_eq!(patched["spec"]["arguments"], json!(["20"]));
    assert!(patched["spec"].get("unknown").is_none(), "pruned");
    assert_eq!(patched["status"], json!({"phase": "Running"}));
}
