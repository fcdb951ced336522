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
use tokio::sync::broadcast::error::RecvError;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::hub::JobEvent;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_job, list_jobs))
        .routes(routes!(get_job))
        .routes(routes!(cancel_job))
        .routes(routes!(get_job_events))
        .routes(routes!(get_job_logs))
}

/// How often a watcher polls the store for a job another replica runs.
const POLL: Duration = Duration::from_millis(200);

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
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // Subscribe before reading, so the end cannot slip between the two.
        let rx = state.hub.subscribe(job_id);
        let row = hearth_store::job::get(&state.db, tenant_id, job_id)
            .await?
            .ok_or(ApiError::NotFound("job"))?;
        if is_final(&row) || tokio::time::Instant::now() >= deadline {
            return Ok(row);
        }
        match rx {
            Some(mut rx) => loop {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Ok(JobEvent::Done(row))) => return Ok((*row).clone()),
                    Ok(Ok(_) | Err(RecvError::Lagged(_))) => {}
                    // Channel gone (job re-queued elsewhere) or timed out: re-read.
                    Ok(Err(RecvError::Closed)) | Err(_) => break,
                }
            },
            None => {
                tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + POLL)).await
            }
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
            state.hub.open(row.job_id);
            let watch = state.hub.subscribe(row.job_id);
            state.scheduler.submit(&row);
            if let (false, Some(mut rx)) = (wait.is_zero(), watch) {
                let deadline = tokio::time::Instant::now() + wait;
                loop {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Ok(JobEvent::Done(done))) => return Ok(respond(&done)),
                        Ok(Ok(_) | Err(RecvError::Lagged(_))) => {}
                        // Re-queued elsewhere, or out of time: the store
                        // says how the job stands.
                        Ok(Err(RecvError::Closed)) | Err(_) => break,
                    }
                }
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let row = wait_for(&state, tenant.tenant_id, row.job_id, left).await?;
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
            state.scheduler.cancel(id);
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

enum Watch {
    Live(tokio::sync::broadcast::Receiver<JobEvent>),
    Poll { last: String },
    Ended,
}

/// Live events of a job as server-sent events: `state` (`{"state"}`) on every
/// change, `output` (`{"stream", "rank", "line"}`) for each output line as it
/// happens, and finally `done` with the job object, after which the stream
/// closes.
#[utoipa::path(get, path = "/v1/jobs/{id}/events", tag = "jobs", operation_id = "get_job_events",
    params(("id" = Uuid, Path)),
    responses((status = 200, description = "text/event-stream of `state`, `output` and `done` events", content_type = "text/event-stream", body = String),
              (status = 404, body = ErrorBody)))]
async fn get_job_events(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let rx = state.hub.subscribe(id);
    let row = hearth_store::job::get(&state.db, tenant.tenant_id, id)
        .await?
        .ok_or(ApiError::NotFound("job"))?;
    let first = vec![sse_json("state", &StateData { state: &row.state })];
    let (first, watch) = if is_final(&row) {
        let mut first = first;
        first.push(sse_json("done", &JobResponse::from(&row)));
        (first, Watch::Ended)
    } else {
        match rx {
            Some(rx) => (first, Watch::Live(rx)),
            None => (
                first,
                Watch::Poll {
                    last: row.state.clone(),
                },
            ),
        }
    };
    let tenant_id = tenant.tenant_id;
    let rest = futures::stream::unfold(watch, move |watch| {
        let state = state.clone();
        async move {
            match watch {
                Watch::Ended => None,
                Watch::Live(mut rx) => Some(match rx.recv().await {
                    Ok(JobEvent::State(s)) => (
                        sse_json("state", &StateData { state: s.as_str() }),
                        Watch::Live(rx),
                    ),
                    Ok(JobEvent::Line { stream, rank, line }) => (
                        sse_json(
                            "output",
                            &LineData {
                                stream,
                                rank,
                                line: &line,
                            },
                        ),
                        Watch::Live(rx),
                    ),
                    Ok(JobEvent::Done(row)) => {
                        (sse_json("done", &JobResponse::from(&*row)), Watch::Ended)
                    }
                    Err(RecvError::Lagged(n)) => (
                        Event::default().event("lagged").data(n.to_string()),
                        Watch::Live(rx),
                    ),
                    // Re-queued onto another replica, or ended: follow the store.
                    Err(RecvError::Closed) => (
                        Event::default().comment("following"),
                        Watch::Poll {
                            last: String::new(),
                        },
                    ),
                }),
                Watch::Poll { last } => loop {
                    tokio::time::sleep(POLL).await;
                    let Ok(Some(row)) = hearth_store::job::get(&state.db, tenant_id, id).await
                    else {
                        continue;
                    };
                    if is_final(&row) {
                        return Some((sse_json("done", &JobResponse::from(&row)), Watch::Ended));
                    }
                    if row.state != last {
                        let ev = sse_json("state", &StateData { state: &row.state });
                        return Some((ev, Watch::Poll { last: row.state }));
                    }
                },
            }
        }
    });
    let stream = futures::StreamExt::map(
        futures::StreamExt::chain(futures::stream::iter(first), rest),
        Ok,
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
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
