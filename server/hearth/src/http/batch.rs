//! Batch submission: a trainer's step of rollouts in one request. Every job
//! is validated first; all are accepted in one transaction (one durable
//! commit for the batch) or none is, with every item's errors named.

use std::collections::{BTreeSet, HashMap};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hearth_core::validate::{self, CreateJob, FieldError, Invalid};
use hearth_store::job::{Inserted, NewJob};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Query};
use crate::http::jobs::{JobResponse, WaitParams, is_final, wait_duration, wait_until};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_jobs))
}

/// Jobs one batch may hold.
pub const MAX_BATCH: usize = 1000;

/// One job of a batch.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchItem {
    pub job: CreateJob,
    /// Makes this job's submission idempotent, as the `Idempotency-Key`
    /// header does for one job: 1..=255 visible ASCII characters. A batch
    /// sent again accepts none twice.
    #[schema(
        min_length = 1,
        max_length = 255,
        pattern = r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$"
    )]
    pub idempotency_key: Option<String>,
}

/// Jobs to accept together.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// 1..=1000 jobs, accepted all or none.
    #[schema(min_items = 1, max_items = 1000)]
    pub jobs: Vec<BatchItem>,
}

/// The batch's jobs, in the order they were sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchResponse {
    pub jobs: Vec<JobResponse>,
}

/// Submits up to 1,000 jobs at once: all accepted, or none.
///
/// Every job is validated as `POST /v1/jobs` validates one; if any fails,
/// nothing is accepted and the answer lists every failing field as
/// `jobs[i].<field>`. Otherwise all are accepted in one transaction. A job
/// whose `idempotency_key` was used before with the same job is the earlier
/// job (not accepted again); with another job, the whole batch is refused
/// (409). With `wait`, answers once every job is final (200) or when the
/// wait runs out (202, the jobs as they stand).
#[utoipa::path(post, path = "/v1/jobs/batch", tag = "jobs", operation_id = "create_jobs",
    params(WaitParams),
    request_body = BatchRequest,
    responses(
        (status = 200, description = "Every job finished within `wait`", body = BatchResponse),
        (status = 202, description = "Accepted; not every job finished yet", body = BatchResponse),
        (status = 409, description = "`idempotency_conflict`: an item's key was used with another job", body = ErrorBody),
        (status = 422, description = "`validation_failed`: every failing field, as `jobs[i].<field>`; nothing was accepted", body = ErrorBody),
    ))]
async fn create_jobs(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<WaitParams>,
    headers: HeaderMap,
    Json(req): Json<BatchRequest>,
) -> ApiResult<(StatusCode, Json<BatchResponse>)> {
    let wait = wait_duration(&state, params.wait)?;
    // Taken over from `POST /v1/jobs`, the header would make nothing
    // idempotent here: a retry would submit every job again.
    if headers.contains_key("idempotency-key") {
        return Err(ApiError::InvalidRequest(
            "a batch takes no Idempotency-Key header: give each item its `idempotency_key`".into(),
        ));
    }
    let n = req.jobs.len();
    if n == 0 || n > MAX_BATCH {
        return Err(ApiError::Validation(vec![FieldError {
            field: "jobs".to_owned(),
            message: format!("must hold 1..={MAX_BATCH} jobs, not {n}"),
        }]));
    }

    // Everything that can fail is checked before anything is written.
    let mut errors = Vec::new();
    let mut accepted = Vec::with_capacity(n);
    for (i, item) in req.jobs.into_iter().enumerate() {
        let at = |field: &str| format!("jobs[{i}].{field}");
        if let Some(key) = &item.idempotency_key
            && !super::jobs::is_idempotency_key(key)
        {
            errors.push(FieldError {
                field: at("idempotency_key"),
                message: "must be 1..=255 visible ASCII characters (spaces only between them)"
                    .to_owned(),
            });
        }
        match validate::job(item.job, &state.limits, |name| state.profiles.get(name)) {
            Ok(spec) => {
                let hash = item
                    .idempotency_key
                    .as_ref()
                    .map(|_| super::jobs::request_hash(&spec));
                accepted.push((i, spec, item.idempotency_key, hash));
            }
            Err(Invalid::UnknownProfile(p)) => errors.push(FieldError {
                field: at("job.profile"),
                message: format!("unknown profile `{p}`"),
            }),
            Err(Invalid::Fields(fields)) => errors.extend(fields.into_iter().map(|f| FieldError {
                field: at(&format!("job.{}", f.field)),
                message: f.message,
            })),
        }
    }
    let digests: BTreeSet<&String> = accepted
        .iter()
        .filter_map(|(_, spec, _, _)| match &spec.code {
            hearth_core::job::Code::Bundle(digest) => Some(digest),
            hearth_core::job::Code::Files(_) => None,
        })
        .collect();
    let mut known = HashMap::new();
    for digest in digests {
        let exists = hearth_store::bundle::exists(&state.db, tenant.tenant_id, digest).await?;
        known.insert(digest.clone(), exists);
    }
    for (i, spec, _, _) in &accepted {
        if let hearth_core::job::Code::Bundle(digest) = &spec.code
            && !known[digest]
        {
            errors.push(FieldError {
                field: format!("jobs[{i}].job.code.bundle"),
                message: format!(
                    "the tenant has no bundle {digest}; upload it with POST /v1/bundles"
                ),
            });
        }
    }
    if !errors.is_empty() {
        // In item order (the bundle check came after the others).
        errors.sort_by_key(|e| item_of(&e.field));
        return Err(ApiError::Validation(errors));
    }

    // One statement, one commit, for the whole batch: a key reused for
    // another request rolls it back.
    let mut jobs = Vec::with_capacity(n);
    for (_, spec, key, hash) in accepted.iter_mut() {
        jobs.push(NewJob {
            job_id: Uuid::now_v7(),
            tenant_id: tenant.tenant_id,
            kind: spec.kind,
            profile: spec.profile.clone(),
            caller: spec.caller.clone(),
            priority: spec.priority,
            spec: serde_json::to_value(&*spec).map_err(|e| ApiError::Internal(e.into()))?,
            idempotency_key: key.take(),
            request_hash: hash.take(),
            traceparent: None,
        });
    }
    let mut tx = state.db.begin().await?;
    let mut rows = Vec::with_capacity(n);
    for (inserted, (i, ..)) in hearth_store::job::insert_many(&mut tx, &jobs)
        .await?
        .into_iter()
        .zip(&accepted)
    {
        rows.push(inserted.map_err(|e| match e {
            hearth_store::Error::IdempotencyMismatch => ApiError::BatchIdempotencyConflict(*i),
            e => e.into(),
        })?);
    }
    tx.commit().await?;

    let deadline = Instant::now() + wait;
    let mut waits = Vec::with_capacity(n);
    for inserted in rows {
        let (mut row, new) = match inserted {
            Inserted::New(row) => (row, true),
            Inserted::Existing(row) => (row, false),
        };
        // Watched before the scheduler can run it, so that its end cannot
        // slip by unseen.
        let watch = (!wait.is_zero() && !is_final(&row)).then(|| state.hub.watch(row.job_id));
        if new {
            // The leader, if another replica, picks it up now.
            if !state.scheduler.submit(&row) {
                state.hub.changed(&row);
            }
        } else if watch.is_some() {
            // Accepted before, read before it was watched: read it again.
            row = hearth_store::job::get(&state.db, tenant.tenant_id, row.job_id)
                .await?
                .ok_or(ApiError::NotFound("job"))?;
        }
        waits.push((row, watch));
    }
    tracing::info!(jobs = n, "batch accepted");
    // The jobs are waited on together, until the one deadline: a job's end
    // arrives with its event, so a wait reads its row again only when it
    // missed events or rechecks.
    let state = &state;
    let jobs = futures::future::try_join_all(waits.into_iter().map(|(row, watch)| async move {
        match watch {
            Some(mut watch) => wait_until(state, &mut watch, row, deadline).await,
            None => Ok(row),
        }
    }))
    .await?;
    let all_final = jobs.iter().all(is_final);
    let status = if all_final {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((
        status,
        Json(BatchResponse {
            jobs: jobs.iter().map(JobResponse::from).collect(),
        }),
    ))
}

/// The item a field of `jobs[i]...` belongs to.
fn item_of(field: &str) -> usize {
    field
        .strip_prefix("jobs[")
        .and_then(|rest| rest.split(']').next())
        .and_then(|i| i.parse().ok())
        .unwrap_or(usize::MAX)
}
