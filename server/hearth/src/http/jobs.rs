//! Jobs: submit (optionally waiting for the result), get, list, cancel, watch
//! live, read logs.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use hearth_core::job::{Kind, Source, Timing};
use hearth_core::validate::{self, CreateJob, Invalid};
use hearth_store::job::{Cancel, Filter, Inserted, JobRow, NewJob};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use tokio::time::Instant;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::hub::{JobEvent, Wake, Watch};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_job, list_jobs))
        .routes(routes!(get_job))
        .routes(routes!(cancel_job))
        .routes(routes!(get_job_events))
        .routes(routes!(get_job_logs))
}

/// How often a watcher reads its job again without being woken: the net
/// under lost notifications (see [`crate::hub`]).
const RECHECK: Duration = Duration::from_secs(2);

/// Why a job ended badly.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobError {
    /// `nonzero_exit`, `timed_out`, `cancelled`, `deps_install_failed`,
    /// `invalid_output`, `pod_lost`, `unknown_bundle`, `bind_failed`, `spawn_failed`, ...
    pub code: String,
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
            state: hearth_core::State::parse(&r.state).unwrap_or(hearth_core::State::Failed),
            kind: Kind::parse(&r.kind).unwrap_or(Kind::ToolCall),
            caller: r.caller.clone(),
            profile: r.profile.clone(),
            priority: r.priority,
            exit_code: r.exit_code,
            output: r.output.clone(),
            stdout: r.stdout.clone(),
            stderr: r.stderr.clone(),
            stdout_truncated: r.stdout_truncated,
            stderr_truncated: r.stderr_truncated,
            error: r.error_code.as_ref().map(|code| JobError {
                code: code.clone(),
                message: r.error_message.clone().unwrap_or_default(),
            }),
            source: r.source.as_deref().and_then(Source::parse),
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

fn is_final(row: &JobRow) -> bool {
    hearth_core::State::parse(&row.state).is_some_and(hearth_core::State::is_terminal)
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct WaitParams {
    /// Seconds to wait for the job to finish before answering (0 to 300 by
    /// default). Finished in time: 200; else 202 with the job as it stands.
    pub wait: Option<f64>,
}

/// Waits until the job is final or `timeout` passes; returns the latest row.
async fn wait_for(
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
async fn wait_until(
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
            Wake::Event(JobEvent::State(_) | JobEvent::Line { .. }) => continue,
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

fn wait_duration(state: &AppState, wait: Option<f64>) -> ApiResult<Duration> {
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

/// Submits a job. With `wait`, answers 200 with the finished job if it ends in
/// time, else 202 with the job as it stands. An `Idempotency-Key` header makes
/// retries safe: the same key and body give the same job; the same key with
/// another body is 409.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", operation_id = "create_job",
    params(WaitParams, ("Idempotency-Key" = Option<String>, Header, description = "Client key making the submission idempotent")),
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
    let idempotency_key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .filter(|k| !k.is_empty() && k.len() <= 255)
                .ok_or_else(|| {
                    ApiError::InvalidRequest(
                        "Idempotency-Key must be 1..=255 visible ASCII characters".into(),
                    )
                })?
                .to_owned(),
        ),
    };
    let request_hash = idempotency_key.as_ref().map(|_| {
        hearth_core::sha256_hex(&serde_json::to_vec(&req).expect("a parsed request serializes"))
    });
    let spec =
        validate::job(req, &state.limits, |name| state.profiles.get(name)).map_err(
            |e| match e {
                Invalid::UnknownProfile(p) => ApiError::UnknownProfile(p),
                Invalid::Fields(f) => ApiError::Validation(f),
            },
        )?;
    if let hearth_core::job::Code::Bundle(digest) = &spec.code
        && !hearth_store::bundle::exists(&state.db, tenant.tenant_id, digest).await?
    {
        return Err(ApiError::UnknownBundle(digest.clone()));
    }
    let spec_json = serde_json::to_value(&spec).map_err(|e| ApiError::Internal(e.into()))?;
    let mut conn = state.db.acquire().await?;
    let inserted = hearth_store::job::insert(
        &mut conn,
        &NewJob {
            job_id: Uuid::now_v7(),
            tenant_id: tenant.tenant_id,
            kind: spec.kind.as_str(),
            profile: &spec.profile,
            caller: &spec.caller,
            priority: spec.priority,
            spec: &spec_json,
            idempotency_key: idempotency_key.as_deref(),
            request_hash: request_hash.as_deref(),
        },
    )
    .await?;
    drop(conn);
    let row = match inserted {
        Inserted::New(row) => {
            tracing::info!(job_id = %row.job_id, kind = %row.kind, "job accepted");
            // Watch before handing the job over, so that even a job ending at
            // once is seen, and the row just written need not be read back.
            let deadline = Instant::now() + wait;
            let watch = (!wait.is_zero()).then(|| state.hub.watch(row.job_id));
            state.scheduler.submit(&row);
            // The leader, if another replica, picks it up now.
            state.hub.changed(&row);
            if let Some(mut watch) = watch {
                let row = wait_until(&state, &mut watch, row, deadline).await?;
                return Ok(respond(&row));
            }
            row
        }
        Inserted::Existing(row) => row,
    };
    if wait.is_zero() || is_final(&row) {
        return Ok(respond(&row));
    }
    let row = wait_for(&state, tenant.tenant_id, row.job_id, wait).await?;
    Ok(respond(&row))
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
pub struct ListParams {
    /// Only jobs in this state.
    pub state: Option<String>,
    /// Only jobs of this kind.
    pub kind: Option<String>,
    pub caller: Option<String>,
    pub profile: Option<String>,
    /// Page size, 1..=200 (default 50).
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<Uuid>,
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
    if let Some(s) = &p.state
        && hearth_core::State::parse(s).is_none()
    {
        return Err(ApiError::InvalidRequest(format!("unknown state `{s}`")));
    }
    if let Some(k) = &p.kind
        && Kind::parse(k).is_none()
    {
        return Err(ApiError::InvalidRequest(format!("unknown kind `{k}`")));
    }
    let limit = p.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(ApiError::InvalidRequest("`limit` must be 1..=200".into()));
    }
    let rows = hearth_store::job::list(
        &state.db,
        tenant.tenant_id,
        &Filter {
            state: p.state,
            kind: p.kind,
            caller: p.caller,
            profile: p.profile,
            before: p.cursor,
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
            Ok(respond(&row))
        }
    }
}

fn sse_json(event: &str, data: &impl Serialize) -> Event {
    Event::default()
        .event(event)
        .json_data(data)
        .unwrap_or_else(|_| Event::default().event(event))
}

#[derive(Serialize)]
struct StateData<'a> {
    state: &'a str,
}

#[derive(Serialize)]
struct LineData<'a> {
    stream: hearth_core::agent::Stream,
    rank: u32,
    line: &'a str,
}

/// An event stream following a job that is not final yet.
struct Follow {
    watch: Watch,
    /// The state the client was last told.
    last: String,
}

/// Live events of a job as server-sent events: `state` (`{"state"}`) on every
/// change, `output` (`{"stream", "rank", "line"}`) for each output line as it
/// happens, and finally `done` with the job object, after which the stream
/// closes.
#[utoipa::path(get, path = "/v1/jobs/{id}/events", tag = "jobs", operation_id = "get_job_events",
    params(("id" = Uuid, Path)),
    responses(
        (status = 200, content_type = "text/event-stream", body = String,
         description = "Server-sent events, each an `event:` name and one `data:` line:\n\n\
* `state`: `{\"state\": \"<state>\"}`, the job's state when the stream opens, then each change;\n\
* `output`: `{\"stream\": \"stdout\" | \"stderr\", \"rank\": <n>, \"line\": \"<text>\"}` for each output line as it happens;\n\
* `lagged`: the number of events this client fell too far behind to receive (plain text, not JSON);\n\
* `done`: the job object (`JobResponse`) once the job is final, after which the stream ends.\n\n\
Comment lines (starting with `:`) are keep-alives and carry nothing."),
        (status = 400, description = "`invalid_request`: the id is not a UUID", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such job for this tenant", body = ErrorBody)))]
async fn get_job_events(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    // Watch before reading, so that no change slips between the two.
    let watch = state.hub.watch(id);
    let row = hearth_store::job::get(&state.db, tenant.tenant_id, id)
        .await?
        .ok_or(ApiError::NotFound("job"))?;
    let mut first = vec![sse_json("state", &StateData { state: &row.state })];
    let follow = if is_final(&row) {
        first.push(sse_json("done", &JobResponse::from(&row)));
        None
    } else {
        Some(Follow {
            watch,
            last: row.state,
        })
    };
    let tenant_id = tenant.tenant_id;
    let rest = futures::stream::unfold(follow, move |follow| {
        let state = state.clone();
        async move { next_event(&state, tenant_id, id, follow?).await }
    });
    let stream = futures::StreamExt::map(
        futures::StreamExt::chain(futures::stream::iter(first), rest),
        Ok,
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// The next event of a followed job, and how to follow it after; `None`
/// once the stream has ended. Events of a job this replica runs come from the
/// hub as they happen; for a job another replica runs, a change announced
/// through the store (or the periodic recheck) reads the row again, so the
/// stream sees every state the row passes through and ends with `done`.
async fn next_event(
    state: &AppState,
    tenant_id: Uuid,
    job_id: Uuid,
    mut f: Follow,
) -> Option<(Event, Option<Follow>)> {
    loop {
        match f.watch.next(Instant::now() + RECHECK).await {
            Wake::Event(JobEvent::State(s)) => {
                if s.as_str() != f.last {
                    f.last = s.as_str().to_owned();
                    return Some((sse_json("state", &StateData { state: &f.last }), Some(f)));
                }
                continue;
            }
            Wake::Event(JobEvent::Line { stream, rank, line }) => {
                let data = LineData {
                    stream,
                    rank,
                    line: &line,
                };
                return Some((sse_json("output", &data), Some(f)));
            }
            Wake::Event(JobEvent::Done(row)) => {
                return Some((sse_json("done", &JobResponse::from(&*row)), None));
            }
            Wake::Missed(n) => {
                let ev = Event::default().event("lagged").data(n.to_string());
                return Some((ev, Some(f)));
            }
            // Shutting down: end cleanly; the client may follow the job
            // through another replica.
            Wake::Closing => {
                return Some((Event::default().comment("shutting down"), None));
            }
            Wake::Event(JobEvent::Stored(_)) | Wake::Timeout => {}
        }
        // The store decides; a failed read is tried again at the next wake.
        let Ok(Some(row)) = hearth_store::job::get(&state.db, tenant_id, job_id).await else {
            continue;
        };
        if is_final(&row) {
            return Some((sse_json("done", &JobResponse::from(&row)), None));
        }
        if row.state != f.last {
            f.last = row.state;
            return Some((sse_json("state", &StateData { state: &f.last }), Some(f)));
        }
    }
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
