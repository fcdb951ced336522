//! Authentication: tenants present an API key (`hk_<prefix>_<secret>`, stored
//! only as a SHA-256 hash) or a JWT from the configured issuer; operators
//! present the admin token.

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
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
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
        let key = hearth_store::tenant::find_key(db, prefix)
            .await?
            .filter(|k| digest_eq(&k.secret_hash, &secret_hash))
            .ok_or(ApiError::Unauthorized("unknown API key"))?;
        if key.revoked_at.is_some() {
            return Err(ApiError::Unauthorized("API key revoked"));
        }
        let now = time::OffsetDateTime::now_utc();
        let ttl = match key.expires_at {
            Some(at) if at <= now => return Err(ApiError::Unauthorized("API key expired")),
            // Never trusted from the cache past its expiry.
            Some(at) => KEY_CACHE_TTL.min((at - now).unsigned_abs()),
            None => KEY_CACHE_TTL,
        };
        // Off the request's path: a failed write costs only the record.
        let (pool, api_key_id) = (db.clone(), key.api_key_id);
        tokio::spawn(async move {
            if let Err(e) = hearth_store::tenant::touch_key(&pool, api_key_id).await {
                tracing::debug!(%api_key_id, error = %e, "recording a key's use failed");
            }
        });
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
    parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(ApiError::Unauthorized(
            "missing `Authorization: Bearer <token>`",
        ))
}

/// The tenant a request acts for.
#[derive(Debug, Clone, Copy)]
pub struct Tenant {
    pub tenant_id: Uuid,
}

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts)?;
        let auth = &state.auth;
        let tenant_id = if token.starts_with("hk_") {
            auth.tenant_of_key(&state.db, token).await?
        } else {
            auth.tenant_of_jwt(&state.db, token).await?
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
    fn digest_comparison() {
        assert!(digest_eq("abc", "abc"));
        assert!(!digest_eq("abc", "abd"));
        assert!(!digest_eq("abc", "abcd"));
    }
}
