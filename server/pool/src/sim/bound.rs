//! A clairvoyant floor under the GPU-hours of any policy that starts every
//! job warm.
//!
//! It knows every caller's next job. Each job starts warm the moment it
//! arrives, so every caller runs on the schedule of a pool that is never
//! late, as always-on's does. Between two jobs of a caller on one profile,
//! its pod idles for a gap `g`. The floor pays the cheapest of three ways to
//! bridge it:
//! * hold the pod warm: `g` at the pod's size `S`;
//! * shrink it to a standby share `b` at once, and promote it just in time:
//!   `g - p` at `b`, then `p` at `S` (`p`: the promotion);
//! * release it and, `c + p` before the job, start a standby pod in its
//!   place and promote it (`c`: a pod's start): `c` at `b`, then `p` at `S`.
//!
//! Before a caller's first job and after its last, it pays nothing.
//! Standby floors and the GPU budget are ignored. A policy can only go under
//! the floor by starting jobs late, so the floor tells how much of a miss
//! on GPU-hours is the trace's and how much the policy's.

use std::fs::File;
use std::path::Path;

use super::trace::{Cursor, Index};
use super::{Error, SimParams};
use crate::time::millis;

/// The floor's GPU-hours on the trace at `path`.
pub fn clairvoyant_gpu_hours(path: &Path, params: &SimParams) -> Result<f64, Error> {
    let file = File::open(path)?;
    let per = params.pool.shares_per_gpu.max(1);
    let index = Index::build(&file, &params.profiles, per)?;
    let gpus = |shares: u32| f64::from(shares) / f64::from(per);
    // Each pool's pod and standby share, in GPUs.
    let sizes: Vec<(f64, f64)> = index
        .pools
        .iter()
        .map(|info| {
            let pod = info.max_shares.0;
            (gpus(pod), gpus(params.pool.standby.shares.0.min(pod)))
        })
        .collect();
    let bridge = Bridge {
        promote: millis(params.promote),
        start: millis(params.cold_start),
    };
    let warm = millis(params.warm);
    // GPU-milliseconds.
    let mut held = 0.0;
    let mut last_end: Vec<Option<u64>> = vec![None; index.pools.len()];
    for span in &index.callers {
        last_end.fill(None);
        let mut cursor = Cursor::new(&file, span);
        let mut now = 0u64;
        while let Some(row) = cursor.next(&index)? {
            let arrive = now + row.think_ms;
            let (pod, standby) = sizes[row.pool];
            if let Some(end) = last_end[row.pool] {
                held += bridge.cost(arrive - end, pod, standby);
            }
            now = arrive + warm + row.duration_ms;
            held += (now - arrive) as f64 * pod;
            last_end[row.pool] = Some(now);
        }
    }
    Ok(held / 3_600_000.0)
}

/// What bridging an idle gap may use, in milliseconds.
#[derive(Debug, Clone, Copy)]
struct Bridge {
    promote: u64,
    start: u64,
}

impl Bridge {
    /// The least GPU-milliseconds that have a pod of `pod` GPUs warm again
    /// `gap` ms after it idled, with standby shares of `standby` GPUs.
    fn cost(self, gap: u64, pod: f64, standby: f64) -> f64 {
        let hold = gap as f64 * pod;
        let promoted = self.promote as f64 * pod;
        let shrink = match gap.checked_sub(self.promote) {
            Some(rest) => (rest as f64).mul_add(standby, promoted),
            None => f64::INFINITY,
        };
        let restart = if gap >= self.start + self.promote {
            (self.start as f64).mul_add(standby, promoted)
        } else {
            f64::INFINITY
        };
        hold.min(shrink).min(restart)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_bridged_the_cheapest_way_there_is() {
        let b = Bridge {
            promote: 1_000,
            start: 30_000,
        };
        // Shorter than a promotion: held.
        assert_eq!(b.cost(500, 1.0, 0.125), 500.0);
        // A standby share is no cheaper than the pod: held.
        assert_eq!(b.cost(20_000, 0.125, 0.125), 2_500.0);
        // Shrunk, then promoted: 19 s at 1/8, 1 s whole.
        assert_eq!(b.cost(20_000, 1.0, 0.125), 3_375.0);
        // Long enough for a start: released, then started and promoted.
        assert_eq!(b.cost(600_000, 1.0, 0.125), 4_750.0);
    }
}
