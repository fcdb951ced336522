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
//! Both calibrate to the setting the Firepool paper reports: jobs that finish
//! in seconds, where a 30 s cold start per job dominates a loop.
//!
//! `jobs` is the total number of jobs, shared among `callers`. Generation
//! needs O(callers) memory (agent) or O(steps) (rl), not O(jobs): rows are
//! written caller by caller, each drawn from its own seeded stream.

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::rng::stream;

/// Which synthetic workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    Agent,
    Rl,
}

impl TraceKind {
    pub fn default_callers(self) -> u32 {
        match self {
            TraceKind::Agent => 100,
            TraceKind::Rl => 32,
        }
    }

    pub fn default_jobs(self) -> u64 {
        match self {
            TraceKind::Agent => 10_000,
            TraceKind::Rl => 20_480,
        }
    }
}

impl fmt::Display for TraceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TraceKind::Agent => "agent",
            TraceKind::Rl => "rl",
        })
    }
}

impl FromStr for TraceKind {
    type Err = String;

    fn from_str(s: &str) -> Result<TraceKind, String> {
        match s {
            "agent" => Ok(TraceKind::Agent),
            "rl" => Ok(TraceKind::Rl),
            _ => Err(format!("unknown trace kind {s:?}: expected agent or rl")),
        }
    }
}

/// The profile generated jobs run on: one whole GPU.
pub const PROFILE: &str = "gpu-1";

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
    }
    out.flush()
}

fn row<W: Write>(out: &mut W, caller: &str, seq: u64, think: f64, dur: f64) -> io::Result<()> {
    writeln!(out, "{caller},{seq},{think:.3},{dur:.3},{PROFILE},1")
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
        for kind in [TraceKind::Agent, TraceKind::Rl] {
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
    fn apportion_is_exact() {
        let parts = apportion(10, &[1.0, 1.0, 1.0]);
        assert_eq!(parts.iter().sum::<u64>(), 10);
        assert_eq!(parts, vec![4, 3, 3]);
    }
}
