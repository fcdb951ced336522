//! Hardware profiles: the named pod shapes jobs ask for.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A named pod shape. All pods of a profile come from the same base image, so
/// any of them can serve any job of that profile.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Container image of the pod (used by the Kubernetes runtime).
    #[serde(default = "default_image")]
    pub image: String,
    /// CPU limit in millicores.
    #[serde(default = "default_cpu")]
    pub cpu_millis: u32,
    /// Memory limit in MiB.
    #[serde(default = "default_memory")]
    pub memory_mib: u32,
    /// Process limit of the pod.
    #[serde(default = "default_pids")]
    pub pids: u32,
    /// Disk quota of the pod's writable directories (work, input/output,
    /// dependency environments), in MiB; zero for none. A job that writes
    /// past it is killed with `disk_quota_exceeded` and the files go.
    #[serde(default = "default_disk")]
    pub disk_mib: u32,
    /// Whole GPUs per pod; zero for CPU profiles.
    #[serde(default)]
    pub gpus: u32,
    /// Whether jobs may reach the network.
    #[serde(default)]
    pub network: bool,
    /// How long a finished pod stays warm for its caller, in seconds.
    #[serde(default = "default_keep_alive")]
    pub keep_alive_s: u32,
    /// Most pods of this profile alive at once.
    #[serde(default = "default_max_pods")]
    pub max_pods: u32,
    /// Kubernetes node selector.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// The start latency the profile's pool aims at (`firepool`).
    #[serde(default)]
    pub start_objective: StartObjective,
}

/// A start-latency objective: at least `percentile` of a pool's jobs start
/// on a pod of `class`. The `firepool` policy chooses each caller's
/// keep-alive to reach it at the least GPU time the callers' pauses allow:
/// capacity goes where a caller's pauses make warm starts cheap.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartObjective {
    /// The share of jobs, above 0 and below 1: 0.9 for a p90 objective.
    #[serde(default = "default_objective_percentile")]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub percentile: f64,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub class: StartClass,
}

impl StartObjective {
    /// Whether `percentile` is above 0 and below 1.
    pub fn is_valid(&self) -> bool {
        self.percentile > 0.0 && self.percentile < 1.0
    }
}

/// `p90:warm`, `p99.5:standby`, `0.95` (a share; the class defaults to
/// `warm`): how `hearth simulate --objective` takes it.
impl std::str::FromStr for StartObjective {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (share, class) = s.split_once(':').unwrap_or((s, "warm"));
        let percentile = match share.strip_prefix('p') {
            Some(pct) => pct.parse::<f64>().map(|p| p / 100.0),
            None => share.parse::<f64>(),
        }
        .map_err(|_| format!("`{share}`: want a percentile (`p90`) or a share (`0.9`)"))?;
        let class = match class {
            "warm" => StartClass::Warm,
            "standby" => StartClass::Standby,
            c => return Err(format!("`{c}`: the class is `warm` or `standby`")),
        };
        let objective = StartObjective { percentile, class };
        if objective.is_valid() {
            Ok(objective)
        } else {
            Err(format!(
                "`{share}`: the share must be above 0 and below 1 (p90 is 0.9)"
            ))
        }
    }
}

impl Default for StartObjective {
    fn default() -> Self {
        StartObjective {
            percentile: default_objective_percentile(),
            class: StartClass::Warm,
        }
    }
}

/// Where a job must start to count within a start-latency objective.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartClass {
    /// On its caller's warm pod (a warm start, about 0.1 s).
    #[default]
    Warm,
    /// On a warm or a standby pod (a promotion at worst, about 1 s):
    /// keep-alives are then chosen by their cost alone.
    Standby,
}

fn default_objective_percentile() -> f64 {
    0.9
}

fn default_image() -> String {
    "ghcr.io/hearth/base-cpu:0.1".to_owned()
}
fn default_cpu() -> u32 {
    1000
}
fn default_memory() -> u32 {
    1024
}
fn default_pids() -> u32 {
    256
}
fn default_disk() -> u32 {
    10 * 1024
}
fn default_keep_alive() -> u32 {
    120
}
fn default_max_pods() -> u32 {
    32
}

impl Profile {
    /// A CPU profile with default limits.
    pub fn cpu(name: &str) -> Self {
        Profile {
            name: name.to_owned(),
            description: String::new(),
            image: default_image(),
            cpu_millis: default_cpu(),
            memory_mib: default_memory(),
            pids: default_pids(),
            disk_mib: default_disk(),
            gpus: 0,
            network: false,
            keep_alive_s: default_keep_alive(),
            max_pods: default_max_pods(),
            node_selector: BTreeMap::new(),
            start_objective: StartObjective::default(),
        }
    }

    /// The profiles Hearth serves when no profile file is configured.
    pub fn defaults() -> Vec<Profile> {
        vec![
            Profile {
                description: "1 CPU, 1 GiB, no network".to_owned(),
                ..Profile::cpu("cpu-small")
            },
            Profile {
                description: "2 CPUs, 4 GiB, network allowed".to_owned(),
                cpu_millis: 2000,
                memory_mib: 4096,
                network: true,
                ..Profile::cpu("cpu-net")
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_without_an_objective_aims_at_p90_warm() {
        let p: Profile = serde_json::from_str(r#"{"name": "gpu-a"}"#).unwrap();
        assert_eq!(p.start_objective, StartObjective::default());
        assert_eq!(
            (p.start_objective.percentile, p.start_objective.class),
            (0.9, StartClass::Warm)
        );
        let p: Profile = serde_json::from_str(
            r#"{"name": "gpu-a", "start_objective": {"percentile": 0.99, "class": "standby"}}"#,
        )
        .unwrap();
        assert_eq!(
            p.start_objective,
            StartObjective {
                percentile: 0.99,
                class: StartClass::Standby
            }
        );
        for bad in [
            r#"{"name": "a", "start_objective": {"percentile": 0.9, "class": "cold"}}"#,
            r#"{"name": "a", "start_objective": {"percentile": 0.9, "p": 1}}"#,
        ] {
            assert!(serde_json::from_str::<Profile>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn objectives_read_as_percentiles_or_shares() {
        let o = |s: &str| s.parse::<StartObjective>();
        assert_eq!(o("p90:warm"), Ok(StartObjective::default()));
        assert_eq!(o("p90"), Ok(StartObjective::default()));
        assert_eq!(o("0.9:warm"), Ok(StartObjective::default()));
        let p995 = o("p99.5:standby").unwrap();
        assert!((p995.percentile - 0.995).abs() < 1e-12);
        assert_eq!(p995.class, StartClass::Standby);
        for bad in [
            "p100", "p0", "1", "-0.5", "pNaN", "NaN", "p90:cold", "warm", "",
        ] {
            assert!(o(bad).is_err(), "{bad}");
        }
    }
}
