//! The session replay generator: format, determinism, ordering and rates.

use hearth_cohort::{
    Error, Params, ParseError, ReplayParams, Sessions, analyze, read_csv, read_sessions, replay,
};

const SEC: i64 = 1_000_000_000;

fn sessions() -> Sessions {
    let file = "\
session,offset_ns,route
s1,0,chat
s2,0,search
s1,500000000,search
s1,1000000000,chat
s2,2000000000,chat
s3,100000000,chat
s3,300000000,chat
";
    read_sessions(file.as_bytes()).unwrap()
}

fn run(sessions: &Sessions, params: &ReplayParams) -> (Vec<u8>, hearth_cohort::ReplayStats) {
    let mut out = Vec::new();
    let stats = replay(sessions, params, &mut out).unwrap();
    (out, stats)
}

#[test]
fn sessions_file_groups_rows_by_label() {
    let s = sessions();
    let ids: Vec<&str> = s.sessions().iter().map(|x| x.id.as_str()).collect();
    assert_eq!(ids, ["s1", "s2", "s3"]);
    let s1 = &s.sessions()[0];
    assert_eq!(s1.events.len(), 3);
    assert_eq!(s1.duration_ns(), SEC);
    assert!((s.mean_duration_ns() - (SEC + 2 * SEC + 3 * SEC / 10) as f64 / 3.0).abs() < 1.0);
    let chat = s.routes().id("chat").unwrap();
    assert_eq!(
        s.sessions()[2].events,
        [(SEC / 10, chat), (3 * SEC / 10, chat)]
    );
}

#[test]
fn sessions_file_errors_name_the_line() {
    let err = |input: &str| match read_sessions(input.as_bytes()) {
        Err(Error::Parse { line, reason }) => (line, reason),
        other => panic!("expected a parse error, got {other:?}"),
    };
    assert_eq!(
        err("session,route\n"),
        (1, ParseError::MissingColumn("offset_ns"))
    );
    assert_eq!(
        err("session,offset_ns,route\na,-1,r\n"),
        (2, ParseError::NegativeOffset(-1))
    );
    assert_eq!(
        err("session,offset_ns,route\n,1,r\n"),
        (2, ParseError::Empty("session"))
    );
    assert!(matches!(
        err("session,offset_ns,route\na,1,r\na,x,r\n"),
        (3, ParseError::NotInteger { .. })
    ));
}

#[test]
fn same_seed_same_bytes_and_sorted_output() {
    let s = sessions();
    let params = ReplayParams::new(20.0, 30.0, 42);
    let (a, stats) = run(&s, &params);
    let (b, _) = run(&s, &params);
    assert_eq!(a, b);
    let (c, _) = run(
        &s,
        &ReplayParams {
            seed: 43,
            ..params.clone()
        },
    );
    assert_ne!(a, c);
    assert!(a.starts_with(b"release_ns,route\n"));
    let events = read_csv(a.as_slice(), 50_000_000).unwrap();
    assert_eq!(events.len() as u64, stats.events);
    let releases: Vec<i64> = events.events().iter().map(|e| e.release_ns).collect();
    assert!(releases.is_sorted());
    assert!(releases.iter().all(|&t| (0..30 * SEC).contains(&t)));
    // The replay is an analyzable log.
    let report = analyze(&events, &Params::new(2, 50_000_000)).unwrap();
    assert_eq!(report.events, stats.events);
}

#[test]
fn rates_follow_littles_law() {
    let s = sessions();
    let (active, seconds) = (50.0, 200.0);
    let (_, stats) = run(&s, &ReplayParams::new(active, seconds, 7));
    let mean_s = s.mean_duration_ns() / 1e9;
    let rate = active / mean_s;
    assert!((stats.rate_per_s - rate).abs() < 1e-9);
    // Starts are Poisson over [-longest, seconds).
    let longest_s = 2.0;
    let starts = rate * (seconds + longest_s);
    assert!(
        (stats.arrivals as f64 - starts).abs() < 5.0 * starts.sqrt(),
        "{} starts, expected {starts}",
        stats.arrivals
    );
    assert!(
        (stats.warm_arrivals as f64 - rate * longest_s).abs() < 5.0 * (rate * longest_s).sqrt()
    );
    // Each start contributes its session's events: E = λ·S·(mean events per session).
    let sizes: Vec<f64> = s.sessions().iter().map(|x| x.events.len() as f64).collect();
    let mean_events = sizes.iter().sum::<f64>() / sizes.len() as f64;
    let mean_sq = sizes.iter().map(|x| x * x).sum::<f64>() / sizes.len() as f64;
    let expected = rate * seconds * mean_events;
    let sd = (starts * mean_sq).sqrt();
    assert!(
        (stats.events as f64 - expected).abs() < 5.0 * sd,
        "{} events, expected {expected} ± {sd}",
        stats.events
    );
}

#[test]
fn warm_start_makes_the_first_seconds_stationary() {
    // Sessions of 20 s: an event at the start and one at the end.
    let mut s = Sessions::default();
    s.push("long", 0, "r").unwrap();
    s.push("long", 20 * SEC, "r").unwrap();
    let params = ReplayParams::new(100.0, 20.0, 9);
    let (_, warm) = run(&s, &params);
    let (_, cold) = run(
        &s,
        &ReplayParams {
            warm_start: false,
            ..params
        },
    );
    // λ = 5/s: warm ≈ 100 starts + 100 ends in [0, 20 s); cold ≈ 100 starts only.
    assert!((150..260).contains(&warm.events), "warm {}", warm.events);
    assert!((50..150).contains(&cold.events), "cold {}", cold.events);
}

#[test]
fn invalid_replays_are_rejected() {
    let mut instant = Sessions::default();
    instant.push("a", 0, "r").unwrap();
    let mut out = Vec::new();
    let params = ReplayParams::new(10.0, 1.0, 1);
    assert!(matches!(
        replay(&instant, &params, &mut out),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        replay(&Sessions::default(), &params, &mut out),
        Err(Error::Invalid(_))
    ));
    let bad = ReplayParams {
        active: 0.0,
        ..params.clone()
    };
    assert!(matches!(
        replay(&sessions(), &bad, &mut out),
        Err(Error::Invalid(_))
    ));
    let bad = ReplayParams {
        duration_ns: 0,
        ..params
    };
    assert!(matches!(
        replay(&sessions(), &bad, &mut out),
        Err(Error::Invalid(_))
    ));
    assert!(Sessions::default().push("a", -1, "r").is_err());
}
