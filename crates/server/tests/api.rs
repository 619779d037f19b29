//! The API over a real listener on 127.0.0.1 against the simulated cluster: every endpoint, and
//! every error a caller can get.

mod common;

use std::time::Duration;

use common::*;
use hyper::http::{Method, StatusCode, header};
use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

#[tokio::test]
async fn health_readiness_openapi_and_unknown_routes() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;

    let health = api.get("/healthz").await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.json(), json!({"status": "ok"}));

    let ready = api.get("/readyz").await;
    assert_eq!(ready.status, StatusCode::OK);
    let ready = ready.json();
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["clusters"][0]["name"], CLUSTER);
    assert_eq!(ready["clusters"][0]["reachable"], true);
    let namespaces: Vec<&str> = ready["clusters"][0]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["default", "team-a", "team-b"]);

    // The document served is the one generated from the code (and snapshot-tested).
    let served = api.get("/openapi.json").await;
    assert_eq!(served.status, StatusCode::OK);
    assert_eq!(
        served.json(),
        serde_json::to_value(kubeferry_server::api::openapi()).unwrap()
    );

    let missing = api.get("/v2/nothing").await;
    missing.error(StatusCode::NOT_FOUND, "not_found");
    let wrong_method = api.custom(Method::DELETE, "/v1/jobs", None, &[]).await;
    wrong_method.error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    service.stop().await;
}

#[tokio::test]
async fn requests_carry_ids_and_errors_name_them() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let reply = service
        .api
        .custom(
            Method::GET,
            "/v1/jobs/sim/job/default/nope",
            None,
            &[("x-request-id", "caller-chosen-1")],
        )
        .await;
    assert_eq!(reply.headers["x-request-id"], "caller-chosen-1");
    let body = reply.error(StatusCode::NOT_FOUND, "no_such_job");
    assert_eq!(body["requestId"], "caller-chosen-1");

    let generated = service.api.get("/healthz").await;
    let id = generated.headers["x-request-id"].to_str().unwrap();
    assert_eq!(id.len(), 16);
    service.stop().await;
}

#[tokio::test]
async fn metrics_count_requests_jobs_kubernetes_calls_and_watches() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let id = api.submit(shell_job("metrics-1", "echo hi")).await;
    api.wait_for(&id, "SUCCEEDED").await;
    api.get("/v1/jobs/sim/job/default/nope").await;

    let metrics = api.get("/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    let text = metrics.text();
    for expected in [
        "kubeferry_http_requests_total{method=\"POST\",route=\"/v1/jobs\",status=\"201\"} 1",
        "kubeferry_http_requests_total{method=\"GET\",route=\"/v1/jobs/{cluster}/{kind}/{namespace}/{name}\",status=\"404\"} 1",
        "kubeferry_http_request_duration_seconds_bucket{",
        "kubeferry_jobs{cluster=\"sim\",namespace=\"default\",state=\"SUCCEEDED\"} 1",
        "kubeferry_jobs{cluster=\"sim\",namespace=\"team-a\",state=\"QUEUED\"} 0",
        "kubeferry_kubernetes_requests_total{cluster=\"sim\",verb=\"create\",resource=\"jobs.batch\",code=\"201\"} 1",
        "kubeferry_kubernetes_requests_total{cluster=\"sim\",verb=\"watch\",resource=\"pods\",code=\"200\"}",
        "kubeferry_watch_restarts_total{cluster=\"sim\",namespace=\"default\",resource=\"jobs.batch\"} 0",
        "kubeferry_watch_synced{cluster=\"sim\",namespace=\"default\",resource=\"pods\"} 1",
        "# EOF",
    ] {
        assert!(text.contains(expected), "{expected} missing from\n{text}");
    }
    service.stop().await;
}

#[tokio::test]
async fn readiness_fails_and_queries_fail_fast_without_kubernetes() {
    let sim = Sim::start().await;
    let mut config = sim.config();
    config.clusters[0].source = kubeferry_server::config::ClusterSource::ApiUrl {
        url: format!("http://127.0.0.1:{}", closed_port()),
        ca_file: None,
        token_file: None,
    };
    config.timeouts.sync = std::time::Duration::from_millis(100);
    let running = kubeferry_server::start(config).await.unwrap();
    let api = Api::new(running.addr(), Some(ADMIN_TOKEN));

    assert_eq!(api.get("/healthz").await.status, StatusCode::OK);
    let ready = eventually("the service to report the failing watch", || async {
        let reply = api.get("/readyz").await;
        let body = reply.json();
        (reply.status == StatusCode::SERVICE_UNAVAILABLE
            && body["reason"]
                .as_str()
                .is_some_and(|r| r.contains("failing")))
        .then_some(body)
    })
    .await;
    assert_eq!(ready["ready"], false);

    let reply = api.get("/v1/jobs/sim/job/default/anything").await;
    let body = reply.error(StatusCode::SERVICE_UNAVAILABLE, "kubernetes_unreachable");
    assert!(reply.headers.contains_key(header::RETRY_AFTER), "{body}");
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn submit_is_idempotent_per_job_id_and_status_comes_from_the_cache() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;

    let gate = Gate::new(sim.dir.path(), "gravitino-42");
    let body = shell_job(
        "gravitino-42",
        &format!("echo started; {}; echo done", gate.wait()),
    );
    let first = api.post("/v1/jobs", &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text());
    let submitted = first.json();
    let id = submitted["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("sim/job/default/gravitino-42-"), "{id}");
    assert_eq!(submitted["jobId"], "gravitino-42");
    assert_eq!(submitted["namespace"], "default");
    assert_eq!(submitted["cluster"], CLUSTER);
    assert_eq!(submitted["existing"], false);
    assert_eq!(first.headers[header::LOCATION], format!("/v1/jobs/{id}"));

    // The same job id again: the same execution id, nothing new, and the answer says so.
    let again = api.post("/v1/jobs", &body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    assert_eq!(again.json()["id"], id.as_str());
    assert_eq!(again.json()["existing"], true);
    assert_eq!(again.headers[header::LOCATION], format!("/v1/jobs/{id}"));
    assert_eq!(sim.jobs("default").await.len(), 1);

    // The same job id with another spec is refused, saying once what to do.
    let other = shell_job("gravitino-42", "echo something else");
    let refused = api
        .post("/v1/jobs", &other)
        .await
        .error(StatusCode::CONFLICT, "name_taken");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("job id \"gravitino-42\" was submitted before from a different spec"),
        "{message}"
    );
    assert_eq!(message.matches("another job id").count(), 1, "{message}");
    assert!(
        !message.contains("choose another job id or remove it"),
        "{message}"
    );

    // The job is found by its job id, in the namespace asked or the caller's.
    for query in ["jobId=gravitino-42", "jobId=gravitino-42&namespace=default"] {
        let found = api.get(&format!("/v1/jobs?{query}")).await.json();
        let items = found["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{query}: {found}");
        assert_eq!(items[0]["jobId"], "gravitino-42");
        assert_eq!(items[0]["job"]["id"], id.as_str());
        assert_eq!(items[0]["job"]["jobId"], "gravitino-42");
    }
    let none = api.get("/v1/jobs?jobId=gravitino-43").await.json();
    assert_eq!(none["items"], json!([]), "{none}");
    let none = api
        .get("/v1/jobs?jobId=gravitino-42&namespace=team-a")
        .await
        .json();
    assert_eq!(none["items"], json!([]), "{none}");
    for query in ["jobId=", "jobId=gravitino-42&selector=a%3Db"] {
        let bad = api
            .get(&format!("/v1/jobs?{query}"))
            .await
            .error(StatusCode::BAD_REQUEST, "bad_parameter");
        assert_eq!(bad["field"], "jobId", "{query}: {bad}");
    }

    let started = api.wait_for(&id, "STARTED").await;
    let started_at = started["startedAt"].as_str().unwrap().to_string();
    gate.open();
    let done = api.wait_for(&id, "SUCCEEDED").await;
    assert_eq!(done["reason"], "Completed");
    assert_eq!(done["exitCode"], 0);
    assert_eq!(done["startedAt"], started_at.as_str());
    assert!(done["finishedAt"].is_string());
    assert_eq!(sim.jobs("default").await.len(), 1);
    assert_eq!(sim.pods("default").await.len(), 1);

    // Once it ran, the same job id answers that run: 200, nothing created.
    let ran = api.post("/v1/jobs", &body).await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.text());
    assert_eq!(ran.json()["existing"], true);
    assert_eq!(ran.json()["id"], id.as_str());
    assert_eq!(sim.pods("default").await.len(), 1);
    service.stop().await;
}

#[tokio::test]
async fn specs_come_as_objects_text_or_templates() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;

    let yaml = json!({
        "jobId": "from-text",
        "namespace": "team-a",
        "spec": "name: text\nimage: busybox:1.36\ncommand: [sh, -c, 'echo {{word}}']\n",
        "params": {"word": "yaml"},
    });
    let id = api.submit(yaml).await;
    assert!(id.starts_with("sim/job/team-a/"), "{id}");
    api.wait_for(&id, "SUCCEEDED").await;

    let templated = json!({
        "jobId": "from-template",
        "template": "greet",
        "params": {"who": "world", "unused": 1},
    });
    let reply = api.post("/v1/jobs", &templated).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let submitted = reply.json();
    assert_eq!(
        submitted["warnings"],
        json!(["params.unused: not used by the spec"])
    );
    let id = submitted["id"].as_str().unwrap();
    api.wait_for(id, "SUCCEEDED").await;
    let log = api.get(&format!("/v1/jobs/{id}/logs")).await.json();
    assert_eq!(log["log"], "hello, world\n");

    let templates = api.get("/v1/templates").await;
    assert_eq!(templates.json(), json!({"templates": ["greet"]}));
    service.stop().await;
}

#[tokio::test]
async fn bad_input_gets_a_named_error_and_creates_nothing() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let good_spec = json!({"name": "x", "image": "busybox:1.36"});

    // Malformed JSON: 400 with the line and column.
    let reply = api
        .post_raw("/v1/jobs", "{\n  \"jobId\": \"a\",\n  oops\n}")
        .await;
    let body = reply.error(StatusCode::BAD_REQUEST, "bad_json");
    assert_eq!(
        (body["line"].clone(), body["column"].clone()),
        (json!(3), json!(3))
    );

    let cases: Vec<(Value, StatusCode, &str, &str)> = vec![
        (
            json!({"spec": good_spec}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "jobId",
        ),
        (
            json!({"jobId": 7, "spec": good_spec}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "jobId",
        ),
        (
            json!({"jobId": "", "spec": good_spec}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "jobId",
        ),
        (
            json!({"jobId": "a", "spec": good_spec, "spce": 1}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "spce",
        ),
        (
            json!({"jobId": "a"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "spec",
        ),
        (
            json!({"jobId": "a", "spec": good_spec, "template": "greet"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "template",
        ),
        (
            json!({"jobId": "a", "spec": 5}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "spec",
        ),
        (
            json!({"jobId": "a", "spec": good_spec, "params": {"p": [1]}}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "params.p",
        ),
        (
            json!({"jobId": "a", "spec": good_spec, "cluster": "elsewhere"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "cluster",
        ),
        (
            json!({"jobId": "a", "spec": {"name": "x", "image": "busybox", "namespace": "team-a"}, "namespace": "team-b"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "namespace",
        ),
        (
            json!({"jobId": "a", "spec": good_spec, "namespace": "kube-system"}),
            StatusCode::FORBIDDEN,
            "forbidden",
            "namespace",
        ),
        (
            json!({"jobId": "a", "template": "nope"}),
            StatusCode::NOT_FOUND,
            "no_such_template",
            "template",
        ),
        (
            json!({"jobId": "a", "template": "../secrets"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "template",
        ),
    ];
    for (body, status, code, field) in cases {
        let reply = api.post("/v1/jobs", &body).await;
        let error = reply.error(status, code);
        assert_eq!(error["field"], field, "{body}: {error}");
    }

    // An invalid spec object: 422, every problem at its place in the request body.
    let body = "{\"jobId\": \"a\",\n \"spec\": {\"name\": \"x\",\n  \"image\": \"busybox\",\n  \"resources\": {\"memory\": \"64m\"},\n  \"workingDir\": \"relative\"}}";
    let error = api
        .post_raw("/v1/jobs", body)
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_spec");
    let problems = error["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{error}");
    assert_eq!(problems[0]["file"], "body");
    assert_eq!(problems[0]["field"], "spec.resources.memory");
    assert_eq!(
        (problems[0]["line"].clone(), problems[0]["column"].clone()),
        (json!(4), json!(27))
    );
    assert_eq!(problems[1]["field"], "spec.workingDir");
    assert_eq!(problems[1]["line"], 5);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("body:4:27: spec.resources.memory: "),
        "{error}"
    );

    // An invalid spec given as text, and a template missing a parameter.
    let error = api
        .post(
            "/v1/jobs",
            &json!({"jobId": "a", "spec": "name: x\nimage: busybox\ntimeout: soon\n"}),
        )
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_spec");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("spec:3:10: timeout: "),
        "{error}"
    );
    let error = api
        .post("/v1/jobs", &json!({"jobId": "a", "template": "greet"}))
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_spec");
    assert_eq!(error["problems"][0]["file"], "greet.yaml", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("who"),
        "{error}"
    );

    // A valid Spark spec on a cluster without a Spark operator: nothing is created.
    let spark = std::fs::read_to_string(repo().join("examples/spark-pi-apache.yaml")).unwrap();
    let body = api
        .post("/v1/jobs", &json!({"jobId": "spark", "spec": spark}))
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "spark_unavailable");
    assert_eq!(body["field"], "spec");

    // Not JSON at all, and too large.
    api.custom(
        Method::POST,
        "/v1/jobs",
        Some("jobId: a".into()),
        &[("content-type", "application/yaml")],
    )
    .await
    .error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let huge = format!(
        "{{\"jobId\": \"a\", \"spec\": \"{}\"}}",
        "x".repeat(2 * 1024 * 1024)
    );
    api.post_raw("/v1/jobs", huge)
        .await
        .error(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");

    for namespace in ["default", "team-a", "team-b"] {
        assert!(
            sim.jobs(namespace).await.is_empty(),
            "{namespace}: bad input created a Job"
        );
    }
    service.stop().await;
}

#[tokio::test]
async fn tokens_are_required_scoped_and_reloaded() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let anonymous = service.client(None);
    let reply = anonymous.get("/v1/jobs").await;
    reply.error(StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(
        reply.headers[header::WWW_AUTHENTICATE],
        "Bearer realm=\"kubeferry\""
    );
    let wrong = service.client(Some("not-a-real-token-at-all"));
    let body = wrong
        .get("/v1/jobs")
        .await
        .error(StatusCode::UNAUTHORIZED, "unauthorized");
    assert!(
        !body.to_string().contains("not-a-real-token"),
        "the token was echoed: {body}"
    );
    // Health, readiness and metrics need no token.
    assert_eq!(anonymous.get("/readyz").await.status, StatusCode::OK);

    // A token scoped to team-a: there only.
    let team_a = service.client(Some(TEAM_A_TOKEN));
    let id = team_a
        .submit(json!({"jobId": "scoped", "namespace": "team-a", "spec": {"name": "x", "image": "busybox", "command": ["true"]}}))
        .await;
    team_a.wait_for(&id, "SUCCEEDED").await;
    // Naming no namespace, it submits into its own, as its list covers its own.
    let unnamed = team_a
        .submit(json!({"jobId": "unnamed", "spec": {"name": "x", "image": "busybox", "command": ["true"]}}))
        .await;
    assert!(unnamed.starts_with("sim/job/team-a/"), "{unnamed}");
    team_a.wait_for(&unnamed, "SUCCEEDED").await;
    team_a
        .post("/v1/jobs", &json!({"jobId": "b", "namespace": "team-b", "spec": {"name": "x", "image": "busybox"}}))
        .await
        .error(StatusCode::FORBIDDEN, "forbidden");
    let admin_job = service.api.submit(shell_job("admin-job", "true")).await;
    team_a
        .job(&admin_job)
        .await
        .error(StatusCode::FORBIDDEN, "forbidden");
    team_a
        .get("/v1/jobs?namespace=default")
        .await
        .error(StatusCode::FORBIDDEN, "forbidden");
    let listed = team_a.get("/v1/jobs").await.json();
    let ids: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["job"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id.as_str(), unnamed.as_str()]);

    // The tokens file is re-read when it changes: team-a's token goes, a new one comes.
    let fresh = "fresh-token-0123456789abcdef";
    std::fs::write(
        sim.tokens_file(),
        format!(
            "tokens:\n  - name: admin\n    token: {ADMIN_TOKEN}\n    namespaces: [\"*\"]\n  - name: fresh\n    token: {fresh}\n    namespaces: [team-b]\n"
        ),
    )
    .unwrap();
    eventually("the new token to be accepted", || async {
        (service.client(Some(fresh)).get("/v1/jobs").await.status == StatusCode::OK).then_some(())
    })
    .await;
    team_a
        .get("/v1/jobs")
        .await
        .error(StatusCode::UNAUTHORIZED, "unauthorized");
    service.stop().await;
}

#[tokio::test]
async fn ids_of_other_clusters_are_configuration_errors_and_unknown_jobs_are_404() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    for path in [
        "/v1/jobs/prod/job/default/x",
        "/v1/jobs/prod/job/default/x/logs",
        "/v1/jobs/prod/job/default/x/events",
    ] {
        let body = api
            .get(path)
            .await
            .error(StatusCode::MISDIRECTED_REQUEST, "wrong_cluster");
        assert!(
            body["message"].as_str().unwrap().contains("\"prod\""),
            "{body}"
        );
    }
    api.post("/v1/jobs/prod/job/default/x/cancel", &json!({}))
        .await
        .error(StatusCode::MISDIRECTED_REQUEST, "wrong_cluster");

    for path in [
        "/v1/jobs/sim/job/default/x",
        "/v1/jobs/sim/job/default/x/logs",
        "/v1/jobs/sim/job/default/x/events",
    ] {
        api.get(path)
            .await
            .error(StatusCode::NOT_FOUND, "no_such_job");
    }
    api.post("/v1/jobs/sim/job/default/x/cancel", &json!({}))
        .await
        .error(StatusCode::NOT_FOUND, "no_such_job");

    api.get("/v1/jobs/sim/cronjob/default/x")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_execution_id");
    api.get("/v1/jobs/sim/pod/default/x")
        .await
        .error(StatusCode::NOT_FOUND, "no_such_job");
    api.get("/v1/jobs/sim/job/Default/x")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_execution_id");
    api.get("/v1/jobs/sim/sparkapp/default/x")
        .await
        .error(StatusCode::NOT_FOUND, "no_such_job");
    api.get("/v1/jobs/sim/job/kube-system/x")
        .await
        .error(StatusCode::FORBIDDEN, "forbidden");
    service.stop().await;
}

#[tokio::test]
async fn cancel_returns_at_once_is_idempotent_and_leaves_finished_jobs_alone() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;

    let id = api.submit(shell_job("long", "echo up; sleep 60")).await;
    let started = api.wait_for(&id, "STARTED").await;
    let reply = api.post(&format!("/v1/jobs/{id}/cancel"), &json!({})).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text());
    let cancel = reply.json();
    assert_eq!(cancel["alreadyEnded"], false);
    let state = cancel["job"]["state"].as_str().unwrap();
    assert!(state == "CANCELLING" || state == "CANCELLED", "{cancel}");
    let cancelled = api.wait_for(&id, "CANCELLED").await;
    assert_eq!(
        cancelled["startedAt"], started["startedAt"],
        "startedAt is kept"
    );
    // Who asked, in words: the token, through this replica's host; when, to the second.
    let message = cancelled["message"].as_str().unwrap();
    let host = hostname::get().unwrap().into_string().unwrap();
    let at = message
        .strip_prefix(&format!(
            "cancelled by token admin through kubeferry on {host} at "
        ))
        .unwrap_or_else(|| panic!("{message}"));
    let at: jiff::Timestamp = at.parse().unwrap();
    assert_eq!(at.subsec_nanosecond(), 0, "{message}");
    assert_eq!(cancelled["finishedAt"], at.to_string());

    // Again: still accepted, nothing changes.
    let again = api.post(&format!("/v1/jobs/{id}/cancel"), &json!({})).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text());
    assert_eq!(again.json()["job"]["state"], "CANCELLED");

    // Once its Job is gone, the list still shows it, from its outcome record.
    let name = id.rsplit('/').next().unwrap().to_string();
    eventually("the cancelled Job to go", || {
        let gone = sim.sim.object("batch", "jobs", "default", &name).is_none();
        async move { gone.then_some(()) }
    })
    .await;
    let listed = api.get("/v1/jobs?status=CANCELLED").await.json();
    assert_eq!(listed["items"][0]["job"]["id"], id.as_str(), "{listed}");
    assert_eq!(listed["items"][0]["job"]["state"], "CANCELLED", "{listed}");
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");

    // A finished job keeps its outcome.
    let done = api.submit(shell_job("quick", "exit 3")).await;
    let failed = api.wait_for(&done, "FAILED").await;
    assert_eq!(failed["exitCode"], 3);
    assert_eq!(failed["failureClass"], "user");
    let reply = api
        .post(&format!("/v1/jobs/{done}/cancel"), &json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let cancel = reply.json();
    assert_eq!(cancel["alreadyEnded"], true);
    assert_eq!(cancel["job"]["state"], "FAILED");
    assert_eq!(api.job(&done).await.json()["state"], "FAILED");
    service.stop().await;
}

#[tokio::test]
async fn logs_tail_by_lines_and_bytes_and_follow_until_the_end() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;

    let id = api
        .submit(shell_job(
            "printer",
            "for i in 1 2 3 4 5; do echo line-$i; done",
        ))
        .await;
    api.wait_for(&id, "SUCCEEDED").await;
    let logs = |query: &'static str| {
        let id = id.clone();
        async move { api.get(&format!("/v1/jobs/{id}/logs{query}")).await }
    };
    assert_eq!(
        logs("").await.json()["log"],
        "line-1\nline-2\nline-3\nline-4\nline-5\n"
    );
    assert_eq!(logs("?lines=2").await.json()["log"], "line-4\nline-5\n");
    assert_eq!(logs("?bytes=7").await.json()["log"], "line-5\n");
    assert_eq!(logs("?lines=2&bytes=3").await.json()["log"], "-5\n");
    logs("?lines=many")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    logs("?tail=3")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    logs("?follow=true&bytes=3")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");

    // Follow a running job: the whole log, and the stream ends when the container does.
    let id = api
        .submit(shell_job(
            "ticker",
            "for i in 1 2 3; do echo tick-$i; sleep 0.2; done",
        ))
        .await;
    api.wait_for(&id, "STARTED").await;
    let response = api.open(&format!("/v1/jobs/{id}/logs?follow=true")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/plain; charset=utf-8"
    );
    assert_eq!(read_stream(response).await, "tick-1\ntick-2\ntick-3\n");
    service.stop().await;
}

#[tokio::test]
async fn previous_reads_the_log_of_the_attempt_before_the_newest() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let mark = sim.dir.path().join("first-attempt-ran");
    let script = format!(
        "if [ -e '{mark}' ]; then echo second attempt; else touch '{mark}'; echo first attempt; exit 1; fi",
        mark = mark.display()
    );
    let id = api
        .submit(json!({
            "jobId": "retried",
            "spec": {"name": "x", "image": "busybox", "command": ["sh", "-c", script], "retries": 1},
        }))
        .await;
    api.wait_for(&id, "SUCCEEDED").await;
    let logs = |query: &'static str| {
        let id = id.clone();
        async move { api.get(&format!("/v1/jobs/{id}/logs{query}")).await }
    };
    assert_eq!(logs("").await.json()["log"], "second attempt\n");
    assert_eq!(
        logs("?previous=true").await.json()["log"],
        "first attempt\n"
    );
    assert_eq!(
        logs("?previous=true&lines=1&bytes=6").await.json()["log"],
        "tempt\n"
    );
    // A job with one attempt has no previous one: an empty log, not an error, and a warning
    // that says so.
    let once = api.submit(shell_job("once", "echo only")).await;
    api.wait_for(&once, "SUCCEEDED").await;
    let reply = api
        .get(&format!("/v1/jobs/{once}/logs?previous=true"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["log"], "");
    assert_eq!(
        reply.json()["warning"],
        "no earlier attempt to read: --previous shows the attempt before the newest (drop it for \
         the newest's log)"
    );
    logs("?previous=maybe")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    logs("?follow=true&previous=true")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    service.stop().await;
}

#[tokio::test]
async fn an_indexed_job_reports_its_indexes_and_each_index_has_its_log() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let id = api
        .submit(json!({
            "jobId": "shards",
            "spec": {
                "name": "shards", "image": "busybox",
                "command": ["sh", "-c", "echo shard $JOB_COMPLETION_INDEX"],
                "indexed": true, "completions": 3, "parallelism": 3,
            },
        }))
        .await;
    api.wait_for(&id, "SUCCEEDED").await;
    let job = api.job(&id).await.json();
    assert_eq!(job["message"], "3 of 3 indexes succeeded");
    assert_eq!(
        job["indexes"],
        json!({"completions": 3, "succeeded": 3, "failed": 0, "running": 0, "pending": 0, "completedIndexes": "0-2"})
    );
    let logs = |query: &'static str| {
        let id = id.clone();
        async move { api.get(&format!("/v1/jobs/{id}/logs{query}")).await }
    };
    assert_eq!(
        logs("?index=1").await.json()["log"],
        "shard 1
"
    );
    assert_eq!(
        logs("?index=2&lines=1").await.json()["log"],
        "shard 2
"
    );
    // An index the job does not have: the caller's parameter, named.
    let body = logs("?index=7")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    assert_eq!(body["field"], "index", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("has no index 7: its indexes are 0 to 2")),
        "{body}"
    );
    // So does a follow, before its stream starts.
    let body = logs("?follow=true&index=7")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    assert_eq!(body["field"], "index", "{body}");
    let response = api
        .open(&format!("/v1/jobs/{id}/logs?follow=true&index=0"))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(read_stream(response).await, "shard 0\n");
    logs("?index=-1")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    logs("?index=one")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    // A job that is not indexed has no index in its answer.
    let once = api.submit(shell_job("once", "echo only")).await;
    api.wait_for(&once, "SUCCEEDED").await;
    assert!(api.job(&once).await.json().get("indexes").is_none());
    service.stop().await;
}

#[tokio::test]
async fn kubernetes_errors_each_have_their_code_and_are_counted() {
    use kubeferry_sim::{FaultAction, FaultRule};
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let error = |code: u16, message: &str| FaultAction::Error {
        code,
        message: Some(message.into()),
        retry_after_seconds: None,
    };

    // An error retrying cannot fix (501 is not retried): 502 kubernetes_error.
    let fault = sim.sim.add_fault(
        FaultRule::new(error(501, "not implemented here"))
            .verbs(&["create"])
            .resources(&["jobs.batch"]),
    );
    let body = api
        .post("/v1/jobs", &shell_job("unimplemented", "true"))
        .await
        .error(StatusCode::BAD_GATEWAY, "kubernetes_error");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("not implemented here"),
        "{body}"
    );
    sim.sim.remove_fault(fault);
    assert!(sim.jobs("default").await.is_empty());

    // The Job keeps changing under the cancel mark (every patch conflicts): 409
    // kubernetes_rejected, and the job runs on untouched.
    let id = api.submit(shell_job("contested", "sleep 120")).await;
    api.wait_for(&id, "STARTED").await;
    let fault = sim.sim.add_fault(
        FaultRule::new(error(409, "the object has been modified"))
            .verbs(&["patch"])
            .resources(&["jobs.batch"]),
    );
    let cancel = format!("/v1/jobs/{id}/cancel");
    let body = api
        .post(&cancel, &json!({}))
        .await
        .error(StatusCode::CONFLICT, "kubernetes_rejected");
    assert!(
        body["message"].as_str().unwrap().contains("kept changing"),
        "{body}"
    );
    assert_eq!(api.job(&id).await.json()["state"], "STARTED");
    sim.sim.remove_fault(fault);
    // Asking again once the conflicts stop cancels it.
    let reply = api.post(&cancel, &json!({})).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text());
    api.wait_for(&id, "CANCELLED").await;

    // A template the service cannot read (a directory where its file should be): 500 internal,
    // naming the template.
    std::fs::create_dir_all(sim.dir.path().join("templates/broken.yaml")).unwrap();
    let body = api
        .post("/v1/jobs", &json!({"jobId": "t", "template": "broken"}))
        .await
        .error(StatusCode::INTERNAL_SERVER_ERROR, "internal");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("cannot read template \"broken\""),
        "{body}"
    );

    // Every failed Kubernetes request is counted, by verb, resource and answer.
    let metrics = api.get("/metrics").await.text();
    for expected in [
        "kubeferry_kubernetes_request_errors_total{cluster=\"sim\",verb=\"create\",resource=\"jobs.batch\",code=\"501\"} 1",
        "kubeferry_kubernetes_request_errors_total{cluster=\"sim\",verb=\"patch\",resource=\"jobs.batch\",code=\"409\"} 5",
    ] {
        assert!(
            metrics.contains(expected),
            "{expected} missing from\n{metrics}"
        );
    }
    service.stop().await;
}

#[tokio::test]
async fn an_unreadable_log_is_an_empty_tail_with_a_warning() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let id = api.submit(shell_job("quiet", "echo secret-ish")).await;
    api.wait_for(&id, "SUCCEEDED").await;

    sim.sim.add_fault(
        kubeferry_sim::FaultRule::new(kubeferry_sim::FaultAction::Error {
            code: 500,
            message: Some("the kubelet is away".into()),
            retry_after_seconds: None,
        })
        .resources(&["pods/log"]),
    );
    let reply = api.get(&format!("/v1/jobs/{id}/logs?lines=5")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let tail = reply.json();
    assert_eq!(tail["log"], "");
    assert!(
        tail["warning"]
            .as_str()
            .unwrap()
            .contains("could not be read"),
        "{tail}"
    );
    service.stop().await;
}

#[tokio::test]
async fn lists_filter_by_selector_and_state_in_pages() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let mut ids = Vec::new();
    for (i, (team, script)) in [("a", "true"), ("a", "exit 1"), ("b", "true"), ("a", "true")]
        .iter()
        .enumerate()
    {
        let body = json!({
            "jobId": format!("listed-{i}"),
            "spec": {"name": "x", "image": "busybox", "command": ["sh", "-c", script], "labels": {"team": team}},
        });
        let id = api.submit(body).await;
        api.wait_final(&id).await;
        ids.push(id);
    }
    let listed = |query: String| async move {
        let reply = api.get(&format!("/v1/jobs{query}")).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        reply.json()
    };
    let ids_of = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["job"]["id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = listed(String::new()).await;
    let mut sorted = ids.clone();
    sorted.sort();
    let mut got = ids_of(&all);
    got.sort();
    assert_eq!(got, sorted);
    assert_eq!(
        all["items"][0]["jobId"].as_str().unwrap().len(),
        "listed-0".len()
    );

    let team_a = listed("?selector=team%3Da".into()).await;
    assert_eq!(ids_of(&team_a).len(), 3);
    let failed = listed("?selector=team%3Da&status=FAILED".into()).await;
    assert_eq!(ids_of(&failed), [ids[1].clone()]);
    let set_based = listed("?selector=team%20in%20(b)&status=SUCCEEDED,FAILED".into()).await;
    assert_eq!(ids_of(&set_based), [ids[2].clone()]);

    // Pages of two, in a stable order, together the whole list.
    let mut paged = Vec::new();
    let mut query = "?limit=2".to_string();
    loop {
        let page = listed(query.clone()).await;
        let page_ids = ids_of(&page);
        assert!(page_ids.len() <= 2);
        paged.extend(page_ids);
        match page["continue"].as_str() {
            Some(token) => query = format!("?limit=2&continue={token}"),
            None => break,
        }
    }
    assert_eq!(paged, ids_of(&all));

    for (query, parameter) in [
        ("?status=DONE", "status"),
        ("?limit=0", "limit"),
        ("?continue=garbage", "continue"),
        ("?selector=team%3D%3D%3Da%20b", "selector"),
        ("?sort=age", "sort"),
    ] {
        let body = api
            .get(&format!("/v1/jobs{query}"))
            .await
            .error(StatusCode::BAD_REQUEST, "bad_parameter");
        assert_eq!(body["field"], parameter, "{query}: {body}");
    }
    service.stop().await;
}

#[tokio::test]
async fn one_jobs_events_stream_until_it_ends() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let gate = Gate::new(sim.dir.path(), "evented");
    let id = api
        .submit(shell_job("evented", &format!("{}; echo done", gate.wait())))
        .await;
    let mut events = Events::new(api.open(&format!("/v1/jobs/{id}/events")).await);
    let mut infos: Vec<Value> = Vec::new();
    while let Some(event) = events.next().await {
        assert_eq!(event.event, "status", "{event:?}");
        assert_eq!(event.data["id"], id.as_str());
        if event.data["state"] == "STARTED" {
            gate.open();
        }
        infos.push(event.data);
    }
    let states: Vec<&str> = infos.iter().map(|i| i["state"].as_str().unwrap()).collect();
    assert!(states.contains(&"STARTED"), "{states:?}");
    assert_eq!(states.last(), Some(&"SUCCEEDED"), "{states:?}");
    for pair in infos.windows(2) {
        assert_ne!(pair[0], pair[1], "an event repeated the one before");
    }
    service.stop().await;
}

#[tokio::test]
async fn selector_events_cover_new_matching_jobs_only() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let before = api
        .submit(json!({"jobId": "before", "spec": {"name": "x", "image": "busybox", "command": ["true"], "labels": {"flow": "etl"}}}))
        .await;
    api.wait_for(&before, "SUCCEEDED").await;

    let mut events = Events::new(
        api.open("/v1/events?namespace=default&selector=flow%3Detl")
            .await,
    );
    // The snapshot first: the job that already ended, then `listed`.
    let first = events.next().await.unwrap();
    assert_eq!(first.event, "status");
    assert_eq!(first.data["id"], before.as_str());
    assert_eq!(first.data["jobId"], "before", "the caller's job id");
    assert_eq!(first.data["state"], "SUCCEEDED");
    let listed = events.next().await.unwrap();
    assert_eq!(listed.event, "listed");
    assert_eq!(
        listed.data,
        json!({"cluster": "sim", "namespace": "default"})
    );

    let other = api
        .submit(json!({"jobId": "other", "spec": {"name": "x", "image": "busybox", "command": ["true"], "labels": {"flow": "ml"}}}))
        .await;
    let matching = api
        .submit(json!({"jobId": "matching", "spec": {"name": "x", "image": "busybox", "command": ["sh", "-c", "sleep 0.2"], "labels": {"flow": "etl"}}}))
        .await;
    loop {
        let event = events.next_named("status").await.unwrap();
        assert_ne!(
            event.data["id"],
            other.as_str(),
            "a job not matching the selector"
        );
        assert_eq!(event.data["id"], matching.as_str());
        assert_eq!(event.data["jobId"], "matching", "the caller's job id");
        if event.data["state"] == "SUCCEEDED" {
            break;
        }
    }
    api.get("/v1/events?selector=%3D%3D")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    api.get("/v1/events?namespace=kube-system")
        .await
        .error(StatusCode::FORBIDDEN, "forbidden");
    service.stop().await;
}

#[tokio::test]
async fn a_running_job_relabelled_out_of_a_selector_is_followed_only_for_a_while() {
    // A job that leaves a selection is followed until its end is known (a cancelled job's
    // deletion may not have reached the watch yet), but a running one relabelled out of it
    // only for the `sync` timeout.
    let sim = Sim::start().await;
    let mut config = sim.config();
    config.timeouts.sync = Duration::from_millis(300);
    let service = Service::start(config).await;
    let api = &service.api;
    let mut events = Events::new(
        api.open("/v1/events?namespace=default&selector=flow%3Detl")
            .await,
    );
    assert_eq!(events.next_named("listed").await.unwrap().event, "listed");
    let gate = Gate::new(sim.dir.path(), "relabelled");
    let moved = api
        .submit(
            json!({"jobId": "moved", "spec": {"name": "x", "image": "busybox",
            "command": ["sh", "-c", gate.wait()], "labels": {"flow": "etl"}}}),
        )
        .await;
    loop {
        let event = events.next_named("status").await.unwrap();
        if event.data["id"] == moved.as_str() && event.data["state"] == "STARTED" {
            break;
        }
    }
    let jobs: kube::Api<Job> = kube::Api::namespaced(sim.client().await, "default");
    let name = moved.rsplit('/').next().unwrap();
    jobs.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"labels": {"flow": "ml"}}})),
    )
    .await
    .unwrap();
    // Past the follow's deadline (the passing of time is what is tested), it ends.
    tokio::time::sleep(Duration::from_secs(1)).await;
    gate.open();
    api.wait_for(&moved, "SUCCEEDED").await;
    let later = api
        .submit(
            json!({"jobId": "later", "spec": {"name": "x", "image": "busybox",
            "command": ["true"], "labels": {"flow": "etl"}}}),
        )
        .await;
    loop {
        let event = events.next_named("status").await.unwrap();
        assert_ne!(
            (event.data["id"].as_str(), event.data["state"].as_str()),
            (Some(moved.as_str()), Some("SUCCEEDED")),
            "a job relabelled out of the selection long ago"
        );
        if event.data["id"] == later.as_str() && event.data["state"] == "SUCCEEDED" {
            break;
        }
    }
    service.stop().await;
}

#[tokio::test]
async fn the_sweep_reports_and_on_request_deletes_orphans() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let kept = api.submit(shell_job("known", "true")).await;
    let orphan = api.submit(shell_job("forgotten", "sleep 60")).await;
    api.wait_for(&orphan, "STARTED").await;

    let report = api
        .post(
            "/v1/sweep",
            &json!({"knownJobIds": ["known"], "namespace": "default"}),
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.text());
    let orphans = report.json()["orphans"].clone();
    assert_eq!(orphans.as_array().unwrap().len(), 1, "{orphans}");
    assert_eq!(orphans[0]["id"], orphan.as_str());
    assert_eq!(orphans[0]["jobId"], "forgotten");
    assert_eq!(orphans[0]["deleted"], false);
    assert_eq!(sim.jobs("default").await.len(), 2);

    let swept = api
        .post(
            "/v1/sweep",
            &json!({"knownJobIds": ["known"], "delete": true}),
        )
        .await
        .json();
    assert_eq!(swept["orphans"][0]["deleted"], true);
    eventually("the orphan to be gone", || async {
        let jobs = sim.jobs("default").await;
        (jobs.len() == 1 && kept.ends_with(&jobs[0].0)).then_some(())
    })
    .await;
    api.post("/v1/sweep", &json!({"delete": true}))
        .await
        .error(StatusCode::BAD_REQUEST, "bad_request");
    service.stop().await;
}

#[tokio::test]
async fn tls_serves_https_with_the_given_certificate() {
    use std::sync::Arc;
    let sim = Sim::start().await;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_file = sim.dir.path().join("tls.crt");
    let key_file = sim.dir.path().join("tls.key");
    std::fs::write(&cert_file, certified.cert.pem()).unwrap();
    std::fs::write(&key_file, certified.signing_key.serialize_pem()).unwrap();
    let mut config = sim.config();
    config.tls = Some(kubeferry_server::config::TlsConfig {
        cert_file,
        key_file,
    });
    let running = kubeferry_server::start(config).await.unwrap();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let client_config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
    let tcp = tokio::net::TcpStream::connect(running.addr())
        .await
        .unwrap();
    let tls = connector
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get("/healthz")
        .header(header::HOST, "localhost")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    // Plain HTTP on the TLS port gets no answer.
    let plain = Api::new(running.addr(), None);
    let request = hyper::Request::get(format!("http://{}/healthz", running.addr()))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    assert!(client.request(request).await.is_err());
    drop(plain);
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_stops_readiness_ends_streams_and_finishes() {
    let sim = Sim::start().await;
    let mut config = sim.config();
    config.timeouts.drain = std::time::Duration::from_millis(300);
    let service = Service::start(config).await;
    let api = service.api.clone();
    let id = api.submit(shell_job("outlives", "sleep 60")).await;
    let mut events = Events::new(api.open(&format!("/v1/jobs/{id}/events")).await);
    events.next().await.unwrap();

    let stopping = tokio::spawn(service.stop());
    let body = eventually("readiness to fail while draining", || async {
        let reply = api.get("/readyz").await;
        (reply.status == StatusCode::SERVICE_UNAVAILABLE).then(|| reply.json())
    })
    .await;
    assert!(
        body["reason"].as_str().unwrap().contains("shutting down"),
        "{body}"
    );
    // The event stream ends instead of holding the shutdown up.
    while events.next().await.is_some() {}
    stopping.await.unwrap();
    // The job itself is untouched: it lives in Kubernetes, not in the service.
    assert_eq!(sim.jobs("default").await.len(), 1);
}

#[tokio::test]
async fn kubernetes_failures_become_clear_errors_and_a_retry_is_safe() {
    use kubeferry_sim::{FaultAction, FaultRule};
    let sim = Sim::start().await;
    let mut config = sim.config();
    config.timeouts.retry_deadline = std::time::Duration::from_millis(300);
    config.timeouts.request = std::time::Duration::from_millis(500);
    let service = Service::start(config).await;
    let api = &service.api;
    let create = |action| {
        FaultRule::new(action)
            .verbs(&["create"])
            .resources(&["jobs.batch"])
    };

    // The API server refuses the object (an admission webhook, a quota): 422.
    let fault = sim.sim.add_fault(create(FaultAction::Error {
        code: 422,
        message: Some("denied by policy".into()),
        retry_after_seconds: None,
    }));
    let body = api
        .post("/v1/jobs", &shell_job("refused", "true"))
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "kubernetes_rejected");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("denied by policy"),
        "{body}"
    );
    sim.sim.remove_fault(fault);

    // The API server keeps failing: retried until the deadline, then 503 with Retry-After.
    let fault = sim.sim.add_fault(create(FaultAction::error(500)));
    let reply = api.post("/v1/jobs", &shell_job("failing", "true")).await;
    reply.error(StatusCode::SERVICE_UNAVAILABLE, "kubernetes_error");
    assert!(reply.headers.contains_key(header::RETRY_AFTER));
    sim.sim.remove_fault(fault);

    // The API server is slow: the request times out (504)...
    let fault = sim
        .sim
        .add_fault(create(FaultAction::Latency { millis: 2_000 }).times(1));
    api.post("/v1/jobs", &shell_job("slow", "true"))
        .await
        .error(StatusCode::GATEWAY_TIMEOUT, "timeout");
    sim.sim.remove_fault(fault);
    // ...and submitting the same job id again is safe whether or not the first create landed.
    let id = api.submit(shell_job("slow", "true")).await;
    api.wait_for(&id, "SUCCEEDED").await;
    let jobs = sim.jobs("default").await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].1, "slow");
    service.stop().await;
}

#[tokio::test]
async fn the_deployed_role_is_all_the_service_needs_and_its_absence_is_named() {
    let mut sim_config = kubeferry_sim::SimConfig::for_tests();
    sim_config.rbac = true;
    let sim = Sim::start_with(sim_config).await;
    // The Role and RoleBinding of deploy/, given to a service account in team-a only.
    let rbac = std::fs::read_to_string(repo().join("deploy/10-rbac.yaml")).unwrap();
    let documents: Vec<Value> = serde_saphyr::from_multiple(&rbac).unwrap();
    for mut document in documents {
        document["metadata"]["namespace"] = json!("team-a");
        if document["kind"] == "RoleBinding" {
            document["subjects"][0]["namespace"] = json!("team-a");
        }
        sim.sim.create("team-a", document).unwrap();
    }
    let token = sim.sim.token_for("team-a", "kubeferry");
    let kubeconfig = sim.dir.path().join("kubeconfig-sa");
    sim.sim
        .write_kubeconfig_as(&kubeconfig, CLUSTER, &token)
        .unwrap();
    let mut config = sim.config();
    config.clusters[0].source = kubeferry_server::config::ClusterSource::Kubeconfig {
        path: Some(kubeconfig),
        context: Some(CLUSTER.into()),
    };
    config.namespaces = vec!["team-a".into()];
    let service = Service::start(config.clone()).await;
    let api = &service.api;

    // Everything works with exactly that Role.
    let id = api
        .submit(json!({"jobId": "rbac", "spec": {"name": "x", "image": "busybox", "command": ["sh", "-c", "echo ok"]}}))
        .await;
    api.wait_for(&id, "SUCCEEDED").await;
    assert_eq!(
        api.get(&format!("/v1/jobs/{id}/logs")).await.json()["log"],
        "ok\n"
    );
    assert_eq!(api.get("/v1/jobs").await.status, StatusCode::OK);
    let long = api.submit(shell_job("rbac-long", "sleep 60")).await;
    api.wait_for(&long, "STARTED").await;
    let cancel = api
        .post(&format!("/v1/jobs/{long}/cancel"), &json!({}))
        .await;
    assert_eq!(cancel.status, StatusCode::ACCEPTED, "{}", cancel.text());
    api.wait_for(&long, "CANCELLED").await;
    let sweep = api
        .post("/v1/sweep", &json!({"knownJobIds": [], "delete": true}))
        .await;
    assert_eq!(sweep.status, StatusCode::OK, "{}", sweep.text());
    service.stop().await;

    // In a namespace without the Role: not ready, and a submission names the missing permission.
    config.namespaces = vec!["team-b".into()];
    let running = kubeferry_server::start(config).await.unwrap();
    let api = Api::new(running.addr(), Some(ADMIN_TOKEN));
    eventually("the service to report the forbidden watch", || async {
        let reply = api.get("/readyz").await;
        (reply.status == StatusCode::SERVICE_UNAVAILABLE).then_some(())
    })
    .await;
    let body = api
        .post("/v1/jobs", &shell_job("denied", "true"))
        .await
        .error(StatusCode::BAD_GATEWAY, "kubernetes_forbidden");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("create jobs.batch"), "{message}");
    assert!(message.contains("team-b"), "{message}");
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_api_url_with_a_ca_and_a_token_file_that_is_reread_when_it_changes() {
    let sim = Sim::start().await;
    let ca_file = sim.dir.path().join("ca.crt");
    std::fs::write(&ca_file, sim.sim.ca_pem().unwrap()).unwrap();
    let token_file = sim.dir.path().join("token");
    // A token the API server does not accept (an expired one, say).
    std::fs::write(&token_file, "expired-token\n").unwrap();
    let mut config = sim.config();
    config.clusters[0].source = kubeferry_server::config::ClusterSource::ApiUrl {
        url: sim.sim.url(),
        ca_file: Some(ca_file),
        token_file: Some(token_file.clone()),
    };
    let running = kubeferry_server::start(config).await.unwrap();
    let api = Api::new(running.addr(), Some(ADMIN_TOKEN));
    eventually("the service to report the refused watch", || async {
        let reply = api.get("/readyz").await;
        let body = reply.json();
        (reply.status == StatusCode::SERVICE_UNAVAILABLE
            && body["reason"]
                .as_str()
                .is_some_and(|r| r.contains("failing")))
        .then_some(())
    })
    .await;

    // The token is renewed in place: the service picks it up without a restart.
    std::fs::write(&token_file, format!("{}\n", sim.sim.admin_token())).unwrap();
    eventually("the service to be ready with the new token", || async {
        (api.get("/readyz").await.status == StatusCode::OK).then_some(())
    })
    .await;
    let id = api.submit(shell_job("by-url", "echo via the url")).await;
    assert!(id.starts_with("sim/job/default/"), "{id}");
    api.wait_for(&id, "SUCCEEDED").await;
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn twenty_jobs_cost_twenty_creates_and_the_namespaces_watches() {
    // Everything 20 jobs cost at the API server, from submission through the service to their
    // end, waited on over one event stream and each status read once.
    let sim = Sim::start().await;
    sim.sim.reset_counters();
    let service = sim.serve().await;
    let api = &service.api;
    let mut events = Events::new(
        api.open("/v1/events?namespace=default&selector=flow%3Dcounted")
            .await,
    );
    assert_eq!(events.next_named("listed").await.unwrap().event, "listed");
    let mut ids = Vec::new();
    for n in 0..20 {
        ids.push(
            api.submit(json!({"jobId": format!("counted-{n}"), "spec": {"name": "x",
                "image": "busybox", "command": ["sh", "-c", "exit 0"], "labels": {"flow": "counted"}}}))
                .await,
        );
    }
    let mut ended = std::collections::BTreeSet::new();
    while ended.len() < ids.len() {
        let event = events.next_named("status").await.expect("a status event");
        if event.data["state"] == "SUCCEEDED" {
            ended.insert(event.data["id"].as_str().unwrap().to_string());
        }
    }
    for id in &ids {
        assert_eq!(api.job(id).await.json()["state"], "SUCCEEDED");
    }
    // Each Job is let go once its record is kept (kubeferry's finalizer held it until then).
    eventually("every Job let go", || async {
        (sim.sim.request_count("patch", "jobs.batch") >= 20).then_some(())
    })
    .await;
    let counted: std::collections::BTreeMap<(String, String), u64> = sim
        .sim
        .counters()
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(key, count)| ((key.verb, key.resource), count))
        .collect();
    let expected: std::collections::BTreeMap<(String, String), u64> = [
        // The jobs themselves; before each create, the read of its job id's outcome record (a
        // job id never runs twice); and once each ended, its one outcome record.
        ("create", "jobs.batch", 20),
        ("create", "configmaps", 20),
        // Once its record is kept, each Job's release of kubeferry's finalizer.
        ("patch", "jobs.batch", 20),
        // Each namespace's watch of outcome records, the submissions' reads of records (one
        // after another: one each), and the snapshot's list of records (jobs whose objects are
        // gone).
        ("list", "configmaps", 3 + 20 + 1),
        ("watch", "configmaps", 3),
        // The service's watches of its three namespaces, each listed once: Jobs, their pods,
        // the Job controller's refusals, and the Spark drivers' pods; the event stream's
        // selector watch of Jobs and its snapshot (a list of Jobs and of pods). The bare pods
        // of the stream's namespace: the watch its subscription starts, its selector watch, and
        // the snapshot's list of them.
        ("list", "jobs.batch", 3 + 1 + 1),
        ("watch", "jobs.batch", 3 + 1),
        ("list", "pods", 3 + 3 + 1 + (1 + 1 + 1)),
        ("watch", "pods", 3 + 3 + (1 + 1)),
        ("list", "events", 3),
        ("watch", "events", 3),
        // Which Spark operators the cluster serves.
        ("get", "/apis/spark.apache.org/v1", 1),
        ("get", "/apis/sparkoperator.k8s.io/v1beta2", 1),
        // Whether it serves JobSets (asked by the snapshot's list; it serves none, so nothing
        // more is asked of them).
        ("get", "/apis/jobset.x-k8s.io/v1alpha2", 1),
    ]
    .into_iter()
    .map(|(verb, resource, count)| ((verb.to_string(), resource.to_string()), count))
    .collect();
    assert_eq!(counted, expected);
    service.stop().await;
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_fails_at_its_grace_though_nobody_asks() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let id = service
        .api
        .submit(json!({"jobId": "unpullable", "spec": {"name": "x",
            "image": "registry.invalid/nothing:1.0", "command": ["true"]}}))
        .await;
    // Nobody asks the service anything: only the cluster is looked at.
    let name = id.rsplit('/').next().unwrap();
    let job = eventually("the recorded outcome", || async {
        sim.sim
            .object("batch", "jobs", "default", name)
            .filter(|job| job["metadata"]["annotations"]["kubeferry.dev/outcome"].is_string())
    })
    .await;
    assert_eq!(job["spec"]["suspend"], true, "stopped: {job:#}");
    let outcome: Value = serde_json::from_str(
        job["metadata"]["annotations"]["kubeferry.dev/outcome"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(outcome["state"], "FAILED", "{outcome:#}");
    assert_eq!(outcome["reason"], "ImagePullFailed", "{outcome:#}");
    eventually("the job's pod to go", || async {
        (sim.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    // Asked at last, the service answers the recorded outcome.
    let info = service.api.job(&id).await.json();
    assert_eq!(
        (&info["state"], &info["reason"], &info["finishedAt"]),
        (
            &outcome["state"],
            &outcome["reason"],
            &outcome["finishedAt"]
        )
    );
    service.stop().await;
}

#[tokio::test]
async fn a_metrics_scrape_reads_counts_kept_as_statuses_change() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let gate = Gate::new(sim.dir.path(), "counted");
    let running = api.submit(shell_job("running", &gate.wait())).await;
    let done = api.submit(shell_job("done", "exit 0")).await;
    let failed = api.submit(shell_job("failed", "exit 3")).await;
    api.wait_for(&running, "STARTED").await;
    api.wait_for(&done, "SUCCEEDED").await;
    api.wait_for(&failed, "FAILED").await;
    let line = |state: &str, count: usize| {
        format!("kubeferry_jobs{{cluster=\"sim\",namespace=\"default\",state=\"{state}\"}} {count}")
    };
    let scrape = || async { api.get("/metrics").await.text() };
    // The counts follow the jobs' changes, with nobody asking for a status.
    eventually("the counts", || async {
        let text = scrape().await;
        [line("STARTED", 1), line("SUCCEEDED", 1), line("FAILED", 1)]
            .iter()
            .all(|l| text.contains(l.as_str()))
            .then_some(())
    })
    .await;
    sim.sim.reset_counters();
    for _ in 0..50 {
        scrape().await;
    }
    let counters = sim.sim.counters();
    assert!(
        counters.values().all(|count| *count == 0),
        "50 scrapes made requests: {counters:#?}"
    );
    gate.open();
    eventually("the running job's end to be counted", || async {
        let text = scrape().await;
        (text.contains(&line("STARTED", 0)) && text.contains(&line("SUCCEEDED", 2))).then_some(())
    })
    .await;
    service.stop().await;
}

#[tokio::test]
async fn a_dry_run_answers_the_objects_and_creates_nothing() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let mut body = shell_job("dry-1", "echo never");
    for mode in ["client", "server"] {
        body["dryRun"] = json!(mode);
        let reply = api.post("/v1/jobs", &body).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        let answer = reply.json();
        assert_eq!(answer["dryRun"], mode);
        assert_eq!(answer["existing"], false);
        let [job] = answer["objects"].as_array().unwrap().as_slice() else {
            panic!("one object: {answer}");
        };
        assert_eq!(job["kind"], "Job");
        assert_eq!(job["metadata"]["labels"]["kubeferry.dev/job-id"], "dry-1");
        let name = job["metadata"]["name"].as_str().unwrap();
        assert_eq!(answer["id"], format!("sim/job/default/{name}"));
        // Only the server's answer is the object as it would be stored.
        assert_eq!(
            job["metadata"]["uid"].is_string(),
            mode == "server",
            "{job}"
        );
    }
    assert_eq!(sim.sim.count("batch", "jobs"), 0);
    api.job(&format!("sim/job/default/{}", "dry-1"))
        .await
        .error(StatusCode::NOT_FOUND, "no_such_job");
    // A mode that is none of them names the field; nothing is created either.
    body["dryRun"] = json!("maybe");
    let reply = api.post("/v1/jobs", &body).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert!(reply.text().contains("dryRun"), "{}", reply.text());
    assert_eq!(sim.sim.count("batch", "jobs"), 0);
    service.stop().await;
}

#[tokio::test]
async fn a_jobs_timeline_tells_its_story() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let id = api.submit(shell_job("told", "echo bye; exit 3")).await;
    api.wait_for(&id, "FAILED").await;
    let reply = api.get(&format!("/v1/jobs/{id}/timeline")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let timeline = reply.json();
    assert_eq!(timeline["job"]["id"], id.as_str());
    assert_eq!(timeline["job"]["jobId"], "told");
    assert_eq!(timeline["job"]["exitCode"], 3);
    let steps = timeline["steps"].as_array().unwrap();
    let whats: Vec<&str> = steps.iter().map(|s| s["what"].as_str().unwrap()).collect();
    assert_eq!(whats.first(), Some(&"Submitted"), "{timeline}");
    assert_eq!(whats.last(), Some(&"FAILED"), "{timeline}");
    let ended = steps
        .iter()
        .find(|s| s["what"] == "Ended")
        .expect("an Ended step");
    assert_eq!(ended["detail"], "exit code 3 (Error)");
    assert!(
        ended["object"]
            .as_str()
            .unwrap()
            .starts_with(id.rsplit('/').next().unwrap())
    );
    assert_eq!(ended["warning"], true);
    // Times to the second, as every answer gives them.
    assert!(
        steps
            .iter()
            .all(|s| s["at"].as_str().is_some_and(|at| at.len() == 20)),
        "{timeline}"
    );
    assert!(timeline["spent"]["running"].is_number(), "{timeline}");
    assert!(
        timeline["whatToDo"]
            .as_str()
            .unwrap()
            .starts_with("read its log"),
        "{timeline}"
    );
    api.get("/v1/jobs/sim/job/default/nope/timeline")
        .await
        .error(StatusCode::NOT_FOUND, "no_such_job");
    service.stop().await;
}

#[tokio::test]
async fn the_service_keeps_the_log_tail_its_limits_say_for_jobs_that_do_not() {
    let sim = Sim::start().await;
    let mut config = sim.config();
    config.limits.keep_log = Some(kubeferry_core::marks::KeepLog {
        lines: 100,
        bytes: 16 * 1024,
    });
    let service = Service::start(config).await;
    let api = &service.api;
    let script = "for i in $(seq 1 150); do echo line $i; done";
    let default = api.submit(shell_job("keeps-default", script)).await;
    let mut own = shell_job("keeps-own", script);
    own["spec"]["keepLog"] = json!({"lines": 10});
    let own = api.submit(own).await;
    for (id, first) in [(&default, 51), (&own, 141)] {
        api.wait_for(id, "SUCCEEDED").await;
        let info = eventually("the outcome recorded with its tail", || async {
            let info = api.job(id).await.json();
            info["lastWords"].is_string().then_some(info)
        })
        .await;
        let kept: String = (first..=150).map(|i| format!("line {i}\n")).collect();
        assert_eq!(info["lastWords"], kept.as_str(), "{id}");
    }
    service.stop().await;
}

#[tokio::test]
async fn the_dashboard_is_served_with_a_strict_policy_and_knows_the_tokens_namespaces() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let api = &service.api;
    let root = api.get("/").await;
    assert!(root.status.is_redirection(), "{}", root.status);
    assert_eq!(root.headers[header::LOCATION], "/ui");
    for (path, content_type) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/app.css", "text/css; charset=utf-8"),
    ] {
        let reply = api.get(path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert_eq!(reply.headers[header::CONTENT_TYPE], content_type, "{path}");
        let policy = reply.headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(policy.contains("script-src 'self';"), "{policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(reply.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(reply.headers[header::REFERRER_POLICY], "no-referrer");
    }
    // The page has no inline script or style for the policy to refuse.
    let page = api.get("/ui").await.text();
    assert!(
        !page.contains("<script>") && !page.contains("style="),
        "{page}"
    );
    let weight: usize = kubeferry_server::api::ui::FILES
        .iter()
        .map(|(_, _, body)| body.len())
        .sum();
    assert!(weight < 300 * 1024, "{weight} bytes");
    // The dashboard asks which namespaces the token may see.
    let me = api.get("/v1/whoami").await.json();
    assert_eq!(me["name"], "admin");
    assert_eq!(me["namespaces"], json!(["default", "team-a", "team-b"]));
    let stats = api.get("/v1/stats?namespace=team-a").await;
    assert_eq!(stats.status, StatusCode::OK, "{}", stats.text());
    assert!(stats.json()["minutes"].is_array());
    service.stop().await;
}
