//! Dry runs, client and server, for every kind: the objects a submission would create, as
//! kubeferry builds them and as the API server would store them, with nothing created.

use kubeferry_core::spec::{JobSpec, Params, load};
use kubeferry_kube::DryRun;
use kubeferry_sim::controllers::spark::with_spark_operators;
use kubeferry_sim::{CrdBundle, SimConfig};

use crate::support::{Env, NS, Settings};

/// A cluster serving every kind: Jobs, both Spark operators and JobSets.
async fn every_kind_env() -> Env {
    let mut config = with_spark_operators(SimConfig::for_tests());
    config.crd_bundles.push(CrdBundle::JobSet);
    Env::start_with(config, Settings::fast()).await
}

/// The repository's example job file `name`, with its defaults.
fn example(name: &str) -> JobSpec {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("the example");
    load(&path, &text, &Params::default()).expect("a valid example")
}

/// What the cluster holds of jobs: every kind's objects, their pods and outcome records.
fn held(env: &Env) -> [usize; 6] {
    [
        env.sim.count("batch", "jobs"),
        env.sim.count("jobset.x-k8s.io", "jobsets"),
        env.sim.count("spark.apache.org", "sparkapplications"),
        env.sim.count("sparkoperator.k8s.io", "sparkapplications"),
        env.sim.count("", "pods"),
        env.sim.count("", "configmaps"),
    ]
}

/// The error of a server dry run of `spec` that kubeferry itself builds without a word.
async fn refused_by_the_server(env: &Env, spec: &JobSpec, why: &str) -> kubeferry_kube::Error {
    env.executor
        .dry_run(spec, "dry-1", NS, DryRun::Client)
        .await
        .expect("the client builds it");
    env.executor
        .dry_run(spec, "dry-1", NS, DryRun::Server)
        .await
        .expect_err(why)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_of_every_kind_shows_its_object_and_creates_nothing() {
    let env = every_kind_env().await;
    let before = held(&env);
    let version = env.sim.resource_version();
    env.sim.reset_counters();
    for (file, kind, api_version) in [
        ("hello.yaml", "Job", "batch/v1"),
        ("indexed.yaml", "Job", "batch/v1"),
        ("jobset.yaml", "JobSet", "jobset.x-k8s.io/v1alpha2"),
        (
            "spark-pi-apache.yaml",
            "SparkApplication",
            "spark.apache.org/v1",
        ),
        (
            "spark-pi-kubeflow.yaml",
            "SparkApplication",
            "sparkoperator.k8s.io/v1beta2",
        ),
    ] {
        let spec = example(file);
        let client = env
            .executor
            .dry_run(&spec, "dry-1", NS, DryRun::Client)
            .await
            .unwrap_or_else(|error| panic!("{file}: {error}"));
        let server = env
            .executor
            .dry_run(&spec, "dry-1", NS, DryRun::Server)
            .await
            .unwrap_or_else(|error| panic!("{file}: {error}"));
        let ([client], [server]) = (client.as_slice(), server.as_slice()) else {
            panic!("{file}: one object each");
        };
        for object in [client, server] {
            assert_eq!(object["kind"], kind, "{file}");
            assert_eq!(object["apiVersion"], api_version, "{file}");
            assert_eq!(object["metadata"]["namespace"], NS, "{file}");
            assert_eq!(
                object["metadata"]["labels"]["kubeferry.dev/job-id"], "dry-1",
                "{file}"
            );
        }
        assert_eq!(
            client["metadata"]["name"], server["metadata"]["name"],
            "{file}"
        );
        // The server's answer is what it would store: with a uid and a creation time, which
        // kubeferry's own object does not have.
        assert!(client["metadata"]["uid"].is_null(), "{file}");
        assert!(server["metadata"]["uid"].is_string(), "{file}");
        assert!(
            server["metadata"]["creationTimestamp"].is_string(),
            "{file}"
        );
    }
    // Nothing was created, read from the records or watched; no resourceVersion was used.
    assert_eq!(held(&env), before);
    assert_eq!(env.sim.resource_version(), version);
    let counters = env.sim.counters();
    assert!(
        counters
            .keys()
            .all(|key| key.verb != "watch" && key.resource != "configmaps"),
        "{counters:#?}"
    );
    // Each server dry run was one create (with dryRun=All), and nothing more was written.
    let writes: u64 = counters
        .iter()
        .filter(|(key, _)| ["update", "patch", "delete"].contains(&key.verb.as_str()))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(writes, 0, "{counters:#?}");
    let creates: u64 = counters
        .iter()
        .filter(|(key, _)| key.verb == "create")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(creates, 5, "{counters:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dry_run_shows_what_the_api_server_refuses() {
    let env = every_kind_env().await;
    let spec = example("hello.yaml");
    // A namespace the cluster does not have: kubeferry builds the object, the server refuses.
    env.executor
        .dry_run(&spec, "dry-1", "nowhere", DryRun::Client)
        .await
        .expect("the client builds it");
    let error = env
        .executor
        .dry_run(&spec, "dry-1", "nowhere", DryRun::Server)
        .await
        .expect_err("the server refuses it");
    assert!(error.is_not_found(), "{error}");
    assert!(error.to_string().contains("\"nowhere\""), "{error}");
    // A name the job id already took: the server answers as it would to the create.
    let id = env.executor.submit(&spec, "dry-2", NS).await.unwrap();
    let error = env
        .executor
        .dry_run(&spec, "dry-2", NS, DryRun::Server)
        .await
        .expect_err("the name is taken");
    assert!(error.is_conflict(), "{error}");
    assert!(error.to_string().contains(&id.name), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dry_run_shows_what_a_quota_refuses() {
    let env = every_kind_env().await;
    // A namespace that may hold no more Jobs: the quota plugin refuses the Job itself.
    crate::describe::quota(&env, "jobs", serde_json::json!({"count/jobs.batch": "0"})).await;
    let before = held(&env);
    let spec = example("hello.yaml");
    let error = refused_by_the_server(&env, &spec, "the quota refuses it").await;
    // The server's answer as it gave it, not a missing permission.
    assert!(
        matches!(error, kubeferry_kube::Error::Api { code: 403, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains(
            "is forbidden: exceeded quota: jobs, requested: count/jobs.batch=1, used: \
             count/jobs.batch=0, limited: count/jobs.batch=0"
        ),
        "{error}"
    );
    // The submission itself is refused alike, and leaves nothing behind.
    let error = env
        .executor
        .submit(&spec, "dry-1", NS)
        .await
        .expect_err("the quota refuses it");
    assert!(
        error.to_string().contains("exceeded quota: jobs"),
        "{error}"
    );
    assert_eq!(held(&env), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dry_run_shows_an_admission_webhooks_denial() {
    let mut config = SimConfig::for_tests();
    config.allowed_image_repos = vec!["registry.corp/".into()];
    let env = Env::start_with(config, Settings::fast()).await;
    let before = held(&env);
    let spec = example("hello.yaml");
    let error = refused_by_the_server(&env, &spec, "the policy denies it").await;
    assert!(
        matches!(error, kubeferry_kube::Error::Api { code: 403, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains(
            "admission webhook \"validation.gatekeeper.sh\" denied the request: [allowed-repos] \
             container <main> has an invalid image repo"
        ),
        "{error}"
    );
    assert_eq!(held(&env), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dry_run_shows_what_the_clusters_schema_refuses() {
    // A cluster whose JobSet CRD allows one replica per replicated job: a constraint only its
    // schema knows, as an older or a restricted CRD has.
    let mut config = SimConfig::for_tests();
    config.extra_crds.push(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "jobsets.jobset.x-k8s.io"},
        "spec": {
            "group": "jobset.x-k8s.io",
            "scope": "Namespaced",
            "names": {"kind": "JobSet", "plural": "jobsets", "singular": "jobset", "listKind": "JobSetList"},
            "versions": [{
                "name": "v1alpha2", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {"replicatedJobs": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": true,
                                    "properties": {"replicas": {"type": "integer", "maximum": 1}},
                                },
                            }},
                        },
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    }));
    let env = Env::start_with(config, Settings::fast()).await;
    let before = held(&env);
    let spec = example("jobset.yaml");
    let error = refused_by_the_server(&env, &spec, "the schema refuses it").await;
    assert!(
        matches!(error, kubeferry_kube::Error::Api { code: 422, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains(
            "spec.replicatedJobs[1].replicas: Invalid value: 2: spec.replicatedJobs[1].replicas \
             in body should be less than or equal to 1"
        ),
        "{error}"
    );
    assert_eq!(held(&env), before);
}
