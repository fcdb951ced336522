//! Figures, not a timed test: `cargo bench -p hearth-control --bench compactor`.
//!
//! 1. Throughput: events/s through the compactor alone, and through the
//!    compactor, the driver and the batched CPU executor in-process.
//! 2. The generated swarm (100,000 sessions, K = 256, δ = 50 ms, B = 1024;
//!    see `hearth_control::swarm`) replayed on a virtual clock with the
//!    batched CPU path as the executor: A, F, P*, U, R_A, A/P* (target ≥ 0.9)
//!    and late fallbacks (target 0), for the late (default) and eager launch
//!    rules.
//! 3. Calibration of the swarm policy's routes on this CPU (informational).

use std::time::Instant;

use hearth_control::compactor::{self, Compactor, Pending};
use hearth_control::driver::replay;
use hearth_control::{CpuExecutor, Driver, DriverConfig, accounting, calibrate, swarm};

const K: u32 = 256;

fn main() {
    let params = swarm::Params::default();
    let program = swarm::policy();

    // Compactor alone: push every arrival, poll at each arrival and wake-up.
    let keys: Vec<_> = (0..4).map(hearth_control::RouteKey).collect();
    let arrivals = swarm::generate(&params, &keys);
    let mut c = Compactor::new(compactor::Config::default());
    for _ in 0..4 {
        c.add_route(Some(K));
    }
    let t0 = Instant::now();
    let mut actions = 0usize;
    for a in &arrivals {
        while let Some(w) = c.next_wake() {
            if w >= a.release_ns {
                break;
            }
            actions += c.poll(w).len();
        }
        c.push(
            a.route.0 as usize,
            Pending {
                event: 0,
                release_ns: a.release_ns,
                deadline_ns: a.deadline_ns,
            },
        );
        actions += c.poll(a.release_ns).len();
    }
    actions += c.drain().len();
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "compactor alone: {} events, {actions} actions in {:.3} s = {:.2} M events/s",
        arrivals.len(),
        secs,
        arrivals.len() as f64 / secs / 1e6
    );

    for eager in [false, true] {
        let mut driver = Driver::new(
            DriverConfig {
                compactor: compactor::Config {
                    max_batch: 1024,
                    launch_cost_ns: 1_000_000,
                    eager,
                },
                verify: false,
            },
            CpuExecutor::new(),
        );
        let keys = driver.register(program.clone(), |_| Some(K));
        let arrivals = swarm::generate(&params, &keys);
        let t0 = Instant::now();
        let done = replay(&mut driver, arrivals).expect("swarm events are valid");
        let secs = t0.elapsed().as_secs_f64();
        let records: Vec<_> = done.iter().map(|c| c.record).collect();
        let t1 = Instant::now();
        let s = accounting::stats(&records, params.delta_ns as i64, |_| K).expect("analyzer");
        let analyze_s = t1.elapsed().as_secs_f64();
        println!(
            "\nswarm ({} sessions, {:.1} s, K = {K}, δ = {} ms, B = 1024, launch = {}), batched CPU executor:",
            params.sessions,
            params.duration_ns as f64 / 1e9,
            params.delta_ns / 1_000_000,
            if eager {
                "eager at K"
            } else {
                "latest (default)"
            }
        );
        println!(
            "  in-process: {} events in {:.3} s wall = {:.2} M events/s (compactor + driver + executor + session state)",
            s.events,
            secs,
            s.events as f64 / secs / 1e6
        );
        println!(
            "  A = {:.4}  F = {:.4}  P* = {:.4}  U = {:.4}  R_A = {}  A/P* = {:.4}",
            s.achieved,
            s.fixed,
            s.exact,
            s.upper,
            s.online_closure
                .map_or("n/a".to_owned(), |r| format!("{r:.4}")),
            s.achieved / s.exact
        );
        println!(
            "  batches = {}  fallback share = {:.4}  deadline misses = {}  late fallbacks = {}  (analyzer {:.3} s)",
            s.batches, s.fallback_share, s.deadline_misses, s.late_fallbacks, analyze_s
        );
        let ok = s.achieved >= 0.9 * s.exact && s.late_fallbacks == 0;
        println!(
            "  target A >= 0.9 P* and no late fallback: {}",
            if ok { "met" } else { "NOT MET" }
        );
    }

    println!("\ncalibration of the swarm policy on this CPU (batch path vs scalar CPU path):");
    let cal =
        calibrate::calibrate(&mut CpuExecutor::new(), &program, 21, 1).expect("cpu never fails");
    for (r, c) in program.routes().iter().zip(&cal) {
        let ratios: Vec<String> = c
            .timings
            .iter()
            .map(|t| format!("{}:{:.2}", t.size, t.batch_ns / t.cpu_ns))
            .collect();
        println!(
            "  {:8} K_r = {:?}  batch/cpu time by size {}",
            r.name(),
            c.k,
            ratios.join(" ")
        );
    }
}
