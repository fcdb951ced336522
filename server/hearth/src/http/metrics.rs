//! `GET /metrics`: Prometheus text exposition (see [`crate::metrics`] for
//! the catalogue). No credentials, like `/healthz`.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_metrics))
}

/// Metrics in the Prometheus text format: jobs by start source, start
/// latency by source, pods by state, GPU-seconds held by pod state, budget
/// and queue depth.
#[utoipa::path(get, path = "/metrics", tag = "health", operation_id = "get_metrics", security(()),
    responses((status = 200, description = "Prometheus text exposition (version 0.0.4)",
               content_type = "text/plain", body = String)))]
async fn get_metrics(State(state): State<AppState>) -> impl IntoResponse {
    let text = state.metrics.render(&state.scheduler.pool_gauges());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}
