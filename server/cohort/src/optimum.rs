//! Exact P* on one route, and the F and U sweeps that share its sorted input.
//!
//! Every function here takes one route's events as `(release, deadline)` pairs
//! sorted lexicographically, and that route's `K >= 1`.
//!
//! # Why the two P* algorithms are exact
//!
//! *Launch points.* Any feasible batch can move its launch time τ up to the
//! smallest deadline of its members (it stays at or after every release, because the
//! batch was feasible), and two batches launched at the same τ can merge. So an
//! optimal schedule is a set T of distinct launch points drawn from the
//! deadlines. Capacity is unlimited, so every event whose interval contains a
//! point of T can join a batch at that point: the covered events of an optimal
//! schedule are exactly the events *stabbed* by T, and T is feasible iff each
//! of its points can be given K distinct events containing it.
//!
//! *Components.* Sorting by release and cutting wherever a release exceeds every
//! earlier deadline splits a route into components that share no launch point;
//! they are solved independently.
//!
//! *Agreeable components* (deadlines non-decreasing in `(release, deadline)`
//! order; always the case with equal deadlines `d = t + δ`): the events
//! containing a point form a contiguous run `[L, R]` of the sorted order, with
//! `L` and `R` non-decreasing in the point. If `x` at point a and `y` at a later
//! point b cross (`y` before `x` in sorted order), both also fit the other point,
//! so swapping uncrosses them; an optimal schedule is therefore disjoint
//! contiguous blocks, and block `[i, j]` is one feasible batch iff
//! `t_j <= d_i`. The DP `D[j] = max(D[j-1], max_i D[i-1] + (j-i+1))` over
//! `j-i+1 >= K`, `d_i >= t_j` has a window of starts whose both ends only move
//! forward, so a monotone deque over `D[i-1] - i` makes it O(n) after the sort.
//!
//! *Other components* (some event's interval nests inside an earlier one's):
//! the launch-point frontier DP. For a fixed T, giving each point (in
//! increasing order) the K pending events with the earliest deadlines is
//! optimal (the usual EDF exchange: a later-deadline event can replace an
//! earlier one at any later point the earlier one could serve). The DP walks
//! the candidate points c_1 < … < c_M; a state at c_b is "c_b is the last
//! chosen point" with the covered count, the batch count and the *pool*:
//! deadlines of the stabbed, unassigned events still alive after c_b. Its
//! successors are all c_b' > c_b: the new events are those released in `(c_b,
//! c_b']` and alive at `c_b'`, all of which become covered; the point is
//! feasible iff pool + new holds K events, and EDF takes the K earliest. A
//! point with no new events is skipped (dropping it keeps the coverage and
//! frees its demand). A jump from a to b is skipped when some point c between
//! them could take K events that all die before b, at least one of them new
//! since a: then a → c → b covers strictly more with a pool at b that is a
//! superset (c consumed only events b could not use), so it dominates a → b;
//! scanning b upward, this cuts each state's jumps at the first such c (`stop`
//! = the smallest `max(K-th deadline at c, earliest new deadline at c)`), which
//! keeps jumps about one deadline span long. Two states at the same point are
//! compared by `(covered, -batches)` and by their pools (pool A dominates pool
//! B if, for every θ, A holds at least as many deadlines `>= θ`); a dominated
//! state is dropped, which is safe because every continuation of the dominated
//! state is also open to the dominating one with at least the same gain. This
//! is exact; its cost is O(S · J · w) for S surviving states, J candidate
//! points per jump (at most M, in practice those within about one deadline
//! span) and w the largest number of simultaneously pending events. S stayed
//! near one state per candidate point on the inputs measured, but is
//! exponential in w in the worst case (pools are subsets of the pending
//! events), so its work is capped and the caller gets
//! [`crate::Error::SearchLimit`] instead of an approximation.
//!
//! Both algorithms maximise the pair `(covered, -batches)` lexicographically,
//! so the batch count reported is the fewest batches of any optimal schedule
//! (a contiguous block is one batch launched at its last release).

use std::collections::VecDeque;

/// Lexicographic objective: covered events, then fewer batches.
pub(crate) type Key = (i64, i64);

/// How the exact optimum was computed, summed over routes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExactStats {
    /// Components (maximal runs of overlapping events of one route).
    pub components: u64,
    /// Components solved by the contiguous-block DP.
    pub block_components: u64,
    /// Events in those components.
    pub block_events: u64,
    /// Components solved by the launch-point frontier DP.
    pub frontier_components: u64,
    /// Events in those components.
    pub frontier_events: u64,
    /// Transitions the frontier DP expanded.
    pub frontier_transitions: u64,
    /// Elementary steps the frontier DP took (the unit of its limit).
    pub frontier_steps: u64,
    /// Events in the largest component the frontier DP solved.
    pub largest_frontier_component: u64,
}

impl ExactStats {
    /// One sentence naming the algorithm that ran and its complexity.
    pub fn algorithm(&self) -> String {
        if self.frontier_components == 0 {
            format!(
                "contiguous-block DP with a monotone deque on all {} components \
                 (deadlines agreeable with releases, e.g. equal deadlines): \
                 O(n log n) for the sort, O(n) for the DP",
                self.components
            )
        } else {
            format!(
                "contiguous-block DP (O(n) after an O(n log n) sort) on {} agreeable \
                 components of {} events; launch-point frontier DP over EDF pools \
                 with Pareto dominance (exact; O(S·J·w) for S states, J points per \
                 jump, w pending events, worst case exponential in w) on {} \
                 components with unequal deadlines, {} events, largest {}, {} transitions",
                self.block_components,
                self.block_events,
                self.frontier_components,
                self.frontier_events,
                self.largest_frontier_component,
                self.frontier_transitions
            )
        }
    }
}

/// Reusable buffers, so analysing many routes allocates once.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    dp: Vec<Key>,
    deque: VecDeque<usize>,
    ends: Vec<i64>,
    hot: Vec<(i64, i64)>,
}

impl Scratch {
    /// Bytes currently reserved, as a peak-memory estimate.
    pub(crate) fn bytes(&self) -> usize {
        self.dp.capacity() * size_of::<Key>()
            + self.deque.capacity() * size_of::<usize>()
            + self.ends.capacity() * size_of::<i64>()
            + self.hot.capacity() * size_of::<(i64, i64)>()
    }
}

/// The frontier DP expanded more transitions than allowed.
#[derive(Debug)]
pub(crate) struct LimitExceeded {
    pub(crate) events: usize,
}

/// F: events whose window `[kδ, (k+1)δ)` (by release) holds at least K events.
pub(crate) fn fixed(route: &[(i64, i64)], k: usize, delta_ns: i64) -> u64 {
    let mut counted = 0;
    let mut start = 0;
    while start < route.len() {
        let window = route[start].0.div_euclid(delta_ns);
        let len = route[start..].partition_point(|p| p.0.div_euclid(delta_ns) == window);
        if len >= k {
            counted += len as u64;
        }
        start += len;
    }
    counted
}

/// U: events for which some τ in `[t_i, d_i]` has at least K events active.
pub(crate) fn upper(route: &[(i64, i64)], k: usize, scratch: &mut Scratch) -> u64 {
    let n = route.len();
    if n < k {
        return 0;
    }
    scratch.hot.clear();
    if route.is_sorted_by_key(|p| p.1) {
        hot_intervals(n, k, |i| route[i].0, |j| route[j].1, &mut scratch.hot);
    } else {
        scratch.ends.clear();
        scratch.ends.extend(route.iter().map(|p| p.1));
        scratch.ends.sort_unstable();
        let ends = &scratch.ends;
        hot_intervals(n, k, |i| route[i].0, |j| ends[j], &mut scratch.hot);
    }
    let hot = &scratch.hot;
    let mut h = 0;
    let mut counted = 0;
    for &(t, d) in route {
        while h < hot.len() && hot[h].1 < t {
            h += 1;
        }
        if h < hot.len() && hot[h].0 <= d {
            counted += 1;
        }
    }
    counted
}

/// Maximal closed intervals where at least `k` events are active, from sorted
/// starts and sorted ends (a start and an end at the same instant overlap).
fn hot_intervals(
    n: usize,
    k: usize,
    start: impl Fn(usize) -> i64,
    end: impl Fn(usize) -> i64,
    out: &mut Vec<(i64, i64)>,
) {
    let (mut i, mut j, mut active, mut since) = (0, 0, 0, 0);
    while j < n {
        if i < n && start(i) <= end(j) {
            active += 1;
            if active == k {
                since = start(i);
            }
            i += 1;
        } else {
            if active == k {
                out.push((since, end(j)));
            }
            active -= 1;
            j += 1;
        }
    }
}

/// P* of one route: the best `(covered, -batches)`.
pub(crate) fn exact(
    route: &[(i64, i64)],
    k: usize,
    limit: u64,
    scratch: &mut Scratch,
    stats: &mut ExactStats,
) -> Result<Key, LimitExceeded> {
    let mut total: Key = (0, 0);
    let mut start = 0;
    while start < route.len() {
        let mut reach = route[start].1;
        let mut end = start + 1;
        while end < route.len() && route[end].0 <= reach {
            reach = reach.max(route[end].1);
            end += 1;
        }
        let component = &route[start..end];
        stats.components += 1;
        if component.len() >= k {
            let key = if component.is_sorted_by_key(|p| p.1) {
                stats.block_components += 1;
                stats.block_events += component.len() as u64;
                block_dp(component, k, scratch)
            } else {
                stats.frontier_components += 1;
                stats.frontier_events += component.len() as u64;
                stats.largest_frontier_component =
                    stats.largest_frontier_component.max(component.len() as u64);
                let budget = limit.saturating_sub(stats.frontier_steps);
                let (key, work) = frontier_dp(component, k, budget)?;
                stats.frontier_transitions += work.transitions;
                stats.frontier_steps += work.steps;
                key
            };
            total = (total.0 + key.0, total.1 + key.1);
        }
        start = end;
    }
    Ok(total)
}

/// The contiguous-block DP for an agreeable component.
pub(crate) fn block_dp(component: &[(i64, i64)], k: usize, scratch: &mut Scratch) -> Key {
    let n = component.len();
    let dp = &mut scratch.dp;
    let deque = &mut scratch.deque;
    dp.clear();
    deque.clear();
    dp.push((0, 0));
    // Starts are 1-based: block [i, j] covers component[i-1..j].
    let start_key = |dp: &[Key], i: usize| (dp[i - 1].0 - i as i64, dp[i - 1].1);
    let mut lo = 1;
    for j in 1..=n {
        if j >= k {
            let i = j + 1 - k;
            let key = start_key(dp, i);
            while deque.back().is_some_and(|&b| start_key(dp, b) <= key) {
                deque.pop_back();
            }
            deque.push_back(i);
        }
        let release = component[j - 1].0;
        while component[lo - 1].1 < release {
            lo += 1;
        }
        while deque.front().is_some_and(|&f| f < lo) {
            deque.pop_front();
        }
        let mut best = dp[j - 1];
        if let Some(&i) = deque.front() {
            let (base, batches) = start_key(dp, i);
            best = best.max((base + j as i64 + 1, batches - 1));
        }
        dp.push(best);
    }
    dp[n]
}

struct State {
    key: Key,
    /// Deadlines of stabbed, unassigned events alive at the next candidate, ascending.
    pool: Vec<i64>,
}

/// Whether `a` is at least as good as `b` in every continuation.
fn dominates(a: &State, b: &State) -> bool {
    a.key >= b.key
        && a.pool.len() >= b.pool.len()
        && a.pool
            .iter()
            .rev()
            .zip(b.pool.iter().rev())
            .all(|(x, y)| x >= y)
}

fn insert(frontier: &mut Vec<State>, state: State) {
    if frontier.iter().any(|s| dominates(s, &state)) {
        return;
    }
    frontier.retain(|s| !dominates(&state, s));
    frontier.push(state);
}

/// Work done by one frontier DP run.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Work {
    pub(crate) transitions: u64,
    pub(crate) steps: u64,
}

/// The launch-point frontier DP; exact for any deadlines. Returns the best key
/// and the work done, or gives up after `limit` steps.
pub(crate) fn frontier_dp(
    component: &[(i64, i64)],
    k: usize,
    limit: u64,
) -> Result<(Key, Work), LimitExceeded> {
    let n = component.len();
    let mut points: Vec<i64> = component.iter().map(|p| p.1).collect();
    points.sort_unstable();
    points.dedup();
    let m = points.len();
    let released: Vec<usize> = points
        .iter()
        .map(|&c| component.partition_point(|p| p.0 <= c))
        .collect();
    let mut frontiers: Vec<Vec<State>> = (0..m).map(|_| Vec::new()).collect();
    let mut best: Key = (0, 0);
    let mut work = Work::default();
    let mut fresh: Vec<i64> = Vec::new();

    // Source `None` is the empty schedule; `Some(a)` holds states whose last point is a.
    for source in std::iter::once(None).chain((0..m).map(Some)) {
        let (states, first, released_before) = match source {
            None => (
                vec![State {
                    key: (0, 0),
                    pool: Vec::new(),
                }],
                0,
                0,
            ),
            Some(a) => (std::mem::take(&mut frontiers[a]), a + 1, released[a]),
        };
        for state in &states {
            best = best.max(state.key);
            // Only events released after this point can still be covered.
            if (state.key.0 + (n - released_before) as i64, state.key.1) < best {
                continue;
            }
            fresh.clear();
            let (mut fresh_lo, mut next, mut p) = (0, released_before, 0);
            // Jumps to points after `stop` are dominated (see the module docs).
            let mut stop = i64::MAX;
            for b in first..m {
                let point = points[b];
                if point > stop {
                    break;
                }
                while next < n && component[next].0 <= point {
                    let d = component[next].1;
                    if d >= point {
                        let at = fresh_lo + fresh[fresh_lo..].partition_point(|&x| x < d);
                        fresh.insert(at, d);
                    }
                    next += 1;
                }
                fresh_lo += fresh[fresh_lo..].partition_point(|&x| x < point);
                p += state.pool[p..].partition_point(|&x| x < point);
                let (pool, new) = (&state.pool[p..], &fresh[fresh_lo..]);
                if pool.is_empty() && new.is_empty() && next == n {
                    break;
                }
                // A point that stabs nothing new is never needed: dropping it
                // keeps the coverage and frees the K events it would consume.
                if new.is_empty() || pool.len() + new.len() < k {
                    continue;
                }
                work.transitions += 1;
                work.steps += 1 + (pool.len() + new.len()) as u64;
                if work.steps > limit {
                    return Err(LimitExceeded { events: n });
                }
                let key = (state.key.0 + new.len() as i64, state.key.1 - 1);
                let keep_from = points.get(b + 1).copied();
                let mut rest = Vec::with_capacity(pool.len() + new.len() - k);
                let (mut x, mut y, mut taken) = (0, 0, 0);
                while x < pool.len() || y < new.len() {
                    let d = if y == new.len() || (x < pool.len() && pool[x] <= new[y]) {
                        x += 1;
                        pool[x - 1]
                    } else {
                        y += 1;
                        new[y - 1]
                    };
                    if taken < k {
                        taken += 1;
                        if taken == k {
                            stop = stop.min(d.max(new[0]));
                        }
                    } else if keep_from.is_some_and(|c| d >= c) {
                        rest.push(d);
                    }
                }
                insert(&mut frontiers[b], State { key, pool: rest });
            }
        }
    }
    Ok((best, work))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(times: &[(i64, i64)]) -> Vec<(i64, i64)> {
        let mut v = times.to_vec();
        v.sort_unstable();
        v
    }

    #[test]
    fn block_dp_counts_the_inclusive_boundary() {
        // δ = 10: t_j - t_i == δ is launchable at τ = 10.
        let route = pairs(&[(0, 10), (10, 20)]);
        let mut s = Scratch::default();
        assert_eq!(block_dp(&route, 2, &mut s), (2, -1));
        let route = pairs(&[(0, 10), (11, 21)]);
        assert_eq!(block_dp(&route, 2, &mut s), (0, 0));
    }

    #[test]
    fn block_dp_prefers_fewer_batches() {
        // Four events within δ, K = 2: one batch of four beats two of two.
        let route = pairs(&[(0, 5), (1, 6), (2, 7), (3, 8)]);
        assert_eq!(block_dp(&route, 2, &mut Scratch::default()), (4, -1));
    }

    #[test]
    fn frontier_handles_a_nested_interval() {
        // Long event L = [0, 100] with a pair of point events at 0 and at 50.
        let route = pairs(&[(0, 100), (0, 0), (0, 0), (50, 50), (50, 50)]);
        // K = 2: both pairs launch on their own and L rides along with one.
        assert_eq!(frontier_dp(&route, 2, u64::MAX).unwrap().0, (5, -2));
        // K = 3: each pair needs L, which can serve only one of them.
        assert_eq!(frontier_dp(&route, 3, u64::MAX).unwrap().0, (3, -1));
    }

    #[test]
    fn upper_is_inclusive() {
        let route = pairs(&[(0, 10), (10, 20), (21, 31)]);
        assert_eq!(upper(&route, 2, &mut Scratch::default()), 2);
    }

    #[test]
    fn fixed_uses_half_open_windows_from_zero() {
        // Windows of δ = 10: {-1} | {0, 9} | {10}.
        let route = pairs(&[(-1, 9), (0, 10), (9, 19), (10, 20)]);
        assert_eq!(fixed(&route, 1, 10), 4);
        assert_eq!(fixed(&route, 2, 10), 2);
        assert_eq!(fixed(&route, 3, 10), 0);
    }
}
