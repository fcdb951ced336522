//! The frontier benchmark: on each member of the `agent-heavy`, `rl-mixed`
//! and `rl-jitter` trace families (pause tails, profile mixes, step sizes,
//! pauses, their jitter and caller counts drawn from the seed), and on the
//! original `agent` trace (100 sessions, heavy-tailed think pauses) and `rl`
//! trace (32 workers, 20 jobs a step, a 30 s training pause) of each seed,
//! every fixed keep-alive, always-on and firepool, cold start
//! 30 s, promotion 1 s, warm 0.1 s. Prints each trace's table and firepool's
//! frontier targets (dominated by no fixed keep-alive, <= 0.55 of
//! always-on's GPU-hours, p90 start within 1.5x of always-on's, >= 95 % warm
//! or standby, >= 95 % of always-on's loop speed-up), always-on's and
//! firepool's figures in each profile's pool beside that pool's clairvoyant
//! floor, and writes the charts next to the traces.
//!
//! `cargo bench -p hearth-pool --bench frontier`
//! Environment: `HEARTH_SEEDS` (comma-separated seeds or inclusive ranges
//! such as `1..24`, default 1,2,3,4),
//! `HEARTH_KINDS` (comma-separated, default
//! agent,agent-heavy,rl-mixed,rl-jitter,rl),
//! `HEARTH_OUT` (where traces and charts go, default the temp directory),
//! `HEARTH_COLD_START_S` (seconds a pod takes to start, default 30).

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use hearth_pool::sim::{self, SimParams, Summary, TraceKind};

fn main() {
    let seeds = sim::seeds(&std::env::var("HEARTH_SEEDS").unwrap_or_else(|_| "1,2,3,4".to_owned()))
        .expect("HEARTH_SEEDS");
    let out = std::env::var_os("HEARTH_OUT").map_or_else(std::env::temp_dir, PathBuf::from);
    let mut params = SimParams::default();
    if let Ok(s) = std::env::var("HEARTH_COLD_START_S") {
        let s: f64 = s.parse().expect("HEARTH_COLD_START_S");
        params.cold_start = std::time::Duration::try_from_secs_f64(s).expect("HEARTH_COLD_START_S");
    }
    let mut missed = 0;
    // Misses of the GPU-hours target on traces whose clairvoyant floor is
    // above it already.
    let mut beyond = 0;
    let kinds: Vec<TraceKind> = std::env::var("HEARTH_KINDS")
        .unwrap_or_else(|_| "agent,agent-heavy,rl-mixed,rl-jitter,rl".to_owned())
        .split(',')
        .map(|k| k.trim().parse().expect("HEARTH_KINDS"))
        .collect();
    for &kind in &kinds {
        for &seed in &seeds {
            let callers = sim::family_callers(kind, seed);
            let jobs = sim::family_jobs(kind, callers);
            let path = out.join(format!("hearth-{kind}-{seed}.csv"));
            let file = BufWriter::new(File::create(&path).expect("create trace"));
            sim::generate(kind, callers, jobs, seed, file).expect("write trace");
            let c = sim::compare(&path, &sim::frontier_set(), &params).expect("compare");
            let svg = path.with_extension("svg");
            std::fs::write(&svg, &c.svg).expect("write chart");
            println!(
                "\n== {} ({callers} callers, {jobs} jobs, seed {seed}; chart: {})",
                kind.describe(seed),
                svg.display()
            );
            print!("{}", Summary::table(&c.summaries));
            println!("{}", c.floor_note());
            print!("{}", c.profile_table(&sim::FRONTIER_PAIR));
            let floor_above = c
                .floor_of_always_on()
                .is_some_and(|r| r > sim::FRONTIER_GPU_HOURS);
            for t in sim::frontier_targets(&c.summaries) {
                missed += usize::from(!t.met);
                beyond += usize::from(!t.met && floor_above && t.what == sim::GPU_HOURS_TARGET);
                println!(
                    "  [{}] {:<40} {:>8} got {:.3}",
                    if t.met { "met" } else { "MISSED" },
                    t.what,
                    t.goal,
                    t.got
                );
            }
        }
    }
    println!(
        "\n{missed} frontier checks missed ({beyond} of them the GPU-hours target on traces whose \
         clairvoyant floor is above it)"
    );
}
