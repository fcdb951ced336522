//! The driver end to end on a virtual clock: a small generated swarm through
//! the compactor and the CPU batch executor, checked for completeness,
//! ordering, session state and the share inequalities.

use std::collections::HashMap;

use hearth_control::compactor::{Config, FallbackReason};
use hearth_control::driver::{Path, replay};
use hearth_control::{
    CpuExecutor, Driver, DriverConfig, Executor as _, Task, accounting, cpu, swarm,
};

fn run(
    eager: bool,
) -> (
    Vec<swarm::Params>,
    Vec<hearth_control::Completed>,
    Vec<hearth_control::driver::Arrival>,
    hearth_control::Program,
) {
    let program = swarm::policy();
    let mut driver = Driver::new(
        DriverConfig {
            compactor: Config {
                max_batch: 256,
                launch_cost_ns: 2_000_000,
                eager,
            },
            verify: true,
        },
        CpuExecutor::new(),
    );
    let keys = driver.register(program.clone(), |_| Some(32));
    let params = swarm::Params {
        sessions: 5_000,
        duration_ns: 1_000_000_000,
        mean_think_ns: 1e9,
        seed: 11,
        ..swarm::Params::default()
    };
    let arrivals = swarm::generate(&params, &keys);
    let done = replay(&mut driver, arrivals.clone()).unwrap();
    assert_eq!(driver.executor().kind(), hearth_control::ExecutorKind::Cpu);
    (vec![params], done, arrivals, program)
}

#[test]
fn every_event_runs_once_in_session_order_with_consistent_state() {
    for eager in [false, true] {
        let (_, done, arrivals, program) = run(eager);
        assert_eq!(done.len(), arrivals.len());
        let mut seen: Vec<u64> = done.iter().map(|c| c.record.event).collect();
        seen.sort_unstable();
        assert_eq!(seen, (1..=arrivals.len() as u64).collect::<Vec<_>>());
        // Each session's events complete in submission order, and replaying
        // them alone in that order gives the same outcomes.
        let mut last: HashMap<u64, u64> = HashMap::new();
        let mut state: HashMap<u64, [u32; 16]> = HashMap::new();
        for c in &done {
            let prev = last.insert(c.session, c.record.event).unwrap_or(0);
            assert!(prev < c.record.event, "session {} out of order", c.session);
            let a = &arrivals[(c.record.event - 1) as usize];
            let route = program.route_by_id(program.routes()[usize::from(c.outcome.route)].id());
            assert!(route.is_some());
            let s = state.entry(c.session).or_insert_with(|| program.init());
            let start = (a.route.0) as u16; // one program registered: key index = route index
            let out = cpu::run_scalar(
                &program,
                &[Task {
                    route: start,
                    state: *s,
                    input: a.input,
                }],
            )[0];
            assert_eq!(out, c.outcome, "event {}", c.record.event);
            *s = out.state;
            assert!(c.record.launch_ns >= c.record.release_ns);
            assert!(c.record.done_ns >= c.record.launch_ns);
        }
    }
}

#[test]
fn achieved_share_is_bounded_by_the_optimum_and_fallbacks_are_on_time() {
    let (params, done, _, _) = run(false);
    let records: Vec<_> = done.iter().map(|c| c.record).collect();
    let s = accounting::stats(&records, params[0].delta_ns as i64, |_| 32).unwrap();
    assert!(
        s.fixed <= s.exact + 1e-12 && s.exact <= s.upper + 1e-12,
        "{s:?}"
    );
    assert!(s.achieved <= s.exact + 1e-12, "{s:?}");
    assert!(s.achieved > 0.5 * s.exact, "{s:?}");
    assert_eq!(s.late_fallbacks, 0, "{s:?}");
    assert!(s.batches > 0);
    let batched = records.iter().filter(|r| r.path == Path::Batch).count() as f64;
    assert!((s.fallback_share - (1.0 - batched / records.len() as f64)).abs() < 1e-12);
    assert!(
        records
            .iter()
            .all(|r| r.path != Path::Fallback(FallbackReason::NoBatch))
    );
}

#[test]
fn routes_without_k_run_on_the_cpu_and_count_zero() {
    let program = swarm::policy();
    let mut driver = Driver::new(
        DriverConfig::default(),
        CpuExecutor::with_note("no CUDA driver"),
    );
    assert_eq!(driver.executor().status(), "cpu (no CUDA driver)");
    let keys = driver.register(program, |_| None);
    let c = driver.submit(0, 1, Some(keys[0]), &[1, 2], 10).unwrap();
    let done = driver.advance(0);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].record.event, c);
    assert_eq!(done[0].record.path, Path::Fallback(FallbackReason::NoBatch));
    let s = accounting::stats(&[done[0].record], 50, |_| 1).unwrap();
    assert_eq!(s.achieved, 0.0);
    assert!(
        driver.submit(0, 1, Some(keys[0]), &[1, 2, 3], 10).is_err(),
        "input longer than the policy allows"
    );
}

/// The example policy on a CPU driver with `K_r` = 2 on every route.
fn example_driver() -> (
    hearth_control::Program,
    Driver<CpuExecutor>,
    Vec<hearth_control::driver::RouteKey>,
) {
    let program = hearth_control::Program::from_json(hearth_control::EXAMPLE_POLICY).unwrap();
    let mut driver = Driver::new(
        DriverConfig {
            compactor: Config {
                max_batch: 64,
                launch_cost_ns: 0,
                eager: false,
            },
            verify: true,
        },
        CpuExecutor::new(),
    );
    let keys = driver.register(program.clone(), |_| Some(2));
    (program, driver, keys)
}

#[test]
fn a_sessions_events_apply_in_submission_order_across_routes() {
    let (program, mut driver, keys) = example_driver();
    // Session 1: an event on route 0 due late, then one on route 1 due early
    // and one without a route. Sessions 2 and 3 fill both queues so batches form.
    // The driver's clock advances by each run's measured wall time: windows
    // of seconds keep a run preempted on a loaded machine within them.
    const LATE: u64 = 10_000_000_000;
    const EARLY: u64 = 1_000_000_000;
    let first = driver.submit(0, 1, Some(keys[0]), &[50, 1], LATE).unwrap();
    let second = driver.submit(0, 1, Some(keys[1]), &[7, 7], EARLY).unwrap();
    let third = driver.submit(0, 1, None, &[9, 9], EARLY).unwrap();
    driver.submit(0, 2, Some(keys[0]), &[1, 1], LATE).unwrap();
    driver.submit(0, 3, Some(keys[1]), &[2, 2], EARLY).unwrap();
    let mut done = driver.advance(0);
    let mut now = 0;
    while let Some(w) = driver.next_wake() {
        now = now.max(w);
        done.extend(driver.advance(now));
    }
    done.extend(driver.finish(now));
    assert_eq!(done.len(), 5);
    let mine: Vec<_> = done.iter().filter(|c| c.session == 1).collect();
    assert_eq!(
        mine.iter().map(|c| c.record.event).collect::<Vec<_>>(),
        vec![first, second, third],
        "completion order is submission order"
    );
    // Each event starts from its predecessor's state; the route-less one on
    // the route its predecessor chose.
    let mut state = program.init();
    let mut next = 0;
    for (c, (route, input)) in
        mine.iter()
            .zip([(Some(0u16), [50, 1]), (Some(1), [7, 7]), (None, [9, 9])])
    {
        let start = route.unwrap_or(next);
        assert_eq!(c.started_on, start);
        let want = cpu::run_scalar(
            &program,
            &[Task {
                route: start,
                state,
                input: program.input(&input).unwrap(),
            }],
        )[0];
        assert_eq!(c.outcome, want);
        state = want.state;
        next = want.route;
    }
    // A held event is released when its predecessor is done and keeps its window.
    assert_eq!(mine[1].record.release_ns, mine[0].record.done_ns);
    assert_eq!(
        mine[1].record.deadline_ns - mine[1].record.release_ns,
        EARLY
    );
    assert!(
        done.iter()
            .all(|c| c.record.launch_ns <= c.record.deadline_ns)
    );
    assert_eq!(driver.session(1), Some((next, state)));
    assert!(matches!(
        driver.submit(now, 99, None, &[], now),
        Err(hearth_control::driver::DriverError::UnknownSession(99))
    ));
}

#[test]
fn a_session_is_removed_only_when_no_event_of_it_is_in_flight() {
    use hearth_control::driver::DriverError;
    // K = 2: a lone event waits in the compactor until its deadline.
    let (program, mut driver, keys) = example_driver();
    const WINDOW: u64 = 1_000_000_000;
    driver.submit(0, 1, Some(keys[0]), &[5, 5], WINDOW).unwrap();
    driver.submit(0, 1, None, &[6, 6], WINDOW).unwrap();
    assert!(driver.advance(0).is_empty());
    assert!(matches!(
        driver.remove_session(1),
        Err(DriverError::SessionBusy(1))
    ));
    let mut done = Vec::new();
    let mut now = 0;
    while let Some(w) = driver.next_wake() {
        now = now.max(w);
        done.extend(driver.advance(now));
    }
    done.extend(driver.finish(now));
    assert_eq!(
        done.len(),
        2,
        "both events ran: the refused removal took nothing"
    );
    assert!(driver.session(1).is_some());
    assert!(driver.remove_session(1).unwrap());
    assert_eq!(driver.session(1), None);
    assert!(!driver.remove_session(1).unwrap(), "gone");
    // A removed session's name starts afresh from the policy's init.
    driver.submit(now, 1, Some(keys[0]), &[5, 5], 0).unwrap();
    let again = driver.finish(now);
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0].outcome,
        cpu::run_scalar(
            &program,
            &[Task {
                route: 0,
                state: program.init(),
                input: program.input(&[5, 5]).unwrap(),
            }],
        )[0]
    );
}
