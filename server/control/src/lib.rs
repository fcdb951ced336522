//! Hearth's ready-cohort control runtime (DESIGN.md, "Ready-cohort control
//! endpoint"): the policy language, the CPU reference executor, the cohort
//! compactor and its driver, live accounting, calibration and, behind the
//! `cuda` feature, the CUDA executor. No HTTP, no database, no global state:
//! the endpoint, the session store and the CLI wrap this library.
//!
//! # Using it
//!
//! ```
//! use hearth_control::{CpuExecutor, Driver, DriverConfig, Program, accounting};
//!
//! // POST /v1/control/policies: validate and compile; route ids are content hashes.
//! let program = Program::from_json(hearth_control::EXAMPLE_POLICY).unwrap();
//! let route_id = program.routes()[0].id().to_owned();
//!
//! // The active executor (hearth_control::cuda::best_executor() with `cuda`).
//! let mut driver = Driver::new(DriverConfig::default(), CpuExecutor::new());
//! // K_r per route id, from `calibrate::calibrate` (here: 2 for every route).
//! driver.register(program, |_id| Some(2));
//!
//! // POST /v1/control/events: submit with the service clock (ns), then advance.
//! let key = driver.route_key(&route_id).unwrap();
//! let mut done = Vec::new();
//! for session in 0..3 {
//!     driver.submit(1_000, session, Some(key), &[5, 6], 1_000 + 50_000_000).unwrap();
//!     done.extend(driver.advance(1_000));
//! }
//! // A timer calls advance at next_wake(); here the queue is due at its deadline.
//! let wake = driver.next_wake().unwrap();
//! done.extend(driver.advance(wake));
//! assert_eq!(done.len(), 3);
//! assert_eq!(done[0].record.batch_size, 3);
//!
//! // GET /v1/control/stats: A, R_A, F, P*, U of a window of records.
//! let records: Vec<_> = done.iter().map(|c| c.record).collect();
//! let stats = accounting::stats(&records, 50_000_000, |_| 2).unwrap();
//! assert_eq!(stats.achieved, 1.0);
//! ```
//!
//! * [`policy`] — the JSON language ([`Spec`]), validation ([`PolicyError`]),
//!   the compiled [`Program`], its canonical encoding and route ids.
//! * [`cpu`] — scalar and vectorised batch execution of chains ([`Task`] →
//!   [`Outcome`]); the reference.
//! * [`compactor`] — per-route deadline queues, `K_r`, B, EDF, CPU fallback; pure.
//! * [`driver`] — [`Driver`]: programs + sessions + compactor + an
//!   [`Executor`] over a caller-supplied clock; [`Record`] per event;
//!   [`driver::replay`] on a virtual clock.
//! * [`accounting`] — A, R_A, F, P*, U, misses, fallback share, events/s.
//! * [`calibrate`] — `K_r` per route from measured timings.
//! * [`swarm`] — the generated agent swarm of the bench.
//! * [`random`] — random valid policies, states and inputs.
//! * [`resident`] — host side of device-resident sessions: rows, uploads, packed buffers.
//! * `cuda` (feature `cuda`) — the CUDA executor over `kernels/control.cu`.

pub mod accounting;
pub mod calibrate;
pub mod compactor;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod driver;
pub mod policy;
pub mod random;
pub mod resident;
pub mod swarm;

pub use cpu::{Effect, Outcome, Task};
pub use driver::{
    Completed, CpuExecutor, Driver, DriverConfig, ExecError, Executor, ExecutorKind, Record,
    RouteKey,
};
pub use policy::{PolicyError, Program, Spec};

/// An example policy (also in the README of the endpoint): two routes, a
/// per-event decision, chains of up to 8 steps.
pub const EXAMPLE_POLICY: &str = r#"{
  "name": "triage", "version": 3, "registers": 4, "inputs": 2,
  "init": [0, 0, 0, 7], "max_steps": 8,
  "routes": [
    {"name": "classify", "body": [
      {"op": "add", "dst": 0, "a": {"reg": 0}, "b": {"input": 0}},
      {"op": "mix", "dst": 1, "a": {"reg": 1}, "b": {"input": 1}},
      {"op": "select", "dst": 2, "cmp": "gt", "a": {"reg": 0}, "b": {"imm": 100},
       "then": {"imm": 1}, "else": {"reg": 2}},
      {"op": "set_route", "route": "answer", "when": {"cmp": "eq", "a": {"reg": 2}, "b": {"imm": 1}}}
    ]},
    {"name": "answer", "body": [
      {"op": "sub_sat", "dst": 3, "a": {"reg": 3}, "b": {"imm": 1}},
      {"op": "emit", "code": 9, "regs": [0, 3], "when": {"cmp": "eq", "a": {"reg": 3}, "b": {"imm": 0}}},
      {"op": "set_route", "route": "classify"}
    ]}
  ],
  "decision": {"per_event": {"cmp": "lt", "a": {"reg": 0}, "b": {"imm": 1000}}}
}"#;
