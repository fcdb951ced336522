//! Service benchmark: prints figures, asserts nothing.
//!
//! In one run, against the same Postgres:
//! 1. baseline: the same commits per job as Hearth's lifecycle (insert durable,
//!    assign and start relaxed, finish durable), straight through the store, at
//!    1 and 16 clients;
//! 2. Hearth: no-op jobs (`true`) submitted with `wait` by 1 and 16 concurrent
//!    clients, each on its warm pod: jobs/s, ratio to the baseline, and the
//!    added latency (total minus the job's own run time) p50/p99;
//! 3. an agent loop of 50 sequential tool calls, each importing one extra
//!    package from a local wheelhouse, on the caller's warm pod versus a fresh
//!    pod per job.
//!
//! Run: `cargo build --release --bins && cargo bench -p hearth-tests --bench service`
//! (`HEARTH_BENCH_SECONDS` sets each measurement's length, default 5).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_store::job::{Finish, NewJob};
use hearth_tests::*;
use serde_json::json;
use uuid::Uuid;

fn seconds() -> Duration {
    Duration::from_secs_f64(
        std::env::var("HEARTH_BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5.0),
    )
}

/// The baseline: Hearth's commits per job without Hearth.
async fn baseline(db_url: &str, tenant_id: Uuid, clients: usize, length: Duration) -> f64 {
    let durable = hearth_store::connect(db_url, false, clients as u32 + 1)
        .await
        .unwrap();
    let relaxed = hearth_store::connect_relaxed(db_url, clients as u32 + 1)
        .await
        .unwrap();
    let spec = json!({"kind": "tool_call", "command": ["true"]});
    // The fenced writes need the current epoch (a service may lead here).
    let epoch = hearth_store::leadership::current(&durable).await.unwrap();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (durable, relaxed, spec) = (durable.clone(), relaxed.clone(), spec.clone());
        tasks.push(tokio::spawn(async move {
            let caller = format!("base-{c}");
            let mut done = 0u64;
            let mut conn = durable.acquire().await.unwrap();
            while start.elapsed() < length {
                let id = Uuid::now_v7();
                hearth_store::job::insert(
                    &mut conn,
                    &NewJob {
                        job_id: id,
                        tenant_id,
                        kind: hearth_core::Kind::ToolCall,
                        profile: "cpu-small",
                        caller: &caller,
                        priority: 0,
                        spec: &spec,
                        idempotency_key: None,
                        request_hash: None,
                        traceparent: None,
                    },
                )
                .await
                .unwrap();
                hearth_store::job::assign(
                    &relaxed,
                    epoch,
                    id,
                    hearth_core::Source::Warm,
                    &["pod".to_owned()],
                    0.1,
                )
                .await
                .unwrap();
                hearth_store::job::start(&relaxed, epoch, id, 0.1, 0.1)
                    .await
                    .unwrap();
                let f = Finish {
                    exit_code: Some(0),
                    run_ms: Some(1.0),
                    ..Finish::new(hearth_core::State::Succeeded)
                };
                hearth_store::job::finish(&mut conn, epoch, id, &f)
                    .await
                    .unwrap();
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}

struct Run {
    jobs_per_s: f64,
    /// Server-side: total_ms - run_ms.
    added_server: Vec<f64>,
    /// Client-side: round trip - run_ms.
    added_client: Vec<f64>,
}

async fn hearth_noop(app: &Arc<TestApp>, key: &str, clients: usize, length: Duration) -> Run {
    let job = |c: usize| json!({"kind": "tool_call", "profile": "cpu-small", "caller": format!("noop-{c}"), "command": ["true"], "timeout_s": 30});
    // Warm every client's pod first.
    for c in 0..clients {
        let (s, v) = app.submit(key, &job(c), Some(30.0)).await;
        assert_eq!(s, 200, "{v}");
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (app, key, body) = (app.clone(), key.to_owned(), job(c));
        tasks.push(tokio::spawn(async move {
            let (mut server, mut client) = (Vec::new(), Vec::new());
            while start.elapsed() < length {
                let t0 = Instant::now();
                let (s, v) = app.submit(&key, &body, Some(30.0)).await;
                let rtt = t0.elapsed().as_secs_f64() * 1000.0;
                assert_eq!((s, v["state"].as_str()), (200, Some("succeeded")), "{v}");
                assert_eq!(v["source"], "warm");
                let run = v["timing"]["run_ms"].as_f64().unwrap();
                server.push(v["timing"]["total_ms"].as_f64().unwrap() - run);
                client.push(rtt - run);
            }
            (server, client)
        }));
    }
    let (mut added_server, mut added_client) = (Vec::new(), Vec::new());
    for t in tasks {
        let (s, c) = t.await.unwrap();
        added_server.extend(s);
        added_client.extend(c);
    }
    let elapsed = start.elapsed().as_secs_f64();
    added_server.sort_by(f64::total_cmp);
    added_client.sort_by(f64::total_cmp);
    Run {
        jobs_per_s: added_server.len() as f64 / elapsed,
        added_server,
        added_client,
    }
}

async fn agent_loop(app: &Arc<TestApp>, key: &str, fresh: bool) -> (f64, Vec<String>) {
    let code = "import json, os, hearthbenchpkg\njson.dump({'v': hearthbenchpkg.VALUE}, open(os.environ['HEARTH_OUTPUT'], 'w'))\n";
    let start = Instant::now();
    let mut sources = Vec::new();
    let run = Uuid::new_v4().simple().to_string();
    for i in 0..50 {
        // A fresh pod per job: every job is its own caller, so no warm pod fits.
        let caller = if fresh {
            format!("fresh-{run}-{i}")
        } else {
            format!("loop-{run}")
        };
        let mut job = python_job(&caller, code);
        job["deps"] = json!({"pip": ["hearthbenchpkg==1.0"]});
        let (s, v) = app.submit(key, &job, Some(120.0)).await;
        assert_eq!((s, &v["output"]), (200, &json!({"v": 42})), "{v}");
        sources.push(v["source"].as_str().unwrap().to_owned());
    }
    (start.elapsed().as_secs_f64(), sources)
}

fn main() {
    block_on(async {
        let length = seconds();
        let wheelhouse = wheelhouse();
        let mut config = config();
        config.wheelhouse = Some(wheelhouse);
        config.db_max_connections = 40;
        let db_url = config.database_url.clone();
        let app = Arc::new(spawn_app_with(config).await);
        let t = app.create_tenant("bench").await;
        let tenant_id: Uuid = t.tenant_id.parse().unwrap();

        println!(
            "Hearth service benchmark ({} s per measurement, release build, {} cores)",
            length.as_secs_f64(),
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        println!();
        println!(
            "{:<10} {:>14} {:>14} {:>8} {:>16} {:>16} {:>16} {:>16}",
            "clients",
            "baseline job/s",
            "hearth job/s",
            "ratio",
            "added p50 ms",
            "added p99 ms",
            "rtt-run p50 ms",
            "rtt-run p99 ms"
        );
        for clients in [1usize, 16] {
            let base = baseline(&db_url, tenant_id, clients, length).await;
            let h = hearth_noop(&app, &t.key, clients, length).await;
            println!(
                "{:<10} {:>14.0} {:>14.0} {:>7.1}% {:>16.2} {:>16.2} {:>16.2} {:>16.2}",
                clients,
                base,
                h.jobs_per_s,
                100.0 * h.jobs_per_s / base,
                percentile(&h.added_server, 0.5),
                percentile(&h.added_server, 0.99),
                percentile(&h.added_client, 0.5),
                percentile(&h.added_client, 0.99),
            );
        }
        println!(
            "(added = the job's total_ms minus its run_ms, as the service records them; rtt-run = the client's round trip minus run_ms)"
        );
        println!();

        let (warm_s, warm_sources) = agent_loop(&app, &t.key, false).await;
        let (fresh_s, fresh_sources) = agent_loop(&app, &t.key, true).await;
        let count = |v: &[String], s: &str| v.iter().filter(|x| *x == s).count();
        println!(
            "agent loop: 50 sequential tool calls, each importing one extra package (deps.pip, local wheelhouse)"
        );
        println!(
            "  warm reuse:        {warm_s:>8.2} s  ({} warm, {} cold)",
            count(&warm_sources, "warm"),
            count(&warm_sources, "cold")
        );
        println!(
            "  fresh pod per job: {fresh_s:>8.2} s  ({} warm, {} cold)",
            count(&fresh_sources, "warm"),
            count(&fresh_sources, "cold")
        );
        println!("  speed-up:          {:>8.1}x", fresh_s / warm_s);
    });
}
