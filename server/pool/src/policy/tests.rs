//! Policy rules, driven with a fake clock.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::*;
use crate::Instant;
use hearth_core::rng::SplitMix64;

const S: u32 = 8;

fn cfg() -> Config {
    Config {
        gpus: 4,
        shares_per_gpu: S,
        pod_shares: Shares(S),
        max_pods: 64,
        standby: StandbyConfig {
            min: 0,
            max: 0,
            ..StandbyConfig::default()
        },
        // The rules below are those of percentile keep-alives; the
        // objective has its own tests.
        objective: None,
        // The timings below are written for a lead of 3 s.
        rewarm: RewarmConfig {
            lead: Duration::from_secs(3),
            ..RewarmConfig::default()
        },
        keep_alive: KeepAliveConfig::scripted(),
        ..Config::default()
    }
}

fn keepalive(secs: u64) -> Kind {
    Kind::KeepAlive {
        keep_alive: Duration::from_secs(secs),
    }
}

/// A pool, a fake clock, and the decisions of the last event.
struct Fake {
    pool: Pool,
    t: u64,
}

impl Fake {
    fn new(kind: Kind, cfg: Config) -> (Fake, Vec<Decision>) {
        let mut f = Fake {
            pool: Pool::new(kind, cfg).unwrap(),
            t: 0,
        };
        let d = f.ev(Event::Tick);
        (f, d)
    }

    fn at(&mut self, ms: u64) -> &mut Fake {
        self.t = ms;
        self
    }

    fn ev(&mut self, e: Event) -> Vec<Decision> {
        let mut out = Vec::new();
        self.pool
            .handle(Instant::from_millis(self.t), e, &mut out)
            .unwrap();
        self.pool.check_invariants();
        out
    }

    fn queue(&mut self, job: u64, caller: u64) -> Vec<Decision> {
        self.ev(Event::JobQueued(Request::new(
            JobId(job),
            CallerId(caller),
            TenantId(0),
        )))
    }

    fn finish(&mut self, job: u64) -> Vec<Decision> {
        self.ev(Event::JobFinished { job: JobId(job) })
    }

    fn ready(&mut self, pod: PodId) -> Vec<Decision> {
        self.ev(Event::PodReady { pod })
    }

    fn gone(&mut self, pod: PodId) -> Vec<Decision> {
        self.ev(Event::PodGone { pod })
    }

    /// Runs `job` of `caller` to the point it is assigned, starting pods as
    /// asked; returns its source and pod.
    fn run(&mut self, job: u64, caller: u64) -> (Source, PodId) {
        let mut d = self.queue(job, caller);
        loop {
            if let Some((_, pod, source)) = assigns(&d).into_iter().find(|a| a.0 == JobId(job)) {
                return (source, pod);
            }
            let started = starts(&d);
            assert!(
                !started.is_empty(),
                "job {job} neither assigned nor started: {d:?}"
            );
            d = Vec::new();
            for pod in started {
                d.extend(self.ready(pod));
            }
        }
    }
}

fn assigns(d: &[Decision]) -> Vec<(JobId, PodId, Source)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Assign {
                job, pod, source, ..
            } => Some((*job, *pod, *source)),
            _ => None,
        })
        .collect()
}

fn starts(d: &[Decision]) -> Vec<PodId> {
    d.iter()
        .filter_map(|d| match d {
            Decision::StartPod { pod, .. } => Some(*pod),
            _ => None,
        })
        .collect()
}

fn releases(d: &[Decision]) -> Vec<(PodId, Reason)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Release { pod, reason } => Some((*pod, reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_warm_pod_serves_only_its_last_caller() {
    let (mut f, _) = Fake::new(keepalive(60), cfg());
    let (src, a_pod) = f.run(1, 100);
    assert_eq!(src, Source::Cold);
    f.at(1_000).finish(1);
    // Another caller never gets A's warm pod, even with the pool otherwise idle.
    let (src, b_pod) = f.at(2_000).run(2, 200);
    assert_eq!(src, Source::Cold);
    assert_ne!(a_pod, b_pod);
    // A's next job does.
    let d = f.at(3_000).queue(3, 100);
    assert_eq!(assigns(&d), vec![(JobId(3), a_pod, Source::Warm)]);
    assert!(matches!(
        &d[0],
        Decision::Assign {
            reason: Reason::WarmAffinity {
                caller: CallerId(100),
                idle_ms: 2_000
            },
            ..
        }
    ));
}

#[test]
fn standby_is_promoted_on_handover_and_refilled() {
    let mut c = cfg();
    c.standby = StandbyConfig {
        min: 2,
        max: 8,
        ..StandbyConfig::default()
    };
    let (mut f, d) = Fake::new(Kind::Firepool, c);
    let standby = starts(&d);
    assert_eq!(standby.len(), 2);
    for d in &d {
        if let Decision::StartPod {
            purpose, placement, ..
        } = d
        {
            assert_eq!(*purpose, Purpose::Standby);
            // Zero VRAM, one share.
            assert_eq!(placement.shares(), 1);
        }
    }
    f.at(30_000);
    for &p in &standby {
        f.ready(p);
    }
    // Two standby shares sit on one GPU, beside each other.
    let snap = f.pool.snapshot();
    assert_eq!(snap.pods.standby, 2);
    assert_eq!(snap.gpus.held_shares.standby, 2);

    let d = f.at(31_000).queue(1, 100);
    let promoted = d.iter().find_map(|d| match d {
        Decision::Promote { pod, placement, .. } => Some((*pod, placement.shares())),
        _ => None,
    });
    let (pod, shares) = promoted.expect("a standby pod is promoted");
    assert!(standby.contains(&pod));
    assert_eq!(shares, S, "promoted to the profile's GPUs");
    assert_eq!(assigns(&d), vec![(JobId(1), pod, Source::Standby)]);
    // Refilled to the target.
    assert_eq!(starts(&d).len(), 1);
    let snap = f.pool.snapshot();
    assert_eq!(snap.pods.standby + snap.pods.starting, 2);
}

#[test]
fn standby_target_follows_the_largest_recent_burst() {
    let mut c = cfg();
    c.gpus = 16;
    c.standby = StandbyConfig {
        min: 1,
        max: 10,
        ..StandbyConfig::default()
    };
    let (mut f, _) = Fake::new(Kind::Firepool, c);
    // Six new callers within one start time: six handovers.
    for i in 0..6 {
        f.at(1_000 + i * 100).queue(i, 100 + i);
    }
    assert_eq!(f.pool.snapshot().standby_target, 6);
    // Held over the horizon (120 s), then back to the minimum.
    f.at(100_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 6);
    f.at(200_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 1);
}

/// Drives random events through a pool, acting as a runtime that starts pods
/// after a delay, runs jobs for a while, loses pods now and then and cancels
/// jobs; checks the policy's invariants after every event.
fn fuzz(kind: Kind, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let mut c = Config {
        gpus: 6,
        shares_per_gpu: S,
        pod_shares: Shares(S),
        max_pods: 24,
        standby: StandbyConfig {
            min: 1,
            max: 6,
            ..StandbyConfig::default()
        },
        ..Config::default()
    };
    c.keep_alive.default = Duration::from_secs(20);
    c.keep_alive.min_samples = 2;
    c.budget.pool.ceiling = Shares(3 * S);
    c.budget.tenant.ceiling = Shares(2 * S);
    if let Kind::AlwaysOn { .. } = kind {
        c.max_pods = 5;
    }
    let mut pool = Pool::new(kind, c).unwrap();
    let mut now = 0u64;
    let mut out = Vec::new();
    // Timed runtime events: (time, event).
    let mut pending: Vec<(u64, Event)> = vec![(0, Event::Tick)];
    let mut job_caller: HashMap<JobId, CallerId> = HashMap::new();
    let mut last_caller: HashMap<PodId, CallerId> = HashMap::new();
    let mut active: HashSet<PodId> = HashSet::new();
    let mut running: HashMap<JobId, Vec<PodId>> = HashMap::new();
    let mut next_job = 0u64;
    for _ in 0..3_000 {
        let roll = rng.below(100);
        let event = if roll < 25 {
            let caller = CallerId(rng.below(8));
            let mut req = Request::new(JobId(next_job), caller, TenantId(caller.0 % 3));
            next_job += 1;
            req.pods = if rng.below(10) == 0 { 2 } else { 1 };
            req.priority = rng.below(3) as i32;
            req.shares = match rng.below(4) {
                0 => Some(Shares(2)),
                1 => Some(Shares(2 * S)),
                _ => None,
            };
            job_caller.insert(req.job, caller);
            Event::JobQueued(req)
        } else if roll < 27 && !job_caller.is_empty() {
            // Cancel (or finish) any known job.
            let mut ids: Vec<JobId> = job_caller.keys().copied().collect();
            ids.sort_unstable();
            let job = ids[rng.below(ids.len() as u64) as usize];
            pending.retain(|(_, e)| *e != Event::JobFinished { job });
            Event::JobFinished { job }
        } else if roll < 29 {
            // The runtime loses a pod.
            let snap = pool.snapshot();
            if snap.pod_list.is_empty() {
                Event::Tick
            } else {
                let p = snap.pod_list[rng.below(snap.pod_list.len() as u64) as usize].pod;
                pending.retain(|(_, e)| {
                    *e != Event::PodReady { pod: p } && *e != Event::PodGone { pod: p }
                });
                Event::PodGone { pod: p }
            }
        } else if roll < 32 {
            // A new leader adopts pods: a running job's, and idle ones.
            let caller = CallerId(rng.below(8));
            let mut req = Request::new(JobId(next_job), caller, TenantId(caller.0 % 3));
            next_job += 1;
            req.pods = 1 + rng.below(2) as u32;
            job_caller.insert(req.job, caller);
            Event::PodsAdopted {
                running: vec![req],
                idle: rng.below(3) as u32,
            }
        } else if roll < 33 {
            // The caller's loop moves to or from another pool.
            Event::LoopBusy {
                caller: CallerId(rng.below(8)),
                busy: rng.below(2) == 0,
            }
        } else if let Some(i) = (0..pending.len()).min_by_key(|&i| pending[i].0) {
            let (t, e) = pending.remove(i);
            now = now.max(t);
            e
        } else {
            now += 1_000;
            Event::Tick
        };
        if let Event::JobFinished { job } = event {
            job_caller.remove(&job);
            for pod in running.remove(&job).unwrap_or_default() {
                active.remove(&pod);
            }
        }
        if let Event::PodGone { pod } = event {
            active.remove(&pod);
        }
        let adopting = match &event {
            Event::PodsAdopted { running, .. } => running.first().map(|r| r.job),
            _ => None,
        };
        now += rng.below(400);
        out.clear();
        pool.handle(Instant::from_millis(now), event, &mut out)
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        pool.check_invariants();
        for d in &out {
            match d {
                Decision::StartPod { pod, .. } => {
                    pending.push((
                        now + 5_000 + rng.below(5_000),
                        Event::PodReady { pod: *pod },
                    ));
                }
                Decision::Assign {
                    job, pod, source, ..
                } => {
                    let caller = job_caller[job];
                    if *source == Source::Warm {
                        assert_eq!(
                            last_caller.get(pod),
                            Some(&caller),
                            "{kind}: warm pod crossed callers"
                        );
                    } else {
                        // A pod bound anew was never bound before, or was wiped.
                        assert!(
                            !last_caller.contains_key(pod),
                            "{kind}: {pod} reused unwiped"
                        );
                    }
                    last_caller.insert(*pod, caller);
                    assert!(active.insert(*pod), "{kind}: {pod} assigned twice");
                    let pods = running.entry(*job).or_default();
                    pods.push(*pod);
                    if pods.len() == 1 {
                        pending.push((now + rng.below(8_000), Event::JobFinished { job: *job }));
                    }
                }
                Decision::Reset { pod, .. } => {
                    last_caller.remove(pod);
                }
                Decision::Release { pod, .. } => {
                    assert!(!active.contains(pod), "{kind}: active {pod} released");
                    assert!(
                        !matches!(kind, Kind::AlwaysOn { .. }),
                        "always-on released {pod}"
                    );
                    pending.retain(|(_, e)| *e != Event::PodReady { pod: *pod });
                    pending.push((now + rng.below(2_000), Event::PodGone { pod: *pod }));
                }
                Decision::Prewarm { pod, caller, .. } => {
                    assert_eq!(
                        last_caller.get(pod),
                        None,
                        "{kind}: {pod} pre-warmed while bound"
                    );
                    last_caller.insert(*pod, *caller);
                }
                Decision::Adopted {
                    pod,
                    job: Some(job),
                    ..
                } => {
                    // Bound by the last leader, to the job's caller.
                    last_caller.insert(*pod, job_caller[job]);
                    assert!(active.insert(*pod), "{kind}: {pod} adopted twice");
                    let pods = running.entry(*job).or_default();
                    pods.push(*pod);
                    if pods.len() == 1 {
                        pending.push((now + rng.below(8_000), Event::JobFinished { job: *job }));
                    }
                }
                Decision::Promote { .. } | Decision::Budget { .. } | Decision::Adopted { .. } => {}
            }
        }
        // A running job the pool had no room for is not its to finish.
        if let Some(job) = adopting
            && !running.contains_key(&job)
        {
            job_caller.remove(&job);
        }
    }
}

#[test]
fn random_events_keep_every_invariant_under_every_policy() {
    for seed in 0..6 {
        for kind in [
            Kind::Fresh,
            Kind::AlwaysOn { size: None },
            keepalive(10),
            Kind::Firepool,
        ] {
            fuzz(kind, seed);
        }
    }
}

#[test]
fn shares_are_never_over_committed_and_waiting_jobs_get_freed_capacity() {
    let mut c = cfg();
    c.gpus = 1;
    c.pod_shares = Shares(3);
    let (mut f, _) = Fake::new(Kind::Fresh, c);
    f.run(1, 1);
    f.run(2, 2);
    // 3 + 3 of 8 shares are held; a third 3-share pod does not fit.
    let d = f.queue(3, 3);
    assert!(starts(&d).is_empty());
    assert_eq!(f.pool.snapshot().queued_jobs, 1);
    assert_eq!(f.pool.snapshot().gpus.held_shares.active, 6);
    // A finished job's pod is released; once gone, the third job starts.
    let d = f.at(5_000).finish(1);
    let (gone, _) = releases(&d)[0].clone();
    assert!(
        starts(&d).is_empty(),
        "capacity is not reused before the pod is gone"
    );
    let d = f.gone(gone);
    assert_eq!(starts(&d).len(), 1);
}

#[test]
fn over_budget_releases_the_warm_pod_idle_longest_and_never_an_active_one() {
    let mut c = cfg();
    c.budget.pool.ceiling = Shares(2 * S);
    // Demand far above the ceiling: only the ceiling binds.
    c.budget.horizon = Duration::from_secs(3_600);
    let (mut f, _) = Fake::new(Kind::Firepool, c);
    let mut pods = Vec::new();
    for caller in 1..=4 {
        pods.push(f.run(caller, caller).1);
    }
    f.at(10_000).finish(1);
    f.at(11_000).finish(2);
    let d = f.at(12_000).finish(3);
    let released = releases(&d);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].0, pods[0], "caller 1's pod was idle longest");
    assert!(matches!(released[0].1, Reason::OverBudget { .. }));
    // Job 4 still runs on its pod, over budget or not: only warm and standby count.
    let snap = f.pool.snapshot();
    assert_eq!(snap.pods.active, 1);
    assert_eq!(snap.gpus.held_shares.warm, u64::from(2 * S));
}

#[test]
fn a_tenant_over_its_budget_loses_its_own_idle_pods_only() {
    let mut c = cfg();
    c.budget.horizon = Duration::from_secs(3_600);
    c.budget.tenants.insert(
        TenantId(1),
        Bounds {
            floor: Shares(0),
            ceiling: Shares(S),
        },
    );
    let (mut f, _) = Fake::new(Kind::Firepool, c);
    let run = |f: &mut Fake, job: u64, caller: u64, tenant: u64| {
        let mut d = f.ev(Event::JobQueued(Request::new(
            JobId(job),
            CallerId(caller),
            TenantId(tenant),
        )));
        for p in starts(&d) {
            d = f.ready(p);
        }
        assigns(&d)[0].1
    };
    let other = run(&mut f, 1, 10, 2);
    let first = run(&mut f, 2, 20, 1);
    run(&mut f, 3, 21, 1);
    f.at(1_000).finish(1);
    f.at(2_000).finish(2);
    let d = f.at(3_000).finish(3);
    let released = releases(&d);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].0, first);
    assert!(matches!(
        released[0].1,
        Reason::OverTenantBudget {
            tenant: TenantId(1),
            ..
        }
    ));
    assert!(
        f.pool
            .snapshot()
            .pod_list
            .iter()
            .any(|p| p.pod == other && p.state == "warm")
    );
}

#[test]
fn tenant_bounds_set_at_run_time_apply_from_the_next_event() {
    let mut c = cfg();
    c.budget.horizon = Duration::from_secs(3_600);
    let (mut f, _) = Fake::new(Kind::Firepool, c);
    let (_, pod) = f.run(1, 10);
    assert!(
        f.pool
            .set_tenant_bounds(
                TenantId(0),
                Some(Bounds {
                    floor: Shares(2),
                    ceiling: Shares(1),
                }),
            )
            .is_err(),
        "a floor above the ceiling is refused"
    );
    let zero = Bounds {
        floor: Shares(0),
        ceiling: Shares(0),
    };
    f.pool.set_tenant_bounds(TenantId(0), Some(zero)).unwrap();
    assert_eq!(f.pool.config().tenant_bounds(TenantId(0)), zero);
    // With a ceiling of nothing the pod cannot stay warm once its job ends.
    let d = f.at(1_000).finish(1);
    let released = releases(&d);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].0, pod);
    assert!(matches!(
        released[0].1,
        Reason::OverTenantBudget {
            tenant: TenantId(0),
            ..
        }
    ));
    // Cleared, the tenant is back to the pool's default bounds.
    f.pool.set_tenant_bounds(TenantId(0), None).unwrap();
    assert_eq!(
        f.pool.config().tenant_bounds(TenantId(0)),
        Bounds::UNBOUNDED
    );
}

#[test]
fn budget_follows_demand_between_floor_and_ceiling() {
    let mut c = cfg();
    c.gpus = 8;
    c.budget.pool = Bounds {
        floor: Shares(S),
        ceiling: Shares(6 * S),
    };
    c.keep_alive.default = Duration::from_secs(3_600);
    c.budget.horizon = Duration::from_secs(600);
    let (mut f, d) = Fake::new(Kind::Firepool, c);
    let first = d.iter().find_map(|d| match d {
        Decision::Budget { budget, .. } => Some(*budget),
        _ => None,
    });
    assert_eq!(first, Some(Shares(S)), "no demand: the floor");
    // A burst of work raises the budget to the ceiling.
    for i in 0..5 {
        f.at(i * 1_000).run(i, i);
    }
    let snap = f.pool.snapshot().budget.unwrap();
    assert_eq!(snap.budget, Shares(6 * S));
    assert!(snap.inputs.arrival_rate_per_s > 0.0);
    for i in 0..5 {
        f.at(10_000 + i).finish(i);
    }
    assert_eq!(f.pool.snapshot().pods.warm, 5);
    // Quiet for ten minutes: the rate decays, the budget falls to the floor
    // and idle pods go, the longest idle first.
    let mut released = Vec::new();
    for s in 11..600 {
        let d = f.at(s * 1_000).ev(Event::Tick);
        released.extend(releases(&d).into_iter().map(|(p, _)| p));
    }
    assert_eq!(f.pool.snapshot().budget.unwrap().budget, Shares(S));
    assert_eq!(f.pool.snapshot().pods.warm, 1);
    assert_eq!(released.len(), 4);
}

#[test]
fn keep_alive_follows_each_callers_pauses() {
    let (mut f, _) = Fake::new(Kind::Firepool, cfg());
    let ka = |f: &Fake, caller| f.pool.keep_alive(CallerId(caller)).unwrap();
    // No history: the pool default.
    assert_eq!(ka(&f, 1), Duration::from_secs(120));
    // Caller 1 pauses 5 s between jobs, caller 2 pauses 1 s; jobs take 200 ms.
    let mut job = 0;
    for (caller, start, pause) in [(1u64, 0u64, 5_000u64), (2, 100_000, 1_000)] {
        let mut t = start;
        for i in 0..6 {
            let (src, _) = f.at(t).run(job, caller);
            assert_eq!(src, if i == 0 { Source::Cold } else { Source::Warm });
            f.at(t + 200).finish(job);
            job += 1;
            t += 200 + pause;
        }
    }
    // The 0.9 percentile of each caller's own pauses, plus the 2 s margin.
    assert_eq!(ka(&f, 1), Duration::from_millis(5_000 + 2_000));
    assert_eq!(ka(&f, 2), Duration::from_millis(1_000 + 2_000));
    assert_eq!(f.pool.snapshot().callers[1].keep_alive_ms, Some(3_000));
}

#[test]
fn keep_alive_releases_exactly_when_the_caller_is_quiet_too_long() {
    let mut c = cfg();
    c.keep_alive.min_samples = 3;
    let (mut f, _) = Fake::new(Kind::Firepool, c);
    let mut t = 0;
    let mut pod = None;
    for job in 0..4 {
        let (_, p) = f.at(t).run(job, 7);
        pod = Some(p);
        t += 1_000;
        f.at(t).finish(job);
        t += 4_000; // 4 s pauses
    }
    let pod = pod.unwrap();
    let last_end = t - 4_000;
    // p90 of [4 s, 4 s, 4 s] + 2 s = 6 s.
    assert_eq!(f.pool.keep_alive(CallerId(7)), Some(Duration::from_secs(6)));
    assert_eq!(
        f.pool
            .next_wakeup()
            .map(|w| w.as_millis() <= last_end + 6_000),
        Some(true)
    );
    let d = f.at(last_end + 5_999).ev(Event::Tick);
    assert!(releases(&d).is_empty());
    let d = f.at(last_end + 6_000).ev(Event::Tick);
    assert_eq!(
        releases(&d),
        vec![(
            pod,
            Reason::KeepAliveExpired {
                caller: CallerId(7),
                idle_ms: 6_000,
                keep_alive_ms: 6_000,
                basis: Basis::Percentile,
            }
        )]
    );
}

#[test]
fn keep_alive_is_clamped_to_its_bounds() {
    let mut c = cfg();
    c.keep_alive.min_samples = 1;
    c.keep_alive.max = Duration::from_secs(30);
    let (mut f, _) = Fake::new(Kind::Firepool, c);
    f.run(1, 1);
    f.at(1_000).finish(1);
    f.at(1_000_000).run(2, 1);
    assert_eq!(
        f.pool.keep_alive(CallerId(1)),
        Some(Duration::from_secs(30))
    );
    f.at(1_000_001).finish(2);
    f.at(1_000_002).run(3, 1);
    // p90 of [999 s, 1 ms] is still 999 s: clamped.
    assert_eq!(
        f.pool.keep_alive(CallerId(1)),
        Some(Duration::from_secs(30))
    );
}

#[test]
fn the_queue_is_priority_then_fifo() {
    let mut c = cfg();
    c.gpus = 1;
    let (mut f, _) = Fake::new(Kind::Fresh, c);
    f.run(1, 1);
    let prio = |f: &mut Fake, job: u64, p: i32| {
        let mut r = Request::new(JobId(job), CallerId(job), TenantId(0));
        r.priority = p;
        assert!(starts(&f.ev(Event::JobQueued(r))).is_empty());
    };
    prio(&mut f, 2, 0);
    prio(&mut f, 3, 5);
    prio(&mut f, 4, 5);
    let mut order = Vec::new();
    let mut finishing = 1;
    for _ in 0..3 {
        let d = f.finish(finishing);
        let (gone, _) = releases(&d)[0].clone();
        let d = f.gone(gone);
        let d = f.ready(starts(&d)[0]);
        let (job, _, _) = assigns(&d)[0];
        order.push(job.0);
        finishing = job.0;
    }
    assert_eq!(order, vec![3, 4, 2]);
}

#[test]
fn a_gang_starts_all_its_pods_together() {
    let (mut f, _) = Fake::new(keepalive(60), cfg());
    let gang = |job: u64, pods: u32| {
        let mut r = Request::new(JobId(job), CallerId(1), TenantId(0));
        r.pods = pods;
        Event::JobQueued(r)
    };
    let d = f.ev(gang(1, 2));
    let pods = starts(&d);
    assert_eq!(pods.len(), 2);
    assert!(
        assigns(&f.ready(pods[0])).is_empty(),
        "half a gang does not start"
    );
    let d = f.ready(pods[1]);
    assert_eq!(assigns(&d).len(), 2);
    f.at(1_000).finish(1);
    // The next gang of the caller: both warm.
    let d = f.at(2_000).ev(gang(2, 2));
    assert!(assigns(&d).iter().all(|a| a.2 == Source::Warm));
    f.at(3_000).finish(2);
    // A bigger gang: two warm pods wait, reserved, for the third.
    let d = f.at(4_000).ev(gang(3, 3));
    assert!(assigns(&d).is_empty());
    assert_eq!(f.pool.snapshot().pods.reserved, 2);
    let d = f.ready(starts(&d)[0]);
    let sources: Vec<Source> = assigns(&d).iter().map(|a| a.2).collect();
    assert_eq!(sources.iter().filter(|s| **s == Source::Warm).count(), 2);
    assert_eq!(sources.iter().filter(|s| **s == Source::Cold).count(), 1);
}

#[test]
fn a_lost_starting_pod_is_replaced() {
    let (mut f, _) = Fake::new(keepalive(60), cfg());
    let d = f.queue(1, 1);
    let first = starts(&d)[0];
    let d = f.at(100).gone(first);
    let second = starts(&d);
    assert_eq!(second.len(), 1);
    let d = f.ready(second[0]);
    assert_eq!(assigns(&d), vec![(JobId(1), second[0], Source::Cold)]);
}

#[test]
fn a_cancelled_job_gives_back_its_pods() {
    let mut c = cfg();
    c.standby = StandbyConfig {
        min: 1,
        max: 1,
        ..StandbyConfig::default()
    };
    let (mut f, d) = Fake::new(Kind::Firepool, c);
    f.at(30_000).ready(starts(&d)[0]);
    // Caller 1 takes the standby pod (a refill starts); caller 2 waits for
    // a cold start.
    let d = f.queue(1, 1);
    let refill = starts(&d);
    assert_eq!(refill.len(), 1);
    let d = f.queue(2, 2);
    let cold = starts(&d);
    assert_eq!(cold.len(), 1);
    // Cancelled: the pod started for it would stand by, but with the refill
    // starting that is one more than the target of one, so it is cancelled,
    // once a second has passed since its start (the minimum keep-alive).
    let d = f.finish(2);
    assert!(releases(&d).is_empty(), "{d:?}");
    let snap = f.pool.snapshot();
    assert_eq!(snap.queued_jobs, 0);
    assert!(snap.pod_list.iter().all(|p| p.job != Some(JobId(2))));
    assert_eq!(f.pool.next_wakeup(), Some(Instant::from_millis(31_000)));
    let d = f.at(31_000).ev(Event::Tick);
    assert_eq!(
        releases(&d),
        vec![(cold[0], Reason::StandbySurplus { have: 2, target: 1 })]
    );
    f.gone(cold[0]);
    let d = f.at(60_000).ready(refill[0]);
    assert!(releases(&d).is_empty());
    assert_eq!(f.pool.snapshot().gpus.held_shares.standby, 1);
}

#[test]
fn an_idle_pod_makes_room_for_a_waiting_job() {
    let mut c = cfg();
    c.gpus = 1;
    let (mut f, _) = Fake::new(keepalive(600), c);
    let (_, warm) = f.run(1, 1);
    f.at(1_000).finish(1);
    let d = f.at(2_000).queue(2, 2);
    assert_eq!(
        releases(&d),
        vec![(warm, Reason::MakeRoom { job: JobId(2) })]
    );
    let d = f.gone(warm);
    assert_eq!(starts(&d).len(), 1);
}

#[test]
fn fresh_releases_every_pod_after_its_job() {
    let (mut f, _) = Fake::new(Kind::Fresh, cfg());
    let (src, pod) = f.run(1, 1);
    assert_eq!(src, Source::Cold);
    let d = f.at(1_000).finish(1);
    assert_eq!(releases(&d), vec![(pod, Reason::JobDone { job: JobId(1) })]);
    f.gone(pod);
    let (src, _) = f.at(2_000).run(2, 1);
    assert_eq!(src, Source::Cold);
}

#[test]
fn always_on_never_releases_and_recycles_the_pod_idle_longest() {
    let (mut f, d) = Fake::new(Kind::AlwaysOn { size: Some(2) }, cfg());
    let pods = starts(&d);
    assert_eq!(pods.len(), 2);
    for &p in &pods {
        f.ready(p);
    }
    assert_eq!(f.run(1, 1).0, Source::Standby);
    assert_eq!(f.run(2, 2).0, Source::Standby);
    f.at(1_000).finish(1);
    f.at(2_000).finish(2);
    // Idle for a day: still there.
    let d = f.at(86_400_000).ev(Event::Tick);
    assert!(releases(&d).is_empty());
    assert_eq!(f.pool.next_wakeup(), None);
    // A third caller: caller 1's pod (idle longest) is wiped and reused.
    let d = f.queue(3, 3);
    assert!(matches!(
        d[0],
        Decision::Reset {
            reason: Reason::Recycled {
                from: CallerId(1),
                to: CallerId(3)
            },
            ..
        }
    ));
    assert_eq!(assigns(&d)[0].2, Source::Standby);
    assert!(releases(&d).is_empty());
    assert_eq!(f.queue(4, 2).len(), 1, "caller 2 still warm");
}

#[test]
fn policy_names_parse_and_print() {
    for name in [
        "fresh",
        "always-on",
        "always-on:12",
        "keepalive:60",
        "keepalive:0.5",
        "firepool",
    ] {
        let kind: Kind = name.parse().unwrap();
        assert_eq!(kind.to_string(), name);
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(serde_json::from_str::<Kind>(&json).unwrap(), kind);
    }
    for bad in [
        "",
        "warm",
        "keepalive",
        "keepalive:-1",
        "always-on:0",
        "fresh:1",
    ] {
        assert!(bad.parse::<Kind>().is_err(), "{bad}");
    }
}

#[test]
fn a_failed_event_changes_nothing() {
    let (mut f, _) = Fake::new(keepalive(60), cfg());
    f.at(5_000).run(1, 1);
    let before = format!("{:?}", f.pool.snapshot());
    let mut out = Vec::new();
    let t = Instant::from_millis;
    let cases = [
        (t(4_000), Event::Tick),
        (t(6_000), Event::PodReady { pod: PodId(99) }),
        (t(6_000), Event::PodGone { pod: PodId(99) }),
        (t(6_000), Event::JobFinished { job: JobId(99) }),
        (
            t(6_000),
            Event::JobQueued(Request::new(JobId(1), CallerId(1), TenantId(0))),
        ),
        (
            t(6_000),
            Event::JobQueued(Request {
                pods: 5,
                ..Request::new(JobId(2), CallerId(1), TenantId(0))
            }),
        ),
        (
            t(6_000),
            Event::JobQueued(Request {
                shares: Some(Shares(S + 1)),
                ..Request::new(JobId(3), CallerId(1), TenantId(0))
            }),
        ),
    ];
    for (at, e) in cases {
        assert!(f.pool.handle(at, e.clone(), &mut out).is_err(), "{e:?}");
        assert!(out.is_empty());
        assert_eq!(format!("{:?}", f.pool.snapshot()), before);
    }
}

#[test]
fn the_snapshot_shows_pods_shares_budget_and_keep_alive() {
    let mut c = cfg();
    c.standby = StandbyConfig {
        min: 2,
        max: 2,
        ..StandbyConfig::default()
    };
    let (mut f, _) = Fake::new(Kind::Firepool, c);
    f.run(1, 1);
    let snap = f.pool.snapshot();
    assert_eq!(snap.policy, "firepool");
    assert_eq!(snap.pods.active, 1);
    assert_eq!(snap.pods.starting, 2);
    assert_eq!(snap.gpus.active, 1.0);
    assert_eq!(snap.gpus.standby, 0.25);
    assert_eq!(snap.gpus.free, 4.0 - 1.25);
    assert!(snap.budget.is_some());
    assert_eq!(snap.callers[0].keep_alive_ms, Some(120_000));
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["pods"]["active"], 1);
    // Reasons read as sentences and serialise with a code.
    let r = Reason::KeepAliveExpired {
        caller: CallerId(3),
        idle_ms: 7_500,
        keep_alive_ms: 7_000,
        basis: Basis::Objective {
            covers_permille: 925,
            price_share_ms: 30_000,
        },
    };
    assert_eq!(
        r.to_string(),
        "caller 3 quiet 7.5 s, past its keep-alive of 7.0 s (covers 92.5 % of its pauses \
         at the pool's price of 30.0 share-s per warm start)"
    );
    assert_eq!(
        serde_json::to_value(&r).unwrap()["code"],
        "keep_alive_expired"
    );
}

#[test]
fn a_job_that_waited_for_a_pod_start_counts_as_cold_whatever_the_pod_was_for() {
    let mut c = cfg();
    c.standby = StandbyConfig {
        min: 1,
        max: 1,
        ..StandbyConfig::default()
    };
    let (mut f, d) = Fake::new(Kind::Firepool, c);
    let refill = starts(&d)[0];
    // The job arrives before the standby pod is up: a pod is started for it.
    let d = f.at(1_000).queue(1, 1);
    let own = starts(&d)[0];
    // The standby pod is ready first and goes to the waiting job, which still
    // waited for a start: cold, not standby.
    let d = f.at(30_000).ready(refill);
    assert_eq!(assigns(&d), vec![(JobId(1), refill, Source::Cold)]);
    assert!(d.iter().any(|d| matches!(
        d,
        Decision::Assign {
            reason: Reason::PodStarted {
                waited_ms: 29_000,
                ..
            },
            ..
        }
    )));
    // The pod started for the job will stand by instead, holding one share.
    let snap = f.pool.snapshot();
    let pod = snap.pod_list.iter().find(|p| p.pod == own).unwrap();
    assert_eq!(
        (pod.state, pod.job, pod.placement.shares()),
        ("starting", None, 1)
    );
}

#[test]
fn idle_callers_are_forgotten_after_their_ttl() {
    let mut c = cfg();
    c.caller_ttl = Duration::from_secs(10);
    let (mut f, _) = Fake::new(keepalive(2), c);
    f.at(0).run(1, 7);
    assert!(f.pool.knows_caller(CallerId(7)));
    f.at(200).finish(1);
    f.at(5_000).ev(Event::Tick);
    assert!(f.pool.knows_caller(CallerId(7)), "seen within the TTL");
    for t in (6_000..=40_000).step_by(1_000) {
        f.at(t).ev(Event::Tick);
    }
    assert!(!f.pool.knows_caller(CallerId(7)), "idle past the TTL");
    assert!(!f.pool.knows_caller(CallerId(8)));
}

/// What a scripted driver saw: every decision with its time.
type Log = Vec<(u64, Decision)>;

enum Step {
    Queue(u64, u64),
    Finish(u64),
    /// The caller's loop started (`true`) or stopped running jobs in
    /// another pool.
    Loop(u64, bool),
}

/// Plays `script` (time, step) in time order through `f`, ticking at every
/// wake-up the pool asks for and readying every pod it starts at once.
fn play(f: &mut Fake, mut script: Vec<(u64, Step)>, until: u64) -> Log {
    script.sort_by_key(|s| s.0);
    let mut log = Log::new();
    let mut script = script.into_iter().peekable();
    loop {
        let wake = f.pool.next_wakeup().map(Instant::as_millis);
        let next = script.peek().map(|s| s.0);
        let (t, step) = match (wake, next) {
            (Some(w), n) if w <= n.unwrap_or(u64::MAX) && w <= until => (w.max(f.t), None),
            (_, Some(n)) => (n, script.next().map(|s| s.1)),
            _ => break,
        };
        let mut d = match step {
            Some(Step::Queue(job, caller)) => f.at(t).queue(job, caller),
            Some(Step::Finish(job)) => f.at(t).finish(job),
            Some(Step::Loop(caller, busy)) => f.at(t).ev(Event::LoopBusy {
                caller: CallerId(caller),
                busy,
            }),
            None => f.at(t).ev(Event::Tick),
        };
        while !d.is_empty() {
            let started = starts(&d);
            for x in d.drain(..) {
                if let Decision::Release { pod, .. } = x {
                    log.push((t, x.clone()));
                    f.gone(pod);
                } else {
                    log.push((t, x));
                }
            }
            for pod in started {
                d.extend(f.ready(pod));
            }
        }
        if wake == Some(t) && f.pool.next_wakeup().map(Instant::as_millis) == Some(t) {
            // Nothing moved the wake-up on: step past it.
            f.t = t + 1;
        }
    }
    log
}

/// A script of one caller's jobs: each (start, duration) in ms.
fn jobs_of(caller: u64, first_job: u64, jobs: &[(u64, u64)]) -> Vec<(u64, Step)> {
    let mut s = Vec::new();
    for (i, &(start, dur)) in jobs.iter().enumerate() {
        let job = first_job + i as u64;
        s.push((start, Step::Queue(job, caller)));
        s.push((start + dur, Step::Finish(job)));
    }
    s
}

fn objective_cfg(percentile: f64) -> Config {
    Config {
        objective: Some(ObjectiveConfig {
            percentile,
            ..ObjectiveConfig::default()
        }),
        rewarm: RewarmConfig {
            enabled: false,
            ..cfg().rewarm
        },
        ..cfg()
    }
}

#[test]
fn keep_alives_meet_the_objective_where_pauses_make_it_cheap() {
    // Caller 1 pauses 1 s between jobs; caller 2 pauses 1 s and 50 s in
    // turn, so its jobs are few and covering its long pauses is dear.
    let script = || {
        let mut t = 0;
        let a: Vec<(u64, u64)> = (0..40)
            .map(|_| {
                let j = (t, 200);
                t += 1_200;
                j
            })
            .collect();
        let mut t = 100;
        let b: Vec<(u64, u64)> = (0..8)
            .map(|i| {
                let j = (t, 200);
                t += 200 + if i % 2 == 0 { 1_000 } else { 50_000 };
                j
            })
            .collect();
        let mut s = jobs_of(1, 0, &a);
        s.extend(jobs_of(2, 100, &b));
        s
    };
    let basis = |f: &Fake, caller| {
        let snap = f.pool.snapshot();
        let c = snap
            .callers
            .iter()
            .find(|c| c.caller == CallerId(caller))
            .unwrap();
        (c.keep_alive_ms.unwrap(), c.basis.unwrap())
    };
    // p90: caller 1's pauses alone reach it; caller 2 keeps its pod for its
    // short pauses only (the shortest keep-alive covers them) and releases
    // it for the long ones.
    let (mut f, _) = Fake::new(Kind::Firepool, objective_cfg(0.9));
    play(&mut f, script(), 0);
    f.at(200_000).ev(Event::Tick);
    let (k2, b2) = basis(&f, 2);
    assert!(k2 < 5_000, "{k2}");
    assert!(
        matches!(b2, Basis::Objective { covers_permille, .. } if covers_permille < 1000),
        "{b2:?}"
    );
    let (_, b1) = basis(&f, 1);
    assert!(
        matches!(
            b1,
            Basis::Objective {
                covers_permille: 1000,
                ..
            }
        ),
        "{b1:?}"
    );
    let price = f.pool.snapshot().objective.unwrap().price_share_ms;
    // p99: every start must be warm, so the long pauses are bought too.
    let (mut f, _) = Fake::new(Kind::Firepool, objective_cfg(0.99));
    play(&mut f, script(), 0);
    f.at(200_000).ev(Event::Tick);
    let (k2, b2) = basis(&f, 2);
    assert!(k2 >= 50_000, "{k2}");
    assert!(
        matches!(
            b2,
            Basis::Objective {
                covers_permille: 1000,
                ..
            }
        ),
        "{b2:?}"
    );
    assert!(f.pool.snapshot().objective.unwrap().price_share_ms > price);
}

#[test]
fn a_caller_with_too_few_pauses_takes_its_keep_alive_from_the_pools() {
    // Caller 1 runs `n` jobs of 200 ms, 1 s apart; caller 3 then runs one.
    // Caller 3 has no pause of its own: once the pool has seen 64 pauses,
    // its pod keeps the keep-alive caller 1's pauses chose, and expires by
    // it; before, the pool's default.
    let run = |n: u64| {
        let a: Vec<(u64, u64)> = (0..n).map(|i| (i * 1_200, 200)).collect();
        let mut script = jobs_of(1, 0, &a);
        let start = n * 1_200 + 5_000;
        script.extend(jobs_of(3, 1_000, &[(start, 200)]));
        let (mut f, _) = Fake::new(Kind::Firepool, objective_cfg(0.9));
        let log = play(&mut f, script, start + 200);
        let snap = f.pool.snapshot();
        let view = |caller| {
            let c = snap.callers.iter().find(|c| c.caller == CallerId(caller));
            let c = c.expect("a caller seen");
            (
                c.keep_alive_ms.expect("a keep-alive"),
                c.basis.expect("a basis"),
            )
        };
        (view(1), view(3), f, log, start + 200)
    };

    let ((own, _), (prior, basis), mut f, mut log, end) = run(70);
    assert_eq!(
        own, 1_000,
        "the minimum keep-alive covers caller 1's pauses"
    );
    assert_eq!(prior, own);
    assert!(
        matches!(
            basis,
            Basis::Pooled {
                covers_permille: 1000,
                ..
            }
        ),
        "{basis:?}"
    );
    log.extend(play(&mut f, Vec::new(), end + 5_000));
    let expired: Vec<(u64, u64)> = log
        .iter()
        .filter_map(|(t, d)| match d {
            Decision::Release {
                reason:
                    Reason::KeepAliveExpired {
                        caller: CallerId(3),
                        keep_alive_ms,
                        basis: Basis::Pooled { .. },
                        ..
                    },
                ..
            } => Some((*t, *keep_alive_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(expired, [(end + own, own)]);

    // 29 pauses: too few to choose for another caller.
    let (_, (k, basis), ..) = run(30);
    assert_eq!(basis, Basis::Default);
    assert_eq!(k, 120_000);
}

/// A firepool pool with the start-latency objective and 1..=4 standby pods,
/// its first standby pods ready: where periodic callers are re-warmed.
fn periodic_pool() -> Fake {
    let mut c = Config {
        objective: Some(ObjectiveConfig::default()),
        ..cfg()
    };
    c.standby = StandbyConfig {
        min: 1,
        max: 4,
        ..StandbyConfig::default()
    };
    let (mut f, d) = Fake::new(Kind::Firepool, c);
    for pod in starts(&d) {
        f.ready(pod);
    }
    f
}

#[test]
fn periodic_bursts_are_rewarmed_ahead_instead_of_held_through_the_pause() {
    let mut f = periodic_pool();
    // Bursts of 5 jobs of 200 ms, 100 ms apart, every 60 s.
    let mut jobs = Vec::new();
    for burst in 0..6u64 {
        for j in 0..5 {
            jobs.push((burst * 60_000 + j * 300, 200));
        }
    }
    let log = play(&mut f, jobs_of(9, 0, &jobs), 370_000);
    let prewarms: Vec<(u64, PodId, Reason)> = log
        .iter()
        .filter_map(|(t, d)| match d {
            Decision::Prewarm { pod, reason, .. } => Some((*t, *pod, reason.clone())),
            _ => None,
        })
        .collect();
    // Periodic from the fourth burst (three periods): the fifth, the sixth
    // and a seventh that never comes are re-warmed, `lead` (3 s) before
    // they are due.
    assert_eq!(prewarms.len(), 3, "{prewarms:?}");
    for (i, (t, pod, reason)) in prewarms.iter().enumerate() {
        let due = (4 + i as u64) * 60_000;
        assert_eq!(*t, due - 3_000);
        assert_eq!(
            *reason,
            Reason::Rewarm {
                caller: CallerId(9),
                period_ms: 60_000,
                due_in_ms: 3_000,
                covers_permille: 1000,
            }
        );
        if i == 2 {
            // Unused: released once the latest expected start plus the
            // grace (5 s) has passed.
            let gone = log.iter().find_map(|(at, d)| match d {
                Decision::Release {
                    pod: p,
                    reason: Reason::KeepAliveExpired { basis, .. },
                } if p == pod => Some((*at, *basis)),
                _ => None,
            });
            assert_eq!(
                gone,
                Some((due + 5_000, Basis::Rewarmed { period_ms: 60_000 }))
            );
            continue;
        }
        // The burst's first job finds it warm.
        let first = log.iter().find_map(|(at, d)| match d {
            Decision::Assign {
                job,
                pod: p,
                source,
                ..
            } if *at == due => Some((*job, *p, *source)),
            _ => None,
        });
        assert_eq!(first, Some((JobId((4 + i as u64) * 5), *pod, Source::Warm)));
        // The pod of the burst before was released early in the pause, not
        // held through it.
        let released = log.iter().rev().find_map(|(at, d)| match d {
            Decision::Release {
                reason: Reason::KeepAliveExpired { caller, .. },
                ..
            } if *caller == CallerId(9) && *at < *t => Some(*at),
            _ => None,
        });
        assert!(released.is_some_and(|r| r < due - 50_000), "{released:?}");
    }
    let snap = f.pool.snapshot();
    assert_eq!(snap.callers[0].period_ms, Some(60_000));
}

#[test]
fn a_caller_running_in_another_pool_is_not_pausing_here() {
    let (mut f, _) = Fake::new(keepalive(0), cfg());
    // Fixed keep-alives are baselines: they do not follow the loop.
    f.at(0).run(1, 5);
    f.at(100).finish(1);
    f.at(100).ev(Event::LoopBusy {
        caller: CallerId(5),
        busy: true,
    });
    assert_eq!(f.pool.snapshot().pods.warm, 0);

    let mut c = cfg();
    // A budget that never asks for the pod back.
    c.budget.pool.floor = Shares(S);
    let (mut f, _) = Fake::new(Kind::Firepool, c);
    let (_, pod) = f.at(0).run(1, 5);
    f.at(1_000).finish(1);
    assert_eq!(
        f.pool.keep_alive(CallerId(5)),
        Some(Duration::from_secs(120))
    );
    f.at(2_000).ev(Event::LoopBusy {
        caller: CallerId(5),
        busy: true,
    });
    // While it runs elsewhere its pod here never expires.
    let d = f.at(1_000_000).ev(Event::Tick);
    assert!(releases(&d).is_empty());
    // Back from the other pool: the keep-alive runs from now.
    f.at(1_000_000).ev(Event::LoopBusy {
        caller: CallerId(5),
        busy: false,
    });
    assert!(releases(&f.at(1_119_999).ev(Event::Tick)).is_empty());
    let d = f.at(1_120_000).ev(Event::Tick);
    assert_eq!(
        releases(&d),
        vec![(
            pod,
            Reason::KeepAliveExpired {
                caller: CallerId(5),
                idle_ms: 1_119_000,
                keep_alive_ms: 120_000,
                basis: Basis::Default,
            }
        )]
    );
    // An unknown caller is ignored.
    f.ev(Event::LoopBusy {
        caller: CallerId(77),
        busy: true,
    });
    assert!(!f.pool.knows_caller(CallerId(77)));
}

#[test]
fn a_loop_tells_each_pool_when_the_caller_runs_elsewhere() {
    let mut l = Loop::<&str>::default();
    // Alone in one pool: nobody needs telling.
    assert_eq!(l.moved(&"a", true), vec![]);
    assert!(!l.busy_besides(&"a"));
    // A job in b while a's runs: b hears at once, a learns it runs elsewhere.
    assert_eq!(l.moved(&"b", true), vec![("b", true), ("a", true)]);
    // a's job ends: b no longer runs elsewhere; a is still busy elsewhere.
    assert_eq!(l.moved(&"a", false), vec![("b", false)]);
    // b's job ends: a is no longer busy elsewhere.
    assert_eq!(l.moved(&"b", false), vec![("a", false)]);
    assert!(l.is_idle());
    // An end in a pool never used changes nothing.
    assert_eq!(l.moved(&"c", false), vec![]);
    // Two jobs in b: a (which may hold the caller's warm pod) hears once;
    // then one in a: a hears on arrival, b learns it runs elsewhere.
    assert_eq!(l.moved(&"b", true), vec![("a", true)]);
    assert_eq!(l.moved(&"b", true), vec![]);
    assert_eq!(l.moved(&"a", true), vec![("a", true), ("b", true)]);
    assert_eq!(l.moved(&"b", false), vec![]);
    assert_eq!(l.moved(&"b", false), vec![("a", false)]);
}

/// The pods `d` adopts for `job` (`None`: idle ones), each checked to
/// hold `shares`.
fn adopted(d: &[Decision], job: Option<JobId>, shares: u32) -> Vec<PodId> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Adopted {
                pod,
                placement,
                job: j,
            } if *j == job => {
                assert_eq!(placement.shares(), shares, "{pod}");
                Some(*pod)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn adopted_pods_stand_by_and_are_promoted_like_started_ones() {
    let mut c = cfg();
    c.standby = StandbyConfig {
        min: 2,
        max: 8,
        ..StandbyConfig::default()
    };
    c.max_pods = 3;
    let mut f = Fake {
        pool: Pool::new(Kind::Firepool, c).unwrap(),
        t: 0,
    };
    // Adopted before the pool's first tick: it needs no start of its own,
    // and the one it has no room for (max_pods) gets no id.
    let d = f.ev(Event::PodsAdopted {
        running: Vec::new(),
        idle: 4,
    });
    let adopted = adopted(&d, None, 1);
    assert_eq!(adopted.len(), 3);
    assert!(starts(&d).is_empty(), "{d:?}");
    // Over the standby target of 2: the surplus goes.
    assert_eq!(releases(&d).len(), 1, "{d:?}");
    assert_eq!(f.pool.snapshot().pods.standby, 2);
    let d = f.at(1_000).queue(1, 100);
    let promoted = d.iter().find_map(|d| match d {
        Decision::Promote { pod, .. } => Some(*pod),
        _ => None,
    });
    assert!(promoted.is_some_and(|p| adopted.contains(&p)), "{d:?}");
    assert_eq!(assigns(&d)[0].2, Source::Standby);
}

#[test]
fn an_adopted_running_job_holds_its_pods_active_then_warm_for_its_caller() {
    let mut c = cfg();
    c.standby = StandbyConfig {
        min: 1,
        max: 1,
        ..StandbyConfig::default()
    };
    let mut f = Fake {
        pool: Pool::new(Kind::Firepool, c).unwrap(),
        t: 0,
    };
    let mut gang = Request::new(JobId(7), CallerId(3), TenantId(0));
    gang.pods = 2;
    // Counted before the idle pod adopted with it, which then makes the
    // standby the policy wants: no pod is started.
    let d = f.ev(Event::PodsAdopted {
        running: vec![gang],
        idle: 1,
    });
    let adopted = adopted(&d, Some(JobId(7)), S);
    assert_eq!(adopted.len(), 2, "{d:?}");
    assert!(starts(&d).is_empty() && assigns(&d).is_empty(), "{d:?}");
    let snap = f.pool.snapshot();
    assert_eq!((snap.pods.active, snap.pods.standby), (2, 1));
    assert_eq!(f.pool.held().active, u64::from(2 * S));
    // Its end is any job's end: the pods stay warm for its caller.
    f.at(1_000).finish(7);
    assert_eq!(f.pool.snapshot().pods.warm, 2);
    let (source, pod) = f.at(2_000).run(8, 3);
    assert_eq!(source, Source::Warm);
    assert!(adopted.contains(&pod));
    // A job there is no room for is left out, and nothing changes for it.
    let mut big = Request::new(JobId(9), CallerId(4), TenantId(0));
    big.pods = 4;
    let d = f.at(3_000).ev(Event::PodsAdopted {
        running: vec![big],
        idle: 0,
    });
    assert!(
        !d.iter().any(|d| matches!(d, Decision::Adopted { .. })),
        "{d:?}"
    );
    assert_eq!(f.pool.snapshot().pods.active, 1);
    assert!(matches!(
        f.pool.handle(
            Instant::from_millis(3_000),
            Event::JobFinished { job: JobId(9) },
            &mut Vec::new()
        ),
        Err(Error::UnknownJob(_))
    ));
}

#[test]
fn the_price_never_falls_below_a_handovers_refill_and_binding() {
    // Caller 1 pauses 1 s, enough for a low objective; caller 2 pauses 5 s,
    // so each of its warm starts costs 8 shares x 5 s = 40 000 share-ms.
    let a: Vec<(u64, u64)> = (0..40).map(|i| (i * 1_200, 200)).collect();
    let b: Vec<(u64, u64)> = (0..12).map(|i| (100 + i * 5_200, 200)).collect();
    let mut script = jobs_of(1, 0, &a);
    script.extend(jobs_of(2, 100, &b));
    let (mut f, _) = Fake::new(Kind::Firepool, objective_cfg(0.1));
    play(&mut f, script, 0);
    f.at(70_000).ev(Event::Tick);
    let snap = f.pool.snapshot();
    // A handover refills a standby pod (a pod start at 1 share) and binds
    // at the pod's size for `lead` (3 s at 8 shares) before the job runs.
    // The fake readies pods at once: two starts observed in 0 s bring the
    // estimate of a pod start from 30 s to 30 s x 0.8 x 0.8.
    assert_eq!(snap.objective.unwrap().price_share_ms, 19_200 + 3_000 * 8);
    // Keeping caller 2's pod is cheaper than that, though dearer than the
    // refill alone: its pauses are covered though the objective alone
    // would not buy them.
    let c2 = snap
        .callers
        .iter()
        .find(|c| c.caller == CallerId(2))
        .unwrap();
    assert!(c2.keep_alive_ms.unwrap() >= 5_000, "{c2:?}");
}

#[test]
fn a_burst_that_trails_its_loop_is_rewarmed_when_the_loop_comes_back() {
    let mut f = periodic_pool();
    // Each step starts in another pool (a rollout of 5 s) and comes here
    // (a verifier of 200 ms) when it ends; steps come every 60 s, give or
    // take 8 s, so the clock alone could not bind much later than 8 s
    // before the earliest. The last step is held up 20 s, later than the
    // clock expects any.
    let offsets = [0u64, 8_000, 0, 4_000, 8_000, 0, 6_000, 20_000];
    let mut script = Vec::new();
    let mut resumed = Vec::new();
    for (step, &off) in offsets.iter().enumerate() {
        let start = step as u64 * 60_000 + off;
        resumed.push(start);
        script.push((start, Step::Loop(9, true)));
        script.push((start + 5_000, Step::Loop(9, false)));
        script.extend(jobs_of(9, step as u64, &[(start + 5_000, 200)]));
    }
    let log = play(&mut f, script, 490_000);
    let prewarms: Vec<(u64, Reason)> = log
        .iter()
        .filter_map(|(t, d)| match d {
            Decision::Prewarm { reason, .. } => Some((*t, reason.clone())),
            _ => None,
        })
        .collect();
    // Periodic from the fourth step (three periods): the later ones are
    // bound `lead` (3 s) before they reach here, 5 s after the loop came
    // back: whatever their jitter, not before, and due `lead` after.
    let expect: Vec<u64> = resumed[4..].iter().map(|r| r + 2_000).collect();
    assert_eq!(
        prewarms.iter().map(|p| p.0).collect::<Vec<_>>(),
        expect,
        "{log:?}"
    );
    for (_, reason) in &prewarms {
        assert!(
            matches!(
                reason,
                Reason::Rewarm {
                    due_in_ms: 3_000,
                    covers_permille: 1000,
                    ..
                }
            ),
            "{reason:?}"
        );
    }
    // And each of them starts warm.
    for (step, r) in resumed.iter().enumerate().skip(4) {
        let source = log.iter().find_map(|(t, d)| match d {
            Decision::Assign { job, source, .. } if *job == JobId(step as u64) => {
                Some((*t, *source))
            }
            _ => None,
        });
        assert_eq!(source, Some((r + 5_000, Source::Warm)), "step {step}");
    }
}

#[test]
fn a_late_burst_does_not_make_a_periodic_caller_irregular() {
    let mut f = periodic_pool();
    // Bursts every 60 s, the third 70 s late (its loop was held up): the
    // periods are 60, 130, 60 and 60 s. The first three are too irregular
    // (the longest more than twice the shortest).
    let mut jobs = Vec::new();
    for start in [0, 60_000, 190_000, 250_000, 310_000, 370_000] {
        for j in 0..5 {
            jobs.push((start + j * 300, 200));
        }
    }
    let log = play(&mut f, jobs_of(9, 0, &jobs), 380_000);
    // From the fifth burst on (four periods, one of them late) the caller
    // is periodic, and the sixth burst is re-warmed `lead` ahead.
    let prewarms: Vec<u64> = log
        .iter()
        .filter_map(|(t, d)| matches!(d, Decision::Prewarm { .. }).then_some(*t))
        .collect();
    assert_eq!(prewarms, [367_000], "{log:?}");
    let first = log.iter().find_map(|(at, d)| match d {
        Decision::Assign { job, source, .. } if *at == 370_000 => Some((*job, *source)),
        _ => None,
    });
    assert_eq!(first, Some((JobId(25), Source::Warm)));
    assert_eq!(f.pool.snapshot().callers[0].period_ms, Some(60_000));
}

#[test]
fn a_job_on_a_pod_still_binding_is_not_counted_warm() {
    let mut f = periodic_pool();
    // Bursts of 3 jobs every 60 s: periodic after the fourth, the fifth
    // re-warmed at 237 s (`lead`, 3 s, before it is due).
    let mut jobs = Vec::new();
    for burst in 0..4u64 {
        for j in 0..3 {
            jobs.push((burst * 60_000 + j * 300, 200));
        }
    }
    let log = play(&mut f, jobs_of(9, 0, &jobs), 237_500);
    assert!(
        log.iter()
            .any(|(t, d)| *t == 237_000 && matches!(d, Decision::Prewarm { .. })),
        "{log:?}"
    );
    // The burst comes 1 s into the binding: the job takes its caller's
    // pod, warm, but waits for the binding, so the objective does not
    // count it as started warm.
    let (warm, all) = f.pool.served_warm();
    let d = f.at(238_000).queue(12, 9);
    assert_eq!(assigns(&d).first().map(|a| a.2), Some(Source::Warm));
    let decay = 1.0 - 1.0 / 256.0;
    let (warm_after, all_after) = f.pool.served_warm();
    assert!(
        warm.mul_add(-decay, warm_after).abs() < 1e-9,
        "{warm} -> {warm_after}"
    );
    assert!((all_after - all.mul_add(decay, 1.0)).abs() < 1e-9);
}

/// A pool whose standby target counts expected bursts alone (no floor,
/// recent handovers forgotten within 10 s), and whose pods are gone 1 s
/// after their caller's last job: a caller still holding one needs no
/// standby pod.
fn expected_bursts_pool() -> Fake {
    let mut c = cfg();
    c.standby = StandbyConfig {
        min: 0,
        max: 8,
        horizon: Duration::from_secs(10),
        ..StandbyConfig::default()
    };
    c.keep_alive.default = Duration::from_secs(1);
    c.keep_alive.max = Duration::from_secs(1);
    Fake::new(Kind::Firepool, c).0
}

/// Bursts of three 200 ms jobs, 300 ms apart, at `starts`.
fn bursts_at(starts: &[u64]) -> Vec<(u64, u64)> {
    starts
        .iter()
        .flat_map(|&start| (0..3).map(move |j| (start + j * 300, 200)))
        .collect()
}

#[test]
fn a_callers_next_burst_is_expected_from_one_period() {
    let mut f = expected_bursts_pool();
    // Two bursts 100 s apart: one period, not yet periodic (three are
    // needed), so nothing is re-warmed, but its third burst is expected
    // 70 to 130 s after the second (a spread of 0.3 either side).
    let jobs = bursts_at(&[0, 100_000]);
    let log = play(&mut f, jobs_of(9, 0, &jobs), 101_000);
    assert!(
        !log.iter()
            .any(|(_, d)| matches!(d, Decision::Prewarm { .. })),
        "{log:?}"
    );
    assert_eq!(f.pool.snapshot().callers[0].period_ms, None);
    f.at(120_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 0);
    // Within a pod start (and the lead) of 170 s, a standby pod is kept
    // for it until it comes.
    let d = f.at(168_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 1);
    assert!(
        d.iter().any(|d| matches!(
            d,
            Decision::StartPod {
                purpose: Purpose::Standby,
                ..
            }
        )),
        "{d:?}"
    );
    f.at(200_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 1);
    // It never came: forgotten once 130 s (and the grace) are past.
    f.at(236_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 0);
}

#[test]
fn a_loop_alternating_short_and_long_pauses_is_expected_as_soon_as_the_short_and_as_late_as_the_long()
 {
    let mut f = expected_bursts_pool();
    // Bursts 40 and 100 s apart by turns (an evaluation every other step):
    // too few periods of either kind to be periodic, so no re-warm binds a
    // pod ahead.
    let jobs = bursts_at(&[0, 40_000, 140_000, 180_000, 280_000]);
    let log = play(&mut f, jobs_of(9, 0, &jobs[..12]), 181_000);
    assert!(
        !log.iter()
            .any(|(_, d)| matches!(d, Decision::Prewarm { .. })),
        "{log:?}"
    );
    assert_eq!(f.pool.snapshot().callers[0].period_ms, None);
    // After a short pause, the next burst is still expected 70 s on (its
    // long pause was 100 s), not only until 40 s x 1.3.
    f.at(250_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 1);
    // After the long pause, the next is expected from 40 s x 0.7 on, not
    // from 100 s x 0.7.
    play(&mut f, jobs_of(9, 12, &jobs[12..]), 290_000);
    f.at(312_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 1);
}

#[test]
fn a_burst_slowed_by_pod_starts_makes_the_next_expected_sooner() {
    let mut c = cfg();
    c.standby = StandbyConfig {
        min: 0,
        max: 8,
        horizon: Duration::from_secs(10),
        ..StandbyConfig::default()
    };
    c.keep_alive.default = Duration::from_secs(300);
    let (mut f, _) = Fake::new(Kind::Firepool, c);
    // The first burst's job waits 30 s for its pod: its loop ran 30 s
    // late, so of the 100 s to the second burst only 70 s are its own.
    let d = f.at(0).queue(0, 9);
    let pod = starts(&d)[0];
    let d = f.at(30_000).ready(pod);
    assert_eq!(assigns(&d), [(JobId(0), pod, Source::Cold)]);
    f.at(30_200).finish(0);
    assert_eq!(f.at(100_000).run(1, 9).0, Source::Warm);
    f.at(100_200).finish(1);
    // Its pod is lost: until then, it would have served the next burst.
    f.at(100_300).ev(Event::PodGone { pod });
    // The third burst is expected from 70 s x 0.7 = 49 s after the second,
    // and standby is kept for it a pod start (30 s, and a tenth, and the
    // 3 s lead) before: from 113 s, not from 134 s.
    f.at(112_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 0);
    f.at(114_000).ev(Event::Tick);
    assert_eq!(f.pool.snapshot().standby_target, 1);
}

#[test]
fn a_pod_rewarmed_for_a_burst_waits_for_it_as_long_as_the_longest_period() {
    let mut f = periodic_pool();
    // Bursts every 60 s, the third 30 s late: the regular periods are 60 s,
    // the longest 90 s. The sixth burst, re-warmed for at 327 s, comes 10 s
    // after the latest regular period and the 5 s grace.
    let mut jobs = Vec::new();
    for start in [0, 60_000, 150_000, 210_000, 270_000, 340_000] {
        for j in 0..5 {
            jobs.push((start + j * 300, 200));
        }
    }
    let log = play(&mut f, jobs_of(9, 0, &jobs), 341_000);
    let prewarmed = log.iter().find_map(|(t, d)| match d {
        Decision::Prewarm { pod, .. } if *t == 327_000 => Some(*pod),
        _ => None,
    });
    let pod = prewarmed.expect("re-warmed at 327 s");
    // The pod waits for it (released by 375 s, 90 s and the grace, at
    // the latest), so it starts warm; it goes once that burst is done.
    assert!(
        !log.iter().any(
            |(t, d)| matches!(d, Decision::Release { pod: p, .. } if *p == pod && *t <= 340_000)
        ),
        "{log:?}"
    );
    let first = log.iter().find_map(|(at, d)| match d {
        Decision::Assign {
            job,
            source,
            pod: p,
            ..
        } if *at == 340_000 => Some((*job, *source, *p)),
        _ => None,
    });
    assert_eq!(first, Some((JobId(25), Source::Warm, pod)));
}
