//! Per-tenant budgets of a pool (floor and ceiling of the GPUs its warm pods
//! may hold), set through the admin API and applied to the live pools.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::Result;

/// A row of `tenant_budget`.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantBudgetRow {
    pub tenant_id: Uuid,
    pub profile: String,
    pub floor_gpus: f64,
    pub ceiling_gpus: f64,
    pub updated_at: OffsetDateTime,
}

/// Sets a tenant's budget for one profile.
#[tracing::instrument(skip(db))]
pub async fn put(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    profile: &str,
    floor_gpus: f64,
    ceiling_gpus: f64,
) -> Result<TenantBudgetRow> {
    Ok(sqlx::query_as!(
        TenantBudgetRow,
        "insert into tenant_budget (tenant_id, profile, floor_gpus, ceiling_gpus)
         values ($1, $2, $3, $4)
         on conflict on constraint tenant_budget_pk do update
         set floor_gpus = excluded.floor_gpus, ceiling_gpus = excluded.ceiling_gpus,
             updated_at = now()
         returning tenant_id, profile, floor_gpus, ceiling_gpus, updated_at",
        tenant_id,
        profile,
        floor_gpus,
        ceiling_gpus
    )
    .fetch_one(db)
    .await?)
}

/// One tenant's budgets.
#[tracing::instrument(skip(db))]
pub async fn list(db: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<Vec<TenantBudgetRow>> {
    Ok(sqlx::query_as!(
        TenantBudgetRow,
        "select tenant_id, profile, floor_gpus, ceiling_gpus, updated_at
         from tenant_budget where tenant_id = $1 order by profile",
        tenant_id
    )
    .fetch_all(db)
    .await?)
}

/// Every tenant's budgets, for the scheduler's start.
#[tracing::instrument(skip(db))]
pub async fn all(db: impl PgExecutor<'_>) -> Result<Vec<TenantBudgetRow>> {
    Ok(sqlx::query_as!(
        TenantBudgetRow,
        "select tenant_id, profile, floor_gpus, ceiling_gpus, updated_at
         from tenant_budget order by tenant_id, profile"
    )
    .fetch_all(db)
    .await?)
}
