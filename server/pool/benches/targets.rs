//! The published targets, checked: every named policy on generated agent and
//! RL traces (cold start 30 s, promotion 1 s, warm 0.1 s), one table each,
//! firepool's targets marked met or missed, and the charts written next to
//! the traces.
//!
//! `cargo bench -p hearth-pool --bench targets`
//! Environment: `HEARTH_SEEDS` (comma-separated seeds or inclusive ranges
//! such as `1..24`, default 1,2,3),
//! `HEARTH_OUT` (where traces and charts go, default the temp directory).

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use hearth_pool::Kind;
use hearth_pool::sim::{self, SimParams, Summary, TraceKind};

fn main() {
    let seeds = sim::seeds(&std::env::var("HEARTH_SEEDS").unwrap_or_else(|_| "1,2,3".to_owned()))
        .expect("HEARTH_SEEDS");
    let out = std::env::var_os("HEARTH_OUT").map_or_else(std::env::temp_dir, PathBuf::from);
    let params = SimParams::default();
    let mut missed = 0;
    for kind in [TraceKind::Agent, TraceKind::Rl] {
        for &seed in &seeds {
            let (callers, jobs) = (kind.default_callers(), kind.default_jobs());
            let path = out.join(format!("hearth-{kind}-{seed}.csv"));
            let file = BufWriter::new(File::create(&path).expect("create trace"));
            sim::generate(kind, callers, jobs, seed, file).expect("write trace");
            let c = sim::compare(&path, &Kind::comparison_set(), &params).expect("compare");
            let svg = path.with_extension("svg");
            std::fs::write(&svg, &c.svg).expect("write chart");
            println!(
                "\n== {kind} trace: {callers} callers, {jobs} jobs, seed {seed} (chart: {})",
                svg.display()
            );
            print!("{}", Summary::table(&c.summaries));
            for t in sim::targets(kind, &c.summaries) {
                missed += usize::from(!t.met);
                println!(
                    "  [{}] {:<38} {:>8} got {:.3}",
                    if t.met { "met" } else { "MISSED" },
                    t.what,
                    t.goal,
                    t.got
                );
            }
        }
    }
    println!("\n{missed} target checks missed");
}
