//! Live accounting: A, R_A, F, P*, U and the operational figures of a window
//! of the service's own event records, with F, P* and U from the exact
//! analyzer in `hearth-cohort` run on the same events (release, deadline,
//! route). Pure: the caller picks the window.
//!
//! # Bounded P*
//!
//! P* is exact and cheap (O(n log n)) when every route's deadlines are
//! agreeable with its releases (equal or per-route deadlines). With per-event
//! deadlines the analyzer's launch-point frontier DP is exact but its work is
//! exponential in the worst case, so it runs under a cap of `max_exact_steps`
//! elementary steps ([`DEFAULT_MAX_EXACT_STEPS`]: about 0.1–0.2 s). When the
//! cap is hit the answer is never an error: each route is cut into components
//! (maximal runs of chain-overlapping events, which share no launch point),
//! agreeable components get the exact contiguous-block DP, the others are
//! tried exactly, smallest first, with what is left of the cap, and every
//! component still unsolved contributes
//!
//! * to the **lower bound**: the events covered by a feasible schedule built
//!   by a deadline sweep (when the earliest pending event would expire
//!   uncovered and at least K are pending, launch there: every pending event
//!   is covered, the K earliest-deadline ones are dedicated to the batch and
//!   the rest stay available; see `greedy`), or the service's own batches
//!   when they cover more (those of at least K members of the window launched
//!   within their intervals); a feasible schedule covers at most P*;
//! * to the **upper bound**: its U (an event some feasible schedule covers has
//!   K events of its route active at its launch time), so P* ≤ U.
//!
//! [`Stats::exact_known`] says which case holds; the bounds then satisfy
//! `exact_lower <= P* <= exact_upper <= U`. The cost of one call is the
//! O(n log n) sorts plus at most `2 · max_exact_steps` frontier steps (the
//! first, whole-log attempt and the per-component one), and memory linear in
//! the records plus the frontier's states (bounded by the steps).
//!
//! F is the fixed partition by δ; with per-event deadlines shorter than δ a
//! window need not be a feasible batch and F may exceed P*: it is a baseline,
//! not a bound.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use hearth_cohort::{Events, Params};
use serde::{Deserialize, Serialize};

use crate::driver::{Path, Record};

/// Default cap on the exact P* search of one [`stats`] call, in the
/// analyzer's elementary steps (about 10⁹ steps take a few seconds, so this
/// is about 0.1–0.2 s of one core; twice that at worst, see the module docs).
pub const DEFAULT_MAX_EXACT_STEPS: u64 = 50_000_000;

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
    /// Events counted by F.
    pub fixed_events: u64,
    /// P*: the exact offline optimum share when [`Stats::exact_known`], else
    /// its lower bound [`Stats::exact_lower`].
    pub exact: f64,
    /// Whether P* is exact (else only its bounds are known).
    pub exact_known: bool,
    /// A lower bound of P* (a feasible schedule's share); P* when exact.
    pub exact_lower: f64,
    /// An upper bound of P* (at most U); P* when exact.
    pub exact_upper: f64,
    /// Events covered by the lower bound's schedule.
    pub exact_lower_events: u64,
    /// Events of the upper bound.
    pub exact_upper_events: u64,
    /// Components (per route) solved exactly.
    pub exact_components: u64,
    /// Components the capped search left unsolved (bounded instead).
    pub bounded_components: u64,
    /// Events in those components.
    pub bounded_events: u64,
    /// The cap on the exact search, in steps.
    pub max_exact_steps: u64,
    /// U: local upper bound share.
    pub upper: f64,
    /// Events counted by U.
    pub upper_events: u64,
    /// R_A = (A − F)/(P* − F); `None` when P* = F or P* is not exact.
    pub online_closure: Option<f64>,
    /// G = (P* − F)/(U − F); `None` when U = F or P* is not exact.
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
/// and minimum batch sizes `k(route key)`, with the exact P* search capped at
/// [`DEFAULT_MAX_EXACT_STEPS`].
///
/// # Errors
/// [`hearth_cohort::Error::Invalid`] if δ is not positive; a hard instance is
/// not an error (P* is then bounded, see the module docs).
pub fn stats(
    records: &[Record],
    delta_ns: i64,
    k: impl Fn(u32) -> u32,
) -> Result<Stats, hearth_cohort::Error> {
    stats_bounded(records, delta_ns, k, DEFAULT_MAX_EXACT_STEPS)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// [`stats`] with the exact search capped at `max_exact_steps` steps.
///
/// # Errors
/// As [`stats`].
pub fn stats_bounded(
    records: &[Record],
    delta_ns: i64,
    k: impl Fn(u32) -> u32,
    max_exact_steps: u64,
) -> Result<Stats, hearth_cohort::Error> {
    let mut events = Events::new();
    let mut params = Params::new(1, delta_ns);
    params.max_exact_steps = max_exact_steps;
    let mut ks: HashMap<u32, u32> = HashMap::new();
    for r in records {
        let name = r.route.0.to_string();
        let kr = *ks.entry(r.route.0).or_insert_with(|| k(r.route.0).max(1));
        params.k_route.entry(name.clone()).or_insert(kr);
        events.push(to_i64(r.release_ns), to_i64(r.deadline_ns), &name)?;
    }
    let p = match hearth_cohort::analyze(&events, &params) {
        Ok(report) => Optimum {
            fixed: report.detail.fixed_events,
            upper: report.detail.upper_events,
            bounds: Bounds {
                lower: report.exact_events,
                upper: report.exact_events,
                exact_components: report.detail.exact.components,
                bounded_components: 0,
                bounded_events: 0,
            },
        },
        Err(hearth_cohort::Error::SearchLimit { .. }) => {
            let fixed = hearth_cohort::fixed_share(&events, &params)?.covered;
            let upper = hearth_cohort::upper_share(&events, &params)?.covered;
            let mut bounds = bounded_optimum(records, &ks, max_exact_steps)?;
            bounds.upper = bounds.upper.min(upper);
            bounds.lower = bounds.lower.max(live_schedule(records, &ks));
            Optimum {
                fixed,
                upper,
                bounds,
            }
        }
        Err(e) => return Err(e),
    };
    let n = records.len() as u64;
    let achieved_events = records
        .iter()
        .filter(|r| {
            r.path == Path::Batch
                && r.exact
                && r.batch_size >= ks.get(&r.route.0).copied().unwrap_or(1)
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
    let known = p.bounds.lower == p.bounds.upper;
    let closure = |num: u64, den_lo: u64, den_hi: u64| {
        (known && den_hi != den_lo)
            .then(|| (num as f64 - den_lo as f64) / (den_hi as f64 - den_lo as f64))
    };
    Ok(Stats {
        events: n,
        achieved: ratio(achieved_events),
        achieved_events,
        fixed: ratio(p.fixed),
        fixed_events: p.fixed,
        exact: ratio(p.bounds.lower),
        exact_known: known,
        exact_lower: ratio(p.bounds.lower),
        exact_upper: ratio(p.bounds.upper),
        exact_lower_events: p.bounds.lower,
        exact_upper_events: p.bounds.upper,
        exact_components: p.bounds.exact_components,
        bounded_components: p.bounds.bounded_components,
        bounded_events: p.bounds.bounded_events,
        max_exact_steps,
        upper: ratio(p.upper),
        upper_events: p.upper,
        online_closure: closure(achieved_events, p.fixed, p.bounds.lower),
        gap_closure: closure(p.bounds.lower, p.fixed, p.upper),
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

/// F, U and the bounds of P*, in events.
struct Optimum {
    fixed: u64,
    upper: u64,
    bounds: Bounds,
}

/// Bounds of P* in events, and how they were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Bounds {
    lower: u64,
    upper: u64,
    exact_components: u64,
    bounded_components: u64,
    bounded_events: u64,
}

/// P* bounded component by component (see the module docs): exact where the
/// capped search finishes, greedy schedule and U where it does not.
fn bounded_optimum(
    records: &[Record],
    ks: &HashMap<u32, u32>,
    max_exact_steps: u64,
) -> Result<Bounds, hearth_cohort::Error> {
    let mut by_route: HashMap<u32, Vec<(i64, i64)>> = HashMap::new();
    for r in records {
        by_route
            .entry(r.route.0)
            .or_default()
            .push((to_i64(r.release_ns), to_i64(r.deadline_ns)));
    }
    let mut bounds = Bounds::default();
    let mut agreeable = Events::new();
    let mut agreeable_params = Params::new(1, 1);
    let mut hard: Vec<(u32, Vec<(i64, i64)>)> = Vec::new();
    for (route, mut pairs) in by_route {
        pairs.sort_unstable();
        let k = ks.get(&route).copied().unwrap_or(1).max(1) as usize;
        let name = route.to_string();
        agreeable_params.k_route.insert(name.clone(), k as u32);
        for component in components(&pairs) {
            bounds.exact_components += 1;
            if component.len() < k {
                continue;
            }
            if component.is_sorted_by_key(|p| p.1) {
                for &(t, d) in component {
                    agreeable.push(t, d, &name)?;
                }
            } else {
                bounds.exact_components -= 1;
                hard.push((route, component.to_vec()));
            }
        }
    }
    // Agreeable components never use the step budget.
    let easy = hearth_cohort::exact(&agreeable, &agreeable_params)?;
    bounds.lower += easy.share.covered;
    bounds.upper += easy.share.covered;
    hard.sort_by_key(|(_, c)| c.len());
    let mut left = max_exact_steps;
    for (route, component) in hard {
        let k = ks.get(&route).copied().unwrap_or(1).max(1);
        let mut events = Events::new();
        for &(t, d) in &component {
            events.push(t, d, "r")?;
        }
        let mut params = Params::new(k, 1);
        params.max_exact_steps = left;
        let solved = if left > 0 {
            match hearth_cohort::exact(&events, &params) {
                Ok(x) => {
                    left = left.saturating_sub(x.stats.frontier_steps);
                    Some(x.share.covered)
                }
                Err(hearth_cohort::Error::SearchLimit { .. }) => {
                    left = 0;
                    None
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        match solved {
            Some(covered) => {
                bounds.exact_components += 1;
                bounds.lower += covered;
                bounds.upper += covered;
            }
            None => {
                bounds.bounded_components += 1;
                bounds.bounded_events += component.len() as u64;
                bounds.lower += greedy(&component, k as usize);
                bounds.upper += hearth_cohort::upper_share(&events, &params)?.covered;
            }
        }
    }
    Ok(bounds)
}

/// Events of `records` covered by the batches the service itself ran, as a
/// schedule of these records only: a batch counts with its members in
/// `records` that launched within their interval (`t <= launch <= d`), if
/// they are at least `K_r`. A feasible schedule, so a lower bound of P*.
fn live_schedule(records: &[Record], ks: &HashMap<u32, u32>) -> u64 {
    // Keyed by launch time and route too: a batch is one launch of one
    // route, whatever records claim.
    let mut members: HashMap<(u64, u32, u64), u64> = HashMap::new();
    for r in records {
        if let Some(batch) = r.batch
            && r.path == Path::Batch
            && r.release_ns <= r.launch_ns
            && r.launch_ns <= r.deadline_ns
        {
            *members.entry((batch, r.route.0, r.launch_ns)).or_default() += 1;
        }
    }
    members
        .iter()
        .filter(|((_, route, _), n)| **n >= u64::from(ks.get(route).copied().unwrap_or(1)))
        .map(|(_, n)| n)
        .sum()
}

/// Maximal runs of chain-overlapping events of one route's sorted pairs.
fn components(pairs: &[(i64, i64)]) -> impl Iterator<Item = &[(i64, i64)]> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= pairs.len() {
            return None;
        }
        let mut reach = pairs[start].1;
        let mut end = start + 1;
        while end < pairs.len() && pairs[end].0 <= reach {
            reach = reach.max(pairs[end].1);
            end += 1;
        }
        let c = &pairs[start..end];
        start = end;
        Some(c)
    })
}

/// Events covered by a feasible schedule of one route's sorted pairs, built
/// by a sweep over the pending events (released, not yet dedicated to a
/// batch, deadline not passed) in deadline order. When the earliest pending
/// event is about to expire at its deadline e:
///
/// * if some earlier launch point lies in its interval, it is already
///   covered (it rides along in that batch) and leaves;
/// * else, if at least `k` events are pending, a batch launches at τ = e:
///   every pending event contains e (released by then, deadline not before),
///   so all are covered; the `k` with the earliest deadlines are dedicated to
///   it and leave, the others stay available to later launches (and ride
///   along in this one if none dedicates them);
/// * else it leaves uncovered.
///
/// Each launch has `k` distinct dedicated events and every covered event
/// sits in exactly one batch, so the schedule is feasible and its coverage a
/// lower bound of P*. O(n log n).
fn greedy(pairs: &[(i64, i64)], k: usize) -> u64 {
    // (deadline, release) of pending events, earliest deadline first.
    let mut pending: BinaryHeap<Reverse<(i64, i64)>> = BinaryHeap::new();
    let mut covered = 0;
    let mut next = 0;
    let mut last_launch = i64::MIN;
    loop {
        match pending.peek() {
            Some(&Reverse((earliest, release)))
                if next == pairs.len() || pairs[next].0 > earliest =>
            {
                if last_launch >= release {
                    covered += 1;
                    pending.pop();
                } else if pending.len() >= k {
                    last_launch = earliest;
                    for _ in 0..k {
                        pending.pop();
                    }
                    covered += k as u64;
                } else {
                    pending.pop();
                }
            }
            _ if next < pairs.len() => {
                let (t, d) = pairs[next];
                pending.push(Reverse((d, t)));
                next += 1;
            }
            _ => return covered,
        }
    }
}

#[cfg(test)]
mod tests {
    use hearth_cohort::SplitMix64;

    use super::*;
    use crate::ExecutorKind;
    use crate::driver::RouteKey;

    fn record(event: u64, route: u32, release_ns: u64, deadline_ns: u64) -> Record {
        Record {
            event,
            route: RouteKey(route),
            release_ns,
            deadline_ns,
            batch: None,
            batch_size: 1,
            executor: ExecutorKind::Cpu,
            path: Path::Batch,
            launch_ns: release_ns,
            done_ns: release_ns,
            exact: true,
        }
    }

    /// Mixed per-event deadlines (the issue's {5, 20, 50, 200} ms, scaled),
    /// Poisson-ish releases over two routes.
    fn mixed(n: usize, seed: u64, gap: u64) -> Vec<Record> {
        let mut rng = SplitMix64::new(seed);
        let deadlines = [5, 20, 50, 200];
        let mut t = 0;
        (0..n as u64)
            .map(|i| {
                t += rng.next_u64() % gap;
                let d = deadlines[(rng.next_u64() % 4) as usize];
                record(i, (rng.next_u64() % 2) as u32, t, t + d)
            })
            .collect()
    }

    #[test]
    fn greedy_is_a_feasible_schedule_never_above_the_exact_optimum() {
        for seed in 0..200 {
            let records = mixed(30, seed, 10);
            for k in 1..5u32 {
                let mut by_route: HashMap<u32, Vec<(i64, i64)>> = HashMap::new();
                for r in &records {
                    by_route
                        .entry(r.route.0)
                        .or_default()
                        .push((r.release_ns as i64, r.deadline_ns as i64));
                }
                for pairs in by_route.values_mut() {
                    pairs.sort_unstable();
                    let mut events = Events::new();
                    for &(t, d) in pairs.iter() {
                        events.push(t, d, "r").unwrap();
                    }
                    let params = Params::new(k, 1);
                    let exact = hearth_cohort::exact(&events, &params)
                        .unwrap()
                        .share
                        .covered;
                    let upper = hearth_cohort::upper_share(&events, &params)
                        .unwrap()
                        .covered;
                    let g = greedy(pairs, k as usize);
                    assert!(g <= exact, "seed {seed} k {k}: greedy {g} > P* {exact}");
                    assert!(exact <= upper);
                }
            }
        }
    }

    #[test]
    fn greedy_launches_at_the_inclusive_deadline() {
        // Released at 10 and deadline 10: both fit a launch at τ = 10.
        assert_eq!(greedy(&[(0, 10), (10, 20)], 2), 2);
        assert_eq!(greedy(&[(0, 10), (11, 20)], 2), 0);
        // The early event goes; the next two still make a batch.
        assert_eq!(greedy(&[(0, 1), (5, 30), (6, 30)], 2), 2);
    }

    #[test]
    fn a_capped_search_answers_bounds_that_hold_and_a_large_cap_answers_exactly() {
        let records = mixed(1_500, 7, 5);
        let k = |_| 8;
        let exact = stats_bounded(&records, 50, k, u64::MAX).unwrap();
        assert!(exact.exact_known, "{exact:?}");
        assert_eq!(exact.exact_lower, exact.exact_upper);
        let bounded = stats_bounded(&records, 50, k, 1_000).unwrap();
        assert!(!bounded.exact_known, "{bounded:?}");
        assert!(bounded.bounded_components > 0);
        assert!(
            bounded.exact_lower_events <= exact.exact_lower_events,
            "{bounded:?}"
        );
        assert!(
            exact.exact_upper_events <= bounded.exact_upper_events,
            "{bounded:?}"
        );
        assert!(bounded.exact_upper_events <= bounded.upper_events);
        assert!(bounded.exact_lower_events > 0);
        assert_eq!(bounded.exact, bounded.exact_lower);
        assert_eq!(bounded.online_closure, None);
        assert_eq!(bounded.gap_closure, None);
        assert_eq!((bounded.fixed, bounded.upper), (exact.fixed, exact.upper));
    }

    #[test]
    fn the_live_schedule_counts_only_batches_of_k_launched_in_time() {
        let mut records: Vec<Record> = (0..6).map(|i| record(i, 0, i, 100)).collect();
        for (i, r) in records.iter_mut().enumerate() {
            r.batch = Some(if i < 3 { 1 } else { 2 });
            r.launch_ns = 10;
        }
        // Batch 2 loses a member to a late launch: 2 < K = 3.
        records[5].deadline_ns = 9;
        let ks = HashMap::from([(0, 3)]);
        assert_eq!(live_schedule(&records, &ks), 3);
        // A record claiming batch 1 at another launch time is not its member.
        records[2].launch_ns = 11;
        assert_eq!(live_schedule(&records, &ks), 0);
        records[2].launch_ns = 10;
        let ks = HashMap::from([(0, 3)]);
        assert_eq!(live_schedule(&records, &ks), 3);
        let ks = HashMap::from([(0, 2)]);
        assert_eq!(live_schedule(&records, &ks), 5);
    }

    #[test]
    fn equal_deadlines_are_exact_under_any_cap() {
        let records: Vec<Record> = (0..1_000)
            .map(|i| record(i, 0, i * 3, i * 3 + 50))
            .collect();
        let s = stats_bounded(&records, 50, |_| 4, 0).unwrap();
        assert!(s.exact_known);
        assert_eq!(s.bounded_components, 0);
        assert_eq!(s.exact_lower_events, 1_000);
    }
}
