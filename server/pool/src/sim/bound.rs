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
//! on GPU-hours is the trace's and how much the policy's; per profile, and
//! by what holds the GPUs, it tells where a policy spends above it.

use std::fs::File;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::trace::{Cursor, Index};
use super::{Error, SimParams};
use crate::time::millis;

/// The floor of one profile's pool: a pool has its own objective, so where
/// a policy spends above the floor is told profile by profile. GPU-hours,
/// in all and by what holds them (as a [`super::Summary`] counts them):
/// running jobs (their warm starts included), pods idle at their full size
/// (held through a gap, or promoted just in time), standby shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFloor {
    pub profile: String,
    pub jobs: u64,
    pub gpu_hours_held: f64,
    pub gpu_hours_active: f64,
    pub gpu_hours_warm_idle: f64,
    pub gpu_hours_standby: f64,
}

/// GPU-milliseconds by what holds them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Held {
    active: f64,
    warm_idle: f64,
    standby: f64,
}

impl Held {
    fn total(&self) -> f64 {
        self.active + self.warm_idle + self.standby
    }

    fn add(&mut self, other: Held) {
        self.active += other.active;
        self.warm_idle += other.warm_idle;
        self.standby += other.standby;
    }
}

/// The floor of every profile's pool on the trace at `path`, in the order
/// the trace first names them.
pub fn clairvoyant_by_profile(path: &Path, params: &SimParams) -> Result<Vec<ProfileFloor>, Error> {
    let file = File::open(path)?;
    let index = Index::build(&file, &params.profiles, params.pool.shares_per_gpu)?;
    floor_of(&file, &index, params)
}

/// [`clairvoyant_by_profile`] of the trace in `file`, indexed as `index`.
pub(crate) fn floor_of(
    file: &File,
    index: &Index,
    params: &SimParams,
) -> Result<Vec<ProfileFloor>, Error> {
    let per = params.pool.shares_per_gpu.max(1);
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
    // GPU-milliseconds, per pool.
    let mut held = vec![Held::default(); index.pools.len()];
    let mut last_end: Vec<Option<u64>> = vec![None; index.pools.len()];
    for span in &index.callers {
        last_end.fill(None);
        let mut cursor = Cursor::new(file, span);
        let mut now = 0u64;
        while let Some(row) = cursor.next(index)? {
            let arrive = now + row.think_ms;
            let (pod, standby) = sizes[row.pool];
            let pool = &mut held[row.pool];
            if let Some(end) = last_end[row.pool] {
                pool.add(bridge.cost(arrive - end, pod, standby));
            }
            now = arrive + warm + row.duration_ms;
            pool.active += (now - arrive) as f64 * pod;
            last_end[row.pool] = Some(now);
        }
    }
    Ok(index
        .pools
        .iter()
        .zip(held)
        .map(|(info, h)| {
            let hours = |ms: f64| ms / 3_600_000.0;
            ProfileFloor {
                profile: info.name.to_string(),
                jobs: info.jobs,
                gpu_hours_held: hours(h.total()),
                gpu_hours_active: hours(h.active),
                gpu_hours_warm_idle: hours(h.warm_idle),
                gpu_hours_standby: hours(h.standby),
            }
        })
        .collect())
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
    fn cost(self, gap: u64, pod: f64, standby: f64) -> Held {
        let hold = Held {
            warm_idle: gap as f64 * pod,
            ..Held::default()
        };
        let promoted = self.promote as f64 * pod;
        // Standby for `ms`, then promoted just in time.
        let standing = |ms: u64| Held {
            warm_idle: promoted,
            standby: ms as f64 * standby,
            ..Held::default()
        };
        let shrink = gap.checked_sub(self.promote).map(standing);
        let restart = (gap >= self.start + self.promote).then(|| standing(self.start));
        [Some(hold), shrink, restart]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.total().total_cmp(&b.total()))
            .unwrap_or(hold)
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
        let cost = |gap, pod, standby| {
            let h = b.cost(gap, pod, standby);
            (h.warm_idle, h.standby)
        };
        // Shorter than a promotion: held.
        assert_eq!(cost(500, 1.0, 0.125), (500.0, 0.0));
        // A standby share is no cheaper than the pod: held.
        assert_eq!(cost(20_000, 0.125, 0.125), (2_500.0, 0.0));
        // Shrunk, then promoted: 19 s at 1/8, 1 s whole.
        assert_eq!(cost(20_000, 1.0, 0.125), (1_000.0, 2_375.0));
        // Long enough for a start: released, then started and promoted.
        assert_eq!(cost(600_000, 1.0, 0.125), (1_000.0, 3_750.0));
    }
}
