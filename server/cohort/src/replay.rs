//! The session replay generator behind `hearth analyze replay`: a stationary
//! Poisson superposition of recorded sessions, written as an event-log CSV.
//!
//! # Sessions file
//!
//! CSV with a header naming `session`, `offset_ns` and `route` in any order, one
//! row per ready event of a recorded session:
//!
//! ```text
//! session,offset_ns,route
//! s1,0,chat
//! s1,1200000,chat
//! s2,0,search
//! s2,90000000,chat
//! ```
//!
//! `session` is any non-empty label; the rows of a session need not be
//! adjacent. `offset_ns` (an integer, `>= 0`) is the event's release relative
//! to the session's start, and a session lasts from its start to its last
//! offset. Sessions keep the order in which their labels first appear, so a
//! file and a seed determine the replay.
//!
//! # Process
//!
//! With N active sessions wanted and mean recorded duration D̄, Little's law
//! gives the arrival rate λ = N / D̄. Session starts form a Poisson process of
//! rate λ; each start picks a recorded session uniformly at random and emits
//! its events shifted by the start time. With `warm_start` the process begins
//! at `-max duration` instead of 0, so every session that could still emit at
//! t = 0 has had its chance to start and the replay is stationary from t = 0
//! (the number of sessions in progress at any t ≥ 0 is Poisson with mean N).
//! Only events with release in `[0, duration)` are written, in release order,
//! streamed through a heap of sessions in progress (memory O(sessions in
//! progress), not O(events)).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{BufRead, BufWriter, Write};

use crate::csv::{Records, header, parse_i64, write_field};
use crate::{Error, ParseError, Routes, SplitMix64};

/// One recorded session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Label from the file.
    pub id: String,
    /// `(offset_ns, route id)` sorted by offset (file order among equal offsets).
    pub events: Vec<(i64, u32)>,
}

impl Session {
    /// Start to last event, in ns.
    pub fn duration_ns(&self) -> i64 {
        self.events.last().map_or(0, |e| e.0)
    }
}

/// Recorded sessions and the interner of their routes.
#[derive(Debug, Clone, Default)]
pub struct Sessions {
    sessions: Vec<Session>,
    routes: Routes,
    index: HashMap<String, usize>,
}

impl Sessions {
    /// The sessions in order of first appearance.
    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    /// The interner the sessions' route ids refer to.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// Mean session duration in ns (0 when there are no sessions).
    pub fn mean_duration_ns(&self) -> f64 {
        if self.sessions.is_empty() {
            return 0.0;
        }
        let total: f64 = self.sessions.iter().map(|s| s.duration_ns() as f64).sum();
        total / self.sessions.len() as f64
    }

    /// Adds a ready event to session `id` (creating it), for building sessions in code.
    ///
    /// # Errors
    /// [`Error::Invalid`] if `offset_ns < 0`.
    pub fn push(&mut self, id: &str, offset_ns: i64, route: &str) -> Result<(), Error> {
        if offset_ns < 0 {
            return Err(Error::Invalid(format!("offset_ns {offset_ns} is negative")));
        }
        let route = self.routes.intern(route);
        let index = self.session_index(id);
        let events = &mut self.sessions[index].events;
        let at = events.partition_point(|e| e.0 <= offset_ns);
        events.insert(at, (offset_ns, route));
        Ok(())
    }

    fn session_index(&mut self, id: &str) -> usize {
        if let Some(&i) = self.index.get(id) {
            return i;
        }
        self.index.insert(id.to_owned(), self.sessions.len());
        self.sessions.push(Session {
            id: id.to_owned(),
            events: Vec::new(),
        });
        self.sessions.len() - 1
    }
}

/// Reads a sessions file (see the module docs), streaming.
///
/// # Errors
/// [`Error::Parse`] with the line number for a bad header, a wrong field count,
/// a non-integer or negative offset, or an empty label or route; [`Error::Io`].
pub fn read_sessions(reader: impl BufRead) -> Result<Sessions, Error> {
    let mut records = Records::new(reader)?;
    let cols = header(
        &mut records,
        &["session", "offset_ns", "route"],
        &[],
        "session, offset_ns, route",
    )?;
    let width = records.len();
    let (session_col, offset_col, route_col) = (
        cols[0].unwrap_or_default(),
        cols[1].unwrap_or_default(),
        cols[2].unwrap_or_default(),
    );
    let mut out = Sessions::default();
    while records.next_record()? {
        if records.len() != width {
            return Err(records.error(ParseError::FieldCount {
                expected: width,
                found: records.len(),
            }));
        }
        let offset = parse_i64(&records, offset_col, "offset_ns")?;
        if offset < 0 {
            return Err(records.error(ParseError::NegativeOffset(offset)));
        }
        let (id, route) = (records.field(session_col), records.field(route_col));
        if id.is_empty() {
            return Err(records.error(ParseError::Empty("session")));
        }
        if route.is_empty() {
            return Err(records.error(ParseError::Empty("route")));
        }
        let route = out.routes.intern(route);
        let i = out.session_index(id);
        out.sessions[i].events.push((offset, route));
    }
    for session in &mut out.sessions {
        session.events.sort_by_key(|e| e.0);
    }
    Ok(out)
}

/// Replay parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayParams {
    /// Mean number of sessions in progress, N (`--active`).
    pub active: f64,
    /// Length of the replay in ns (`--seconds` × 10⁹).
    pub duration_ns: i64,
    /// PRNG seed (`--seed`).
    pub seed: u64,
    /// Start the process at `-max duration` so it is stationary from t = 0.
    pub warm_start: bool,
}

impl ReplayParams {
    /// `active` sessions for `seconds` seconds, warm-started.
    pub fn new(active: f64, seconds: f64, seed: u64) -> Self {
        Self {
            active,
            duration_ns: (seconds * 1e9).round() as i64,
            seed,
            warm_start: true,
        }
    }
}

/// What a replay produced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayStats {
    /// Session starts drawn, including warm-up starts.
    pub arrivals: u64,
    /// Starts before t = 0 (warm-up).
    pub warm_arrivals: u64,
    /// Events written.
    pub events: u64,
    /// Arrival rate λ = N / D̄, per second.
    pub rate_per_s: f64,
    /// Mean recorded session duration D̄, ns.
    pub mean_duration_ns: f64,
}

/// A session in progress, ordered by its next release, then by start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    release: i64,
    seq: u64,
    start: i64,
    session: usize,
    index: usize,
}

/// Writes a replay as CSV `release_ns,route`, sorted by release, to `writer`.
///
/// # Errors
/// [`Error::Invalid`] for no sessions, a zero mean duration, a non-positive or
/// non-finite `active`, or a non-positive duration; [`Error::Io`] from the writer.
pub fn replay(
    sessions: &Sessions,
    params: &ReplayParams,
    writer: impl Write,
) -> Result<ReplayStats, Error> {
    let recorded = sessions.sessions();
    if recorded.is_empty() {
        return Err(Error::Invalid("no sessions to replay".to_owned()));
    }
    let mean = sessions.mean_duration_ns();
    if mean <= 0.0 {
        return Err(Error::Invalid(
            "mean session duration is zero: every session has all its events at its start"
                .to_owned(),
        ));
    }
    if !(params.active.is_finite() && params.active > 0.0) {
        return Err(Error::Invalid(format!(
            "active must be positive, got {}",
            params.active
        )));
    }
    if params.duration_ns <= 0 {
        return Err(Error::Invalid(format!(
            "duration must be positive, got {} ns",
            params.duration_ns
        )));
    }
    let rate = params.active / mean;
    let end = params.duration_ns;
    let longest = recorded.iter().map(Session::duration_ns).max().unwrap_or(0);
    let names: Vec<Vec<u8>> = sessions
        .routes()
        .names()
        .map(|name| {
            let mut buf = Vec::new();
            write_field(&mut buf, name).map(|()| buf)
        })
        .collect::<Result<_, _>>()?;

    let mut out = BufWriter::with_capacity(1 << 16, writer);
    out.write_all(b"release_ns,route\n")?;
    let mut stats = ReplayStats {
        arrivals: 0,
        warm_arrivals: 0,
        events: 0,
        rate_per_s: rate * 1e9,
        mean_duration_ns: mean,
    };
    let mut rng = SplitMix64::new(params.seed);
    let mut clock = if params.warm_start {
        -(longest as f64)
    } else {
        0.0
    };
    clock += rng.exp(rate);
    let mut pending: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut seq = 0u64;
    loop {
        let arrival = (clock < end as f64).then(|| clock.floor() as i64);
        let next = pending.peek().map(|Reverse(e)| e.release);
        match (arrival, next) {
            (Some(start), next) if next.is_none_or(|t| start <= t) => {
                stats.arrivals += 1;
                stats.warm_arrivals += u64::from(start < 0);
                let s = rng.below(recorded.len() as u64) as usize;
                let events = &recorded[s].events;
                let first = events.partition_point(|e| start.saturating_add(e.0) < 0);
                if let Some(&(offset, _)) = events.get(first) {
                    let release = start.saturating_add(offset);
                    if release < end {
                        pending.push(Reverse(Pending {
                            release,
                            seq,
                            start,
                            session: s,
                            index: first,
                        }));
                        seq += 1;
                    }
                }
                clock += rng.exp(rate);
            }
            (_, Some(_)) => {
                let Some(Reverse(p)) = pending.pop() else {
                    break;
                };
                let events = &recorded[p.session].events;
                write!(out, "{},", p.release)?;
                out.write_all(&names[events[p.index].1 as usize])?;
                out.write_all(b"\n")?;
                stats.events += 1;
                if let Some(&(offset, _)) = events.get(p.index + 1) {
                    let release = p.start.saturating_add(offset);
                    if release < end {
                        pending.push(Reverse(Pending {
                            release,
                            seq,
                            index: p.index + 1,
                            ..p
                        }));
                        seq += 1;
                    }
                }
            }
            (_, None) => break,
        }
    }
    out.flush()?;
    Ok(stats)
}
