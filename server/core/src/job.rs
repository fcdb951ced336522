//! Jobs: their kinds, lifecycle states, start sources and submitted specs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Declares the snake_case name of each variant of a unit enum that is stored
/// in Postgres `text` columns and sent in JSON: `ALL`, `as_str`, `parse`,
/// `Display`, and (feature `sqlx`) a Postgres mapping that refuses a name it
/// does not know instead of guessing.
macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The name in the API and in the store.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }

            /// The value of a name from [`Self::as_str`]; `None` for any other.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[cfg(feature = "sqlx")]
        impl sqlx::Type<sqlx::Postgres> for $ty {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <str as sqlx::Type<sqlx::Postgres>>::type_info()
            }

            fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <str as sqlx::Type<sqlx::Postgres>>::compatible(ty)
            }
        }

        #[cfg(feature = "sqlx")]
        impl sqlx::postgres::PgHasArrayType for $ty {
            fn array_type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::postgres::PgHasArrayType>::array_type_info()
            }
        }

        #[cfg(feature = "sqlx")]
        impl sqlx::Encode<'_, sqlx::Postgres> for $ty {
            fn encode_by_ref(
                &self,
                buf: &mut sqlx::postgres::PgArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<sqlx::Postgres>>::encode(self.as_str(), buf)
            }
        }

        #[cfg(feature = "sqlx")]
        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $ty {
            fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                let name = <&str as sqlx::Decode<sqlx::Postgres>>::decode(value)?;
                $ty::parse(name)
                    .ok_or_else(|| format!("{:?} is not a {}", name, stringify!($ty)).into())
            }
        }
    };
}

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

names!(Kind {
    ToolCall => "tool_call",
    Verifier => "verifier",
    Rollout => "rollout",
});

/// A job's lifecycle: `queued -> assigned -> running -> succeeded | failed |
/// timed_out | cancelled`. A job may also be cancelled or failed before it
/// runs, and goes back to `queued` when its pods are lost while it has
/// attempts left. The service moves a job along these transitions only.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
// The whole lifecycle is `State::can_become`; the store's updates follow it.
pub enum State {
    Queued,
    Assigned,
    Running,
    Succeeded,
    Failed,
    TimedOut,
    Cancelled,
}

names!(State {
    Queued => "queued",
    Assigned => "assigned",
    Running => "running",
    Succeeded => "succeeded",
    Failed => "failed",
    TimedOut => "timed_out",
    Cancelled => "cancelled",
});

impl State {
    /// The states a job may still leave.
    pub const UNFINISHED: &'static [State] = &[State::Queued, State::Assigned, State::Running];

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
            (Assigned, Running) => true,
            // A pod lost before the job finished puts it back in the queue.
            (Assigned | Running, Queued) => true,
            // Cancelled before or while running; failed before it ran (no
            // profile, unplaceable, pods that never came up) or while it ran.
            (Queued | Assigned | Running, Cancelled | Failed) => true,
            // Ends of a run. From `assigned` too: the start is recorded off
            // the job's output path, and its end may be recorded first when
            // that write failed; the end is what the caller waits for.
            (Assigned | Running, Succeeded | TimedOut) => true,
            _ => false,
        }
    }

    /// The states from which a job may become `next`: what the store's
    /// update to `next` requires of the row it changes.
    pub fn before(next: State) -> Vec<State> {
        State::ALL
            .iter()
            .copied()
            .filter(|s| s.can_become(next))
            .collect()
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

names!(Source {
    Warm => "warm",
    Standby => "standby",
    Cold => "cold",
});

/// Why a finished job did not succeed: its `error.code`. (Errors of a request
/// are the API's `ErrorBody` codes, a different list.)
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The command exited with a non-zero code or was killed by a signal.
    NonzeroExit,
    /// The job ran past its `timeout_s`.
    TimedOut,
    /// The job was cancelled, before or while it ran.
    Cancelled,
    /// The job wrote something that is not JSON to `$HEARTH_OUTPUT`.
    InvalidOutput,
    /// Installing `deps.pip` failed; `stderr` holds pip's log.
    DepsInstallFailed,
    /// Writing the job's code or input to its pod failed.
    BindFailed,
    /// The command could not be started (for example, no such program).
    SpawnFailed,
    /// The job wrote more than its profile's `disk_mib` to its pod; it was
    /// killed and what it wrote removed.
    DiskQuotaExceeded,
    /// The job's pod failed or vanished and the job had no attempts left.
    PodLost,
    /// Pods of the job's profile failed to start several times in a row
    /// while it waited (an image that cannot be pulled, a configuration the
    /// runtime refuses, no node for it); the message names the last reason.
    PodStartFailed,
    /// The job's bundle no longer exists.
    UnknownBundle,
    /// The job's profile no longer exists.
    UnknownProfile,
    /// The job needs more than its profile's pool can ever hold.
    Unplaceable,
    /// The job's end could not be stored as it came (the database refused
    /// its output or logs): it is failed and what it produced is dropped.
    ResultUnstorable,
    /// A pod refused work from a replica that no longer leads. The leader
    /// runs the job again; a job never ends with this code.
    StaleEpoch,
    /// A pod did not understand the service's request (versions that do not
    /// match); the job was not run.
    AgentProtocol,
    /// A pod could not remove what an earlier job left. Reported by pods,
    /// never the end of a job: the pod is replaced and the job runs on
    /// another (or ends with `pod_lost` when it has no attempts left).
    WipeFailed,
}

names!(ErrorCode {
    NonzeroExit => "nonzero_exit",
    TimedOut => "timed_out",
    Cancelled => "cancelled",
    InvalidOutput => "invalid_output",
    DepsInstallFailed => "deps_install_failed",
    BindFailed => "bind_failed",
    SpawnFailed => "spawn_failed",
    DiskQuotaExceeded => "disk_quota_exceeded",
    PodLost => "pod_lost",
    PodStartFailed => "pod_start_failed",
    UnknownBundle => "unknown_bundle",
    UnknownProfile => "unknown_profile",
    Unplaceable => "unplaceable",
    ResultUnstorable => "result_unstorable",
    StaleEpoch => "stale_epoch",
    AgentProtocol => "agent_protocol",
    WipeFailed => "wipe_failed",
});

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

#[cfg(test)]
mod tests {
    use super::*;

    /// `as_str` is the serde name, and `parse` its inverse, for every value.
    fn names_agree<T>(all: &[T], name: fn(T) -> &'static str, parse: fn(&str) -> Option<T>)
    where
        T: Copy + PartialEq + std::fmt::Debug + Serialize + serde::de::DeserializeOwned,
    {
        for &v in all {
            assert_eq!(serde_json::to_value(v).unwrap(), name(v), "{v:?}");
            assert_eq!(serde_json::from_value::<T>(name(v).into()).unwrap(), v);
            assert_eq!(parse(name(v)), Some(v));
        }
        assert_eq!(parse(""), None);
        assert_eq!(parse("Queued"), None);
    }

    #[test]
    fn names_are_the_serde_names() {
        names_agree(Kind::ALL, Kind::as_str, Kind::parse);
        names_agree(State::ALL, State::as_str, State::parse);
        names_agree(Source::ALL, Source::as_str, Source::parse);
        names_agree(ErrorCode::ALL, ErrorCode::as_str, ErrorCode::parse);
        assert_eq!(ErrorCode::ALL.len(), 17);
        assert_eq!(State::TimedOut.to_string(), "timed_out");
    }

    #[test]
    fn terminal_states_never_change() {
        for &done in State::ALL.iter().filter(|s| s.is_terminal()) {
            for &next in State::ALL {
                assert!(!done.can_become(next), "{done} -> {next}");
            }
        }
        for &s in State::UNFINISHED {
            assert!(!s.is_terminal());
            assert!(!s.can_become(s), "{s} -> {s}");
        }
    }

    #[test]
    fn the_lifecycle_allows_what_the_scheduler_does() {
        use State::*;
        assert_eq!(State::before(Assigned), [Queued]);
        assert_eq!(State::before(Running), [Assigned]);
        assert_eq!(State::before(Queued), [Assigned, Running]);
        assert_eq!(State::before(Succeeded), [Assigned, Running]);
        assert_eq!(State::before(TimedOut), [Assigned, Running]);
        assert_eq!(State::before(Failed), State::UNFINISHED);
        assert_eq!(State::before(Cancelled), State::UNFINISHED);
        // A queued job cannot succeed or time out without running.
        assert!(!Queued.can_become(Succeeded) && !Queued.can_become(TimedOut));
        assert!(!Queued.can_become(Running));
    }
}
