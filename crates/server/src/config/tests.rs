use std::path::Path;
use std::time::Duration;

use super::*;

fn parse(text: &str) -> FileConfig {
    FileConfig::parse(Path::new("kubeferry.yaml"), text).unwrap()
}

fn resolve(text: &str, overrides: Overrides) -> Result<Config, ConfigError> {
    Config::resolve(parse(text), overrides)
}

fn error(text: &str, overrides: Overrides) -> String {
    resolve(text, overrides).unwrap_err().to_string()
}

const FULL: &str = r#"
listen: 0.0.0.0:9443
tls:
  certFile: /etc/kubeferry/tls.crt
  keyFile: /etc/kubeferry/tls.key
auth:
  tokensFile: /etc/kubeferry/tokens.yaml
clusters:
  - name: prod
    apiUrl: https://10.0.0.1:6443
    caFile: /etc/kubeferry/ca.crt
    tokenFile: /var/run/secrets/token
  - name: dev
    kubeconfig: /etc/kubeferry/kubeconfig
    context: dev
    sparkOperator: kubeflow
  - name: here
    inCluster: true
namespaces: [etl, default]
namePrefix: gravitino
templatesDir: /etc/kubeferry/templates
timeouts:
  request: 10s
  sync: 500ms
  pending: 30m
  imagePullGrace: 1m
  noStatus: 5m
  followIdle: 2m
limits:
  maxBodyBytes: 65536
  defaultPageSize: 50
"#;

#[test]
fn the_documented_file_reads_as_written() {
    let config = resolve(FULL, Overrides::default()).unwrap();
    assert_eq!(config.listen, "0.0.0.0:9443".parse().unwrap());
    assert_eq!(
        config.tls,
        Some(TlsConfig {
            cert_file: "/etc/kubeferry/tls.crt".into(),
            key_file: "/etc/kubeferry/tls.key".into(),
        })
    );
    assert_eq!(
        config.auth,
        AuthConfig::Tokens {
            file: "/etc/kubeferry/tokens.yaml".into()
        }
    );
    assert_eq!(
        config.clusters,
        vec![
            ClusterConfig {
                name: Some("prod".into()),
                source: ClusterSource::ApiUrl {
                    url: "https://10.0.0.1:6443".into(),
                    ca_file: Some("/etc/kubeferry/ca.crt".into()),
                    token_file: Some("/var/run/secrets/token".into()),
                },
                spark_operator: None,
            },
            ClusterConfig {
                name: Some("dev".into()),
                source: ClusterSource::Kubeconfig {
                    path: Some("/etc/kubeferry/kubeconfig".into()),
                    context: Some("dev".into()),
                },
                spark_operator: Some(kubeferry_core::spark::SparkOperator::Kubeflow),
            },
            ClusterConfig {
                name: Some("here".into()),
                source: ClusterSource::InCluster,
                spark_operator: None,
            },
        ]
    );
    assert_eq!(config.namespaces, ["etl", "default"]);
    assert_eq!(config.name_prefix, "gravitino");
    assert_eq!(config.timeouts.request, Duration::from_secs(10));
    assert_eq!(config.timeouts.sync, Duration::from_millis(500));
    assert_eq!(config.timeouts.pending, Some(Duration::from_secs(1800)));
    assert_eq!(config.timeouts.image_pull_grace, Duration::from_secs(60));
    assert_eq!(config.timeouts.watch, Timeouts::default().watch);
    assert_eq!(config.timeouts.no_status, Duration::from_secs(300));
    assert_eq!(config.timeouts.follow_idle, Duration::from_secs(120));
    assert_eq!(config.limits.max_body_bytes, 65536);
    assert_eq!(config.limits.default_page_size, 50);
}

#[test]
fn the_deployed_config_map_is_valid() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/20-config.yaml"
    ))
    .unwrap();
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    let file = documents[0]["data"]["kubeferry.yaml"].as_str().unwrap();
    let config = resolve(file, Overrides::default()).unwrap();
    assert_eq!(config.clusters[0].name.as_deref(), Some("prod"));
    assert_eq!(config.clusters[0].source, ClusterSource::InCluster);
    assert_eq!(config.namespaces, ["kubeferry"]);
    assert_eq!(config.name_prefix, "kf");
    assert_eq!(config.timeouts.no_status, Duration::from_secs(600));
    assert_eq!(
        config.auth,
        AuthConfig::Tokens {
            file: "/etc/kubeferry/tokens/tokens.yaml".into()
        }
    );
}

#[test]
fn defaults_serve_the_current_context_and_default_namespace() {
    let config = resolve("auth: {anonymous: true}", Overrides::default()).unwrap();
    assert_eq!(config.listen, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(config.auth, AuthConfig::Anonymous);
    assert_eq!(config.namespaces, ["default"]);
    assert_eq!(
        config.clusters,
        [ClusterConfig {
            name: None,
            source: ClusterSource::Kubeconfig {
                path: None,
                context: None
            },
            spark_operator: None,
        }]
    );
    assert_eq!(config.timeouts, Timeouts::default());
    assert_eq!(config.limits, Limits::default());
}

#[test]
fn flags_and_environment_override_the_file() {
    let overrides = Overrides {
        listen: Some("127.0.0.1:0".into()),
        namespaces: Some(vec!["team-a".into()]),
        name_prefix: Some("kf".into()),
        anonymous: true,
        api_url: Some("https://k8s:6443".into()),
        token_file: Some("/token".into()),
        request_timeout: Some("2s".into()),
        ..Overrides::default()
    };
    let config = resolve(FULL, overrides).unwrap();
    assert_eq!(config.listen, "127.0.0.1:0".parse().unwrap());
    assert_eq!(config.namespaces, ["team-a"]);
    assert_eq!(config.name_prefix, "kf");
    assert_eq!(config.auth, AuthConfig::Anonymous);
    assert_eq!(config.timeouts.request, Duration::from_secs(2));
    // The first cluster keeps its name but connects the way the override says.
    assert_eq!(
        config.clusters[0],
        ClusterConfig {
            name: Some("prod".into()),
            source: ClusterSource::ApiUrl {
                url: "https://k8s:6443".into(),
                ca_file: None,
                token_file: Some("/token".into()),
            },
            spark_operator: None,
        }
    );
    assert_eq!(config.clusters.len(), 3);
}

#[test]
fn a_cluster_can_come_from_overrides_alone() {
    let overrides = Overrides {
        anonymous: true,
        cluster_name: Some("sim".into()),
        kubeconfig: Some("/tmp/kubeconfig".into()),
        ..Overrides::default()
    };
    let config = resolve("", overrides).unwrap();
    assert_eq!(
        config.clusters,
        [ClusterConfig {
            name: Some("sim".into()),
            source: ClusterSource::Kubeconfig {
                path: Some("/tmp/kubeconfig".into()),
                context: None
            },
            spark_operator: None,
        }]
    );
}

#[test]
fn mistakes_name_their_field() {
    let anonymous = || Overrides {
        anonymous: true,
        ..Overrides::default()
    };
    let cases: Vec<(&str, Overrides, &str)> = vec![
        ("", Overrides::default(), "auth.tokensFile: missing"),
        (
            "auth: {tokensFile: /t, anonymous: true}",
            Overrides::default(),
            "auth: tokensFile and anonymous exclude each other",
        ),
        (
            "listen: nowhere",
            anonymous(),
            "listen: \"nowhere\" is not an address",
        ),
        ("tls: {certFile: /c}", anonymous(), "tls.keyFile: missing"),
        ("tls: {keyFile: /k}", anonymous(), "tls.certFile: missing"),
        (
            "namespaces: [Bad_NS]",
            anonymous(),
            "namespaces[0]: \"Bad_NS\" is not a namespace name",
        ),
        (
            "namespaces: [a, a]",
            anonymous(),
            "namespaces[1]: \"a\" is listed twice",
        ),
        (
            "namePrefix: Gravitino",
            anonymous(),
            "namePrefix: \"Gravitino\" is not a DNS-1123 label",
        ),
        (
            "namePrefix: abcdefghijklmnopqrstuvwxyz",
            anonymous(),
            "namePrefix: \"abcdefghijklmnopqrstuvwxyz\" is 26 characters; at most 24",
        ),
        (
            "timeouts: {request: soon}",
            anonymous(),
            "timeouts.request: \"soon\" is not a duration",
        ),
        (
            "timeouts: {request: 0s}",
            anonymous(),
            "timeouts.request: must be more than 0",
        ),
        (
            "timeouts: {watch: 500ms}",
            anonymous(),
            "timeouts.watch: must be at least 1s",
        ),
        (
            "timeouts: {read: 1m, nameHold: 30s}",
            anonymous(),
            "timeouts.nameHold: must be at least timeouts.read (60s)",
        ),
        (
            "limits: {maxPageSize: 0}",
            anonymous(),
            "limits.maxPageSize: must be more than 0",
        ),
        (
            "limits: {defaultPageSize: 10, maxPageSize: 5}",
            anonymous(),
            "limits.defaultPageSize: must not exceed limits.maxPageSize (5)",
        ),
        (
            "limits: {keepLogLines: 0}",
            anonymous(),
            "limits.keepLogLines: 0 is out of range (1 to 5000)",
        ),
        (
            "limits: {keepLogLines: 100, keepLogBytes: 1000000}",
            anonymous(),
            "limits.keepLogBytes: 1000000 is out of range (1 to 65536)",
        ),
        (
            "limits: {keepLogBytes: 1024}",
            anonymous(),
            "limits.keepLogBytes: needs limits.keepLogLines: how many last lines to keep",
        ),
        (
            "clusters: [{name: a, apiUrl: 'https://x', inCluster: true}]",
            anonymous(),
            "clusters[0]: give one way to connect",
        ),
        (
            "clusters: [{name: a, caFile: /ca}]",
            anonymous(),
            "clusters[0].caFile: only goes with apiUrl",
        ),
        (
            "clusters: [{apiUrl: 'https://x'}]",
            anonymous(),
            "clusters[0].name: missing",
        ),
        (
            "clusters: [{name: a, apiUrl: 'not a url'}]",
            anonymous(),
            "clusters[0].apiUrl: \"not a url\" is not a URL",
        ),
        (
            "clusters: [{name: a/b, inCluster: true}]",
            anonymous(),
            "clusters[0].name: \"a/b\" cannot appear in execution ids",
        ),
        (
            "clusters: [{name: a, inCluster: true}, {name: a, kubeconfig: /k}]",
            anonymous(),
            "clusters[1].name: \"a\" is used twice",
        ),
        (
            "timeouts: {noStatus: 0s}",
            anonymous(),
            "timeouts.noStatus: must be more than 0",
        ),
    ];
    for (text, overrides, expected) in cases {
        let message = error(text, overrides);
        assert!(message.contains(expected), "{text}: {message}");
    }
}

#[test]
fn the_name_hold_follows_read_unless_given() {
    let anonymous = || Overrides {
        anonymous: true,
        ..Overrides::default()
    };
    let hold = |text: &str| resolve(text, anonymous()).unwrap().timeouts.name_hold;
    assert_eq!(hold("{}"), Duration::from_secs(30));
    assert_eq!(hold("timeouts: {read: 45s}"), Duration::from_secs(45));
    assert_eq!(
        hold("timeouts: {read: 45s, nameHold: 2m}"),
        Duration::from_secs(120)
    );
}

#[test]
fn unknown_fields_are_refused_with_their_place() {
    let error = FileConfig::parse(Path::new("kubeferry.yaml"), "listen: x\nnamspaces: [a]\n")
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("kubeferry.yaml: "), "{error}");
    assert!(error.contains("namspaces"), "{error}");
    assert!(error.contains("line 2"), "{error}");
}

#[test]
fn durations_read_like_kubectl_flags() {
    assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
    assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
    assert!(parse_duration("10").is_err(), "a bare number has no unit");
    assert!(parse_duration("-5s").unwrap_err().contains("negative"));
    assert!(parse_duration("later").is_err());
}

#[test]
fn a_clusters_spark_operator_is_one_of_the_two_and_survives_a_connection_override() {
    let text = "auth: {anonymous: true}\nclusters: [{name: a, inCluster: true, sparkOperator: kubeflow}]\n";
    let overrides = Overrides {
        kubeconfig: Some("/kc".into()),
        ..Overrides::default()
    };
    let config = resolve(text, overrides).unwrap();
    assert_eq!(
        config.clusters[0].spark_operator,
        Some(kubeferry_core::spark::SparkOperator::Kubeflow)
    );
    let error = FileConfig::parse(
        Path::new("kubeferry.yaml"),
        "clusters: [{name: a, sparkOperator: spark}]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("spark"), "{error}");
}

#[test]
fn every_timeout_and_limit_has_a_variable_named_by_its_path() {
    let vars = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        path_variables(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .chain([("HOME".to_string(), "/root".to_string())]),
        )
    };
    let overrides = Overrides {
        anonymous: true,
        request_timeout: Some("7s".into()),
        environment: vars(&[
            ("KUBEFERRY_TIMEOUTS_RETRY_DEADLINE", "3s"),
            ("KUBEFERRY_TIMEOUTS_NO_STATUS", "2m"),
            ("KUBEFERRY_TIMEOUTS_PENDING", "30m"),
            ("KUBEFERRY_TIMEOUTS_REQUEST", "9s"),
            ("KUBEFERRY_LIMITS_MAX_BODY_BYTES", "2048"),
            ("KUBEFERRY_LIMITS_MAX_PAGE_SIZE", "500"),
            ("KUBEFERRY_LIMITS_KEEP_LOG_LINES", "300"),
        ]),
        ..Overrides::default()
    };
    assert_eq!(overrides.environment.len(), 7, "others are left alone");
    let config = resolve("timeouts: {retryDeadline: 1s, watch: 30s}", overrides).unwrap();
    assert_eq!(config.timeouts.retry_deadline, Duration::from_secs(3));
    assert_eq!(config.timeouts.no_status, Duration::from_secs(120));
    assert_eq!(config.timeouts.pending, Some(Duration::from_secs(1800)));
    assert_eq!(config.timeouts.watch, Duration::from_secs(30), "the file's");
    assert_eq!(
        config.timeouts.request,
        Duration::from_secs(7),
        "the flag wins over the path variable"
    );
    assert_eq!(config.limits.max_body_bytes, 2048);
    assert_eq!(config.limits.max_page_size, 500);
    assert_eq!(
        config.limits.keep_log,
        Some(kubeferry_core::marks::KeepLog {
            lines: 300,
            bytes: 16 * 1024
        })
    );

    for (name, value, expected) in [
        (
            "KUBEFERRY_TIMEOUTS_RETRY",
            "1s",
            "KUBEFERRY_TIMEOUTS_RETRY: names no setting; the variables of this kind are KUBEFERRY_TIMEOUTS_REQUEST,",
        ),
        (
            "KUBEFERRY_LIMITS_MAX_BODY",
            "1",
            "KUBEFERRY_LIMITS_MAX_BODY: names no setting",
        ),
        (
            "KUBEFERRY_LIMITS_MAX_LOG_BYTES",
            "lots",
            "KUBEFERRY_LIMITS_MAX_LOG_BYTES: \"lots\" is not a whole number",
        ),
        (
            "KUBEFERRY_TIMEOUTS_WATCH",
            "soon",
            "timeouts.watch: \"soon\" is not a duration",
        ),
    ] {
        let overrides = Overrides {
            anonymous: true,
            environment: vars(&[(name, value)]),
            ..Overrides::default()
        };
        let message = error("", overrides);
        assert!(message.contains(expected), "{name}: {message}");
    }
}
