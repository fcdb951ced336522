//! Jobs: their kinds, lifecycle states, start sources and submitted specs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a job is for. The kinds run the same way; they are kept apart for
/// accounting, filtering and policy.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    ToolCall,
    Verifier,
    Rollout,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::ToolCall, Kind::Verifier, Kind::Rollout];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ToolCall => "tool_call",
            Kind::Verifier => "verifier",
            Kind::Rollout => "rollout",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A job's lifecycle: `queued -> assigned -> running -> succeeded | failed |
/// timed_out | cancelled`. A job may also be cancelled or failed before it runs.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Queued,
    Assigned,
    Running,
    Succeeded,
    Failed,
    TimedOut,
    Cancelled,
}

impl State {
    pub const ALL: [State; 7] = [
        State::Queued,
        State::Assigned,
        State::Running,
        State::Succeeded,
        State::Failed,
        State::TimedOut,
        State::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Assigned => "assigned",
            State::Running => "running",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
            State::TimedOut => "timed_out",
            State::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// A terminal state never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Succeeded | State::Failed | State::TimedOut | State::Cancelled
        )
    }

    /// Whether the lifecycle allows moving from `self` to `next`.
    pub fn can_become(self, next: State) -> bool {
        use State::*;
        match (self, next) {
            (Queued, Assigned) => true,
            // A pod lost before the job finished puts it back in the queue.
            (Assigned | Running, Queued) => true,
            (Assigned, Running) => true,
            (Queued | Assigned | Running, Cancelled | Failed) => true,
            (Running, Succeeded | TimedOut) => true,
            _ => false,
        }
    }
}

/// Where the pod that served a job came from.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// An idle pod that still held this caller's previous binding.
    Warm,
    /// A started, unbound pod promoted for this job.
    Standby,
    /// A pod started for this job.
    Cold,
}

impl Source {
    pub const ALL: [Source; 3] = [Source::Warm, Source::Standby, Source::Cold];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Warm => "warm",
            Source::Standby => "standby",
            Source::Cold => "cold",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The job's code: inline files, or a bundle uploaded earlier. (Its OpenAPI
/// schema is written out in [`crate::openapi`].)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// Relative path -> UTF-8 content.
    Files(BTreeMap<String, String>),
    /// `sha256:<hex>` of a bundle uploaded with `POST /v1/bundles`.
    Bundle(String),
}

impl Default for Code {
    fn default() -> Self {
        Code::Files(BTreeMap::new())
    }
}

/// Extra packages bound at start and cached in the pod per dependency set.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deps {
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi::pip))]
    pub pip: Vec<String>,
}

impl Deps {
    pub fn is_empty(&self) -> bool {
        self.pip.is_empty()
    }

    /// A stable key for this dependency set: the same packages in any order
    /// give the same key, so a pod reuses the environment it built.
    pub fn key(&self) -> Option<String> {
        if self.pip.is_empty() {
            return None;
        }
        let mut pkgs = self.pip.clone();
        pkgs.sort();
        pkgs.dedup();
        Some(crate::sha256_hex(pkgs.join("\n").as_bytes())[..16].to_owned())
    }
}

/// Gang topology of a rollout: `pods` pods start together or none do.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Pods of the gang, at most 16 (and at most the profile's `max_pods`).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 16))]
    #[serde(deserialize_with = "crate::whole::int")]
    pub pods: u32,
}

/// A validated job submission: everything needed to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub kind: Kind,
    pub profile: String,
    pub caller: String,
    #[serde(default)]
    pub code: Code,
    pub command: Vec<String>,
    #[serde(default)]
    pub deps: Deps,
    #[serde(default)]
    pub input: serde_json::Value,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub timeout_s: u32,
    #[serde(default)]
    pub priority: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
}

impl Spec {
    /// Number of pods the job needs at once.
    pub fn pods(&self) -> u32 {
        self.topology.map_or(1, |t| t.pods)
    }
}

/// Start-latency breakdown of a finished job, in milliseconds.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// From acceptance until the scheduler picked a pod.
    pub queued_ms: f64,
    /// From picking until the pod was ready to bind (zero for warm).
    pub acquire_ms: f64,
    /// Writing code, installing deps, setting topology.
    pub bind_ms: f64,
    /// The job's own run time.
    pub run_ms: f64,
    /// From acceptance to the final state.
    pub total_ms: f64,
}
