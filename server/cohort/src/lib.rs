//! Ready-cohort math for Hearth: the exact offline analyzer (F, P*, U and gap
//! closure G of an event log) and the session replay generator behind
//! `hearth analyze`. The live control endpoint reuses [`fixed_share`],
//! [`exact`] and [`upper_share`] on its own event log.
//!
//! Definitions follow the Ready Cohorts paper (see `DESIGN.md`, "Ready-cohort
//! control endpoint"): event i has integer-ns release `t_i`, inclusive deadline
//! `d_i` (`t_i + δ` unless the log gives one) and route `r_i`; a feasible batch
//! is a launch time τ and at least `K_r` events of one route with
//! `t_i <= τ <= d_i`; shares are over all events.
//!
//! * **F** — windows `[kδ, (k+1)δ)` from origin 0 (by release, δ even when
//!   deadlines are per event); an event counts if its (window, route) bucket
//!   holds at least K events. O(n) after the sort.
//! * **P\*** — the most events a feasible schedule (each event used at most
//!   once) covers; exact. Agreeable deadlines (equal deadlines included) use the
//!   contiguous-block DP with a monotone deque, O(n log n); components where an
//!   interval nests inside an earlier one use the launch-point frontier DP,
//!   exact with a stated worst case. See [`exact()`] for both.
//! * **U** — event i counts if some τ in `[t_i, d_i]` has at least K events of
//!   its route active; an exact inclusive sweep, O(n log n).
//! * **G** = (P* − F)/(U − F), `null` when U = F.
//!
//! This crate does no I/O beyond the readers and writers it is handed, and
//! depends on the rest of Hearth only for the workspace's one seeded generator
//! (`hearth_core::rng`).

mod analyze;
mod csv;
mod error;
mod event;
mod optimum;
mod replay;

pub use analyze::{
    Detail, Exact, Params, Report, Share, Thresholds, analyze, exact, fixed_share, gap_closure,
    parse_override, upper_share,
};
pub use csv::read_csv;
pub use error::{Error, ParseError};
pub use event::{Event, Events, Routes};
pub use hearth_core::rng::SplitMix64;
pub use optimum::ExactStats;
pub use replay::{ReplayParams, ReplayStats, Session, Sessions, read_sessions, replay};

#[cfg(test)]
mod proptests;
