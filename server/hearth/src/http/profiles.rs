//! Hardware profiles, with what the runtime can enforce for each.

use std::collections::BTreeMap;

use axum::extract::State;
use hearth_core::{Profile, StartObjective};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::ApiResult;
use crate::http::extract::Json;
use crate::scheduler::PodCounts;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_profiles))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MechanismResponse {
    pub name: String,
    pub available: bool,
    pub detail: String,
}

// Spelled out rather than flattening `Profile`: its schema forbids unknown
// fields (profile files are parsed strictly), and an `allOf` of it would
// forbid `pods` and `warnings` too.
/// A profile as the API shows it: its definition, this service's pods of it
/// and what the runtime cannot enforce. Every field is always sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProfileResponse {
    pub name: String,
    pub description: String,
    /// Container image of the pod (used by the Kubernetes runtime).
    pub image: String,
    /// CPU limit in millicores.
    pub cpu_millis: u32,
    /// Memory limit in MiB.
    pub memory_mib: u32,
    /// Process limit of the pod.
    pub pids: u32,
    /// Disk quota of the pod's writable directories in MiB; zero for none.
    pub disk_mib: u32,
    /// Whole GPUs per pod; zero for CPU profiles.
    pub gpus: u32,
    /// Whether jobs may reach the network.
    pub network: bool,
    /// How long a finished pod stays warm for its caller, in seconds.
    pub keep_alive_s: u32,
    /// Most pods of this profile alive at once.
    pub max_pods: u32,
    /// Kubernetes node selector.
    pub node_selector: BTreeMap<String, String>,
    /// The start latency the profile's pool aims at (`firepool`).
    pub start_objective: StartObjective,
    /// This service's pods of the profile, by state.
    pub pods: PodCounts,
    /// Limits of the profile the runtime cannot enforce here.
    pub warnings: Vec<String>,
}

impl ProfileResponse {
    fn new(profile: &Profile, pods: PodCounts, warnings: Vec<String>) -> Self {
        // Destructured in full so that a new profile field fails to compile
        // here instead of going unsent or undocumented.
        let Profile {
            name,
            description,
            image,
            cpu_millis,
            memory_mib,
            pids,
            disk_mib,
            gpus,
            network,
            keep_alive_s,
            max_pods,
            node_selector,
            start_objective,
        } = profile.clone();
        ProfileResponse {
            name,
            description,
            image,
            cpu_millis,
            memory_mib,
            pids,
            disk_mib,
            gpus,
            network,
            keep_alive_s,
            max_pods,
            node_selector,
            start_objective,
            pods,
            warnings,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ListProfilesResponse {
    pub runtime: &'static str,
    /// Isolation mechanisms and whether the runtime has them on this host.
    pub mechanisms: Vec<MechanismResponse>,
    pub profiles: Vec<ProfileResponse>,
}

/// The hardware profiles jobs may name.
#[utoipa::path(get, path = "/v1/profiles", tag = "profiles", operation_id = "list_profiles",
    responses((status = 200, body = ListProfilesResponse),
              (status = 401, body = crate::error::ErrorBody)))]
async fn list_profiles(
    State(state): State<AppState>,
    _tenant: Tenant,
) -> ApiResult<Json<ListProfilesResponse>> {
    let mechanisms = state.runtime.mechanisms();
    let missing = |name: &str| mechanisms.iter().any(|m| m.name == name && !m.available);
    let mut counts = state.scheduler.pod_counts();
    let profiles = state
        .profiles
        .values()
        .map(|p| {
            let mut warnings = Vec::new();
            if missing("namespaces") {
                warnings.push("no namespace sandbox: jobs share the host's view".to_owned());
            }
            if !p.network && missing("network-isolation") {
                warnings
                    .push("network isolation unavailable: jobs can reach the network".to_owned());
            }
            if p.network && !missing("namespaces") && missing("network") {
                warnings.push(
                    "no user-mode network (slirp4netns): pods of this profile cannot start"
                        .to_owned(),
                );
            }
            if missing("unprivileged-user") {
                warnings.push("jobs run as root (without capabilities)".to_owned());
            }
            for (m, what) in [
                ("cgroup.memory", "memory"),
                ("cgroup.cpu", "CPU"),
                ("cgroup.pids", "process count"),
            ] {
                if missing(m) {
                    warnings.push(format!("{what} limit not enforced: {m} unavailable"));
                }
            }
            ProfileResponse::new(p, counts.remove(&p.name).unwrap_or_default(), warnings)
        })
        .collect();
    Ok(Json(ListProfilesResponse {
        runtime: state.runtime.name(),
        mechanisms: mechanisms
            .into_iter()
            .map(|m| MechanismResponse {
                name: m.name,
                available: m.available,
                detail: m.detail,
            })
            .collect(),
        profiles,
    }))
}
