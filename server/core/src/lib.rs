//! Hearth's domain: what a job is, what a hardware profile is, how a job
//! submission is validated, and the wire protocol between the service and the
//! agent inside every pod.
//!
//! This crate does no I/O and knows nothing of HTTP, Postgres or processes, so
//! the service, the agent and the simulator can all share it.

pub mod agent;
#[cfg(feature = "csv")]
pub mod csv_lines;
pub mod job;
pub mod net;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod profile;
pub mod rng;
pub mod validate;
pub mod whole;

pub use job::{ErrorCode, Kind, Source, State};
pub use profile::{Profile, StartClass, StartObjective};

/// Lower-case hex encoding of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xf) as usize] as char);
    }
    out
}

/// SHA-256 of `bytes`, as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
}
