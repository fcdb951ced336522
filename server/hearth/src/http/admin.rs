//! The admin API (admin token): tenants, their API keys and their pool
//! budgets. `hearth tenant` does the same from the command line through
//! [`create_tenant`] and friends.

use axum::extract::State;
use axum::http::StatusCode;
use hearth_store::tenant::{ApiKeyRow, TenantRow};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use time::OffsetDateTime;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::{Admin, mint_key};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_tenant_handler, list_tenants))
        .routes(routes!(rename_tenant, delete_tenant))
        .routes(routes!(create_key_handler, list_keys))
        .routes(routes!(revoke_key))
        .routes(routes!(list_budgets))
        .routes(routes!(set_budget))
}

/// Bounds of the GPUs a tenant's warm pods of one profile may hold.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRequest {
    /// The tenant keeps at least this much warm when the pool is over its
    /// budget (a multiple of 1/8 GPU, at most `ceiling_gpus`).
    #[schema(minimum = 0, maximum = 536_870_911, multiple_of = 0.125)]
    pub floor_gpus: f64,
    /// The tenant's warm pods never hold more (a multiple of 1/8 GPU).
    #[schema(minimum = 0, maximum = 536_870_911, multiple_of = 0.125)]
    pub ceiling_gpus: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetResponse {
    pub tenant_id: Uuid,
    pub profile: String,
    pub floor_gpus: f64,
    pub ceiling_gpus: f64,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

impl From<hearth_store::budget::TenantBudgetRow> for BudgetResponse {
    fn from(r: hearth_store::budget::TenantBudgetRow) -> Self {
        BudgetResponse {
            tenant_id: r.tenant_id,
            profile: r.profile,
            floor_gpus: r.floor_gpus,
            ceiling_gpus: r.ceiling_gpus,
            updated_at: r.updated_at,
        }
    }
}

/// Sets a tenant's budget in one profile's pool; applied to the live pool at
/// once and again at every start.
#[utoipa::path(put, path = "/v1/admin/tenants/{tenant_id}/budgets/{profile}", tag = "admin", operation_id = "set_budget",
    params(("tenant_id" = Uuid, Path), ("profile" = String, Path, description = "A profile of this service")),
    request_body = BudgetRequest,
    responses((status = 200, body = BudgetResponse), (status = 401, body = ErrorBody),
              (status = 404, description = "`not_found`: no such tenant", body = ErrorBody),
              (status = 422, description = "`validation_failed` (not multiples of 1/8 GPU, or the floor above the ceiling), \
`unknown_profile`", body = ErrorBody)))]
async fn set_budget(
    State(state): State<AppState>,
    _: Admin,
    Path((tenant_id, profile)): Path<(Uuid, String)>,
    Json(req): Json<BudgetRequest>,
) -> ApiResult<Json<BudgetResponse>> {
    let budget_error = |e: crate::scheduler::BudgetError| match e {
        crate::scheduler::BudgetError::UnknownProfile(p) => ApiError::UnknownProfile(p),
        crate::scheduler::BudgetError::Invalid(message) => {
            ApiError::Validation(vec![hearth_core::validate::FieldError {
                field: "floor_gpus".to_owned(),
                message,
            }])
        }
    };
    let (_, [floor_gpus, ceiling_gpus]) = state
        .scheduler
        .budget_bounds(&profile, req.floor_gpus, req.ceiling_gpus)
        .map_err(budget_error)?;
    hearth_store::tenant::get(&state.db, tenant_id)
        .await?
        .ok_or(ApiError::NotFound("tenant"))?;
    let row =
        hearth_store::budget::put(&state.db, tenant_id, &profile, floor_gpus, ceiling_gpus).await?;
    state
        .scheduler
        .set_tenant_budget(tenant_id, &profile, floor_gpus, ceiling_gpus)
        .map_err(budget_error)?;
    Ok(Json(row.into()))
}

/// A tenant's pool budgets.
#[utoipa::path(get, path = "/v1/admin/tenants/{tenant_id}/budgets", tag = "admin", operation_id = "list_budgets",
    params(("tenant_id" = Uuid, Path)),
    responses((status = 200, body = Vec<BudgetResponse>), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
async fn list_budgets(
    State(state): State<AppState>,
    _: Admin,
    Path(tenant_id): Path<Uuid>,
) -> ApiResult<Json<Vec<BudgetResponse>>> {
    hearth_store::tenant::get(&state.db, tenant_id)
        .await?
        .ok_or(ApiError::NotFound("tenant"))?;
    let rows = hearth_store::budget::list(&state.db, tenant_id).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantResponse {
    pub tenant_id: Uuid,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

impl From<TenantRow> for TenantResponse {
    fn from(r: TenantRow) -> Self {
        TenantResponse {
            tenant_id: r.tenant_id,
            name: r.name,
            created_at: r.created_at,
        }
    }
}

/// A new tenant with its first API key, shown only this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedTenantResponse {
    pub tenant_id: Uuid,
    pub name: String,
    pub api_key: String,
    pub api_key_id: Uuid,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyResponse {
    pub api_key_id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    /// Visible part of the key (`hk_<prefix>_...`), to tell keys apart.
    pub prefix: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
    /// When the key stops working; null: never.
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    /// When the key last authenticated a request, to within a minute; null:
    /// never used.
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_used_at: Option<OffsetDateTime>,
}

impl From<ApiKeyRow> for ApiKeyResponse {
    fn from(r: ApiKeyRow) -> Self {
        ApiKeyResponse {
            api_key_id: r.api_key_id,
            tenant_id: r.tenant_id,
            name: r.name,
            prefix: r.prefix,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
            expires_at: r.expires_at,
            last_used_at: r.last_used_at,
        }
    }
}

/// A new API key, shown only this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedKeyResponse {
    pub api_key_id: Uuid,
    pub name: String,
    pub prefix: String,
    /// The key itself: `Authorization: Bearer <api_key>`. Not shown again.
    pub api_key: String,
    /// When the key stops working; null: never.
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantRequest {
    /// 1..=64 characters of `[A-Za-z0-9._:@/-]`, starting alphanumeric; unique.
    #[schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$", max_length = 64)]
    pub name: String,
}

#[derive(Debug, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyRequest {
    /// A label for the key (default `default`): 1..=64 characters of
    /// `[A-Za-z0-9._:@/-]`, starting alphanumeric.
    #[schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$", max_length = 64)]
    pub name: Option<String>,
    /// When the key stops working (RFC 3339, in the future); absent or
    /// null: never.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<OffsetDateTime>,
}

/// Only from a JSON object: serde's derive would also take an array of the
/// fields in order (`[null, null]`), which the document does not allow.
impl<'de> Deserialize<'de> for CreateKeyRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Fields {
            name: Option<String>,
            #[serde(default, deserialize_with = "crate::http::extract::utc_time")]
            expires_at: Option<OffsetDateTime>,
        }
        let f: Fields = crate::http::extract::from_object(d)?;
        Ok(CreateKeyRequest {
            name: f.name,
            expires_at: f.expires_at,
        })
    }
}

fn check_name(field: &str, name: &str) -> ApiResult<()> {
    if hearth_core::validate::is_name(name, 64) {
        Ok(())
    } else {
        Err(ApiError::Validation(vec![
            hearth_core::validate::FieldError {
                field: field.to_owned(),
                message: "must be 1..=64 characters of [A-Za-z0-9._:@/-], starting alphanumeric"
                    .to_owned(),
            },
        ]))
    }
}

fn conflict(e: hearth_store::Error, what: &str) -> ApiError {
    match e {
        hearth_store::Error::Conflict(_) => ApiError::Conflict(format!("{what} already exists")),
        e => e.into(),
    }
}

/// Creates a tenant and its first API key in one transaction.
pub async fn create_tenant(db: &PgPool, name: &str) -> ApiResult<CreatedTenantResponse> {
    check_name("name", name)?;
    let mut tx = db.begin().await?;
    let tenant = hearth_store::tenant::create(&mut *tx, name)
        .await
        .map_err(|e| conflict(e, &format!("tenant `{name}`")))?;
    let key = mint_key();
    let row = hearth_store::tenant::create_key(
        &mut *tx,
        tenant.tenant_id,
        "default",
        &key.prefix,
        &key.secret_hash,
        None,
    )
    .await?;
    tx.commit().await?;
    Ok(CreatedTenantResponse {
        tenant_id: tenant.tenant_id,
        name: tenant.name,
        api_key: key.token,
        api_key_id: row.api_key_id,
    })
}

/// Mints another API key for a tenant, named `name` (default `default`),
/// valid until `expires_at` (which must be in the future) or for ever.
pub async fn create_key(
    db: &PgPool,
    tenant_id: Uuid,
    name: Option<&str>,
    expires_at: Option<OffsetDateTime>,
) -> ApiResult<CreatedKeyResponse> {
    let name = name.unwrap_or("default");
    check_name("name", name)?;
    if expires_at.is_some_and(|t| t <= OffsetDateTime::now_utc()) {
        return Err(ApiError::Validation(vec![
            hearth_core::validate::FieldError {
                field: "expires_at".to_owned(),
                message: "must be in the future".to_owned(),
            },
        ]));
    }
    hearth_store::tenant::get(db, tenant_id)
        .await?
        .ok_or(ApiError::NotFound("tenant"))?;
    let key = mint_key();
    let row = hearth_store::tenant::create_key(
        db,
        tenant_id,
        name,
        &key.prefix,
        &key.secret_hash,
        expires_at,
    )
    .await?;
    Ok(CreatedKeyResponse {
        api_key_id: row.api_key_id,
        name: row.name,
        prefix: row.prefix,
        api_key: key.token,
        expires_at: row.expires_at,
    })
}

/// Creates a tenant with its first API key (shown once).
#[utoipa::path(post, path = "/v1/admin/tenants", tag = "admin", operation_id = "create_tenant",
    request_body = TenantRequest,
    responses((status = 201, body = CreatedTenantResponse), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody),
              (status = 409, description = "`conflict`: a tenant has this name", body = ErrorBody),
              (status = 422, body = ErrorBody)))]
async fn create_tenant_handler(
    State(state): State<AppState>,
    _: Admin,
    Json(req): Json<TenantRequest>,
) -> ApiResult<(StatusCode, Json<CreatedTenantResponse>)> {
    Ok((
        StatusCode::CREATED,
        Json(create_tenant(&state.db, &req.name).await?),
    ))
}

/// Every tenant.
#[utoipa::path(get, path = "/v1/admin/tenants", tag = "admin", operation_id = "list_tenants",
    responses((status = 200, body = Vec<TenantResponse>), (status = 401, body = ErrorBody)))]
async fn list_tenants(
    State(state): State<AppState>,
    _: Admin,
) -> ApiResult<Json<Vec<TenantResponse>>> {
    let rows = hearth_store::tenant::list(&state.db).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}

/// Renames a tenant.
#[utoipa::path(patch, path = "/v1/admin/tenants/{tenant_id}", tag = "admin", operation_id = "rename_tenant",
    params(("tenant_id" = Uuid, Path)), request_body = TenantRequest,
    responses((status = 200, body = TenantResponse), (status = 404, description = "`not_found`: no such tenant", body = ErrorBody),
              (status = 409, description = "`conflict`: another tenant has this name", body = ErrorBody)))]
async fn rename_tenant(
    State(state): State<AppState>,
    _: Admin,
    Path(tenant_id): Path<Uuid>,
    Json(req): Json<TenantRequest>,
) -> ApiResult<Json<TenantResponse>> {
    check_name("name", &req.name)?;
    let row = hearth_store::tenant::rename(&state.db, tenant_id, &req.name)
        .await
        .map_err(|e| conflict(e, &format!("tenant `{}`", req.name)))?
        .ok_or(ApiError::NotFound("tenant"))?;
    Ok(Json(row.into()))
}

/// Deletes a tenant with its keys, bundles and jobs.
#[utoipa::path(delete, path = "/v1/admin/tenants/{tenant_id}", tag = "admin", operation_id = "delete_tenant",
    params(("tenant_id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
async fn delete_tenant(
    State(state): State<AppState>,
    _: Admin,
    Path(tenant_id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    if !hearth_store::tenant::delete(&state.db, tenant_id).await? {
        return Err(ApiError::NotFound("tenant"));
    }
    state.auth.forget_keys();
    Ok(StatusCode::NO_CONTENT)
}

/// Mints an API key for a tenant (shown once).
#[utoipa::path(post, path = "/v1/admin/tenants/{tenant_id}/keys", tag = "admin", operation_id = "create_key",
    params(("tenant_id" = Uuid, Path)), request_body = CreateKeyRequest,
    responses((status = 201, body = CreatedKeyResponse), (status = 404, body = ErrorBody)))]
async fn create_key_handler(
    State(state): State<AppState>,
    _: Admin,
    Path(tenant_id): Path<Uuid>,
    Json(req): Json<CreateKeyRequest>,
) -> ApiResult<(StatusCode, Json<CreatedKeyResponse>)> {
    let key = create_key(&state.db, tenant_id, req.name.as_deref(), req.expires_at).await?;
    Ok((StatusCode::CREATED, Json(key)))
}

/// A tenant's API keys (never their secrets).
#[utoipa::path(get, path = "/v1/admin/tenants/{tenant_id}/keys", tag = "admin", operation_id = "list_keys",
    params(("tenant_id" = Uuid, Path)),
    responses((status = 200, body = Vec<ApiKeyResponse>), (status = 404, body = ErrorBody)))]
async fn list_keys(
    State(state): State<AppState>,
    _: Admin,
    Path(tenant_id): Path<Uuid>,
) -> ApiResult<Json<Vec<ApiKeyResponse>>> {
    hearth_store::tenant::get(&state.db, tenant_id)
        .await?
        .ok_or(ApiError::NotFound("tenant"))?;
    let rows = hearth_store::tenant::list_keys(&state.db, tenant_id).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}

/// Revokes an API key; requests with it get 401 from then on.
#[utoipa::path(delete, path = "/v1/admin/tenants/{tenant_id}/keys/{api_key_id}", tag = "admin", operation_id = "revoke_key",
    params(("tenant_id" = Uuid, Path), ("api_key_id" = Uuid, Path)),
    responses((status = 200, body = ApiKeyResponse), (status = 404, body = ErrorBody)))]
async fn revoke_key(
    State(state): State<AppState>,
    _: Admin,
    Path((tenant_id, api_key_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<Json<ApiKeyResponse>> {
    let row = hearth_store::tenant::revoke_key(&state.db, tenant_id, api_key_id)
        .await?
        .ok_or(ApiError::NotFound("API key"))?;
    state.auth.forget_keys();
    Ok(Json(row.into()))
}
