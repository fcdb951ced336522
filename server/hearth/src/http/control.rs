//! The ready-cohort control endpoint: register versioned policies, post
//! events (answered when they ran, optionally streamed as NDJSON), create,
//! read and delete sessions (as many per tenant as it may hold), and the
//! live accounting of the tenant's own event log. The engine and the store
//! behind it are [`crate::control`]'s.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use hearth_control::driver::Path as RunPath;
use hearth_control::policy::{Durability, MAX_REGISTERS, Regs};
use hearth_control::{ExecutorKind, Program, Spec, accounting};
use hearth_core::validate::FieldError;
use hearth_store::control::NewPolicy;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::control::{Creation, Deletion, Done, Event, Policy, SessionState, StatsError, schema};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_policy, list_policies))
        .routes(routes!(get_policy))
        .routes(routes!(create_events))
        .routes(routes!(create_session, list_sessions))
        .routes(routes!(get_session, delete_session))
        .routes(routes!(get_control_stats))
        .routes(routes!(get_control_status))
}

/// Longest session name, in bytes.
const MAX_SESSION: usize = 128;
/// Most field errors listed in one 422.
const MAX_DETAILS: usize = 50;
/// Longest stats window.
const MAX_WINDOW_S: f64 = 86_400.0;

/// One executable route of a policy.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyRouteResponse {
    pub name: String,
    /// Executable route id: SHA-256 (hex) of the body, state schema and version.
    pub route_id: String,
    /// Smallest batch (`K_r`); null: no batch wins on this machine, every
    /// event of the route runs on the CPU path.
    pub k: Option<u32>,
    /// Whether `k` was measured by `hearth control calibrate` (else the default).
    pub calibrated: bool,
}

/// A registered control policy.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyResponse {
    pub policy_id: Uuid,
    pub name: String,
    #[schema(schema_with = schema::u32_schema)]
    pub version: u32,
    pub registers: u32,
    pub inputs: u32,
    /// H: most observation-free steps one event runs on the executor.
    pub max_steps: u32,
    pub routes: Vec<PolicyRouteResponse>,
    /// `commit`: an event is answered once the state it produced is
    /// committed (a crash loses no answered event); `snapshot`: answered at
    /// once, state written every `snapshot_s` seconds (a crash loses the
    /// answered events of up to one interval).
    #[schema(value_type = String, example = "commit")]
    pub durability: Durability,
    /// The policy as registered (normalised).
    #[schema(schema_with = schema::policy_ref)]
    pub spec: serde_json::Value,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

impl From<&Policy> for PolicyResponse {
    fn from(p: &Policy) -> Self {
        PolicyResponse {
            policy_id: p.policy_id,
            name: p.program.name().to_owned(),
            version: p.program.version(),
            registers: p.program.registers(),
            inputs: p.program.inputs(),
            max_steps: p.program.max_steps(),
            routes: p
                .routes
                .iter()
                .map(|r| PolicyRouteResponse {
                    name: r.name.clone(),
                    route_id: r.id.clone(),
                    k: r.k,
                    calibrated: r.calibrated,
                })
                .collect(),
            durability: p.program.durability(),
            spec: serde_json::to_value(p.program.spec()).unwrap_or_default(),
            created_at: p.created_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ListPoliciesResponse {
    /// By name, then version.
    pub policies: Vec<PolicyResponse>,
}

async fn load_policy(state: &AppState, tenant_id: Uuid, policy_id: Uuid) -> ApiResult<Arc<Policy>> {
    state
        .control
        .policy(&state.db, tenant_id, policy_id)
        .await?
        .ok_or(ApiError::NotFound("policy"))
}

/// The example policy of `hearth_control`, as the document shows it.
fn example_policy() -> serde_json::Value {
    serde_json::from_str(hearth_control::EXAMPLE_POLICY).unwrap_or_default()
}

/// Registers a control policy (the JSON policy language of `hearth_control`:
/// registers, inputs, init, max_steps, routes with straight-line bodies, an
/// optional decision). It is validated (bounded lengths, no loops, registers
/// and inputs in range) and immutable: registering the same name and version
/// again answers the existing policy (200) if the body is the same, else 409.
#[utoipa::path(post, path = "/v1/control/policies", tag = "control", operation_id = "create_policy",
    request_body(content = schema::PolicyBody,
        description = "A control policy in the JSON policy language (README, \"Control policy language\"): it must compile",
        example = json!(example_policy())),
    responses(
        (status = 201, description = "Registered", body = PolicyResponse),
        (status = 200, description = "Already registered with this body", body = PolicyResponse),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, description = "`conflict`: this name and version exist with another body", body = ErrorBody),
        (status = 422, description = "`invalid_policy`", body = ErrorBody),
    ))]
async fn create_policy(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(body): Json<serde_json::Value>,
) -> ApiResult<(StatusCode, Json<PolicyResponse>)> {
    let spec = Spec::from_value(body).map_err(|e| ApiError::InvalidPolicy(e.to_string()))?;
    let program = Program::compile(spec).map_err(|e| ApiError::InvalidPolicy(e.to_string()))?;
    let spec = serde_json::to_value(program.spec()).map_err(|e| ApiError::Internal(e.into()))?;
    let route_ids: Vec<String> = program.routes().iter().map(|r| r.id().to_owned()).collect();
    let version = i64::from(program.version());
    let inserted = hearth_store::control::insert_policy(
        &state.db,
        &NewPolicy {
            tenant_id: tenant.tenant_id,
            policy_id: Uuid::now_v7(),
            name: program.name(),
            version,
            spec: &spec,
            route_ids: &route_ids,
        },
    )
    .await?;
    let (status, policy_id) = match inserted {
        Some(row) => {
            tracing::info!(policy_id = %row.policy_id, name = %row.name, version, "control policy registered");
            (StatusCode::CREATED, row.policy_id)
        }
        None => {
            let row = hearth_store::control::policy_by_version(
                &state.db,
                tenant.tenant_id,
                program.name(),
                version,
            )
            .await?
            .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("policy vanished after conflict")))?;
            let same = serde_json::from_value::<Spec>(row.spec).is_ok_and(|s| &s == program.spec());
            if !same {
                return Err(ApiError::Conflict(format!(
                    "policy `{}` version {} is already registered with a different body; \
                     policies are immutable, register a new version",
                    program.name(),
                    program.version()
                )));
            }
            (StatusCode::OK, row.policy_id)
        }
    };
    let policy = load_policy(&state, tenant.tenant_id, policy_id).await?;
    Ok((status, Json(PolicyResponse::from(&*policy))))
}

/// This tenant's control policies.
#[utoipa::path(get, path = "/v1/control/policies", tag = "control", operation_id = "list_policies",
    responses((status = 200, body = ListPoliciesResponse), (status = 401, body = ErrorBody)))]
async fn list_policies(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Json<ListPoliciesResponse>> {
    let policies = state.control.policies(&state.db, tenant.tenant_id).await?;
    Ok(Json(ListPoliciesResponse {
        policies: policies
            .iter()
            .map(|p| PolicyResponse::from(&**p))
            .collect(),
    }))
}

/// A control policy of this tenant.
#[utoipa::path(get, path = "/v1/control/policies/{policy_id}", tag = "control", operation_id = "get_policy",
    params(("policy_id" = Uuid, Path)),
    responses((status = 200, body = PolicyResponse), (status = 404, body = ErrorBody)))]
async fn get_policy(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(policy_id): Path<Uuid>,
) -> ApiResult<Json<PolicyResponse>> {
    let p = load_policy(&state, tenant.tenant_id, policy_id).await?;
    Ok(Json(PolicyResponse::from(&*p)))
}

/// One event.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventRequest {
    /// The policy (`policy_id`).
    pub policy: Uuid,
    /// Session name, 1..=128 of `[A-Za-z0-9_.:@-]`; created from the policy's
    /// `init` on its first event.
    #[schema(pattern = "^[A-Za-z0-9_.:@-]{1,128}$")]
    pub session: String,
    /// Route name or executable route id (one the policy has); absent: the
    /// session's next route (as chosen by its last event; the first route
    /// for a new session).
    pub route: Option<String>,
    /// Input words (at most the policy's `inputs`; missing words read 0).
    #[serde(default, deserialize_with = "hearth_core::whole::vec")]
    #[schema(schema_with = schema::input_words)]
    pub input: Vec<u32>,
    /// Launch deadline after the event is ready (on arrival, or when the
    /// session's previous event is done), in milliseconds (default: the
    /// service's); at most the service's `max_deadline_ms` (60,000 by default).
    #[schema(exclusive_minimum = 0, maximum = 60_000)]
    pub deadline_ms: Option<f64>,
}

/// One event or an array of them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum EventsRequest {
    One(EventRequest),
    Many(EventBatch),
}

/// Events posted together: at least one, at most the service's
/// `max_events` (10,000 by default).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(min_items = 1, max_items = 10_000)]
pub struct EventBatch(pub Vec<EventRequest>);

/// A route by name and executable id.
#[derive(Debug, Serialize, ToSchema)]
pub struct RouteRef {
    pub name: String,
    pub route_id: String,
}

/// An effect descriptor (`emit`).
#[derive(Debug, Serialize, ToSchema)]
pub struct EffectResponse {
    #[schema(schema_with = schema::u32_schema)]
    pub code: u32,
    #[schema(schema_with = schema::effect_values)]
    pub values: Vec<u32>,
}

/// How and what one event ran. Times are nanoseconds since the service's
/// control epoch.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventResult {
    /// Position of the event in the request.
    pub index: usize,
    pub session: String,
    /// The session's registers after the event.
    #[schema(schema_with = schema::registers)]
    pub state: Vec<u32>,
    /// The route the event started on.
    pub ran: RouteRef,
    /// The session's next route (chosen by the event's last step).
    pub route: RouteRef,
    /// The effect of the last step, if it emitted one.
    pub effect: Option<EffectResponse>,
    /// Steps of the chain, 1..=max_steps.
    pub steps: u32,
    /// Batch id (null on the CPU path).
    pub batch: Option<u64>,
    /// Events in its batch (1 on the CPU path).
    pub batch_size: u32,
    /// `cpu` or `gpu`.
    #[schema(value_type = String)]
    pub executor: ExecutorKind,
    /// `batch` (on the active executor) or `fallback` (alone on the CPU path).
    pub path: &'static str,
    /// Why it fell back: `no_batch`, `deadline`, `drain`.
    pub fallback_reason: Option<String>,
    /// Whether the outcome is the CPU reference's.
    pub exact: bool,
    pub release_ns: u64,
    pub deadline_ns: u64,
    pub launch_ns: u64,
    pub done_ns: u64,
    /// Whether execution started no later than the deadline.
    pub on_time: bool,
}

fn route_ref(p: &Policy, i: u16) -> RouteRef {
    let r = &p.routes[usize::from(i)];
    RouteRef {
        name: r.name.clone(),
        route_id: r.id.clone(),
    }
}

impl From<Done> for EventResult {
    fn from(d: Done) -> Self {
        let p = &d.policy;
        let registers = p.program.registers() as usize;
        let rec = d.record;
        let (path, fallback_reason) = match rec.path {
            RunPath::Batch => ("batch", None),
            RunPath::Fallback(r) => (
                "fallback",
                serde_json::to_value(r)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned)),
            ),
        };
        EventResult {
            index: d.index,
            state: d.outcome.state[..registers].to_vec(),
            ran: route_ref(p, d.started_on),
            route: route_ref(p, d.outcome.route),
            effect: d.outcome.effect.map(|e| EffectResponse {
                code: e.code,
                values: e.values().to_vec(),
            }),
            steps: d.outcome.steps,
            batch: rec.batch,
            batch_size: rec.batch_size,
            executor: rec.executor,
            path,
            fallback_reason,
            exact: rec.exact,
            release_ns: rec.release_ns,
            deadline_ns: rec.deadline_ns,
            launch_ns: rec.launch_ns,
            done_ns: rec.done_ns,
            on_time: rec.launch_ns <= rec.deadline_ns,
            session: d.session,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EventsResponse {
    /// One per event, in request order.
    pub results: Vec<EventResult>,
}

fn is_session_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SESSION
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:@-".contains(&b))
}

fn session_error(field: String) -> FieldError {
    FieldError {
        field,
        message: format!("must be 1..={MAX_SESSION} characters of [A-Za-z0-9_.:@-]"),
    }
}

fn push(errors: &mut Vec<FieldError>, field: String, message: String) {
    if errors.len() < MAX_DETAILS {
        errors.push(FieldError { field, message });
    }
}

/// Checks a policy's input and turns the request into an engine event.
fn check_event(
    state: &AppState,
    at: &str,
    e: EventRequest,
    policy: &Arc<Policy>,
    errors: &mut Vec<FieldError>,
) -> Option<Event> {
    let before = errors.len();
    if !is_session_name(&e.session) {
        let err = session_error(format!("{at}session"));
        push(errors, err.field, err.message);
    }
    let route = match &e.route {
        None => None,
        Some(r) => {
            let found = policy.route(r);
            if found.is_none() {
                let names: Vec<&str> = policy.routes.iter().map(|r| r.name.as_str()).collect();
                push(
                    errors,
                    format!("{at}route"),
                    format!(
                        "unknown route `{r}`; policy `{}` has {}",
                        policy.program.name(),
                        names.join(", ")
                    ),
                );
            }
            found
        }
    };
    if e.input.len() > policy.program.inputs() as usize {
        push(
            errors,
            format!("{at}input"),
            format!(
                "has {} words; policy `{}` takes at most {}",
                e.input.len(),
                policy.program.name(),
                policy.program.inputs()
            ),
        );
    }
    let max = state.config.control_max_deadline_ms;
    let deadline_ms = e.deadline_ms.unwrap_or(state.config.control_deadline_ms);
    if !(deadline_ms.is_finite() && deadline_ms > 0.0 && deadline_ms <= max) {
        push(
            errors,
            format!("{at}deadline_ms"),
            format!("must be a number of milliseconds in (0, {max}]"),
        );
    }
    (errors.len() == before).then(|| Event {
        policy: policy.clone(),
        session: e.session,
        route,
        input: e.input,
        deadline_ns: (deadline_ms * 1e6).round() as u64,
    })
}

fn wants_ndjson(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/x-ndjson"))
}

/// Posts one event or an array of them and answers when every one has run:
/// in a batch of at least `K_r` events of its route on the active executor
/// (launched before the earliest deadline in it), or alone on the CPU path
/// when its deadline would pass first. Each result gives the new state, the
/// next route, the effect and how it ran. With `Accept: application/x-ndjson`
/// the results stream as one JSON line each, in completion order.
///
/// Events of one session apply in the order they arrive (within an array,
/// array order), whatever their routes: a session's event becomes ready when
/// its previous one is done, and its deadline counts from then. An event
/// without `route` starts on the route its predecessor chose.
///
/// Durability follows the policy: `commit` (default) answers an event only
/// once the session state it produced is committed (one commit per batch
/// launch), so a crash loses no answered event, and a commit that keeps
/// failing answers 503 instead; `snapshot` answers at once and may lose the
/// answered events of the last `HEARTH_CONTROL_SNAPSHOT_S` on a crash.
#[utoipa::path(post, path = "/v1/control/events", tag = "control", operation_id = "create_events",
    request_body = EventsRequest,
    responses(
        (status = 200, description = "Every event ran (or `application/x-ndjson`: one `EventResult` per line)", body = EventsResponse),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "No such policy for this tenant", body = ErrorBody),
        (status = 409, description = "`limit_reached`: the sessions the events would create pass the tenant's limit (`HEARTH_CONTROL_MAX_SESSIONS`); none ran", body = ErrorBody),
        (status = 422, description = "`validation_failed`", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
async fn create_events(
    State(state): State<AppState>,
    tenant: Tenant,
    headers: HeaderMap,
    Json(body): Json<serde_json::Value>,
) -> ApiResult<Response> {
    let (items, single) = match body {
        serde_json::Value::Array(items) => (items, false),
        one => (vec![one], true),
    };
    let max = state.config.control_max_events;
    if items.is_empty() || items.len() > max {
        return Err(ApiError::Validation(vec![FieldError {
            field: "body".to_owned(),
            message: format!("must hold 1..={max} events, got {}", items.len()),
        }]));
    }
    let mut errors = Vec::new();
    let mut parsed = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let at = if single {
            String::new()
        } else {
            format!("[{i}].")
        };
        match serde_json::from_value::<EventRequest>(item) {
            Ok(e) => parsed.push((at, e)),
            Err(e) => push(
                &mut errors,
                if single {
                    "body".to_owned()
                } else {
                    format!("[{i}]")
                },
                e.to_string(),
            ),
        }
    }
    let mut policies: HashMap<Uuid, Arc<Policy>> = HashMap::new();
    for (_, e) in &parsed {
        if let std::collections::hash_map::Entry::Vacant(v) = policies.entry(e.policy) {
            v.insert(load_policy(&state, tenant.tenant_id, e.policy).await?);
        }
    }
    let events: Vec<Event> = parsed
        .into_iter()
        .filter_map(|(at, e)| {
            let p = policies[&e.policy].clone();
            check_event(&state, &at, e, &p, &mut errors)
        })
        .collect();
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let n = events.len();
    let mut rx = state.control.submit(tenant.tenant_id, events).await?;
    if wants_ndjson(&headers) {
        let lines = futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
            .take(n)
            .map(|d| {
                let mut line = serde_json::to_vec(&EventResult::from(d)).unwrap_or_default();
                line.push(b'\n');
                Ok::<_, Infallible>(line)
            });
        return Ok((
            [(header::CONTENT_TYPE, "application/x-ndjson")],
            Body::from_stream(lines),
        )
            .into_response());
    }
    let mut results = Vec::with_capacity(n);
    while results.len() < n {
        match rx.recv().await {
            Some(d) => results.push(EventResult::from(d)),
            None => {
                return Err(ApiError::Unavailable(anyhow::anyhow!(
                    "the control engine stopped with {} of {n} events unanswered",
                    n - results.len()
                )));
            }
        }
    }
    results.sort_by_key(|r| r.index);
    Ok(Json(EventsResponse { results }).into_response())
}

/// A session to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    /// The policy (`policy_id`).
    pub policy: Uuid,
    /// Session name, 1..=128 of `[A-Za-z0-9_.:@-]`.
    #[schema(pattern = "^[A-Za-z0-9_.:@-]{1,128}$")]
    pub session: String,
    /// Initial registers (at most the policy's `registers`; the rest 0).
    /// Default: the policy's `init`.
    #[serde(default, deserialize_with = "hearth_core::whole::option_vec")]
    #[schema(schema_with = schema::registers_or_null)]
    pub state: Option<Vec<u32>>,
    /// The session's first route, by name or id. Default: the policy's first.
    pub route: Option<String>,
}

/// A session.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionResponse {
    pub policy_id: Uuid,
    pub session: String,
    /// Its registers.
    #[schema(schema_with = schema::registers)]
    pub state: Vec<u32>,
    /// The route its next event runs when the event names none.
    pub route: RouteRef,
}

fn session_response(p: &Policy, session: String, s: SessionState) -> SessionResponse {
    SessionResponse {
        policy_id: p.policy_id,
        session,
        state: s.state[..p.program.registers() as usize].to_vec(),
        route: route_ref(p, s.route),
    }
}

/// Creates a session explicitly (sessions are otherwise created by their
/// first event, from the policy's `init`). 409 if it exists.
#[utoipa::path(post, path = "/v1/control/sessions", tag = "control", operation_id = "create_session",
    request_body = CreateSessionRequest,
    responses(
        (status = 201, body = SessionResponse),
        (status = 404, description = "No such policy for this tenant", body = ErrorBody),
        (status = 409, description = "`conflict`: the session exists; `limit_reached`: the tenant holds as many sessions as it may (`HEARTH_CONTROL_MAX_SESSIONS`)", body = ErrorBody),
        (status = 422, body = ErrorBody),
    ))]
async fn create_session(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateSessionRequest>,
) -> ApiResult<(StatusCode, Json<SessionResponse>)> {
    let policy = load_policy(&state, tenant.tenant_id, req.policy).await?;
    let mut errors = Vec::new();
    if !is_session_name(&req.session) {
        errors.push(session_error("session".to_owned()));
    }
    let mut regs: Regs = policy.program.init();
    if let Some(words) = &req.state {
        let registers = policy.program.registers() as usize;
        if words.len() > registers {
            errors.push(FieldError {
                field: "state".to_owned(),
                message: format!(
                    "has {} values; policy `{}` has {registers} registers",
                    words.len(),
                    policy.program.name()
                ),
            });
        } else {
            regs = [0; MAX_REGISTERS];
            regs[..words.len()].copy_from_slice(words);
        }
    }
    let route = match &req.route {
        None => 0,
        Some(r) => policy.route(r).unwrap_or_else(|| {
            errors.push(FieldError {
                field: "route".to_owned(),
                message: format!("unknown route `{r}`"),
            });
            0
        }),
    };
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let s = SessionState { route, state: regs };
    match state
        .control
        .create_session(policy.clone(), req.session.clone(), s)
        .await?
    {
        Creation::Created => {}
        Creation::Exists => {
            return Err(ApiError::Conflict(format!(
                "session `{}` already exists",
                req.session
            )));
        }
        Creation::Refused(limit) => return Err(ApiError::LimitReached(limit.to_string())),
    }
    Ok((
        StatusCode::CREATED,
        Json(session_response(&policy, req.session, s)),
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionParams {
    /// The policy (`policy_id`) the session belongs to.
    pub policy: Uuid,
}

/// A session's current state and next route.
#[utoipa::path(get, path = "/v1/control/sessions/{session}", tag = "control", operation_id = "get_session",
    params(("session" = String, Path, pattern = "^[A-Za-z0-9_.:@-]{1,128}$",
            description = "Session name, 1..=128 of `[A-Za-z0-9_.:@-]`"), SessionParams),
    responses((status = 200, body = SessionResponse),
              (status = 400, description = "`invalid_request`: not a session name, or `policy` is missing or not a UUID", body = ErrorBody),
              (status = 404, description = "`not_found`: no such policy or session for this tenant", body = ErrorBody)))]
async fn get_session(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(session): Path<String>,
    Query(params): Query<SessionParams>,
) -> ApiResult<Json<SessionResponse>> {
    let policy = session_policy(&state, &tenant, &session, &params).await?;
    let s = state
        .control
        .session(policy.clone(), session.clone())
        .await?
        .ok_or(ApiError::NotFound("session"))?;
    Ok(Json(session_response(&policy, session, s)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListSessionsParams {
    /// The policy (`policy_id`) whose sessions to list.
    pub policy: Uuid,
    /// `next_cursor` of the previous page: sessions named after it.
    #[param(pattern = "^[A-Za-z0-9_.:@-]{1,128}$")]
    pub cursor: Option<String>,
    /// Page size (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// A page of a policy's sessions.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListSessionsResponse {
    /// By name.
    pub sessions: Vec<SessionResponse>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// Sessions this tenant holds over all its policies.
    pub held: usize,
    /// The most it may hold (`HEARTH_CONTROL_MAX_SESSIONS`).
    pub max_sessions: usize,
}

/// A policy's sessions by name, as stored: a `commit` policy's as they are,
/// a `snapshot` policy's as of its last snapshot (`HEARTH_CONTROL_SNAPSHOT_S`;
/// a session its first event created since is listed from the next). With
/// `held` against `max_sessions`, what to delete to make room.
#[utoipa::path(get, path = "/v1/control/sessions", tag = "control", operation_id = "list_sessions",
    params(ListSessionsParams),
    responses((status = 200, body = ListSessionsResponse),
              (status = 400, description = "`invalid_request`: `policy` missing or not a UUID, `cursor` not a session name, `limit` out of range", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, description = "`not_found`: no such policy for this tenant", body = ErrorBody)))]
async fn list_sessions(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListSessionsParams>,
) -> ApiResult<Json<ListSessionsResponse>> {
    let limit = params.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::InvalidRequest("`limit` must be 1..=1000".into()));
    }
    if params
        .cursor
        .as_deref()
        .is_some_and(|c| !is_session_name(c))
    {
        return Err(ApiError::InvalidRequest(
            "`cursor` must be a session name (the `next_cursor` of a page)".into(),
        ));
    }
    let policy = load_policy(&state, tenant.tenant_id, params.policy).await?;
    let mut rows = hearth_store::control::session_page(
        &state.db,
        tenant.tenant_id,
        policy.policy_id,
        params.cursor.as_deref(),
        limit + 1,
    )
    .await?;
    let next_cursor = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last().map(|r| r.session.clone())
    } else {
        None
    };
    // A row that no longer reads (edited by hand) is left out, not the page.
    let sessions: Vec<SessionResponse> = rows
        .into_iter()
        .filter_map(|row| {
            let s = crate::control::stored_session(&row)
                .filter(|s| usize::from(s.route) < policy.routes.len())?;
            Some(session_response(&policy, row.session, s))
        })
        .collect();
    Ok(Json(ListSessionsResponse {
        sessions,
        next_cursor,
        held: state.control.session_count(tenant.tenant_id).await?,
        max_sessions: state.config.control_max_sessions,
    }))
}

/// Deletes a session with no event in flight, freeing its place in the
/// tenant's session limit; an event naming it afterwards starts it afresh
/// from the policy's `init`. Answered once the deletion is stored.
#[utoipa::path(delete, path = "/v1/control/sessions/{session}", tag = "control", operation_id = "delete_session",
    params(("session" = String, Path, pattern = "^[A-Za-z0-9_.:@-]{1,128}$",
            description = "Session name, 1..=128 of `[A-Za-z0-9_.:@-]`"), SessionParams),
    responses((status = 204, description = "Deleted"),
              (status = 400, description = "`invalid_request`: not a session name, or `policy` is missing or not a UUID", body = ErrorBody),
              (status = 404, description = "`not_found`: no such policy or session for this tenant", body = ErrorBody),
              (status = 409, description = "`conflict`: an event of the session is queued or running; retry when it is answered", body = ErrorBody),
              (status = 503, description = "`unavailable`: the deletion could not be stored; the session may come back after a restart", body = ErrorBody)))]
async fn delete_session(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(session): Path<String>,
    Query(params): Query<SessionParams>,
) -> ApiResult<StatusCode> {
    let policy = session_policy(&state, &tenant, &session, &params).await?;
    match state
        .control
        .delete_session(policy, session.clone())
        .await?
    {
        Deletion::Deleted => Ok(StatusCode::NO_CONTENT),
        Deletion::NotFound => Err(ApiError::NotFound("session")),
        Deletion::Busy => Err(ApiError::Conflict(format!(
            "session `{session}` has events queued or running"
        ))),
    }
}

/// The policy of a session named in a path, once the name is checked.
async fn session_policy(
    state: &AppState,
    tenant: &Tenant,
    session: &str,
    params: &SessionParams,
) -> ApiResult<Arc<Policy>> {
    if !is_session_name(session) {
        return Err(ApiError::InvalidRequest(format!(
            "the session name must be 1..={MAX_SESSION} characters of [A-Za-z0-9_.:@-]"
        )));
    }
    load_policy(state, tenant.tenant_id, params.policy).await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatsParams {
    /// Seconds of the event log to account, counted back from now (default 60).
    #[param(exclusive_minimum = 0, maximum = 86_400)]
    pub window_s: Option<f64>,
}

/// Live accounting of a window of this tenant's event log (shares over all
/// its events; F, P* and U from the analyzer run on the same events).
#[derive(Debug, Serialize, ToSchema)]
pub struct ControlStatsResponse {
    pub window_s: f64,
    /// δ of the fixed partition F, in milliseconds (the default deadline).
    pub delta_ms: f64,
    pub events: u64,
    /// A: share run in a batch of at least `K_r`, exactly, launched by its deadline.
    pub a: f64,
    /// R_A = (A − F)/(P* − F); null when P* = F or P* is not exact.
    pub r_a: Option<f64>,
    /// F: fixed-partition share (a baseline; with per-event deadlines
    /// shorter than δ it may exceed P*).
    pub f: f64,
    /// P*: the exact offline optimum share when `exact`, else its lower
    /// bound (`p_star_bounds.lower`).
    pub p_star: f64,
    /// Whether `p_star` is exact. False when the exact search for per-event
    /// deadlines hit its cap: then only `p_star_bounds` hold.
    pub exact: bool,
    /// Bounds that hold: `lower <= P* <= upper <= U` (equal when `exact`).
    pub p_star_bounds: PStarBounds,
    /// U: local upper bound share.
    pub u: f64,
    /// G = (P* − F)/(U − F); null when U = F or P* is not exact.
    pub g: Option<f64>,
    pub achieved_events: u64,
    pub batches: u64,
    /// Events whose execution started after their deadline.
    pub deadline_misses: u64,
    /// CPU-path events that started after their deadline.
    pub late_fallbacks: u64,
    /// Share of events that ran on the CPU path.
    pub fallback_share: f64,
    /// Events per second over the window (first release to last completion).
    pub events_per_s: f64,
    /// What the window covers.
    pub coverage: StatsCoverage,
    /// Milliseconds spent copying and analysing the window (off the engine).
    pub compute_ms: f64,
    /// The active executor's status line.
    pub executor: String,
}

/// Bounds of P* and how each was computed.
#[derive(Debug, Serialize, ToSchema)]
pub struct PStarBounds {
    /// Share covered by a feasible schedule (P* itself when exact).
    pub lower: f64,
    /// Share no feasible schedule exceeds (P* itself when exact).
    pub upper: f64,
    pub lower_events: u64,
    pub upper_events: u64,
    /// Route components solved exactly (contiguous-block DP, or the
    /// launch-point frontier DP within the step cap).
    pub exact_components: u64,
    /// Components whose exact search hit the cap: their lower bound is a
    /// feasible schedule from a deadline sweep (the whole window's bound is
    /// the better of that and the service's own in-time batches of at least
    /// `K_r`), their upper bound their U.
    pub bounded_components: u64,
    /// Events in those components.
    pub bounded_events: u64,
    /// The cap on the exact search, in elementary steps (about 0.1–0.2 s).
    pub max_exact_steps: u64,
    /// One sentence: which bound was computed how.
    pub method: String,
}

/// What a stats window covers. The event log is kept in memory per tenant
/// (at most `records_cap` records, oldest dropped first) since this process
/// started; it is not kept across restarts.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatsCoverage {
    /// Start of the requested window, ns on the control clock.
    pub from_ns: u64,
    /// End of the window (now), ns.
    pub to_ns: u64,
    /// Every finished event released from here to `to_ns` is counted.
    pub complete_from_ns: u64,
    /// Whether the whole requested window is covered (no record of it was
    /// dropped by the cap and the process ran for all of it).
    pub complete: bool,
    /// The window reaches back before this process started (events of an
    /// earlier process are not counted).
    pub before_start: bool,
    /// Records in the window.
    pub records: u64,
    /// Records dropped by the per-tenant cap since the process started.
    pub evicted: u64,
    /// The cap on records kept per tenant (`HEARTH_CONTROL_RECORDS`).
    pub records_cap: u64,
}

fn bounds_method(s: &accounting::Stats) -> String {
    if s.exact_known && s.bounded_components > 0 {
        format!(
            "exact: {} components solved exactly; on {} components ({} events) the exact \
             search hit its cap of {} steps, but there a greedy feasible schedule \
             reaches their U, so the bounds meet",
            s.exact_components, s.bounded_components, s.bounded_events, s.max_exact_steps
        )
    } else if s.exact_known {
        format!(
            "exact on all {} route components (contiguous-block DP where deadlines \
             agree with releases, launch-point frontier DP within {} steps elsewhere)",
            s.exact_components, s.max_exact_steps
        )
    } else {
        format!(
            "{} components exact; on {} components ({} events) the exact search \
             hit its cap of {} steps: lower bound from a feasible schedule (the \
             better of a deadline sweep and the service's own in-time batches of at \
             least K_r), upper bound from their U",
            s.exact_components, s.bounded_components, s.bounded_events, s.max_exact_steps
        )
    }
}

/// A, R_A, F, P* (or bounds of it), U and the operational figures of this
/// tenant's events of the last `window_s` seconds. Never fails on a hard
/// instance: when the exact P* search for per-event deadlines hits its cap
/// (about 0.1–0.2 s of one core, at most twice), `exact` is false and
/// `p_star_bounds` hold. Computed off the control engine on a snapshot of
/// the log, one stats request at a time for the whole service.
#[utoipa::path(get, path = "/v1/control/stats", tag = "control", operation_id = "get_control_stats",
    params(StatsParams),
    responses((status = 200, body = ControlStatsResponse), (status = 400, body = ErrorBody)))]
async fn get_control_stats(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<StatsParams>,
) -> ApiResult<Json<ControlStatsResponse>> {
    let window_s = params.window_s.unwrap_or(60.0);
    if !(window_s.is_finite() && window_s > 0.0 && window_s <= MAX_WINDOW_S) {
        return Err(ApiError::InvalidRequest(format!(
            "`window_s` must be a number of seconds in (0, {MAX_WINDOW_S}]"
        )));
    }
    let delta_ms = state.config.control_deadline_ms;
    let delta_ns = (delta_ms * 1e6).round() as i64;
    let w = state
        .control
        .stats(
            tenant.tenant_id,
            Duration::from_secs_f64(window_s),
            delta_ns,
        )
        .await
        .map_err(|e| match e {
            StatsError::Stopped(e) => ApiError::from(e),
            e @ StatsError::Failed(_) => ApiError::Internal(e.into()),
        })?;
    let (s, c) = (w.stats, w.coverage);
    Ok(Json(ControlStatsResponse {
        window_s,
        delta_ms,
        events: s.events,
        a: s.achieved,
        r_a: s.online_closure,
        f: s.fixed,
        p_star: s.exact,
        exact: s.exact_known,
        p_star_bounds: PStarBounds {
            lower: s.exact_lower,
            upper: s.exact_upper,
            lower_events: s.exact_lower_events,
            upper_events: s.exact_upper_events,
            exact_components: s.exact_components,
            bounded_components: s.bounded_components,
            bounded_events: s.bounded_events,
            max_exact_steps: s.max_exact_steps,
            method: bounds_method(&s),
        },
        u: s.upper,
        g: s.gap_closure,
        achieved_events: s.achieved_events,
        batches: s.batches,
        deadline_misses: s.deadline_misses,
        late_fallbacks: s.late_fallbacks,
        fallback_share: s.fallback_share,
        events_per_s: s.events_per_s,
        coverage: StatsCoverage {
            from_ns: c.from_ns,
            to_ns: c.to_ns,
            complete_from_ns: c.complete_from_ns,
            complete: c.complete_from_ns == c.from_ns && !c.started_in_window,
            before_start: c.started_in_window,
            records: c.records as u64,
            evicted: c.evicted,
            records_cap: c.cap as u64,
        },
        compute_ms: w.elapsed.as_secs_f64() * 1e3,
        executor: state.control.status().to_owned(),
    }))
}

/// The control engine's executor and settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct ControlStatusResponse {
    /// `cpu` or `gpu`.
    #[schema(value_type = String)]
    pub executor: ExecutorKind,
    /// Why: e.g. `gpu (NVIDIA H200)`, `cpu (no CUDA driver)`.
    pub status: String,
    /// `K_r` of uncalibrated routes (null: CPU path only). Unless
    /// `HEARTH_CONTROL_K` sets it, chosen from the executor: none on the CPU
    /// (batching buys nothing there), 256 on a GPU.
    pub default_k: Option<u32>,
    /// B: most events per batch.
    pub max_batch: usize,
    pub default_deadline_ms: f64,
    pub max_deadline_ms: f64,
    pub launch_cost_us: u64,
    /// Whether batches launch as soon as `K_r` events are queued.
    pub eager: bool,
    pub snapshot_s: f64,
    pub max_events: usize,
}

/// Which executor runs control batches, and the compactor's settings.
#[utoipa::path(get, path = "/v1/control/status", tag = "control", operation_id = "get_control_status",
    responses((status = 200, body = ControlStatusResponse), (status = 401, body = ErrorBody)))]
async fn get_control_status(
    State(state): State<AppState>,
    _tenant: Tenant,
) -> Json<ControlStatusResponse> {
    let c = &state.config;
    Json(ControlStatusResponse {
        executor: state.control.kind(),
        status: state.control.status().to_owned(),
        default_k: state.control.default_k(),
        max_batch: c.control_max_batch,
        default_deadline_ms: c.control_deadline_ms,
        max_deadline_ms: c.control_max_deadline_ms,
        launch_cost_us: c.control_launch_cost_us,
        eager: c.control_eager,
        snapshot_s: c.control_snapshot_s,
        max_events: c.control_max_events,
    })
}
