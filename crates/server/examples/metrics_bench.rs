//! The cost of a `/metrics` scrape with few and with many tracked jobs, side by side in one
//! run, and the Kubernetes API requests the scrapes cause (counted by the simulated clusters).
//!
//!     cargo run --release -p kubeferry-server --example metrics_bench -- --few 100 --many 10000
//!
//! Starts two simulated clusters with one service each, submits the jobs through the API (a
//! few of them running, each a local process; the others suspended, as if queued by Kueue),
//! waits until each service tracks them all, then times scrapes of both services in
//! interleaved rounds (so that the machine's noise falls on both alike) and prints the ratio.

mod common;

use std::time::{Duration, Instant};

use clap::Parser;
use common::{Bench, HttpClient, http_client, ms, percentile, request, send};
use hyper::http::{Method, StatusCode};

/// `/metrics` scrape benchmark of the HTTP service.
#[derive(Parser, Debug)]
struct Args {
    /// How many jobs the first service tracks.
    #[arg(long, default_value_t = 100)]
    few: usize,
    /// How many jobs the second service tracks.
    #[arg(long, default_value_t = 10_000)]
    many: usize,
    /// How many of each service's jobs run (a real process each); the rest are suspended.
    #[arg(long, default_value_t = 10)]
    running: usize,
    /// Scrapes of each service, in all.
    #[arg(long, default_value_t = 1_000)]
    scrapes: usize,
    /// Interleaved rounds the scrapes are split into.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
}

async fn scrape(client: &HttpClient, bench: &Bench) -> Duration {
    let sent = Instant::now();
    let (status, body) = send(
        client,
        request(Method::GET, &format!("{}/metrics", bench.base), None),
    )
    .await;
    let elapsed = sent.elapsed();
    assert_eq!(status, StatusCode::OK);
    assert!(!body.is_empty());
    elapsed
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = http_client();
        let mut benches = Vec::new();
        for jobs in [args.few, args.many] {
            let bench = Bench::start().await?;
            let running = args.running.min(jobs);
            bench.submit(&client, jobs, running).await;
            bench.settle(&client, jobs, running).await?;
            benches.push((jobs, bench));
        }
        for (_, bench) in &benches {
            bench.sim.reset_counters();
        }
        let per_round = (args.scrapes / args.rounds.max(1)).max(1);
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); benches.len()];
        for _ in 0..args.rounds.max(1) {
            for ((_, bench), times) in benches.iter().zip(times.iter_mut()) {
                for _ in 0..per_round {
                    times.push(scrape(&client, bench).await);
                }
            }
        }
        println!(
            "/metrics scrapes: {} per service in {} interleaved rounds; {} CPUs",
            per_round * args.rounds.max(1),
            args.rounds.max(1),
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        println!();
        println!(
            "| tracked jobs | mean (ms) | p50 (ms) | p99 (ms) | API requests during the scrapes |"
        );
        println!("|---:|---:|---:|---:|---:|");
        let mut means = Vec::new();
        for ((jobs, bench), times) in benches.iter().zip(times.iter_mut()) {
            times.sort();
            let mean = times.iter().sum::<Duration>() / times.len().max(1) as u32;
            means.push(mean);
            let requests: u64 = bench.sim.counters().values().sum();
            println!(
                "| {jobs} | {} | {} | {} | {requests} |",
                ms(mean),
                ms(percentile(times, 50.0)),
                ms(percentile(times, 99.0)),
            );
        }
        println!();
        println!(
            "ratio of mean scrape times, {} jobs to {} jobs: {:.2}",
            args.many,
            args.few,
            means[1].as_secs_f64() / means[0].as_secs_f64()
        );
        for (_, bench) in benches {
            bench.service.shutdown().await?;
            bench.sim.shutdown().await;
        }
        anyhow::Ok(())
    })
}
