//! The simulator's accounting, checked against hand-computed traces.

use std::io::Write;
use std::path::PathBuf;

use super::*;

/// A trace file that removes itself.
struct TempTrace(PathBuf);

impl TempTrace {
    fn new(name: &str, text: &str) -> TempTrace {
        let path =
            std::env::temp_dir().join(format!("hearth-pool-{}-{name}.csv", std::process::id()));
        let mut f = File::create(&path).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        TempTrace(path)
    }
}

impl Drop for TempTrace {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

macro_rules! assert_close {
    ($a:expr, $b:expr) => {
        assert!(
            close($a, $b),
            "{} = {} but expected {}",
            stringify!($a),
            $a,
            $b
        )
    };
}

/// Caller a: job 0 at 0 s for 10 s, then 5 s later job 1 for 10 s.
/// Caller b: job 0 at 2 s for 4 s. Cold start 30 s, promote 1 s, warm 0.1 s.
const TINY: &str = "caller,seq,think_s,duration_s,profile,gpus
a,0,0,10,gpu-1,1
a,1,5,10,gpu-1,1
b,0,2,4,gpu-1,
";

fn tiny(kind: &str) -> Summary {
    let t = TempTrace::new(&format!("tiny-{}", kind.replace(':', "_")), TINY);
    simulate(&t.0, kind.parse().unwrap(), &SimParams::default()).unwrap()
}

const H: f64 = 3600.0;

#[test]
fn fresh_on_the_tiny_trace() {
    let s = tiny("fresh");
    // a: 0 -> start 30, end 40; 45 -> 75, 85. b: 2 -> 32, 36.
    assert_eq!((s.jobs, s.callers, s.pods_started), (3, 2, 3));
    assert_close!(s.cold_share, 1.0);
    assert_close!(s.start_p50_s, 30.0);
    assert_close!(s.start_p99_s, 30.0);
    assert_close!(s.mean_loop_s, (85.0 + 36.0) / 2.0);
    assert_close!(s.fresh_loop_s, 60.5);
    assert_close!(s.loop_speedup, 1.0);
    // Pods held from their start: 40 + 40 + 34 GPU-seconds.
    assert_close!(s.gpu_hours_held, 114.0 / H);
    assert_close!(s.gpu_hours_active, 114.0 / H);
    assert_close!(s.peak_gpus_held, 2.0);
    assert_close!(s.end_s, 85.0);
}

#[test]
fn keepalive_on_the_tiny_trace() {
    let s = tiny("keepalive:60");
    // a: cold 0 -> 30, end 40; warm at 45 -> 45.1, end 55.1. b: cold 2 -> 32, 36.
    assert_close!(s.warm_share, 1.0 / 3.0);
    assert_close!(s.cold_share, 2.0 / 3.0);
    // Latencies 0.1, 30, 30: nearest-rank p50 is the second.
    assert_close!(s.start_p50_s, 30.0);
    assert_close!(s.start_mean_s, 60.1 / 3.0);
    assert_close!(s.mean_loop_s, (55.1 + 36.0) / 2.0);
    assert_close!(s.loop_speedup, 60.5 / 45.55);
    // Until 55.1: a's pod active 40 + 10.1, warm 5; b's active 34, warm 19.1.
    assert_close!(s.gpu_hours_active, 84.1 / H);
    assert_close!(s.gpu_hours_warm_idle, 24.1 / H);
    assert_close!(s.gpu_hours_held, 108.2 / H);
    assert_eq!(s.pods_started, 2);
}

#[test]
fn firepool_on_the_tiny_trace() {
    let s = tiny("firepool");
    // Two standby pods are ready at 0. a promotes one (0 -> 1, end 11), b the
    // other (2 -> 3, end 7); each handover starts a refill (one share each).
    // a's next job finds its warm pod (16 -> 16.1, end 26.1).
    assert_eq!(s.pods_started, 4);
    assert_close!(s.standby_share, 2.0 / 3.0);
    assert_close!(s.warm_share, 1.0 / 3.0);
    assert_close!(s.cold_share, 0.0);
    assert_close!(s.start_p50_s, 1.0);
    assert_close!(s.start_p90_s, 1.0);
    assert_close!(s.mean_loop_s, (26.1 + 7.0) / 2.0);
    assert_close!(s.loop_speedup, 60.5 / 16.55);
    // Active: a's pod 11 + 10.1, b's 5. Warm: a's 5, b's 19.1 (7 -> 26.1).
    // Standby (1/8 GPU each): b's pod 0 -> 2, refills 0 -> 26.1 and 2 -> 26.1.
    assert_close!(s.gpu_hours_active, 26.1 / H);
    assert_close!(s.gpu_hours_warm_idle, 24.1 / H);
    assert_close!(s.gpu_hours_standby, 0.125 * (2.0 + 26.1 + 24.1) / H);
    assert_close!(s.gpu_hours_held, (26.1 + 24.1 + 6.525) / H);
    // Both pods active (or one warm) plus two refill shares.
    assert_close!(s.peak_gpus_held, 2.25);
}

#[test]
fn firepool_opens_ready_for_every_caller_as_always_on_does() {
    // Five callers open within 4 s, one job each of 10 s.
    let mut text = String::from("caller,seq,think_s,duration_s,profile\n");
    for c in 0..5 {
        writeln!(text, "c{c},0,{c},10,gpu-1").unwrap();
    }
    let t = TempTrace::new("herd", &text);
    let run = |initial| {
        let params = SimParams {
            standby_initial: initial,
            ..SimParams::default()
        };
        simulate(&t.0, Kind::Firepool, &params).unwrap()
    };
    // By default it expects each caller's first job: all promoted.
    let s = run(None);
    assert_close!(s.cold_share, 0.0);
    assert_close!(s.start_p90_s, 1.0);
    // Without, its two standby pods go to the first two; three wait for
    // pods started at their handovers or arrivals.
    let s = run(Some(0));
    assert_close!(s.cold_share, 3.0 / 5.0);
    assert!(s.start_p90_s >= 27.0, "{}", s.start_p90_s);
}

#[test]
fn always_on_on_the_tiny_trace() {
    let s = tiny("always-on");
    // One whole pod per caller, ready at 0 and held to the end (26.1).
    assert_eq!(s.pods_started, 2);
    assert_close!(s.standby_share, 2.0 / 3.0);
    assert_close!(s.mean_loop_s, 16.55);
    assert_close!(s.gpu_hours_held, 2.0 * 26.1 / H);
    assert_close!(s.gpu_hours_standby, 2.0 / H);
    assert_close!(s.peak_gpus_held, 2.0);
}

#[test]
fn the_json_has_the_promised_keys() {
    let v = serde_json::to_value(tiny("firepool")).unwrap();
    for key in [
        "policy",
        "jobs",
        "warm_share",
        "standby_share",
        "cold_share",
        "start_p50_s",
        "start_p90_s",
        "start_p99_s",
        "mean_loop_s",
        "loop_speedup",
        "gpu_hours_held",
        "peak_gpus_held",
    ] {
        assert!(v.get(key).is_some(), "{key}");
    }
    assert_eq!(v["policy"], "firepool");
}

#[test]
fn compare_runs_every_policy_and_draws_them() {
    let t = TempTrace::new("compare", TINY);
    let c = compare(&t.0, &Kind::comparison_set(), &SimParams::default()).unwrap();
    let names: Vec<&str> = c.summaries.iter().map(|s| s.policy.as_str()).collect();
    assert_eq!(names, ["fresh", "always-on", "keepalive:60", "firepool"]);
    for n in names {
        let texts = svg::tests::texts(&c.svg);
        assert!(texts.iter().any(|t| t.starts_with(n)), "{n} in the legend");
    }
    let table = Summary::table(&c.summaries);
    assert_eq!(table.lines().count(), 5);
    let t = targets(TraceKind::Agent, &c.summaries);
    assert_eq!(t.len(), 4);
    // 2 standby + 1 warm of 3.
    assert!(t[0].met);
}

#[test]
fn malformed_traces_are_refused_with_their_line() {
    let cases = [
        ("caller,seq,think,duration_s,profile\n", 1, "header"),
        (
            "caller,seq,think_s,duration_s,profile\na,0,0,1,gpu-1\nb,0,0,1,gpu-1\na,1,0,1,gpu-1\n",
            4,
            "grouped by caller",
        ),
        (
            "caller,seq,think_s,duration_s,profile\na,0,0,1,gpu-1\na,2,0,1,gpu-1\n",
            3,
            "seq 2",
        ),
        (
            "caller,seq,think_s,duration_s,profile\na,0,-1,1,gpu-1\n",
            2,
            "think_s",
        ),
        (
            "caller,seq,think_s,duration_s,profile\na,0,0,1,gpu-1\na,1,5e7,1,gpu-1\nb,0,0,1,gpu-1\nb,1,1e8,1,gpu-1\n",
            5,
            "at most 1e8 s",
        ),
        (
            "caller,seq,think_s,duration_s,profile\na,0,0,1,h100\n",
            2,
            "unknown",
        ),
        (
            "caller,seq,think_s,duration_s,profile,gpus\na,0,0,1,gpu-1,0.3\n",
            2,
            "1/8",
        ),
        (
            "caller,seq,think_s,duration_s,profile\na,0,0,1,gpu-1,1\n",
            2,
            "too many",
        ),
        (
            "caller,seq,think_s,duration_s,profile\r\na,0,0,1,gpu-1\r\n\r\na,x,0,1,gpu-1\r\n",
            4,
            "seq must be",
        ),
        (
            "caller,seq,think_s,duration_s,profile\na,0,0,1,gpu-1\n\na,1,0,1,\"gpu-1\n",
            4,
            "unterminated",
        ),
    ];
    for (i, (text, line, needle)) in cases.into_iter().enumerate() {
        let t = TempTrace::new(&format!("bad{i}"), text);
        match simulate(&t.0, Kind::Firepool, &SimParams::default()) {
            Err(Error::Trace { line: l, message }) => {
                assert_eq!(l, line, "{message}");
                assert!(message.contains(needle), "{message}");
            }
            other => panic!("case {i}: {other:?}"),
        }
    }
}

#[test]
fn rows_are_read_lazily_across_buffer_edges_and_blank_lines() {
    // A caller name longer than a read buffer, CRLF line ends, blank lines,
    // no final newline, a CPU profile from the profile table.
    let long = "x".repeat(3000);
    let mut text = String::from("caller,seq,think_s,duration_s,profile\r\n");
    for seq in 0..50 {
        text.push_str(&format!("{long},{seq},0.5,0.5,gpu-1\r\n"));
        if seq % 7 == 0 {
            text.push_str("\r\n");
        }
    }
    text.push_str("cpu,0,1,1,cpu-small");
    let t = TempTrace::new("lazy", &text);
    let s = simulate(
        &t.0,
        Kind::KeepAlive {
            keep_alive: Duration::from_secs(10),
        },
        &SimParams::default(),
    )
    .unwrap();
    assert_eq!(s.jobs, 51);
    assert_eq!(s.callers, 2);
    // Every job of the long caller after the first is warm; the CPU job is cold.
    assert_close!(s.warm_share, 49.0 / 51.0);
}

#[test]
fn a_byte_order_mark_and_quoted_fields_are_read() {
    let t = TempTrace::new(
        "bom",
        "\u{feff}caller,seq,think_s,duration_s,profile,gpus\n\"a,1\",0,0,10,gpu-1,1\n\"a,1\", 1 ,\"5\",10,\"gpu-1\",\n",
    );
    let s = simulate(
        &t.0,
        Kind::KeepAlive {
            keep_alive: Duration::from_secs(60),
        },
        &SimParams::default(),
    )
    .unwrap();
    assert_eq!((s.jobs, s.callers), (2, 1));
    assert_close!(s.warm_share, 0.5);
}

#[test]
fn a_pool_too_small_for_its_jobs_is_an_error_not_a_hang() {
    let t = TempTrace::new("small", TINY);
    let params = SimParams {
        gpus: Some(0),
        ..SimParams::default()
    };
    assert!(matches!(
        simulate(&t.0, Kind::Firepool, &params),
        Err(Error::Policy(policy::Error::Unplaceable { .. }))
    ));
}

#[test]
fn capacity_limits_queue_jobs_and_count_in_latency() {
    // One GPU for two callers: fresh must queue b behind a.
    let t = TempTrace::new(
        "queue",
        "caller,seq,think_s,duration_s,profile\na,0,0,10,gpu-1\nb,0,0,10,gpu-1\n",
    );
    let params = SimParams {
        gpus: Some(1),
        ..SimParams::default()
    };
    let s = simulate(&t.0, Kind::Fresh, &params).unwrap();
    // a: 0 -> 30, end 40; b waits for a's GPU: 40 -> 70, end 80. (Above
    // 65.5 s percentiles are within 0.05 %; the mean is exact.)
    assert_close!(s.start_mean_s, (30.0 + 70.0) / 2.0);
    assert!((s.start_p99_s - 70.0).abs() < 0.035);
    assert_close!(s.mean_loop_s, 60.0);
    assert_close!(s.peak_gpus_held, 1.0);
}

#[test]
fn generated_traces_simulate_end_to_end() {
    for kind in [TraceKind::Agent, TraceKind::Rl] {
        let mut buf = Vec::new();
        generate(kind, 12, 600, 7, &mut buf).unwrap();
        let t = TempTrace::new(&format!("gen-{kind}"), std::str::from_utf8(&buf).unwrap());
        let c = compare(&t.0, &Kind::comparison_set(), &SimParams::default()).unwrap();
        for s in &c.summaries {
            assert_eq!(s.jobs, 600, "{}", s.policy);
            assert_close!(s.warm_share + s.standby_share + s.cold_share, 1.0);
            assert!(s.gpu_hours_held >= s.gpu_hours_active);
        }
        let fresh = &c.summaries[0];
        assert_close!(fresh.cold_share, 1.0);
        assert_close!(fresh.loop_speedup, 1.0);
    }
}

/// Firepool against every fixed keep-alive and always-on, on seeded members
/// of both trace families of the frontier benchmark (smaller, so the test
/// stays quick): the frontier targets all hold. Deterministic: nothing here
/// is timed.
#[test]
fn firepool_meets_the_frontier_targets_on_both_families() {
    let members = [
        // `hearth simulate gen --kind agent` as it comes: sessions whose
        // first few pauses are short, until a long one.
        (TraceKind::Agent, 1, 100, 10_000),
        (TraceKind::AgentHeavy, 1, 60, 6_000),
        (TraceKind::AgentHeavy, 2, 90, 9_000),
        // 157 sessions open within 10 s: always-on has a pod ready for each.
        (TraceKind::AgentHeavy, 16, 157, 7_850),
        // Two steps come 15 % later than any period before them: every
        // worker's pod re-warmed for them has had its keep-alive run out.
        (TraceKind::Rl, 109, 32, 20_480),
        (TraceKind::RlMixed, 1, 16, 6_400),
        (TraceKind::RlMixed, 3, 24, 9_600),
    ];
    for (kind, seed, callers, jobs) in members {
        let mut buf = Vec::new();
        generate(kind, callers, jobs, seed, &mut buf).unwrap();
        let t = TempTrace::new(
            &format!("frontier-{kind}-{seed}"),
            std::str::from_utf8(&buf).unwrap(),
        );
        let c = compare(&t.0, &frontier_set(), &SimParams::default()).unwrap();
        let targets = frontier_targets(&c.summaries);
        assert_eq!(targets.len(), 5);
        let missed: Vec<&Target> = targets.iter().filter(|t| !t.met).collect();
        assert!(
            missed.is_empty(),
            "{} seed {seed}: {missed:?}\n{}",
            kind.describe(seed),
            Summary::table(&c.summaries)
        );
        // The frontier panel shows every policy run.
        assert_eq!(c.svg.matches("<circle").count(), frontier_set().len());
        // The clairvoyant floor lies between the work itself and what the
        // policies that serve every job warm hold.
        let held = |p: &str| {
            let s = c.summaries.iter().find(|s| s.policy.starts_with(p));
            s.map(|s| (s.gpu_hours_active, s.gpu_hours_held)).unwrap()
        };
        let ((active, firepool), (_, always_on)) = (held("firepool"), held("always-on"));
        assert!(
            active <= c.floor_gpu_hours && c.floor_gpu_hours <= firepool.min(always_on),
            "{} seed {seed}: floor {} against active {active}, firepool {firepool}, always-on {always_on}",
            kind.describe(seed),
            c.floor_gpu_hours
        );
        // A floor above the GPU-hours target says so: no policy that starts
        // every job warm can meet it.
        let mut at = c.clone();
        at.floor_gpu_hours = always_on * 0.6;
        assert_eq!(
            at.floor_of_always_on().map(|r| (r * 100.0).round()),
            Some(60.0)
        );
        assert!(
            at.floor_note().contains("above the 0.55 target"),
            "{}",
            at.floor_note()
        );
        at.floor_gpu_hours = always_on * 0.5;
        assert!(!at.floor_note().contains("above"), "{}", at.floor_note());
    }
}

#[test]
fn a_caller_across_profiles_is_one_loop_in_the_simulator() {
    // a alternates a whole-GPU and a quarter-GPU profile with 0.1 s thinks:
    // its pauses are short as a loop, long in each pool on its own.
    let mut text = String::from("caller,seq,think_s,duration_s,profile,gpus\n");
    for seq in 0..40 {
        let (profile, gpus, dur) = if seq % 2 == 0 {
            ("gpu-1", "1", 3.0)
        } else {
            ("gpu-quarter", "0.25", 3.0)
        };
        text.push_str(&format!("a,{seq},0.1,{dur},{profile},{gpus}\n"));
    }
    let t = TempTrace::new("one-loop", &text);
    let s = simulate(&t.0, Kind::Firepool, &SimParams::default()).unwrap();
    // After each pool's first job, every job finds its warm pod: the pod
    // here is held while the loop runs in the other pool.
    assert_close!(s.warm_share, 38.0 / 40.0);
}

/// Each profile's pool has its own objective, so the figures come pool by
/// pool too: they add up to the run's, and the floor's to its own, split by
/// what holds the GPUs.
#[test]
fn figures_by_profile_add_up_to_the_whole() {
    let mut buf = Vec::new();
    generate(TraceKind::RlMixed, 12, 2_400, 1, &mut buf).unwrap();
    let t = TempTrace::new("by-profile", std::str::from_utf8(&buf).unwrap());
    let c = compare(&t.0, &frontier_set(), &SimParams::default()).unwrap();
    for s in &c.summaries {
        let ps = &s.profiles;
        // In the order the trace names them: its first job is a rollout.
        let profiles: Vec<&str> = ps.iter().map(|p| p.profile.as_str()).collect();
        assert_eq!(profiles, ["gpu-1", "gpu-quarter"], "{}", s.policy);
        assert_eq!(ps.iter().map(|p| p.jobs).sum::<u64>(), s.jobs);
        assert!(ps.iter().all(|p| p.jobs > 0));
        let sum = |f: fn(&ProfileSummary) -> f64| ps.iter().map(f).sum::<f64>();
        let weighted = |f: fn(&ProfileSummary) -> f64| {
            ps.iter().map(|p| f(p) * p.jobs as f64).sum::<f64>() / s.jobs as f64
        };
        assert_close!(sum(|p| p.gpu_hours_held), s.gpu_hours_held);
        assert_close!(sum(|p| p.gpu_hours_active), s.gpu_hours_active);
        assert_close!(sum(|p| p.gpu_hours_warm_idle), s.gpu_hours_warm_idle);
        assert_close!(sum(|p| p.gpu_hours_standby), s.gpu_hours_standby);
        assert_close!(weighted(|p| p.warm_share), s.warm_share);
        assert_close!(weighted(|p| p.standby_share), s.standby_share);
        assert_close!(weighted(|p| p.cold_share), s.cold_share);
        // The run's p90 lies between its pools' p90s.
        let p90s = ps.iter().map(|p| p.start_p90_s);
        let (lo, hi) = p90s.fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(p), hi.max(p)));
        assert!(lo <= s.start_p90_s && s.start_p90_s <= hi, "{}", s.policy);
    }
    let floors = &c.floor_by_profile;
    let profiles: Vec<&str> = floors.iter().map(|f| f.profile.as_str()).collect();
    assert_eq!(profiles, ["gpu-1", "gpu-quarter"]);
    assert_close!(
        floors.iter().map(|f| f.gpu_hours_held).sum::<f64>(),
        c.floor_gpu_hours
    );
    let firepool = c.summaries.iter().find(|s| s.policy == "firepool").unwrap();
    for (f, p) in floors.iter().zip(&firepool.profiles) {
        assert_eq!(f.jobs, p.jobs);
        assert_close!(
            f.gpu_hours_active + f.gpu_hours_warm_idle + f.gpu_hours_standby,
            f.gpu_hours_held
        );
        // Both pods are worth shrinking through the steps' pauses.
        assert!(f.gpu_hours_standby > 0.0, "{f:?}");
        // Firepool's pods run the same jobs, and wait for a promotion now
        // and then: active at least as long as the floor's.
        assert!(
            f.gpu_hours_active <= p.gpu_hours_active + 1e-9,
            "{f:?} {p:?}"
        );
    }
    let table = c.profile_table(&["always-on", "firepool", "no such policy"]);
    assert_eq!(table.lines().count(), 1 + 2 * 3, "{table}");
    for profile in ["gpu-1", "gpu-quarter"] {
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with(profile)).collect();
        assert_eq!(rows.len(), 3, "{table}");
        assert!(
            rows[0].contains("always-on") && rows[1].contains("firepool"),
            "{table}"
        );
        assert!(rows[2].contains("clairvoyant floor"), "{table}");
    }
}

#[test]
fn benchmark_seeds_take_lists_and_inclusive_ranges_and_refuse_the_rest() {
    assert_eq!(super::seeds("1,2,3"), Ok(vec![1, 2, 3]));
    assert_eq!(super::seeds(" 7..9, 2 "), Ok(vec![7, 8, 9, 2]));
    assert_eq!(super::seeds("1..24").map(|s| s.len()), Ok(24));
    assert!(super::seeds("1..x").is_err());
    assert!(super::seeds("").is_err());
    assert!(super::seeds("1;2").is_err());
}

/// The objective is the pool's to choose (a profile's `start_objective`):
/// a stricter one buys warm starts with GPU time, a looser one gives GPU
/// time back, and each that the trace allows is met.
#[test]
fn a_stricter_start_objective_buys_warm_starts_with_gpu_time() {
    let mut buf = Vec::new();
    generate(TraceKind::AgentHeavy, 60, 6_000, 1, &mut buf).unwrap();
    let t = TempTrace::new("objectives", std::str::from_utf8(&buf).unwrap());
    let run = |objective: &str| {
        let params = SimParams::default().with_objective(objective.parse().unwrap());
        simulate(&t.0, Kind::Firepool, &params).unwrap()
    };
    let (p50, p90, p99) = (run("p50:warm"), run("p90:warm"), run("p99:warm"));
    let table = || Summary::table(&[p50.clone(), p90.clone(), p99.clone()]);
    assert!(
        p50.gpu_hours_held < p90.gpu_hours_held && p90.gpu_hours_held < p99.gpu_hours_held,
        "{}",
        table()
    );
    assert!(
        p50.warm_share < p90.warm_share && p90.warm_share < p99.warm_share,
        "{}",
        table()
    );
    // p99 is beyond this trace (first jobs, sessions' concurrent calls):
    // it is bought as far as it goes.
    assert!(
        p50.warm_share >= 0.5 && p90.warm_share >= 0.9,
        "{}",
        table()
    );
    assert!(
        p50.start_p50_s <= 0.1 && p90.start_p90_s <= 0.1,
        "{}",
        table()
    );
    // At a promotion at worst, keep-alives are chosen by their cost alone.
    let standby = run("p90:standby");
    assert!(
        standby.start_p90_s <= 1.0,
        "{}",
        Summary::table(std::slice::from_ref(&standby))
    );
    assert!(standby.gpu_hours_held < p90.gpu_hours_held);
}

#[test]
fn policies_run_side_by_side_give_their_results_in_order() {
    // More jobs than threads, of uneven lengths, so that workers take them
    // out of order.
    let jobs = |i: usize| {
        std::thread::sleep(std::time::Duration::from_millis((i % 3) as u64));
        i * i
    };
    assert_eq!(
        run_all(20, jobs),
        (0..20).map(|i| i * i).collect::<Vec<_>>()
    );
    assert_eq!(run_all(1, jobs), vec![0]);
    assert!(run_all(0, jobs).is_empty());
}

#[test]
#[should_panic(expected = "job 7 failed")]
fn a_policy_run_that_panics_panics_the_comparison() {
    run_all(10, |i| assert!(i != 7, "job {i} failed"));
}
