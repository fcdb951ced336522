//! Hearth's Postgres store: the source of truth for tenants, keys, bundles,
//! jobs, pool budgets, the record of pool decisions and the control
//! endpoint's policies, session snapshots and calibrated batch sizes.
//!
//! Functions take an executor (`impl PgExecutor`) so that callers own the
//! transaction. Every tenant-owned query filters on `tenant_id`. All state
//! changes of a job are compare-and-set updates: a transition that no longer
//! applies (the job was cancelled meanwhile, another scheduler took it) changes
//! nothing and reports so.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgExecutor, PgPool};

pub mod budget;
pub mod bundle;
pub mod control;
pub mod job;
pub mod job_event;
pub mod leadership;
pub mod pod_event;
pub mod session;
pub mod tenant;

pub use sqlx::PgPool as Pool;

/// The embedded migrations (`migrations/` at the repository root).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Errors of the store layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A named unique constraint was violated.
    #[error("conflict on {0}")]
    Conflict(&'static str),
    /// The idempotency key was used before with a different request.
    #[error("idempotency key reused with a different request")]
    IdempotencyMismatch,
    /// A job's end that the lifecycle does not allow: a state that is not
    /// final, or an error code missing from a failure (or given to a success).
    #[error("a job cannot end as {0} with error code {1:?}")]
    NotTerminal(hearth_core::State, Option<hearth_core::ErrorCode>),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Maps a unique-constraint violation named `constraint` to
/// [`Error::Conflict`], leaving other errors as they are.
pub(crate) fn on_constraint(constraint: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |e| match &e {
        sqlx::Error::Database(db) if db.constraint() == Some(constraint) => {
            Error::Conflict(constraint)
        }
        _ => Error::Database(e),
    }
}

/// How many connections a pool may hold and how long a caller waits for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSize {
    pub max_connections: u32,
    /// How long getting a connection may take (a free one from the pool or a
    /// new one from the server) before it fails with
    /// [`sqlx::Error::PoolTimedOut`]. Short, so that a saturated or
    /// unreachable database is an error the caller sees at once rather than
    /// a request that hangs.
    pub acquire_timeout: Duration,
}

impl PoolSize {
    /// The acquire timeout of a pool sized by a bare connection count.
    pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
}

impl From<u32> for PoolSize {
    fn from(max_connections: u32) -> Self {
        PoolSize {
            max_connections,
            acquire_timeout: Self::DEFAULT_ACQUIRE_TIMEOUT,
        }
    }
}

/// How long a pooled connection may sit idle before it is checked (a round
/// trip) on its way out of the pool.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// sqlx checks every connection it hands out by default: a round trip before
/// each statement of a job's way, on top of the one it makes when the
/// connection comes back. A connection that came back within the last second
/// passed that check then; only one idle for longer is checked again (pgx's
/// pool does the same). One that died meanwhile fails its statement, which
/// its caller sees as the database being unavailable, and is not pooled again.
fn pool_options(size: PoolSize) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(size.max_connections)
        .acquire_timeout(size.acquire_timeout)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(
                async move { Ok(meta.idle_for < CHECK_AFTER_IDLE || conn.ping().await.is_ok()) },
            )
        })
}

/// Connects to `url`, first creating its database when `create` is set and
/// it does not exist, then applies the migrations.
pub async fn connect(url: &str, create: bool, size: impl Into<PoolSize>) -> Result<PgPool> {
    connect_with(url.parse()?, create, size).await
}

/// [`connect`] with options of the caller's (a service names its
/// connections after itself).
pub async fn connect_with(
    options: PgConnectOptions,
    create: bool,
    size: impl Into<PoolSize>,
) -> Result<PgPool> {
    if create {
        ensure_database(&options).await?;
    }
    let pool = pool_options(size.into()).connect_with(options).await?;
    MIGRATOR.run(&pool).await?;
    Ok(pool)
}

/// How the connections of writers plan: the statements that write many
/// jobs at once (`job::assign_many`, `job::finish_many`,
/// `job_event::append`) join arrays of keys with their tables.
///
/// Postgres plans a statement kept prepared at every call until it trusts a
/// generic plan, which for these it does not: planning the shared end of a
/// few jobs cost more than executing it (16 clients: 0.29 ms a call against
/// 0.33). A generic plan made freely, though, is the plan for the table as
/// large as it was then: on a new database a hash join over a sequential
/// scan of `job`, kept while the table grows (0.4 ms per row against 0.06
/// through the key). On these connections every statement has one plan,
/// made at its first call, that can only join through keys: no sequential
/// scan where an index serves, no hash or merge join. So planned, a keyed
/// write is right at any table size; statements of other kinds (reads,
/// listings) belong to the main pool, which keeps Postgres's defaults. No
/// JIT: a write of a few rows never repays compiling it, and the
/// penalties that keep scans off inflate estimated costs past its
/// threshold.
pub const WRITER_SETTINGS: [(&str, &str); 5] = [
    ("plan_cache_mode", "force_generic_plan"),
    ("enable_seqscan", "off"),
    ("enable_hashjoin", "off"),
    ("enable_mergejoin", "off"),
    ("jit", "off"),
];

/// A pool of writers' connections onto the same database (see
/// [`WRITER_SETTINGS`]), whose commits are durable: for the writers that
/// accept jobs and store their ends together.
pub async fn connect_writers_with(
    options: PgConnectOptions,
    size: impl Into<PoolSize>,
) -> Result<PgPool> {
    Ok(pool_options(size.into())
        .connect_with(options.options(WRITER_SETTINGS))
        .await?)
}

/// A second pool of writers' connections (see [`WRITER_SETTINGS`]) onto the
/// same database, whose commits do not wait for the write-ahead log to
/// reach disk (`synchronous_commit = off`).
///
/// For intermediate job transitions (`assigned`, `running`): losing one in a
/// crash is harmless, because a new leader treats a job that holds pods
/// exactly like a queued one. And for the acceptance of a job whose
/// submitter waits for its end: nobody has been told of it yet, and the
/// answer waits for a durable commit made after it (the job's end, or
/// [`flush`]). Final states always use a durable pool. Postgres still
/// never corrupts or reorders: a relaxed commit is at most lost, never
/// half-applied, and the log reaches disk in order, so a durable commit
/// makes every commit before it durable too.
pub async fn connect_relaxed(url: &str, size: impl Into<PoolSize>) -> Result<PgPool> {
    connect_relaxed_with(url.parse()?, size).await
}

/// [`connect_relaxed`] with options of the caller's.
pub async fn connect_relaxed_with(
    options: PgConnectOptions,
    size: impl Into<PoolSize>,
) -> Result<PgPool> {
    connect_writers_with(options.options([("synchronous_commit", "off")]), size).await
}

/// Waits until every commit made so far, relaxed ones included, is on disk.
/// A durable commit waits for the log to reach disk up to its own record,
/// and the log reaches disk in order; but Postgres makes a commit durable
/// only if its transaction wrote to the log (taking a transaction id is not
/// enough), so this one writes a transactional message, which only logical
/// decoding reads. Costs one log flush.
#[tracing::instrument(skip_all)]
pub async fn flush(db: impl PgExecutor<'_>) -> Result<()> {
    sqlx::query("select pg_logical_emit_message(true, 'hearth.flush', '')")
        .execute(db)
        .await?;
    Ok(())
}

async fn ensure_database(options: &PgConnectOptions) -> Result<()> {
    let Some(name) = options.get_database().map(str::to_owned) else {
        return Ok(());
    };
    let mut admin = options.clone().database("postgres").connect().await?;
    let exists: bool = sqlx::query_scalar!(
        r#"select exists(select 1 from pg_database where datname = $1) as "exists!""#,
        name
    )
    .fetch_one(&mut admin)
    .await?;
    if !exists {
        // Identifiers cannot be bound as parameters; quote it as Postgres does.
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        match sqlx::raw_sql(sqlx::AssertSqlSafe(format!("create database {quoted}")))
            .execute(&mut admin)
            .await
        {
            Ok(_) => tracing::info!(database = %name, "created database"),
            // Another replica created it at the same moment.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P04") => {}
            Err(e) => return Err(e.into()),
        }
    }
    admin.close().await?;
    Ok(())
}
