//! Command-line arguments, one struct per concern, in kubectl's habits.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use crate::completion::Shell;
pub use crate::connect::ClusterArgs;

/// Run batch jobs on Kubernetes and know exactly how they ended.
#[derive(Debug, Parser)]
#[command(
    name = "kubeferry",
    version,
    propagate_version = true,
    after_help = concat!(
        "Examples:\n",
        "  kubeferry run -f job.yaml                 # submit, stream the log, exit with the job's outcome\n",
        "  kubeferry submit -f job.yaml --job-id etl-42\n",
        "  kubeferry status --job-id etl-42          # by your own job id\n",
        "  kubeferry list -o wide\n",
        "  kubeferry logs sim/job/default/hello-1a2b3c4d --tail 20\n",
        "\n",
        "Exit codes: 0 success; 1 a job that failed (or its own exit code, 1-255), or an error;\n",
        "2 a usage error; 124 a --timeout that ran out; 130 left running on Ctrl-C.\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    )
)]
pub struct Cli {
    /// Which cluster to talk to.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// How to print results.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Log verbosity of kubeferry itself (`-v` info, `-vv` debug); RUST_LOG overrides it.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Output format (`-o`), as kubectl's.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Format {
    /// A human-readable table.
    #[default]
    Table,
    /// The table with more columns: the pod, its node, the attempts and the duration.
    Wide,
    /// One execution id per line.
    Name,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// A kubectl JSONPath template applied to the JSON output.
    JsonPath(crate::jsonpath::Template),
}

/// The `-o` values, for help and completion.
pub const FORMATS: [&str; 6] = ["table", "wide", "name", "json", "yaml", "jsonpath="];

fn parse_format(text: &str) -> Result<Format, String> {
    if let Some(template) = text
        .strip_prefix("jsonpath=")
        .or_else(|| text.strip_prefix("jsonpath-as-json="))
    {
        return crate::jsonpath::Template::parse(template).map(Format::JsonPath);
    }
    match text {
        "table" => Ok(Format::Table),
        "wide" => Ok(Format::Wide),
        "name" => Ok(Format::Name),
        "json" => Ok(Format::Json),
        "yaml" => Ok(Format::Yaml),
        "jsonpath" => Err("jsonpath needs a template: -o jsonpath='{.status.state}'".to_string()),
        other => Err(format!(
            "{other:?} is not an output format: use one of table, wide, name, json, yaml, jsonpath=TEMPLATE"
        )),
    }
}

/// How results are printed.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Output format: table, wide, name, json, yaml or jsonpath=TEMPLATE (kubectl's
    /// templates, e.g. `jsonpath='{.items[*].job.state}'`).
    #[arg(
        short = 'o',
        long = "output",
        global = true,
        value_name = "FORMAT",
        value_parser = parse_format,
        default_value = "table",
        add = clap_complete::ArgValueCandidates::new(|| {
            FORMATS.iter().map(|f| clap_complete::CompletionCandidate::new(*f)).collect::<Vec<_>>()
        })
    )]
    pub format: Format,
    /// No live status line on a terminal (`run`, `wait`); NO_COLOR turns its colours off.
    #[arg(long, global = true)]
    pub no_progress: bool,
}

/// Where a job spec comes from, and its template parameters.
#[derive(Debug, Clone, Args)]
pub struct SpecArgs {
    /// The job file (YAML or JSON); `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,
    /// A template parameter, `name=value` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_param)]
    pub params: Vec<(String, String)>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Submit a job, stream its log, wait for its end and exit with its outcome.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry run -f examples/hello.yaml\n",
        "  kubeferry run -f job.yaml --job-id etl-42 --timeout 10m\n",
        "  kubeferry run -f job.yaml --set image=busybox:1.36 --on-interrupt leave\n",
        "\n",
        "A job id that already ran is not run again: run says so and shows that run's outcome\n",
        "and log, and exits with its outcome. Exit codes: 0 succeeded; the job's own exit code\n",
        "(1-255) or 1 when it failed or was cancelled; 2 a usage error; 124 --timeout ran out\n",
        "(the job keeps running); 130 left running on Ctrl-C.\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Run(RunArgs),
    /// Submit a job and print its execution id.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry submit -f job.yaml\n",
        "  kubeferry submit -f job.yaml --job-id etl-42 -o json\n",
        "  kubeferry submit -f job.yaml --dry-run=server -o yaml   # admitted, nothing created\n",
        "\n",
        "A job id that already names a job creates nothing: submit says so on stderr and prints\n",
        "that job's execution id (`existing: true` with -o json).\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Submit(SubmitArgs),
    /// Print the status of jobs.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry status sim/job/default/hello-1a2b3c4d\n",
        "  kubeferry status --job-id etl-42 -n team-a -o json\n",
        "  kubeferry status ID1 ID2 -w --until-done\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Status(StatusArgs),
    /// Tell a job's story: what happened to it and why, where its time went, what to do.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry describe sim/job/default/hello-1a2b3c4d\n",
        "  kubeferry describe --job-id etl-42 -o json\n",
        "\n",
        "The story comes from the job's object, its pods and their events while they last, and\n",
        "from its outcome record once they are gone.\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Describe(OneJobArgs),
    /// Wait for a job to end; exit 0 only if it succeeded.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry wait sim/job/default/hello-1a2b3c4d\n",
        "  kubeferry wait --job-id etl-42 --timeout 10m\n",
        "\n",
        "Exit codes: 0 succeeded; the job's own exit code (1-255) or 1 when it failed or was\n",
        "cancelled; 124 when --timeout ran out first (the job keeps running); 2 a usage error.\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Wait(WaitArgs),
    /// Cancel a job (returns at once; a finished job keeps its outcome).
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry cancel sim/job/default/hello-1a2b3c4d\n",
        "  kubeferry cancel --job-id etl-42 --wait\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Cancel(CancelArgs),
    /// Print a job's log.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry logs sim/job/default/hello-1a2b3c4d\n",
        "  kubeferry logs --job-id etl-42 -f\n",
        "  kubeferry logs ID --tail 100          # the last 100 lines\n",
        "  kubeferry logs ID --tail-bytes 4096   # the last 4096 bytes\n",
        "  kubeferry logs ID --limit-bytes 4096  # the first 4096 bytes, as kubectl's\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Logs(LogsArgs),
    /// List the jobs kubeferry manages.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry list\n",
        "  kubeferry list -A --sort-by state -o wide\n",
        "  kubeferry list -l team=data --state FAILED -o name\n",
        "  kubeferry list -o jsonpath='{.items[*].job.state}'\n",
        "  kubeferry list -n team-a -w --until-done\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    List(ListArgs),
    /// Find managed jobs whose job ids the caller does not know, and delete them if asked.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry sweep --known known-job-ids.txt\n",
        "  my-scheduler job-ids | kubeferry sweep --known - --delete\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Sweep(SweepArgs),
    /// Print the namespaced Role kubeferry needs.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry rbac | kubectl apply -n team-a -f -\n",
        "  kubeferry rbac --service-account kubeferry -o json\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Rbac(RbacArgs),
    /// Print the shell code that completes kubeferry's commands, flags and execution ids.
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry completion zsh > \"${fpath[1]}/_kubeferry\"\n",
        "  source <(kubeferry completion bash)\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Completion(CompletionArgs),
    /// Work with job templates.
    #[command(
        subcommand,
        after_help = concat!(
            "Examples:\n",
            "  kubeferry template render -f job.yaml --set image=busybox:1.36\n",
            "\n",
            "Guide: docs/README.md in the kubeferry repository."
        )
    )]
    Template(TemplateCommand),
    /// Run the HTTP service (stateless: run as many replicas as you like).
    #[command(after_help = concat!(
        "Examples:\n",
        "  kubeferry serve --listen 127.0.0.1:8080\n",
        "  kubeferry serve --config kubeferry.yaml\n",
        "\n",
        "Guide: docs/README.md in the kubeferry repository."
    ))]
    Serve(kubeferry_server::ServeArgs),
    /// Run a simulated Kubernetes cluster.
    #[command(
        subcommand,
        after_help = concat!(
            "Examples:\n",
            "  kubeferry sim serve --kubeconfig sim.kubeconfig\n",
            "\n",
            "Guide: docs/README.md in the kubeferry repository."
        )
    )]
    Sim(SimCommand),
}

/// `kubeferry run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The job.
    #[command(flatten)]
    pub spec: SpecArgs,
    /// The caller's job id (default: generated from the job's name). Submitting the same id
    /// twice runs the job once.
    #[arg(long)]
    pub job_id: Option<String>,
    /// What Ctrl-C does: ask, cancel the job, or leave it running.
    #[arg(long, value_enum, default_value_t = OnInterrupt::Ask)]
    pub on_interrupt: OnInterrupt,
    /// Do not stream the job's log.
    #[arg(long)]
    pub no_logs: bool,
    /// Give up waiting after this long (e.g. 90s, 10m) and exit 124; the job keeps running.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Create nothing: print the objects (`-o yaml|json`) as kubeferry builds them (client) or
    /// as the API server would store them, judged by its admission and quotas (server).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = DryRunMode::None)]
    pub dry_run: DryRunMode,
}

impl DryRunMode {
    /// The dry run asked for, if any.
    pub fn mode(self) -> Option<kubeferry::kube::DryRun> {
        match self {
            DryRunMode::None => None,
            DryRunMode::Client => Some(kubeferry::kube::DryRun::Client),
            DryRunMode::Server => Some(kubeferry::kube::DryRun::Server),
        }
    }
}

/// `--dry-run`, as kubectl's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRunMode {
    /// Submit for real.
    None,
    /// The objects as kubeferry builds them; the API server is not asked.
    Client,
    /// The objects sent with `dryRun=All`: the API server validates, defaults and admits them,
    /// and stores nothing.
    Server,
}

/// What Ctrl-C during `run` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnInterrupt {
    /// Ask on the terminal: Enter cancels, `n` leaves it running. Without a terminal on
    /// standard input (a script, CI), cancel and say so.
    Ask,
    /// Cancel the job.
    Cancel,
    /// Leave the job running and print its id.
    Leave,
}

/// `kubeferry submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The job.
    #[command(flatten)]
    pub spec: SpecArgs,
    /// The caller's job id (default: generated from the job's name).
    #[arg(long)]
    pub job_id: Option<String>,
    /// Create nothing: print the objects (`-o yaml|json`) as kubeferry builds them (client) or
    /// as the API server would store them, judged by its admission and quotas (server).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = DryRunMode::None)]
    pub dry_run: DryRunMode,
}

/// Naming a job by the caller's job id instead of its execution id.
#[derive(Debug, Clone, Args)]
pub struct JobIdArgs {
    /// The job submitted under this job id in the namespace (-n, else the context's), instead
    /// of an execution id. Every kind (job, sparkapp, jobset) is looked up; a job id that names
    /// jobs of several kinds needs --kind.
    #[arg(long, value_name = "JOB_ID")]
    pub job_id: Option<String>,
    /// With --job-id: only a job of this kind (job, sparkapp or jobset).
    #[arg(long, value_name = "KIND", requires = "job_id", value_parser = parse_kind)]
    pub kind: Option<kubeferry::JobKind>,
}

fn parse_kind(text: &str) -> Result<kubeferry::JobKind, String> {
    text.parse::<kubeferry::JobKind>().map_err(|_| {
        format!(
            "{text:?} is not a kind: use one of {}",
            kubeferry::JobKind::names()
        )
    })
}

/// `kubeferry status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Execution ids (`<cluster>/<kind>/<namespace>/<name>`).
    #[arg(
        required_unless_present = "job_id",
        conflicts_with = "job_id",
        value_name = "ID",
        add = id_completer()
    )]
    pub ids: Vec<String>,
    /// A job by its job id.
    #[command(flatten)]
    pub by_job_id: JobIdArgs,
    /// After the statuses, print a new row each time one changes, until interrupted.
    #[command(flatten)]
    pub watch: WatchArgs,
}

/// `-w` of `status` and `list`.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// After the rows, print a new row each time a job's status changes (as `kubectl get -w`),
    /// until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// With `-w`: stop once every watched job has ended (exit 0 only if all succeeded).
    #[arg(long, requires = "watch")]
    pub until_done: bool,
}

/// Completes execution ids from `kubeferry list -A` on the current context.
fn id_completer() -> clap_complete::ArgValueCompleter {
    clap_complete::ArgValueCompleter::new(crate::completion::complete_ids)
}

/// One job, by its execution id or by its job id (`wait`, `describe`, `logs`).
#[derive(Debug, Args)]
pub struct OneJobArgs {
    /// The execution id.
    #[arg(
        required_unless_present = "job_id",
        conflicts_with = "job_id",
        value_name = "ID",
        add = id_completer()
    )]
    pub id: Option<String>,
    /// A job by its job id.
    #[command(flatten)]
    pub by_job_id: JobIdArgs,
}

/// `kubeferry wait`.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The job.
    #[command(flatten)]
    pub job: OneJobArgs,
    /// Give up after this long (e.g. 90s, 10m) and exit 124; the job keeps running.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
}

/// `kubeferry cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Execution ids.
    #[arg(
        required_unless_present = "job_id",
        conflicts_with = "job_id",
        value_name = "ID",
        add = id_completer()
    )]
    pub ids: Vec<String>,
    /// A job by its job id.
    #[command(flatten)]
    pub by_job_id: JobIdArgs,
    /// Wait until the job is CANCELLED (or ended otherwise) before returning.
    #[arg(long)]
    pub wait: bool,
}

/// `kubeferry logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The job.
    #[command(flatten)]
    pub job: OneJobArgs,
    /// Stream the log until the job's container ends.
    #[arg(
        short = 'f',
        long,
        conflicts_with_all = ["previous", "limit_bytes", "tail_bytes"]
    )]
    pub follow: bool,
    /// Only the last N lines.
    #[arg(long, value_name = "N")]
    pub tail: Option<u64>,
    /// Only the first N bytes, as kubectl's --limit-bytes (of the last --tail lines, when
    /// given; never splitting a character).
    #[arg(long, value_name = "N", conflicts_with = "tail_bytes")]
    pub limit_bytes: Option<u64>,
    /// Only the last N bytes (never splitting a character).
    #[arg(long, value_name = "N")]
    pub tail_bytes: Option<u64>,
    /// The previous attempt's log.
    #[arg(short = 'p', long)]
    pub previous: bool,
    /// For an indexed job: the log of this index's pods (its newest attempt, or with
    /// --previous the one before). For a JobSet: the Job of this index of the replicated job
    /// (default 0).
    #[arg(long, value_name = "N")]
    pub index: Option<u32>,
    /// For a JobSet: the log of this replicated job's pods (default: the first replicated job).
    #[arg(long, value_name = "NAME")]
    pub replica: Option<String>,
}

/// `kubeferry list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only jobs whose labels match this selector (e.g. `team=data,tier!=dev`).
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Only jobs in this state.
    #[arg(long, value_name = "STATE")]
    pub state: Option<kubeferry::JobState>,
    /// Jobs of every namespace (kubeferry needs to be allowed to list Jobs, pods and
    /// SparkApplications cluster-wide). Not with -w, which follows one namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// The order of the rows (default: oldest first).
    #[arg(long, value_enum, value_name = "KEY")]
    pub sort_by: Option<SortKey>,
    /// After the rows, print a new row each time a job's status changes, until interrupted.
    #[command(flatten)]
    pub watch: WatchArgs,
}

/// What `list --sort-by` orders rows by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortKey {
    /// Creation time, oldest first.
    Created,
    /// State, in lifecycle order (QUEUED, STARTED, then the outcomes), then creation time.
    State,
    /// Execution id.
    Name,
}

/// `kubeferry completion`.
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `kubeferry sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// A file with the job ids the caller knows, one per line (`-` for standard input).
    #[arg(long, value_name = "FILE", required_unless_present = "release")]
    pub known: Option<PathBuf>,
    /// Delete the orphans found (default: only list them).
    #[arg(long, requires = "known")]
    pub delete: bool,
    /// Let go of every object in the namespace that kubeferry's finalizer holds until its
    /// outcome is recorded, whatever its job id: the step before uninstalling kubeferry.
    #[arg(long, conflicts_with_all = ["known", "delete"])]
    pub release: bool,
}

/// `kubeferry rbac`.
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// The Role's name.
    #[arg(long, default_value = "kubeferry")]
    pub name: String,
    /// Also print a ServiceAccount of this name and a RoleBinding to it.
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// Only what these kinds of job need (job, sparkapp, jobset, pod; repeat the flag for
    /// several). Every kind when not given.
    #[arg(long = "kind", value_name = "KIND")]
    pub kinds: Vec<kubeferry::JobKind>,
}

/// `kubeferry template ...`.
#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// Print a job file with its parameters filled in.
    Render(SpecArgs),
}

/// `kubeferry sim ...`.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Run the simulated cluster until interrupted, writing a kubeconfig for it.
    Serve(kubeferry_sim::SimArgs),
}

fn parse_param(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))?;
    if name.is_empty() {
        return Err(format!("{text:?} has an empty parameter name"));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Parses a duration in kubeferry's one grammar (see [`kubeferry::core::duration`]).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    kubeferry::core::duration::parse(text).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        for bad in ["", "10", "m", "1x", "-1s", "1.5s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn params() {
        assert_eq!(
            parse_param("a=b=c").unwrap(),
            ("a".to_string(), "b=c".to_string())
        );
        assert!(parse_param("novalue").is_err());
        assert!(parse_param("=x").is_err());
    }

    #[test]
    fn the_cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
