//! Scale: generates agent traces of 100,000 and 1,000,000 jobs (1,000
//! callers) to temporary files, times reading each alone (rows/s, MB/s) and
//! the firepool simulation of each on one thread, and prints jobs per second
//! and peak RSS (VmHWM). Peak RSS barely moves between the two: memory
//! follows callers and live pods, not the trace's length.
//!
//! `cargo bench -p hearth-pool --bench simulate`

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::time::Instant;

use hearth_pool::Kind;
use hearth_pool::sim::{self, SimParams, TraceKind};

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn hwm() -> String {
    vm_hwm_kib().map_or_else(
        || "n/a".to_owned(),
        |k| format!("{:.1} MiB", k as f64 / 1024.0),
    )
}

fn trace(jobs: u64, callers: u32) -> PathBuf {
    let path = std::env::temp_dir().join(format!("hearth-bench-{}-{jobs}.csv", std::process::id()));
    let t = Instant::now();
    let file = BufWriter::new(File::create(&path).expect("create trace"));
    sim::generate(TraceKind::Agent, callers, jobs, 1, file).expect("write trace");
    let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
    println!(
        "generated {jobs} jobs, {callers} callers: {:.1} MiB in {:.2} s",
        bytes as f64 / (1 << 20) as f64,
        t.elapsed().as_secs_f64()
    );
    path
}

fn main() {
    let callers = 1_000;
    println!("peak RSS at start: {}", hwm());
    for jobs in [100_000, 1_000_000] {
        let path = trace(jobs, callers);
        println!("peak RSS after generating: {}", hwm());
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        let best = (0..3)
            .map(|_| {
                let t = Instant::now();
                let rows = sim::read_trace(&path, &SimParams::default()).expect("read");
                assert_eq!(rows, jobs);
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        println!(
            "reading only (index pass + per-caller cursors), best of 3: {best:.3} s, \
             {:.2} M rows/s, {:.0} MB/s",
            jobs as f64 / best / 1e6,
            bytes as f64 / best / 1e6,
        );
        let t = Instant::now();
        let s = sim::simulate(&path, Kind::Firepool, &SimParams::default()).expect("simulate");
        let secs = t.elapsed().as_secs_f64();
        let _ = std::fs::remove_file(&path);
        println!(
            "firepool, {} jobs: {secs:.2} s, {:.0} jobs/s, peak RSS {} \
             (warm {:.1} %, standby {:.1} %, cold {:.1} %, p90 {:.2} s, speed-up {:.1}x, simulated {:.0} s)",
            s.jobs,
            s.jobs as f64 / secs,
            hwm(),
            s.warm_share * 100.0,
            s.standby_share * 100.0,
            s.cold_share * 100.0,
            s.start_p90_s,
            s.loop_speedup,
            s.end_s,
        );
    }
}
