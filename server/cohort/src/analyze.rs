//! The offline analyzer: F, P* and U of an event log, and the report the
//! `hearth analyze` command prints. Shares are over all events of the log.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::optimum::{self, ExactStats, Key, Scratch};
use crate::{Error, Event, Events, Routes};

/// Analysis parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Default minimum batch size K (a value of 0 is treated as 1: a batch is
    /// never empty).
    pub k: u32,
    /// Window width δ of the fixed partition F, in ns; must be positive. The
    /// deadlines themselves come from the events.
    pub delta_ns: i64,
    /// Per-route overrides of K, by route name; names absent from the log are ignored.
    pub k_route: HashMap<String, u32>,
    /// Cap on the work of the exact search over all components whose
    /// deadlines are not agreeable, in elementary steps (one per expanded
    /// transition plus one per pending deadline it merges; about 10⁹ steps take
    /// a few seconds). Equal or per-route deadlines never touch it.
    pub max_exact_steps: u64,
}

impl Params {
    /// Default for [`Params::max_exact_steps`].
    pub const DEFAULT_MAX_EXACT_STEPS: u64 = 4_000_000_000;

    /// Parameters with one K for every route.
    pub fn new(k: u32, delta_ns: i64) -> Self {
        Self {
            k,
            delta_ns,
            k_route: HashMap::new(),
            max_exact_steps: Self::DEFAULT_MAX_EXACT_STEPS,
        }
    }

    /// Adds a per-route override parsed from `route=K` (split at the last `=`,
    /// so route names may contain `=`).
    ///
    /// # Errors
    /// [`Error::Invalid`] if there is no `=`, the route is empty or K is not a `u32`.
    pub fn with_override(mut self, spec: &str) -> Result<Self, Error> {
        let (route, k) = parse_override(spec)?;
        self.k_route.insert(route, k);
        Ok(self)
    }

    /// The effective K of every route of `routes`.
    pub fn thresholds(&self, routes: &Routes) -> Thresholds {
        let mut by_route = vec![self.k.max(1); routes.len()];
        for (name, &k) in &self.k_route {
            if let Some(id) = routes.id(name) {
                by_route[id as usize] = k.max(1);
            }
        }
        Thresholds {
            default: self.k.max(1),
            by_route,
        }
    }

    fn validate(&self) -> Result<(), Error> {
        if self.delta_ns <= 0 {
            return Err(Error::Invalid(format!(
                "delta_ns must be positive, got {}",
                self.delta_ns
            )));
        }
        Ok(())
    }
}

/// Parses a `route=K` override.
///
/// # Errors
/// [`Error::Invalid`] if there is no `=`, the route is empty or K is not a `u32`.
pub fn parse_override(spec: &str) -> Result<(String, u32), Error> {
    let invalid = || Error::Invalid(format!("expected ROUTE=K, got {spec:?}"));
    let (route, k) = spec.rsplit_once('=').ok_or_else(invalid)?;
    let k = k.trim().parse().map_err(|_| invalid())?;
    if route.is_empty() {
        return Err(invalid());
    }
    Ok((route.to_owned(), k))
}

/// Effective minimum batch size per route id, each at least 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thresholds {
    default: u32,
    by_route: Vec<u32>,
}

impl Thresholds {
    /// K of route `route` (the default for ids the interner did not know).
    pub fn get(&self, route: u32) -> u32 {
        self.by_route
            .get(route as usize)
            .copied()
            .unwrap_or(self.default)
    }
}

/// Covered events out of all events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Events counted.
    pub covered: u64,
    /// All events of the log (the denominator).
    pub total: u64,
}

impl Share {
    /// `covered / total`, and 0 for an empty log.
    pub fn ratio(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.covered as f64 / self.total as f64
        }
    }
}

/// The exact offline optimum P*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exact {
    /// Events covered by an optimal schedule.
    pub share: Share,
    /// Fewest batches of any optimal schedule.
    pub batches: u64,
    /// Which algorithm ran where.
    pub stats: ExactStats,
}

/// The analyzer's result. Serializes to exactly `events, fixed_share,
/// exact_share, exact_events, exact_batches, upper_share, gap_closure`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// |E|.
    pub events: u64,
    /// F.
    pub fixed_share: f64,
    /// P*.
    pub exact_share: f64,
    /// Events covered by an optimal schedule.
    pub exact_events: u64,
    /// Fewest batches of any optimal schedule.
    pub exact_batches: u64,
    /// U.
    pub upper_share: f64,
    /// G = (P* - F)/(U - F); `null` when U = F (with equal deadlines P* = F
    /// then too and there is no gap to close). See [`gap_closure`].
    pub gap_closure: Option<f64>,
    /// Counts and algorithm details; not serialized.
    #[serde(skip)]
    pub detail: Detail,
}

/// Details of a [`Report`] beyond its JSON keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detail {
    /// Events counted by F.
    pub fixed_events: u64,
    /// Events counted by U.
    pub upper_events: u64,
    /// Which P* algorithm ran where.
    pub exact: ExactStats,
    /// Bytes of working memory the analysis reserved beyond its input.
    pub scratch_bytes: usize,
}

impl Report {
    /// A human summary, including which P* algorithm ran.
    pub fn text(&self) -> String {
        let pct = |x: f64| 100.0 * x;
        let mut s = String::new();
        let _ = writeln!(s, "events            {}", self.events);
        let _ = writeln!(
            s,
            "fixed share F     {:6.2} %  ({} events)",
            pct(self.fixed_share),
            self.detail.fixed_events
        );
        let _ = writeln!(
            s,
            "exact share P*    {:6.2} %  ({} events in {} batches)",
            pct(self.exact_share),
            self.exact_events,
            self.exact_batches
        );
        let _ = writeln!(
            s,
            "upper share U     {:6.2} %  ({} events)",
            pct(self.upper_share),
            self.detail.upper_events
        );
        match self.gap_closure {
            Some(g) => {
                let _ = writeln!(s, "gap closure G     {g:.4}  ((P* - F)/(U - F))");
            }
            None => {
                let _ = writeln!(s, "gap closure G     n/a  (U = F, no gap to close)");
            }
        }
        let _ = writeln!(s, "P* algorithm: {}", self.detail.exact.algorithm());
        s
    }
}

/// `(P* - F)/(U - F)` over event counts, `None` when `U = F`.
///
/// With equal deadlines `F <= P* <= U`, so G lies in `[0, 1]`. With per-event
/// deadlines shorter than δ a fixed window need not be a feasible batch, F can
/// exceed P* (or U), and G is reported as computed, outside `[0, 1]`.
pub fn gap_closure(fixed: u64, exact: u64, upper: u64) -> Option<f64> {
    let (f, p, u) = (fixed as f64, exact as f64, upper as f64);
    (upper != fixed).then(|| (p - f) / (u - f))
}

/// One sorted copy of the log, grouped by route.
struct Prepared {
    /// `(release, deadline)` sorted by route, then lexicographically.
    pairs: Vec<(i64, i64)>,
    /// `(route id, start, end)` of each non-empty route in `pairs`.
    routes: Vec<(u32, usize, usize)>,
}

impl Prepared {
    fn new(events: &[Event]) -> Self {
        let n = events.len();
        let max_route = events.iter().map(|e| e.route as usize).max();
        let mut pairs = Vec::with_capacity(n);
        let mut routes = Vec::new();
        match max_route {
            None => {}
            // Interned ids are dense, so a counting sort by route is linear.
            Some(max) if max <= n + 65_536 => {
                let mut offsets = vec![0usize; max + 2];
                for e in events {
                    offsets[e.route as usize + 1] += 1;
                }
                for r in 0..=max {
                    offsets[r + 1] += offsets[r];
                }
                pairs.resize(n, (0, 0));
                let mut fill = offsets.clone();
                for e in events {
                    let slot = &mut fill[e.route as usize];
                    pairs[*slot] = (e.release_ns, e.deadline_ns);
                    *slot += 1;
                }
                for r in 0..=max {
                    let (start, end) = (offsets[r], offsets[r + 1]);
                    if start < end {
                        pairs[start..end].sort_unstable();
                        routes.push((r as u32, start, end));
                    }
                }
            }
            Some(_) => {
                let mut keyed: Vec<(u32, i64, i64)> = events
                    .iter()
                    .map(|e| (e.route, e.release_ns, e.deadline_ns))
                    .collect();
                keyed.sort_unstable();
                let mut start = 0;
                for (i, &(route, t, d)) in keyed.iter().enumerate() {
                    pairs.push((t, d));
                    if i + 1 == n || keyed[i + 1].0 != route {
                        routes.push((route, start, i + 1));
                        start = i + 1;
                    }
                }
            }
        }
        Self { pairs, routes }
    }

    fn bytes(&self) -> usize {
        self.pairs.capacity() * size_of::<(i64, i64)>()
            + self.routes.capacity() * size_of::<(u32, usize, usize)>()
    }

    fn each(&self, k: &Thresholds) -> impl Iterator<Item = (u32, &[(i64, i64)], usize)> {
        self.routes
            .iter()
            .map(move |&(r, a, b)| (r, &self.pairs[a..b], k.get(r) as usize))
    }
}

fn check_routes(events: &Events) -> Result<(), Error> {
    let known = events.routes().len();
    match events.events().iter().find(|e| e.route as usize >= known) {
        Some(e) => Err(Error::Invalid(format!(
            "route id {} is not interned",
            e.route
        ))),
        None => Ok(()),
    }
}

fn exact_prepared(
    prepared: &Prepared,
    events: &Events,
    params: &Params,
    k: &Thresholds,
    scratch: &mut Scratch,
) -> Result<(Key, ExactStats), Error> {
    let mut stats = ExactStats::default();
    let mut total: Key = (0, 0);
    for (route, pairs, k) in prepared.each(k) {
        let key =
            optimum::exact(pairs, k, params.max_exact_steps, scratch, &mut stats).map_err(|e| {
                Error::SearchLimit {
                    route: events.routes().name(route).unwrap_or_default().to_owned(),
                    events: e.events,
                    limit: params.max_exact_steps,
                }
            })?;
        total = (total.0 + key.0, total.1 + key.1);
    }
    Ok((total, stats))
}

fn share(covered: u64, events: &Events) -> Share {
    Share {
        covered,
        total: events.len() as u64,
    }
}

/// F: the fixed-partition share (windows `[kδ, (k+1)δ)` from origin 0, by release).
///
/// # Errors
/// [`Error::Invalid`] if `params.delta_ns <= 0` or an event's route is not interned.
pub fn fixed_share(events: &Events, params: &Params) -> Result<Share, Error> {
    params.validate()?;
    check_routes(events)?;
    let k = params.thresholds(events.routes());
    let prepared = Prepared::new(events.events());
    let covered = prepared
        .each(&k)
        .map(|(_, pairs, k)| optimum::fixed(pairs, k, params.delta_ns))
        .sum();
    Ok(share(covered, events))
}

/// P*: the exact offline optimum, with the fewest batches of any optimal schedule.
///
/// Each route is cut into components (maximal runs of events whose intervals
/// chain-overlap), which share no launch point and are solved independently:
///
/// * **Agreeable components** — deadlines non-decreasing in release order,
///   always so with equal deadlines `d = t + δ` — use the contiguous-block DP:
///   an optimal schedule is disjoint contiguous blocks of the sorted events
///   (crossing assignments can be swapped), block `[i, j]` is one batch iff
///   `t_j <= d_i`, and `D[j] = max(D[j-1], max_i D[i-1] + (j-i+1))` runs with a
///   monotone deque over `D[i-1] - i`. O(n log n) for the sort, O(n) after.
/// * **Other components** (some interval nested in an earlier one) use the
///   launch-point frontier DP: launch points can be taken at deadlines, an
///   optimal schedule covers exactly the events its points stab, and for a
///   fixed point set giving each point the K pending events with the earliest
///   deadlines is optimal. The DP runs over candidate points with states
///   (covered, batches, pool of pending deadlines), dropping Pareto-dominated
///   states and provably dominated jumps. Exact; O(S·J·w) for S surviving
///   states, J points per jump (about one deadline span) and w the most events
///   pending at once. S stayed near one per candidate point in measurements
///   (so about n·w² steps), but is exponential in w in the worst case, hence
///   `params.max_exact_steps`.
///
/// Both maximise (covered, −batches) lexicographically.
///
/// # Errors
/// [`Error::SearchLimit`] if components with unequal deadlines need more than
/// `params.max_exact_steps` steps; [`Error::Invalid`] if an event's
/// route is not interned.
pub fn exact(events: &Events, params: &Params) -> Result<Exact, Error> {
    check_routes(events)?;
    let k = params.thresholds(events.routes());
    let prepared = Prepared::new(events.events());
    let (key, stats) = exact_prepared(&prepared, events, params, &k, &mut Scratch::default())?;
    Ok(Exact {
        share: share(key.0 as u64, events),
        batches: key.1.unsigned_abs(),
        stats,
    })
}

/// U: the local upper bound (events with K of their route active at some
/// instant of their interval).
///
/// # Errors
/// [`Error::Invalid`] if an event's route is not interned.
pub fn upper_share(events: &Events, params: &Params) -> Result<Share, Error> {
    check_routes(events)?;
    let k = params.thresholds(events.routes());
    let prepared = Prepared::new(events.events());
    let mut scratch = Scratch::default();
    let covered = prepared
        .each(&k)
        .map(|(_, pairs, k)| optimum::upper(pairs, k, &mut scratch))
        .sum();
    Ok(share(covered, events))
}

/// F, P* and U of `events` in one pass over one sorted copy.
///
/// # Errors
/// As [`fixed_share`] and [`exact`].
pub fn analyze(events: &Events, params: &Params) -> Result<Report, Error> {
    params.validate()?;
    check_routes(events)?;
    let k = params.thresholds(events.routes());
    let prepared = Prepared::new(events.events());
    let mut scratch = Scratch::default();
    let mut fixed = 0;
    let mut upper = 0;
    for (_, pairs, k) in prepared.each(&k) {
        fixed += optimum::fixed(pairs, k, params.delta_ns);
        upper += optimum::upper(pairs, k, &mut scratch);
    }
    let (key, stats) = exact_prepared(&prepared, events, params, &k, &mut scratch)?;
    let n = events.len() as u64;
    let (f, p, u) = (
        share(fixed, events),
        share(key.0 as u64, events),
        share(upper, events),
    );
    let gap_closure = gap_closure(fixed, p.covered, upper);
    Ok(Report {
        events: n,
        fixed_share: f.ratio(),
        exact_share: p.ratio(),
        exact_events: p.covered,
        exact_batches: key.1.unsigned_abs(),
        upper_share: u.ratio(),
        gap_closure,
        detail: Detail {
            fixed_events: fixed,
            upper_events: upper,
            exact: stats,
            scratch_bytes: prepared.bytes() + scratch.bytes(),
        },
    })
}
