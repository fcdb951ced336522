//! The cost of `GET /v1/control/stats`'s analysis: equal deadlines (exact,
//! O(n log n)) and mixed per-event deadlines (the capped exact search, then
//! bounds). Prints figures; `cargo bench -p hearth-control --bench stats`.

use std::time::Instant;

use hearth_cohort::SplitMix64;
use hearth_control::accounting::{self, DEFAULT_MAX_EXACT_STEPS};
use hearth_control::driver::{Path, RouteKey};
use hearth_control::{ExecutorKind, Record};

/// `n` events at `rate` per second over `routes` routes, each deadline drawn
/// from `deadlines_ms`.
fn records(n: u64, rate: f64, routes: u32, deadlines_ms: &[u64], seed: u64) -> Vec<Record> {
    let mut rng = SplitMix64::new(seed);
    let gap = (2e9 / rate) as u64;
    let mut t = 0;
    (0..n)
        .map(|event| {
            t += rng.next_u64() % gap.max(1);
            let d = deadlines_ms[(rng.next_u64() % deadlines_ms.len() as u64) as usize];
            Record {
                event,
                route: RouteKey((rng.next_u64() % u64::from(routes)) as u32),
                release_ns: t,
                deadline_ns: t + d * 1_000_000,
                batch: Some(event / 256),
                batch_size: 256,
                executor: ExecutorKind::Cpu,
                path: Path::Batch,
                launch_ns: t,
                done_ns: t,
                exact: true,
            }
        })
        .collect()
}

/// Name, events, events/s, routes, deadlines (ms), K.
type Case = (&'static str, u64, f64, u32, &'static [u64], u32);

fn main() {
    println!(
        "\ncontrol stats analysis (cap {DEFAULT_MAX_EXACT_STEPS} exact-search steps; one core):"
    );
    // Rates near K events per δ per route, where batching is contested.
    let cases: [Case; 4] = [
        (
            "1M events, 4 routes, equal deadlines 50 ms, K = 256",
            1_000_000,
            20_000.0,
            4,
            &[50],
            256,
        ),
        (
            "115k events, deadlines {5,20,50,200} ms, K = 256",
            115_000,
            5_000.0,
            1,
            &[5, 20, 50, 200],
            256,
        ),
        (
            "115k events, deadlines {5,20,50,200} ms, K = 32",
            115_000,
            640.0,
            1,
            &[5, 20, 50, 200],
            32,
        ),
        (
            "1M events, 4 routes, deadlines {5,20,50,200} ms, K = 256",
            1_000_000,
            20_000.0,
            4,
            &[5, 20, 50, 200],
            256,
        ),
    ];
    for (name, n, rate, routes, deadlines, k) in cases {
        let records = records(n, rate, routes, deadlines, 7);
        let t0 = Instant::now();
        let s =
            accounting::stats(&records, 50_000_000, |_| k).expect("never fails on a hard instance");
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "  {name}: {:.0} ms; exact = {}; F {:.4}, P* in [{:.4}, {:.4}], U {:.4}; \
             {} components exact, {} bounded ({} events)",
            secs * 1e3,
            s.exact_known,
            s.fixed,
            s.exact_lower,
            s.exact_upper,
            s.upper,
            s.exact_components,
            s.bounded_components,
            s.bounded_events
        );
        assert!(s.exact_lower <= s.exact_upper && s.exact_upper <= s.upper + 1e-12);
    }
}
