//! Jobs: submit (optionally waiting for the result), get, list, cancel, follow
//! their events (replayed from the store, then live), read logs.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use hearth_core::ErrorCode;
use hearth_core::job::{Kind, Source, Timing};
use hearth_core::validate::{self, CreateJob, Invalid};
use hearth_store::job::{Cancel, Filter, Inserted, JobRow, NewJob};
use hearth_store::job_event::Body;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::Instrument;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::group::{Group, Write};
use crate::http::extract::{Json, Path, Query};
use crate::hub::{JobEvent, Wake, Watch};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_job, list_jobs))
        .routes(routes!(get_job))
        .routes(routes!(cancel_job))
        .routes(routes!(get_job_events))
        .routes(routes!(get_job_logs))
        .routes(routes!(get_job_request))
}

/// How often a watcher reads its job again without being woken: the net
/// under lost notifications (see [`crate::hub`]).
const RECHECK: Duration = Duration::from_secs(2);

/// The group commit of accepted jobs: a job accepted while another accept
/// is being written waits for it and is inserted with the others that
/// arrived meanwhile, in one statement and one commit (durable, or relaxed
/// for the jobs waited for: see `answer`).
pub(crate) type Accepts = Group<AcceptWrite>;

/// Writes accepted jobs ([`hearth_store::job::insert`], `insert_many`): each
/// one's outcome, an idempotency key reused for another request failing
/// only its own job.
#[derive(Debug)]
pub(crate) struct AcceptWrite;

impl Write for AcceptWrite {
    type Item = NewJob;
    type Out = Result<Inserted, hearth_store::Error>;
    const NAME: &'static str = "accept";

    async fn one(conn: &mut PgConnection, job: &NewJob) -> Result<Self::Out, hearth_store::Error> {
        Ok(hearth_store::job::insert(conn, job).await)
    }

    /// One statement: it writes all of them or none (a key's reuse writes
    /// nothing and is read after).
    async fn many(
        conn: &mut PgConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Self::Out>, hearth_store::Error> {
        hearth_store::job::insert_many(conn, jobs).await
    }
}

/// Why a job ended badly.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobError {
    /// One of the job error codes (a closed list; see `ErrorCode`).
    pub code: ErrorCode,
    /// What happened, for a person.
    pub message: String,
}

/// A job.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobResponse {
    pub id: Uuid,
    /// `queued | assigned | running | succeeded | failed | timed_out | cancelled`.
    pub state: hearth_core::State,
    pub kind: Kind,
    pub caller: String,
    pub profile: String,
    pub priority: i32,
    /// Exit code of the command (rank 0's, or the first non-zero of a gang).
    pub exit_code: Option<i32>,
    /// The JSON the job wrote to `$HEARTH_OUTPUT`; null if none.
    pub output: Option<serde_json::Value>,
    /// Head of stdout (full logs at `/v1/jobs/{id}/logs`).
    pub stdout: String,
    pub stderr: String,
    /// Whether output was cut (here or in the full logs).
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub error: Option<JobError>,
    /// Where the job's pod came from: `warm | standby | cold`.
    pub source: Option<Source>,
    /// Pods the job ran on, in rank order.
    pub pods: Vec<String>,
    /// How many times the job was given pods.
    pub attempts: i32,
    pub timing: Timing,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub started_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
}

impl From<&JobRow> for JobResponse {
    fn from(r: &JobRow) -> Self {
        JobResponse {
            id: r.job_id,
            state: r.state,
            kind: r.kind,
            caller: r.caller.clone(),
            profile: r.profile.clone(),
            priority: r.priority,
            exit_code: r.exit_code,
            output: r.output.clone(),
            stdout: r.stdout.clone(),
            stderr: r.stderr.clone(),
            stdout_truncated: r.stdout_truncated,
            stderr_truncated: r.stderr_truncated,
            error: r.error_code.map(|code| JobError {
                code,
                message: r.error_message.clone().unwrap_or_default(),
            }),
            source: r.source,
            pods: r.pods.clone(),
            attempts: r.attempts,
            timing: Timing {
                queued_ms: r.queued_ms.unwrap_or(0.0),
                acquire_ms: r.acquire_ms.unwrap_or(0.0),
                bind_ms: r.bind_ms.unwrap_or(0.0),
                run_ms: r.run_ms.unwrap_or(0.0),
                total_ms: r.total_ms.unwrap_or(0.0),
            },
            created_at: r.created_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
        }
    }
}

pub(super) fn is_final(row: &JobRow) -> bool {
    row.state.is_terminal()
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitParams {
    /// Seconds to wait for the job to finish before answering (longer waits
    /// are cut to the service's limit, 300 by default). Finished in time:
    /// 200; else 202 with the job as it stands.
    #[param(minimum = 0)]
    pub wait: Option<f64>,
}

/// Waits until the job is final or `timeout` passes; returns the latest row.
pub(super) async fn wait_for(
    state: &AppState,
    tenant_id: Uuid,
    job_id: Uuid,
    timeout: Duration,
) -> ApiResult<JobRow> {
    let deadline = Instant::now() + timeout;
    // Watch before reading, so that the end cannot slip between the two.
    let mut watch = (!timeout.is_zero()).then(|| state.hub.watch(job_id));
    let row = hearth_store::job::get(&state.db, tenant_id, job_id)
        .await?
        .ok_or(ApiError::NotFound("job"))?;
    match &mut watch {
        Some(watch) => wait_until(state, watch, row, deadline).await,
        None => Ok(row),
    }
}

/// Follows a job from `row` until it is final, `deadline` passes or the
/// service shuts down; returns the latest row. Whatever replica runs the job,
/// a wake-up (an event here, a change announced through the store) or a
/// periodic recheck reads the row again: the store decides.
pub(super) async fn wait_until(
    state: &AppState,
    watch: &mut Watch,
    mut row: JobRow,
    deadline: Instant,
) -> ApiResult<JobRow> {
    loop {
        let now = Instant::now();
        if is_final(&row) || now >= deadline {
            return Ok(row);
        }
        let last = match watch.next(deadline.min(now + RECHECK)).await {
            Wake::Event(JobEvent::Done(done)) => return Ok((*done).clone()),
            Wake::Event(JobEvent::Logged(_)) => continue,
            Wake::Event(JobEvent::Stored(Some(s))) if !s.is_terminal() => continue,
            Wake::Event(JobEvent::Stored(_)) | Wake::Missed(_) | Wake::Timeout => false,
            Wake::Closing => true,
        };
        row = hearth_store::job::get(&state.db, row.tenant_id, row.job_id)
            .await?
            .ok_or(ApiError::NotFound("job"))?;
        if last {
            return Ok(row);
        }
    }
}

fn respond(row: &JobRow) -> (StatusCode, Json<JobResponse>) {
    let code = if is_final(row) {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    (code, Json(JobResponse::from(row)))
}

pub(super) fn wait_duration(state: &AppState, wait: Option<f64>) -> ApiResult<Duration> {
    match wait {
        None => Ok(Duration::ZERO),
        Some(w) if w.is_finite() && w >= 0.0 => Ok(Duration::from_secs_f64(
            w.min(state.config.max_wait_s as f64),
        )),
        Some(_) => Err(ApiError::InvalidRequest(
            "`wait` must be a non-negative number of seconds".into(),
        )),
    }
}

/// Whether `key` is an idempotency key, in the `Idempotency-Key` header and
/// in a batch's items alike: 1..=255 visible ASCII characters, spaces
/// allowed between them (the pattern `^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$`
/// of the document). A header value may hold a tab; a key may not.
pub(crate) fn is_idempotency_key(key: &str) -> bool {
    let visible = |b: &u8| (0x21..=0x7e).contains(b);
    let bytes = key.as_bytes();
    (1..=255).contains(&bytes.len())
        && bytes.first().is_some_and(visible)
        && bytes.last().is_some_and(visible)
        && bytes.iter().all(|b| *b == b' ' || visible(b))
}

/// What an idempotency key is bound to: the job as accepted, defaults filled
/// in, so a retry that spells out a default (or sends the body of
/// `GET /v1/jobs/{id}/request`) is the same job.
pub(crate) fn request_hash(spec: &hearth_core::job::Spec) -> String {
    hearth_core::sha256_hex(&serde_json::to_vec(spec).expect("a job spec serializes"))
}

/// Submits a job. With `wait`, answers 200 with the finished job if it ends in
/// time, else 202 with the job as it stands. An `Idempotency-Key` header makes
/// retries safe: the same key and job give the same job (a default left out
/// or spelled out is the same job); the same key with another job is 409.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", operation_id = "create_job",
    params(WaitParams, ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255,
        pattern = r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$",
        description = "Client key making the submission idempotent: 1..=255 visible ASCII characters")),
    request_body = CreateJob,
    responses(
        (status = 200, description = "Finished within `wait`", body = JobResponse),
        (status = 202, description = "Accepted; not finished yet", body = JobResponse),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, description = "`idempotency_conflict`", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 422, description = "`validation_failed`, `unknown_profile`, `unknown_bundle`", body = ErrorBody),
    ))]
async fn create_job(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<WaitParams>,
    headers: HeaderMap,
    Json(req): Json<CreateJob>,
) -> ApiResult<(StatusCode, Json<JobResponse>)> {
    let wait = wait_duration(&state, params.wait)?;
    let mut keys = headers.get_all("idempotency-key").iter();
    let idempotency_key = match keys.next() {
        None => None,
        Some(_) if keys.next().is_some() => {
            return Err(ApiError::InvalidRequest(
                "Idempotency-Key must be given once".into(),
            ));
        }
        Some(v) => Some(
            v.to_str()
                .ok()
                .filter(|k| is_idempotency_key(k))
                .ok_or_else(|| {
                    ApiError::InvalidRequest(
                        "Idempotency-Key must be 1..=255 visible ASCII characters (spaces only between them)"
                            .into(),
                    )
                })?
                .to_owned(),
        ),
    };
    // The job's first span: its trace context is stored with it, and every
    // span the scheduler writes for the job, on whichever replica leads,
    // continues it.
    let accept = tracing::info_span!(
        "job.accept",
        "hearth.job.id" = tracing::field::Empty,
        "hearth.tenant.id" = %tenant.tenant_id,
        "hearth.job.kind" = tracing::field::Empty,
        "hearth.job.profile" = tracing::field::Empty,
        "hearth.job.caller" = tracing::field::Empty,
    );
    let inserted = async {
        let spec = validate::job(req, &state.limits, |name| state.profiles.get(name)).map_err(
            |e| match e {
                Invalid::UnknownProfile(p) => ApiError::UnknownProfile(p),
                Invalid::Fields(f) => ApiError::Validation(f),
            },
        )?;
        accept.record("hearth.job.kind", spec.kind.as_str());
        accept.record("hearth.job.profile", spec.profile.as_str());
        accept.record("hearth.job.caller", spec.caller.as_str());
        if let hearth_core::job::Code::Bundle(digest) = &spec.code
            && !hearth_store::bundle::exists(&state.db, tenant.tenant_id, digest).await?
        {
            return Err(ApiError::UnknownBundle(digest.clone()));
        }
        let spec_json = serde_json::to_value(&spec).map_err(|e| ApiError::Internal(e.into()))?;
        let request_hash = idempotency_key.as_ref().map(|_| request_hash(&spec));
        let traceparent = crate::telemetry::job_trace(&accept, &headers).map(|t| t.header());
        // A job waited for is accepted with a relaxed commit: its answer
        // waits for a durable one anyway (see `answer`).
        let accepts = if wait.is_zero() {
            &state.accepts
        } else {
            &state.waited_accepts
        };
        let inserted = accepts
            .write(NewJob {
                job_id: Uuid::now_v7(),
                tenant_id: tenant.tenant_id,
                kind: spec.kind,
                profile: spec.profile,
                caller: spec.caller,
                priority: spec.priority,
                spec: spec_json,
                idempotency_key,
                request_hash,
                traceparent,
            })
            .await??;
        let (Inserted::New(row) | Inserted::Existing(row)) = &inserted;
        accept.record("hearth.job.id", tracing::field::display(row.job_id));
        Ok::<_, ApiError>(inserted)
    }
    .instrument(accept.clone())
    .await?;
    let row = match inserted {
        Inserted::New(row) => {
            // Watch before handing the job over, so that even a job ending at
            // once is seen, and the row just written need not be read back.
            let deadline = Instant::now() + wait;
            let watch = (!wait.is_zero()).then(|| state.hub.watch(row.job_id));
            accept.in_scope(|| {
                tracing::info!(job_id = %row.job_id, kind = %row.kind, "job accepted");
                // The leader, if another replica, picks it up now.
                if !state.scheduler.submit(&row) {
                    state.hub.changed(&row);
                }
            });
            drop(accept);
            let Some(mut watch) = watch else {
                // Accepted with a durable commit.
                return Ok(respond(&row));
            };
            let row = wait_until(&state, &mut watch, row, deadline).await?;
            return answer(&state, &row).await;
        }
        Inserted::Existing(row) => row,
    };
    if wait.is_zero() || is_final(&row) {
        return answer(&state, &row).await;
    }
    let row = wait_for(&state, tenant.tenant_id, row.job_id, wait).await?;
    answer(&state, &row).await
}

/// The answer to a submission of a job that may have been accepted with a
/// relaxed commit, once the job is durable.
///
/// A job waited for was accepted with a relaxed commit, and an existing job
/// found by its idempotency key may have been. A final job is durable: its
/// end was a durable commit, made after its acceptance, and the log reaches
/// disk in order. Any other is made durable here first, so that no 2xx
/// tells of a job that a crash of the database could lose.
async fn answer(state: &AppState, row: &JobRow) -> ApiResult<(StatusCode, Json<JobResponse>)> {
    if !is_final(row) {
        hearth_store::flush(&state.db).await?;
    }
    Ok(respond(row))
}

/// A job of this tenant. With `wait`, waits for it to finish like `create_job`.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs", operation_id = "get_job",
    params(("id" = Uuid, Path), WaitParams),
    responses((status = 200, description = "Finished", body = JobResponse),
              (status = 202, description = "Not finished yet", body = JobResponse),
              (status = 404, body = ErrorBody)))]
async fn get_job(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
    Query(params): Query<WaitParams>,
) -> ApiResult<(StatusCode, Json<JobResponse>)> {
    let wait = wait_duration(&state, params.wait)?;
    let row = wait_for(&state, tenant.tenant_id, id, wait).await?;
    Ok(respond(&row))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only jobs in this state.
    pub state: Option<hearth_core::State>,
    /// Only jobs of this kind.
    pub kind: Option<Kind>,
    /// Only jobs of this caller.
    #[param(pattern = r"^[^\x00]*$")]
    pub caller: Option<String>,
    /// Only jobs in this profile.
    #[param(pattern = r"^[^\x00]*$")]
    pub profile: Option<String>,
    /// Page size (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<Uuid>,
    /// Only jobs whose id starts with these hex digits (dashes ignored), as
    /// a console or a log line shows a shortened id. More digits than an id
    /// has match no job.
    #[param(pattern = r"^[0-9a-fA-F-]{1,36}$")]
    pub id_prefix: Option<String>,
    /// Only jobs accepted at or after this time (RFC 3339).
    #[serde(default, deserialize_with = "crate::http::extract::utc_time")]
    #[param(value_type = Option<String>, format = DateTime)]
    pub created_after: Option<OffsetDateTime>,
    /// Only jobs accepted before this time (RFC 3339).
    #[serde(default, deserialize_with = "crate::http::extract::utc_time")]
    #[param(value_type = Option<String>, format = DateTime)]
    pub created_before: Option<OffsetDateTime>,
}

/// The ids that start with `prefix` (hex digits, dashes ignored): the range
/// `[from, to)`, `to` absent when the prefix is all `f`.
fn id_range(prefix: &str) -> Option<(Uuid, Option<Uuid>)> {
    let hex: String = prefix.chars().filter(|c| *c != '-').collect();
    if hex.is_empty() || hex.len() > 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let bits = 4 * hex.len() as u32;
    let value = u128::from_str_radix(&hex, 16).ok()?;
    let shift = 128 - bits;
    let from = value << shift;
    let to = value
        .checked_add(1)
        .filter(|next| bits == 128 || *next >> bits == 0)
        .map(|next| Uuid::from_u128(next << shift));
    Some((Uuid::from_u128(from), to))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ListJobsResponse {
    /// Newest first.
    pub jobs: Vec<JobResponse>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<Uuid>,
}

/// This tenant's jobs, newest first, with keyset pagination.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", operation_id = "list_jobs",
    params(ListParams),
    responses((status = 200, body = ListJobsResponse), (status = 400, body = ErrorBody)))]
async fn list_jobs(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(p): Query<ListParams>,
) -> ApiResult<Json<ListJobsResponse>> {
    // Text Postgres cannot hold matches nothing; refused like any bad query.
    for (name, value) in [("caller", &p.caller), ("profile", &p.profile)] {
        if value.as_ref().is_some_and(|v| v.contains('\0')) {
            return Err(ApiError::InvalidRequest(format!(
                "`{name}` may not contain NUL"
            )));
        }
    }
    let limit = p.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(ApiError::InvalidRequest("`limit` must be 1..=200".into()));
    }
    // As the document bounds it: 1..=36 hex digits and dashes. Dashes only:
    // every id starts so. More digits than an id has: none does.
    if p.id_prefix
        .as_ref()
        .is_some_and(|v| v.is_empty() || v.len() > 36)
    {
        return Err(ApiError::InvalidRequest(
            "`id_prefix` must be 1..=36 hex digits and dashes".into(),
        ));
    }
    let digits = p
        .id_prefix
        .as_deref()
        .map(|prefix| prefix.chars().filter(|c| *c != '-').collect::<String>());
    let ids = match digits.as_deref() {
        None | Some("") => None,
        Some(hex) if !hex.chars().all(|c| c.is_ascii_hexdigit()) => {
            return Err(ApiError::InvalidRequest(
                "`id_prefix` holds hex digits and dashes only".into(),
            ));
        }
        Some(hex) => match id_range(hex) {
            Some(range) => Some(range),
            None => {
                return Ok(Json(ListJobsResponse {
                    jobs: Vec::new(),
                    next_cursor: None,
                }));
            }
        },
    };
    let rows = hearth_store::job::list(
        &state.db,
        tenant.tenant_id,
        &Filter {
            state: p.state,
            kind: p.kind,
            caller: p.caller,
            profile: p.profile,
            before: p.cursor,
            id_from: ids.map(|(from, _)| from),
            id_to: ids.and_then(|(_, to)| to),
            created_after: p.created_after,
            created_before: p.created_before,
            limit: limit + 1,
        },
    )
    .await?;
    let more = rows.len() as i64 > limit;
    let jobs: Vec<JobResponse> = rows
        .iter()
        .take(limit as usize)
        .map(JobResponse::from)
        .collect();
    let next_cursor = if more {
        jobs.last().map(|j| j.id)
    } else {
        None
    };
    Ok(Json(ListJobsResponse { jobs, next_cursor }))
}

/// Cancels a job: a queued job at once; a running one is killed (its whole
/// process tree) and ends `cancelled`. 409 if it already finished.
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "jobs", operation_id = "cancel_job",
    params(("id" = Uuid, Path)),
    responses((status = 200, description = "Cancelled", body = JobResponse),
              (status = 202, description = "Cancellation under way", body = JobResponse),
              (status = 404, body = ErrorBody), (status = 409, description = "`job_finished`", body = ErrorBody)))]
async fn cancel_job(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> ApiResult<(StatusCode, Json<JobResponse>)> {
    let mut conn = state.db.acquire().await?;
    match hearth_store::job::request_cancel(&mut conn, tenant.tenant_id, id).await? {
        Cancel::NotFound => Err(ApiError::NotFound("job")),
        Cancel::Finished(_) => Err(ApiError::JobFinished),
        Cancel::Cancelled(row) => {
            state.scheduler.cancel(id);
            state.hub.done(row.clone());
            Ok(respond(&row))
        }
        Cancel::Requested(row) => {
            drop(conn);
            // Stopped here if this replica leads, else by the leader as soon
            // as it hears of it.
            state.scheduler.cancel(id);
            state.hub.changed(&row);
            // The kill is quick; answer with the final job when it lands.
            let row =
                wait_for(&state, tenant.tenant_id, row.job_id, Duration::from_secs(5)).await?;
            // The job may have ended on its own first: then nothing was
            // cancelled.
            if is_final(&row) && row.state != hearth_core::State::Cancelled {
                return Err(ApiError::JobFinished);
            }
            Ok(respond(&row))
        }
    }
}

fn sse_json(event: &str, id: i64, data: &impl Serialize) -> Event {
    let id = id.to_string();
    Event::default()
        .event(event)
        .id(&id)
        .json_data(data)
        .unwrap_or_else(|_| Event::default().event(event).id(id))
}

#[derive(Serialize)]
struct StateData {
    state: hearth_core::State,
}

#[derive(Serialize)]
struct LineData<'a> {
    stream: hearth_core::agent::Stream,
    rank: i32,
    line: &'a str,
}

/// Stored events read (and held for sending) at a time.
const REPLAY_PAGE: i64 = 512;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsParams {
    /// Resume after the event with this id, like the `Last-Event-ID` header
    /// (for clients that cannot set headers; the header wins when both are
    /// given).
    #[param(minimum = 0)]
    pub after: Option<i64>,
}

/// The id to resume after: `Last-Event-ID` (empty is none), else `after`.
fn resume_after(headers: &HeaderMap, after: Option<i64>) -> ApiResult<Option<i64>> {
    let invalid = || {
        ApiError::InvalidRequest(
            "`Last-Event-ID` and `after` must be an event id (a non-negative integer)".into(),
        )
    };
    let header = match headers.get("last-event-id") {
        None => None,
        Some(v) => match v.to_str().map_err(|_| invalid())?.trim() {
            "" => None,
            v => Some(v.parse::<i64>().map_err(|_| invalid())?),
        },
    };
    // Both are checked, whichever wins: a bad one is an error either way.
    if after.is_some_and(|a| a < 0) {
        return Err(invalid());
    }
    match header.or(after) {
        Some(a) if a < 0 => Err(invalid()),
        a => Ok(a),
    }
}

/// An event stream following a job: replays its stored events after `last`,
/// then follows it until it is final.
struct Follow {
    state: AppState,
    tenant_id: Uuid,
    job_id: Uuid,
    watch: Watch,
    /// Id of the last event queued for the client.
    last: i64,
    queue: VecDeque<Event>,
    /// Read the store before waiting again.
    read: bool,
    /// The job as last read (or as its end was published), when it was read
    /// before the stored events that are still to be read.
    row: Option<JobRow>,
    /// Until then, this replica is taken to write the job's events and to
    /// hand them over as they are stored (it just did), so announcements of
    /// them need not be read back.
    local_until: Instant,
    ended: bool,
}

impl Follow {
    /// The next event to send; `None` once the stream has ended.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            if std::mem::take(&mut self.read) {
                self.read_store().await;
            } else {
                self.wait().await;
            }
        }
    }

    fn push(&mut self, seq: i64, body: &Body) {
        if seq <= self.last {
            return;
        }
        let event = match body {
            Body::State(s) => sse_json("state", seq, &StateData { state: *s }),
            Body::Output { stream, rank, line } => sse_json(
                "output",
                seq,
                &LineData {
                    stream: *stream,
                    rank: *rank,
                    line,
                },
            ),
        };
        self.queue.push_back(event);
        self.last = seq;
    }

    /// Waits for the job's next event here, or for a reason to read the store.
    async fn wait(&mut self) {
        match self.watch.next(Instant::now() + RECHECK).await {
            Wake::Event(JobEvent::Logged(e)) => {
                self.local_until = Instant::now() + RECHECK;
                if e.seq == self.last + 1 {
                    self.push(e.seq, &e.body);
                } else if e.seq > self.last + 1 {
                    // Stored before this watcher caught up: the store has
                    // what lies between.
                    self.read = true;
                }
            }
            Wake::Event(JobEvent::Done(row)) => {
                // Its events were all stored (and handed over) before it.
                self.row = Some((*row).clone());
                self.read = true;
            }
            Wake::Event(JobEvent::Stored(Some(s)))
                if !s.is_terminal() && Instant::now() < self.local_until => {}
            Wake::Event(JobEvent::Stored(_)) | Wake::Missed(_) | Wake::Timeout => {
                self.read = true;
            }
            // Shutting down: end cleanly; the client may resume through
            // another replica.
            Wake::Closing => {
                self.queue
                    .push_back(Event::default().comment("shutting down"));
                self.ended = true;
            }
        }
    }

    /// Reads the job, then its stored events after the last sent; once the
    /// job is final and every event is out, `done`. The job is read first: a
    /// job's end is recorded only after all its events are stored, so a final
    /// row means the events read next are all there are. A failed read is
    /// tried again at the next wake.
    async fn read_store(&mut self) {
        let db = &self.state.db;
        let row = match self.row.take() {
            Some(row) => row,
            None => match hearth_store::job::get(db, self.tenant_id, self.job_id).await {
                Ok(Some(row)) => row,
                // Gone with its tenant.
                Ok(None) => {
                    self.ended = true;
                    return;
                }
                Err(e) => {
                    tracing::debug!(job_id = %self.job_id, error = %e, "reading a followed job failed");
                    return;
                }
            },
        };
        let events = match hearth_store::job_event::after(
            db,
            self.tenant_id,
            self.job_id,
            self.last,
            REPLAY_PAGE,
        )
        .await
        {
            Ok(events) => events,
            Err(e) => {
                tracing::debug!(job_id = %self.job_id, error = %e, "reading a followed job's events failed");
                return;
            }
        };
        let more = events.len() as i64 == REPLAY_PAGE;
        for e in &events {
            self.push(e.seq, &e.body);
        }
        if more {
            // The next page once these are sent, against the same row.
            self.row = Some(row);
            self.read = true;
        } else if is_final(&row) {
            self.queue
                .push_back(sse_json("done", self.last + 1, &JobResponse::from(&row)));
            self.ended = true;
        }
    }
}

/// A job's events, live, as server-sent events.
///
/// A job's events as server-sent events, from its acceptance (or from just
/// after `Last-Event-ID`) to its end, on whichever replica: `state` on every
/// state it enters, `output` for each line it prints, and finally `done`
/// with the job object, after which the stream closes.
#[utoipa::path(get, path = "/v1/jobs/{id}/events", tag = "jobs", operation_id = "get_job_events",
    params(("id" = Uuid, Path),
           ("Last-Event-ID" = Option<i64>, Header, minimum = 0,
            description = "Resume after the event with this id (what an `EventSource` sends when it reconnects); empty is none"),
           EventsParams),
    responses(
        (status = 200, content_type = "text/event-stream", body = String,
         description = "Server-sent events, each with an `id:`, an `event:` name and one `data:` line. \
The stream replays the job's events from its acceptance (or from just after `Last-Event-ID` / `after`), \
then follows it live, and ends with `done` once the job is final; a job already final replays and ends at once. \
The same on every replica.\n\n\
* `state`: `{\"state\": \"queued\" | \"assigned\" | \"running\"}` for each state the job enters, from `queued` (id 0) on; \
a job whose pods were lost goes back to `queued` and runs again;\n\
* `output`: `{\"stream\": \"stdout\" | \"stderr\", \"rank\": <n>, \"line\": \"<text>\"}` for each line the job prints, \
up to the service's log limit per stream and run;\n\
* `done`: the job object (`JobResponse`) once the job is final, after which the stream ends.\n\n\
Ids are integers that increase strictly within the job: every replica gives an event the same id, so a client \
resuming with the id of the last event it received gets exactly the events it missed. \
Comment lines (starting with `:`) are keep-alives and carry nothing; a replica shutting down ends the stream \
with the comment `shutting down`, after which the client may resume elsewhere."),
        (status = 204, description = "The job is final and the client already has its `done` event: nothing to resume \
(an `EventSource` stops reconnecting)"),
        (status = 400, description = "`invalid_request`: the id is not a UUID, or `Last-Event-ID` / `after` is not a non-negative integer", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such job for this tenant", body = ErrorBody)))]
async fn get_job_events(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
    Query(params): Query<EventsParams>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let after = resume_after(&headers, params.after)?;
    // Watch before reading, so that every event stored after the reads
    // reaches the stream here.
    let watch = state.hub.watch(id);
    let row = hearth_store::job::get(&state.db, tenant.tenant_id, id)
        .await?
        .ok_or(ApiError::NotFound("job"))?;
    if let Some(after) = after
        && is_final(&row)
        && after > hearth_store::job_event::last(&state.db, tenant.tenant_id, id).await?
    {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let mut follow = Follow {
        state,
        tenant_id: tenant.tenant_id,
        job_id: id,
        watch,
        last: after.unwrap_or(0),
        queue: VecDeque::new(),
        read: true,
        row: Some(row),
        local_until: Instant::now(),
        ended: false,
    };
    if after.is_none() {
        // Every job starts queued; that event is not stored.
        follow.queue.push_back(sse_json(
            "state",
            0,
            &StateData {
                state: hearth_core::State::Queued,
            },
        ));
    }
    let stream = futures::stream::unfold(follow, |mut f| async move {
        let event = f.next().await?;
        Some((Ok::<_, Infallible>(event), f))
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct JobLogsResponse {
    pub stdout: String,
    pub stderr: String,
}

/// Full output of a job (up to the service's log limit per stream).
#[utoipa::path(get, path = "/v1/jobs/{id}/logs", tag = "jobs", operation_id = "get_job_logs",
    params(("id" = Uuid, Path)),
    responses((status = 200, body = JobLogsResponse), (status = 404, body = ErrorBody)))]
async fn get_job_logs(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<JobLogsResponse>> {
    let mut conn = state.db.acquire().await?;
    let (stdout, stderr) = hearth_store::job::logs(&mut conn, tenant.tenant_id, id)
        .await?
        .ok_or(ApiError::NotFound("job"))?;
    Ok(Json(JobLogsResponse { stdout, stderr }))
}

/// The job as it was accepted.
///
/// Its submission with every default filled in (timeout, priority, code,
/// dependencies): the body that submits the same job again with
/// `POST /v1/jobs`, and the input the job read.
#[utoipa::path(get, path = "/v1/jobs/{id}/request", tag = "jobs", operation_id = "get_job_request",
    params(("id" = Uuid, Path)),
    responses((status = 200, description = "The job's submission as accepted", body = CreateJob),
              (status = 404, body = ErrorBody)))]
async fn get_job_request(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<CreateJob>> {
    let row = hearth_store::job::get(&state.db, tenant.tenant_id, id)
        .await?
        .ok_or(ApiError::NotFound("job"))?;
    let spec: hearth_core::job::Spec =
        serde_json::from_value(row.spec).map_err(|e| ApiError::Internal(e.into()))?;
    Ok(Json(CreateJob {
        kind: spec.kind,
        profile: spec.profile,
        caller: spec.caller,
        command: spec.command,
        code: Some(spec.code),
        deps: Some(spec.deps),
        input: Some(spec.input),
        env: Some(spec.env),
        timeout_s: Some(spec.timeout_s),
        priority: Some(spec.priority),
        topology: spec.topology,
    }))
}

#[cfg(test)]
mod tests {
    use sqlx::PgPool;

    use super::*;

    /// Accepts handed over together are inserted together, each as an
    /// insert of its own would have it; one the database refuses (a NUL
    /// byte) fails alone.
    #[sqlx::test(migrations = "../../migrations")]
    async fn concurrent_accepts_share_a_statement_and_a_refused_one_fails_alone(db: PgPool) {
        let tenant = hearth_store::tenant::create(&db, "acme").await.unwrap();
        let metrics = std::sync::Arc::new(crate::metrics::Metrics::default());
        let accepts = Accepts::start(db.clone(), std::sync::Arc::clone(&metrics));
        let job = |caller: &str, key: Option<&str>, hash: &str| NewJob {
            job_id: Uuid::now_v7(),
            tenant_id: tenant.tenant_id,
            kind: Kind::ToolCall,
            profile: "cpu-small".to_owned(),
            caller: caller.to_owned(),
            priority: 0,
            spec: serde_json::json!({}),
            idempotency_key: key.map(str::to_owned),
            request_hash: key.map(|_| hash.to_owned()),
            traceparent: None,
        };
        let accept_all = async |jobs: Vec<NewJob>| {
            futures::future::join_all(jobs.into_iter().map(|j| accepts.write(j)))
                .await
                .into_iter()
                .map(Result::unwrap)
                .collect::<Vec<_>>()
        };
        let mut jobs: Vec<NewJob> = (0..8).map(|i| job(&format!("c{i}"), None, "")).collect();
        jobs.push(job("k", Some("key"), "h1"));
        jobs.push(job("k", Some("key"), "h1"));
        jobs.push(job("k", Some("key"), "h2"));
        let ids: Vec<Uuid> = jobs.iter().map(|j| j.job_id).collect();
        let out = accept_all(jobs).await;
        for (i, inserted) in out.iter().take(9).enumerate() {
            match inserted {
                Ok(Inserted::New(row)) => assert_eq!(row.job_id, ids[i]),
                other => panic!("accept {i}: {other:?}"),
            }
        }
        let Ok(Inserted::New(first)) = &out[8] else {
            unreachable!()
        };
        assert_eq!(out[9].as_ref().unwrap(), &Inserted::Existing(first.clone()));
        assert!(matches!(
            out[10],
            Err(hearth_store::Error::IdempotencyMismatch)
        ));
        assert_eq!(metrics.jobs_written_so_far("accept", "shared"), 11);

        let jobs: Vec<NewJob> = (0..4)
            .map(|i| job(if i == 1 { "nul \0" } else { "fine" }, None, ""))
            .collect();
        let ids: Vec<Uuid> = jobs.iter().map(|j| j.job_id).collect();
        let out = accept_all(jobs).await;
        for (i, inserted) in out.into_iter().enumerate() {
            match inserted {
                Ok(Inserted::New(row)) if i != 1 => assert_eq!(row.job_id, ids[i]),
                Err(hearth_store::Error::Database(_)) if i == 1 => {}
                other => panic!("accept {i}: {other:?}"),
            }
        }
        assert_eq!(metrics.jobs_written_so_far("accept", "alone"), 4);
        let stored: i64 = sqlx::query_scalar("select count(*) from job")
            .fetch_one(&db)
            .await
            .unwrap();
        assert_eq!(stored, 9 + 3);
    }

    #[test]
    fn idempotency_keys_are_visible_ascii_with_inner_spaces() {
        let long = "k".repeat(255);
        for ok in ["a", "step 7/rollout 3", "~!@#", long.as_str()] {
            assert!(is_idempotency_key(ok), "{ok:?}");
        }
        let too_long = "k".repeat(256);
        for bad in [
            "",
            " a",
            "a ",
            "a\tb",
            "caf\u{e9}",
            "a\nb",
            "\u{7f}",
            too_long.as_str(),
        ] {
            assert!(!is_idempotency_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_id_prefix_is_a_range_of_ids() {
        let id = |s: &str| Uuid::parse_str(s).unwrap();
        assert_eq!(
            id_range("0192ab"),
            Some((
                id("0192ab00-0000-0000-0000-000000000000"),
                Some(id("0192ac00-0000-0000-0000-000000000000"))
            ))
        );
        // Dashes and case as a person copies them; a full id is itself.
        let full = "0192AB3C-7d1e-7000-8000-00000000000f";
        assert_eq!(
            id_range(full),
            Some((id(full), Some(id("0192ab3c-7d1e-7000-8000-000000000010"))))
        );
        assert_eq!(
            id_range("ff"),
            Some((id("ff000000-0000-0000-0000-000000000000"), None))
        );
        assert_eq!(id_range(&"f".repeat(32)).unwrap().1, None);
        for bad in ["", "-", "0192g", &"0".repeat(33)] {
            assert_eq!(id_range(bad), None, "{bad:?}");
        }
    }
}
