use clap::{CommandFactory, Parser, Subcommand};

use super::*;

/// The command line's global flags (crates/cli/src/args.rs), with `serve` flattened in.
#[derive(Debug, Parser)]
struct Cli {
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    #[arg(long, global = true)]
    context: Option<String>,
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    #[arg(long, global = true)]
    cluster_name: Option<String>,
    #[arg(short = 'o', long = "output", global = true)]
    format: Option<String>,
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Serve(ServeArgs),
}

#[test]
fn serve_flattens_into_the_command_line_without_clashes() {
    Cli::command().debug_assert();
}

#[test]
fn flags_and_the_surrounding_command_line_make_the_configuration() {
    let dir = tempfile_dir();
    let file = dir.join("kubeferry.yaml");
    std::fs::write(
        &file,
        "auth: {tokensFile: /tokens.yaml}\nnamespaces: [etl]\ntimeouts: {request: 9s}\n",
    )
    .unwrap();
    let cli = Cli::try_parse_from([
        "kubeferry",
        "--kubeconfig",
        "/kc",
        "--cluster-name",
        "prod",
        "serve",
        "--config",
        file.to_str().unwrap(),
        "--listen",
        "0.0.0.0:9000",
        "--name-prefix",
        "kf",
        "--shutdown-timeout",
        "3s",
    ])
    .unwrap();
    let Command::Serve(args) = cli.command;
    let args = args.with_cluster(InheritedCluster {
        kubeconfig: cli.kubeconfig,
        context: cli.context,
        cluster_name: cli.cluster_name,
        namespace: cli.namespace,
    });
    let config = args.config().unwrap();
    assert_eq!(config.listen, "0.0.0.0:9000".parse().unwrap());
    assert_eq!(config.namespaces, ["etl"]);
    assert_eq!(config.name_prefix, "kf");
    assert_eq!(config.timeouts.request, std::time::Duration::from_secs(9));
    assert_eq!(config.timeouts.shutdown, std::time::Duration::from_secs(3));
    assert_eq!(config.clusters[0].name.as_deref(), Some("prod"));
    assert_eq!(
        config.clusters[0].source,
        config::ClusterSource::Kubeconfig {
            path: Some("/kc".into()),
            context: None
        }
    );

    // `-n` serves one namespace when nothing else says which.
    let cli = Cli::try_parse_from(["kubeferry", "-n", "team", "serve", "--anonymous"]).unwrap();
    let Command::Serve(args) = cli.command;
    let args = args.with_cluster(InheritedCluster {
        namespace: cli.namespace,
        ..InheritedCluster::default()
    });
    assert_eq!(args.config().unwrap().namespaces, ["team"]);
    std::fs::remove_dir_all(dir).unwrap();
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kf-serve-args-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn spark_jobs_get_the_configured_settings_and_each_cluster_its_operator() {
    use kubeferry_core::spark::SparkOperator;
    let text = "auth: {anonymous: true}\nnamePrefix: kf\nclusters:\n  - {name: a, inCluster: true, sparkOperator: kubeflow}\n  - {name: b, inCluster: true}\ntimeouts: {watch: 42s, watchRestart: 9s, tombstone: 7m, absent: 3s, sync: 3s, recheck: 70ms, noStatus: 4m}\n";
    let file = FileConfig::parse(std::path::Path::new("kubeferry.yaml"), text).unwrap();
    let config = Config::resolve(file, Overrides::default()).unwrap();
    let seconds = std::time::Duration::from_secs;
    for (cluster, operator) in config
        .clusters
        .iter()
        .zip([Some(SparkOperator::Kubeflow), None])
    {
        let (_, settings) = server::executor_settings(&config, cluster);
        let (container, spark) = (&settings.container, &settings.spark);
        assert_eq!(spark.default_operator, operator);
        assert_eq!(spark.name_prefix, "kf");
        assert_eq!(container.name_prefix, "kf");
        assert_eq!(spark.mapping.no_status_timeout, seconds(240));
        let jobset = &settings.jobset;
        for watching in [&spark.watching, &container.watching, &jobset.watching] {
            let reflector = &watching.reflector;
            assert_eq!(reflector.watch_timeout, seconds(42));
            assert_eq!(reflector.tombstone_ttl, seconds(420));
            assert_eq!(reflector.absent_ttl, seconds(3));
            assert_eq!(reflector.restart.cap, seconds(9));
            assert_eq!(watching.sync_timeout, seconds(3));
            assert_eq!(
                watching.recheck_interval,
                std::time::Duration::from_millis(70)
            );
        }
    }
}
