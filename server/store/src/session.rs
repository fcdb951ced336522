//! Console sessions: what a signed-in browser's cookie names.

use sqlx::{PgExecutor, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::Result;

/// A session as authentication needs it: whose it is, its secret's hash, and
/// whether it (or the key it was opened with) still holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub session_id: Uuid,
    pub tenant_id: Uuid,
    pub tenant_name: String,
    pub api_key_id: Uuid,
    pub secret_hash: String,
    pub expires_at: OffsetDateTime,
    pub revoked_at: Option<OffsetDateTime>,
    pub key_revoked_at: Option<OffsetDateTime>,
    pub key_expires_at: Option<OffsetDateTime>,
}

impl SessionRow {
    /// Whether the session authenticates a request at `now`.
    pub fn holds_at(&self, now: OffsetDateTime) -> bool {
        self.revoked_at.is_none()
            && self.key_revoked_at.is_none()
            && now < self.expires_at
            && self.key_expires_at.is_none_or(|at| now < at)
    }
}

/// Opens session `session_id` for the tenant of `api_key_id`, ending at `expires_at`,
/// and sweeps sessions that ended more than a day ago.
#[tracing::instrument(skip(db, secret_hash))]
pub async fn create(
    db: &PgPool,
    session_id: Uuid,
    api_key_id: Uuid,
    secret_hash: &str,
    expires_at: OffsetDateTime,
) -> Result<SessionRow> {
    sqlx::query!(
        "delete from console_session
         where expires_at < now() - interval '1 day' or revoked_at < now() - interval '1 day'"
    )
    .execute(db)
    .await?;
    sqlx::query!(
        "insert into console_session (session_id, tenant_id, api_key_id, secret_hash, expires_at)
         select $1, tenant_id, api_key_id, $3, $4 from api_key where api_key_id = $2",
        session_id,
        api_key_id,
        secret_hash,
        expires_at
    )
    .execute(db)
    .await?;
    get(db, session_id)
        .await?
        .ok_or_else(|| crate::Error::Database(sqlx::Error::RowNotFound))
}

/// A session with its tenant and key, whatever its state.
#[tracing::instrument(skip(db))]
pub async fn get(db: impl PgExecutor<'_>, session_id: Uuid) -> Result<Option<SessionRow>> {
    Ok(sqlx::query_as!(
        SessionRow,
        r#"select s.session_id, s.tenant_id, t.name as tenant_name, s.api_key_id,
                  s.secret_hash, s.expires_at, s.revoked_at,
                  k.revoked_at as key_revoked_at, k.expires_at as key_expires_at
           from console_session s
           join tenant t using (tenant_id)
           join api_key k using (api_key_id)
           where s.session_id = $1"#,
        session_id
    )
    .fetch_optional(db)
    .await?)
}

/// Ends a session (sign-out). Ending it twice keeps the first time.
#[tracing::instrument(skip(db))]
pub async fn revoke(db: impl PgExecutor<'_>, session_id: Uuid) -> Result<()> {
    sqlx::query!(
        "update console_session set revoked_at = coalesce(revoked_at, now()) where session_id = $1",
        session_id
    )
    .execute(db)
    .await?;
    Ok(())
}
