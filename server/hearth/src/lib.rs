//! Hearth: an HTTP/JSON service that runs AI agents' and RL trainers' short
//! jobs (tool calls, verifiers, rollouts) on warm, isolated pods.
//!
//! Layout: [`config`] (flags and environment), [`app`] (state, router, serve),
//! [`http`] (one module per resource), [`auth`] (API keys, JWTs, admin token),
//! [`scheduler`] (drives the pool policy, runs jobs), [`hub`] (live job events),
//! [`replica`] (this replica among those sharing the database),
//! [`control`] (the ready-cohort control engine), [`metrics`] (Prometheus),
//! [`telemetry`] (OpenTelemetry traces), [`error`] (the HTTP error table).

pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod console;
pub mod control;
pub mod error;
mod group;
pub mod http;
pub mod hub;
pub mod metrics;
pub mod replica;
pub mod scheduler;
pub mod telemetry;

pub use app::{AppState, Running, start};
pub use config::Config;
