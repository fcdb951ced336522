//! The control endpoint's rows: registered policies (immutable; a new version
//! is a new row), snapshots of session state and calibrated `K_r` per route.
//! The live sessions are held by the service's control engine; this module
//! only stores what it snapshots and restores.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::Result;

/// A row of `control_policy`.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRow {
    pub tenant_id: Uuid,
    pub policy_id: Uuid,
    pub name: String,
    pub version: i64,
    pub spec: serde_json::Value,
    pub route_ids: Vec<String>,
    pub created_at: OffsetDateTime,
}

/// A policy to register.
#[derive(Debug, Clone, Copy)]
pub struct NewPolicy<'a> {
    pub tenant_id: Uuid,
    pub policy_id: Uuid,
    pub name: &'a str,
    pub version: i64,
    pub spec: &'a serde_json::Value,
    pub route_ids: &'a [String],
}

/// Inserts a policy; `None` when this tenant already has one with the same
/// name and version (the caller compares bodies).
#[tracing::instrument(skip(db, p), fields(name = p.name, version = p.version))]
pub async fn insert_policy(
    db: impl PgExecutor<'_>,
    p: &NewPolicy<'_>,
) -> Result<Option<PolicyRow>> {
    Ok(sqlx::query_as!(
        PolicyRow,
        "insert into control_policy (tenant_id, policy_id, name, version, spec, route_ids)
         values ($1, $2, $3, $4, $5, $6)
         on conflict on constraint control_policy_version_unique do nothing
         returning tenant_id, policy_id, name, version, spec, route_ids, created_at",
        p.tenant_id,
        p.policy_id,
        p.name,
        p.version,
        p.spec,
        p.route_ids
    )
    .fetch_optional(db)
    .await?)
}

/// A policy of this tenant by name and version.
#[tracing::instrument(skip(db))]
pub async fn policy_by_version(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    name: &str,
    version: i64,
) -> Result<Option<PolicyRow>> {
    Ok(sqlx::query_as!(
        PolicyRow,
        "select tenant_id, policy_id, name, version, spec, route_ids, created_at
         from control_policy where tenant_id = $1 and name = $2 and version = $3",
        tenant_id,
        name,
        version
    )
    .fetch_optional(db)
    .await?)
}

/// A policy of this tenant.
#[tracing::instrument(skip(db))]
pub async fn policy(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    policy_id: Uuid,
) -> Result<Option<PolicyRow>> {
    Ok(sqlx::query_as!(
        PolicyRow,
        "select tenant_id, policy_id, name, version, spec, route_ids, created_at
         from control_policy where tenant_id = $1 and policy_id = $2",
        tenant_id,
        policy_id
    )
    .fetch_optional(db)
    .await?)
}

/// This tenant's policies by name, then version.
#[tracing::instrument(skip(db))]
pub async fn policies(db: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<Vec<PolicyRow>> {
    Ok(sqlx::query_as!(
        PolicyRow,
        "select tenant_id, policy_id, name, version, spec, route_ids, created_at
         from control_policy where tenant_id = $1 order by name, version",
        tenant_id
    )
    .fetch_all(db)
    .await?)
}

/// Every `(tenant, policy)` with stored sessions, for the restore at start.
#[tracing::instrument(skip(db))]
pub async fn policies_with_sessions(db: impl PgExecutor<'_>) -> Result<Vec<(Uuid, Uuid)>> {
    Ok(sqlx::query!(
        "select distinct tenant_id, policy_id from control_session order by tenant_id, policy_id"
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|r| (r.tenant_id, r.policy_id))
    .collect())
}

/// A row of `control_session`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub tenant_id: Uuid,
    pub policy_id: Uuid,
    pub session: String,
    pub route: i32,
    pub state: serde_json::Value,
}

/// Writes session snapshots (insert or overwrite), all in one statement.
/// Those of policies no longer stored (their tenant was deleted meanwhile)
/// are dropped, so that they fail no one else's.
#[tracing::instrument(skip_all, fields(sessions = rows.len()))]
pub async fn put_sessions(db: impl PgExecutor<'_>, rows: &[SessionRow]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let tenants: Vec<Uuid> = rows.iter().map(|r| r.tenant_id).collect();
    let policies: Vec<Uuid> = rows.iter().map(|r| r.policy_id).collect();
    let sessions: Vec<String> = rows.iter().map(|r| r.session.clone()).collect();
    let routes: Vec<i32> = rows.iter().map(|r| r.route).collect();
    let states: Vec<serde_json::Value> = rows.iter().map(|r| r.state.clone()).collect();
    sqlx::query!(
        "insert into control_session (tenant_id, policy_id, session, route, state)
         select s.* from unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::jsonb[])
             as s(tenant_id, policy_id, session, route, state)
         where exists (select from control_policy p
                       where p.tenant_id = s.tenant_id and p.policy_id = s.policy_id)
         on conflict on constraint control_session_pk do update
         set route = excluded.route, state = excluded.state, updated_at = now()",
        &tenants,
        &policies,
        &sessions,
        &routes,
        &states
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Deletes sessions `(tenant, policy, session)`; those not stored are no-ops.
#[tracing::instrument(skip_all, fields(sessions = keys.len()))]
pub async fn delete_sessions(db: impl PgExecutor<'_>, keys: &[(Uuid, Uuid, String)]) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let tenants: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
    let policies: Vec<Uuid> = keys.iter().map(|k| k.1).collect();
    let sessions: Vec<String> = keys.iter().map(|k| k.2.clone()).collect();
    sqlx::query!(
        "delete from control_session c
         using unnest($1::uuid[], $2::uuid[], $3::text[]) as d(tenant_id, policy_id, session)
         where c.tenant_id = d.tenant_id and c.policy_id = d.policy_id and c.session = d.session",
        &tenants,
        &policies,
        &sessions
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Writes session snapshots and deletes sessions in one transaction (one
/// statement when nothing is deleted); a key is in at most one of them.
pub async fn write_sessions(
    db: &sqlx::PgPool,
    rows: &[SessionRow],
    deleted: &[(Uuid, Uuid, String)],
) -> Result<()> {
    if deleted.is_empty() {
        return put_sessions(db, rows).await;
    }
    let mut tx = db.begin().await?;
    delete_sessions(&mut *tx, deleted).await?;
    put_sessions(&mut *tx, rows).await?;
    tx.commit().await?;
    Ok(())
}

/// A page of one policy's stored sessions by name: the first `limit` named
/// after `after` (from the first without it).
#[tracing::instrument(skip(db))]
pub async fn session_page(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    policy_id: Uuid,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<SessionRow>> {
    Ok(sqlx::query_as!(
        SessionRow,
        "select tenant_id, policy_id, session, route, state
         from control_session
         where tenant_id = $1 and policy_id = $2 and ($3::text is null or session > $3)
         order by session limit $4",
        tenant_id,
        policy_id,
        after,
        limit
    )
    .fetch_all(db)
    .await?)
}

/// The stored sessions of one policy.
#[tracing::instrument(skip(db))]
pub async fn sessions(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    policy_id: Uuid,
) -> Result<Vec<SessionRow>> {
    Ok(sqlx::query_as!(
        SessionRow,
        "select tenant_id, policy_id, session, route, state
         from control_session where tenant_id = $1 and policy_id = $2",
        tenant_id,
        policy_id
    )
    .fetch_all(db)
    .await?)
}

/// Stores a calibrated `K_r` (`None`: no batch size wins) for a route.
#[tracing::instrument(skip(db))]
pub async fn put_route_k(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    route_id: &str,
    k: Option<i32>,
    executor: &str,
) -> Result<()> {
    sqlx::query!(
        "insert into control_route_k (tenant_id, route_id, k, executor)
         values ($1, $2, $3, $4)
         on conflict on constraint control_route_k_pk do update
         set k = excluded.k, executor = excluded.executor, measured_at = now()",
        tenant_id,
        route_id,
        k,
        executor
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Calibrated `K_r` of those of `route_ids` that have one: `(route id, k)`.
#[tracing::instrument(skip(db, route_ids))]
pub async fn route_ks(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    route_ids: &[String],
) -> Result<Vec<(String, Option<i32>)>> {
    Ok(sqlx::query!(
        "select route_id, k from control_route_k where tenant_id = $1 and route_id = any($2)",
        tenant_id,
        route_ids
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|r| (r.route_id, r.k))
    .collect())
}
