//! Pool decisions, one row per decision about a pod: why it was started,
//! promoted, assigned, reset or released, and when it became ready or went.
//!
//! Written in batches by the scheduler's background writer, never on a job's
//! critical path. Events concerning a tenant carry its id; events of unbound
//! pods (standby) carry none and are visible to every tenant the pod served.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::Result;

/// An event to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPodEvent {
    pub tenant_id: Option<Uuid>,
    pub pod_id: Option<String>,
    pub profile: String,
    pub at: OffsetDateTime,
    /// `start`, `ready`, `promote`, `assign`, `reset`, `release`, `gone` or `budget`.
    pub kind: &'static str,
    pub job_id: Option<Uuid>,
    pub reason: serde_json::Value,
}

/// A row of `pod_event`.
#[derive(Debug, Clone, PartialEq)]
pub struct PodEventRow {
    pub pod_event_id: i64,
    pub tenant_id: Option<Uuid>,
    pub pod_id: Option<String>,
    pub profile: String,
    pub at: OffsetDateTime,
    pub kind: String,
    pub job_id: Option<Uuid>,
    pub reason: serde_json::Value,
}

/// Inserts a batch in one statement. Events of tenants deleted meanwhile are
/// dropped rather than failing the batch.
#[tracing::instrument(skip_all, fields(events = events.len()))]
pub async fn insert(db: impl PgExecutor<'_>, events: &[NewPodEvent]) -> Result<u64> {
    let tenant_ids: Vec<Option<Uuid>> = events.iter().map(|e| e.tenant_id).collect();
    let pod_ids: Vec<Option<String>> = events.iter().map(|e| e.pod_id.clone()).collect();
    let profiles: Vec<String> = events.iter().map(|e| e.profile.clone()).collect();
    let ats: Vec<OffsetDateTime> = events.iter().map(|e| e.at).collect();
    let kinds: Vec<String> = events.iter().map(|e| e.kind.to_owned()).collect();
    let job_ids: Vec<Option<Uuid>> = events.iter().map(|e| e.job_id).collect();
    let reasons: Vec<serde_json::Value> = events.iter().map(|e| e.reason.clone()).collect();
    let done = sqlx::query!(
        r#"insert into pod_event (tenant_id, pod_id, profile, at, kind, job_id, reason)
           select e.tenant_id, e.pod_id, e.profile, e.at, e.kind, e.job_id, e.reason
           from unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::text[],
                       $6::uuid[], $7::jsonb[])
                as e(tenant_id, pod_id, profile, at, kind, job_id, reason)
           where e.tenant_id is null
              or exists (select 1 from tenant t where t.tenant_id = e.tenant_id)"#,
        &tenant_ids as &[Option<Uuid>],
        &pod_ids as &[Option<String>],
        &profiles,
        &ats,
        &kinds,
        &job_ids as &[Option<Uuid>],
        &reasons
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Whether pod `pod_id` ever ran a job of this tenant.
#[tracing::instrument(skip(db))]
pub async fn served(db: impl PgExecutor<'_>, tenant_id: Uuid, pod_id: &str) -> Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"select exists(
             select 1 from pod_event
             where tenant_id = $1 and pod_id = $2 and kind = 'assign'
           ) as "served!""#,
        tenant_id,
        pod_id
    )
    .fetch_one(db)
    .await?)
}

/// A pod's events as this tenant may see them (its own and unbound ones),
/// oldest first, after event `after`.
#[tracing::instrument(skip(db))]
pub async fn list(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    pod_id: &str,
    after: i64,
    limit: i64,
) -> Result<Vec<PodEventRow>> {
    Ok(sqlx::query_as!(
        PodEventRow,
        "select pod_event_id, tenant_id, pod_id, profile, at, kind, job_id, reason
         from pod_event
         where pod_id = $1 and (tenant_id is null or tenant_id = $2) and pod_event_id > $3
         order by pod_event_id
         limit $4",
        pod_id,
        tenant_id,
        after,
        limit
    )
    .fetch_all(db)
    .await?)
}
