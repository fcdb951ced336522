//! A tenant's own API keys: mint one (shown once, optionally expiring),
//! list them with when each was last used, revoke one. The admin API does
//! the same for any tenant.

use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::admin::{ApiKeyResponse, CreateKeyRequest, CreatedKeyResponse, create_key};
use crate::http::extract::{Json, Path};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_own_key, list_own_keys))
        .routes(routes!(revoke_own_key))
}

/// Mints an API key for the caller's tenant.
///
/// The key is in the answer and nowhere else: store it now. It works until
/// it is revoked or its `expires_at` passes.
#[utoipa::path(post, path = "/v1/keys", tag = "keys", operation_id = "create_own_key",
    request_body = CreateKeyRequest,
    responses((status = 201, description = "The new key, shown this once", body = CreatedKeyResponse),
              (status = 422, description = "`validation_failed`: a bad name, or an expiry not in the future", body = ErrorBody)))]
async fn create_own_key(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateKeyRequest>,
) -> ApiResult<(StatusCode, Json<CreatedKeyResponse>)> {
    let key = create_key(
        &state.db,
        tenant.tenant_id,
        req.name.as_deref(),
        req.expires_at,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(key)))
}

/// The caller's tenant's API keys, oldest first (never their secrets).
///
/// Revoked and expired keys are listed too, with when that happened, and
/// each key says when it last authenticated a request (to within a minute).
#[utoipa::path(get, path = "/v1/keys", tag = "keys", operation_id = "list_own_keys",
    responses((status = 200, description = "Every key of the tenant", body = Vec<ApiKeyResponse>)))]
async fn list_own_keys(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Json<Vec<ApiKeyResponse>>> {
    let rows = hearth_store::tenant::list_keys(&state.db, tenant.tenant_id).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}

/// Revokes one of the caller's tenant's API keys.
///
/// Requests with it get 401 from then on (on other replicas within 2 s,
/// how long a replica trusts a key it checked). The key that makes this
/// request may revoke itself. Revoking twice keeps the first time.
#[utoipa::path(delete, path = "/v1/keys/{api_key_id}", tag = "keys", operation_id = "revoke_own_key",
    params(("api_key_id" = Uuid, Path, description = "The key's id, from `GET /v1/keys`")),
    responses((status = 200, description = "The key, revoked", body = ApiKeyResponse),
              (status = 404, description = "`not_found`: the tenant has no such key", body = ErrorBody)))]
async fn revoke_own_key(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(api_key_id): Path<Uuid>,
) -> ApiResult<Json<ApiKeyResponse>> {
    let row = hearth_store::tenant::revoke_key(&state.db, tenant.tenant_id, api_key_id)
        .await?
        .ok_or(ApiError::NotFound("API key"))?;
    state.auth.forget_keys();
    Ok(Json(row.into()))
}
