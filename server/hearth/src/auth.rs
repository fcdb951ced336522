//! Authentication: tenants present an API key (`hk_<prefix>_<secret>`, stored
//! only as a SHA-256 hash) or a JWT from the configured issuer; operators
//! present the admin token. The web console signs in with an API key and
//! then presents a session cookie instead (see [`SESSION_COOKIE`]), with a
//! CSRF token on every request that changes something.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use secrecy::ExposeSecret;
use sha2::Digest;
use uuid::Uuid;

use crate::app::AppState;
use crate::config::{Config, JwtAlgorithm};
use crate::error::ApiError;

/// How long a verified key is trusted without asking the database again. A
/// revocation through this replica takes effect at once; through another one
/// within this time.
const KEY_CACHE_TTL: Duration = Duration::from_secs(2);

/// A newly minted API key: shown once, stored as `prefix` + `secret_hash`.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub token: String,
    pub prefix: String,
    pub secret_hash: String,
}

fn random_hex(uuids: usize) -> String {
    (0..uuids)
        .map(|_| hearth_core::hex(Uuid::new_v4().as_bytes()))
        .collect()
}

fn hash_secret(secret: &str) -> String {
    hearth_core::hex(&sha2::Sha256::digest(secret.as_bytes()))
}

/// Mints a key from the operating system's random source.
pub fn mint_key() -> NewKey {
    let prefix = random_hex(1)[..12].to_owned();
    let secret = random_hex(2);
    NewKey {
        token: format!("hk_{prefix}_{secret}"),
        secret_hash: hash_secret(&secret),
        prefix,
    }
}

/// Splits `hk_<prefix>_<secret>`.
fn parse_key(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix("hk_")?;
    let (prefix, secret) = rest.split_once('_')?;
    (prefix.len() == 12 && !secret.is_empty()).then_some((prefix, secret))
}

/// Constant-time equality of two hex digests.
fn digest_eq(a: &str, b: &str) -> bool {
    hearth_core::agent::constant_time_eq(a.as_bytes(), b.as_bytes())
}

#[derive(Debug, Clone, Copy)]
struct CachedKey {
    tenant_id: Uuid,
    until: Instant,
}

/// Verifies credentials. Built once from the configuration.
pub struct Authenticator {
    admin_token: Option<String>,
    jwt: Option<(DecodingKey, Validation)>,
    tenant_claim: String,
    keys: Mutex<HashMap<String, (String, CachedKey)>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("admin", &self.admin_token.is_some())
            .field("jwt", &self.jwt.is_some())
            .finish()
    }
}

impl Authenticator {
    pub fn new(config: &Config) -> anyhow::Result<Self> {
        let jwt = match (
            config.jwt_algorithm,
            &config.jwt_secret,
            &config.jwt_public_key,
        ) {
            (JwtAlgorithm::Hs256, Some(secret), _) => Some((
                DecodingKey::from_secret(secret.expose_secret().as_bytes())?,
                Algorithm::HS256,
            )),
            (JwtAlgorithm::Rs256 | JwtAlgorithm::Es256, _, Some(path)) => {
                let pem = std::fs::read(path)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
                Some(if config.jwt_algorithm == JwtAlgorithm::Rs256 {
                    (DecodingKey::from_rsa_pem(&pem)?, Algorithm::RS256)
                } else {
                    (DecodingKey::from_ec_pem(&pem)?, Algorithm::ES256)
                })
            }
            (JwtAlgorithm::Hs256, None, Some(_)) => {
                anyhow::bail!("--jwt-public-key needs --jwt-algorithm rs256 or es256")
            }
            (JwtAlgorithm::Rs256 | JwtAlgorithm::Es256, _, None) => {
                anyhow::bail!("--jwt-algorithm rs256/es256 needs --jwt-public-key")
            }
            (JwtAlgorithm::Hs256, None, None) => None,
        };
        let jwt = jwt.map(|(key, alg)| {
            let mut v = Validation::new(alg);
            v.validate_exp = true;
            v.validate_nbf = true;
            v.leeway = 5;
            v.set_required_spec_claims(&["exp"]);
            match &config.jwt_issuer {
                Some(iss) => v.set_issuer(&[iss]),
                None => v.iss = None,
            }
            match &config.jwt_audience {
                Some(aud) => v.set_audience(&[aud]),
                None => v.validate_aud = false,
            }
            (key, v)
        });
        Ok(Authenticator {
            admin_token: config
                .admin_token
                .as_ref()
                .map(|t| t.expose_secret().to_owned()),
            jwt,
            tenant_claim: config.jwt_tenant_claim.clone(),
            keys: Mutex::new(HashMap::new()),
        })
    }

    /// Forgets every cached key verification (after a revocation).
    pub fn forget_keys(&self) {
        self.keys.lock().expect("key cache poisoned").clear();
    }

    fn cached(&self, prefix: &str, secret_hash: &str) -> Option<Uuid> {
        let keys = self.keys.lock().expect("key cache poisoned");
        let (hash, entry) = keys.get(prefix)?;
        (entry.until > Instant::now() && digest_eq(hash, secret_hash)).then_some(entry.tenant_id)
    }

    async fn tenant_of_key(&self, db: &sqlx::PgPool, token: &str) -> Result<Uuid, ApiError> {
        let (prefix, secret) =
            parse_key(token).ok_or(ApiError::Unauthorized("malformed API key"))?;
        let secret_hash = hash_secret(secret);
        if let Some(tenant_id) = self.cached(prefix, &secret_hash) {
            return Ok(tenant_id);
        }
        let key = Self::verify_key(db, token).await?;
        let now = time::OffsetDateTime::now_utc();
        let ttl = match key.expires_at {
            // Never trusted from the cache past its expiry.
            Some(at) => KEY_CACHE_TTL.min((at - now).unsigned_abs()),
            None => KEY_CACHE_TTL,
        };
        // Off the request's path: a failed write costs only the record. The
        // row just read says whether the record is stale enough to write.
        let stale = time::Duration::seconds(hearth_store::tenant::TOUCH_EVERY_S.into());
        if key.last_used_at.is_none_or(|at| now - at >= stale) {
            let (pool, api_key_id) = (db.clone(), key.api_key_id);
            tokio::spawn(async move {
                if let Err(e) = hearth_store::tenant::touch_key(&pool, api_key_id).await {
                    tracing::debug!(%api_key_id, error = %e, "recording a key's use failed");
                }
            });
        }
        let entry = CachedKey {
            tenant_id: key.tenant_id,
            until: Instant::now() + ttl,
        };
        self.keys
            .lock()
            .expect("key cache poisoned")
            .insert(prefix.to_owned(), (secret_hash, entry));
        Ok(key.tenant_id)
    }

    /// Checks an API key against the database alone (no cache): it exists,
    /// its secret matches, and it is neither revoked nor expired.
    pub async fn verify_key(
        db: &sqlx::PgPool,
        token: &str,
    ) -> Result<hearth_store::tenant::ApiKeyRow, ApiError> {
        let (prefix, secret) =
            parse_key(token).ok_or(ApiError::Unauthorized("malformed API key"))?;
        let secret_hash = hash_secret(secret);
        let key = hearth_store::tenant::find_key(db, prefix)
            .await?
            .filter(|k| digest_eq(&k.secret_hash, &secret_hash))
            .ok_or(ApiError::Unauthorized("unknown API key"))?;
        if key.revoked_at.is_some() {
            return Err(ApiError::Unauthorized("API key revoked"));
        }
        if key
            .expires_at
            .is_some_and(|at| at <= time::OffsetDateTime::now_utc())
        {
            return Err(ApiError::Unauthorized("API key expired"));
        }
        Ok(key)
    }

    async fn tenant_of_jwt(&self, db: &sqlx::PgPool, token: &str) -> Result<Uuid, ApiError> {
        let (key, validation) = self.jwt.as_ref().ok_or(ApiError::Unauthorized(
            "JWTs are not accepted: no issuer configured",
        ))?;
        let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
            token, key, validation,
        )
        .map_err(|e| {
            tracing::debug!(error = %e, "JWT refused");
            ApiError::Unauthorized("invalid, expired or forged token")
        })?;
        let tenant_id = data
            .claims
            .get(&self.tenant_claim)
            .and_then(|v| v.as_str())
            .and_then(|s| Uuid::parse_str(s).ok())
            .ok_or(ApiError::Unauthorized("token has no valid tenant claim"))?;
        // A deleted tenant's tokens stop working even before they expire.
        hearth_store::tenant::get(db, tenant_id)
            .await?
            .ok_or(ApiError::Unauthorized("token names an unknown tenant"))?;
        Ok(tenant_id)
    }

    fn is_admin(&self, token: &str) -> Result<(), ApiError> {
        match &self.admin_token {
            None => Err(ApiError::Forbidden(
                "the admin API is disabled: set HEARTH_ADMIN_TOKEN",
            )),
            Some(t) if digest_eq(&hash_secret(t), &hash_secret(token)) => Ok(()),
            Some(_) => Err(ApiError::Unauthorized("invalid admin token")),
        }
    }
}

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    bearer_if_any(parts)?.ok_or(ApiError::Unauthorized(
        "missing `Authorization: Bearer <token>`",
    ))
}

/// The bearer token, `None` without an `Authorization` header, an error
/// with one that carries no bearer token.
fn bearer_if_any(parts: &Parts) -> Result<Option<&str>, ApiError> {
    let Some(value) = parts.headers.get(axum::http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(Some)
        .ok_or(ApiError::Unauthorized(
            "malformed `Authorization` header: expected `Bearer <token>`",
        ))
}

/// The cookie a console session travels in: `<session id>.<secret>`, set
/// `HttpOnly` and `SameSite=Strict` by `POST /v1/session`.
pub const SESSION_COOKIE: &str = "hearth_session";

/// The header that carries a session's CSRF token on every request that is
/// not a `GET`, `HEAD` or `OPTIONS`.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// A console session's credentials, as minted at sign-in.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The cookie's value.
    pub cookie: String,
    pub secret_hash: String,
    pub csrf_token: String,
    pub session_id: Uuid,
}

/// Mints a session's cookie value for the row `session_id`.
pub fn mint_session(session_id: Uuid) -> NewSession {
    let secret = random_hex(2);
    NewSession {
        cookie: format!("{}.{secret}", session_id.simple()),
        secret_hash: hash_secret(&secret),
        csrf_token: csrf_token(&secret),
        session_id,
    }
}

/// A session's CSRF token: derived from the cookie's secret, so only the
/// server (which sees the cookie) and the page it answered can know it; a
/// cross-site page can send the cookie but cannot read the token.
fn csrf_token(secret: &str) -> String {
    hash_secret(&format!("hearth-csrf\0{secret}"))
}

/// Splits a session cookie's value into its row id and secret.
fn parse_session(value: &str) -> Option<(Uuid, &str)> {
    let (id, secret) = value.split_once('.')?;
    let id = Uuid::try_parse(id).ok()?;
    (secret.len() == 64 && secret.bytes().all(|b| b.is_ascii_hexdigit())).then_some((id, secret))
}

/// The value of the session cookie among the request's `Cookie` headers.
fn session_cookie(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim_matches('"'))
}

/// A signed-in console session: the request's cookie named a session that
/// still holds.
#[derive(Debug, Clone)]
pub struct Session {
    pub row: hearth_store::session::SessionRow,
    pub csrf_token: String,
}

impl Session {
    async fn of_cookie(db: &sqlx::PgPool, value: &str) -> Result<Session, ApiError> {
        let (session_id, secret) =
            parse_session(value).ok_or(ApiError::Unauthorized("malformed session cookie"))?;
        let row = hearth_store::session::get(db, session_id)
            .await?
            .filter(|row| digest_eq(&row.secret_hash, &hash_secret(secret)))
            .ok_or(ApiError::Unauthorized("unknown session: sign in again"))?;
        if !row.holds_at(time::OffsetDateTime::now_utc()) {
            return Err(ApiError::Unauthorized(
                "the session ended (signed out, expired, or its API key was revoked): sign in again",
            ));
        }
        Ok(Session {
            row,
            csrf_token: csrf_token(secret),
        })
    }

    /// Refuses a request that changes something without the session's CSRF
    /// token.
    fn check_csrf(&self, parts: &Parts) -> Result<(), ApiError> {
        if parts.method.is_safe() {
            return Ok(());
        }
        let sent = parts
            .headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if digest_eq(&hash_secret(sent), &hash_secret(&self.csrf_token)) {
            Ok(())
        } else {
            Err(ApiError::Csrf)
        }
    }
}

impl FromRequestParts<AppState> for Session {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let value = session_cookie(parts).ok_or(ApiError::Unauthorized(
            "no console session: sign in with POST /v1/session",
        ))?;
        let session = Session::of_cookie(&state.db, value).await?;
        session.check_csrf(parts)?;
        Ok(session)
    }
}

/// The tenant a request acts for.
#[derive(Debug, Clone, Copy)]
pub struct Tenant {
    pub tenant_id: Uuid,
}

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let auth = &state.auth;
        // A bearer token wins over a cookie: a cross-site request can carry
        // the cookie, never the header.
        let tenant_id = match bearer_if_any(parts)? {
            Some(token) if token.starts_with("hk_") => auth.tenant_of_key(&state.db, token).await?,
            Some(token) => auth.tenant_of_jwt(&state.db, token).await?,
            None if session_cookie(parts).is_some() => {
                Session::from_request_parts(parts, state)
                    .await?
                    .row
                    .tenant_id
            }
            None => {
                return Err(ApiError::Unauthorized(
                    "missing `Authorization: Bearer <token>` (or a console session cookie)",
                ));
            }
        };
        tracing::Span::current().record("tenant", tracing::field::display(tenant_id));
        Ok(Tenant { tenant_id })
    }
}

/// An operator holding the admin token.
#[derive(Debug, Clone, Copy)]
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        state.auth.is_admin(bearer(parts)?)?;
        Ok(Admin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_parse_and_hash_their_secret() {
        let key = mint_key();
        let (prefix, secret) = parse_key(&key.token).unwrap();
        assert_eq!(prefix, key.prefix);
        assert_eq!(hash_secret(secret), key.secret_hash);
        assert_ne!(mint_key().token, key.token);
        assert!(parse_key("hk_short_x").is_none());
        assert!(parse_key("nope").is_none());
    }

    #[test]
    fn session_cookies_parse_and_derive_their_csrf_token() {
        let id = Uuid::now_v7();
        let minted = mint_session(id);
        let (parsed, secret) = parse_session(&minted.cookie).unwrap();
        assert_eq!(parsed, id);
        assert_eq!(hash_secret(secret), minted.secret_hash);
        assert_eq!(csrf_token(secret), minted.csrf_token);
        assert_ne!(minted.csrf_token, minted.secret_hash);
        assert_ne!(mint_session(id).cookie, minted.cookie);
        for bad in [
            "",
            "nodot",
            "not-a-uuid.00",
            &format!("{}.short", id.simple()),
            &format!("{}.{}", id.simple(), "g".repeat(64)),
        ] {
            assert!(parse_session(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn digest_comparison() {
        assert!(digest_eq("abc", "abc"));
        assert!(!digest_eq("abc", "abd"));
        assert!(!digest_eq("abc", "abcd"));
    }
}
