//! Liveness of the service and its database.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;
use crate::http::extract::Json;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_health))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthResponse {
    /// `ok` or `degraded`.
    pub status: &'static str,
    /// `ok` or the reason the database is unreachable.
    pub database: String,
    /// The runtime pods come from (`local`, `kubernetes`).
    pub runtime: &'static str,
}

/// Liveness: 200 when the database answers, 503 otherwise.
#[utoipa::path(get, path = "/healthz", tag = "health", operation_id = "get_health", security(()),
    responses((status = 200, body = HealthResponse), (status = 503, body = HealthResponse)))]
async fn get_health(State(state): State<AppState>) -> (StatusCode, Json<HealthResponse>) {
    let db = sqlx::query_scalar::<_, i32>("select 1")
        .fetch_one(&state.db)
        .await;
    let (code, status, database) = match db {
        Ok(_) => (StatusCode::OK, "ok", "ok".to_owned()),
        Err(e) => {
            tracing::warn!(error = %e, "health check: database unreachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "degraded",
                "unreachable".to_owned(),
            )
        }
    };
    (
        code,
        Json(HealthResponse {
            status,
            database,
            runtime: state.runtime.name(),
        }),
    )
}
