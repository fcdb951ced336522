//! The GPU check behind `kernels/check.sh` (needs `--features cuda` and a GPU):
//!
//! 1. Equality: the CUDA executor (device graph mode, and host round-trip on
//!    every fourth batch) equals the CPU executor on at least 1,000,000
//!    events of random valid policies, states and inputs. Any mismatch prints
//!    its seed and fails.
//! 2. Timing grid: device-resident chains (one graph launch, WHILE node) vs
//!    host round trips, for N ∈ {256, 2048, 16384} sessions × H ∈ {2, 8, 32}
//!    steps; median of repetitions, ratio host/device per cell.

use std::time::Instant;

use hearth_cohort::SplitMix64;
use hearth_control::cuda::{GpuExecutor, Mode};
use hearth_control::random::{self, Shape};
use hearth_control::{Executor as _, Program, cpu};

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

    // 1. Equality on random policies.
    let t0 = Instant::now();
    let (mut events, mut batches, mut failures) = (0u64, 0u64, 0u64);
    let mut seed = 0u64;
    while events < target {
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
        let tasks = random::tasks(&mut rng, &program, n, start);
        let want = cpu::run_batch(&program, &tasks);
        gpu.set_mode(if seed % 4 == 3 {
            Mode::HostRoundTrip
        } else {
            Mode::DeviceGraph
        });
        match gpu.run(&program, &tasks) {
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
        events += n as u64;
        batches += 1;
        seed += 1;
        if failures >= 10 {
            break;
        }
    }
    println!(
        "equality: {events} events in {batches} batches of random policies, {failures} failing batches ({:.1} s)",
        t0.elapsed().as_secs_f64()
    );

    // 2. Timing grid.
    gpu.set_mode(Mode::DeviceGraph);
    println!("\ntiming: median µs per chain of H steps (device graph vs host round trip)");
    println!(
        "{:>7} {:>4} {:>12} {:>12} {:>7}",
        "N", "H", "device", "host", "ratio"
    );
    let base = Program::from_json(GRID_POLICY).expect("grid policy is valid");
    let mut all_faster = true;
    for n in [256usize, 2048, 16384] {
        for h in [2u32, 8, 32] {
            let program = base.with_max_steps(h).expect("H in range");
            let mut rng = SplitMix64::new(u64::from(h) * 1_000_003 + n as u64);
            let tasks = random::tasks(&mut rng, &program, n, Some(0));
            let mut res = gpu.upload(&program, &tasks).expect("upload");
            let time = |mode: Mode, res: &mut hearth_control::cuda::Resident| {
                for _ in 0..3 {
                    gpu.chain(res, mode).expect("warm-up chain");
                }
                let reps = 51;
                median(
                    (0..reps)
                        .map(|_| {
                            let t = Instant::now();
                            gpu.chain(res, mode).expect("chain");
                            t.elapsed().as_secs_f64() * 1e6
                        })
                        .collect(),
                )
            };
            let device = time(Mode::DeviceGraph, &mut res);
            let host = time(Mode::HostRoundTrip, &mut res);
            let ratio = host / device;
            all_faster &= ratio > 1.0;
            println!("{n:>7} {h:>4} {device:>12.1} {host:>12.1} {ratio:>6.2}x");
            gpu.release(res);
        }
    }
    println!("device-resident faster in every cell: {all_faster}");
    if failures > 0 || events < target {
        std::process::exit(1);
    }
}
