//! Choosing keep-alives against a start-latency objective.
//!
//! For one caller, a keep-alive `k` buys warm starts and costs held
//! capacity: of its recent pauses, those no longer than `k` end on its warm
//! pod, and each pause holds the pod for `min(pause, k)`. The candidates
//! (the shortest keep-alive, and each remembered pause with a margin) give
//! points (share of its next jobs that start warm, GPU shares x ms held per
//! pause); only the lower convex hull of those points is ever worth
//! choosing, and at a price `p` per warm start the caller's best keep-alive
//! is the hull vertex that maximises `p x warm - cost`.
//!
//! For the pool, every hull segment is an offer of extra warm starts at its
//! slope. Taking offers cheapest first until the callers' predicted warm
//! share (weighted by their arrival rates) meets the objective gives the
//! least capacity that meets it, and the slope of the last offer taken is
//! the price every caller then chooses at. Pure arithmetic on the pauses the
//! policy keeps; no clock.
//!
//! A caller whose bursts come at a regular period is not held through its
//! long pauses: its pod is released and a standby pod bound to it ahead of
//! the next burst (a re-warm). When to bind is priced the same way: binding
//! at an offset from the burst's start serves warm the bursts that come
//! later (the recent periods tell which share), and holds the pod from the
//! binding until the burst comes. Its candidates (no re-warm, or a binding
//! `lead` before each remembered period) make a second curve, and a caller
//! offers the sum of its two curves: the keep-alive for its short pauses,
//! the binding for its long ones.

/// One candidate keep-alive of a caller.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Point {
    /// Share of its pauses that end on its warm pod (or on one re-warmed
    /// for its next burst).
    pub(crate) warm: f64,
    /// GPU shares x ms held per pause.
    pub(crate) cost: f64,
    /// The keep-alive; on a re-warm curve, how long after a burst's start
    /// the next one's pod is bound ([`NEVER`]: it is not re-warmed).
    pub(crate) keep_ms: u64,
}

/// A re-warm curve's candidate that binds nothing: the burst's first job
/// takes a standby pod.
pub(crate) const NEVER: u64 = u64::MAX;

/// The lower convex hull of a caller's candidates, by increasing warm share.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Curve {
    hull: Vec<Point>,
}

/// What a curve is built from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// GPU shares of the caller's pod (at least 1 is charged).
    pub(crate) shares: u32,
    /// Added to each pause, relative to it.
    pub(crate) margin: f64,
    pub(crate) min_ms: u64,
    pub(crate) max_ms: u64,
    /// Pauses at least this long are left to the re-warm: no keep-alive
    /// reaches them, and they count here as not warm (the re-warm curve
    /// prices them).
    pub(crate) covered_from: Option<u64>,
}

/// What a re-warm curve is built from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RewarmShape {
    /// GPU shares of the caller's pod (at least 1 is charged).
    pub(crate) shares: u32,
    /// A burst that comes at least this long after its pod was bound finds
    /// it warm (the binding is done).
    pub(crate) lead_ms: u64,
    /// Share of the caller's pauses that end a burst (the re-warm serves
    /// those): the curve is per pause, as the keep-alive's.
    pub(crate) share: f64,
}

impl Curve {
    /// The curve of `pauses` (ms, any order).
    pub(crate) fn new(pauses: &[u32], shape: Shape) -> Curve {
        let n = pauses.len();
        if n == 0 {
            return Curve::default();
        }
        let mut sorted: Vec<u64> = pauses.iter().map(|&p| u64::from(p)).collect();
        sorted.sort_unstable();
        let mut prefix = Vec::with_capacity(n + 1);
        prefix.push(0u64);
        for &p in &sorted {
            prefix.push(prefix.last().copied().unwrap_or(0).saturating_add(p));
        }
        let limit = shape.covered_from.unwrap_or(u64::MAX);
        let reachable = sorted.partition_point(|&p| p < limit);
        let shares = f64::from(shape.shares.max(1));
        let point = |k: u64| {
            let within = sorted.partition_point(|&p| p <= k);
            let held = ((n - within) as f64).mul_add(k as f64, prefix[within] as f64);
            Point {
                warm: within.min(reachable) as f64 / n as f64,
                cost: shares * held / n as f64,
                keep_ms: k,
            }
        };
        let mut candidates = vec![shape.min_ms];
        for &p in &sorted[..reachable] {
            let k = (p as f64 * (1.0 + shape.margin)).ceil() as u64;
            candidates.push(k.clamp(shape.min_ms, shape.max_ms.max(shape.min_ms)));
        }
        candidates.dedup();
        Curve::hull(candidates.into_iter().map(point))
    }

    /// The re-warm curve of a caller whose recent periods (ms between burst
    /// starts, any order) are `periods`: not re-warming (no warm start, no
    /// cost), or binding `lead` before each remembered period, which serves
    /// warm the bursts that come no sooner and holds the pod from the
    /// binding to the burst.
    pub(crate) fn rewarm(periods: &[u32], shape: RewarmShape) -> Curve {
        let m = periods.len();
        if m == 0 || shape.share <= 0.0 {
            return Curve::default();
        }
        let mut sorted: Vec<u64> = periods.iter().map(|&p| u64::from(p)).collect();
        sorted.sort_unstable();
        let shares = f64::from(shape.shares.max(1));
        let per = shape.share / m as f64;
        let never = Point {
            warm: 0.0,
            cost: 0.0,
            keep_ms: NEVER,
        };
        // Latest binding first: warm share grows as the binding moves earlier.
        let mut points = vec![never];
        let mut offsets: Vec<u64> = sorted
            .iter()
            .map(|&p| p.saturating_sub(shape.lead_ms))
            .collect();
        offsets.dedup();
        for &at in offsets.iter().rev() {
            let warm = sorted.iter().filter(|&&p| p >= at + shape.lead_ms).count();
            let held: u64 = sorted.iter().map(|&p| p.saturating_sub(at)).sum();
            points.push(Point {
                warm: warm as f64 * per,
                cost: shares * held as f64 * per,
                keep_ms: at,
            });
        }
        Curve::hull(points.into_iter())
    }

    /// The lower convex hull of `points`, given by increasing warm share
    /// (ties: cheapest first).
    fn hull(points: impl Iterator<Item = Point>) -> Curve {
        let mut hull: Vec<Point> = Vec::new();
        for p in points {
            // Same warm share for more: never worth it.
            if hull.last().is_some_and(|l| p.warm <= l.warm) {
                continue;
            }
            while hull.len() >= 2 {
                let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
                // b lies on or above the chord a-p: drop it.
                if (b.cost - a.cost) * (p.warm - a.warm) >= (p.cost - a.cost) * (b.warm - a.warm) {
                    hull.pop();
                } else {
                    break;
                }
            }
            hull.push(p);
        }
        Curve { hull }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.hull.is_empty()
    }

    /// The curve of taking one candidate of each: the sum of the cheapest
    /// start points, then every offer of both, cheapest first (the
    /// Minkowski sum of the two hulls). Its points' `keep_ms` mean nothing;
    /// choose on each curve at the same price instead.
    pub(crate) fn plus(&self, other: &Curve) -> Curve {
        let (Some(a), Some(b)) = (self.hull.first(), other.hull.first()) else {
            return if self.is_empty() {
                other.clone()
            } else {
                self.clone()
            };
        };
        let mut at = Point {
            warm: a.warm + b.warm,
            cost: a.cost + b.cost,
            keep_ms: 0,
        };
        let mut offers: Vec<(f64, f64)> = self.offers().chain(other.offers()).collect();
        offers.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut hull = vec![at];
        for (slope, gain) in offers {
            at = Point {
                warm: at.warm + gain,
                cost: slope.mul_add(gain, at.cost),
                keep_ms: 0,
            };
            hull.push(at);
        }
        Curve { hull }
    }

    /// The best candidate at `price` (shares x ms per warm start): the
    /// longest keep-alive whose every extra warm start costs at most that.
    pub(crate) fn choose(&self, price: f64) -> Option<Point> {
        let mut best = *self.hull.first()?;
        for &next in &self.hull[1..] {
            if slope(best, next) > price {
                break;
            }
            best = next;
        }
        Some(best)
    }

    /// Offers of extra warm share, at their slope.
    fn offers(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.hull
            .windows(2)
            .map(|w| (slope(w[0], w[1]), w[1].warm - w[0].warm))
    }
}

fn slope(a: Point, b: Point) -> f64 {
    (b.cost - a.cost) / (b.warm - a.warm).max(f64::MIN_POSITIVE)
}

/// The lowest price, at least `floor`, at which the callers' predicted warm
/// share (each `(weight, curve)`, weighted by arrival rate) reaches
/// `target`; and the share predicted at it. Infinite when no price does:
/// every caller then takes its longest keep-alive.
pub(crate) fn price<'a>(
    callers: impl Iterator<Item = (f64, &'a Curve)>,
    target: f64,
    floor: f64,
) -> (f64, f64) {
    let mut total = 0.0;
    let mut base = 0.0;
    let mut offers: Vec<(f64, f64)> = Vec::new();
    for (w, c) in callers {
        let Some(first) = c.hull.first() else {
            continue;
        };
        total += w;
        base += w * first.warm;
        offers.extend(c.offers().map(|(s, g)| (s, g * w)));
    }
    if total <= 0.0 {
        return (floor, 0.0);
    }
    offers.sort_by(|a, b| a.0.total_cmp(&b.0));
    let want = target * total;
    let mut got = base;
    let mut price = 0.0;
    for &(s, g) in &offers {
        if got >= want && s > floor {
            break;
        }
        got += g;
        price = s;
    }
    let price = if got < want {
        f64::INFINITY
    } else {
        price.max(floor)
    };
    (price, (got / total).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape {
            shares: 1,
            margin: 0.0,
            min_ms: 0,
            max_ms: u64::MAX,
            covered_from: None,
        }
    }

    #[test]
    fn the_curve_is_the_convex_hull_of_the_candidates() {
        // Pauses 1, 2, 3, 100 s: covering the 100 s pause costs far more per
        // warm start than the others.
        let c = Curve::new(&[3_000, 1_000, 100_000, 2_000], shape());
        let keeps: Vec<u64> = c.hull.iter().map(|p| p.keep_ms).collect();
        // Covering the 1 s pause alone costs more per warm start (4 s held
        // over 1 warm start) than covering the first three (9 s over 3).
        assert_eq!(keeps, [0, 3_000, 100_000]);
        // At a price of 3 s per warm start the caller covers 3 of 4.
        let p = c.choose(3_000.0).unwrap();
        assert_eq!((p.keep_ms, p.warm), (3_000, 0.75));
        // Held: 1 + 2 + 3 + 3 s over 4 pauses.
        assert!((p.cost - 9_000.0 / 4.0).abs() < 1e-9);
        assert_eq!(c.choose(1e12).unwrap().keep_ms, 100_000);
        assert_eq!(c.choose(0.0).unwrap().keep_ms, 0);
    }

    #[test]
    fn pauses_left_to_the_rewarm_are_neither_reached_nor_counted_warm() {
        let c = Curve::new(
            &[500, 600, 60_000, 90_000],
            Shape {
                covered_from: Some(10_000),
                ..shape()
            },
        );
        let last = c.choose(1e12).unwrap();
        assert_eq!((last.keep_ms, last.warm), (600, 0.5));
        assert_eq!(c.choose(0.0).unwrap().warm, 0.0);
    }

    #[test]
    fn a_rewarm_binds_as_late_as_the_price_allows() {
        // Periods of 40, 41, 42 and 50 s; bound 3 s before a period, a pod
        // of 8 shares serves warm the bursts that come no sooner. Half the
        // caller's pauses end a burst.
        let r = RewarmShape {
            shares: 8,
            lead_ms: 3_000,
            share: 0.5,
        };
        let c = Curve::rewarm(&[42_000, 50_000, 40_000, 41_000], r);
        // Nothing bought: no re-warm.
        let p = c.choose(0.0).unwrap();
        assert_eq!((p.keep_ms, p.warm, p.cost), (NEVER, 0.0, 0.0));
        // Everything bought: bound 3 s before the shortest period, every
        // burst warm, each holding the pod from 37 s to its start.
        let p = c.choose(1e12).unwrap();
        assert_eq!((p.keep_ms, p.warm), (37_000, 0.5));
        let held = (3 + 4 + 5 + 13) as f64 * 1000.0;
        assert!((p.cost - 8.0 * held * 0.5 / 4.0).abs() < 1e-6, "{p:?}");
        // The hull grows warm share with every earlier binding, and each
        // extra warm start costs more than the one before.
        let slopes: Vec<f64> = c.offers().map(|o| o.0).collect();
        assert!(slopes.windows(2).all(|w| w[0] <= w[1]), "{slopes:?}");
        // At a middling price the binding waits past the shortest period.
        let mid = c.choose(slopes[0]).unwrap();
        assert!(mid.keep_ms > 37_000 && mid.keep_ms != NEVER, "{mid:?}");
        assert!(Curve::rewarm(&[], r).is_empty());
    }

    #[test]
    fn the_sum_of_two_curves_offers_both_cheapest_first() {
        let keep = Curve::new(&[1_000, 2_000, 60_000, 60_000], shape());
        let rewarm = Curve::rewarm(
            &[60_000, 61_000, 62_000],
            RewarmShape {
                shares: 1,
                lead_ms: 1_000,
                share: 0.5,
            },
        );
        let sum = keep.plus(&rewarm);
        let (a, b) = (keep.hull[0], rewarm.hull[0]);
        assert_eq!(sum.hull[0].warm, a.warm + b.warm);
        let last = sum.hull.last().unwrap();
        let (ka, kb) = (keep.hull.last().unwrap(), rewarm.hull.last().unwrap());
        assert!((last.warm - (ka.warm + kb.warm)).abs() < 1e-9);
        assert!((last.cost - (ka.cost + kb.cost)).abs() < 1e-6);
        // Convex: offers never get cheaper.
        let slopes: Vec<f64> = sum.offers().map(|o| o.0).collect();
        assert!(slopes.windows(2).all(|w| w[0] <= w[1]), "{slopes:?}");
        // At any price, the sum predicts what each curve chooses.
        for price in [0.0, 500.0, 2_000.0, 1e6] {
            let want = keep.choose(price).unwrap().warm + rewarm.choose(price).unwrap().warm;
            let got = sum.choose(price).unwrap().warm;
            assert!((want - got).abs() < 1e-9, "at {price}: {want} vs {got}");
        }
        assert_eq!(Curve::default().plus(&keep), keep);
    }

    #[test]
    fn the_price_is_the_cheapest_that_meets_the_target() {
        // Cheap caller: pauses of 1 s. Dear caller: pauses of 1 s and 60 s.
        let cheap = Curve::new(&[1_000; 4], shape());
        let dear = Curve::new(&[1_000, 1_000, 60_000, 60_000], shape());
        let curves = [(1.0, &cheap), (1.0, &dear)];
        // 0.75 is met without the 60 s pauses.
        let (p, got) = price(curves.iter().map(|&(w, c)| (w, c)), 0.75, 0.0);
        assert_eq!(got, 0.75);
        assert!(cheap.choose(p).unwrap().warm == 1.0 && dear.choose(p).unwrap().warm == 0.5);
        // 0.9 needs them.
        let (p, got) = price(curves.iter().map(|&(w, c)| (w, c)), 0.9, 0.0);
        assert_eq!((got, dear.choose(p).unwrap().keep_ms), (1.0, 60_000));
        // A floor above every offer takes them all, whatever the target.
        let (p, _) = price(curves.iter().map(|&(w, c)| (w, c)), 0.1, 1e9);
        assert_eq!(p, 1e9);
    }
}
