//! Hand-computed cases for F, P*, U and G, the report format, and CSV input.

use hearth_cohort::{
    Error, Events, Params, ParseError, analyze, exact, fixed_share, parse_override, read_csv,
    upper_share,
};

const DELTA: i64 = 10;

fn log(rows: &[(i64, &str)]) -> Events {
    let mut events = Events::new();
    for &(t, route) in rows {
        events.push(t, t + DELTA, route).unwrap();
    }
    events
}

/// (F events, P* events, P* batches, U events)
fn counts(events: &Events, params: &Params) -> (u64, u64, u64, u64) {
    let r = analyze(events, params).unwrap();
    (
        r.detail.fixed_events,
        r.exact_events,
        r.exact_batches,
        r.detail.upper_events,
    )
}

#[test]
fn releases_exactly_delta_apart_share_a_batch() {
    // t_j - t_i == δ: launchable at τ = 10 = d_i (inclusive on both sides).
    let events = log(&[(0, "a"), (10, "a")]);
    let params = Params::new(2, DELTA);
    assert_eq!(counts(&events, &params), (0, 2, 1, 2));
    let r = analyze(&events, &params).unwrap();
    assert_eq!(r.gap_closure, Some(1.0));
    // One nanosecond further apart: nothing.
    let events = log(&[(0, "a"), (11, "a")]);
    assert_eq!(counts(&events, &params), (0, 0, 0, 0));
    assert_eq!(analyze(&events, &params).unwrap().gap_closure, None);
}

#[test]
fn chain_of_three_separates_exact_from_upper() {
    // U counts all three (each sees K = 2 active at some instant), but any
    // schedule uses the middle event once: P* = 2, F = 0 (three windows).
    let events = log(&[(0, "a"), (10, "a"), (20, "a")]);
    let r = analyze(&events, &Params::new(2, DELTA)).unwrap();
    assert_eq!(
        (r.detail.fixed_events, r.exact_events, r.detail.upper_events),
        (0, 2, 3)
    );
    assert_eq!(r.gap_closure, Some(2.0 / 3.0));
    assert!((r.exact_share - 2.0 / 3.0).abs() < 1e-12);
}

#[test]
fn fixed_windows_start_at_origin_and_are_half_open() {
    // Windows [0,10) and [10,20): {1, 9} | {10, 12}.
    let events = log(&[(1, "a"), (9, "a"), (10, "a"), (12, "a")]);
    let (f, p, b, u) = counts(&events, &Params::new(2, DELTA));
    assert_eq!((f, p, u), (4, 4, 4));
    // All four cannot share a launch (t_4 = 12 > d_1 = 11): two batches.
    assert_eq!(b, 2);
    let (f, p, b, _) = counts(&events, &Params::new(3, DELTA));
    assert_eq!((f, p, b), (0, 3, 1));
}

#[test]
fn routes_never_mix_and_overrides_apply_per_route() {
    let events = log(&[(0, "a"), (0, "b"), (5, "b"), (30, "c")]);
    let params = Params::new(2, DELTA);
    assert_eq!(counts(&events, &params), (2, 2, 1, 2));
    let params = params.with_override("c=1").unwrap();
    assert_eq!(counts(&events, &params), (3, 3, 2, 3));
    // K = 0 means 1: a batch is never empty.
    let mut params = Params::new(2, DELTA);
    params.k_route.insert("a".to_owned(), 0);
    assert_eq!(counts(&events, &params).1, 3);
    // Overrides for routes not in the log are ignored.
    let params = Params::new(2, DELTA).with_override("zzz=1").unwrap();
    assert_eq!(counts(&events, &params).1, 2);
}

#[test]
fn per_event_deadlines_with_a_nested_interval() {
    // L = [0, 100] spans a pair at 0 and a pair at 50.
    let mut events = Events::new();
    for (t, d) in [(0, 100), (0, 0), (0, 0), (50, 50), (50, 50)] {
        events.push(t, d, "a").unwrap();
    }
    let r = analyze(&events, &Params::new(2, DELTA)).unwrap();
    assert_eq!((r.exact_events, r.exact_batches), (5, 2));
    assert!(r.text().contains("frontier DP"), "{}", r.text());
    // K = 3: each pair needs L, which serves only one of them; U still counts
    // all five (three are active at τ = 0 and at τ = 50).
    let r = analyze(&events, &Params::new(3, DELTA)).unwrap();
    assert_eq!(
        (r.exact_events, r.exact_batches, r.detail.upper_events),
        (3, 1, 5)
    );
}

#[test]
fn exhausted_search_limit_is_an_error_not_an_approximation() {
    let mut events = Events::new();
    for (t, d) in [(0, 100), (0, 0), (0, 0), (50, 50), (50, 50)] {
        events.push(t, d, "nested").unwrap();
    }
    let mut params = Params::new(2, DELTA);
    params.max_exact_steps = 1;
    match analyze(&events, &params) {
        Err(Error::SearchLimit { route, events, .. }) => {
            assert_eq!((route.as_str(), events), ("nested", 5));
        }
        other => panic!("expected SearchLimit, got {other:?}"),
    }
}

#[test]
fn individual_functions_agree_with_analyze() {
    let events = log(&[
        (0, "a"),
        (3, "a"),
        (10, "a"),
        (20, "a"),
        (25, "b"),
        (26, "b"),
    ]);
    let params = Params::new(2, DELTA);
    let r = analyze(&events, &params).unwrap();
    let f = fixed_share(&events, &params).unwrap();
    let p = exact(&events, &params).unwrap();
    let u = upper_share(&events, &params).unwrap();
    assert_eq!(f.covered, r.detail.fixed_events);
    assert_eq!(
        (p.share.covered, p.batches),
        (r.exact_events, r.exact_batches)
    );
    assert_eq!(u.covered, r.detail.upper_events);
    assert_eq!(f.total, 6);
    assert!((p.share.ratio() - r.exact_share).abs() < 1e-15);
}

#[test]
fn report_json_has_exactly_the_documented_keys() {
    let r = analyze(&log(&[(0, "a"), (10, "a")]), &Params::new(2, DELTA)).unwrap();
    let value = serde_json::to_value(&r).unwrap();
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "events",
            "exact_batches",
            "exact_events",
            "exact_share",
            "fixed_share",
            "gap_closure",
            "upper_share"
        ]
    );
    assert_eq!(value["events"], 2);
    assert_eq!(value["gap_closure"], 1.0);
    let none = analyze(&log(&[(0, "a")]), &Params::new(2, DELTA)).unwrap();
    assert!(serde_json::to_value(&none).unwrap()["gap_closure"].is_null());
}

#[test]
fn text_names_the_algorithm() {
    let r = analyze(&log(&[(0, "a"), (10, "a")]), &Params::new(2, DELTA)).unwrap();
    let text = r.text();
    assert!(text.contains("P* algorithm: contiguous-block DP"), "{text}");
    assert!(text.contains("exact share P*    100.00 %"), "{text}");
}

#[test]
fn empty_log_and_bad_parameters() {
    let r = analyze(&Events::new(), &Params::new(2, DELTA)).unwrap();
    assert_eq!((r.events, r.exact_share, r.gap_closure), (0, 0.0, None));
    assert!(matches!(
        analyze(&Events::new(), &Params::new(2, 0)),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        Events::new().push(5, 4, "a"),
        Err(Error::Invalid(_))
    ));
    assert_eq!(parse_override("a=b=3").unwrap(), ("a=b".to_owned(), 3));
    assert!(parse_override("a").is_err());
    assert!(parse_override("=3").is_err());
    assert!(parse_override("a=-1").is_err());
}

fn parse_err(input: &str) -> (u64, ParseError) {
    match read_csv(input.as_bytes(), DELTA) {
        Err(Error::Parse { line, reason }) => (line, reason),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn csv_reads_columns_in_any_order() {
    // A quote opens a field only as its first byte (RFC 4180, as the csv
    // crate reads it); spaces after the closing quote are trimmed.
    let input = "\u{feff}deadline_ns, route ,release_ns\r\n15,a,5\r\n\r\n  30 ,\"b,1\" , 20 \n";
    let events = read_csv(input.as_bytes(), DELTA).unwrap();
    let e = events.events();
    assert_eq!((e[0].release_ns, e[0].deadline_ns), (5, 15));
    assert_eq!((e[1].release_ns, e[1].deadline_ns), (20, 30));
    assert_eq!(events.routes().name(e[1].route), Some("b,1"));
    let events = read_csv("route,release_ns\na,-7\na,3\n".as_bytes(), DELTA).unwrap();
    assert_eq!(events.events()[0].deadline_ns, 3);
    assert_eq!(events.routes().len(), 1);
}

#[test]
fn csv_errors_name_the_line() {
    assert_eq!(parse_err(""), (1, ParseError::MissingHeader));
    assert_eq!(
        parse_err("release_ns\n1\n"),
        (1, ParseError::MissingColumn("route"))
    );
    assert_eq!(
        parse_err("release_ns,route,release_ns\n"),
        (1, ParseError::DuplicateColumn("release_ns".to_owned()))
    );
    assert!(matches!(
        parse_err("release_ns,route,deadline\n"),
        (1, ParseError::UnknownColumn { .. })
    ));
    assert_eq!(
        parse_err("release_ns,route\n1,a\n\n2.5,a\n"),
        (
            4,
            ParseError::NotInteger {
                column: "release_ns",
                value: "2.5".to_owned()
            }
        )
    );
    assert_eq!(
        parse_err("release_ns,route,deadline_ns\n1,a,2\n9,a,8\n"),
        (
            3,
            ParseError::DeadlineBeforeRelease {
                release: 9,
                deadline: 8
            }
        )
    );
    assert_eq!(
        parse_err("release_ns,route\n1\n"),
        (
            2,
            ParseError::FieldCount {
                expected: 2,
                found: 1
            }
        )
    );
    assert_eq!(
        parse_err("release_ns,route\n1,\n"),
        (2, ParseError::Empty("route"))
    );
    assert_eq!(
        parse_err(&format!("release_ns,route\n{},a\n", i64::MAX)),
        (2, ParseError::DeadlineOverflow { release: i64::MAX })
    );
    assert_eq!(
        parse_err("release_ns,route\n1,\"a\n"),
        (2, ParseError::Unterminated)
    );
    assert_eq!(
        parse_err("release_ns,route\n1,a\n\n2,\"a\nb\"\n3,a\n"),
        (4, ParseError::Unterminated)
    );
    // A space before a quote leaves the field unquoted: its comma splits it.
    assert_eq!(
        parse_err("release_ns,route\n1, \"b,1\"\n"),
        (
            2,
            ParseError::FieldCount {
                expected: 2,
                found: 3
            }
        )
    );
    assert!(matches!(
        read_csv("release_ns,route\n".as_bytes(), -1),
        Err(Error::Invalid(_))
    ));
    let bad_utf8: &[u8] = b"release_ns,route\n1,\xff\n";
    assert!(matches!(
        read_csv(bad_utf8, DELTA),
        Err(Error::Parse {
            line: 2,
            reason: ParseError::NotUtf8
        })
    ));
}
