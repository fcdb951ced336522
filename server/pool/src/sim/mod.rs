//! The trace simulator: replays closed caller loops through the same
//! [`Pool`] code the scheduler runs, with a virtual clock.
//!
//! Each trace row is a job; a caller submits its next job `think_s` after its
//! previous one finished (the first `think_s` after time 0). The simulator
//! keeps an event heap of timed events (job arrivals, pods ready after the
//! cold start, job ends, and the pool's own wake-ups), and models only the
//! runtime's timing: a pod started takes `cold_start`; a job assigned a warm
//! pod starts `warm` later, a promoted standby pod `promote` later, a pod
//! started for it at once (its cold start already elapsed); released pods are
//! gone at once. A job that waited for a pod to start counts as cold, even if
//! the pod that came up first was a standby refill. A job's start latency runs from its submission to its start,
//! queueing included. A standby pod bound to a caller ahead of its burst
//! (`Prewarm`) is warm once its binding is done, `promote` after the
//! decision; a job that comes sooner waits for it. A caller whose rows use
//! several profiles is one loop: each pool it used hears (`LoopBusy`) when it
//! starts or stops running jobs in another.
//!
//! Pools are provisioned before the trace begins: whatever a policy starts at
//! its first tick (standby pods, the fixed pool) is ready at time 0. Both
//! policies that provision know the pool's callers: `always-on` opens with a
//! pod for each, `firepool` expects each caller's first job as a handover
//! ([`SimParams::standby_initial`]) and forgets them as any burst. GPU-hours
//! are counted from time 0 to the end of the last loop.
//!
//! Memory follows callers and live pods, not the trace's length: one pass
//! validates the trace and records where each caller's rows lie, then each
//! caller's rows are read lazily by offset, a small buffer at a time, as its
//! loop advances (so the trace must list each caller's rows together, in
//! `seq` order). Latency percentiles come from a histogram exact to the
//! millisecond below 65.5 s.

mod bound;
mod generate;
mod metrics;
mod svg;
mod trace;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use bound::{ProfileFloor, clairvoyant_by_profile};
pub use generate::{PROFILE, TraceKind, generate};

use crate::Instant;
use crate::policy::{
    self, CallerId, Config, Decision, Event, JobId, Kind, Loop, PodId, Pool, Request, Source,
    TenantId,
};
use crate::time::millis;
use metrics::{Hist, Series};
use trace::{Cursor, Index, PoolInfo, Row};

/// Errors of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading the trace: {0}")]
    Io(#[from] std::io::Error),
    #[error("trace line {line}: {message}")]
    Trace { line: u64, message: String },
    #[error(transparent)]
    Policy(#[from] policy::Error),
    #[error("drawing the chart: {0}")]
    Chart(String),
    #[error(
        "the simulation stalled at {at_s:.1} s: {waiting} jobs can never be placed (too few GPUs or pods?)"
    )]
    Stalled { at_s: f64, waiting: usize },
}

impl From<hearth_core::csv_lines::LineError> for Error {
    fn from(e: hearth_core::csv_lines::LineError) -> Self {
        use hearth_core::csv_lines::LineError;
        match e {
            LineError::Unterminated(line) => Error::Trace {
                line,
                message: "unterminated quoted field".to_owned(),
            },
            LineError::Io(e) => Error::Io(e),
        }
    }
}

/// How the simulated runtime behaves, and the pool configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimParams {
    /// Time for a new pod to become ready.
    pub cold_start: Duration,
    /// Time to bind a job to a promoted standby pod.
    pub promote: Duration,
    /// Time to hand a job to a warm pod.
    pub warm: Duration,
    /// Template for every pool. The simulator sets, per pool from the trace:
    /// `pod_shares` (the largest pod of the profile), `start_estimate`
    /// (`cold_start`), and unless overridden below `gpus`, `max_pods` and
    /// `standby.max`.
    pub pool: Config,
    /// GPUs per pool. Default: enough that capacity never binds (1.25 x the
    /// pool's callers x its largest pod and a standby share, plus one).
    pub gpus: Option<u32>,
    /// Pod limit per pool. Default: none.
    pub max_pods: Option<u32>,
    /// Standby ceiling per pool. Default: the pool's callers.
    pub standby_max: Option<u32>,
    /// Size of `always-on` without a size. Default: one pod per caller of
    /// the pool (no caller ever waits for another's pod).
    pub always_on_size: Option<u32>,
    /// Handovers a pool with standby (`firepool`) expects as it opens
    /// ([`StandbyConfig::initial`](crate::policy::StandbyConfig::initial)).
    /// Default: the pool's callers, what `always-on`'s size knows, so both
    /// open ready for every caller's first job.
    pub standby_initial: Option<u32>,
    /// GPUs per pod of each profile, for rows without a `gpus` value.
    pub profiles: BTreeMap<String, f64>,
}

impl Default for SimParams {
    fn default() -> SimParams {
        let mut profiles: BTreeMap<String, f64> = hearth_core::Profile::defaults()
            .into_iter()
            .map(|p| (p.name, f64::from(p.gpus)))
            .collect();
        profiles.insert(PROFILE.to_owned(), 1.0);
        SimParams {
            cold_start: Duration::from_secs(30),
            promote: Duration::from_secs(1),
            warm: Duration::from_millis(100),
            pool: Config::default(),
            gpus: None,
            max_pods: None,
            standby_max: None,
            always_on_size: None,
            standby_initial: None,
            profiles,
        }
    }
}

impl SimParams {
    /// Every pool aims at `objective`, as a profile of the service does.
    pub fn with_objective(mut self, objective: hearth_core::StartObjective) -> SimParams {
        self.pool.objective = Some(objective.into());
        self
    }

    fn pool_config(&self, info: &PoolInfo) -> Config {
        let mut c = self.pool.clone();
        let per = c.shares_per_gpu.max(1);
        c.pod_shares = info.max_shares;
        c.start_estimate = self.cold_start;
        // Each caller's pod and a standby pod beside it.
        let standby = c.standby.shares.0.min(info.max_shares.0);
        c.gpus = self.gpus.unwrap_or_else(|| {
            let shares = f64::from(info.max_shares.0) + f64::from(standby);
            let gpus = f64::from(info.callers) * shares / f64::from(per);
            (gpus * 1.25).ceil() as u32 + 1
        });
        c.max_pods = self.max_pods.unwrap_or(u32::MAX);
        c.standby.max = self.standby_max.unwrap_or(info.callers).max(c.standby.min);
        c.standby.initial = self.standby_initial.unwrap_or(info.callers);
        c
    }

    fn resolve(&self, kind: Kind, info: &PoolInfo) -> Kind {
        match kind {
            Kind::AlwaysOn { size: None } => Kind::AlwaysOn {
                size: Some(self.always_on_size.unwrap_or(info.callers).max(1)),
            },
            k => k,
        }
    }
}

/// What one policy did on one trace. Serialises with the keys the CLI's
/// `--json` promises.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub policy: String,
    pub jobs: u64,
    pub callers: u64,
    /// Fractions of jobs served by their caller's warm pod, by a standby pod
    /// ready when they arrived, or cold (they waited for a pod start).
    pub warm_share: f64,
    pub standby_share: f64,
    pub cold_share: f64,
    /// Start latency (submission to start, queueing included), nearest-rank.
    pub start_p50_s: f64,
    pub start_p90_s: f64,
    pub start_p99_s: f64,
    pub start_mean_s: f64,
    /// Mean over callers of the time from 0 to the end of the caller's last job.
    pub mean_loop_s: f64,
    /// The same for a fresh pod per job with unlimited capacity: every job
    /// starts `cold_start` after its submission.
    pub fresh_loop_s: f64,
    /// `fresh_loop_s / mean_loop_s`.
    pub loop_speedup: f64,
    /// GPU-hours held, total and by what held them. A standby pod holds only
    /// its share; a starting pod counts under what it starts for.
    pub gpu_hours_held: f64,
    pub gpu_hours_active: f64,
    pub gpu_hours_warm_idle: f64,
    pub gpu_hours_standby: f64,
    pub peak_gpus_held: f64,
    /// Simulated time at which the last loop ended.
    pub end_s: f64,
    pub pods_started: u64,
    /// The same, pool by pool: one per profile, in the order the trace
    /// first names them. A pool has its own start-latency objective.
    #[serde(default)]
    pub profiles: Vec<ProfileSummary>,
}

/// What one policy did in one profile's pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    pub profile: String,
    pub jobs: u64,
    pub warm_share: f64,
    pub standby_share: f64,
    pub cold_share: f64,
    pub start_p50_s: f64,
    pub start_p90_s: f64,
    pub start_p99_s: f64,
    pub gpu_hours_held: f64,
    pub gpu_hours_active: f64,
    pub gpu_hours_warm_idle: f64,
    pub gpu_hours_standby: f64,
}

/// Every policy on one trace.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub summaries: Vec<Summary>,
    /// Start-latency CDF per policy (log-x) and GPUs held over time.
    pub svg: String,
    /// The clairvoyant floor under GPU-hours of any policy that starts every
    /// job warm: its pools' floors together.
    pub floor_gpu_hours: f64,
    /// The same, profile by profile ([`clairvoyant_by_profile`]).
    pub floor_by_profile: Vec<ProfileFloor>,
}

impl Comparison {
    /// The floor against always-on's GPU-hours, where always-on ran.
    pub fn floor_of_always_on(&self) -> Option<f64> {
        self.summaries
            .iter()
            .find(|s| s.policy.starts_with("always-on"))
            .map(|on| self.floor_gpu_hours / on.gpu_hours_held.max(f64::MIN_POSITIVE))
    }

    /// The floor in words, against always-on's GPU-hours where it ran, and
    /// whether it lies above the frontier's GPU-hours target.
    pub fn floor_note(&self) -> String {
        let of_always_on = self.floor_of_always_on().map_or_else(String::new, |r| {
            let above = if r > FRONTIER_GPU_HOURS {
                format!(
                    " (above the {FRONTIER_GPU_HOURS} target: starting every job warm costs more \
                     even knowing every arrival)"
                )
            } else {
                String::new()
            };
            format!(", {r:.3} of always-on{above}")
        });
        format!(
            "  clairvoyant floor (every job warm): {:.1} GPU-h{of_always_on}",
            self.floor_gpu_hours
        )
    }

    /// Each profile's pool under the `policies` named (those that ran),
    /// then its clairvoyant floor: GPU-hours by what holds them, so that
    /// where a policy spends above the floor shows pool by pool.
    pub fn profile_table(&self, policies: &[&str]) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{:<16} {:<18} {STARTS} {HELD}", "profile", "policy");
        let rows: Vec<&Summary> = policies
            .iter()
            .filter_map(|&name| self.summaries.iter().find(|r| r.policy == name))
            .collect();
        for floor in &self.floor_by_profile {
            for r in &rows {
                let Some(p) = r.profiles.iter().find(|p| p.profile == floor.profile) else {
                    continue;
                };
                let _ = writeln!(
                    s,
                    "{:<16} {:<18} {} {}",
                    p.profile,
                    r.policy,
                    starts(
                        p.jobs,
                        [p.warm_share, p.standby_share, p.cold_share],
                        [p.start_p50_s, p.start_p90_s, p.start_p99_s]
                    ),
                    held([
                        p.gpu_hours_held,
                        p.gpu_hours_active,
                        p.gpu_hours_warm_idle,
                        p.gpu_hours_standby
                    ]),
                );
            }
            // Every job warm; no start latency is simulated.
            let mut cells = ["-"; 7].map(String::from);
            cells[0] = floor.jobs.to_string();
            cells[1] = "100.0%".to_owned();
            let _ = writeln!(
                s,
                "{:<16} {:<18} {} {}",
                floor.profile,
                "clairvoyant floor",
                starts_cells(cells),
                held([
                    floor.gpu_hours_held,
                    floor.gpu_hours_active,
                    floor.gpu_hours_warm_idle,
                    floor.gpu_hours_standby
                ]),
            );
        }
        s
    }
}

/// The policies the frontier holds firepool against always-on with, as a
/// [`Comparison::profile_table`] shows them.
pub const FRONTIER_PAIR: [&str; 2] = ["always-on", "firepool"];

/// The target for firepool's GPU-hours, against always-on's: the Firepool
/// paper's, and the frontier's.
pub const FRONTIER_GPU_HOURS: f64 = 0.55;

/// What the GPU-hours [`Target`] checks, as it is named.
pub const GPU_HOURS_TARGET: &str = "firepool GPU-hours / always-on";

/// Replays the trace at `path` through one policy.
pub fn simulate(path: &Path, kind: Kind, params: &SimParams) -> Result<Summary, Error> {
    let file = File::open(path)?;
    let index = Index::build(&file, &params.profiles, params.pool.shares_per_gpu)?;
    Ok(Run::new(&file, &index, kind, params)?.run()?.0)
}

/// Reads every row of the trace at `path` the way a simulation does (the
/// indexing pass, then each caller's rows through its cursor, one row per
/// caller in turn) without running a policy; returns the rows read. For the
/// `simulate` bench, which times reading apart from simulating.
pub fn read_trace(path: &Path, params: &SimParams) -> Result<u64, Error> {
    let file = File::open(path)?;
    let index = Index::build(&file, &params.profiles, params.pool.shares_per_gpu)?;
    let mut cursors: Vec<Cursor<'_>> = index
        .callers
        .iter()
        .map(|span| Cursor::new(&file, span))
        .collect();
    let mut rows = 0;
    while !cursors.is_empty() {
        let mut i = 0;
        while i < cursors.len() {
            if cursors[i].next(&index)?.is_some() {
                rows += 1;
                i += 1;
            } else {
                cursors.swap_remove(i);
            }
        }
    }
    Ok(rows)
}

/// Replays the trace through every policy in `kinds` (see
/// [`Kind::comparison_set`]), indexing it once, and draws the chart. The
/// policies run side by side, one at a time on each core: every run reads
/// the trace through its own cursors and shares nothing else.
pub fn compare(path: &Path, kinds: &[Kind], params: &SimParams) -> Result<Comparison, Error> {
    let file = File::open(path)?;
    let index = Index::build(&file, &params.profiles, params.pool.shares_per_gpu)?;
    // The floor, one pass over the trace, beside the policies' runs.
    let (runs, floor_by_profile) = std::thread::scope(|s| {
        let floor = s.spawn(|| bound::floor_of(&file, &index, params));
        let runs = run_all(kinds.len(), |i| {
            Run::new(&file, &index, kinds[i], params)?.run()
        });
        let floor = floor
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (runs, floor)
    });
    let floor_by_profile = floor_by_profile?;
    let mut summaries = Vec::with_capacity(kinds.len());
    let mut curves = Vec::with_capacity(kinds.len());
    // The sweep of fixed keep-alives shows on the frontier only; the other
    // panels keep the comparison set readable.
    let drawn = Kind::comparison_set();
    for (&kind, run) in kinds.iter().zip(runs) {
        let (summary, curve) = run?;
        summaries.push(summary);
        if !matches!(kind, Kind::KeepAlive { .. }) || drawn.contains(&kind) {
            curves.push(curve);
        }
    }
    let title = format!(
        "{} ({} jobs, {} callers; cold start {} s, promote {} s, warm {} s)",
        path.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        index.jobs,
        index.callers.len(),
        params.cold_start.as_secs_f64(),
        params.promote.as_secs_f64(),
        params.warm.as_secs_f64(),
    );
    let points: Vec<svg::Point> = summaries
        .iter()
        .map(|s| svg::Point {
            name: s.policy.clone(),
            gpu_hours: s.gpu_hours_held,
            p90_s: s.start_p90_s,
        })
        .collect();
    Ok(Comparison {
        svg: svg::chart(&title, &curves, &points).map_err(|e| Error::Chart(e.to_string()))?,
        summaries,
        floor_gpu_hours: floor_by_profile.iter().map(|f| f.gpu_hours_held).sum(),
        floor_by_profile,
    })
}

/// `job(0)`, ..., `job(n - 1)`, on as many threads as the machine has cores
/// (at most `n`), each taking the next job as it finishes one; the results in
/// job order. A job's panic is raised again here.
fn run_all<T: Send>(n: usize, job: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(n);
    if threads <= 1 {
        return (0..n).map(job).collect();
    }
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<T>> = (0..n).map(|_| None).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return done;
                        }
                        done.push((i, job(i)));
                    }
                })
            })
            .collect();
        for worker in workers {
            match worker.join() {
                Ok(done) => {
                    for (i, r) in done {
                        results[i] = Some(r);
                    }
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    results
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

impl Summary {
    /// A fixed-width table, one row per policy.
    pub fn table(rows: &[Summary]) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<16} {STARTS} {:>9} {:>8} {HELD} {:>7}",
            "policy", "loop s", "speedup", "peak"
        );
        for r in rows {
            let _ = writeln!(
                s,
                "{:<16} {} {:>9.1} {:>7.1}x {} {:>7.1}",
                r.policy,
                starts(
                    r.jobs,
                    [r.warm_share, r.standby_share, r.cold_share],
                    [r.start_p50_s, r.start_p90_s, r.start_p99_s]
                ),
                r.mean_loop_s,
                r.loop_speedup,
                held([
                    r.gpu_hours_held,
                    r.gpu_hours_active,
                    r.gpu_hours_warm_idle,
                    r.gpu_hours_standby
                ]),
                r.peak_gpus_held,
            );
        }
        s
    }
}

/// The heading of [`starts`]' columns.
const STARTS: &str = "     jobs   warm  standby   cold   p50 s   p90 s   p99 s";

/// Jobs, the shares that started warm, from a standby pod and cold, and
/// the start percentiles (p50, p90, p99, s): the columns every table here
/// shares.
fn starts(jobs: u64, sources: [f64; 3], percentiles: [f64; 3]) -> String {
    let [warm, standby, cold] = sources.map(|x| format!("{:.1}%", x * 100.0));
    let [p50, p90, p99] = percentiles.map(|s| format!("{s:.2}"));
    starts_cells([jobs.to_string(), warm, standby, cold, p50, p90, p99])
}

/// [`starts`]' columns, each cell as given.
fn starts_cells(cells: [String; 7]) -> String {
    let [jobs, warm, standby, cold, p50, p90, p99] = cells;
    format!("{jobs:>9} {warm:>6} {standby:>8} {cold:>6} {p50:>7} {p90:>7} {p99:>7}")
}

/// The heading of [`held`]'s columns.
const HELD: &str = "    GPU-h   active     warm  standby";

/// GPU-hours in all, then active, warm and standby.
fn held(hours: [f64; 4]) -> String {
    let [all, active, warm, standby] = hours;
    format!("{all:>9.1} {active:>8.1} {warm:>8.1} {standby:>8.1}")
}

/// One of the published targets, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub what: String,
    pub goal: String,
    pub got: f64,
    pub met: bool,
}

/// Checks firepool against the targets (from the Firepool paper) on a trace
/// of `kind`, given the summaries of a comparison that includes firepool and
/// always-on. Targets whose policies are missing are left out.
pub fn targets(kind: TraceKind, rows: &[Summary]) -> Vec<Target> {
    let find = |p: &str| {
        rows.iter()
            .find(|r| r.policy == p || r.policy.starts_with(&format!("{p}:")))
    };
    let mut out = Vec::new();
    let Some(fp) = find("firepool") else {
        return out;
    };
    let mut check = |what: &str, goal: &str, got: f64, met: bool| {
        out.push(Target {
            what: what.to_owned(),
            goal: goal.to_owned(),
            got,
            met,
        });
    };
    let warm_standby = fp.warm_share + fp.standby_share;
    check(
        "firepool jobs served warm or standby",
        ">= 0.95",
        warm_standby,
        warm_standby >= 0.95,
    );
    let want = if kind.is_rl() { 10.8 } else { 13.0 };
    check(
        "firepool loop speed-up over fresh",
        &format!(">= {want}x"),
        fp.loop_speedup,
        fp.loop_speedup >= want,
    );
    if let Some(on) = find("always-on") {
        let ratio = fp.gpu_hours_held / on.gpu_hours_held.max(f64::MIN_POSITIVE);
        check(
            GPU_HOURS_TARGET,
            &format!("<= {FRONTIER_GPU_HOURS}"),
            ratio,
            ratio <= FRONTIER_GPU_HOURS,
        );
        let ratio = fp.start_p90_s / on.start_p90_s.max(1e-3);
        check(
            "firepool p90 start / always-on p90",
            "<= 1.5",
            ratio,
            ratio <= 1.5,
        );
    }
    out
}

/// How many callers a member of a frontier family (`agent-heavy`,
/// `rl-mixed`, `rl-jitter`) has: drawn from the seed (agent sessions 40-200, RL workers
/// 8-48), so the family varies them too. Other kinds: their default.
pub fn family_callers(kind: TraceKind, seed: u64) -> u32 {
    let r = hearth_core::rng::stream(seed, &[20]).next_u64();
    match kind {
        TraceKind::AgentHeavy => 40 + (r % 161) as u32,
        TraceKind::RlMixed | TraceKind::RlJitter => 8 + (r % 41) as u32,
        TraceKind::Agent | TraceKind::Rl => kind.default_callers(),
    }
}

/// How many jobs a member of a frontier family has: agent sessions of 100
/// jobs on average (as in the default agent trace), the RL default for RL
/// workers. Other kinds: their default.
pub fn family_jobs(kind: TraceKind, callers: u32) -> u64 {
    match kind {
        TraceKind::AgentHeavy => u64::from(callers) * 100,
        _ => kind.default_jobs(),
    }
}

/// The fixed keep-alives (seconds) a frontier sweeps.
pub const FRONTIER_KEEPALIVES: [u64; 11] = [0, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];

/// The seeds a benchmark runs, from a list such as `1,5,7..9` (ranges
/// inclusive). Anything that is not a seed is refused rather than skipped.
pub fn seeds(list: &str) -> Result<Vec<u64>, String> {
    let parse = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("`{}` is not a seed", s.trim()))
    };
    let mut seeds = Vec::new();
    for item in list.split(',') {
        match item.split_once("..") {
            Some((from, to)) => seeds.extend(parse(from)?..=parse(to)?),
            None => seeds.push(parse(item)?),
        }
    }
    Ok(seeds)
}

/// The policies of a frontier: always-on, firepool and every fixed
/// keep-alive of [`FRONTIER_KEEPALIVES`].
pub fn frontier_set() -> Vec<Kind> {
    let mut kinds = vec![Kind::AlwaysOn { size: None }, Kind::Firepool];
    kinds.extend(FRONTIER_KEEPALIVES.iter().map(|&s| Kind::KeepAlive {
        keep_alive: Duration::from_secs(s),
    }));
    kinds
}

/// The fixed keep-alives among `rows` that dominate firepool: both fewer
/// GPU-hours and a lower p90 start.
pub fn dominating(rows: &[Summary]) -> Vec<&Summary> {
    let Some(fp) = rows.iter().find(|r| r.policy == "firepool") else {
        return Vec::new();
    };
    rows.iter()
        .filter(|r| r.policy.starts_with("keepalive:"))
        .filter(|r| r.gpu_hours_held < fp.gpu_hours_held && r.start_p90_s < fp.start_p90_s)
        .collect()
}

/// Checks firepool against the frontier targets on one trace, given the
/// summaries of a comparison over [`frontier_set`]: no fixed keep-alive
/// dominates it, it holds at most 0.55 of always-on's GPU-hours with a p90
/// start within 1.5x of always-on's, serves at least 95 % of jobs warm or
/// standby, and reaches at least 95 % of always-on's loop speed-up (the
/// ceiling on any trace). Empty without firepool and always-on.
pub fn frontier_targets(rows: &[Summary]) -> Vec<Target> {
    let find = |p: &str| {
        rows.iter()
            .find(|r| r.policy == p || r.policy.starts_with(&format!("{p}:")))
    };
    let (Some(fp), Some(on)) = (find("firepool"), find("always-on")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut check = |what: &str, goal: &str, got: f64, met: bool| {
        out.push(Target {
            what: what.to_owned(),
            goal: goal.to_owned(),
            got,
            met,
        });
    };
    let n = dominating(rows).len() as f64;
    check("fixed keep-alives dominating firepool", "= 0", n, n == 0.0);
    let ratio = fp.gpu_hours_held / on.gpu_hours_held.max(f64::MIN_POSITIVE);
    check(
        GPU_HOURS_TARGET,
        &format!("<= {FRONTIER_GPU_HOURS}"),
        ratio,
        ratio <= FRONTIER_GPU_HOURS,
    );
    let ratio = fp.start_p90_s / on.start_p90_s.max(1e-3);
    check(
        "firepool p90 start / always-on p90",
        "<= 1.5",
        ratio,
        ratio <= 1.5,
    );
    let ws = fp.warm_share + fp.standby_share;
    check("firepool warm or standby", ">= 0.95", ws, ws >= 0.95);
    let ratio = fp.loop_speedup / on.loop_speedup.max(f64::MIN_POSITIVE);
    check(
        "firepool speed-up / always-on speed-up",
        ">= 0.95",
        ratio,
        ratio >= 0.95,
    );
    out
}

// ---- the engine -----------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(u32),
    Ready(u32, PodId),
    End(u32, JobId),
    Wake(u32),
}

#[derive(Debug)]
struct PoolRun {
    pool: Pool,
    per_gpu: f64,
    /// When a wake-up is scheduled.
    wake: Option<u64>,
    counts: Counts,
}

/// A pool's jobs' start latencies, how many started warm, from a standby
/// pod and cold, and the GPU x ms it held: active, warm, standby, draining.
/// The run's are its pools' added up.
#[derive(Debug)]
struct Counts {
    latency: Hist,
    sources: [u64; 3],
    gpu_ms: [f64; 4],
}

impl Counts {
    fn new() -> Counts {
        Counts {
            latency: Hist::new(),
            sources: [0; 3],
            gpu_ms: [0.0; 4],
        }
    }

    fn add(&mut self, other: &Counts) {
        self.latency.merge(&other.latency);
        for (mine, theirs) in self.sources.iter_mut().zip(other.sources) {
            *mine += theirs;
        }
        for (mine, theirs) in self.gpu_ms.iter_mut().zip(other.gpu_ms) {
            *mine += theirs;
        }
    }

    /// The figures of `profile`'s pool (or of the whole run).
    fn figures(&self, profile: String) -> ProfileSummary {
        let [warm_share, standby_share, cold_share] = shares(self.sources);
        let hours = |gms: f64| gms / 3_600_000.0;
        let quantile = |p| seconds(self.latency.quantile(p));
        ProfileSummary {
            profile,
            jobs: self.sources.iter().sum(),
            warm_share,
            standby_share,
            cold_share,
            start_p50_s: quantile(0.5),
            start_p90_s: quantile(0.9),
            start_p99_s: quantile(0.99),
            gpu_hours_held: hours(self.gpu_ms.iter().sum()),
            gpu_hours_active: hours(self.gpu_ms[0]),
            gpu_hours_warm_idle: hours(self.gpu_ms[1] + self.gpu_ms[3]),
            gpu_hours_standby: hours(self.gpu_ms[2]),
        }
    }
}

#[derive(Debug)]
struct CallerRun<'a> {
    cursor: Option<Cursor<'a>>,
    next: Option<Row>,
    /// Jobs in flight per pool it has used: a caller across profiles is
    /// one loop, and each pool hears when it runs elsewhere.
    in_flight: Loop<u32>,
}

#[derive(Debug)]
struct SimJob {
    caller: u32,
    pool: u32,
    submitted: u64,
    duration: u64,
    pending: u32,
    start: u64,
    source: Source,
}

/// Shares of jobs started warm, from a standby pod and cold, of the counts
/// of each.
fn shares(sources: [u64; 3]) -> [f64; 3] {
    let jobs: u64 = sources.iter().sum();
    sources.map(|n| {
        if jobs == 0 {
            0.0
        } else {
            n as f64 / jobs as f64
        }
    })
}

fn rank(s: Source) -> u8 {
    match s {
        Source::Warm => 0,
        Source::Standby => 1,
        Source::Cold => 2,
    }
}

#[derive(Debug)]
struct Run<'a> {
    file: &'a File,
    index: &'a Index,
    name: String,
    /// Simulated time of the trace's time 0: pools provision at 0 and their
    /// first pods are ready by then.
    offset: u64,
    cold_ms: u64,
    warm_ms: u64,
    promote_ms: u64,
    pools: Vec<PoolRun>,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    /// Events in the heap other than wake-ups.
    pending: usize,
    callers: Vec<CallerRun<'a>>,
    jobs: HashMap<JobId, SimJob>,
    starting: HashSet<(u32, PodId)>,
    /// Pods bound ahead of a burst, and when their binding is done.
    binding: HashMap<(u32, PodId), u64>,
    next_job: u64,
    out: Vec<Decision>,
    gone: Vec<PodId>,
    now: u64,
    peak: f64,
    series: Series,
    loops_ms: u128,
    fresh_ms: u128,
    done: usize,
    pods_started: u64,
}

impl<'a> Run<'a> {
    fn new(
        file: &'a File,
        index: &'a Index,
        kind: Kind,
        params: &SimParams,
    ) -> Result<Run<'a>, Error> {
        let pools = index
            .pools
            .iter()
            .map(|info| {
                let cfg = params.pool_config(info);
                let per_gpu = f64::from(cfg.shares_per_gpu.max(1));
                Ok(PoolRun {
                    pool: Pool::new(params.resolve(kind, info), cfg)?,
                    per_gpu,
                    wake: None,
                    counts: Counts::new(),
                })
            })
            .collect::<Result<Vec<_>, policy::Error>>()?;
        let cold_ms = millis(params.cold_start);
        Ok(Run {
            file,
            index,
            name: kind.to_string(),
            offset: cold_ms,
            cold_ms,
            warm_ms: millis(params.warm),
            promote_ms: millis(params.promote),
            pools,
            heap: BinaryHeap::new(),
            seq: 0,
            pending: 0,
            callers: Vec::with_capacity(index.callers.len()),
            jobs: HashMap::new(),
            starting: HashSet::new(),
            binding: HashMap::new(),
            next_job: 0,
            out: Vec::new(),
            gone: Vec::new(),
            now: 0,
            peak: 0.0,
            series: Series::new(),
            loops_ms: 0,
            fresh_ms: 0,
            done: 0,
            pods_started: 0,
        })
    }

    fn push(&mut self, at: u64, ev: Ev) {
        if !matches!(ev, Ev::Wake(_)) {
            self.pending += 1;
        }
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    /// Reads caller `c`'s next row and schedules its submission, or closes
    /// its loop.
    fn advance_caller(&mut self, c: u32) -> Result<(), Error> {
        let run = &mut self.callers[c as usize];
        let row = match run.cursor.as_mut() {
            Some(cursor) => cursor.next(self.index)?,
            None => None,
        };
        match row {
            Some(row) => {
                self.fresh_ms += u128::from(row.think_ms + self.cold_ms + row.duration_ms);
                run.next = Some(row);
                self.push(self.now.max(self.offset) + row.think_ms, Ev::Arrive(c));
            }
            None => {
                run.cursor = None;
                self.loops_ms += u128::from(self.now - self.offset);
                self.done += 1;
            }
        }
        Ok(())
    }

    /// Moves the clock to `t`, accounting what was held meanwhile.
    fn advance(&mut self, t: u64) {
        let from = self.now.max(self.offset);
        if t > from {
            let dt = (t - from) as f64;
            let mut total = 0.0;
            for p in &mut self.pools {
                let h = p.pool.held();
                let g = [h.active, h.warm, h.standby, h.draining].map(|s| s as f64 / p.per_gpu);
                for (acc, g) in p.counts.gpu_ms.iter_mut().zip(g) {
                    *acc += g * dt;
                }
                total += g.iter().sum::<f64>();
            }
            self.peak = self.peak.max(total);
            self.series.add(from - self.offset, t - self.offset, total);
        }
        self.now = self.now.max(t);
    }

    /// Hands `event` to pool `p` and carries out its decisions, feeding back
    /// the disappearance of released pods at once.
    fn drive(&mut self, p: u32, event: Event) -> Result<(), Error> {
        let mut next = Some(event);
        let mut out = std::mem::take(&mut self.out);
        while let Some(event) = next
            .take()
            .or_else(|| self.gone.pop().map(|pod| Event::PodGone { pod }))
        {
            out.clear();
            self.pools[p as usize]
                .pool
                .handle(Instant::from_millis(self.now), event, &mut out)?;
            for d in out.drain(..) {
                self.apply(p, d);
            }
        }
        self.out = out;
        let run = &mut self.pools[p as usize];
        if let Some(w) = run.pool.next_wakeup() {
            let w = w.as_millis().max(self.now + 1);
            if run.wake.is_none_or(|s| w < s) {
                run.wake = Some(w);
                self.push(w, Ev::Wake(p));
            }
        }
        Ok(())
    }

    fn apply(&mut self, p: u32, d: Decision) {
        match d {
            Decision::StartPod { pod, .. } => {
                self.pods_started += 1;
                self.starting.insert((p, pod));
                self.push(self.now + self.cold_ms, Ev::Ready(p, pod));
            }
            Decision::Assign {
                job, source, pod, ..
            } => {
                let mut acquire = match source {
                    Source::Warm => self.warm_ms,
                    Source::Standby => self.promote_ms,
                    Source::Cold => 0,
                };
                // A pod bound ahead of the burst is warm once its binding
                // is done.
                if let Some(done) = self.binding.remove(&(p, pod)) {
                    acquire = acquire.max(done.saturating_sub(self.now) + self.warm_ms);
                }
                let Some(j) = self.jobs.get_mut(&job) else {
                    return;
                };
                j.pending = j.pending.saturating_sub(1);
                j.start = j.start.max(self.now + acquire);
                if rank(source) > rank(j.source) {
                    j.source = source;
                }
                if j.pending == 0 {
                    let (start, end, source) = (j.start, j.start + j.duration, j.source);
                    let (pool, submitted) = (j.pool, j.submitted);
                    let mine = &mut self.pools[pool as usize];
                    mine.counts.latency.record(start - submitted);
                    mine.counts.sources[rank(source) as usize] += 1;
                    self.push(end, Ev::End(pool, job));
                }
            }
            Decision::Release { pod, .. } => {
                self.starting.remove(&(p, pod));
                self.binding.remove(&(p, pod));
                self.gone.push(pod);
            }
            Decision::Prewarm { pod, .. } => {
                self.binding.insert((p, pod), self.now + self.promote_ms);
            }
            // The simulator adopts nothing.
            Decision::Promote { .. }
            | Decision::Reset { .. }
            | Decision::Budget { .. }
            | Decision::Adopted { .. } => {}
        }
    }

    /// Caller `c` queued (`up`) or finished a job in pool `p`: tells each
    /// pool it has used what [`Loop::moved`] says.
    fn loop_moved(&mut self, c: u32, p: u32, up: bool) -> Result<(), Error> {
        let caller = CallerId(u64::from(c));
        for (q, busy) in self.callers[c as usize].in_flight.moved(&p, up) {
            self.drive(q, Event::LoopBusy { caller, busy })?;
        }
        Ok(())
    }

    fn run(mut self) -> Result<(Summary, svg::Curve), Error> {
        for p in 0..self.pools.len() as u32 {
            self.drive(p, Event::Tick)?;
        }
        for span in &self.index.callers {
            self.callers.push(CallerRun {
                cursor: Some(Cursor::new(self.file, span)),
                next: None,
                in_flight: Loop::default(),
            });
        }
        for c in 0..self.callers.len() as u32 {
            self.advance_caller(c)?;
        }
        while self.done < self.callers.len() {
            if self.pending == 0 {
                return Err(Error::Stalled {
                    at_s: self.now.saturating_sub(self.offset) as f64 / 1000.0,
                    waiting: self.jobs.len(),
                });
            }
            let Some(Reverse((t, _, ev))) = self.heap.pop() else {
                break;
            };
            if !matches!(ev, Ev::Wake(_)) {
                self.pending -= 1;
            }
            self.advance(t);
            match ev {
                Ev::Arrive(c) => {
                    let Some(row) = self.callers[c as usize].next.take() else {
                        continue;
                    };
                    let job = JobId(self.next_job);
                    self.next_job += 1;
                    self.jobs.insert(
                        job,
                        SimJob {
                            caller: c,
                            pool: row.pool as u32,
                            submitted: self.now,
                            duration: row.duration_ms,
                            pending: 1,
                            start: self.now,
                            source: Source::Warm,
                        },
                    );
                    let req = Request {
                        shares: Some(row.shares),
                        ..Request::new(job, CallerId(u64::from(c)), TenantId(0))
                    };
                    self.drive(row.pool as u32, Event::JobQueued(req))?;
                    self.loop_moved(c, row.pool as u32, true)?;
                }
                Ev::Ready(p, pod) => {
                    if self.starting.remove(&(p, pod)) {
                        self.drive(p, Event::PodReady { pod })?;
                    }
                }
                Ev::End(p, job) => {
                    self.drive(p, Event::JobFinished { job })?;
                    if let Some(j) = self.jobs.remove(&job) {
                        self.loop_moved(j.caller, p, false)?;
                        self.advance_caller(j.caller)?;
                    }
                }
                Ev::Wake(p) => {
                    if self.pools[p as usize].wake == Some(t) {
                        self.pools[p as usize].wake = None;
                        self.drive(p, Event::Tick)?;
                    }
                }
            }
        }
        Ok(self.finish())
    }

    fn finish(self) -> (Summary, svg::Curve) {
        let mut all = Counts::new();
        for p in &self.pools {
            all.add(&p.counts);
        }
        let total = all.figures(String::new());
        // Every job of the trace started, and its start latency was counted.
        debug_assert_eq!(total.jobs, self.index.jobs);
        debug_assert_eq!(all.latency.count(), total.jobs);
        let callers = self.callers.len() as u64;
        let per_caller = |ms: u128| {
            if callers == 0 {
                0.0
            } else {
                ms as f64 / callers as f64 / 1000.0
            }
        };
        let (mean_loop, fresh_loop) = (per_caller(self.loops_ms), per_caller(self.fresh_ms));
        let end_ms = self.now.saturating_sub(self.offset);
        let summary = Summary {
            policy: self.name.clone(),
            jobs: total.jobs,
            callers,
            warm_share: total.warm_share,
            standby_share: total.standby_share,
            cold_share: total.cold_share,
            start_p50_s: total.start_p50_s,
            start_p90_s: total.start_p90_s,
            start_p99_s: total.start_p99_s,
            start_mean_s: all.latency.mean() / 1000.0,
            mean_loop_s: mean_loop,
            fresh_loop_s: fresh_loop,
            loop_speedup: if mean_loop > 0.0 {
                fresh_loop / mean_loop
            } else {
                0.0
            },
            gpu_hours_held: total.gpu_hours_held,
            gpu_hours_active: total.gpu_hours_active,
            gpu_hours_warm_idle: total.gpu_hours_warm_idle,
            gpu_hours_standby: total.gpu_hours_standby,
            peak_gpus_held: self.peak,
            end_s: seconds(end_ms),
            pods_started: self.pods_started,
            profiles: self
                .index
                .pools
                .iter()
                .zip(&self.pools)
                .map(|(info, p)| p.counts.figures(info.name.to_string()))
                .collect(),
        };
        let curve = svg::Curve {
            name: self.name,
            cdf: all.latency.cdf(),
            held: self.series.points(end_ms),
            end_s: seconds(end_ms),
        };
        (summary, curve)
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

#[cfg(test)]
mod tests;
