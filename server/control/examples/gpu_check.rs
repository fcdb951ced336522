//! The GPU check behind `kernels/check.sh` (needs `--features cuda` and a GPU):
//!
//! 1. Equality: the CUDA executor equals the CPU executor on at least
//!    1,000,000 events of random valid policies, states and inputs, through
//!    the resident path the service uses (`run_sessions` over a pool of
//!    sessions whose rows stay on the device; some states are changed off the
//!    device between batches, as a CPU fallback would, and must be
//!    re-uploaded), in device-graph mode with host round trips on every
//!    fourth batch and the non-resident `run` on every seventh. Any mismatch
//!    prints its seed and fails.
//! 2. Timing grid: one batch of N sessions × a chain of H steps, device
//!    resident (one upload of inputs, one graph launch with the WHILE node,
//!    one download) vs host round trips (the decision copied back after every
//!    step), for N ∈ {256, 2048, 16384} × H ∈ {2, 8, 32}; median of
//!    repetitions, ratio host/device per cell; plus the same device batch
//!    with every session's state uploaded again (residency off).
//! 3. The generated swarm (100,000 sessions, K = 256, δ = 50 ms) replayed
//!    through the driver with the CUDA executor, every batch verified
//!    against the CPU: A, P*, A/P*, late fallbacks, exactness.

use std::collections::HashMap;
use std::time::Instant;

use hearth_cohort::SplitMix64;
use hearth_control::cuda::{GpuExecutor, Mode};
use hearth_control::driver::replay;
use hearth_control::policy::Regs;
use hearth_control::random::{self, Shape};
use hearth_control::{
    Driver, DriverConfig, Executor as _, Program, accounting, compactor, cpu, swarm,
};

const GRID_POLICY: &str = r#"{
  "name": "grid", "version": 1, "registers": 8, "inputs": 2, "max_steps": 1,
  "routes": [
    {"name": "a", "body": [
      {"op": "mix", "dst": 0, "a": {"reg": 0}, "b": {"input": 0}},
      {"op": "add", "dst": 1, "a": {"reg": 1}, "b": {"imm": 1}},
      {"op": "xor", "dst": 2, "a": {"reg": 2}, "b": {"reg": 0}},
      {"op": "set_route", "route": "b", "when": {"cmp": "lt", "a": {"reg": 0}, "b": {"imm": 2147483648}}}
    ]},
    {"name": "b", "body": [
      {"op": "rotl", "dst": 3, "a": {"reg": 3}, "b": {"reg": 0}},
      {"op": "add_sat", "dst": 4, "a": {"reg": 4}, "b": {"input": 1}},
      {"op": "add", "dst": 1, "a": {"reg": 1}, "b": {"imm": 1}},
      {"op": "set_route", "route": "a"}
    ]}
  ]
}"#;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut gpu = match GpuExecutor::new() {
        Ok(g) => g,
        Err(why) => {
            eprintln!("gpu_check: no usable GPU: {why}");
            std::process::exit(2);
        }
    };
    println!("executor: {}", gpu.status());
    let target: u64 = std::env::var("GPU_CHECK_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let failures = equality(&mut gpu, target);
    let faster = grid(&mut gpu);
    let swarm_ok = swarm_replay(gpu);
    println!("device-resident faster in every cell: {faster}");
    if failures > 0 || !swarm_ok {
        std::process::exit(1);
    }
}

/// Section 1; returns the failing batches.
fn equality(gpu: &mut GpuExecutor, target: u64) -> u64 {
    const POOL: u64 = 50_000;
    let t0 = Instant::now();
    let (mut events, mut batches, mut failures) = (0u64, 0u64, 0u64);
    let mut states: HashMap<u64, Regs> = HashMap::new();
    let mut seed = 0u64;
    while events < target && failures < 10 {
        let mut rng = SplitMix64::new(seed);
        let shape = if seed.is_multiple_of(5) {
            Shape {
                max_routes: 32,
                max_body: 64,
                max_steps: 64,
            }
        } else {
            Shape::default()
        };
        let program = random::program(&mut rng, shape);
        let n = 1 + rng.below(4096) as usize;
        let start = (rng.below(2) == 0).then(|| rng.below(program.routes().len() as u64) as u16);
        let mut tasks = random::tasks(&mut rng, &program, n, start);
        let mut sessions = Vec::with_capacity(n);
        let mut taken = std::collections::HashSet::with_capacity(n);
        while sessions.len() < n {
            let s = rng.below(POOL);
            if taken.insert(s) {
                sessions.push(s);
            }
        }
        for (t, s) in tasks.iter_mut().zip(&sessions) {
            let st = states.entry(*s).or_insert(t.state);
            // One state in ten changed off the device (a CPU fallback ran).
            if rng.below(10) == 0 {
                st[rng.below(16) as usize] ^= rng.next_u64() as u32 | 1;
            }
            t.state = *st;
        }
        let want = cpu::run_batch(&program, &tasks);
        gpu.set_mode(if seed % 4 == 3 {
            Mode::HostRoundTrip
        } else {
            Mode::DeviceGraph
        });
        let got = if seed % 7 == 6 {
            gpu.run(&program, &tasks)
        } else {
            gpu.run_sessions(&program, &sessions, &tasks)
        };
        match got {
            Ok(got) if got == want => {}
            Ok(got) => {
                failures += 1;
                let i = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
                eprintln!(
                    "MISMATCH seed {seed} n {n} event {i}: gpu {:?} cpu {:?}",
                    got[i], want[i]
                );
            }
            Err(e) => {
                failures += 1;
                eprintln!("ERROR seed {seed}: {e}");
            }
        }
        for (s, o) in sessions.iter().zip(&want) {
            states.insert(*s, o.state);
        }
        events += n as u64;
        batches += 1;
        seed += 1;
    }
    let c = gpu.counters();
    println!(
        "equality: {events} events in {batches} batches of random policies, {failures} failing batches ({:.1} s); \
         {} session rows uploaded for {} events, {} program uploads, {} graphs built",
        t0.elapsed().as_secs_f64(),
        c.rows_uploaded,
        c.events,
        c.programs_uploaded,
        c.graphs_built,
    );
    if events < target {
        failures += 1;
    }
    failures
}

/// Section 2; returns whether the device-resident batch won every cell.
fn grid(gpu: &mut GpuExecutor) -> bool {
    println!("\ntiming: median µs per batch of N events × H steps (inputs up, outcomes down)");
    println!(
        "{:>7} {:>4} {:>10} {:>10} {:>7} {:>13} {:>11}",
        "N", "H", "resident", "host-trip", "ratio", "re-uploaded", "M events/s"
    );
    let base = Program::from_json(GRID_POLICY).expect("grid policy is valid");
    let mut all_faster = true;
    let mut cell = 0u64;
    for n in [256usize, 2048, 16384] {
        for h in [2u32, 8, 32] {
            cell += 1;
            let program = base.with_max_steps(h).expect("H in range");
            let mut rng = SplitMix64::new(u64::from(h) * 1_000_003 + n as u64);
            let mut tasks = random::tasks(&mut rng, &program, n, Some(0));
            let sessions: Vec<u64> = (0..n as u64).map(|i| cell << 32 | i).collect();
            let mut time = |gpu: &mut GpuExecutor, mode: Mode, cold: bool| {
                gpu.set_mode(mode);
                let mut samples = Vec::new();
                for rep in 0..54 {
                    if cold {
                        gpu.forget();
                    }
                    let t = Instant::now();
                    let out = gpu
                        .run_sessions(&program, &sessions, &tasks)
                        .expect("grid batch");
                    let us = t.elapsed().as_secs_f64() * 1e6;
                    for (t, o) in tasks.iter_mut().zip(&out) {
                        t.state = o.state;
                        t.route = o.route;
                    }
                    if rep >= 3 {
                        samples.push(us);
                    }
                }
                median(samples)
            };
            let device = time(gpu, Mode::DeviceGraph, false);
            let uploads = gpu.counters().rows_uploaded;
            let host = time(gpu, Mode::HostRoundTrip, false);
            let resident_uploads = gpu.counters().rows_uploaded - uploads;
            let cold = time(gpu, Mode::DeviceGraph, true);
            let ratio = host / device;
            all_faster &= ratio > 1.0;
            assert_eq!(resident_uploads, 0, "resident batches uploaded rows");
            println!(
                "{n:>7} {h:>4} {device:>10.1} {host:>10.1} {ratio:>6.2}x {cold:>13.1} {:>11.2}",
                n as f64 / device
            );
        }
    }
    all_faster
}

/// Section 3; returns whether every batch was exact and no fallback was late.
fn swarm_replay(gpu: GpuExecutor) -> bool {
    const K: u32 = 256;
    let params = swarm::Params::default();
    let mut driver = Driver::new(
        DriverConfig {
            compactor: compactor::Config {
                max_batch: 1024,
                launch_cost_ns: 1_000_000,
                eager: false,
            },
            verify: true,
        },
        gpu,
    );
    let keys = driver.register(swarm::policy(), |_| Some(K));
    let arrivals = swarm::generate(&params, &keys);
    let t0 = Instant::now();
    let done = replay(&mut driver, arrivals).expect("swarm events are valid");
    let secs = t0.elapsed().as_secs_f64();
    let records: Vec<_> = done.iter().map(|c| c.record).collect();
    let s = accounting::stats(&records, params.delta_ns as i64, |_| K).expect("analyzer");
    let inexact = records.iter().filter(|r| !r.exact).count();
    let gpu_events = records
        .iter()
        .filter(|r| r.executor == hearth_control::ExecutorKind::Gpu)
        .count();
    println!(
        "\nswarm through the driver on the GPU (verified): {} events, {gpu_events} on the GPU, \
         {inexact} inexact, {:.2} s\n  A {:.4}  P* {:.4}  A/P* {:.3}  F {:.4}  U {:.4}  late fallbacks {}",
        records.len(),
        secs,
        s.achieved,
        s.exact,
        s.achieved / s.exact,
        s.fixed,
        s.upper,
        s.late_fallbacks
    );
    inexact == 0 && s.late_fallbacks == 0
}
