//! Hearth's pool policy and the trace simulator that drives it.
//!
//! * [`policy`] decides which pod serves a job (warm, standby or cold), when
//!   standby pods are started and promoted, when idle pods are released and
//!   how large the idle budget is. It is a pure state machine: no I/O, no
//!   clock, no randomness. Whoever drives it stamps every [`policy::Event`]
//!   with an [`Instant`] and carries out the [`policy::Decision`]s it returns.
//! * [`sim`] replays a trace of closed caller loops through the same policy
//!   code with a virtual clock, and generates synthetic agent and RL traces.
//!
//! The live scheduler drives the policy with the real clock and a runtime;
//! the simulator with a virtual clock and modelled start times. Nothing in
//! this crate may read the wall clock, touch the network or the store.

pub mod policy;
pub mod sim;

mod time;

pub use policy::{
    ByNumber, CallerId, Config, Decision, Event, JobId, Kind, Loop, Names, PodId, Pool, Reason,
    Request, Shares, Snapshot, TenantId,
};
pub use time::Instant;
