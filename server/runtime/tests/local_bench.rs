//! Figures, not assertions: how long a cold pod start and a warm job take on
//! this machine. Run with
//! `cargo test -p hearth-runtime --test local_bench -- --ignored --nocapture`
//! (after `cargo build -p hearth-agent`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hearth_core::Profile;
use hearth_core::agent::{Frame, Run};
use hearth_runtime::local::{LocalConfig, LocalRuntime};
use hearth_runtime::{PodSpec, Runtime, client};

fn agent_bin() -> PathBuf {
    hearth_runtime::test_agent_bin()
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<40} n={:<3} p50={:>7.2} ms  p90={:>7.2} ms  min={:>7.2} ms",
        samples.len(),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 9 / 10]),
        ms(samples[0]),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: prints figures"]
async fn bench_cold_start_and_warm_jobs() {
    let state = PathBuf::from("/tmp").join(format!("hbench{}", std::process::id()));
    let rt = LocalRuntime::new(LocalConfig::new(&state, agent_bin())).unwrap();
    let mut starts = Vec::new();
    let mut stops = Vec::new();
    for i in 0..10 {
        let id = format!("b{}x{i}", std::process::id());
        let spec = PodSpec {
            pod_id: id.clone(),
            profile: Profile::cpu("bench"),
            gpu_devices: Vec::new(),
            labels: BTreeMap::new(),
        };
        let t = Instant::now();
        rt.start_pod(spec).await.unwrap();
        starts.push(t.elapsed());
        let t = Instant::now();
        rt.stop_pod(&id).await.unwrap();
        stops.push(t.elapsed());
    }
    summary("cold start (agent answers)", starts);
    summary("stop", stops);

    let id = format!("b{}warm", std::process::id());
    let pod = rt
        .start_pod(PodSpec {
            pod_id: id.clone(),
            profile: Profile::cpu("bench"),
            gpu_devices: Vec::new(),
            labels: BTreeMap::new(),
        })
        .await
        .unwrap();
    // With a pause between jobs (an agent thinking) the next sandbox is ready
    // when the job arrives; back to back it is still being built.
    let cases = [
        (
            "`true`, 100 ms apart",
            vec!["true"],
            Duration::from_millis(100),
        ),
        ("`true`, back to back", vec!["true"], Duration::ZERO),
        (
            "`python3 -c pass`, apart",
            vec!["python3", "-c", "pass"],
            Duration::from_millis(100),
        ),
    ];
    for (name, command, pause) in cases {
        let mut total = Vec::new();
        let mut run_ms = Vec::new();
        for i in 0..30 {
            tokio::time::sleep(pause).await;
            let run = Run {
                job_id: format!("j{i}"),
                caller: None,
                files: BTreeMap::new(),
                command: command.iter().map(|s| (*s).to_owned()).collect(),
                deps: Default::default(),
                input: serde_json::Value::Null,
                env: BTreeMap::new(),
                timeout_ms: 10_000,
                topology: None,
                max_log_bytes: 65536,
                detach_grace_ms: 0,
            };
            let t = Instant::now();
            let last = client::run(&pod.address, pod.token.as_deref(), 0, run)
                .await
                .unwrap()
                .finish()
                .await
                .unwrap();
            total.push(t.elapsed());
            if let Frame::Exit { run_ms: ms, .. } = last {
                run_ms.push(Duration::from_secs_f64(ms / 1000.0));
            }
        }
        summary(&format!("{name}: exchange"), total);
        summary(&format!("{name}: run_ms"), run_ms);
    }
    rt.stop_pod(&id).await.unwrap();
    let _ = std::fs::remove_dir_all(&state);
}
