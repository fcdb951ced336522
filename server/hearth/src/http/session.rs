//! Web console sessions: sign in with an API key, get an `HttpOnly`,
//! `SameSite=Strict` cookie and a CSRF token; sign out ends the session.
//! The API key itself never reaches the browser's storage.

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{AppendHeaders, IntoResponse};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::{Authenticator, SESSION_COOKIE, Session, mint_session};
use crate::error::{ApiResult, ErrorBody};
use crate::http::extract::Json;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(sign_in, get_session, sign_out))
}

/// Sign-in: the API key to open a session with.
#[derive(Debug, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignInRequest {
    /// An API key of the tenant (`hk_...`), unrevoked and unexpired.
    #[schema(max_length = 256)]
    pub api_key: String,
}

impl<'de> Deserialize<'de> for SignInRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Fields {
            api_key: String,
        }
        let f: Fields = crate::http::extract::from_object(d)?;
        Ok(SignInRequest { api_key: f.api_key })
    }
}

/// A console session: whose it is, when it ends, and the token every
/// request that changes something must carry in `X-CSRF-Token`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsoleSession {
    pub tenant_id: Uuid,
    pub tenant_name: String,
    /// The key the session was opened with: revoking it ends the session.
    pub api_key_id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: OffsetDateTime,
    /// Send it as `X-CSRF-Token` with every request that is not a `GET`,
    /// `HEAD` or `OPTIONS`. Keep it in memory: `GET /v1/session` gives it
    /// again after a reload.
    pub csrf_token: String,
}

impl ConsoleSession {
    fn new(row: &hearth_store::session::SessionRow, csrf_token: String) -> Self {
        ConsoleSession {
            tenant_id: row.tenant_id,
            tenant_name: row.tenant_name.clone(),
            api_key_id: row.api_key_id,
            expires_at: row.expires_at,
            csrf_token,
        }
    }
}

/// The `Set-Cookie` value: `HttpOnly` (no script reads it), `SameSite=Strict`
/// (no other site's page sends it), for the whole origin, ending with the
/// session; `Secure` where the console is reached over HTTPS.
fn cookie(state: &AppState, headers: &HeaderMap, value: &str, max_age_s: i64) -> HeaderValue {
    let https = state.config.secure_cookies
        || headers
            .get("x-forwarded-proto")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    let secure = if https { "; Secure" } else { "" };
    HeaderValue::try_from(format!(
        "{SESSION_COOKIE}={value}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Strict{secure}"
    ))
    .expect("a session cookie is visible ASCII")
}

/// Signs in to the web console.
///
/// Exchanges an API key for a session cookie (`hearth_session`, `HttpOnly`,
/// `SameSite=Strict`) that authenticates the tenant's requests in place of
/// the key, and a CSRF token for the requests that change something. The
/// session lasts `HEARTH_SESSION_TTL_S` seconds (an hour by default), and
/// ends sooner on sign-out or when the key is revoked or expires.
#[utoipa::path(post, path = "/v1/session", tag = "session", operation_id = "sign_in",
    security(()),
    request_body = SignInRequest,
    responses((status = 201, description = "Signed in; the cookie is set", body = ConsoleSession,
               headers(("Set-Cookie" = String, description = "`hearth_session=...; Path=/; Max-Age=...; HttpOnly; SameSite=Strict`"))),
              (status = 401, description = "`unauthorized`: the key is malformed, unknown, revoked or expired", body = ErrorBody)))]
async fn sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(req): Json<SignInRequest>,
) -> ApiResult<impl IntoResponse> {
    let key = Authenticator::verify_key(&state.db, req.api_key.trim()).await?;
    let now = OffsetDateTime::now_utc();
    let mut expires_at = now + time::Duration::seconds(state.config.session_ttl_s.into());
    if let Some(key_expires) = key.expires_at {
        expires_at = expires_at.min(key_expires);
    }
    let minted = mint_session(Uuid::now_v7());
    let row = hearth_store::session::create(
        &state.db,
        minted.session_id,
        key.api_key_id,
        &minted.secret_hash,
        expires_at,
    )
    .await?;
    let max_age = (expires_at - now).whole_seconds().max(1);
    tracing::info!(tenant = %row.tenant_id, api_key_id = %key.api_key_id, "console sign-in");
    Ok((
        StatusCode::CREATED,
        AppendHeaders([
            (
                SET_COOKIE,
                cookie(&state, &headers, &minted.cookie, max_age),
            ),
            (CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ]),
        Json(ConsoleSession::new(&row, minted.csrf_token)),
    ))
}

/// The signed-in console session.
///
/// Answers with the session's CSRF token, so a reloaded page can act again
/// without asking for the key.
#[utoipa::path(get, path = "/v1/session", tag = "session", operation_id = "get_console_session",
    security(("session" = [])),
    responses((status = 200, description = "The session the cookie names", body = ConsoleSession)))]
async fn get_session(session: Session) -> impl IntoResponse {
    (
        [(CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        Json(ConsoleSession::new(&session.row, session.csrf_token)),
    )
}

/// Signs out of the web console.
///
/// Ends the session on every replica at once and clears the cookie. Needs
/// the session's `X-CSRF-Token`.
#[utoipa::path(delete, path = "/v1/session", tag = "session", operation_id = "sign_out",
    security(("session" = [])),
    responses((status = 204, description = "Signed out; the cookie is cleared"),
              (status = 403, description = "`csrf`: no `X-CSRF-Token`, or not this session's", body = ErrorBody)))]
async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    session: Session,
) -> ApiResult<impl IntoResponse> {
    hearth_store::session::revoke(&state.db, session.row.session_id).await?;
    Ok((
        StatusCode::NO_CONTENT,
        [(SET_COOKIE, cookie(&state, &headers, "", 0))],
    ))
}
