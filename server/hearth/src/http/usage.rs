//! A tenant's usage over a window: its jobs by state and by source, and the
//! job-seconds and GPU-seconds they ran, by profile.

use std::collections::BTreeMap;

use axum::extract::State;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Query};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_usage))
}

/// The longest window a usage query may cover: 90 days.
const MAX_WINDOW_S: u32 = 90 * 24 * 3600;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageParams {
    /// The window: jobs accepted in the last `window_s` seconds (default
    /// 86400, a day; at most 90 days).
    #[param(minimum = 1, maximum = 7776000)]
    pub window_s: Option<u32>,
}

/// One profile's share of the usage.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProfileUsage {
    pub profile: String,
    pub jobs: i64,
    /// Seconds the jobs ran (a gang counts once).
    pub job_seconds: f64,
    /// GPU-seconds they held while running: run time times the profile's
    /// GPUs per pod times the job's pods. Zero for CPU profiles.
    pub gpu_seconds: f64,
}

/// A tenant's usage in a window.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageResponse {
    pub window_s: u32,
    /// The window's start: jobs accepted at or after it count.
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// Jobs accepted in the window.
    pub jobs: i64,
    /// Those jobs by state (`queued`, ..., `cancelled`); states with none are absent.
    pub by_state: BTreeMap<String, i64>,
    /// Those that got pods by where the pods came from (`warm`, `standby`,
    /// `cold`); jobs that never got one are not counted here.
    pub by_source: BTreeMap<String, i64>,
    /// By profile, by name.
    pub profiles: Vec<ProfileUsage>,
}

/// The caller's tenant's usage over a window.
///
/// Counts the jobs accepted in the last `window_s` seconds by state and by
/// source, and the job-seconds and GPU-seconds they ran per profile (a job
/// still running counts what it ran once it ends).
#[utoipa::path(get, path = "/v1/usage", tag = "usage", operation_id = "get_usage",
    params(UsageParams),
    responses((status = 200, description = "The tenant's usage", body = UsageResponse),
              (status = 400, description = "`invalid_request`: `window_s` out of range", body = ErrorBody)))]
async fn get_usage(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(p): Query<UsageParams>,
) -> ApiResult<Json<UsageResponse>> {
    let window_s = p.window_s.unwrap_or(86_400);
    if !(1..=MAX_WINDOW_S).contains(&window_s) {
        return Err(ApiError::InvalidRequest(format!(
            "`window_s` must be 1..={MAX_WINDOW_S}"
        )));
    }
    let since = OffsetDateTime::now_utc() - time::Duration::seconds(i64::from(window_s));
    let rows = hearth_store::job::usage(&state.db, tenant.tenant_id, since).await?;
    let mut usage = UsageResponse {
        window_s,
        since,
        jobs: 0,
        by_state: BTreeMap::new(),
        by_source: BTreeMap::new(),
        profiles: Vec::new(),
    };
    let mut profiles: BTreeMap<String, ProfileUsage> = BTreeMap::new();
    for r in rows {
        usage.jobs += r.jobs;
        *usage
            .by_state
            .entry(r.state.as_str().to_owned())
            .or_default() += r.jobs;
        if let Some(source) = r.source {
            *usage
                .by_source
                .entry(source.as_str().to_owned())
                .or_default() += r.jobs;
        }
        // A profile removed since counts its jobs, with no GPUs known.
        let gpus = state.profiles.get(&r.profile).map_or(0, |p| p.gpus);
        let p = profiles
            .entry(r.profile.clone())
            .or_insert_with(|| ProfileUsage {
                profile: r.profile,
                jobs: 0,
                job_seconds: 0.0,
                gpu_seconds: 0.0,
            });
        p.jobs += r.jobs;
        p.job_seconds += r.run_ms / 1000.0;
        p.gpu_seconds += r.pod_run_ms / 1000.0 * f64::from(gpus);
    }
    usage.profiles = profiles.into_values().collect();
    Ok(Json(usage))
}
