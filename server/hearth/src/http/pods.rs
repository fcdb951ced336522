//! Pods: the record of pool decisions about each pod (why it was started,
//! promoted, assigned, released). A tenant sees a pod only if the pod ever
//! ran one of its jobs, and then only the pod's unbound events and its own.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_pod_events))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventParams {
    /// At most this many events (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    #[param(pattern = "^[0-9]{1,18}$")]
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PodEventResponse {
    pub event_id: i64,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// `start`, `ready`, `promote`, `assign`, `reset`, `release` or `gone`.
    pub kind: String,
    pub profile: String,
    pub job_id: Option<Uuid>,
    /// Why: `code` (e.g. `warm_affinity`, `standby_handover`, `cold_start`,
    /// `pod_started`, `standby_refill`, `keep_alive_expired`, `over_budget`),
    /// its figures, and `message` for people. Callers of other tenants are
    /// `null`.
    #[schema(value_type = Object)]
    pub reason: serde_json::Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PodEventsResponse {
    pub pod_id: String,
    /// Oldest first.
    pub events: Vec<PodEventResponse>,
    pub next_cursor: Option<String>,
}

/// Why a pod that served this tenant was started, promoted, assigned and
/// released. 404 for pods that never ran a job of this tenant.
#[utoipa::path(get, path = "/v1/pods/{id}/events", tag = "pods", operation_id = "list_pod_events",
    params(("id" = String, Path, pattern = r"^[^\x00]+$", description = "The pod's id (`pods` of a job)"), EventParams),
    responses((status = 200, body = PodEventsResponse),
              (status = 400, description = "`invalid_request`: a bad `limit` or `cursor`", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, description = "`not_found`: the pod never ran a job of this tenant", body = ErrorBody)))]
async fn list_pod_events(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<String>,
    Query(p): Query<EventParams>,
) -> ApiResult<Json<PodEventsResponse>> {
    let limit = p.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::InvalidRequest(
            "limit must be 1 to 1000".to_owned(),
        ));
    }
    let after = match &p.cursor {
        None => 0,
        Some(c) => Some(c)
            .filter(|c| !c.is_empty() && c.len() <= 18 && c.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|c| c.parse::<i64>().ok())
            .ok_or_else(|| ApiError::InvalidRequest("invalid cursor".to_owned()))?,
    };
    if id.contains('\0') {
        return Err(ApiError::InvalidRequest(
            "the pod id may not contain NUL".to_owned(),
        ));
    }
    if !hearth_store::pod_event::served(&state.db, tenant.tenant_id, &id).await? {
        return Err(ApiError::NotFound("pod"));
    }
    let rows =
        hearth_store::pod_event::list(&state.db, tenant.tenant_id, &id, after, limit).await?;
    let next_cursor = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|r| r.pod_event_id.to_string()))
        .flatten();
    Ok(Json(PodEventsResponse {
        pod_id: id,
        events: rows
            .into_iter()
            .map(|r| PodEventResponse {
                event_id: r.pod_event_id,
                at: r.at,
                kind: r.kind,
                profile: r.profile,
                job_id: r.job_id,
                reason: r.reason,
            })
            .collect(),
        next_cursor,
    }))
}
