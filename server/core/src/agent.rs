//! The wire protocol between the service and the agent in every pod.
//!
//! The agent listens on an address (`unix:/path/agent.sock` for local pods,
//! `tcp:10.0.0.7:7070` for Kubernetes pods). In an exchange the service writes
//! one [`Request`] as a JSON line, and the agent answers with [`Frame`]s, one
//! JSON line each, ending with a final frame ([`Frame::is_final`]). A
//! connection carries one exchange after another (the service keeps it from
//! job to job); the agent closes it after a request it refuses. While a `run`
//! is in progress, any further line from the service cancels the job and
//! kills its whole process tree; once it has ended, the next line is the next
//! request. The service
//! closing its side cancels it too, unless the run asked for a grace period
//! ([`Run::detach_grace_ms`]): then the job goes on, and a leader (a newer one
//! after a takeover) may take its stream back with [`Request::Attach`]; a run
//! no leader attaches to within the grace period is cancelled.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::job::{Deps, ErrorCode};

/// Version of this protocol; an agent answers `ping` with it.
/// Version 2 added the pod token on every request and the `status` op;
/// version 3 the `attach` op and the run's detach grace period.
pub const PROTOCOL_VERSION: u32 = 3;

/// Environment variable naming the file a job writes its JSON output to.
pub const OUTPUT_ENV: &str = "HEARTH_OUTPUT";
/// Environment variable naming the file holding the job's JSON input.
pub const INPUT_ENV: &str = "HEARTH_INPUT";

/// The first line of a connection: a request and the leadership epoch of
/// the scheduler that sends it. An agent refuses a request whose epoch is
/// older than one it has seen (`stale_epoch`), so a leader that lost its
/// lock and has not noticed yet can neither run nor wipe anything.
///
/// An agent listening on TCP also requires its pod's own `token` (an HMAC of
/// the pod id under the install's secret, handed to the pod through a
/// Secret); a request without it, or with another pod's, is refused
/// (`agent_unauthorized`) before anything else is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(default)]
    pub epoch: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(flatten)]
    pub request: Request,
}

/// One request, sent as the first line of a connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Liveness: answered by [`Frame::Pong`].
    Ping,
    /// Bind the job (code, deps, topology) and run it.
    Run(Box<Run>),
    /// Delete everything jobs left in the pod (work dir, environments, temp);
    /// answered by [`Frame::Wiped`].
    Wipe,
    /// What the pod holds: answered by [`Frame::Status`]. A restarted
    /// leader asks every pod of its install before adopting it.
    Status,
    /// Take over the stream of run `job_id` (a new leader after a takeover):
    /// the agent answers with every frame of the run from its start (so
    /// nothing is lost in between, and nothing is sent twice on this
    /// stream), then follows it live as `run` does, the final frame
    /// included; a later attach takes the stream over again. Refused with
    /// `pod_lost` when the pod runs no such job (or its end was already
    /// delivered). Like every request, refused for an older epoch: a
    /// leader that lost the lease cannot take a run back.
    Attach { job_id: String },
}

/// A job as the agent sees it: already validated, code already resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub job_id: String,
    /// The caller the job runs for: the pod's binding, reported by `status`
    /// so a new leader knows whose warm pod it is. Never used to decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// Relative path -> content, written under the work directory.
    pub files: BTreeMap<String, String>,
    pub command: Vec<String>,
    #[serde(default)]
    pub deps: Deps,
    #[serde(default)]
    pub input: serde_json::Value,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub timeout_ms: u64,
    /// Set for the pods of a gang-scheduled rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Rank>,
    /// Bytes of stdout (and, separately, stderr) streamed before truncation.
    pub max_log_bytes: u64,
    /// How long the job goes on after the service's connection closes
    /// without a cancel, waiting for a leader to [`Request::Attach`]; then
    /// it is cancelled. 0 (the default) cancels it at once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub detach_grace_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// This pod's place in a gang.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rank {
    pub rank: u32,
    pub world_size: u32,
    /// Addresses (`host:port`) of every rank, in rank order.
    pub peers: Vec<String>,
    pub master_addr: String,
    pub master_port: u16,
}

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// How the job's process tree ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The command exited by itself (any exit code).
    Exited,
    /// The timeout passed and the tree was killed.
    TimedOut,
    /// The service cancelled it and the tree was killed.
    Cancelled,
}

/// One line of the agent's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Frame {
    Pong {
        protocol: u32,
        /// What isolates jobs in this pod (`bwrap`, `none`, ...).
        sandbox: String,
    },
    /// Binding finished; the command starts now.
    Bound {
        bind_ms: f64,
        /// Whether the dependency environment was already in the pod.
        deps_cached: bool,
    },
    /// One line of output (without its newline).
    Line { stream: Stream, line: String },
    /// The stream passed `max_log_bytes`; later lines of it are dropped.
    Truncated { stream: Stream },
    /// The job ended. Final.
    Exit {
        outcome: Outcome,
        exit_code: Option<i32>,
        /// The JSON the job wrote to `$HEARTH_OUTPUT`, if any.
        output: Option<serde_json::Value>,
        /// Why `output` is missing although the file exists.
        output_error: Option<String>,
        run_ms: f64,
    },
    /// The request could not be carried out. Final.
    Error {
        /// Why: one of the job error codes the agent can tell
        /// (`deps_install_failed`, `bind_failed`, `spawn_failed`,
        /// `disk_quota_exceeded`, `stale_epoch`, `agent_protocol`).
        code: ErrorCode,
        message: String,
        /// A log that explains it (e.g. pip's output).
        #[serde(default)]
        log: String,
    },
    /// The pod is clean again. Final.
    Wiped,
    /// What the pod holds (answer to `status`). Final.
    Status {
        /// A job is running (or being bound) right now.
        busy: bool,
        /// The job running now.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job_id: Option<String>,
        /// The caller of the last job bound since the last wipe: the pod is
        /// warm for it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caller: Option<String>,
        /// Keys of the dependency environments built in the pod.
        #[serde(default)]
        envs: Vec<String>,
    },
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
/// The lock file a local service holds for as long as it uses `pods_dir`
/// (`<pods_dir>.lock`): an agent whose service is gone finds it free.
pub fn pods_lock(pods_dir: &std::path::Path) -> std::path::PathBuf {
    let mut name = pods_dir.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    pods_dir.with_file_name(name)
}

pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Equal byte strings, in time that depends on their lengths only (the time
/// taken says nothing of how much of a secret matched).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The token of pod `pod_id`: an HMAC of its id under the install's secret,
/// so a restarted leader recomputes it and no pod can compute another's.
pub fn pod_token(install_secret: &[u8], pod_id: &str) -> String {
    crate::hex(&hmac_sha256(install_secret, pod_id.as_bytes()))
}

impl Frame {
    /// Whether this frame ends the exchange.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Frame::Pong { .. }
                | Frame::Exit { .. }
                | Frame::Error { .. }
                | Frame::Wiped
                | Frame::Status { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_directory_is_locked_beside_it() {
        let lock = pods_lock(std::path::Path::new("/var/tmp/hearth/pods-1"));
        assert_eq!(lock, std::path::Path::new("/var/tmp/hearth/pods-1.lock"));
    }

    #[test]
    fn requests_travel_with_their_epoch() {
        let line = r#"{"op":"wipe","epoch":7}"#;
        let env: Envelope = serde_json::from_str(line).unwrap();
        assert_eq!(
            env,
            Envelope {
                epoch: 7,
                token: None,
                request: Request::Wipe
            }
        );
        assert_eq!(
            serde_json::to_string(&env).unwrap(),
            r#"{"epoch":7,"op":"wipe"}"#
        );
        // Without one, the epoch is 0: refused by any agent that has seen a leader.
        let bare: Envelope = serde_json::from_str(r#"{"op":"ping"}"#).unwrap();
        assert_eq!((bare.epoch, bare.request), (0, Request::Ping));
        let signed: Envelope =
            serde_json::from_str(r#"{"op":"status","epoch":3,"token":"ab"}"#).unwrap();
        assert_eq!(signed.token.as_deref(), Some("ab"));
        assert_eq!(signed.request, Request::Status);
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"a"));
    }

    #[test]
    fn attach_names_its_run() {
        let env: Envelope =
            serde_json::from_str(r#"{"op":"attach","epoch":9,"job_id":"j1"}"#).unwrap();
        assert_eq!(
            env.request,
            Request::Attach {
                job_id: "j1".into()
            }
        );
        assert_eq!(env.epoch, 9);
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 1 and 6 (a key longer than a block).
        assert_eq!(
            crate::hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            crate::hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
        assert_ne!(pod_token(b"s", "p1"), pod_token(b"s", "p2"));
        assert_ne!(pod_token(b"s", "p1"), pod_token(b"t", "p1"));
    }

    #[test]
    fn frames_round_trip_as_tagged_json_lines() {
        let frame = Frame::Line {
            stream: Stream::Stdout,
            line: "hello".into(),
        };
        let text = serde_json::to_string(&frame).unwrap();
        assert_eq!(text, r#"{"type":"line","stream":"stdout","line":"hello"}"#);
        assert_eq!(serde_json::from_str::<Frame>(&text).unwrap(), frame);
        assert!(!frame.is_final());
        assert!(Frame::Wiped.is_final());
        let ping: Request = serde_json::from_str(r#"{"op":"ping"}"#).unwrap();
        assert_eq!(ping, Request::Ping);
    }
}
