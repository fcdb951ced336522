//! Jobs and their logs.

use std::collections::HashMap;

use hearth_core::{ErrorCode, Kind, Source, State};
use sqlx::{PgConnection, PgExecutor, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{Error, Result};

/// `query_as!(JobRow, ..)` with every column of `job` between `$head` and
/// `$tail` (`select` .. `from job ..`, or `update ..returning` .. `""`): the
/// named enums are decoded as such, and a name the code does not know is an
/// error, never a default.
macro_rules! job_rows {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            JobRow,
            $head
                + r#" job_id, tenant_id, kind as "kind: Kind", profile, caller,
                      state as "state: State", priority, spec, idempotency_key, request_hash,
                      attempts, cancel_requested, source as "source: Source", pods, exit_code,
                      output, stdout, stderr, stdout_truncated, stderr_truncated,
                      error_code as "error_code: ErrorCode", error_message, created_at,
                      assigned_at, started_at, finished_at, queued_ms, acquire_ms, bind_ms,
                      run_ms, total_ms, traceparent "#
                + $tail
            $(, $arg)*
        )
    };
}

/// A row of `job`.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct JobRow {
    pub job_id: Uuid,
    pub tenant_id: Uuid,
    pub kind: Kind,
    pub profile: String,
    pub caller: String,
    pub state: State,
    pub priority: i32,
    pub spec: serde_json::Value,
    pub idempotency_key: Option<String>,
    pub request_hash: Option<String>,
    pub attempts: i32,
    pub cancel_requested: bool,
    pub source: Option<Source>,
    pub pods: Vec<String>,
    pub exit_code: Option<i32>,
    pub output: Option<serde_json::Value>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub error_code: Option<ErrorCode>,
    pub error_message: Option<String>,
    pub created_at: OffsetDateTime,
    pub assigned_at: Option<OffsetDateTime>,
    pub started_at: Option<OffsetDateTime>,
    pub finished_at: Option<OffsetDateTime>,
    pub queued_ms: Option<f64>,
    pub acquire_ms: Option<f64>,
    pub bind_ms: Option<f64>,
    pub run_ms: Option<f64>,
    pub total_ms: Option<f64>,
    /// The W3C `traceparent` the job was accepted in, if any.
    pub traceparent: Option<String>,
}

/// A job to insert in state `queued`.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub job_id: Uuid,
    pub tenant_id: Uuid,
    pub kind: Kind,
    pub profile: String,
    pub caller: String,
    pub priority: i32,
    pub spec: serde_json::Value,
    pub idempotency_key: Option<String>,
    /// Hash of the request body, compared when the idempotency key repeats.
    pub request_hash: Option<String>,
    /// The W3C `traceparent` the job's spans and processes continue.
    pub traceparent: Option<String>,
}

/// What [`insert`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Inserted {
    New(JobRow),
    /// The idempotency key was seen before with the same request.
    Existing(JobRow),
}

/// Inserts a queued job. With an idempotency key already used for the same
/// request, returns the existing job; with another request, fails with
/// [`Error::IdempotencyMismatch`].
#[tracing::instrument(skip_all, fields(job_id = %job.job_id))]
pub async fn insert(db: &mut PgConnection, job: &NewJob) -> Result<Inserted> {
    let inserted = job_rows!(
        "insert into job (job_id, tenant_id, kind, profile, caller, state, priority, spec,
                          idempotency_key, request_hash, traceparent)
         values ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9, $10)
         on conflict on constraint job_idempotency_key_unique do nothing
         returning",
        "",
        job.job_id,
        job.tenant_id,
        job.kind as _,
        job.profile,
        job.caller,
        job.priority,
        job.spec,
        job.idempotency_key,
        job.request_hash,
        job.traceparent,
    )
    .fetch_optional(&mut *db)
    .await?;
    if let Some(row) = inserted {
        return Ok(Inserted::New(row));
    }
    let existing = job_rows!(
        "select",
        "from job where tenant_id = $1 and idempotency_key = $2",
        job.tenant_id,
        job.idempotency_key
    )
    .fetch_one(&mut *db)
    .await?;
    repeated(job, existing)
}

/// What an insert of `job` that found `existing` under its idempotency key
/// did: nothing for the same request, a mismatch for another.
fn repeated(job: &NewJob, existing: JobRow) -> Result<Inserted> {
    if existing.request_hash == job.request_hash {
        Ok(Inserted::Existing(existing))
    } else {
        Err(Error::IdempotencyMismatch)
    }
}

/// [`insert`] for many jobs in one statement: what a batch and the group
/// commit of accepted jobs run. The outcome of each job, in their order, as
/// [`insert`] would have had it inserting them one after another (a key
/// repeated within `jobs` finds its first use); a mismatch fails only its
/// own item. Run it in a transaction for all or none.
#[tracing::instrument(skip_all, fields(jobs = jobs.len()))]
pub async fn insert_many(db: &mut PgConnection, jobs: &[NewJob]) -> Result<Vec<Result<Inserted>>> {
    let ids: Vec<Uuid> = jobs.iter().map(|j| j.job_id).collect();
    let tenants: Vec<Uuid> = jobs.iter().map(|j| j.tenant_id).collect();
    let kinds: Vec<&str> = jobs.iter().map(|j| j.kind.as_str()).collect();
    let profiles: Vec<&str> = jobs.iter().map(|j| j.profile.as_str()).collect();
    let callers: Vec<&str> = jobs.iter().map(|j| j.caller.as_str()).collect();
    let priorities: Vec<i32> = jobs.iter().map(|j| j.priority).collect();
    let specs: Vec<&serde_json::Value> = jobs.iter().map(|j| &j.spec).collect();
    let keys: Vec<Option<&str>> = jobs.iter().map(|j| j.idempotency_key.as_deref()).collect();
    let hashes: Vec<Option<&str>> = jobs.iter().map(|j| j.request_hash.as_deref()).collect();
    let traces: Vec<Option<&str>> = jobs.iter().map(|j| j.traceparent.as_deref()).collect();
    // In the jobs' order, so that of two uses of a key the first is inserted.
    let rows: Vec<JobRow> = sqlx::query_as(
        "insert into job (job_id, tenant_id, kind, profile, caller, state, priority, spec,
                          idempotency_key, request_hash, traceparent)
         select j.job_id, j.tenant_id, j.kind, j.profile, j.caller, 'queued', j.priority, j.spec,
                j.idempotency_key, j.request_hash, j.traceparent
           from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::int4[],
                       $7::jsonb[], $8::text[], $9::text[], $10::text[]) with ordinality
             as j(job_id, tenant_id, kind, profile, caller, priority, spec, idempotency_key,
                  request_hash, traceparent, ord)
          order by j.ord
         on conflict on constraint job_idempotency_key_unique do nothing
         returning job.*",
    )
    .bind(&ids)
    .bind(&tenants)
    .bind(&kinds)
    .bind(&profiles)
    .bind(&callers)
    .bind(&priorities)
    .bind(&specs)
    .bind(&keys)
    .bind(&hashes)
    .bind(&traces)
    .fetch_all(&mut *db)
    .await?;
    let mut new: HashMap<Uuid, JobRow> = rows.into_iter().map(|r| (r.job_id, r)).collect();
    // The rest repeated a key: read what holds it.
    let repeats: Vec<&NewJob> = jobs
        .iter()
        .filter(|j| !new.contains_key(&j.job_id))
        .collect();
    let mut held: HashMap<(Uuid, String), JobRow> = HashMap::new();
    if !repeats.is_empty() {
        let tenants: Vec<Uuid> = repeats.iter().map(|j| j.tenant_id).collect();
        let keys: Vec<Option<&str>> = repeats
            .iter()
            .map(|j| j.idempotency_key.as_deref())
            .collect();
        // Planned at every call: a batch runs this on the main pool, where
        // a plan kept from when the table was small could scan all of it
        // (see `WRITER_SETTINGS` in the crate root); and it runs only when
        // a key repeats.
        let rows: Vec<JobRow> = sqlx::query_as(
            "select job.* from job
               join (select distinct * from unnest($1::uuid[], $2::text[])) as k(tenant_id, key)
                 on job.tenant_id = k.tenant_id and job.idempotency_key = k.key",
        )
        .bind(&tenants)
        .bind(&keys)
        .persistent(false)
        .fetch_all(&mut *db)
        .await?;
        held = rows
            .into_iter()
            .filter_map(|r| Some(((r.tenant_id, r.idempotency_key.clone()?), r)))
            .collect();
    }
    jobs.iter()
        .map(|j| {
            if let Some(row) = new.remove(&j.job_id) {
                return Ok(Ok(Inserted::New(row)));
            }
            // Only a key can keep a job out: any other conflict is an error.
            let existing = j
                .idempotency_key
                .clone()
                .and_then(|key| held.get(&(j.tenant_id, key)).cloned())
                .ok_or(Error::Database(sqlx::Error::RowNotFound))?;
            Ok(repeated(j, existing))
        })
        .collect()
}

/// A tenant's job.
#[tracing::instrument(skip(db))]
pub async fn get(db: impl PgExecutor<'_>, tenant_id: Uuid, job_id: Uuid) -> Result<Option<JobRow>> {
    Ok(job_rows!(
        "select",
        "from job where tenant_id = $1 and job_id = $2",
        tenant_id,
        job_id
    )
    .fetch_optional(db)
    .await?)
}

/// Filters of [`list`]; `None` matches everything.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub state: Option<State>,
    pub kind: Option<Kind>,
    pub caller: Option<String>,
    pub profile: Option<String>,
    /// Keyset cursor: only jobs older than this one.
    pub before: Option<Uuid>,
    /// Only ids in `[id_from, id_to)` (an id prefix).
    pub id_from: Option<Uuid>,
    pub id_to: Option<Uuid>,
    /// Only jobs created in `[created_after, created_before)`.
    pub created_after: Option<OffsetDateTime>,
    pub created_before: Option<OffsetDateTime>,
    pub limit: i64,
}

/// A tenant's jobs, newest first.
#[tracing::instrument(skip(db))]
pub async fn list(db: impl PgExecutor<'_>, tenant_id: Uuid, f: &Filter) -> Result<Vec<JobRow>> {
    // No index covers `state` (see the `job_hot_updates` migration): a
    // state filter also names what the indexes cover, an unfinished job
    // or how a job ended.
    let unfinished = f.state.filter(|s| !s.is_terminal()).map(|_| true);
    let outcome = f.state.filter(|s| s.is_terminal());
    Ok(job_rows!(
        "select",
        "from job
         where tenant_id = $1
           and ($2::text is null or state = $2)
           and ($12::bool is null or unfinished = $12)
           and ($13::text is null or outcome = $13)
           and ($3::text is null or kind = $3)
           and ($4::text is null or caller = $4)
           and ($5::text is null or profile = $5)
           and ($6::uuid is null or job_id < $6)
           and ($8::uuid is null or job_id >= $8)
           and ($9::uuid is null or job_id < $9)
           and ($10::timestamptz is null or created_at >= $10)
           and ($11::timestamptz is null or created_at < $11)
         order by job_id desc
         limit $7",
        tenant_id,
        f.state as _,
        f.kind as _,
        f.caller,
        f.profile,
        f.before,
        f.limit,
        f.id_from,
        f.id_to,
        f.created_after,
        f.created_before,
        unfinished,
        outcome as _,
    )
    .fetch_all(db)
    .await?)
}

/// Every job not yet finished, highest priority and oldest first: what a new
/// scheduler leader rebuilds its queue from. A row the code cannot read does
/// not hide the others: see [`Readable`].
#[tracing::instrument(skip(db))]
pub async fn unfinished(db: &PgPool) -> Result<Readable> {
    let all = job_rows!(
        "select",
        "from job where unfinished
         order by priority desc, job_id"
    )
    .fetch_all(db)
    .await;
    match all {
        Ok(rows) => Ok(Readable::all(rows)),
        Err(e) if is_unreadable(&e) => {
            let ids = sqlx::query_scalar!(
                "select job_id from job where unfinished order by priority desc, job_id"
            )
            .fetch_all(db)
            .await?;
            one_by_one(db, &ids, |_| true).await
        }
        Err(e) => Err(e.into()),
    }
}

/// Queued jobs created after `after`. Not a way to find jobs other replicas
/// accepted: ids minted in different processes commit out of order. The
/// scheduler uses [`queued_ids`] and [`queued_by_ids`].
#[tracing::instrument(skip(db))]
pub async fn queued_after(db: impl PgExecutor<'_>, after: Uuid) -> Result<Vec<JobRow>> {
    Ok(job_rows!(
        "select",
        "from job where unfinished and state = 'queued' and job_id > $1 order by job_id",
        after
    )
    .fetch_all(db)
    .await?)
}

/// Ids of every queued job: what a scheduler compares with the jobs it holds
/// to find those accepted elsewhere, whatever their ids and commit order.
#[tracing::instrument(skip(db))]
pub async fn queued_ids(db: impl PgExecutor<'_>) -> Result<Vec<Uuid>> {
    Ok(
        sqlx::query_scalar!("select job_id from job where unfinished and state = 'queued'")
            .fetch_all(db)
            .await?,
    )
}

/// Those of `ids` that are still queued, highest priority and oldest first.
/// A row the code cannot read does not hide the others: see [`Readable`].
#[tracing::instrument(skip_all, fields(jobs = ids.len()))]
pub async fn queued_by_ids(db: &PgPool, ids: &[Uuid]) -> Result<Readable> {
    let all = job_rows!(
        "select",
        "from job where job_id = any($1) and state = 'queued'
         order by priority desc, job_id",
        ids
    )
    .fetch_all(db)
    .await;
    match all {
        Ok(rows) => Ok(Readable::all(rows)),
        Err(e) if is_unreadable(&e) => {
            let mut readable = one_by_one(db, ids, |row| row.state == State::Queued).await?;
            readable
                .rows
                .sort_by_key(|row| (std::cmp::Reverse(row.priority), row.job_id));
            Ok(readable)
        }
        Err(e) => Err(e.into()),
    }
}

/// Unfinished jobs as read by a scan, where one row may not decode (a value
/// the code cannot represent, a name a newer version wrote): reading them all
/// at once fails on such a row, so the scan reads them again one at a time
/// and reports the rows it cannot read apart from the others, which it
/// returns in the scan's order. The rows it cannot read are left as they are.
#[derive(Debug, Default)]
pub struct Readable {
    pub rows: Vec<JobRow>,
    /// The jobs whose row does not decode, with why.
    pub unreadable: Vec<(Uuid, sqlx::Error)>,
}

impl Readable {
    fn all(rows: Vec<JobRow>) -> Readable {
        Readable {
            rows,
            unreadable: Vec::new(),
        }
    }
}

/// Whether a query failed on a value it read rather than in the database.
fn is_unreadable(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_))
}

/// The unfinished jobs among `ids`, read one at a time, in `ids`' order;
/// those `keep` refuses are left out.
async fn one_by_one(db: &PgPool, ids: &[Uuid], keep: impl Fn(&JobRow) -> bool) -> Result<Readable> {
    let mut readable = Readable::default();
    for &id in ids {
        let one = job_rows!("select", "from job where job_id = $1 and unfinished", id)
            .fetch_optional(db)
            .await;
        match one {
            Ok(Some(row)) if keep(&row) => readable.rows.push(row),
            Ok(_) => {}
            Err(e) if is_unreadable(&e) => readable.unreadable.push((id, e)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(readable)
}

/// Jobs holding pods whose cancellation was requested (possibly through
/// another replica).
#[tracing::instrument(skip(db))]
pub async fn cancel_requested(db: impl PgExecutor<'_>) -> Result<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(
        "select job_id from job
         where unfinished and state in ('assigned', 'running') and cancel_requested"
    )
    .fetch_all(db)
    .await?)
}

/// `queued -> assigned`. Returns false if the job is no longer queued or was
/// cancelled meanwhile, or `epoch` is not the current leadership epoch.
pub async fn assign(
    db: impl PgExecutor<'_>,
    epoch: i64,
    job_id: Uuid,
    source: Source,
    pods: &[String],
    queued_ms: f64,
) -> Result<bool> {
    Ok(assign_attempt(db, epoch, job_id, source, pods, queued_ms)
        .await?
        .is_some())
}

/// `queued -> assigned`, returning the attempt this assignment starts (1 for
/// the first); `None` if the job is no longer queued or was cancelled
/// meanwhile, or `epoch` is not the current leadership epoch.
#[tracing::instrument(skip(db))]
pub async fn assign_attempt(
    db: impl PgExecutor<'_>,
    epoch: i64,
    job_id: Uuid,
    source: Source,
    pods: &[String],
    queued_ms: f64,
) -> Result<Option<i32>> {
    Ok(sqlx::query_scalar!(
        "update job set state = $6, source = $2, pods = $3, queued_ms = $4,
                        attempts = attempts + 1, assigned_at = now()
         where job_id = $1 and state = any($7) and not cancel_requested
           and exists (select 1 from leadership where epoch = $5 for share)
         returning attempts",
        job_id,
        source as _,
        pods,
        queued_ms,
        epoch,
        State::Assigned as _,
        &State::before(State::Assigned) as _,
    )
    .fetch_optional(db)
    .await?)
}

/// One job's assignment, for [`assign_many`].
#[derive(Debug, Clone, PartialEq)]
pub struct Assign {
    pub job_id: Uuid,
    pub source: Source,
    pub pods: Vec<String>,
    pub queued_ms: f64,
}

/// [`assign_attempt`] for many jobs at once, in one statement: what the
/// scheduler's group commit of assignments runs. Returns the attempt each
/// assigned job starts, by job; a job left out was no longer queued, was
/// cancelled, or `epoch` is not current.
///
/// Meant for a writer's connection ([`crate::connect_relaxed`]), where it
/// is planned once, through the key.
#[tracing::instrument(skip(db, jobs), fields(jobs = jobs.len()))]
pub async fn assign_many(
    db: impl PgExecutor<'_>,
    epoch: i64,
    jobs: &[&Assign],
) -> Result<Vec<(Uuid, i32)>> {
    let ids: Vec<Uuid> = jobs.iter().map(|a| a.job_id).collect();
    let sources: Vec<&str> = jobs.iter().map(|a| a.source.as_str()).collect();
    let pods: Vec<serde_json::Value> = jobs.iter().map(|a| serde_json::json!(a.pods)).collect();
    let queued: Vec<f64> = jobs.iter().map(|a| a.queued_ms).collect();
    sqlx::query_as(
        "update job set state = $5, source = u.u_source,
                        pods = array(select jsonb_array_elements_text(u.u_pods)),
                        queued_ms = u.u_queued_ms, attempts = attempts + 1, assigned_at = now()
           from unnest($1::uuid[], $2::text[], $3::jsonb[], $4::float8[])
             as u(u_job_id, u_source, u_pods, u_queued_ms)
         where job.job_id = u.u_job_id and job.state = any($6) and not job.cancel_requested
           and exists (select 1 from leadership where epoch = $7 for share)
         returning job.job_id, job.attempts",
    )
    .bind(&ids)
    .bind(&sources)
    .bind(&pods)
    .bind(&queued)
    .bind(State::Assigned)
    .bind(State::before(State::Assigned))
    .bind(epoch)
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// `assigned -> running`, once the pods are acquired and bound (by the
/// leader of `epoch`, still current).
#[tracing::instrument(skip(db))]
pub async fn start(
    db: impl PgExecutor<'_>,
    epoch: i64,
    job_id: Uuid,
    acquire_ms: f64,
    bind_ms: f64,
) -> Result<bool> {
    let done = sqlx::query!(
        "update job set state = $5, started_at = now(), acquire_ms = $2, bind_ms = $3
         where job_id = $1 and state = any($6)
           and exists (select 1 from leadership where epoch = $4 for share)",
        job_id,
        acquire_ms,
        bind_ms,
        epoch,
        State::Running as _,
        &State::before(State::Running) as _,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// One job's start, for [`start_many`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Start {
    pub job_id: Uuid,
    pub acquire_ms: f64,
    pub bind_ms: f64,
}

/// [`start`] for many jobs at once, in one statement: what the scheduler's
/// group commit of starts runs (a step's jobs, submitted together, start
/// together). Returns the jobs it started; a job left out was no longer
/// assigned, or `epoch` is not current.
///
/// Meant for a writer's connection ([`crate::connect_relaxed`]), where it
/// is planned once, through the key.
#[tracing::instrument(skip(db, starts), fields(jobs = starts.len()))]
pub async fn start_many(
    db: impl PgExecutor<'_>,
    epoch: i64,
    starts: &[&Start],
) -> Result<Vec<Uuid>> {
    let ids: Vec<Uuid> = starts.iter().map(|s| s.job_id).collect();
    let acquire: Vec<f64> = starts.iter().map(|s| s.acquire_ms).collect();
    let bind: Vec<f64> = starts.iter().map(|s| s.bind_ms).collect();
    sqlx::query_scalar(
        "update job set state = $4, started_at = now(), acquire_ms = u.u_acquire_ms,
                        bind_ms = u.u_bind_ms
           from unnest($1::uuid[], $2::float8[], $3::float8[]) as u(u_job_id, u_acquire_ms, u_bind_ms)
         where job.job_id = u.u_job_id and job.state = any($5)
           and exists (select 1 from leadership where epoch = $6 for share)
         returning job.job_id",
    )
    .bind(&ids)
    .bind(&acquire)
    .bind(&bind)
    .bind(State::Running)
    .bind(State::before(State::Running))
    .bind(epoch)
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// `assigned | running -> queued`: the job's pod was lost and it may run
/// again. Returns false when the job has had `max_attempts` attempts (or no
/// longer holds pods, or was cancelled), or `epoch` is not current.
#[tracing::instrument(skip(db))]
pub async fn requeue(
    db: impl PgExecutor<'_>,
    epoch: i64,
    job_id: Uuid,
    max_attempts: i32,
) -> Result<bool> {
    let done = sqlx::query!(
        "update job set state = $4, source = null, pods = '{}', assigned_at = null,
                        started_at = null
         where job_id = $1 and state = any($5) and attempts < $2
           and not cancel_requested
           and exists (select 1 from leadership where epoch = $3 for share)",
        job_id,
        max_attempts,
        epoch,
        State::Queued as _,
        &State::before(State::Queued) as _,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The end of a job.
#[derive(Debug, Clone)]
pub struct Finish {
    /// A terminal state.
    pub state: State,
    pub exit_code: Option<i32>,
    pub output: Option<serde_json::Value>,
    /// Bounded heads of the output kept on the job row.
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// Why the job did not succeed: set exactly when `state` is not
    /// `succeeded` (the store refuses anything else).
    pub error_code: Option<ErrorCode>,
    pub error_message: Option<String>,
    pub acquire_ms: Option<f64>,
    pub bind_ms: Option<f64>,
    pub run_ms: Option<f64>,
    /// How long ago (ms) the run started, for a job whose start was not
    /// written on its own (a short one's is written with its end): it
    /// becomes `started_at` by the database's clock, as every other time of
    /// the job. A start already stored is kept.
    pub started_ms_ago: Option<f64>,
    /// Full logs, stored apart when longer than the heads.
    pub full_logs: Option<(String, String)>,
}

impl Finish {
    /// Refuses what no end may be: a state that is not final, or an error
    /// code on a success and none on a failure.
    fn check(&self) -> Result<()> {
        if !self.state.is_terminal()
            || self.error_code.is_some() == (self.state == State::Succeeded)
        {
            return Err(Error::NotTerminal(self.state, self.error_code));
        }
        Ok(())
    }

    /// An end in `state` and nothing else yet (no output, no error).
    pub fn new(state: State) -> Finish {
        Finish {
            state,
            exit_code: None,
            output: None,
            stdout: String::new(),
            stderr: String::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            error_code: None,
            error_message: None,
            acquire_ms: None,
            bind_ms: None,
            run_ms: None,
            started_ms_ago: None,
            full_logs: None,
        }
    }

    /// An unsuccessful end: `state` with `code` and its message.
    pub fn failed(state: State, code: ErrorCode, message: impl Into<String>) -> Finish {
        Finish {
            error_code: Some(code),
            error_message: Some(message.into()),
            ..Finish::new(state)
        }
    }
}

/// Moves an unfinished job to its final state and stores its logs. Returns the
/// final row, or `None` if the job had already finished, the lifecycle does
/// not allow its state to become `f.state`, or `epoch` is not the current
/// leadership epoch (a stale leader never overwrites a result).
///
/// # Errors
/// [`Error::NotTerminal`] if `f.state` is not a final state, or its error
/// code is missing (or present on a success).
#[tracing::instrument(skip(db, f), fields(state = %f.state))]
pub async fn finish(
    db: &mut PgConnection,
    epoch: i64,
    job_id: Uuid,
    f: &Finish,
) -> Result<Option<JobRow>> {
    f.check()?;
    let row = job_rows!(
        "update job set state = $2, exit_code = $3, output = $4, stdout = $5, stderr = $6,
                        stdout_truncated = $7, stderr_truncated = $8, error_code = $9,
                        error_message = $10,
                        acquire_ms = coalesce($11, acquire_ms), bind_ms = coalesce($12, bind_ms),
                        run_ms = $13, finished_at = now(),
                        started_at = coalesce(started_at, now() - make_interval(secs => $16::float8 / 1000)),
                        queued_ms = coalesce(queued_ms, extract(epoch from now() - created_at) * 1000),
                        total_ms = extract(epoch from now() - created_at) * 1000
         where job_id = $1 and state = any($15)
           and exists (select 1 from leadership where epoch = $14 for share)
         returning",
        "",
        job_id,
        f.state as _,
        f.exit_code,
        f.output,
        f.stdout,
        f.stderr,
        f.stdout_truncated,
        f.stderr_truncated,
        f.error_code as _,
        f.error_message,
        f.acquire_ms,
        f.bind_ms,
        f.run_ms,
        epoch,
        &State::before(f.state) as _,
        f.started_ms_ago,
    )
    .fetch_optional(&mut *db)
    .await?;
    if let (Some(row), Some((out, err))) = (&row, &f.full_logs) {
        sqlx::query!(
            "insert into job_log (job_id, tenant_id, stdout, stderr) values ($1, $2, $3, $4)
             on conflict (job_id) do update set stdout = excluded.stdout, stderr = excluded.stderr",
            job_id,
            row.tenant_id,
            out,
            err
        )
        .execute(&mut *db)
        .await?;
    }
    Ok(row)
}

/// [`finish`] for many jobs at once, in one statement per final state (on
/// the caller's connection or transaction): what the scheduler's group
/// commit of job ends runs, so that concurrent ends share a commit. Returns
/// the rows it finished; a job left out had already finished, could not
/// become its state, or `epoch` is not current. Ends with full logs are
/// refused (they are stored by [`finish`], with their logs).
///
/// Meant for a writer's connection ([`crate::connect_writers_with`]), where
/// it is planned once, through the key.
///
/// # Errors
/// [`Error::NotTerminal`] as [`finish`], before anything is written.
#[tracing::instrument(skip(db, ends), fields(jobs = ends.len()))]
pub async fn finish_many(
    db: &mut PgConnection,
    epoch: i64,
    ends: &[(Uuid, &Finish)],
) -> Result<Vec<JobRow>> {
    for (_, f) in ends {
        f.check()?;
        if f.full_logs.is_some() {
            return Err(Error::NotTerminal(f.state, f.error_code));
        }
    }
    let mut finished = Vec::with_capacity(ends.len());
    for state in State::ALL.iter().copied().filter(|s| s.is_terminal()) {
        let group: Vec<&(Uuid, &Finish)> = ends.iter().filter(|(_, f)| f.state == state).collect();
        if group.is_empty() {
            continue;
        }
        let ids: Vec<Uuid> = group.iter().map(|(id, _)| *id).collect();
        let exit_codes: Vec<Option<i32>> = group.iter().map(|(_, f)| f.exit_code).collect();
        let outputs: Vec<Option<serde_json::Value>> =
            group.iter().map(|(_, f)| f.output.clone()).collect();
        let stdouts: Vec<&str> = group.iter().map(|(_, f)| f.stdout.as_str()).collect();
        let stderrs: Vec<&str> = group.iter().map(|(_, f)| f.stderr.as_str()).collect();
        let stdout_cut: Vec<bool> = group.iter().map(|(_, f)| f.stdout_truncated).collect();
        let stderr_cut: Vec<bool> = group.iter().map(|(_, f)| f.stderr_truncated).collect();
        let codes: Vec<Option<&str>> = group
            .iter()
            .map(|(_, f)| f.error_code.map(|c| c.as_str()))
            .collect();
        let messages: Vec<Option<&str>> = group
            .iter()
            .map(|(_, f)| f.error_message.as_deref())
            .collect();
        let acquire: Vec<Option<f64>> = group.iter().map(|(_, f)| f.acquire_ms).collect();
        let bind: Vec<Option<f64>> = group.iter().map(|(_, f)| f.bind_ms).collect();
        let run: Vec<Option<f64>> = group.iter().map(|(_, f)| f.run_ms).collect();
        let started_ago: Vec<Option<f64>> = group.iter().map(|(_, f)| f.started_ms_ago).collect();
        let rows: Vec<JobRow> = sqlx::query_as(
            "update job set state = $2, exit_code = u.u_exit_code, output = u.u_output,
                            stdout = u.u_stdout, stderr = u.u_stderr,
                            stdout_truncated = u.u_stdout_truncated,
                            stderr_truncated = u.u_stderr_truncated,
                            error_code = u.u_error_code, error_message = u.u_error_message,
                            acquire_ms = coalesce(u.u_acquire_ms, job.acquire_ms),
                            bind_ms = coalesce(u.u_bind_ms, job.bind_ms),
                            run_ms = u.u_run_ms, finished_at = now(),
                            started_at = coalesce(job.started_at,
                                now() - make_interval(secs => u.u_started_ms_ago / 1000)),
                            queued_ms = coalesce(job.queued_ms, extract(epoch from now() - job.created_at) * 1000),
                            total_ms = extract(epoch from now() - job.created_at) * 1000
               from unnest($1::uuid[], $5::int4[], $6::jsonb[], $7::text[], $8::text[], $9::bool[],
                           $10::bool[], $11::text[], $12::text[], $13::float8[], $14::float8[],
                           $15::float8[], $16::float8[])
                 as u(u_job_id, u_exit_code, u_output, u_stdout, u_stderr, u_stdout_truncated,
                      u_stderr_truncated, u_error_code, u_error_message, u_acquire_ms, u_bind_ms,
                      u_run_ms, u_started_ms_ago)
             where job.job_id = u.u_job_id and job.state = any($4)
               and exists (select 1 from leadership where epoch = $3 for share)
             returning job.*",
        )
        .bind(&ids)
        .bind(state)
        .bind(epoch)
        .bind(State::before(state))
        .bind(&exit_codes)
        .bind(&outputs)
        .bind(&stdouts)
        .bind(&stderrs)
        .bind(&stdout_cut)
        .bind(&stderr_cut)
        .bind(&codes)
        .bind(&messages)
        .bind(&acquire)
        .bind(&bind)
        .bind(&run)
        .bind(&started_ago)
        .fetch_all(&mut *db)
        .await?;
        finished.extend(rows);
    }
    Ok(finished)
}

/// What [`request_cancel`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancel {
    /// The job was queued and is now cancelled.
    Cancelled(JobRow),
    /// The job holds pods; the scheduler must stop it.
    Requested(JobRow),
    /// The job had already finished.
    Finished(JobRow),
    NotFound,
}

/// Cancels a queued job at once, or marks a running one for the scheduler.
#[tracing::instrument(skip(db))]
pub async fn request_cancel(
    db: &mut PgConnection,
    tenant_id: Uuid,
    job_id: Uuid,
) -> Result<Cancel> {
    // A queued job holds nothing: it ends here. One that holds pods is
    // marked, and its scheduler stops it and records its end.
    let row = job_rows!(
        "update job set cancel_requested = true,
                        state = case when state = 'queued' then $3 else state end,
                        error_code = case when state = 'queued' then $4 else error_code end,
                        error_message = case when state = 'queued' then 'cancelled before it started'
                                             else error_message end,
                        finished_at = case when state = 'queued' then now() else finished_at end,
                        total_ms = case when state = 'queued'
                                        then extract(epoch from now() - created_at) * 1000
                                        else total_ms end
         where tenant_id = $1 and job_id = $2 and state = any($5)
         returning",
        "",
        tenant_id,
        job_id,
        State::Cancelled as _,
        ErrorCode::Cancelled as _,
        &State::before(State::Cancelled) as _,
    )
    .fetch_optional(&mut *db)
    .await?;
    Ok(match row {
        Some(r) if r.state == State::Cancelled => Cancel::Cancelled(r),
        Some(r) => Cancel::Requested(r),
        None => match get(&mut *db, tenant_id, job_id).await? {
            Some(r) => Cancel::Finished(r),
            None => Cancel::NotFound,
        },
    })
}

/// Full logs of a tenant's job: `(stdout, stderr)`. Falls back to the row's
/// heads when nothing longer was stored.
#[tracing::instrument(skip(db))]
pub async fn logs(
    db: &mut PgConnection,
    tenant_id: Uuid,
    job_id: Uuid,
) -> Result<Option<(String, String)>> {
    let full = sqlx::query!(
        "select stdout, stderr from job_log where tenant_id = $1 and job_id = $2",
        tenant_id,
        job_id
    )
    .fetch_optional(&mut *db)
    .await?;
    if let Some(r) = full {
        return Ok(Some((r.stdout, r.stderr)));
    }
    Ok(get(&mut *db, tenant_id, job_id)
        .await?
        .map(|r| (r.stdout, r.stderr)))
}

/// The channel on which job state changes are announced (`LISTEN hearth_job`).
pub const CHANNEL: &str = "hearth_job";

/// A job's state change, as announced on [`CHANNEL`] once it committed. A
/// hint to wake watchers: whoever acts on it reads the job row again, so a
/// lost or late notification never makes anything wrong, only later.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Change {
    #[serde(rename = "job")]
    pub job_id: Uuid,
    #[serde(rename = "tenant")]
    pub tenant_id: Uuid,
    /// The job's state after the change.
    pub state: State,
    /// A running job's cancellation was requested (its state is unchanged).
    #[serde(default, rename = "cancel", skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
}

impl Change {
    /// The change that left a job as `row` has it.
    pub fn of(row: &JobRow) -> Change {
        Change {
            job_id: row.job_id,
            tenant_id: row.tenant_id,
            state: row.state,
            cancel_requested: row.cancel_requested && !row.state.is_terminal(),
        }
    }

    /// The notification payload (about 110 bytes; Postgres allows 8000).
    pub fn payload(&self) -> String {
        serde_json::to_string(self).expect("a change serializes")
    }

    /// A payload of [`Change::payload`]; `None` for anything else.
    pub fn parse(payload: &str) -> Option<Change> {
        serde_json::from_str(payload).ok()
    }
}

/// Announces committed changes on [`CHANNEL`], one notification each, in one
/// short transaction of its own. Not inside the transaction that made the
/// change: a notifying commit holds a cluster-wide lock until it is flushed,
/// which would serialize the commits of every job. This transaction writes
/// nothing else, so its commit waits for no flush.
#[tracing::instrument(skip_all, fields(changes = changes.len()))]
pub async fn announce(db: impl PgExecutor<'_>, changes: &[Change]) -> Result<()> {
    let payloads: Vec<String> = changes.iter().map(Change::payload).collect();
    sqlx::query_scalar!(
        r#"select count(pg_notify($1, p)) as "sent!" from unnest($2::text[]) as p"#,
        CHANNEL,
        &payloads
    )
    .fetch_one(db)
    .await?;
    Ok(())
}

/// Sends one notification on [`CHANNEL`] that is not a [`Change`] (a
/// replica's hello), outside any transaction of the caller's.
pub async fn notify(db: impl PgExecutor<'_>, payload: &str) -> Result<()> {
    sqlx::query_scalar!(
        r#"select pg_notify($1, $2) is null as "sent!""#,
        CHANNEL,
        payload
    )
    .fetch_one(db)
    .await?;
    Ok(())
}

/// A tenant's jobs of one profile, state and source, accepted in a window.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    pub profile: String,
    pub state: State,
    /// `None`: the jobs never got a pod.
    pub source: Option<Source>,
    pub jobs: i64,
    /// Their run time.
    pub run_ms: f64,
    /// Their run time times the pods each held (a gang's pods all run).
    pub pod_run_ms: f64,
}

/// A tenant's jobs accepted at or after `since`, by profile, state and
/// source. Ids are UUIDv7 minted at acceptance, so the bound on the id keeps
/// the scan to the window on the tenant's index.
#[tracing::instrument(skip(db))]
pub async fn usage(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    since: OffsetDateTime,
) -> Result<Vec<UsageRow>> {
    let since_ms = u128::try_from(since.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    // The smallest v7 id of that millisecond, a millisecond early for clocks.
    let first_id = Uuid::from_u128(since_ms.saturating_sub(1) << 80);
    Ok(sqlx::query_as!(
        UsageRow,
        r#"select profile, state as "state: State", source as "source: Source",
                  count(*) as "jobs!",
                  coalesce(sum(run_ms), 0) as "run_ms!",
                  coalesce(sum(run_ms * greatest(cardinality(pods), 1)), 0) as "pod_run_ms!"
           from job
           where tenant_id = $1 and job_id >= $2 and created_at >= $3
           group by profile, state, source
           order by profile, state, source"#,
        tenant_id,
        first_id,
        since
    )
    .fetch_all(db)
    .await?)
}
