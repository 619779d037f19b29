//! `kubeferry-chaos`: a seeded, reproducible chaos run against kubeferry's service.
//!
//! For each seed it starts the simulated cluster (crates/sim) in process with RBAC enforced,
//! several replicas of the service (crates/server) on 127.0.0.1 under exactly the Role
//! `kubeferry rbac` prints, and submits a mix of container jobs through the replicas' HTTP API
//! (success, exit codes, OOM, deadline, unpullable image; cancels before the start, while
//! running and at the moment of the end; duplicate and concurrent submissions and cancels;
//! resubmission after cancel and after the end; pods, Jobs and outcome records deleted by
//! someone else, Jobs and records while no replica runs) and Spark applications under the
//! apache and the Kubeflow operator, while faults are injected at random:
//! 5xx and 429 with Retry-After, lost responses on create, patch and delete, dropped
//! connections, latency, watch cuts, stalls and 410 expiry, unreachable periods and restarts of
//! the API server, evictions, preemptions, node drain and loss, and replica kills, one of
//! them of every replica at once (an in-process replica runs on a runtime of its own, and a
//! kill shuts that runtime down with no graceful step, as SIGKILL stops a process). Then the
//! faults stop and every job is followed to its end on every replica.
//!
//! Every answer of every replica is recorded and checked (docs/INVARIANTS.md): a terminal
//! answer never changes (I1) and is the same on every replica (I7); it is what the simulated
//! kubelet really did, read from the cluster's store (exit code, OOM, deadline, disruption,
//! image, cancel); one job id never runs twice (Jobs and pods counted per job id, I2); every
//! job is found by every replica (I3); every job is terminal within a bound after the faults
//! stop (I4) and every replica ready within a bound (I7).
//!
//! `--seeds K` runs seeds 1 to K, `--seeds A..B` seeds A to B (both included), `--seed N`
//! one seed. It prints one line per seed, `seed=N jobs=N faults=N kills=N violations=N
//! beyond_the_api=N`, then the evidence of each violation, and exits 1 when any was found
//! (or a seed could not run). Beyond the API, counted and shown apart, never a failure: an
//! OOM kill answered as its exit code 137 by every replica, its pod gone before any read it
//! (only the pod carried `OOMKilled`; the Job's verdict names the code alone); and an OOM
//! kill during a disruption's stop answered as the OOM kill by every replica, when by the
//! time the outcome was recorded the kill, the disruption and the deletion shared a second
//! and the kubelet's final delete had cut the grace period to 0 (the picture of a pod killed
//! first and evicted at once: docs/statuses.md, "Disruptions after the container's own end"). The schedule
//! (jobs, faults, kills and their times) comes from the seed alone, so a failing seed reruns
//! the same schedule with `--seed N`; the timing of the cluster and the replicas is real, so
//! a narrow race may need a few reruns.
//!
//! `--without` leaves scenario kinds out; the default run includes every kind:
//! - `pod-loss`, `drains`, `preemptions`, `node-loss`: a job's pods deleted, by an
//!   administrator after the end, by a drain (finished pods too), by a preemption or by the
//!   loss of their node. The durable outcome record (kubeferry_core::record) keeps an outcome
//!   once some replica recorded it from the pods, and the Job's own verdict names a disruption
//!   or an exit code of a job without retries (the pod failure policy rules kubeferry adds);
//!   when no replica saw the pods before they went, what only the pod showed is lost: an OOM
//!   kill reads as its exit code 137 (counted apart, as beyond the API).
//! - `resubmit` (a cancelled job id submitted again) and `cancelled-gone` (a cancelled job
//!   whose Job is deleted, read by a replica started afterwards): a cancel keeps its outcome
//!   record before it deletes the Job (a settler finishes a cancel that stopped between the
//!   two), so neither a second run nor "no such job" follows a cancel whose record failed.
//! - `unwatched`: every replica killed at once, a blackout of 2.5 to 4 s (it lengthens the
//!   fault phase by 8 s), once the container jobs submitted just before it have their Jobs.
//!   Meanwhile someone else deletes those Jobs as `kubectl delete job` does (Background
//!   propagation: the garbage collector deletes the pods), some once the Job has its verdict,
//!   some while it runs. When the replicas are back, each job must answer its first run's
//!   outcome (`FAILED DeletedExternally` for one deleted while running), and its job id,
//!   submitted again, must create nothing (I2). The truth is the first Job's: a second run's
//!   Job and pods are counted, and its outcome is a wrong one. kubeferry's finalizer holds a
//!   Job deleted while no replica runs until a replica records it (docs/INVARIANTS.md).
//! - `record-loss`: a job's outcome record (its ConfigMap) deleted by hand once it ended and
//!   kubeferry let its object go, its Job still there (half of them lost their pods first; in
//!   a run with the blackout, some while no replica runs), then its job id submitted again:
//!   it must not run twice, and its answers must not change (I1, I7): the object carries a
//!   copy of its record, written as it was let go. A record deleted in the moment between its
//!   write and that release, while every replica dies, is a gap docs/INVARIANTS.md names.
//!
//! CI (`.ci/run`) runs fixed seeds of every kind within a time budget; what is beyond the API
//! is shown there, never a failure.
//!
//! ```sh
//! cargo run --release -p kubeferry-chaos -- --seeds 20 --jobs 300
//! cargo run --release -p kubeferry-chaos -- --seeds 21..40 --jobs 300
//! cargo run --release -p kubeferry-chaos -- --seed 7 --jobs 300 --without pod-loss,resubmit
//! ```

mod check;
mod http;
mod plan;
mod run;
mod truth;

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::plan::{Scenario, Shape};
use crate::run::Settings;

/// Randomized faults, replica kills and restarts against kubeferry's service on the simulated
/// cluster; every answer checked against the invariants and the cluster's truth.
#[derive(Parser, Debug)]
#[command(name = "kubeferry-chaos", version)]
struct Args {
    /// Run this one seed (to rerun a failing one).
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Run seeds 1 to K (`--seeds K`), or A to B, both included (`--seeds A..B`).
    #[arg(long, default_value = "3", value_name = "K|A..B")]
    seeds: String,
    /// Jobs per seed.
    #[arg(long, default_value_t = 100)]
    jobs: usize,
    /// Replicas of the service.
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// Nodes of the simulated cluster.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Scenario kinds to leave out, comma-separated (success, exit, oom, deadline, unpullable,
    /// spark, cancel, concurrent, resubmit, pod-loss, cancelled-gone, errors, lost-responses,
    /// latency, watches, outages, evictions, preemptions, node-loss, drains, kills, unwatched,
    /// record-loss).
    #[arg(long, value_delimiter = ',', value_name = "KIND,...")]
    without: Vec<String>,
    /// Start no further seed once this much time has passed (e.g. 90s, 10m).
    #[arg(long, value_name = "DURATION")]
    budget: Option<String>,
    /// How long after the faults stop every replica must be ready (the replicas' watches are
    /// started again after a backoff of at most 5 s).
    #[arg(long, default_value = "20s", value_name = "DURATION")]
    ready_bound: String,
    /// How long after the faults stop every job must be terminal on every replica.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    end_bound: String,
    /// Print every job's scenario, truth and answers, not only the violations' evidence.
    #[arg(long)]
    print_all: bool,
}

fn duration(flag: &str, text: &str) -> Result<Duration, String> {
    kubeferry_core::duration::parse(text).map_err(|e| format!("{flag}: {text:?}: {e}"))
}

/// The seeds `--seeds` names: `K` is 1 to K, `A..B` (or `A..=B`) is A to B, both included.
fn seed_range(text: &str) -> Result<std::ops::RangeInclusive<u64>, String> {
    let number = |part: &str, what: &str| {
        part.trim().parse::<u64>().map_err(|_| {
            format!("--seeds: {text:?}: {what} {part:?} is not a whole number (expected K or A..B)")
        })
    };
    let range = match text.split_once("..") {
        None => 1..=number(text, "the count")?,
        Some((start, end)) => {
            let end = end.strip_prefix('=').unwrap_or(end);
            number(start, "the start")?..=number(end, "the end")?
        }
    };
    if range.is_empty() {
        let why = if text.contains("..") {
            "its end is before its start"
        } else {
            "K must be at least 1"
        };
        return Err(format!("--seeds: {text:?}: the range is empty ({why})"));
    }
    Ok(range)
}

fn settings(args: &Args) -> Result<(Settings, Option<Duration>, Vec<u64>), String> {
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => seed_range(&args.seeds)?.collect(),
    };
    let mut without = BTreeSet::new();
    for name in &args.without {
        without.insert(Scenario::parse(name.trim())?);
    }
    if args.replicas == 0 || args.nodes == 0 || args.jobs == 0 {
        return Err("--replicas, --nodes and --jobs must be at least 1".into());
    }
    let budget = args
        .budget
        .as_deref()
        .map(|b| duration("--budget", b))
        .transpose()?;
    Ok((
        Settings {
            shape: Shape {
                jobs: args.jobs,
                replicas: args.replicas,
                nodes: args.nodes,
                without,
            },
            ready_bound: duration("--ready-bound", &args.ready_bound)?,
            end_bound: duration("--end-bound", &args.end_bound)?,
        },
        budget,
        seeds,
    ))
}

fn main() -> ExitCode {
    let args = Args::parse();
    // `RUST_LOG=kubeferry_kube=info` prints what the replicas do, each line naming its
    // replica (`replica-0`): the way to read how a violation came about.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_thread_names(true)
            .with_writer(std::io::stderr)
            .init();
    }
    let (settings, budget, seeds) = match settings(&args) {
        Ok(s) => s,
        Err(message) => {
            eprintln!("kubeferry-chaos: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kubeferry-chaos: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let without: Vec<&str> = settings.shape.without.iter().map(|s| s.name()).collect();
    println!(
        "kubeferry-chaos: {} seed(s), {} jobs, {} replicas, {} nodes, without [{}]",
        seeds.len(),
        settings.shape.jobs,
        settings.shape.replicas,
        settings.shape.nodes,
        without.join(",")
    );
    let began = Instant::now();
    let mut total = 0;
    let mut total_beyond = 0;
    let mut failed = false;
    for seed in seeds {
        if budget.is_some_and(|b| began.elapsed() > b) {
            println!("budget spent: no further seed started");
            break;
        }
        let outcome = match runtime.block_on(run::run(seed, &settings)) {
            Ok(o) => o,
            Err(e) => {
                println!("seed={seed} error: {e:#}");
                failed = true;
                continue;
            }
        };
        let (beyond, violations): (Vec<_>, Vec<_>) =
            outcome.violations.iter().partition(|v| v.beyond_the_api());
        println!(
            "seed={} jobs={} faults={} kills={} violations={} beyond_the_api={} took={:.1}s",
            outcome.seed,
            outcome.jobs,
            outcome.faults,
            outcome.kills,
            violations.len(),
            beyond.len(),
            outcome.took.as_secs_f64()
        );
        let ends: Vec<String> = outcome
            .ends
            .iter()
            .map(|(state, n)| format!("{state}={n}"))
            .collect();
        let [ready, ended, settled] = outcome.after_quiet.map(|d| d.as_secs_f64());
        println!(
            "  answers={} ends: {}; after the faults stopped: ready {ready:.1}s, callers done {ended:.1}s, final answers {settled:.1}s",
            outcome.answers,
            ends.join(" ")
        );
        if args.print_all {
            for line in &outcome.schedule {
                println!("  AT {line}");
            }
            for (job_id, history) in &outcome.histories {
                println!("  JOB {}", check::describe(job_id, history));
            }
        }
        for v in &violations {
            println!("  VIOLATION {} {}: {}", v.kind, v.subject, v.evidence);
        }
        for v in &beyond {
            println!("  BEYOND THE API {} {}: {}", v.kind, v.subject, v.evidence);
        }
        total += violations.len();
        total_beyond += beyond.len();
    }
    runtime.shutdown_timeout(Duration::from_secs(2));
    println!(
        "total violations={total} beyond_the_api={total_beyond} in {:.1}s",
        began.elapsed().as_secs_f64()
    );
    if total > 0 || failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<Vec<u64>, String> {
        let args =
            Args::try_parse_from(std::iter::once("kubeferry-chaos").chain(words.iter().copied()))
                .map_err(|e| e.to_string())?;
        settings(&args).map(|(_, _, seeds)| seeds)
    }

    #[test]
    fn seeds_name_a_count_a_range_or_one_seed() {
        assert_eq!(parse(&[]).unwrap(), [1, 2, 3]);
        assert_eq!(parse(&["--seeds", "2"]).unwrap(), [1, 2]);
        assert_eq!(parse(&["--seeds", "5..7"]).unwrap(), [5, 6, 7]);
        assert_eq!(parse(&["--seeds", "5..=6"]).unwrap(), [5, 6]);
        assert_eq!(parse(&["--seeds", "4..4"]).unwrap(), [4]);
        assert_eq!(parse(&["--seed", "9"]).unwrap(), [9]);
    }

    #[test]
    fn a_bad_seed_range_is_refused_naming_the_flag() {
        for (words, says) in [
            ("7..5", "the range is empty (its end is before its start)"),
            ("0", "the range is empty (K must be at least 1)"),
            ("x..5", "the start \"x\" is not a whole number"),
            ("3..", "the end \"\" is not a whole number"),
            ("-2", "the count \"-2\" is not a whole number"),
            ("1...4", "the end \".4\" is not a whole number"),
        ] {
            let error = parse(&[&format!("--seeds={words}")]).unwrap_err();
            assert!(error.starts_with("--seeds: "), "{words}: {error}");
            assert!(error.contains(says), "{words}: {error}");
        }
    }
}
