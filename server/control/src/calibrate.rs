//! Calibration of `K_r`: per route, the cost of a batch on the active
//! executor against the CPU path (each event alone through the scalar
//! interpreter, as a fallback runs) for batch sizes 8…1024, and the decision
//! `K_r` = the smallest tested size from which every larger tested size wins
//! by at least [`MARGIN`] (batch time ≤ (1 − margin) · CPU-path time). No
//! winning suffix: no `K_r`, the route always runs on the CPU path.

use std::time::Instant;

use hearth_cohort::SplitMix64;
use serde::{Deserialize, Serialize};

use crate::cpu::{self, Outcome, Task};
use crate::driver::{ExecError, Executor};
use crate::policy::Program;
use crate::random;

/// The tested batch sizes.
pub const SIZES: [usize; 8] = [8, 16, 32, 64, 128, 256, 512, 1024];
/// The required win: 15 %.
pub const MARGIN: f64 = 0.15;

/// Measured cost of one batch size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Events.
    pub size: usize,
    /// Median time of one batch of `size` on the executor, ns.
    pub batch_ns: f64,
    /// Median time of the same `size` events on the CPU path, ns.
    pub cpu_ns: f64,
}

impl Timing {
    /// Whether the batch beats the CPU path by at least `margin`.
    pub fn wins(&self, margin: f64) -> bool {
        self.batch_ns <= (1.0 - margin) * self.cpu_ns
    }
}

/// `K_r` from timings: the smallest size s such that every timing with size
/// ≥ s wins by `margin`; `None` if the largest size does not win (or no timings).
pub fn choose_k(timings: &[Timing], margin: f64) -> Option<u32> {
    let mut sorted = timings.to_vec();
    sorted.sort_by_key(|t| t.size);
    let mut k = None;
    for t in sorted.iter().rev() {
        if !t.wins(margin) {
            break;
        }
        k = Some(t.size as u32);
    }
    k
}

/// The calibration of one route.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Executable route id.
    pub route: String,
    /// The executor's status line when measured.
    pub executor: String,
    /// Per-size timings.
    pub timings: Vec<Timing>,
    /// The chosen `K_r`.
    pub k: Option<u32>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Measures route `route` of `program` at `sizes`, `reps` repetitions each
/// (median), on random states and inputs from `seed`.
///
/// # Errors
/// The executor's first error.
pub fn measure(
    executor: &mut dyn Executor,
    program: &Program,
    route: u16,
    sizes: &[usize],
    reps: usize,
    seed: u64,
) -> Result<Vec<Timing>, ExecError> {
    let mut rng = SplitMix64::new(seed);
    let reps = reps.max(1);
    let mut out = Vec::with_capacity(sizes.len());
    for &size in sizes {
        let mut tasks = random::tasks(&mut rng, program, size, Some(route));
        // The same sessions every repetition, each starting from the state the
        // last one left, as the service runs them (resident executors
        // upload nothing after the first run).
        let sessions: Vec<u64> = (0..size as u64).collect();
        let advance = |tasks: &mut [Task], out: &[Outcome]| {
            for (t, o) in tasks.iter_mut().zip(out) {
                t.state = o.state;
            }
        };
        // One warm-up run so the first repetition is not an outlier.
        let outcomes = executor.run_sessions(program, &sessions, &tasks)?;
        advance(&mut tasks, &outcomes);
        let mut batch = Vec::with_capacity(reps);
        let mut scalar = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t0 = Instant::now();
            let outcomes = std::hint::black_box(executor.run_sessions(
                program,
                &sessions,
                std::hint::black_box(&tasks),
            )?);
            batch.push(t0.elapsed().as_nanos() as f64);
            let t0 = Instant::now();
            for t in &tasks {
                std::hint::black_box(cpu::run_scalar(
                    program,
                    std::slice::from_ref(std::hint::black_box(t)),
                ));
            }
            scalar.push(t0.elapsed().as_nanos() as f64);
            advance(&mut tasks, &outcomes);
        }
        out.push(Timing {
            size,
            batch_ns: median(batch),
            cpu_ns: median(scalar),
        });
    }
    Ok(out)
}

/// Calibrates every route of `program` at [`SIZES`] with [`MARGIN`].
///
/// # Errors
/// The executor's first error.
pub fn calibrate(
    executor: &mut dyn Executor,
    program: &Program,
    reps: usize,
    seed: u64,
) -> Result<Vec<Calibration>, ExecError> {
    (0..program.routes().len())
        .map(|r| {
            let timings = measure(executor, program, r as u16, &SIZES, reps, seed ^ r as u64)?;
            Ok(Calibration {
                route: program.routes()[r].id().to_owned(),
                executor: executor.status(),
                k: choose_k(&timings, MARGIN),
                timings,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::CpuExecutor;

    fn t(size: usize, batch_ns: f64, cpu_ns: f64) -> Timing {
        Timing {
            size,
            batch_ns,
            cpu_ns,
        }
    }

    #[test]
    fn k_is_the_start_of_the_winning_suffix() {
        let ts = [
            t(8, 100.0, 90.0),
            t(16, 80.0, 100.0),
            t(32, 90.0, 100.0), // wins by only 10 %: breaks the suffix
            t(64, 80.0, 100.0),
            t(128, 85.0, 100.0), // exactly 15 %: wins
        ];
        assert_eq!(choose_k(&ts, MARGIN), Some(64));
    }

    #[test]
    fn no_k_when_the_largest_size_loses_and_order_does_not_matter() {
        assert_eq!(
            choose_k(&[t(8, 1.0, 10.0), t(1024, 10.0, 10.0)], MARGIN),
            None
        );
        assert_eq!(choose_k(&[], MARGIN), None);
        assert_eq!(
            choose_k(
                &[t(1024, 1.0, 10.0), t(8, 1.0, 10.0), t(16, 20.0, 10.0)],
                MARGIN
            ),
            Some(1024)
        );
        assert_eq!(
            choose_k(&[t(16, 1.0, 10.0), t(8, 1.0, 10.0)], MARGIN),
            Some(8)
        );
    }

    #[test]
    fn measuring_fills_every_size() {
        let p = Program::from_json(crate::EXAMPLE_POLICY).unwrap();
        let cal = calibrate(&mut CpuExecutor::new(), &p, 1, 7).unwrap();
        assert_eq!(cal.len(), 2);
        assert_eq!(
            cal[0].timings.iter().map(|t| t.size).collect::<Vec<_>>(),
            SIZES
        );
        assert!(
            cal[0]
                .timings
                .iter()
                .all(|t| t.batch_ns > 0.0 && t.cpu_ns > 0.0)
        );
        assert_eq!(cal[0].executor, "cpu");
        assert_eq!(cal[0].k, choose_k(&cal[0].timings, MARGIN));
    }
}
