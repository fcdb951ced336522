//! Code bundles: uploaded once, referenced by content digest.

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::Result;

/// Stores a bundle; storing the same digest again is a no-op.
#[tracing::instrument(skip(db, files))]
pub async fn put(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    digest: &str,
    files: &serde_json::Value,
    size_bytes: i64,
) -> Result<()> {
    sqlx::query!(
        "insert into bundle (tenant_id, digest, files, size_bytes) values ($1, $2, $3, $4)
         on conflict on constraint bundle_pk do nothing",
        tenant_id,
        digest,
        files,
        size_bytes
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The files of a bundle, if this tenant uploaded it.
#[tracing::instrument(skip(db))]
pub async fn files(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    digest: &str,
) -> Result<Option<serde_json::Value>> {
    Ok(sqlx::query_scalar!(
        "select files from bundle where tenant_id = $1 and digest = $2",
        tenant_id,
        digest
    )
    .fetch_optional(db)
    .await?)
}

/// Whether this tenant has the bundle.
#[tracing::instrument(skip(db))]
pub async fn exists(db: impl PgExecutor<'_>, tenant_id: Uuid, digest: &str) -> Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"select exists(select 1 from bundle where tenant_id = $1 and digest = $2) as "exists!""#,
        tenant_id,
        digest
    )
    .fetch_one(db)
    .await?)
}
