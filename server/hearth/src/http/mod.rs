//! The HTTP API, one module per resource. Every handler is documented with
//! `#[utoipa::path]` and registered through `utoipa-axum`, so the OpenAPI
//! document cannot miss a route.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::app::AppState;

pub mod admin;
pub mod batch;
pub mod bundles;
mod contract;
pub mod control;
pub mod extract;
pub mod health;
pub mod jobs;
pub mod keys;
pub mod metrics;
pub mod pods;
pub mod pools;
pub mod profiles;
pub mod session;
pub mod usage;

#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "Hearth",
        description = "Execution service for AI agents and RL trainers: tool calls, verifiers and rollouts on warm, isolated pods.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    servers(
        (url = "/", description = "The service that serves this document (`hearth serve` listens on `HEARTH_LISTEN`, 127.0.0.1:8080 by default)"),
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    components(schemas(crate::error::ErrorBody)),
    tags(
        (name = "jobs", description = "Submit, watch, list and cancel jobs"),
        (name = "bundles", description = "Upload code once, reference it by digest"),
        (name = "session", description = "The web console's sign-in: an API key exchanged for an HttpOnly session cookie and a CSRF token"),
        (name = "keys", description = "A tenant's own API keys: mint, list with last use, revoke"),
        (name = "usage", description = "A tenant's jobs, job-seconds and GPU-seconds over a window"),
        (name = "profiles", description = "Hardware profiles and the runtime's isolation"),
        (name = "pools", description = "Pools of pods per profile: standby, warm pods, GPU shares, budgets, keep-alive"),
        (name = "pods", description = "Why each pod was started, promoted, assigned and released"),
        (name = "control", description = "Ready-cohort control: versioned policies, events batched per route by deadline, sessions, live A, R_A, F, P*, U"),
        (name = "admin", description = "Tenants, API keys and pool budgets (admin token)"),
        (name = "health", description = "Liveness and metrics"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key (`hk_...`), a JWT from the configured issuer, or for `/v1/admin` the admin token",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                crate::auth::SESSION_COOKIE,
                "The web console's session (`POST /v1/session`). Every tenant operation (not the admin API) takes it in place of the bearer token; a request that is not a GET, HEAD or OPTIONS must then also carry the session's `X-CSRF-Token`, or gets 403 `csrf`",
            ))),
        );
    }
}

/// Every route with its documentation, the document-wide rules applied
/// (see [`contract`]).
pub fn api() -> OpenApiRouter<AppState> {
    let mut api = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(jobs::router())
        .merge(batch::router())
        .merge(bundles::router())
        .merge(keys::router())
        .merge(session::router())
        .merge(usage::router())
        .merge(profiles::router())
        .merge(pools::router())
        .merge(pods::router())
        .merge(control::router())
        .merge(metrics::router())
        .merge(admin::router())
        .merge(health::router());
    contract::Contract.modify(api.get_openapi_mut());
    api
}

/// The OpenAPI document, as `hearth openapi` prints it: every object's keys
/// sorted, so that the same document is the same bytes on every run (schema
/// extensions are a hash map, whose order varies from run to run).
pub fn openapi_json() -> String {
    let (_, doc) = api().split_for_parts();
    let sorted = serde_json::to_value(&doc).expect("the OpenAPI document serializes");
    serde_json::to_string_pretty(&sorted).expect("a JSON value serializes")
}
