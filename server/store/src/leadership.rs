//! Leadership epochs (see the `leadership` migration): a scheduler that
//! takes the lease increases the epoch and carries it on every agent request
//! and every write of a job's progress; the job writes in [`crate::job`]
//! check it.

use sqlx::PgExecutor;

use crate::Result;

/// Records a takeover by `replica_id`; returns the new epoch. Call it while
/// holding the scheduler lease.
#[tracing::instrument(skip(db))]
pub async fn take_over(db: impl PgExecutor<'_>, replica_id: &str) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        "update leadership set epoch = epoch + 1, replica_id = $1, since = now()
         where leadership_id = 1
         returning epoch",
        replica_id
    )
    .fetch_one(db)
    .await?)
}

/// The current epoch.
pub async fn current(db: impl PgExecutor<'_>) -> Result<i64> {
    Ok(
        sqlx::query_scalar!("select epoch from leadership where leadership_id = 1")
            .fetch_one(db)
            .await?,
    )
}
