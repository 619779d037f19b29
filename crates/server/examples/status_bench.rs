//! Status-query throughput and latency of the HTTP service with many tracked jobs, and the
//! Kubernetes API requests those queries cause (counted by the simulated cluster).
//!
//!     cargo run --release -p kubeferry-server --example status_bench -- --jobs 10000 --seconds 10
//!
//! Starts a simulated cluster and one service in this process, submits the jobs through the
//! API (a hundred of them running, each a local process, with its pod; the others suspended, as
//! if waiting in a Kueue queue, so that 10,000 jobs need no 10,000 local processes), waits until
//! the service's watch cache holds them all, then queries random jobs' status from a pool of
//! keep-alive connections for a fixed time at several concurrencies and prints a table. The
//! load generator runs on its own runtime threads.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use common::{Bench, HttpClient, http_client, ms, percentile, request, send};
use hyper::http::{Method, StatusCode};
use rand::Rng;

/// Status-query benchmark of the HTTP service.
#[derive(Parser, Debug)]
struct Args {
    /// How many jobs the service tracks.
    #[arg(long, default_value_t = 10_000)]
    jobs: usize,
    /// How many of them run (a real process each, `sleep`); the rest are suspended.
    #[arg(long, default_value_t = 100)]
    running: usize,
    /// How long each load level runs, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The concurrencies (connections) to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    concurrency: Vec<usize>,
    /// Threads of the load generator's runtime.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
}

/// One load level's results.
struct Level {
    concurrency: usize,
    requests: usize,
    errors: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

async fn load(
    client: HttpClient,
    base: String,
    ids: Arc<Vec<String>>,
    concurrency: usize,
    duration: Duration,
) -> Level {
    let errors = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + duration;
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (client, base, ids, errors) =
            (client.clone(), base.clone(), ids.clone(), errors.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(100_000);
            while Instant::now() < deadline {
                let id = &ids[rand::rng().random_range(0..ids.len())];
                let url = format!("{base}/v1/jobs/{id}");
                let sent = Instant::now();
                let (status, _) = send(&client, request(Method::GET, &url, None)).await;
                latencies.push(sent.elapsed());
                if status != StatusCode::OK {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.expect("a worker"));
    }
    let elapsed = started.elapsed();
    latencies.sort();
    Level {
        concurrency,
        requests: latencies.len(),
        errors: errors.load(Ordering::Relaxed),
        elapsed,
        latencies,
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let client_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads)
        .enable_all()
        .build()?;

    // The cluster and the service.
    let bench = server_runtime.block_on(Bench::start())?;
    let (sim, base) = (&bench.sim, bench.base.clone());
    let client: HttpClient = http_client();

    // Submit the jobs, suspended (as if queued by Kueue): tracked like any job, no processes.
    let submitted = Instant::now();
    let ids = client_runtime.block_on(bench.submit(&client, args.jobs, args.running));
    let submit_time = submitted.elapsed();

    // Wait until the watch cache holds every job, and the running ones run.
    client_runtime.block_on(bench.settle(&client, args.jobs, args.running))?;
    let ids = Arc::new(ids);
    // One query of every job first, as a caller polling all of them would.
    client_runtime.block_on(async {
        for id in ids.iter() {
            let (status, _) = send(
                &client,
                request(Method::GET, &format!("{base}/v1/jobs/{id}"), None),
            )
            .await;
            assert_eq!(status, StatusCode::OK);
        }
    });

    // Measure.
    let duration = Duration::from_secs(args.seconds);
    let mut levels = Vec::new();
    let mut api_requests: BTreeMap<String, u64> = BTreeMap::new();
    for &concurrency in &args.concurrency {
        sim.reset_counters();
        let level = client_runtime.block_on(load(
            client.clone(),
            base.clone(),
            ids.clone(),
            concurrency,
            duration,
        ));
        for (key, count) in sim.counters() {
            *api_requests
                .entry(format!("{} {}", key.verb, key.resource))
                .or_default() += count;
        }
        levels.push(level);
    }

    let states = server_runtime.block_on(async {
        let (_, body) = send(
            &client,
            request(Method::GET, &format!("{base}/metrics"), None),
        )
        .await;
        String::from_utf8_lossy(&body)
            .lines()
            .filter(|l| l.starts_with("kubeferry_jobs{") && !l.ends_with(" 0"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    });

    println!(
        "HTTP service: status queries (GET /v1/jobs/{{id}}), {} tracked jobs, {} s per level",
        args.jobs, args.seconds
    );
    println!(
        "machine: {} CPUs; service and load generator in one process ({} client thread(s))",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        args.client_threads
    );
    println!(
        "submitted {} jobs through the API in {:.1} s ({:.0} submits/s, 32 at a time)",
        args.jobs,
        submit_time.as_secs_f64(),
        args.jobs as f64 / submit_time.as_secs_f64()
    );
    for line in &states {
        println!("{line}");
    }
    println!();
    println!(
        "| connections | requests | errors | throughput (req/s) | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for level in &levels {
        println!(
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} |",
            level.concurrency,
            level.requests,
            level.errors,
            level.requests as f64 / level.elapsed.as_secs_f64(),
            ms(percentile(&level.latencies, 50.0)),
            ms(percentile(&level.latencies, 90.0)),
            ms(percentile(&level.latencies, 99.0)),
            ms(level.latencies.last().copied().unwrap_or_default()),
        );
    }
    println!();
    let total: u64 = api_requests.values().sum();
    println!("Kubernetes API requests during the measured queries: {total}");
    for (kind, count) in &api_requests {
        println!("  {kind}: {count}");
    }
    server_runtime.block_on(async {
        bench.service.shutdown().await?;
        bench.sim.shutdown().await;
        anyhow::Ok(())
    })?;
    Ok(())
}
