//! Synthetic closed-loop traces, seeded and reproducible.
//!
//! * `agent`: many agent sessions of short tool calls on one GPU each. Between
//!   calls the model generates: think pauses are log-normal and heavy-tailed
//!   (median 0.5 s times a per-session scale, sigma 1.2, so about 1 in 100 is
//!   over 8 s and a few run into minutes). Sessions open over the first 10 s
//!   and their lengths are heavy-tailed too (log-normal weights, sigma 1): a
//!   few long sessions, many short ones. Tool calls take a median 0.5 s.
//! * `rl`: trainer workers running synchronous steps. A step is 16 rollouts
//!   (median 0.6 s) and 4 verifiers (median 0.2 s) per worker, dispatched
//!   back to back, then every worker waits for the slowest and for a
//!   training pause of about 30 s. The barrier is computed for the ideal
//!   schedule (zero start latency) and written as the think time of each
//!   worker's first job of the next step.
//!
//! * `agent-heavy`: a family, one member per seed, of agent sessions whose
//!   pauses have a heavier tail: log-normal with a median of 1-3 s and a
//!   sigma of 1.2-1.7 (drawn from the seed), so a few percent of pauses last
//!   minutes; tool calls take a log-normal median of 1-4 s.
//! * `rl-mixed`: a family of RL workers that alternate between a whole-GPU
//!   rollout profile (`gpu-1`) and a quarter-GPU verifier profile
//!   (`gpu-quarter`): every 2nd, 3rd or 4th job of a step is a verifier,
//!   steps are 8-24 jobs back to back, and a synchronous pause of 45-120 s
//!   (a few percent of jitter per step) separates steps. Mix, step size and
//!   pause are drawn from the seed.
//! * `rl-jitter`: a family of RL workers with short steps (4-12 jobs) and
//!   pauses that are short or uneven: 15-70 s, each step's pause off the
//!   family's by up to 0-30 % (uniform, drawn from the seed), so some pauses
//!   end before a pod could start and periods spread. Every job is on the
//!   whole-GPU profile, or every 2nd or 3rd is a quarter-GPU verifier.
//!
//! All calibrate to the setting the Firepool paper reports: jobs that finish
//! in seconds, where a 30 s cold start per job dominates a loop.
//!
//! `jobs` is the total number of jobs, shared among `callers`. Generation
//! needs O(callers) memory (agent) or O(steps) (rl), not O(jobs): rows are
//! written caller by caller, each drawn from its own seeded stream.

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use hearth_core::rng::stream;

/// Which synthetic workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    Agent,
    Rl,
    AgentHeavy,
    RlMixed,
    RlJitter,
}

impl TraceKind {
    pub fn default_callers(self) -> u32 {
        match self {
            TraceKind::Agent | TraceKind::AgentHeavy => 100,
            TraceKind::Rl | TraceKind::RlMixed | TraceKind::RlJitter => 32,
        }
    }

    pub fn default_jobs(self) -> u64 {
        match self {
            TraceKind::Agent | TraceKind::AgentHeavy => 10_000,
            TraceKind::Rl | TraceKind::RlMixed | TraceKind::RlJitter => 20_480,
        }
    }

    /// The kinds `gen` writes.
    pub fn all() -> [TraceKind; 5] {
        [
            TraceKind::Agent,
            TraceKind::Rl,
            TraceKind::AgentHeavy,
            TraceKind::RlMixed,
            TraceKind::RlJitter,
        ]
    }

    /// The published targets of the Firepool paper this kind is checked
    /// against (agent or RL loops).
    pub fn is_rl(self) -> bool {
        matches!(
            self,
            TraceKind::Rl | TraceKind::RlMixed | TraceKind::RlJitter
        )
    }

    /// What the seed draws for a family member, in words.
    pub fn describe(self, seed: u64) -> String {
        match self {
            TraceKind::Agent | TraceKind::Rl => self.to_string(),
            TraceKind::AgentHeavy => {
                let s = AgentShape::of(seed);
                format!(
                    "agent-heavy: pauses median {:.2} s sigma {:.2}, tools median {:.2} s",
                    s.pause_median, s.pause_sigma, s.tool_median
                )
            }
            TraceKind::RlMixed => {
                let s = RlShape::of(seed);
                format!(
                    "rl-mixed: {} jobs a step, every {} a verifier, pause {:.0} s",
                    s.step, s.verify_every, s.pause
                )
            }
            TraceKind::RlJitter => {
                let s = RlShape::jittered(seed);
                let verifiers = match s.verify_every {
                    0 => "no verifier".to_owned(),
                    n => format!("every {n} a verifier"),
                };
                format!(
                    "rl-jitter: {} jobs a step, {verifiers}, pause {:.0} s +-{:.0} %",
                    s.step,
                    s.pause,
                    100.0 * s.jitter.unwrap_or(0.0)
                )
            }
        }
    }
}

impl fmt::Display for TraceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TraceKind::Agent => "agent",
            TraceKind::Rl => "rl",
            TraceKind::AgentHeavy => "agent-heavy",
            TraceKind::RlMixed => "rl-mixed",
            TraceKind::RlJitter => "rl-jitter",
        })
    }
}

impl FromStr for TraceKind {
    type Err = String;

    fn from_str(s: &str) -> Result<TraceKind, String> {
        match s {
            "agent" => Ok(TraceKind::Agent),
            "rl" => Ok(TraceKind::Rl),
            "agent-heavy" => Ok(TraceKind::AgentHeavy),
            "rl-mixed" => Ok(TraceKind::RlMixed),
            "rl-jitter" => Ok(TraceKind::RlJitter),
            _ => Err(format!(
                "unknown trace kind {s:?}: expected agent, rl, agent-heavy, rl-mixed or rl-jitter"
            )),
        }
    }
}

/// The profile generated jobs run on: one whole GPU.
pub const PROFILE: &str = "gpu-1";

/// The quarter-GPU verifier profile of `rl-mixed`.
pub const QUARTER: &str = "gpu-quarter";

const HEADER: &str = "caller,seq,think_s,duration_s,profile,gpus\n";

/// Writes a synthetic trace of `jobs` jobs over `callers` callers.
pub fn generate<W: Write>(
    kind: TraceKind,
    callers: u32,
    jobs: u64,
    seed: u64,
    out: W,
) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    out.write_all(HEADER.as_bytes())?;
    match kind {
        TraceKind::Agent => agent(callers, jobs, seed, &mut out)?,
        TraceKind::Rl => rl(callers, jobs, seed, &mut out)?,
        TraceKind::AgentHeavy => agent_heavy(callers, jobs, seed, &mut out)?,
        TraceKind::RlMixed => rl_mixed(RlShape::of(seed), callers, jobs, seed, &mut out)?,
        TraceKind::RlJitter => rl_mixed(RlShape::jittered(seed), callers, jobs, seed, &mut out)?,
    }
    out.flush()
}

fn row<W: Write>(out: &mut W, caller: &str, seq: u64, think: f64, dur: f64) -> io::Result<()> {
    writeln!(out, "{caller},{seq},{think:.3},{dur:.3},{PROFILE},1")
}

/// What a seed draws for an `agent-heavy` member.
#[derive(Debug, Clone, Copy)]
struct AgentShape {
    pause_median: f64,
    pause_sigma: f64,
    tool_median: f64,
}

impl AgentShape {
    fn of(seed: u64) -> AgentShape {
        let mut r = stream(seed, &[10]);
        AgentShape {
            pause_median: r.uniform(1.0, 3.0),
            pause_sigma: r.uniform(1.2, 1.7),
            tool_median: r.uniform(1.0, 4.0),
        }
    }
}

/// What a seed draws for an `rl-mixed` or `rl-jitter` member.
#[derive(Debug, Clone, Copy)]
struct RlShape {
    /// Jobs a step.
    step: u64,
    /// Every this many jobs, one verifier (0: none).
    verify_every: u64,
    /// The synchronous pause between steps, s.
    pause: f64,
    /// How far a step's pause is off `pause`, at most, as a share of it
    /// (uniform); `None`: a few percent, log-normal (`rl-mixed`).
    jitter: Option<f64>,
    rollout_median: f64,
}

impl RlShape {
    fn of(seed: u64) -> RlShape {
        let mut r = stream(seed, &[11]);
        RlShape {
            step: 8 + r.next_u64() % 17,
            verify_every: 2 + r.next_u64() % 3,
            pause: r.uniform(45.0, 120.0),
            jitter: None,
            rollout_median: r.uniform(1.0, 3.0),
        }
    }

    fn jittered(seed: u64) -> RlShape {
        let mut r = stream(seed, &[16]);
        RlShape {
            step: 4 + r.next_u64() % 9,
            verify_every: [0, 2, 3][(r.next_u64() % 3) as usize],
            pause: r.uniform(15.0, 70.0),
            jitter: Some(r.uniform(0.0, 0.3)),
            rollout_median: r.uniform(1.0, 3.0),
        }
    }

    fn is_verifier(&self, j: u64) -> bool {
        self.verify_every > 0 && j % self.verify_every == self.verify_every - 1
    }

    /// The pause after `step`, s.
    fn pause_after(&self, seed: u64, step: u64) -> f64 {
        let mut r = stream(seed, &[15, step]);
        match self.jitter {
            None => r.lognormal(self.pause, 0.03),
            Some(j) => self.pause * (1.0 + r.uniform(-j, j)),
        }
    }
}

fn agent_heavy<W: Write>(callers: u32, jobs: u64, seed: u64, out: &mut W) -> io::Result<()> {
    let shape = AgentShape::of(seed);
    let weights: Vec<f64> = (0..callers)
        .map(|c| stream(seed, &[12, u64::from(c)]).lognormal(1.0, 0.5))
        .collect();
    let floor = u64::from(jobs >= u64::from(callers));
    let spare = jobs - floor * u64::from(callers);
    let counts: Vec<u64> = apportion(spare, &weights)
        .into_iter()
        .map(|n| n + floor)
        .collect();
    for (c, &n) in counts.iter().enumerate() {
        let mut rng = stream(seed, &[13, c as u64]);
        let name = format!("agent-{c}");
        let scale = rng.lognormal(1.0, 0.3);
        for seq in 0..n {
            let think = if seq == 0 {
                rng.uniform(0.0, 10.0)
            } else {
                (scale * rng.lognormal(shape.pause_median, shape.pause_sigma)).min(900.0)
            };
            let dur = rng.lognormal(shape.tool_median, 0.6).min(300.0);
            row(out, &name, seq, think, dur)?;
        }
    }
    Ok(())
}

/// Think, duration and whether it is a verifier, of job `j` of `worker` in
/// `step` of an `rl-mixed` trace, before barriers.
fn rl_mixed_step(
    seed: u64,
    shape: RlShape,
    worker: u64,
    step: u64,
    jobs: u64,
) -> impl Iterator<Item = (f64, f64, bool)> {
    let mut rng = stream(seed, &[14, worker, step]);
    (0..jobs).map(move |j| {
        let think = if j == 0 {
            rng.uniform(0.0, 0.5)
        } else {
            rng.lognormal(0.05, 0.5)
        };
        let verifier = shape.is_verifier(j);
        let dur = if verifier {
            rng.lognormal(0.3, 0.4)
        } else {
            rng.lognormal(shape.rollout_median, 0.4)
        };
        (think, dur, verifier)
    })
}

fn rl_mixed<W: Write>(
    shape: RlShape,
    workers: u32,
    jobs: u64,
    seed: u64,
    out: &mut W,
) -> io::Result<()> {
    if workers == 0 {
        return Ok(());
    }
    let w = u64::from(workers);
    let per = |worker: u64| jobs / w + u64::from(worker < jobs % w);
    let steps = per(0).div_ceil(shape.step);
    let in_step = |worker: u64, step: u64| {
        per(worker)
            .saturating_sub(step * shape.step)
            .min(shape.step)
    };
    let mut barrier = Vec::with_capacity(steps as usize + 1);
    barrier.push(0.0f64);
    for step in 0..steps {
        let start = barrier[step as usize];
        let mut slowest = start;
        for worker in 0..w {
            let mut t = start;
            let n = in_step(worker, step);
            for (i, (think, dur, _)) in rl_mixed_step(seed, shape, worker, step, n).enumerate() {
                if i > 0 || step == 0 {
                    t += think;
                }
                t += dur;
            }
            slowest = slowest.max(t);
        }
        barrier.push(slowest + shape.pause_after(seed, step));
    }
    for worker in 0..w {
        let name = format!("worker-{worker}");
        let mut seq = 0;
        let mut end = 0.0f64;
        for step in 0..steps {
            let mut t = barrier[step as usize];
            let n = in_step(worker, step);
            for (i, (think, dur, verifier)) in
                rl_mixed_step(seed, shape, worker, step, n).enumerate()
            {
                let think = match (i, step) {
                    (0, 0) => think,
                    (0, _) => t - end,
                    _ => think,
                };
                if i > 0 || step == 0 {
                    t += think;
                }
                t += dur;
                end = t;
                let (profile, gpus) = if verifier {
                    (QUARTER, "0.25")
                } else {
                    (PROFILE, "1")
                };
                writeln!(
                    out,
                    "{name},{seq},{:.3},{dur:.3},{profile},{gpus}",
                    think.max(0.0)
                )?;
                seq += 1;
            }
        }
    }
    Ok(())
}

/// Splits `total` into parts proportional to `weights` (largest remainder).
fn apportion(total: u64, weights: &[f64]) -> Vec<u64> {
    let sum: f64 = weights.iter().sum();
    if weights.is_empty() || sum <= 0.0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<f64> = weights.iter().map(|w| total as f64 * w / sum).collect();
    let mut parts: Vec<u64> = exact.iter().map(|x| x.floor() as u64).collect();
    let given: u64 = parts.iter().sum();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| {
        let (fa, fb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    for &i in order
        .iter()
        .cycle()
        .take(total.saturating_sub(given) as usize)
    {
        parts[i] += 1;
    }
    parts
}

fn agent<W: Write>(callers: u32, jobs: u64, seed: u64, out: &mut W) -> io::Result<()> {
    // Session lengths: heavy-tailed weights, every session at least one job
    // when there are enough jobs to go round.
    let weights: Vec<f64> = (0..callers)
        .map(|c| stream(seed, &[0, u64::from(c)]).lognormal(1.0, 1.0))
        .collect();
    let floor = u64::from(jobs >= u64::from(callers));
    let spare = jobs - floor * u64::from(callers);
    let counts: Vec<u64> = apportion(spare, &weights)
        .into_iter()
        .map(|n| n + floor)
        .collect();
    for (c, &n) in counts.iter().enumerate() {
        let mut rng = stream(seed, &[1, c as u64]);
        let name = format!("agent-{c}");
        // How long this agent's model tends to think.
        let scale = rng.lognormal(1.0, 0.5);
        for seq in 0..n {
            let think = if seq == 0 {
                rng.uniform(0.0, 10.0)
            } else {
                (scale * rng.lognormal(0.5, 1.2)).min(600.0)
            };
            let dur = rng.lognormal(0.5, 0.7).min(120.0);
            row(out, &name, seq, think, dur)?;
        }
    }
    Ok(())
}

const ROLLOUTS: u64 = 16;
const VERIFIERS: u64 = 4;
const STEP: u64 = ROLLOUTS + VERIFIERS;

/// Think and duration of job `j` of `worker` in `step`, before barriers.
fn rl_step(seed: u64, worker: u64, step: u64, jobs: u64) -> impl Iterator<Item = (f64, f64)> {
    let mut rng = stream(seed, &[2, worker, step]);
    (0..jobs).map(move |j| {
        let think = if j == 0 {
            rng.uniform(0.0, 0.5)
        } else {
            rng.lognormal(0.05, 0.5)
        };
        let dur = if j < ROLLOUTS {
            rng.lognormal(0.6, 0.4)
        } else {
            rng.lognormal(0.2, 0.3)
        };
        (think, dur)
    })
}

fn rl<W: Write>(workers: u32, jobs: u64, seed: u64, out: &mut W) -> io::Result<()> {
    if workers == 0 {
        return Ok(());
    }
    let w = u64::from(workers);
    let per = |worker: u64| jobs / w + u64::from(worker < jobs % w);
    let steps = per(0).div_ceil(STEP);
    let in_step = |worker: u64, step: u64| per(worker).saturating_sub(step * STEP).min(STEP);
    // Pass 1: when each step starts for everyone (the barrier), in the ideal
    // schedule. Step s + 1 starts when the slowest worker finished step s,
    // plus the training pause.
    let mut barrier = Vec::with_capacity(steps as usize + 1);
    barrier.push(0.0f64);
    for step in 0..steps {
        let start = barrier[step as usize];
        let mut slowest = start;
        for worker in 0..w {
            let mut t = start;
            for (i, (think, dur)) in rl_step(seed, worker, step, in_step(worker, step)).enumerate()
            {
                // The first job's own think is the dispatch jitter of step 0
                // only; later steps start exactly at the barrier.
                if i > 0 || step == 0 {
                    t += think;
                }
                t += dur;
            }
            slowest = slowest.max(t);
        }
        let train = stream(seed, &[3, step]).lognormal(30.0, 0.1);
        barrier.push(slowest + train);
    }
    // Pass 2: each worker's rows, the first think of a step bridging from its
    // own end of the previous step to the barrier.
    for worker in 0..w {
        let name = format!("worker-{worker}");
        let mut seq = 0;
        let mut end = 0.0f64;
        for step in 0..steps {
            let mut t = barrier[step as usize];
            for (i, (think, dur)) in rl_step(seed, worker, step, in_step(worker, step)).enumerate()
            {
                let think = match (i, step) {
                    (0, 0) => think,
                    (0, _) => t - end,
                    _ => think,
                };
                if i > 0 || step == 0 {
                    t += think;
                }
                t += dur;
                end = t;
                row(out, &name, seq, think.max(0.0), dur)?;
                seq += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(kind: TraceKind, callers: u32, jobs: u64, seed: u64) -> Vec<String> {
        let mut buf = Vec::new();
        generate(kind, callers, jobs, seed, &mut buf).unwrap();
        String::from_utf8(buf)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn traces_have_the_asked_jobs_and_are_reproducible() {
        for kind in TraceKind::all() {
            let a = lines(kind, 7, 503, 42);
            assert_eq!(a[0], HEADER.trim_end());
            assert_eq!(a.len(), 504);
            assert_eq!(a, lines(kind, 7, 503, 42));
            assert_ne!(a, lines(kind, 7, 503, 43));
        }
    }

    #[test]
    fn rl_steps_end_in_a_synchronous_training_pause() {
        let rows = lines(TraceKind::Rl, 4, 4 * 3 * STEP, 1);
        // Every worker's first job of a step waits at least the training pause.
        for r in &rows[1..] {
            let f: Vec<&str> = r.split(',').collect();
            let (seq, think): (u64, f64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
            if seq > 0 && seq % STEP == 0 {
                assert!(think > 20.0, "{r}");
            } else {
                assert!(think < 5.0, "{r}");
            }
        }
    }

    #[test]
    fn rl_mixed_workers_alternate_profiles_and_pause_between_steps() {
        for seed in 1..5 {
            let shape = RlShape::of(seed);
            assert!((8..=24).contains(&shape.step) && (45.0..120.0).contains(&shape.pause));
            let rows = lines(TraceKind::RlMixed, 3, 3 * 6 * shape.step, seed);
            for r in &rows[1..] {
                let f: Vec<&str> = r.split(',').collect();
                let (seq, think): (u64, f64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
                let verifier = seq % shape.step % shape.verify_every == shape.verify_every - 1;
                assert_eq!(
                    (f[4], f[5]),
                    if verifier {
                        (QUARTER, "0.25")
                    } else {
                        (PROFILE, "1")
                    },
                    "{r}"
                );
                if seq > 0 && seq % shape.step == 0 {
                    assert!(think > 0.85 * shape.pause, "{r}");
                } else {
                    assert!(think < 5.0, "{r}");
                }
            }
        }
    }

    #[test]
    fn rl_jitter_pauses_stray_as_far_as_the_seed_says() {
        for seed in 1..8 {
            let shape = RlShape::jittered(seed);
            let j = shape.jitter.unwrap();
            assert!((4..=12).contains(&shape.step) && (15.0..70.0).contains(&shape.pause));
            assert!((0.0..0.3).contains(&j) && [0, 2, 3].contains(&shape.verify_every));
            let pauses: Vec<f64> = (0..200).map(|s| shape.pause_after(seed, s)).collect();
            let (lo, hi) = pauses
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), &p| (lo.min(p), hi.max(p)));
            assert!(lo >= shape.pause * (1.0 - j) && hi <= shape.pause * (1.0 + j));
            // Spread over most of the range.
            assert!(hi - lo >= 1.8 * j * shape.pause, "seed {seed}: {lo}..{hi}");
            let rows = lines(TraceKind::RlJitter, 3, 3 * 5 * shape.step, seed);
            for r in &rows[1..] {
                let f: Vec<&str> = r.split(',').collect();
                let seq: u64 = f[1].parse().unwrap();
                let quarter = shape.is_verifier(seq % shape.step);
                assert_eq!(f[4] == QUARTER, quarter, "{r}");
            }
        }
    }

    #[test]
    fn agent_heavy_pauses_have_a_tail_of_minutes() {
        for seed in 1..4 {
            let rows = lines(TraceKind::AgentHeavy, 50, 20_000, seed);
            let thinks: Vec<f64> = rows[1..]
                .iter()
                .map(|r| r.split(',').collect::<Vec<_>>())
                .filter(|f| f[1] != "0")
                .map(|f| f[2].parse().unwrap())
                .collect();
            let minutes = thinks.iter().filter(|&&t| t > 60.0).count() as f64;
            let share = minutes / thinks.len() as f64;
            assert!((0.002..0.1).contains(&share), "seed {seed}: {share}");
        }
    }

    #[test]
    fn apportion_is_exact() {
        let parts = apportion(10, &[1.0, 1.0, 1.0]);
        assert_eq!(parts.iter().sum::<u64>(), 10);
        assert_eq!(parts, vec![4, 3, 3]);
    }
}
