//! Tenants and their API keys.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{Result, on_constraint};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantRow {
    pub tenant_id: Uuid,
    pub name: String,
    pub created_at: OffsetDateTime,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRow {
    pub api_key_id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    pub prefix: String,
    pub secret_hash: String,
    pub created_at: OffsetDateTime,
    pub revoked_at: Option<OffsetDateTime>,
    /// After this the key is refused; `None`: it never expires.
    pub expires_at: Option<OffsetDateTime>,
    /// When it last authenticated a request (to within [`TOUCH_EVERY_S`]).
    pub last_used_at: Option<OffsetDateTime>,
}

/// How stale a key's `last_used_at` may be before a use writes it again.
pub const TOUCH_EVERY_S: i32 = 60;

#[tracing::instrument(skip(db))]
pub async fn create(db: impl PgExecutor<'_>, name: &str) -> Result<TenantRow> {
    sqlx::query_as!(
        TenantRow,
        "insert into tenant (tenant_id, name) values ($1, $2) returning *",
        Uuid::now_v7(),
        name
    )
    .fetch_one(db)
    .await
    .map_err(on_constraint("tenant_name_unique"))
}

#[tracing::instrument(skip(db))]
pub async fn get(db: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<Option<TenantRow>> {
    Ok(sqlx::query_as!(
        TenantRow,
        "select * from tenant where tenant_id = $1",
        tenant_id
    )
    .fetch_optional(db)
    .await?)
}

#[tracing::instrument(skip(db))]
pub async fn find_by_name(db: impl PgExecutor<'_>, name: &str) -> Result<Option<TenantRow>> {
    Ok(
        sqlx::query_as!(TenantRow, "select * from tenant where name = $1", name)
            .fetch_optional(db)
            .await?,
    )
}

#[tracing::instrument(skip(db))]
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<TenantRow>> {
    Ok(
        sqlx::query_as!(TenantRow, "select * from tenant order by name")
            .fetch_all(db)
            .await?,
    )
}

#[tracing::instrument(skip(db))]
pub async fn rename(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    name: &str,
) -> Result<Option<TenantRow>> {
    sqlx::query_as!(
        TenantRow,
        "update tenant set name = $2 where tenant_id = $1 returning *",
        tenant_id,
        name
    )
    .fetch_optional(db)
    .await
    .map_err(on_constraint("tenant_name_unique"))
}

/// Deletes a tenant with everything it owns. Returns whether it existed.
#[tracing::instrument(skip(db))]
pub async fn delete(db: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<bool> {
    let done = sqlx::query!("delete from tenant where tenant_id = $1", tenant_id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

#[tracing::instrument(skip(db, secret_hash))]
pub async fn create_key(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    name: &str,
    prefix: &str,
    secret_hash: &str,
    expires_at: Option<OffsetDateTime>,
) -> Result<ApiKeyRow> {
    sqlx::query_as!(
        ApiKeyRow,
        "insert into api_key (api_key_id, tenant_id, name, prefix, secret_hash, expires_at)
         values ($1, $2, $3, $4, $5, $6) returning *",
        Uuid::now_v7(),
        tenant_id,
        name,
        prefix,
        secret_hash,
        expires_at
    )
    .fetch_one(db)
    .await
    .map_err(on_constraint("api_key_prefix_unique"))
}

#[tracing::instrument(skip(db))]
pub async fn list_keys(db: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<Vec<ApiKeyRow>> {
    Ok(sqlx::query_as!(
        ApiKeyRow,
        "select * from api_key where tenant_id = $1 order by api_key_id",
        tenant_id
    )
    .fetch_all(db)
    .await?)
}

/// Revokes a key; returns it, or `None` if the tenant has no such key.
/// Revoking twice keeps the first revocation time.
#[tracing::instrument(skip(db))]
pub async fn revoke_key(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    api_key_id: Uuid,
) -> Result<Option<ApiKeyRow>> {
    Ok(sqlx::query_as!(
        ApiKeyRow,
        "update api_key set revoked_at = coalesce(revoked_at, now())
         where tenant_id = $1 and api_key_id = $2 returning *",
        tenant_id,
        api_key_id
    )
    .fetch_optional(db)
    .await?)
}

/// Looks a key up by its visible prefix (authentication; not tenant-scoped
/// because the tenant is what it finds out).
#[tracing::instrument(skip(db))]
pub async fn find_key(db: impl PgExecutor<'_>, prefix: &str) -> Result<Option<ApiKeyRow>> {
    Ok(
        sqlx::query_as!(ApiKeyRow, "select * from api_key where prefix = $1", prefix)
            .fetch_optional(db)
            .await?,
    )
}

/// Records that a key was just used, unless it was within the last
/// [`TOUCH_EVERY_S`] seconds (so a busy key costs one write a minute).
#[tracing::instrument(skip(db))]
pub async fn touch_key(db: impl PgExecutor<'_>, api_key_id: Uuid) -> Result<()> {
    sqlx::query!(
        "update api_key set last_used_at = now()
         where api_key_id = $1
           and (last_used_at is null or last_used_at < now() - make_interval(secs => $2))",
        api_key_id,
        f64::from(TOUCH_EVERY_S)
    )
    .execute(db)
    .await?;
    Ok(())
}
