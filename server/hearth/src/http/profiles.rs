//! Hardware profiles, with what the runtime can enforce for each.

use axum::extract::State;
use hearth_core::Profile;
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

#[derive(Debug, Serialize, ToSchema)]
pub struct ProfileResponse {
    #[serde(flatten)]
    pub profile: Profile,
    /// This service's pods of the profile, by state.
    pub pods: PodCounts,
    /// Limits of the profile the runtime cannot enforce here.
    pub warnings: Vec<String>,
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
            for (m, what) in [
                ("cgroup.memory", "memory"),
                ("cgroup.cpu", "CPU"),
                ("cgroup.pids", "process count"),
            ] {
                if missing(m) {
                    warnings.push(format!("{what} limit not enforced: {m} unavailable"));
                }
            }
            ProfileResponse {
                pods: counts.remove(&p.name).unwrap_or_default(),
                profile: p.clone(),
                warnings,
            }
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
