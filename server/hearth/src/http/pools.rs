//! Pools: one per profile, as the requesting tenant may see them. Aggregate
//! pod counts, GPU shares and the pool's budget are shared facts; callers,
//! keep-alives and budgets are shown for the requesting tenant only. Only the
//! leading replica holds pools; every answer says which replica leads and
//! whether it is the one answering.

use axum::extract::State;
use hearth_core::StartClass;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::scheduler::{GpuSample, Leader, PoolView};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_pools))
        .routes(routes!(get_pool))
        .routes(routes!(get_pool_history))
}

/// Pods of the pool by state.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolPods {
    pub starting: u32,
    /// Started and unbound, ready to be promoted for any caller's job.
    pub standby: u32,
    /// Idle, holding one caller's binding; serves only that caller.
    pub warm: u32,
    /// Ready and held for a gang whose other pods are still starting.
    pub reserved: u32,
    pub active: u32,
    pub draining: u32,
}

/// An amount of GPU by what holds it.
#[derive(Debug, Serialize, ToSchema)]
pub struct GpuAmounts {
    pub active: f64,
    pub warm: f64,
    pub standby: f64,
    pub draining: f64,
}

/// Shares of GPU by what holds them.
#[derive(Debug, Serialize, ToSchema)]
pub struct GpuShares {
    pub active: u64,
    pub warm: u64,
    pub standby: u64,
    pub draining: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PoolGpus {
    /// GPUs in the pool's inventory (zero for CPU profiles).
    pub inventory: u32,
    /// `real` (devices handed to pods through `CUDA_VISIBLE_DEVICES`) or
    /// `accounting-only` (GPUs that exist only in the books, for development
    /// and tests).
    pub kind: &'static str,
    pub shares_per_gpu: u32,
    /// GPU shares held, by pod state.
    pub held_shares: GpuShares,
    /// The same in GPUs.
    pub held_gpus: GpuAmounts,
    pub free_gpus: f64,
}

/// What the pool's budget was computed from.
#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetInputsResponse {
    /// Pods of jobs accepted but not started.
    pub queued_pods: u32,
    /// Recent arrival rate in pods per second (exponentially weighted).
    pub arrival_rate_per_s: f64,
    pub standby_target: u32,
    /// Unclamped demand in GPUs: standby target, queued pods and the pods
    /// expected within the horizon.
    pub demand_gpus: f64,
    pub floor_gpus: f64,
    /// `null` when unbounded.
    pub ceiling_gpus: Option<f64>,
}

/// The budget on GPUs held by warm plus standby pods.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolBudget {
    pub budget_gpus: f64,
    pub inputs: BudgetInputsResponse,
}

/// The requesting tenant's share of the pool.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantPool {
    /// GPUs its warm pods hold.
    pub warm_gpus: f64,
    pub queued_pods: u32,
    /// Its budget for warm pods now; `null` for policies without a budget.
    pub budget_gpus: Option<f64>,
    pub floor_gpus: f64,
    /// `null` when unbounded.
    pub ceiling_gpus: Option<f64>,
}

/// One of the requesting tenant's callers.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallerPool {
    pub caller: String,
    /// How long its warm pod is kept after a job; `null` when warm pods are
    /// not kept or never expire.
    pub keep_alive_ms: Option<u64>,
    /// Pauses between its jobs the keep-alive is matched to.
    pub pauses: u32,
    pub warm_pods: u32,
    pub in_flight: u32,
}

/// A pool's start-latency objective and where it stands: shared facts of
/// the pool, over every tenant's jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolObjective {
    /// The share of jobs to start within `class`: 0.9 for p90.
    pub percentile: f64,
    pub class: StartClass,
    /// The share of jobs the callers' pauses predict within the class at the
    /// keep-alives chosen now.
    pub predicted: f64,
    /// The share of recent jobs (about the last 256, exponentially weighted)
    /// that started on their caller's warm pod; `null` before the first.
    pub warm_share: Option<f64>,
}

/// Which replica schedules jobs and holds the pools.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LeaderResponse {
    /// Whether the replica answering leads. When false, this replica holds
    /// no pods: the pool's pods, GPU shares held, budget, queue and callers
    /// read zero or empty here, and only the leader knows them.
    pub is_leader: bool,
    /// The leading replica's id (each `hearth serve` logs its own at start);
    /// `null` when no replica leads at this moment (a takeover under way).
    pub replica_id: Option<String>,
    /// The leading replica's host name.
    pub host: Option<String>,
}

impl From<Leader> for LeaderResponse {
    fn from(l: Leader) -> Self {
        LeaderResponse {
            is_leader: l.is_self,
            replica_id: l.replica_id,
            host: l.host,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PoolResponse {
    /// Which replica holds this pool.
    pub leader: LeaderResponse,
    pub profile: String,
    /// `fresh`, `always-on[:N]`, `keepalive:<s>` or `firepool`.
    pub policy: String,
    pub pods: PoolPods,
    pub gpus: PoolGpus,
    /// `null` for policies without a budget.
    pub budget: Option<PoolBudget>,
    /// The start latency the pool aims at (its profile's `start_objective`)
    /// and where it stands; `null` for policies without one.
    pub objective: Option<PoolObjective>,
    /// Standby pods the pool keeps now.
    pub standby_target: u32,
    /// Jobs waiting for pods.
    pub queued_jobs: u32,
    pub queued_pods: u32,
    pub tenant: TenantPool,
    /// The requesting tenant's callers known to the pool.
    pub callers: Vec<CallerPool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ListPoolsResponse {
    /// Which replica schedules jobs and holds the pools.
    pub leader: LeaderResponse,
    pub pools: Vec<PoolResponse>,
}

fn respond(view: PoolView, leader: &LeaderResponse) -> PoolResponse {
    let s = view.snapshot;
    let per = s.gpus.shares_per_gpu.max(1);
    let gpus = |shares: u32| f64::from(shares) / f64::from(per);
    let ceiling = |shares: u32| (shares != u32::MAX).then(|| gpus(shares));
    let mine = view
        .tenant
        .and_then(|t| s.tenants.iter().find(|v| v.tenant == t));
    let h = s.gpus.held_shares;
    PoolResponse {
        leader: leader.clone(),
        profile: view.profile,
        policy: s.policy,
        pods: PoolPods {
            starting: s.pods.starting,
            standby: s.pods.standby,
            warm: s.pods.warm,
            reserved: s.pods.reserved,
            active: s.pods.active,
            draining: s.pods.draining,
        },
        gpus: PoolGpus {
            inventory: s.gpus.inventory,
            kind: view.gpus.label(),
            shares_per_gpu: s.gpus.shares_per_gpu,
            held_shares: GpuShares {
                active: h.active,
                warm: h.warm,
                standby: h.standby,
                draining: h.draining,
            },
            held_gpus: GpuAmounts {
                active: s.gpus.active,
                warm: s.gpus.warm,
                standby: s.gpus.standby,
                draining: s.gpus.draining,
            },
            free_gpus: s.gpus.free,
        },
        budget: s.budget.map(|b| PoolBudget {
            budget_gpus: b.gpus,
            inputs: BudgetInputsResponse {
                queued_pods: b.inputs.queued_pods,
                arrival_rate_per_s: b.inputs.arrival_rate_per_s,
                standby_target: b.inputs.standby_target,
                demand_gpus: gpus(b.inputs.demand.0),
                floor_gpus: gpus(b.inputs.floor.0),
                ceiling_gpus: ceiling(b.inputs.ceiling.0),
            },
        }),
        objective: s.objective.map(|o| PoolObjective {
            percentile: o.percentile,
            class: o.class,
            predicted: o.predicted,
            warm_share: o.warm_share,
        }),
        standby_target: s.standby_target,
        queued_jobs: s.queued_jobs,
        queued_pods: s.queued_pods,
        tenant: TenantPool {
            warm_gpus: mine.map_or(0.0, |t| gpus(t.warm.0)),
            queued_pods: mine.map_or(0, |t| t.queued_pods),
            budget_gpus: mine.and_then(|t| t.budget).map(|b| gpus(b.0)),
            floor_gpus: gpus(view.tenant_bounds.floor.0),
            ceiling_gpus: ceiling(view.tenant_bounds.ceiling.0),
        },
        callers: s
            .callers
            .iter()
            .filter(|c| Some(c.tenant) == view.tenant)
            .filter_map(|c| {
                Some(CallerPool {
                    caller: view.callers.get(&c.caller)?.clone(),
                    keep_alive_ms: c.keep_alive_ms,
                    pauses: c.pauses,
                    warm_pods: c.warm_pods,
                    in_flight: c.in_flight,
                })
            })
            .collect(),
    }
}

/// Every profile's pool, and which replica leads.
///
/// Only the leader's pools hold pods: a replica that does not lead shows its
/// pools empty and says so in `leader`.
#[utoipa::path(get, path = "/v1/pools", tag = "pools", operation_id = "list_pools",
    responses((status = 200, body = ListPoolsResponse), (status = 401, body = ErrorBody)))]
async fn list_pools(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Json<ListPoolsResponse>> {
    let leader = LeaderResponse::from(state.scheduler.leader().await?);
    let pools = state
        .scheduler
        .pool_names()
        .iter()
        .filter_map(|p| state.scheduler.pool_view(p, tenant.tenant_id))
        .map(|view| respond(view, &leader))
        .collect();
    Ok(Json(ListPoolsResponse { leader, pools }))
}

/// One profile's pool: pods by state, GPU shares held, budget and its
/// inputs, and the keep-alive of each of the tenant's callers.
#[utoipa::path(get, path = "/v1/pools/{profile}", tag = "pools", operation_id = "get_pool",
    params(("profile" = String, Path)),
    responses((status = 200, body = PoolResponse), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
async fn get_pool(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(profile): Path<String>,
) -> ApiResult<Json<PoolResponse>> {
    let view = state
        .scheduler
        .pool_view(&profile, tenant.tenant_id)
        .ok_or(ApiError::NotFound("pool"))?;
    let leader = LeaderResponse::from(state.scheduler.leader().await?);
    Ok(Json(respond(view, &leader)))
}

/// The GPUs a pool held at one moment, by what held them.
#[derive(Debug, Serialize, ToSchema)]
pub struct GpuSampleResponse {
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub at: time::OffsetDateTime,
    pub active: f64,
    pub warm: f64,
    pub standby: f64,
    pub draining: f64,
}

impl From<GpuSample> for GpuSampleResponse {
    fn from(s: GpuSample) -> Self {
        GpuSampleResponse {
            at: s.at,
            active: s.active,
            warm: s.warm,
            standby: s.standby,
            draining: s.draining,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PoolHistoryResponse {
    /// Which replica holds this pool: only the leader keeps its history.
    pub leader: LeaderResponse,
    pub profile: String,
    /// Seconds between samples (`HEARTH_POOL_HISTORY_STEP_S`).
    pub step_s: f64,
    /// Oldest first, at most an hour of them.
    pub samples: Vec<GpuSampleResponse>,
}

/// GPUs the pool held over the last hour.
///
/// The leading replica records what the pool holds (active, warm, standby,
/// draining, in GPUs) every `step_s` seconds and keeps an hour of it. A new
/// leader starts with none; a replica that does not lead answers none.
#[utoipa::path(get, path = "/v1/pools/{profile}/history", tag = "pools", operation_id = "get_pool_history",
    params(("profile" = String, Path, description = "A profile of this service")),
    responses((status = 200, description = "The pool's samples, oldest first", body = PoolHistoryResponse),
              (status = 404, description = "`not_found`: no such profile", body = ErrorBody)))]
async fn get_pool_history(
    State(state): State<AppState>,
    _tenant: Tenant,
    Path(profile): Path<String>,
) -> ApiResult<Json<PoolHistoryResponse>> {
    let samples = state
        .scheduler
        .gpu_history(&profile)
        .ok_or(ApiError::NotFound("pool"))?;
    let leader = LeaderResponse::from(state.scheduler.leader().await?);
    Ok(Json(PoolHistoryResponse {
        leader,
        profile,
        step_s: state.config.pool_history_step_s,
        samples: samples.into_iter().map(Into::into).collect(),
    }))
}
