//! `GET /metrics`: the Prometheus exposition (see [`crate::metrics`] for the
//! catalogue). No credentials, like `/healthz`.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;
use crate::metrics::Format;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_metrics))
}

/// The service's metrics, for Prometheus.
///
/// Jobs by start source, start latency by source (with the trace of a job in
/// each bucket as an exemplar), pods by state, GPU-seconds held by pod
/// state, budget and queue depth. OpenMetrics text when `Accept` lists
/// `application/openmetrics-text`, else the Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "health", operation_id = "get_metrics", security(()),
    responses((status = 200, description = "The Prometheus text exposition (version 0.0.4), or OpenMetrics 1.0.0 text with exemplars when `Accept` asks for `application/openmetrics-text`",
               content((String = "text/plain"), (String = "application/openmetrics-text")))))]
async fn get_metrics(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let text = state.metrics.render(&state.scheduler.pool_gauges(), format);
    (
        [
            (header::CONTENT_TYPE, format.content_type()),
            (header::VARY, "accept"),
        ],
        text,
    )
}
