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
