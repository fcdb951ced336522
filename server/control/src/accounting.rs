//! Live accounting: A, R_A, F, P*, U and the operational figures of a window
//! of the service's own event records, with F, P* and U from the exact
//! analyzer in `hearth-cohort` run on the same events (release, deadline,
//! route). Pure: the caller picks the window.

use hearth_cohort::{Events, Params};
use serde::{Deserialize, Serialize};

use crate::driver::{Path, Record};

/// Figures of a window of records (shares are over all its events).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Events in the window.
    pub events: u64,
    /// A: events run in a batch of at least `K_r`, exactly, with device start
    /// no later than the deadline, over all events.
    pub achieved: f64,
    /// Events counted by A.
    pub achieved_events: u64,
    /// F: fixed-partition share.
    pub fixed: f64,
    /// P*: exact offline optimum share.
    pub exact: f64,
    /// U: local upper bound share.
    pub upper: f64,
    /// R_A = (A − F)/(P* − F); `None` when P* = F.
    pub online_closure: Option<f64>,
    /// G = (P* − F)/(U − F); `None` when U = F.
    pub gap_closure: Option<f64>,
    /// Batches launched.
    pub batches: u64,
    /// Events whose execution started after their deadline (any path).
    pub deadline_misses: u64,
    /// CPU-path events that started after their deadline.
    pub late_fallbacks: u64,
    /// Share of events that ran on the CPU path.
    pub fallback_share: f64,
    /// Events per second over the window (first release to last completion).
    pub events_per_s: f64,
}

/// Computes [`Stats`] of `records` with batch window δ = `delta_ns` (for F)
/// and minimum batch sizes `k(route key)`.
///
/// # Errors
/// [`hearth_cohort::Error`] from the analyzer (δ not positive, search limit).
pub fn stats(
    records: &[Record],
    delta_ns: i64,
    k: impl Fn(u32) -> u32,
) -> Result<Stats, hearth_cohort::Error> {
    let mut events = Events::new();
    let mut params = Params::new(1, delta_ns);
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    for r in records {
        let name = r.route.0.to_string();
        params
            .k_route
            .entry(name.clone())
            .or_insert_with(|| k(r.route.0).max(1));
        events.push(to_i64(r.release_ns), to_i64(r.deadline_ns), &name)?;
    }
    let report = hearth_cohort::analyze(&events, &params)?;
    let n = records.len() as u64;
    let achieved_events = records
        .iter()
        .filter(|r| {
            r.path == Path::Batch
                && r.exact
                && r.batch_size >= k(r.route.0).max(1)
                && r.launch_ns <= r.deadline_ns
        })
        .count() as u64;
    let ratio = |c: u64| if n == 0 { 0.0 } else { c as f64 / n as f64 };
    let fallbacks: Vec<&Record> = records.iter().filter(|r| r.path != Path::Batch).collect();
    let mut batches: Vec<u64> = records.iter().filter_map(|r| r.batch).collect();
    batches.sort_unstable();
    batches.dedup();
    let first = records.iter().map(|r| r.release_ns).min().unwrap_or(0);
    let last = records.iter().map(|r| r.done_ns).max().unwrap_or(0);
    let span = last.saturating_sub(first) as f64 / 1e9;
    let closure = |num: u64, den_lo: u64, den_hi: u64| {
        (den_hi != den_lo).then(|| (num as f64 - den_lo as f64) / (den_hi as f64 - den_lo as f64))
    };
    Ok(Stats {
        events: n,
        achieved: ratio(achieved_events),
        achieved_events,
        fixed: report.fixed_share,
        exact: report.exact_share,
        upper: report.upper_share,
        online_closure: closure(
            achieved_events,
            report.detail.fixed_events,
            report.exact_events,
        ),
        gap_closure: report.gap_closure,
        batches: batches.len() as u64,
        deadline_misses: records
            .iter()
            .filter(|r| r.launch_ns > r.deadline_ns)
            .count() as u64,
        late_fallbacks: fallbacks
            .iter()
            .filter(|r| r.launch_ns > r.deadline_ns)
            .count() as u64,
        fallback_share: ratio(fallbacks.len() as u64),
        events_per_s: if span > 0.0 { n as f64 / span } else { 0.0 },
    })
}
