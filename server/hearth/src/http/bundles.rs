//! Code bundles: upload a set of files once, then submit jobs with
//! `"code": {"bundle": "sha256:..."}`.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use hearth_core::validate::{FILE_IN_THE_WAY, FieldError, check_path, files_in_the_way};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::Json;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_bundle))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBundleRequest {
    /// Relative path -> UTF-8 content: 1..=256 files.
    #[schema(schema_with = hearth_core::openapi::bundle_files)]
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BundleResponse {
    /// `sha256:<hex>` of the bundle's canonical JSON; use it as `code.bundle`.
    pub bundle: String,
    pub files: usize,
    pub size_bytes: usize,
}

/// Uploads a bundle. Uploading the same files again returns the same digest.
#[utoipa::path(post, path = "/v1/bundles", tag = "bundles", operation_id = "create_bundle",
    request_body = CreateBundleRequest,
    responses((status = 201, body = BundleResponse), (status = 413, body = ErrorBody),
              (status = 422, body = ErrorBody)))]
async fn create_bundle(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateBundleRequest>,
) -> ApiResult<(StatusCode, Json<BundleResponse>)> {
    let limits = &state.limits;
    let mut errors = Vec::new();
    if req.files.is_empty() || req.files.len() > limits.max_files {
        errors.push(FieldError {
            field: "files".into(),
            message: format!("must hold 1..={} files", limits.max_files),
        });
    }
    let mut size = 0usize;
    for (path, content) in &req.files {
        size += path.len() + content.len();
        if let Err(m) = check_path(path, limits.max_path_len) {
            errors.push(FieldError {
                field: format!("files.{path}"),
                message: m.into(),
            });
        } else if content.contains('\0') {
            errors.push(FieldError {
                field: format!("files.{path}"),
                message: "content may not contain NUL".into(),
            });
        }
    }
    for path in files_in_the_way(&req.files) {
        errors.push(FieldError {
            field: format!("files.{path}"),
            message: FILE_IN_THE_WAY.into(),
        });
    }
    if size > limits.max_code_bytes {
        errors.push(FieldError {
            field: "files".into(),
            message: format!("at most {} bytes in all", limits.max_code_bytes),
        });
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let files = serde_json::to_value(&req.files).map_err(|e| ApiError::Internal(e.into()))?;
    // A BTreeMap serializes with sorted keys: the same files give the same bytes.
    let canonical = serde_json::to_vec(&files).map_err(|e| ApiError::Internal(e.into()))?;
    let digest = format!("sha256:{}", hearth_core::sha256_hex(&canonical));
    hearth_store::bundle::put(&state.db, tenant.tenant_id, &digest, &files, size as i64).await?;
    Ok((
        StatusCode::CREATED,
        Json(BundleResponse {
            bundle: digest,
            files: req.files.len(),
            size_bytes: size,
        }),
    ))
}
