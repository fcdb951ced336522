//! Live pool benchmark: prints figures, asserts nothing.
//!
//! On the local runtime, in one run: start latency p50/p99 of a job that
//! imports a bound dependency (`deps.pip`, from a local wheelhouse) when it is
//! served by its caller's warm pod, by a promoted standby pod, and by a cold
//! start, and the ratios cold/standby and cold/warm.
//!
//! Start latency is the job's `queued_ms + acquire_ms + bind_ms` as the
//! service records it (acceptance to the command's start), and, from the
//! client, the round trip minus the job's own run time.
//!
//! Run: `cargo build --release --bins && cargo bench -p hearth-tests --bench pools`
//! (`HEARTH_BENCH_JOBS` sets the jobs per source, default 20).

use hearth_tests::*;
use serde_json::{Value, json};
use uuid::Uuid;

fn jobs() -> usize {
    std::env::var("HEARTH_BENCH_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

fn job(caller: &str) -> Value {
    let code = "import json, os, hearthbenchpkg\njson.dump({'v': hearthbenchpkg.VALUE}, open(os.environ['HEARTH_OUTPUT'], 'w'))\n";
    let mut job = python_job(caller, code);
    job["deps"] = json!({"pip": ["hearthbenchpkg==1.0"]});
    job
}

struct Sample {
    server: Vec<f64>,
    client: Vec<f64>,
}

impl Sample {
    fn push(&mut self, v: &Value, rtt_ms: f64) {
        let t = &v["timing"];
        let start = t["queued_ms"].as_f64().unwrap()
            + t["acquire_ms"].as_f64().unwrap()
            + t["bind_ms"].as_f64().unwrap();
        self.server.push(start);
        self.client.push(rtt_ms - t["run_ms"].as_f64().unwrap());
    }

    fn sorted(mut self) -> Sample {
        self.server.sort_by(f64::total_cmp);
        self.client.sort_by(f64::total_cmp);
        self
    }
}

async fn submit(app: &TestApp, key: &str, caller: &str, source: &str, sample: &mut Sample) {
    let t0 = std::time::Instant::now();
    let (s, v) = app.submit(key, &job(caller), Some(120.0)).await;
    let rtt = t0.elapsed().as_secs_f64() * 1000.0;
    assert_eq!((s, &v["output"]), (200, &json!({"v": 42})), "{v}");
    assert_eq!(v["source"], source, "{v}");
    sample.push(&v, rtt);
}

async fn app_with(policy: &str, standby: u32, wheelhouse: &std::path::Path) -> TestApp {
    let mut config = config();
    config.wheelhouse = Some(wheelhouse.to_owned());
    config.pool_policy = policy.parse().unwrap();
    config.standby_min = standby;
    config.standby_max = standby;
    spawn_app_with(config).await
}

async fn standby_ready(app: &TestApp, key: &str, n: u64) {
    eventually("standby pods at target", async || {
        let (_, p) = app.get(key, "/v1/pools/cpu-small").await;
        (p["pods"]["standby"].as_u64() == Some(n)).then_some(())
    })
    .await;
}

fn main() {
    block_on(async {
        let n = jobs();
        let wheelhouse = wheelhouse();
        let run = Uuid::new_v4().simple().to_string();

        // Warm and standby: firepool with one standby pod.
        let app = app_with("firepool", 1, &wheelhouse).await;
        let t = app.create_tenant("bench").await;
        standby_ready(&app, &t.key, 1).await;
        let mut warm = Sample {
            server: Vec::new(),
            client: Vec::new(),
        };
        let mut standby = Sample {
            server: Vec::new(),
            client: Vec::new(),
        };
        let mut discard = Sample {
            server: Vec::new(),
            client: Vec::new(),
        };
        submit(
            &app,
            &t.key,
            &format!("warm-{run}"),
            "standby",
            &mut discard,
        )
        .await;
        for _ in 0..n {
            submit(&app, &t.key, &format!("warm-{run}"), "warm", &mut warm).await;
        }
        for i in 0..n {
            // A new caller each time, once the standby pod is back.
            standby_ready(&app, &t.key, 1).await;
            submit(
                &app,
                &t.key,
                &format!("standby-{run}-{i}"),
                "standby",
                &mut standby,
            )
            .await;
        }
        drop(app);

        // Cold: fixed keep-alive, no standby; a new caller each time.
        let app = app_with("keepalive:60", 0, &wheelhouse).await;
        let t = app.create_tenant("bench").await;
        let mut cold = Sample {
            server: Vec::new(),
            client: Vec::new(),
        };
        for i in 0..n {
            submit(&app, &t.key, &format!("cold-{run}-{i}"), "cold", &mut cold).await;
        }

        let (warm, standby, cold) = (warm.sorted(), standby.sorted(), cold.sorted());
        println!(
            "Start latency by source, local runtime, job importing a bound dependency ({n} jobs each, release build)"
        );
        println!();
        println!(
            "{:<9} {:>14} {:>14} {:>18} {:>18}",
            "source", "start p50 ms", "start p99 ms", "rtt-run p50 ms", "rtt-run p99 ms"
        );
        for (name, s) in [("warm", &warm), ("standby", &standby), ("cold", &cold)] {
            println!(
                "{name:<9} {:>14.2} {:>14.2} {:>18.2} {:>18.2}",
                percentile(&s.server, 0.5),
                percentile(&s.server, 0.99),
                percentile(&s.client, 0.5),
                percentile(&s.client, 0.99)
            );
        }
        println!();
        let p50 = |s: &Sample| percentile(&s.server, 0.5);
        println!("cold/standby (p50): {:.2}x", p50(&cold) / p50(&standby));
        println!("cold/warm    (p50): {:.2}x", p50(&cold) / p50(&warm));
        println!(
            "(start = queued + acquire + bind as the service records it; standby and cold jobs install the dependency into a new environment, warm jobs reuse their pod's)"
        );
    });
}
