//! Property tests: the analyzer against exhaustive search on thousands of small
//! random instances, the two P* algorithms against each other on larger ones,
//! and the monotonicity and ordering invariants. Seeded, so failures reproduce.

use crate::optimum::{Key, Scratch, block_dp, frontier_dp};
use crate::{Events, Params, SplitMix64, analyze};

/// One random instance: `(release, deadline, route)` and its parameters.
#[derive(Debug, Clone)]
struct Instance {
    events: Vec<(i64, i64, u32)>,
    k: u32,
    /// K override for route 1, if any.
    k1: Option<u32>,
    delta: i64,
}

impl Instance {
    fn k_of(&self, route: u32) -> usize {
        match (route, self.k1) {
            (1, Some(k)) => k as usize,
            _ => self.k.max(1) as usize,
        }
    }

    fn log(&self) -> Events {
        let mut log = Events::new();
        for &(t, d, r) in &self.events {
            log.push(t, d, &format!("r{r}")).unwrap();
        }
        log
    }

    fn params(&self) -> Params {
        let mut p = Params::new(self.k, self.delta);
        if let Some(k) = self.k1 {
            p.k_route.insert("r1".to_owned(), k);
        }
        p
    }
}

fn random_instance(rng: &mut SplitMix64, max_n: u64, equal: bool) -> Instance {
    let n = 1 + rng.below(max_n);
    let routes = 1 + rng.below(3) as u32;
    let span = 1 + rng.below(14) as i64;
    let delta = 1 + rng.below(6) as i64;
    let k = 1 + rng.below(4) as u32;
    let k1 = (rng.below(3) == 0).then(|| 1 + rng.below(4) as u32);
    let events = (0..n)
        .map(|_| {
            let t = rng.below(span as u64) as i64 - 2;
            let d = if equal {
                t + delta
            } else {
                t + rng.below(9) as i64
            };
            (t, d, rng.below(u64::from(routes)) as u32)
        })
        .collect();
    Instance {
        events,
        k,
        k1,
        delta,
    }
}

/// Exhaustive search over every way to put each event in no batch, an open
/// batch of its route it is compatible with, or a new batch. Independent of
/// the launch-point and contiguity arguments the fast algorithms rely on.
fn brute_exact(inst: &Instance) -> Key {
    struct Group {
        route: u32,
        latest_release: i64,
        earliest_deadline: i64,
        size: usize,
    }
    fn go(inst: &Instance, i: usize, groups: &mut Vec<Group>, covered: i64, best: &mut Key) {
        if i == inst.events.len() {
            if groups.iter().all(|g| g.size >= inst.k_of(g.route)) {
                *best = (*best).max((covered, -(groups.len() as i64)));
            }
            return;
        }
        let (t, d, r) = inst.events[i];
        go(inst, i + 1, groups, covered, best);
        for g in 0..groups.len() {
            let group = &groups[g];
            let (lr, ed) = (group.latest_release.max(t), group.earliest_deadline.min(d));
            if group.route != r || lr > ed {
                continue;
            }
            let saved = (group.latest_release, group.earliest_deadline);
            groups[g].latest_release = lr;
            groups[g].earliest_deadline = ed;
            groups[g].size += 1;
            go(inst, i + 1, groups, covered + 1, best);
            groups[g].size -= 1;
            (groups[g].latest_release, groups[g].earliest_deadline) = saved;
        }
        groups.push(Group {
            route: r,
            latest_release: t,
            earliest_deadline: d,
            size: 1,
        });
        go(inst, i + 1, groups, covered + 1, best);
        groups.pop();
    }
    let mut best = (0, 0);
    go(inst, 0, &mut Vec::new(), 0, &mut best);
    best
}

fn brute_upper(inst: &Instance) -> u64 {
    let active = |tau: i64, r: u32| {
        inst.events
            .iter()
            .filter(|e| e.2 == r && e.0 <= tau && tau <= e.1)
            .count()
    };
    inst.events
        .iter()
        .filter(|&&(t, d, r)| (t..=d).any(|tau| active(tau, r) >= inst.k_of(r)))
        .count() as u64
}

fn brute_fixed(inst: &Instance) -> u64 {
    let bucket = |e: &(i64, i64, u32)| (e.0.div_euclid(inst.delta), e.2);
    inst.events
        .iter()
        .filter(|e| {
            let n = inst
                .events
                .iter()
                .filter(|o| bucket(o) == bucket(e))
                .count();
            n >= inst.k_of(e.2)
        })
        .count() as u64
}

fn check_against_brute(inst: &Instance) {
    let report = analyze(&inst.log(), &inst.params()).unwrap();
    let (covered, batches) = brute_exact(inst);
    assert_eq!(
        (report.exact_events as i64, -(report.exact_batches as i64)),
        (covered, batches),
        "P* on {inst:?}"
    );
    assert_eq!(
        report.detail.upper_events,
        brute_upper(inst),
        "U on {inst:?}"
    );
    assert_eq!(
        report.detail.fixed_events,
        brute_fixed(inst),
        "F on {inst:?}"
    );
    assert!(
        report.exact_events <= report.detail.upper_events,
        "P* <= U on {inst:?}"
    );
}

#[test]
fn equal_deadlines_match_brute_force() {
    let mut rng = SplitMix64::new(1);
    for _ in 0..3000 {
        check_against_brute(&random_instance(&mut rng, 8, true));
    }
    for _ in 0..200 {
        check_against_brute(&random_instance(&mut rng, 10, true));
    }
}

#[test]
fn unequal_deadlines_match_brute_force() {
    let mut rng = SplitMix64::new(2);
    for _ in 0..3000 {
        check_against_brute(&random_instance(&mut rng, 8, false));
    }
    for _ in 0..200 {
        check_against_brute(&random_instance(&mut rng, 10, false));
    }
}

/// The frontier DP must also be exact where the block DP applies, which lets
/// the two check each other well beyond brute-force sizes.
#[test]
fn frontier_dp_equals_block_dp_on_agreeable_routes() {
    let mut rng = SplitMix64::new(3);
    let mut scratch = Scratch::default();
    for round in 0..400 {
        let n = 1 + rng.below(if round < 300 { 40 } else { 150 });
        let delta = 1 + rng.below(20) as i64;
        let span = 1 + rng.below(200) as i64;
        let k = 1 + rng.below(8) as usize;
        let mut route: Vec<(i64, i64)> = (0..n)
            .map(|_| {
                let t = rng.below(span as u64) as i64;
                (t, t + delta)
            })
            .collect();
        route.sort_unstable();
        let block = block_dp(&route, k, &mut scratch);
        let (frontier, _) = frontier_dp(&route, k, u64::MAX).unwrap();
        assert_eq!(block, frontier, "k={k} route={route:?}");
        // Small random shifts of deadlines that keep them agreeable.
        let mut bumped = route.clone();
        let mut floor = i64::MIN;
        for p in &mut bumped {
            p.1 = (p.1 + rng.below(3) as i64).max(floor).max(p.0);
            floor = p.1;
        }
        let block = block_dp(&bumped, k, &mut scratch);
        let (frontier, _) = frontier_dp(&bumped, k, u64::MAX).unwrap();
        assert_eq!(block, frontier, "k={k} route={bumped:?}");
    }
}

#[test]
fn ordering_and_monotonicity_invariants() {
    let mut rng = SplitMix64::new(4);
    for _ in 0..1500 {
        let equal = rng.below(2) == 0;
        let inst = random_instance(&mut rng, 12, equal);
        let base = analyze(&inst.log(), &inst.params()).unwrap();
        assert!(base.exact_events <= base.detail.upper_events);
        if equal {
            // A fixed window is a feasible batch only when d = t + δ.
            assert!(
                base.detail.fixed_events <= base.exact_events,
                "F <= P* on {inst:?}"
            );
            let g = base.gap_closure.unwrap_or(0.0);
            assert!((0.0..=1.0).contains(&g), "G in [0, 1] on {inst:?}");
            // P* is non-decreasing in δ.
            let mut wider = inst.clone();
            wider.delta += 1 + rng.below(3) as i64;
            for e in &mut wider.events {
                e.1 = e.0 + wider.delta;
            }
            let wide = analyze(&wider.log(), &wider.params()).unwrap();
            assert!(
                wide.exact_events >= base.exact_events,
                "δ monotone on {inst:?}"
            );
        }
        // P* is non-increasing in K (here for every route at once).
        let mut stricter = inst.clone();
        stricter.k += 1;
        stricter.k1 = stricter.k1.map(|k| k + 1);
        let strict = analyze(&stricter.log(), &stricter.params()).unwrap();
        assert!(
            strict.exact_events <= base.exact_events,
            "K monotone on {inst:?}"
        );
        // Extending a deadline never lowers P* or U.
        let mut longer = inst.clone();
        let i = rng.below(longer.events.len() as u64) as usize;
        longer.events[i].1 += 1 + rng.below(4) as i64;
        let long = analyze(&longer.log(), &longer.params()).unwrap();
        assert!(
            long.exact_events >= base.exact_events,
            "deadline monotone on {inst:?}"
        );
        assert!(long.detail.upper_events >= base.detail.upper_events);
    }
}

/// Exact by a second, independent route for medium sizes: every set T of
/// launch points drawn from the deadlines, value = events T stabs, feasible iff
/// a bipartite matching gives every point K distinct events (Kuhn's augmenting
/// paths, no EDF). Exercises the frontier DP's dominance pruning on instances
/// too large for [`brute_exact`].
fn subsets_exact(route: &[(i64, i64)], k: usize) -> Key {
    fn augment(
        slot: usize,
        adj: &[Vec<usize>],
        owner: &mut [Option<usize>],
        seen: &mut [bool],
    ) -> bool {
        for &e in &adj[slot] {
            if !seen[e] {
                seen[e] = true;
                if owner[e].is_none_or(|o| augment(o, adj, owner, seen)) {
                    owner[e] = Some(slot);
                    return true;
                }
            }
        }
        false
    }
    let mut points: Vec<i64> = route.iter().map(|p| p.1).collect();
    points.sort_unstable();
    points.dedup();
    let mut best = (0, 0);
    for mask in 1u32..(1 << points.len()) {
        let chosen: Vec<i64> = (0..points.len())
            .filter(|b| mask >> b & 1 == 1)
            .map(|b| points[b])
            .collect();
        let stabbed = route
            .iter()
            .filter(|&&(t, d)| chosen.iter().any(|&c| t <= c && c <= d))
            .count() as i64;
        let key = (stabbed, -(chosen.len() as i64));
        if key <= best {
            continue;
        }
        let adj: Vec<Vec<usize>> = chosen
            .iter()
            .flat_map(|&c| std::iter::repeat_n(c, k))
            .map(|c| {
                (0..route.len())
                    .filter(|&e| route[e].0 <= c && c <= route[e].1)
                    .collect()
            })
            .collect();
        let mut owner = vec![None; route.len()];
        let feasible = (0..adj.len()).all(|slot| {
            let mut seen = vec![false; route.len()];
            augment(slot, &adj, &mut owner, &mut seen)
        });
        if feasible {
            best = key;
        }
    }
    best
}

#[test]
fn frontier_dp_matches_subset_search_on_medium_nested_instances() {
    let mut rng = SplitMix64::new(5);
    for _ in 0..2000 {
        let n = 6 + rng.below(9) as usize;
        let k = 1 + rng.below(4) as usize;
        let span = 2 + rng.below(12) as i64;
        let long_odds = 2 + rng.below(4);
        let mut route: Vec<(i64, i64)> = (0..n)
            .map(|_| {
                let t = rng.below(span as u64) as i64;
                // Mostly short intervals, some long ones that nest others.
                let len = if rng.below(long_odds) == 0 {
                    rng.below(2 * span as u64) as i64
                } else {
                    rng.below(3) as i64
                };
                (t, t + len)
            })
            .collect();
        route.sort_unstable();
        let (frontier, _) = frontier_dp(&route, k, u64::MAX).unwrap();
        assert_eq!(frontier, subsets_exact(&route, k), "k={k} route={route:?}");
    }
}

/// Found by a wider random hunt: pruning states by pool size alone (instead
/// of deadline by deadline) loses the optimum here.
#[test]
fn pool_dominance_compares_deadlines_not_just_sizes() {
    let route = [
        (0, 0),
        (0, 21),
        (1, 2),
        (3, 5),
        (5, 17),
        (6, 7),
        (7, 8),
        (7, 9),
        (8, 8),
        (8, 8),
        (9, 22),
        (10, 12),
    ];
    assert_eq!(subsets_exact(&route, 3), (9, -3));
    assert_eq!(frontier_dp(&route, 3, u64::MAX).unwrap().0, (9, -3));
}
