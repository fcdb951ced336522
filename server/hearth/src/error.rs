//! HTTP errors: `{"code": "...", "message": "..."}` with a stable code table.
//!
//! | code | status | meaning |
//! |---|---|---|
//! | `invalid_request` | 400 | the body, query or path could not be parsed |
//! | `unauthorized` | 401 | missing, unknown, revoked or expired credentials |
//! | `forbidden` | 403 | the credentials may not do this (e.g. admin API) |
//! | `csrf` | 403 | a console session's request changes something without its `X-CSRF-Token` |
//! | `not_found` | 404 | no such resource for this tenant, or no such path |
//! | `method_not_allowed` | 405 | the path does not take this method (`Allow` lists those it takes) |
//! | `conflict` | 409 | a name or resource already exists, or is in use (a control session with events in flight) |
//! | `idempotency_conflict` | 409 | `Idempotency-Key` reused with another body |
//! | `job_finished` | 409 | the job already reached a final state |
//! | `limit_reached` | 409 | the tenant holds as many of these as it may (control sessions); delete some first |
//! | `payload_too_large` | 413 | the body exceeds the configured limit |
//! | `unsupported_media_type` | 415 | the body is not `application/json`, or is in a content coding |
//! | `validation_failed` | 422 | fields failed validation (`details` lists them) |
//! | `unknown_profile` | 422 | the job names a profile this service does not have |
//! | `unknown_bundle` | 422 | the job names a bundle this tenant did not upload |
//! | `invalid_policy` | 422 | a control policy failed validation (the message says where) |
//! | `unavailable` | 503 | a dependency (database) is unavailable; retry |
//! | `internal` | 500 | a bug; the cause is logged, never returned |

use axum::Json;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use hearth_core::validate::FieldError;
use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable, machine-readable code (see the table in the README).
    pub code: &'static str,
    /// Human-readable explanation.
    pub message: String,
    /// Per-field problems, for `validation_failed`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<FieldError>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(&'static str),
    #[error(
        "a request made with a console session cookie must carry the session's CSRF token in `X-CSRF-Token`"
    )]
    Csrf,
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("no route for `{0}`")]
    NoRoute(String),
    #[error("method {0} is not allowed here; the `Allow` header lists those that are")]
    MethodNotAllowed(Method),
    #[error("{0}")]
    Conflict(String),
    #[error("Idempotency-Key was already used with a different request")]
    IdempotencyConflict,
    /// Item `.0` of a batch: its key was used with another job.
    #[error(
        "jobs[{0}].idempotency_key was already used with a different job: nothing was accepted"
    )]
    BatchIdempotencyConflict(usize),
    #[error("job already finished")]
    JobFinished,
    #[error("{0}")]
    LimitReached(String),
    #[error("request body exceeds the limit")]
    PayloadTooLarge,
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error("unknown profile `{0}`")]
    UnknownProfile(String),
    #[error("unknown bundle `{0}`; upload it with POST /v1/bundles")]
    UnknownBundle(String),
    #[error("{0}")]
    InvalidPolicy(String),
    #[error("service temporarily unavailable")]
    Unavailable(#[source] anyhow::Error),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "invalid_request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::Csrf => "csrf",
            ApiError::NotFound(_) | ApiError::NoRoute(_) => "not_found",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::Conflict(_) => "conflict",
            ApiError::IdempotencyConflict | ApiError::BatchIdempotencyConflict(_) => {
                "idempotency_conflict"
            }
            ApiError::JobFinished => "job_finished",
            ApiError::LimitReached(_) => "limit_reached",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Validation(_) => "validation_failed",
            ApiError::UnknownProfile(_) => "unknown_profile",
            ApiError::UnknownBundle(_) => "unknown_bundle",
            ApiError::InvalidPolicy(_) => "invalid_policy",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::Csrf => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) | ApiError::NoRoute(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_)
            | ApiError::IdempotencyConflict
            | ApiError::BatchIdempotencyConflict(_)
            | ApiError::JobFinished
            | ApiError::LimitReached(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Validation(_)
            | ApiError::UnknownProfile(_)
            | ApiError::UnknownBundle(_)
            | ApiError::InvalidPolicy(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let ApiError::Internal(e) | ApiError::Unavailable(e) = &self {
            // Logged once, inside the request's span; never sent to the client.
            tracing::error!(error = ?e, "request failed");
        }
        let details = match &self {
            ApiError::Validation(d) => d
                .iter()
                .map(|d| FieldError {
                    field: clip(d.field.clone()),
                    message: clip(d.message.clone()),
                })
                .collect(),
            _ => Vec::new(),
        };
        let body = ErrorBody {
            code: self.code(),
            message: clip(self.to_string()),
            details,
        };
        (status, Json(body)).into_response()
    }
}

/// The most of an error's message (or field) an answer carries: messages
/// quote the input they refuse (a path, a value, a name), and a request's
/// mistake should not come back at its own length.
const MAX_MESSAGE: usize = 1024;

/// `s`, cut to [`MAX_MESSAGE`] bytes (between characters) and marked cut.
fn clip(mut s: String) -> String {
    if s.len() > MAX_MESSAGE {
        s.truncate(s.floor_char_boundary(MAX_MESSAGE));
        s.push('\u{2026}');
    }
    s
}

impl From<hearth_store::Error> for ApiError {
    fn from(e: hearth_store::Error) -> Self {
        match e {
            hearth_store::Error::Conflict(what) => {
                ApiError::Conflict(format!("conflict on {what}"))
            }
            hearth_store::Error::IdempotencyMismatch => ApiError::IdempotencyConflict,
            hearth_store::Error::Database(
                sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed,
            ) => ApiError::Unavailable(anyhow::Error::new(e)),
            hearth_store::Error::Database(sqlx::Error::Database(ref db))
                if db.code().as_deref().is_some_and(is_unavailable) =>
            {
                ApiError::Unavailable(anyhow::Error::new(e))
            }
            other => ApiError::Internal(anyhow::Error::new(other)),
        }
    }
}

impl From<crate::control::Stopped> for ApiError {
    fn from(e: crate::control::Stopped) -> Self {
        ApiError::Unavailable(e.into())
    }
}

impl From<crate::control::Error> for ApiError {
    fn from(e: crate::control::Error) -> Self {
        match e {
            crate::control::Error::Store(e) => e.into(),
            crate::control::Error::Stopped(e) => e.into(),
            crate::control::Error::SessionLimit(e) => ApiError::LimitReached(e.to_string()),
            e @ crate::control::Error::StoredPolicy { .. } => ApiError::Internal(e.into()),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        hearth_store::Error::from(e).into()
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(r: axum::extract::rejection::JsonRejection) -> Self {
        use axum::extract::rejection::JsonRejection as J;
        match r {
            J::MissingJsonContentType(_) => {
                ApiError::UnsupportedMediaType("expected `Content-Type: application/json`".into())
            }
            r if r.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
            // Well-formed JSON of the wrong shape: a missing, unknown or
            // mistyped field.
            J::JsonDataError(e) => ApiError::Validation(vec![FieldError {
                field: "body".to_owned(),
                message: e.body_text(),
            }]),
            r => ApiError::InvalidRequest(r.body_text()),
        }
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(r: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::InvalidRequest(r.body_text())
    }
}

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(r: axum::extract::rejection::PathRejection) -> Self {
        ApiError::InvalidRequest(r.body_text())
    }
}

/// Whether a Postgres error code says the server cannot serve now, not that
/// the statement is wrong: connection exceptions (class 08), too many
/// connections, and a server shutting down or starting up.
fn is_unavailable(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "53300" | "57P01" | "57P02" | "57P03")
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The answer to a path no route matches (the router's fallback).
pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::NoRoute(uri.path().to_owned())
}

/// The answer to a method a route does not take (the router's
/// method-not-allowed fallback); the router adds the `Allow` header.
pub async fn method_not_allowed(method: Method) -> ApiError {
    ApiError::MethodNotAllowed(method)
}

/// The response to a handler that panicked: a plain `internal` error. The
/// panic itself is logged.
pub fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(non-string panic)");
    ApiError::Internal(anyhow::anyhow!("handler panicked: {what}")).into_response()
}
