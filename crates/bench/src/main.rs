//! kubeferry's benchmarks: each prints a table of figures measured against the simulated cluster.
//!
//! `cargo run --release -p kubeferry-bench -- all` runs every one; BENCHMARKS.md has the figures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kubeferry::core::record::record_name;
use kubeferry::core::spec::{self, JobSpec};
use kubeferry::kube::cluster::Kubeconfig;
use kubeferry::kube::logs::TailOptions;
use kubeferry::kube::{Cluster, ClusterSettings, Executor, ExecutorSettings};
use kubeferry::{ExecutionId, JobKind, JobState};
use kubeferry_sim::{CrdBundle, NodeConfig, SimCluster, SimConfig};

#[derive(Parser)]
#[command(about = "kubeferry's benchmarks against the simulated cluster")]
struct Args {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// API requests per job-minute while jobs run and are waited on.
    Tracking {
        /// Jobs running at once.
        #[arg(long, default_value_t = 1000)]
        jobs: usize,
        /// How long they are watched, in seconds.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// Time from a container's end to kubeferry reporting the terminal status.
    Latency {
        /// Jobs measured.
        #[arg(long, default_value_t = 1000)]
        jobs: usize,
        /// Jobs running at once.
        #[arg(long, default_value_t = 50)]
        concurrency: usize,
    },
    /// Resident memory of a process tracking many jobs.
    Memory {
        /// Jobs tracked.
        #[arg(long, default_value_t = 10_000)]
        jobs: usize,
    },
    /// Submission throughput through kubeferry against bare kube-rs create loops.
    Submit {
        /// Jobs per side.
        #[arg(long, default_value_t = 1000)]
        jobs: usize,
        /// Jobs in flight at once, on each side.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
    },
    /// API requests while one indexed job runs all its indexes to its end.
    Indexed {
        /// Indexes (`completions`).
        #[arg(long, default_value_t = 1000)]
        indexes: usize,
        /// Pods at once (`parallelism`).
        #[arg(long, default_value_t = 100)]
        parallelism: usize,
    },
    /// API requests while one JobSet of a leader and many workers runs to its end.
    Jobset {
        /// Workers (the `workers` replicated job's replicas).
        #[arg(long, default_value_t = 100)]
        workers: usize,
    },
    /// API requests per job over its whole life (submit, run, end, record, release), and the
    /// outcome records' sizes, for jobs that succeed, fail with a long log, or are cancelled.
    Lifecycle {
        /// Jobs (half succeed, a third fail after printing 200 lines, the rest are cancelled).
        #[arg(long, default_value_t = 600)]
        jobs: usize,
        /// Each job keeps this many last lines of its log with its outcome (`keepLog`); the
        /// kubelet's last words only when absent.
        #[arg(long)]
        keep_log_lines: Option<u32>,
        /// The most bytes of them kept (with `--keep-log-lines`).
        #[arg(long, default_value_t = 16 * 1024)]
        keep_log_bytes: u32,
    },
    /// Every benchmark with its default size.
    All,
    /// Internal: track every job of a namespace and print this process's resident memory.
    #[command(hide = true)]
    MemoryProbe {
        #[arg(long)]
        kubeconfig: std::path::PathBuf,
        #[arg(long)]
        ids: std::path::PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Args::parse().bench {
        Bench::Tracking { jobs, seconds } => tracking(jobs, Duration::from_secs(seconds)).await,
        Bench::Latency { jobs, concurrency } => latency(jobs, concurrency).await,
        Bench::Memory { jobs } => memory(jobs).await,
        Bench::Submit { jobs, concurrency } => submit(jobs, concurrency).await,
        Bench::Indexed {
            indexes,
            parallelism,
        } => indexed(indexes, parallelism).await,
        Bench::Jobset { workers } => jobset(workers).await,
        Bench::Lifecycle {
            jobs,
            keep_log_lines,
            keep_log_bytes,
        } => {
            let keep_log = keep_log_lines
                .map(|lines| format!("keepLog: {{lines: {lines}, bytes: {keep_log_bytes}}}"));
            lifecycle(jobs, keep_log.as_deref().unwrap_or_default()).await
        }
        Bench::All => {
            submit(1000, 8).await?;
            latency(1000, 50).await?;
            tracking(1000, Duration::from_secs(60)).await?;
            indexed(1000, 100).await?;
            jobset(100).await?;
            lifecycle(600, "").await?;
            memory(10_000).await
        }
        Bench::MemoryProbe { kubeconfig, ids } => memory_probe(&kubeconfig, &ids).await,
    }
}

/// A simulated cluster big enough for `pods` pods at once.
async fn sim(pods: usize) -> anyhow::Result<SimCluster> {
    sim_with(pods, Vec::new()).await
}

/// [`sim`] with these CRD bundles installed.
async fn sim_with(pods: usize, crd_bundles: Vec<CrdBundle>) -> anyhow::Result<SimCluster> {
    let nodes = pods.div_ceil(500).max(1);
    let config = SimConfig {
        nodes: (1..=nodes)
            .map(|i| NodeConfig {
                cpu: "1000".into(),
                memory: "4Ti".into(),
                pods: 500,
                ..NodeConfig::named(format!("sim-node-{i}"))
            })
            .collect(),
        crd_bundles,
        ..SimConfig::default()
    };
    Ok(SimCluster::start(config).await?)
}

async fn executor(sim: &SimCluster) -> anyhow::Result<Executor> {
    let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml("sim"))?;
    let cluster =
        Cluster::from_kubeconfig(kubeconfig, None, None, ClusterSettings::default()).await?;
    Ok(Executor::new(cluster, ExecutorSettings::default()))
}

fn job_spec(name: &str, command: &str, extra: &str) -> anyhow::Result<JobSpec> {
    let text = format!("name: {name}\nimage: busybox\ncommand: [sh, -c, {command:?}]\n{extra}");
    Ok(spec::load("bench.yaml", &text, &Default::default())?)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn print_table(title: &str, rows: &[(&str, String)]) {
    println!("\n{title}");
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, value) in rows {
        println!("  {key:<width$}   {value}");
    }
}

/// Requests kubeferry makes per job over its whole life, and the sizes of the outcome records it
/// keeps: `jobs` jobs, half of which succeed, a third fail after printing 200 lines (their
/// last words ride in the pod's status: no request more), the rest cancelled while they run.
async fn lifecycle(jobs: usize, keep_log: &str) -> anyhow::Result<()> {
    let sim = sim(jobs).await?;
    let executor = executor(&sim).await?;
    let succeed = job_spec("ok", "echo done", keep_log)?;
    let fail = job_spec(
        "fail",
        "i=0; while [ $i -lt 200 ]; do echo \"line $i of a long failing job\"; i=$((i+1)); done; exit 3",
        keep_log,
    )?;
    let cancel = job_spec("cancelled", "sleep 600", keep_log)?;
    let (failing, cancelled) = (jobs / 3, jobs - jobs / 2 - jobs / 3);
    sim.reset_counters();
    let started = Instant::now();
    let mut ids = submit_all(&executor, &succeed, jobs / 2, 16).await?;
    ids.extend(submit_all(&executor, &fail, failing, 16).await?);
    let to_cancel = submit_all(&executor, &cancel, cancelled, 16).await?;
    wait_all_started(&executor, &to_cancel).await?;
    for id in &to_cancel {
        executor.cancel(id).await?;
    }
    ids.extend(to_cancel);
    let outcomes: Vec<anyhow::Result<kubeferry::ExecutionInfo>> = futures::stream::iter(&ids)
        .map(|id| {
            let executor = executor.clone();
            async move { Ok(executor.wait(id, None, |_| {}).await?) }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut by_state = std::collections::BTreeMap::new();
    for outcome in outcomes {
        *by_state.entry(outcome?.state.to_string()).or_insert(0) += 1;
    }
    // Every record written and every object let go (or deleted): the life is over.
    let deadline = Instant::now() + Duration::from_secs(600);
    while sim.count("", "configmaps") < jobs
        || sim.count("batch", "jobs") > jobs - cancelled
        || sim.request_count("patch", "jobs.batch") < (jobs - cancelled) as u64
    {
        anyhow::ensure!(Instant::now() < deadline, "the records were not all kept");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    let counters = sim.counters();
    let requests: u64 = counters.values().sum();
    let watches: u64 = counters
        .iter()
        .filter(|(key, _)| key.verb == "watch")
        .map(|(_, n)| n)
        .sum();
    // The records as the cluster keeps them (read after counting).
    let api: kube::Api<ConfigMap> =
        kube::Api::namespaced(executor.cluster().client().clone(), "default");
    let mut sizes: Vec<usize> = api
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|cm| {
            cm.metadata
                .name
                .as_deref()
                .is_some_and(|name| name.starts_with("kubeferry-outcome-"))
        })
        .map(|cm| serde_json::to_vec(cm).map(|bytes| bytes.len()).unwrap_or(0))
        .collect();
    sizes.sort_unstable();
    let size = |p: f64| {
        sizes
            .get(((p / 100.0) * (sizes.len().max(1) - 1) as f64).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    let mean = sizes.iter().sum::<usize>() as f64 / sizes.len().max(1) as f64;
    let per_day = 100_000.0 * mean * 7.0 / 1e9;
    print_table(
        &format!(
            "Lifecycle: {jobs} jobs from submit to their records kept and objects let go ({:.0} s){}",
            elapsed.as_secs_f64(),
            if keep_log.is_empty() {
                String::new()
            } else {
                format!(", each with {keep_log}")
            }
        ),
        &[
            ("outcomes", format!("{by_state:?}")),
            ("API requests by kubeferry", requests.to_string()),
            (
                "requests per job",
                format!("{:.2}", requests as f64 / jobs as f64),
            ),
            (
                "of which watches (per namespace, not per job)",
                watches.to_string(),
            ),
            (
                "record size, bytes: min / median / p90 / p99 / max",
                format!(
                    "{} / {} / {} / {} / {}",
                    size(0.0),
                    size(50.0),
                    size(90.0),
                    size(99.0),
                    size(100.0)
                ),
            ),
            (
                "records of 100,000 jobs a day, kept 7 days",
                format!("{per_day:.2} GB in etcd (at the mean, {mean:.0} bytes)"),
            ),
        ],
    );
    print_counters(counters);
    sim.shutdown().await;
    Ok(())
}

/// Requests kubeferry makes per job-minute while `jobs` jobs run and are waited on.
async fn tracking(jobs: usize, window: Duration) -> anyhow::Result<()> {
    let sim = sim(jobs).await?;
    let executor = executor(&sim).await?;
    let seconds = window.as_secs() + 120;
    let spec = job_spec("track", &format!("sleep {seconds}"), "")?;
    let ids = submit_all(&executor, &spec, jobs, 16).await?;
    // Wait until every job runs, then count only the steady state.
    wait_all_started(&executor, &ids).await?;
    sim.reset_counters();
    let started = Instant::now();
    let waiters: FuturesUnordered<_> = ids
        .iter()
        .map(|id| {
            let executor = executor.clone();
            let id = id.clone();
            async move { executor.wait(&id, Some(window), |_| {}).await }
        })
        .collect();
    let timed_out = waiters
        .filter(|r| futures::future::ready(r.is_err()))
        .count()
        .await;
    let elapsed = started.elapsed();
    // Only kubeferry talks to the simulated cluster over HTTP; its controllers work inside.
    let requests: u64 = sim.counters().values().sum();
    let job_minutes = jobs as f64 * elapsed.as_secs_f64() / 60.0;
    print_table(
        &format!(
            "Tracking cost: {jobs} running jobs, each waited on, for {:.0} s",
            elapsed.as_secs_f64()
        ),
        &[
            (
                "waits still running at the end",
                format!("{timed_out} of {jobs}"),
            ),
            ("API requests by kubeferry", requests.to_string()),
            (
                "requests per job-minute",
                format!("{:.5}", requests as f64 / job_minutes),
            ),
            ("goal", "< 0.01".to_string()),
            (
                "Metaflow (2 GETs per check, every 0.25-5 s)",
                "~120-480".to_string(),
            ),
        ],
    );
    for (key, count) in sim.counters() {
        println!(
            "    {:<8} {:<20} {:<40} {count}",
            key.verb, key.resource, key.user
        );
    }
    sim.shutdown().await;
    Ok(())
}

/// Requests kubeferry makes while one indexed job of `indexes` indexes runs to its end, waited
/// on and asked for its status all along: the namespace's watches alone, nothing per pod or per
/// index.
async fn indexed(indexes: usize, parallelism: usize) -> anyhow::Result<()> {
    let sim = sim(parallelism).await?;
    let executor = executor(&sim).await?;
    let spec = job_spec(
        "array",
        "sleep 0.2; echo shard $JOB_COMPLETION_INDEX",
        &format!("indexed: true\ncompletions: {indexes}\nparallelism: {parallelism}\n"),
    )?;
    let Counted {
        outcome,
        statuses,
        elapsed,
        counters,
        requests,
    } = run_counted(&sim, &executor, &spec, "bench-indexed").await?;
    let summary = outcome
        .indexes
        .as_ref()
        .map(|i| format!("{} of {} succeeded", i.succeeded, i.completions))
        .unwrap_or_default();
    print_table(
        &format!(
            "Indexed job: {indexes} indexes, {parallelism} at once, from submit to its end ({:.0} s)",
            elapsed.as_secs_f64()
        ),
        &[
            ("outcome", format!("{} ({summary})", outcome.state)),
            ("statuses seen by the wait", statuses.to_string()),
            ("API requests by kubeferry", requests.to_string()),
            (
                "requests per index",
                format!("{:.4}", requests as f64 / indexes as f64),
            ),
            (
                "goal",
                "the namespace's watches and the create, nothing per pod or index".to_string(),
            ),
        ],
    );
    print_counters(counters);
    anyhow::ensure!(
        outcome.state == JobState::Succeeded,
        "the indexed job ended {outcome:?}"
    );
    sim.shutdown().await;
    Ok(())
}

/// Requests kubeferry makes while one JobSet of a leader and `workers` workers runs to its
/// end, waited on and asked for its status all along: the namespace's watches alone, nothing
/// per Job or pod.
async fn jobset(workers: usize) -> anyhow::Result<()> {
    let sim = sim_with(workers + 1, vec![CrdBundle::JobSet]).await?;
    let executor = executor(&sim).await?;
    let text = format!(
        "kind: JobSet\nname: gang\nreplicatedJobs:\n  - {{name: leader, image: busybox, command: [sh, -c, 'sleep 0.2; echo leading']}}\n  - {{name: workers, replicas: {workers}, image: busybox, command: [sh, -c, 'sleep 0.2; echo working']}}\n"
    );
    let spec = spec::load("bench.yaml", &text, &Default::default())?;
    let Counted {
        outcome,
        statuses,
        elapsed,
        counters,
        requests,
    } = run_counted(&sim, &executor, &spec, "bench-jobset").await?;
    let summary = outcome
        .replicas
        .as_ref()
        .map(|r| r.counts())
        .unwrap_or_default();
    print_table(
        &format!(
            "JobSet: a leader and {workers} workers, from submit to its end ({:.0} s)",
            elapsed.as_secs_f64()
        ),
        &[
            ("outcome", format!("{} ({summary})", outcome.state)),
            ("statuses seen by the wait", statuses.to_string()),
            ("API requests by kubeferry", requests.to_string()),
            (
                "requests per worker",
                format!("{:.4}", requests as f64 / workers as f64),
            ),
            (
                "goal",
                "the namespace's watches and the create, nothing per Job or pod".to_string(),
            ),
        ],
    );
    print_counters(counters);
    anyhow::ensure!(
        outcome.state == JobState::Succeeded,
        "the JobSet ended {outcome:?}"
    );
    sim.shutdown().await;
    Ok(())
}

/// What one job cost, run from submission to its end and asked for its status along the way.
struct Counted {
    outcome: kubeferry::ExecutionInfo,
    statuses: u64,
    elapsed: Duration,
    counters: std::collections::BTreeMap<kubeferry_sim::CounterKey, u64>,
    requests: u64,
}

/// Submits `spec` as `job_id`, waits for its end, then asks its status 100 times (answered
/// from the cache), counting every API request from the submission on.
async fn run_counted(
    sim: &SimCluster,
    executor: &Executor,
    spec: &JobSpec,
    job_id: &str,
) -> anyhow::Result<Counted> {
    sim.reset_counters();
    let started = Instant::now();
    let id = executor.submit(spec, job_id, "default").await?;
    let mut statuses = 0u64;
    let outcome = executor
        .wait(&id, Some(Duration::from_secs(1800)), |_| statuses += 1)
        .await?;
    let elapsed = started.elapsed();
    for _ in 0..100 {
        executor.status(&id).await?;
    }
    let counters = sim.counters();
    let requests = counters.values().sum();
    Ok(Counted {
        outcome,
        statuses,
        elapsed,
        counters,
        requests,
    })
}

/// The requests counted, by verb, resource and client.
fn print_counters(counters: std::collections::BTreeMap<kubeferry_sim::CounterKey, u64>) {
    for (key, count) in counters {
        println!(
            "    {:<8} {:<20} {:<40} {count}",
            key.verb, key.resource, key.user
        );
    }
}

async fn wait_all_started(executor: &Executor, ids: &[ExecutionId]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let mut pending = 0;
        for id in ids {
            if executor.status(id).await?.state != JobState::Started {
                pending += 1;
            }
        }
        if pending == 0 {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{pending} jobs never started");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn submit_all(
    executor: &Executor,
    spec: &JobSpec,
    jobs: usize,
    concurrency: usize,
) -> anyhow::Result<Vec<ExecutionId>> {
    let run = jiff::Timestamp::now().as_second();
    let results: Vec<anyhow::Result<ExecutionId>> = futures::stream::iter(0..jobs)
        .map(|i| {
            let executor = executor.clone();
            let spec = spec.clone();
            async move {
                Ok(executor
                    .submit(&spec, &format!("{}-{run}-{i}", spec.name()), "default")
                    .await?)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Time from a container's end (the process prints its own clock as its last line) to
/// kubeferry reporting the terminal status.
async fn latency(jobs: usize, concurrency: usize) -> anyhow::Result<()> {
    let sim = sim(concurrency).await?;
    let executor = executor(&sim).await?;
    let spec = job_spec("latency", "sleep 0.2; date +%s%N", "")?;
    let run = jiff::Timestamp::now().as_second();
    let samples: Vec<anyhow::Result<Duration>> = futures::stream::iter(0..jobs)
        .map(|i| {
            let executor = executor.clone();
            let spec = spec.clone();
            async move {
                let id = executor
                    .submit(&spec, &format!("latency-{run}-{i}"), "default")
                    .await?;
                let info = executor
                    .wait(&id, Some(Duration::from_secs(120)), |_| {})
                    .await?;
                let reported = jiff::Timestamp::now();
                anyhow::ensure!(info.state == JobState::Succeeded, "{id}: {info:?}");
                let log = executor.tail(&id, &TailOptions::default()).await?.log;
                let ended: i128 = log
                    .trim()
                    .parse()
                    .with_context(|| format!("{id}: log {log:?}"))?;
                let ended = jiff::Timestamp::from_nanosecond(ended)?;
                Ok(Duration::try_from(reported.duration_since(ended)).unwrap_or_default())
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut latencies = samples.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    latencies.sort();
    print_table(
        &format!(
            "Detection latency: container end to terminal status, {jobs} jobs, {concurrency} at once"
        ),
        &[
            ("p50", ms(percentile(&latencies, 50.0))),
            ("p90", ms(percentile(&latencies, 90.0))),
            ("p99", ms(percentile(&latencies, 99.0))),
            ("max", ms(*latencies.last().unwrap_or(&Duration::ZERO))),
            ("goal", "p99 < 100 ms".to_string()),
        ],
    );
    sim.shutdown().await;
    Ok(())
}

/// Resident memory of a separate process that tracks `jobs` finished jobs (a Job and a pod
/// each).
async fn memory(jobs: usize) -> anyhow::Result<()> {
    let sim = sim(500).await?;
    let executor = executor(&sim).await?;
    let spec = job_spec("mem", "true", "labels: {team: data, pipeline: nightly}\n")?;
    let ids = submit_all(&executor, &spec, jobs, 16).await?;
    // Let them all finish (each runs `true`).
    let deadline = Instant::now() + Duration::from_secs(1200);
    loop {
        let mut done = 0;
        for id in &ids {
            if executor.status(id).await?.is_terminal() {
                done += 1;
            }
        }
        if done == ids.len() {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "only {done} of {jobs} finished");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    drop(executor);
    let dir = std::env::temp_dir().join(format!("kubeferry-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    let ids_file = dir.join("ids");
    sim.write_kubeconfig_as(&kubeconfig, "sim", sim.admin_token())?;
    std::fs::write(
        &ids_file,
        ids.iter().map(|id| format!("{id}\n")).collect::<String>(),
    )?;
    let output = tokio::process::Command::new(std::env::current_exe()?)
        .args(["memory-probe", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--ids")
        .arg(&ids_file)
        .output()
        .await?;
    anyhow::ensure!(
        output.status.success(),
        "the probe failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    print!("{}", String::from_utf8_lossy(&output.stdout));
    std::fs::remove_dir_all(&dir).ok();
    sim.shutdown().await;
    Ok(())
}

async fn memory_probe(kubeconfig: &std::path::Path, ids: &std::path::Path) -> anyhow::Result<()> {
    let before = rss_kib()?;
    let ids: Vec<ExecutionId> = std::fs::read_to_string(ids)?
        .lines()
        .map(|l| l.parse())
        .collect::<Result<_, _>>()?;
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let cluster =
        Cluster::from_kubeconfig(kubeconfig, None, None, ClusterSettings::default()).await?;
    let executor = Executor::new(cluster, ExecutorSettings::default());
    let mut terminal = 0;
    for id in &ids {
        if executor.status(id).await?.is_terminal() {
            terminal += 1;
        }
    }
    let after = rss_kib()?;
    print_table(
        &format!(
            "Memory: one process tracking {} jobs (a Job and a pod each)",
            ids.len()
        ),
        &[
            (
                "jobs answered from the cache",
                format!("{terminal} terminal of {}", ids.len()),
            ),
            (
                "resident memory before tracking",
                format!("{:.1} MB", before as f64 / 1024.0),
            ),
            (
                "resident memory while tracking",
                format!("{:.1} MB", after as f64 / 1024.0),
            ),
            ("goal", "< 100 MB".to_string()),
        ],
    );
    Ok(())
}

fn rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS in /proc/self/status")
}

/// Submission throughput through kubeferry against two bare kube-rs loops, interleaved in
/// rounds on the same server so that all sides see the same machine: one that only creates,
/// and one that first reads the job id's outcome record as kubeferry does (so that a job id
/// never runs twice once its first run ended and its Job is gone: docs/INVARIANTS.md, I2).
async fn submit(jobs: usize, concurrency: usize) -> anyhow::Result<()> {
    let sim = sim(1).await?;
    let executor = executor(&sim).await?;
    // Suspended (Kueue) Jobs: no pods run, so only the API path is measured, on every side.
    let spec = job_spec("submit", "true", "queue: bench\n")?;
    let JobSpec::Container(container) = &spec else {
        anyhow::bail!("the benchmark's job is a container job");
    };
    let client = executor.cluster().client().clone();
    let jobs_api: Arc<kube::Api<Job>> = Arc::new(kube::Api::namespaced(client.clone(), "default"));
    let records_api: Arc<kube::Api<ConfigMap>> = Arc::new(kube::Api::namespaced(client, "default"));
    let rounds = 5;
    let per_round = jobs / rounds;
    let run = jiff::Timestamp::now().as_second();
    let mut took = [Duration::ZERO; 3];
    for round in 0..rounds {
        // Rotate which side goes first, so that none always inherits another's aftermath
        // (watch events, the server's garbage).
        for side in (0..3).map(|k| (round + k) % 3) {
            let started = Instant::now();
            let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..per_round)
                .map(|i| {
                    let (executor, spec) = (executor.clone(), spec.clone());
                    let (jobs_api, records_api) = (jobs_api.clone(), records_api.clone());
                    let job_id = format!("side{side}-{run}-{round}-{i}");
                    let name = kubeferry::core::marks::object_name("", &job_id);
                    let manifest =
                        kubeferry::kube::job_manifest(container, &job_id, &name, "default");
                    async move {
                        match side {
                            0 => {
                                executor.submit(&spec, &job_id, "default").await?;
                            }
                            1 => {
                                jobs_api.create(&Default::default(), &manifest).await?;
                            }
                            _ => {
                                let record = record_name(JobKind::Job, &name);
                                if records_api.get_opt(&record).await?.is_none() {
                                    jobs_api.create(&Default::default(), &manifest).await?;
                                }
                            }
                        }
                        Ok(())
                    }
                })
                .buffer_unordered(concurrency)
                .collect()
                .await;
            took[side] += started.elapsed();
            for result in results {
                result?;
            }
        }
    }
    let total = per_round * rounds;
    let record_reads: u64 = sim
        .counters()
        .iter()
        .filter(|(key, _)| key.verb == "list" && key.resource == "configmaps")
        .map(|(_, count)| count)
        .sum();
    let [ours, bare, bare_checked] = took.map(|took| total as f64 / took.as_secs_f64());
    print_table(
        &format!(
            "Submission throughput: {total} jobs per side, {concurrency} in flight, {rounds} interleaved rounds"
        ),
        &[
            ("kubeferry Executor::submit", format!("{ours:.0} jobs/s")),
            ("bare kube-rs Api::create", format!("{bare:.0} jobs/s")),
            (
                "bare kube-rs: GET the job id's record, then create",
                format!("{bare_checked:.0} jobs/s"),
            ),
            ("ratio to the bare create", format!("{:.2}", ours / bare)),
            ("goal", "> 0.8".to_string()),
            (
                "ratio to the bare create that reads the record",
                format!("{:.2}", ours / bare_checked),
            ),
            (
                "kubeferry's reads of job ids' records (LIST)",
                format!("{record_reads} for {total} submissions"),
            ),
            (
                "Jobs in the cluster",
                sim.count("batch", "jobs").to_string(),
            ),
        ],
    );
    sim.shutdown().await;
    Ok(())
}
