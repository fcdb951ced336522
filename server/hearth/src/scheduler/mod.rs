//! The live scheduler: drives one [`hearth_pool::Pool`] per profile with the
//! real clock and the runtime, and runs jobs on the pods the policy assigns.
//!
//! The policy decides (warm reuse for the same caller, standby promotion, cold
//! starts, keep-alive, budgets); this module carries its decisions out:
//! `StartPod` starts a runtime pod in a task and reports `PodReady` (or
//! `PodGone` when the start fails), `Assign` runs the job once all its pods
//! are assigned ([`run`]), `Reset` wipes the pod before its next job,
//! `Release` stops the pod and reports `PodGone`. Every job end, however it
//! ends, is reported as `JobFinished`. Every decision is recorded with its
//! reason in `pod_event` by a background writer ([`record`]), never on a
//! job's critical path. The policy's clock is milliseconds since the
//! scheduler started; the loop ticks every pool no later than its
//! [`Pool::next_wakeup`].
//!
//! It owns the in-memory view of pods and the id maps between the policy's
//! numbers and the service's ids; Postgres owns the jobs. Every job
//! transition is a compare-and-set in the store, so a job cancelled or taken
//! elsewhere is never run twice. Exactly one scheduler leads at a time (a
//! Postgres advisory lock, [`leader`]); a new leader rebuilds its queue from
//! the store, and its pools start empty (local pods die with the service).
//! Every replica listens for the job changes the others announce ([`listen`]):
//! the leader picks up the jobs other replicas accept at once, and on a
//! periodic scan compares the queued jobs in the store with those it holds,
//! so a lost notification never strands a job.
//!
//! It may not touch HTTP; handlers read it through the view methods.

mod leader;
mod listen;
mod record;
mod run;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_core::job::Spec;
use hearth_core::{Profile, Source};
use hearth_pool::policy::{Bounds, Placement as PoolPlacement, Purpose};
use hearth_pool::{
    CallerId, Decision, Event, Instant as PoolInstant, JobId, Kind, PodId, Pool, Reason, Request,
    Shares, Snapshot, TenantId,
};
use hearth_runtime::{Pod, PodEvent, PodSpec, Runtime};
use hearth_store::job::{Finish, JobRow};
use hearth_store::pod_event::NewPodEvent;
use serde_json::{Value, json};
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use crate::hub::Hub;
use crate::metrics::{Metrics, PoolGauges};

pub use leader::Leader;

/// Advisory lock key of the scheduler lease ("HEARTH" + 1).
const LEASE_KEY: i64 = 0x4845_4152_5448_0001;
/// How often the leader checks its lease connection.
const SYNC: Duration = Duration::from_millis(500);
/// How often the leader scans the store for queued jobs it does not hold and
/// for cancellations, whether or not a notification said something changed.
const PICKUP_SCAN: Duration = Duration::from_secs(2);
/// Shortest gap between two scans woken by notifications: a burst of
/// accepted jobs costs one scan per gap, not one per job. The gap is at least
/// four times what the last scan took, so that however long the queue,
/// scanning takes at most a fifth of the leader's time.
const PICKUP_GAP: Duration = Duration::from_millis(20);
/// How long the lease connection may take to answer its liveness check.
const LEASE_CHECK: Duration = Duration::from_secs(5);
/// How often the leader re-reads the tenants' stored budgets.
const BUDGET_SYNC: Duration = Duration::from_secs(5);
/// How often callers no pool tracks are dropped from the id maps.
const CALLER_SWEEP: Duration = Duration::from_secs(60);
/// Shortest time from a pod's start to the report that it failed. The pool
/// replaces a pod that failed to start at once, so a start that always fails
/// at once (a full state disk, a broken agent) would otherwise be retried in
/// a busy loop; this bounds the retries to one per starting pod per gap.
const START_RETRY_GAP: Duration = Duration::from_secs(1);

/// Settings of the scheduler, taken from the service configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_attempts: u32,
    pub max_log_bytes: u64,
    pub job_output_bytes: usize,
    pub pod_start_timeout: Duration,
    pub pools: PoolSettings,
    /// Writes the spans of each job's phases (off without trace export).
    pub tracer: crate::telemetry::Tracer,
}

/// The GPU inventory of the pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpus {
    pub count: u32,
    /// Real devices (each pod gets its own through `CUDA_VISIBLE_DEVICES`),
    /// or accounting-only GPUs that exist only in the books.
    pub real: bool,
}

impl Gpus {
    /// `configured` accounting-only GPUs, else the machine's NVIDIA GPUs.
    pub fn detect(configured: Option<u32>) -> Gpus {
        if let Some(count) = configured {
            return Gpus { count, real: false };
        }
        let count = count_real_gpus();
        Gpus {
            count,
            real: count > 0,
        }
    }

    /// `real` or `accounting-only`, as the API labels the inventory.
    pub fn label(self) -> &'static str {
        if self.real { "real" } else { "accounting-only" }
    }
}

fn count_real_gpus() -> u32 {
    if let Ok(dir) = std::fs::read_dir("/proc/driver/nvidia/gpus") {
        let n = dir.flatten().count() as u32;
        if n > 0 {
            return n;
        }
    }
    match std::process::Command::new("nvidia-smi").arg("-L").output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("GPU "))
            .count() as u32,
        _ => 0,
    }
}

/// How the pools are built (see the `pool_*`, `standby_*`, `keep_alive_*`
/// and `gpus` flags).
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub kind: Kind,
    pub standby_min: u32,
    pub standby_max: u32,
    pub keep_alive_min: Duration,
    pub keep_alive_max: Duration,
    pub budget_floor_gpus: Option<f64>,
    pub budget_ceiling_gpus: Option<f64>,
    pub gpus: Gpus,
}

impl PoolSettings {
    /// Splits the GPU inventory among the GPU profiles, so that pools never
    /// count the same GPU twice: each gets a disjoint range of devices, as
    /// even as the count allows (profiles in name order; the first ones take
    /// the remainder). Returns `(first device, count)` per GPU profile.
    pub fn partition<'a>(
        &self,
        profiles: impl IntoIterator<Item = &'a Profile>,
    ) -> BTreeMap<String, (u32, u32)> {
        let mut names: Vec<&str> = profiles
            .into_iter()
            .filter(|p| p.gpus > 0)
            .map(|p| p.name.as_str())
            .collect();
        names.sort_unstable();
        let n = names.len() as u32;
        let mut first = 0;
        let mut out = BTreeMap::new();
        for (i, name) in names.into_iter().enumerate() {
            let count = self.gpus.count / n + u32::from((i as u32) < self.gpus.count % n);
            out.insert(name.to_owned(), (first, count));
            first += count;
        }
        out
    }

    /// The policy configuration of `profile`'s pool, holding `gpus` GPUs of
    /// the inventory (zero for CPU profiles, which no budget limits).
    pub fn config_for(&self, profile: &Profile, gpus: u32) -> anyhow::Result<hearth_pool::Config> {
        let mut c = hearth_pool::Config::for_profile(profile, gpus);
        c.standby.min = self.standby_min;
        c.standby.max = self.standby_max;
        c.keep_alive.min = self.keep_alive_min;
        c.keep_alive.max = self.keep_alive_max;
        if self.keep_alive_min <= self.keep_alive_max {
            c.keep_alive.default = c
                .keep_alive
                .default
                .clamp(self.keep_alive_min, self.keep_alive_max);
        }
        let shares = |what: &str, gpus: f64| {
            Shares::from_gpus(gpus, c.shares_per_gpu).ok_or_else(|| {
                anyhow::anyhow!(
                    "{what} {gpus} is not a whole number of GPU shares (1/{})",
                    c.shares_per_gpu
                )
            })
        };
        if let Some(f) = self.budget_floor_gpus {
            c.budget.pool.floor = shares("pool budget floor", f)?;
        }
        if let Some(f) = self.budget_ceiling_gpus {
            c.budget.pool.ceiling = shares("pool budget ceiling", f)?;
        }
        c.validate()
            .map_err(|e| anyhow::anyhow!("profile `{}`: {e}", profile.name))?;
        Ok(c)
    }
}

/// A job waiting for pods.
#[derive(Debug, Clone)]
struct Queued {
    job_id: Uuid,
    tenant_id: Uuid,
    spec: Arc<Spec>,
    accepted_at: OffsetDateTime,
    /// Since when it waits for pods: its acceptance, or its re-queueing.
    queued_at: std::time::SystemTime,
    /// The trace it was accepted in: its spans continue it.
    trace: Option<crate::telemetry::TraceParent>,
}

impl Queued {
    fn from_row(row: &JobRow) -> Result<Self, serde_json::Error> {
        Ok(Queued {
            job_id: row.job_id,
            tenant_id: row.tenant_id,
            spec: Arc::new(serde_json::from_value(row.spec.clone())?),
            accepted_at: row.created_at,
            queued_at: row.created_at.into(),
            trace: row
                .traceparent
                .as_deref()
                .and_then(crate::telemetry::TraceParent::parse),
        })
    }
}

/// Where a runtime pod is in its life, as far as this driver is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its start task runs.
    Starting,
    /// Up, and held by no job (warm, standby, or reserved in silence).
    Ready,
    /// Promoted or assigned to this job.
    Busy(Uuid),
    /// Being stopped (or to be stopped as soon as its start ends).
    Draining,
}

#[derive(Debug)]
struct Slot {
    runtime_id: String,
    pod: Option<Pod>,
    placement: PoolPlacement,
    phase: Phase,
    /// The tenant whose binding it holds (its job's, or its warm caller's).
    tenant: Option<Uuid>,
    /// Reset by the policy: wipe before the next job.
    wipe: bool,
}

/// One profile's pool and its pods.
#[derive(Debug)]
struct ProfilePool {
    profile: Profile,
    pool: Pool,
    /// The first physical GPU of this pool's part of the inventory.
    gpu_first: u32,
    slots: HashMap<PodId, Slot>,
    by_runtime: HashMap<String, PodId>,
    /// Share-milliseconds held (active, warm, standby, draining) up to `held_at`.
    share_ms: [f64; 4],
    held_at: PoolInstant,
}

impl ProfilePool {
    fn held(&self) -> [u64; 4] {
        let h = self.pool.held();
        [h.active, h.warm, h.standby, h.draining]
    }

    /// Adds what was held since the last event; call before every event.
    fn integrate(&mut self, now: PoolInstant) {
        let dt = now.as_millis().saturating_sub(self.held_at.as_millis()) as f64;
        let held = self.held();
        for (acc, shares) in self.share_ms.iter_mut().zip(held) {
            *acc = (shares as f64).mul_add(dt, *acc);
        }
        self.held_at = self.held_at.max(now);
    }

    /// GPU-seconds held by state up to `now`.
    fn gpu_seconds(&self, now: PoolInstant) -> [f64; 4] {
        let dt = now.as_millis().saturating_sub(self.held_at.as_millis()) as f64;
        let per = f64::from(self.pool.config().shares_per_gpu.max(1)) * 1000.0;
        let mut out = [0.0; 4];
        for ((o, acc), shares) in out.iter_mut().zip(self.share_ms).zip(self.held()) {
            *o = (shares as f64).mul_add(dt, acc) / per;
        }
        out
    }
}

/// A job the policy knows.
#[derive(Debug)]
struct Job {
    queued: Queued,
    id: JobId,
    assigned: Vec<(PodId, Source, run::Why)>,
    /// When the policy first acted for it (a start, a promotion, an assignment).
    covered_at: Option<Instant>,
    cancel: Arc<Notify>,
    /// Assigned whole and handed to [`run`].
    running: bool,
}

#[derive(Debug, Default)]
struct State {
    leading: bool,
    pools: BTreeMap<String, ProfilePool>,
    jobs: HashMap<Uuid, Job>,
    job_ids: HashMap<JobId, Uuid>,
    next_job: u64,
    callers: HashMap<(Uuid, String), CallerId>,
    caller_names: HashMap<CallerId, (Uuid, String)>,
    next_caller: u64,
    /// When callers no pool tracks were last dropped.
    callers_swept_at: Option<Instant>,
    tenants: HashMap<Uuid, TenantId>,
    tenant_uuids: HashMap<TenantId, Uuid>,
    /// The service is shutting down: no new jobs, the running ones end.
    draining: bool,
    /// A notification told of a queued job this leader does not hold.
    pickup_wanted: bool,
    /// While a pickup scan runs: the jobs that ended meanwhile, which the
    /// scan may have seen queued but must not queue again.
    scanning: Option<HashSet<Uuid>>,
}

impl State {
    /// Whether `pod` of `profile` is still the runtime's pod `runtime_id`.
    fn owns(&self, profile: &str, pod: PodId, runtime_id: &str) -> bool {
        self.pools
            .get(profile)
            .and_then(|pp| pp.slots.get(&pod))
            .is_some_and(|slot| slot.runtime_id == runtime_id)
    }

    fn tenant_id(&mut self, tenant: Uuid) -> TenantId {
        let next = TenantId(self.tenants.len() as u64);
        let id = *self.tenants.entry(tenant).or_insert(next);
        self.tenant_uuids.insert(id, tenant);
        id
    }

    fn caller_id(&mut self, tenant: Uuid, caller: &str) -> CallerId {
        let key = (tenant, caller.to_owned());
        if let Some(&id) = self.callers.get(&key) {
            return id;
        }
        let id = CallerId(self.next_caller);
        self.next_caller += 1;
        self.callers.insert(key.clone(), id);
        self.caller_names.insert(id, key);
        id
    }

    /// Drops the ids of callers no pool tracks any more (they went idle past
    /// the pools' caller TTL), so memory follows live callers rather than
    /// every caller name ever seen. A caller that comes back gets a new id.
    fn forget_callers(&mut self) {
        let pools = &self.pools;
        self.caller_names
            .retain(|&id, _| pools.values().any(|pp| pp.pool.knows_caller(id)));
        let names = &self.caller_names;
        self.callers.retain(|_, id| names.contains_key(id));
    }

    /// Hands `profile`'s pod to a tenant's job; `None` if the pool no longer
    /// knows the pod.
    fn bind_slot(
        &mut self,
        profile: &str,
        pod: PodId,
        tenant: Uuid,
        job: Uuid,
    ) -> Option<&mut Slot> {
        let slot = self.pools.get_mut(profile)?.slots.get_mut(&pod)?;
        slot.tenant = Some(tenant);
        slot.phase = Phase::Busy(job);
        Some(slot)
    }

    fn job_tenant(&self, job: JobId) -> Option<(Uuid, Uuid)> {
        let uuid = *self.job_ids.get(&job)?;
        Some((uuid, self.jobs.get(&uuid)?.queued.tenant_id))
    }

    /// A reason as `viewer` may see it: callers and tenants by name, and
    /// anything of another tenant blanked out.
    fn reason_json(&self, reason: &Reason, viewer: Option<Uuid>) -> Value {
        let names = ViewerNames { st: self, viewer };
        let mut v = serde_json::to_value(reason).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut v {
            for key in ["caller", "from", "to"] {
                if let Some(n) = map.get(key).and_then(Value::as_u64) {
                    map.insert(key.to_owned(), json!(names.own_caller(CallerId(n))));
                }
            }
            if let Some(n) = map.get("tenant").and_then(Value::as_u64) {
                map.insert("tenant".to_owned(), json!(names.own_tenant(TenantId(n))));
            }
            map.insert("message".to_owned(), json!(reason.describe(&names)));
        }
        v
    }
}

/// Names callers and tenants in a reason as one tenant may see them: its
/// own by name, every other one anonymously.
struct ViewerNames<'a> {
    st: &'a State,
    viewer: Option<Uuid>,
}

impl ViewerNames<'_> {
    fn own_caller(&self, id: CallerId) -> Option<&str> {
        match self.st.caller_names.get(&id) {
            Some((t, name)) if Some(*t) == self.viewer => Some(name),
            _ => None,
        }
    }

    fn own_tenant(&self, id: TenantId) -> Option<Uuid> {
        self.st
            .tenant_uuids
            .get(&id)
            .copied()
            .filter(|t| Some(*t) == self.viewer)
    }
}

impl hearth_pool::Names for ViewerNames<'_> {
    fn caller(&self, id: CallerId) -> String {
        self.own_caller(id).map_or_else(
            || "another caller".to_owned(),
            |name| format!("caller `{name}`"),
        )
    }

    fn tenant(&self, id: TenantId) -> String {
        self.own_tenant(id)
            .map_or_else(|| "another tenant".to_owned(), |t| format!("tenant {t}"))
    }
}

/// What to do once the state lock is released.
#[derive(Debug)]
enum Action {
    Start {
        profile: String,
        pod: PodId,
        spec: PodSpec,
    },
    Run {
        job: Queued,
        placement: run::Placement,
    },
    Stop {
        profile: String,
        pod: PodId,
        runtime_id: String,
    },
    Fail {
        job: Queued,
        finish: Finish,
    },
}

struct Inner {
    db: PgPool,
    /// For intermediate transitions only (see `hearth_store::connect_relaxed`).
    relaxed: PgPool,
    runtime: Arc<dyn Runtime>,
    hub: Arc<Hub>,
    /// The profiles the pools are built from (again after a step-down).
    profiles: Arc<BTreeMap<String, Profile>>,
    settings: Settings,
    metrics: Arc<Metrics>,
    recorder: record::Recorder,
    /// The policy's epoch.
    epoch: Instant,
    state: Mutex<State>,
    wake: Notify,
    /// Who this replica is, as other replicas see it when it leads.
    replica: leader::Replica,
    /// The leadership epoch this replica took the lease with (0 before):
    /// carried on every agent request and every write of a job's progress.
    leadership: AtomicI64,
    /// Tasks running or failing jobs (see [`Scheduler::drained`]); admitted
    /// under the state lock, and only while not draining.
    job_tasks: AtomicUsize,
    /// Key of the next job task in `aborts`.
    next_task: AtomicU64,
    /// Signalled when the last job task ends.
    job_tasks_ended: Notify,
    /// Abort handles of the job tasks, to halt them at the end of a shutdown.
    aborts: Mutex<HashMap<u64, tokio::task::AbortHandle>>,
}

/// Counts a job task while it lives (aborted or not).
struct JobTask {
    inner: Arc<Inner>,
    key: u64,
}

impl Drop for JobTask {
    fn drop(&mut self) {
        self.inner
            .aborts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
        if self.inner.job_tasks.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.inner.job_tasks_ended.notify_waiters();
            // A draining leader lets its lease go once nothing runs.
            self.inner.wake.notify_one();
        }
    }
}

/// Handle to the scheduler; cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

/// Pods of one profile by state, for the profiles API.
#[derive(Debug, Clone, Default, serde::Serialize, utoipa::ToSchema)]
pub struct PodCounts {
    pub starting: u32,
    /// Started and unbound, ready for any caller's job.
    pub standby: u32,
    pub active: u32,
    pub warm: u32,
    pub stopping: u32,
}

/// A pool as one tenant may see it.
#[derive(Debug, Clone)]
pub struct PoolView {
    pub profile: String,
    pub gpus: Gpus,
    pub snapshot: Snapshot,
    /// The viewer's number in the policy, if it has one.
    pub tenant: Option<TenantId>,
    pub tenant_bounds: Bounds,
    /// Names of the viewer's own callers.
    pub callers: HashMap<CallerId, String>,
}

/// A tenant budget the pools refuse.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error("unknown profile `{0}`")]
    UnknownProfile(String),
    #[error("{0}")]
    Invalid(String),
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Scheduler {
    /// A scheduler with one empty pool per profile; fails on a pool
    /// configuration the policy refuses.
    pub fn new(
        db: PgPool,
        relaxed: PgPool,
        runtime: Arc<dyn Runtime>,
        profiles: Arc<BTreeMap<String, Profile>>,
        hub: Arc<Hub>,
        settings: Settings,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        let pools = build_pools(&profiles, &settings)?;
        // State changes reach the other replicas through the store.
        hub.start_announcing(db.clone());
        // Job events (states, output lines) are written in batches, relaxed
        // like the intermediate transitions: the durable commit of a job's
        // end, which waits for them, makes them durable too.
        hub.start_journal(relaxed.clone());
        let replica = leader::Replica::new();
        tracing::info!(replica_id = %replica.id, "replica id");
        Ok(Scheduler {
            inner: Arc::new(Inner {
                recorder: record::Recorder::start(db.clone()),
                db,
                relaxed,
                runtime,
                hub,
                profiles,
                settings,
                metrics,
                epoch: Instant::now(),
                state: Mutex::new(State {
                    pools,
                    ..State::default()
                }),
                wake: Notify::new(),
                replica,
                job_tasks: AtomicUsize::new(0),
                leadership: AtomicI64::new(0),
                next_task: AtomicU64::new(0),
                job_tasks_ended: Notify::new(),
                aborts: Mutex::default(),
            }),
        })
    }
}

/// One empty pool per profile; fails on a pool configuration the policy
/// refuses.
fn build_pools(
    profiles: &BTreeMap<String, Profile>,
    settings: &Settings,
) -> anyhow::Result<BTreeMap<String, ProfilePool>> {
    {
        let mut pools = BTreeMap::new();
        let partition = settings.pools.partition(profiles.values());
        for p in profiles.values() {
            let (gpu_first, gpus) = partition.get(&p.name).copied().unwrap_or((0, 0));
            if p.gpus > 0 && gpus < p.gpus {
                tracing::warn!(profile = %p.name, gpus, needs = p.gpus, "GPU profile's share of the inventory cannot hold one pod: its jobs are unplaceable");
            }
            let config = settings.pools.config_for(p, gpus)?;
            let pool = Pool::new(settings.pools.kind, config)
                .map_err(|e| anyhow::anyhow!("profile `{}`: {e}", p.name))?;
            pools.insert(
                p.name.clone(),
                ProfilePool {
                    profile: p.clone(),
                    pool,
                    gpu_first,
                    slots: HashMap::new(),
                    by_runtime: HashMap::new(),
                    share_ms: [0.0; 4],
                    held_at: PoolInstant::ZERO,
                },
            );
        }
        Ok(pools)
    }
}

impl Scheduler {
    /// Runs a job task, counted until it ends (see [`Scheduler::drained`]);
    /// false, and nothing runs, once the service is shutting down. Checked
    /// and counted under the state lock, so that a draining leader that sees
    /// no job task may let its lease go: none can start after.
    fn spawn_job_task(&self, task: impl std::future::Future<Output = ()> + Send + 'static) -> bool {
        let guard = {
            let st = self.state();
            if st.draining {
                return false;
            }
            self.inner.job_tasks.fetch_add(1, Ordering::AcqRel);
            JobTask {
                inner: self.inner.clone(),
                key: self.inner.next_task.fetch_add(1, Ordering::Relaxed),
            }
        };
        let key = guard.key;
        // Hold the map while spawning, so the task cannot end (and remove
        // its entry) before the entry exists.
        let mut aborts = self.inner.aborts.lock().unwrap_or_else(|e| e.into_inner());
        let handle = tokio::spawn(async move {
            let _guard = guard;
            task.await;
        });
        aborts.insert(key, handle.abort_handle());
        true
    }

    /// The leadership epoch this replica leads with.
    fn epoch(&self) -> i64 {
        self.inner.leadership.load(Ordering::SeqCst)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().expect("scheduler state poisoned")
    }

    /// The policy's clock.
    fn now(&self) -> PoolInstant {
        let ms = Instant::now().duration_since(self.inner.epoch).as_millis();
        PoolInstant::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    // ---- driving the policy ---------------------------------------------------

    /// Feeds one event to `profile`'s pool and carries its decisions out (in
    /// the state; actions that need I/O are pushed to `actions`).
    fn feed(
        &self,
        st: &mut State,
        profile: &str,
        event: Event,
        actions: &mut Vec<Action>,
    ) -> Result<(), hearth_pool::policy::Error> {
        let now = self.now();
        let Some(pp) = st.pools.get_mut(profile) else {
            return Ok(());
        };
        pp.integrate(now);
        let mut out = Vec::new();
        pp.pool.handle(now, event, &mut out)?;
        for d in out {
            self.apply(st, profile, d, actions);
        }
        Ok(())
    }

    fn record(
        &self,
        tenant_id: Option<Uuid>,
        pod_id: Option<&str>,
        profile: &str,
        kind: &'static str,
        job_id: Option<Uuid>,
        reason: Value,
    ) {
        self.inner.recorder.record(NewPodEvent {
            tenant_id,
            pod_id: pod_id.map(str::to_owned),
            profile: profile.to_owned(),
            at: OffsetDateTime::now_utc(),
            kind,
            job_id,
            reason,
        });
    }

    /// Records a decision about `profile`'s pod (as its tenant may see it)
    /// and hands back the pod's slot; `None` if the pool no longer knows it.
    fn record_pod<'a>(
        &self,
        st: &'a mut State,
        profile: &str,
        pod: PodId,
        kind: &'static str,
        reason: &Reason,
    ) -> Option<&'a mut Slot> {
        let slot = st.pools.get(profile)?.slots.get(&pod)?;
        let (tenant, runtime_id) = (slot.tenant, slot.runtime_id.clone());
        let why = st.reason_json(reason, tenant);
        self.record(tenant, Some(&runtime_id), profile, kind, None, why);
        st.pools.get_mut(profile)?.slots.get_mut(&pod)
    }

    fn apply(&self, st: &mut State, profile: &str, d: Decision, actions: &mut Vec<Action>) {
        let real_gpus = self.inner.settings.pools.gpus.real;
        match d {
            Decision::StartPod {
                pod,
                purpose,
                placement,
                reason,
            } => {
                let job = match purpose {
                    Purpose::ForJob(j) => st.job_tenant(j),
                    Purpose::Standby => None,
                };
                if let Some((uuid, _)) = job
                    && let Some(j) = st.jobs.get_mut(&uuid)
                {
                    j.covered_at.get_or_insert_with(Instant::now);
                }
                let tenant = job.map(|(_, t)| t);
                let runtime_id = format!("pod-{}", Uuid::now_v7().simple());
                let mut why = st.reason_json(&reason, tenant);
                why["purpose"] = json!(if job.is_some() { "job" } else { "standby" });
                why["placement"] = json!(placement);
                self.record(
                    tenant,
                    Some(&runtime_id),
                    profile,
                    "start",
                    job.map(|(j, _)| j),
                    why,
                );
                let Some(pp) = st.pools.get_mut(profile) else {
                    return;
                };
                let mut labels = BTreeMap::from([
                    ("profile".to_owned(), profile.to_owned()),
                    ("pool_pod".to_owned(), pod.0.to_string()),
                ]);
                if let Some(t) = tenant {
                    labels.insert("tenant".to_owned(), t.to_string());
                }
                let spec = PodSpec {
                    pod_id: runtime_id.clone(),
                    profile: pp.profile.clone(),
                    gpu_devices: if real_gpus {
                        devices(&placement, pp.gpu_first)
                    } else {
                        Vec::new()
                    },
                    labels,
                };
                pp.by_runtime.insert(runtime_id.clone(), pod);
                pp.slots.insert(
                    pod,
                    Slot {
                        runtime_id,
                        pod: None,
                        placement,
                        phase: Phase::Starting,
                        tenant: None,
                        wipe: false,
                    },
                );
                actions.push(Action::Start {
                    profile: profile.to_owned(),
                    pod,
                    spec,
                });
            }
            Decision::Promote {
                pod,
                job,
                placement,
                reason,
            } => {
                let Some((uuid, tenant)) = st.job_tenant(job) else {
                    return;
                };
                if let Some(j) = st.jobs.get_mut(&uuid) {
                    j.covered_at.get_or_insert_with(Instant::now);
                }
                let mut why = st.reason_json(&reason, Some(tenant));
                why["placement"] = json!(placement);
                let Some(slot) = st.bind_slot(profile, pod, tenant, uuid) else {
                    return;
                };
                slot.placement = placement;
                let runtime_id = slot.runtime_id.clone();
                self.record(
                    Some(tenant),
                    Some(&runtime_id),
                    profile,
                    "promote",
                    Some(uuid),
                    why,
                );
            }
            Decision::Assign {
                job,
                pod,
                source,
                reason,
            } => {
                let Some((uuid, tenant)) = st.job_tenant(job) else {
                    return;
                };
                let mut why = st.reason_json(&reason, Some(tenant));
                why["source"] = json!(source.as_str());
                let because = run::Why::of(&why);
                let Some(slot) = st.bind_slot(profile, pod, tenant, uuid) else {
                    return;
                };
                let runtime_id = slot.runtime_id.clone();
                self.record(
                    Some(tenant),
                    Some(&runtime_id),
                    profile,
                    "assign",
                    Some(uuid),
                    why,
                );
                let Some(j) = st.jobs.get_mut(&uuid) else {
                    return;
                };
                j.covered_at.get_or_insert_with(Instant::now);
                j.assigned.push((pod, source, because));
                if j.assigned.len() as u32 >= j.queued.spec.pods() && !j.running {
                    j.running = true;
                    let acquire_ms = j.covered_at.map_or(0.0, |t| ms(t.elapsed()));
                    let assigned = j.assigned.clone();
                    let queued = j.queued.clone();
                    let Some(pp) = st.pools.get_mut(profile) else {
                        return;
                    };
                    let pods = assigned
                        .iter()
                        .map(|(pod, _, because)| {
                            let slot = pp.slots.get_mut(pod);
                            let wipe = slot.as_ref().is_some_and(|s| s.wipe);
                            if let Some(s) = slot {
                                s.wipe = false;
                            }
                            let slot = pp.slots.get(pod);
                            run::Assigned {
                                pod: *pod,
                                runtime_id: slot.map(|s| s.runtime_id.clone()).unwrap_or_default(),
                                address: slot.and_then(|s| s.pod.clone()),
                                wipe,
                                devices: match slot {
                                    Some(s) if real_gpus => devices(&s.placement, pp.gpu_first),
                                    _ => Vec::new(),
                                },
                                why: because.clone(),
                            }
                        })
                        .collect();
                    // The job is as cold as its coldest pod.
                    let source = assigned
                        .iter()
                        .map(|(_, s, _)| *s)
                        .max_by_key(|s| match s {
                            Source::Warm => 0,
                            Source::Standby => 1,
                            Source::Cold => 2,
                        })
                        .unwrap_or(Source::Cold);
                    actions.push(Action::Run {
                        job: queued,
                        placement: run::Placement {
                            profile: profile.to_owned(),
                            pods,
                            source,
                            acquire_ms,
                        },
                    });
                }
            }
            Decision::Reset { pod, reason } => {
                if let Some(slot) = self.record_pod(st, profile, pod, "reset", &reason) {
                    slot.tenant = None;
                    slot.wipe = true;
                    slot.phase = Phase::Ready;
                }
            }
            Decision::Release { pod, reason } => {
                let Some(slot) = self.record_pod(st, profile, pod, "release", &reason) else {
                    return;
                };
                let starting = slot.phase == Phase::Starting;
                slot.phase = Phase::Draining;
                // A pod still starting is stopped when its start ends.
                if !starting {
                    actions.push(Action::Stop {
                        profile: profile.to_owned(),
                        pod,
                        runtime_id: slot.runtime_id.clone(),
                    });
                }
            }
            Decision::Budget {
                budget,
                gpus,
                inputs,
            } => {
                tracing::debug!(%profile, budget_gpus = gpus, ?inputs, "pool budget changed");
                self.record(
                    None,
                    None,
                    profile,
                    "budget",
                    None,
                    json!({"code": "budget", "budget_shares": budget.0, "budget_gpus": gpus, "inputs": inputs}),
                );
            }
        }
    }

    /// Carries out what needs I/O, each in its own task. While the service
    /// shuts down, no job starts and no pod is started for one: the jobs stay
    /// queued in the store for the next leader.
    fn perform(&self, actions: Vec<Action>) {
        for action in actions {
            let this = self.clone();
            match action {
                Action::Start { .. } if self.state().draining => {}
                Action::Start { profile, pod, spec } => {
                    tokio::spawn(async move { this.start_pod(profile, pod, spec).await });
                }
                Action::Run { job, placement } => {
                    let job_id = job.job_id;
                    if !self.spawn_job_task(async move { this.run_job(job, placement).await }) {
                        // Its pods go back to the pool; the job stays queued.
                        self.finished(job_id);
                    }
                }
                Action::Stop {
                    profile,
                    pod,
                    runtime_id,
                } => {
                    tokio::spawn(async move { this.stop_pod(profile, pod, runtime_id).await });
                }
                Action::Fail { job, finish } => {
                    // Draining: the next leader fails it.
                    self.spawn_job_task(async move { this.record_end(&job, finish).await });
                }
            }
        }
    }

    async fn start_pod(self, profile: String, pod: PodId, spec: PodSpec) {
        let runtime_id = spec.pod_id.clone();
        let began = Instant::now();
        let timeout = self.inner.settings.pod_start_timeout;
        let started = match tokio::time::timeout(timeout, self.inner.runtime.start_pod(spec)).await
        {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("pod start took longer than {timeout:?}")),
        };
        let mut actions = Vec::new();
        match started {
            Ok(p) => {
                let orphan = {
                    let mut st = self.state();
                    // A pool rebuilt meanwhile (a step-down) may number
                    // another pod alike: only its own slot takes it.
                    !st.owns(&profile, pod, &runtime_id)
                        || self.pod_started(&mut st, &profile, pod, p, &mut actions)
                };
                if orphan {
                    let _ = self.inner.runtime.stop_pod(&runtime_id).await;
                }
            }
            Err(message) => {
                tracing::warn!(%runtime_id, error = %message, "pod failed to start");
                // Whatever the start left behind goes.
                if let Err(e) = self.inner.runtime.stop_pod(&runtime_id).await {
                    tracing::debug!(%runtime_id, error = %e, "cleaning up a failed start");
                }
                tokio::time::sleep_until(began + START_RETRY_GAP).await;
                let mut st = self.state();
                if !st.owns(&profile, pod, &runtime_id) {
                    return;
                }
                self.pod_gone(
                    &mut st,
                    &profile,
                    pod,
                    json!({"code": "start_failed", "message": message}),
                    &mut actions,
                );
            }
        }
        self.perform(actions);
    }

    /// A started pod is up. True when nothing knows it any more (stop it).
    fn pod_started(
        &self,
        st: &mut State,
        profile: &str,
        pod: PodId,
        p: Pod,
        actions: &mut Vec<Action>,
    ) -> bool {
        let Some(slot) = st
            .pools
            .get_mut(profile)
            .and_then(|pp| pp.slots.get_mut(&pod))
        else {
            return true;
        };
        let runtime_id = slot.runtime_id.clone();
        slot.pod = Some(p);
        if slot.phase != Phase::Starting {
            // Released while it started.
            actions.push(Action::Stop {
                profile: profile.to_owned(),
                pod,
                runtime_id,
            });
            return false;
        }
        slot.phase = Phase::Ready;
        self.record(
            None,
            Some(&runtime_id),
            profile,
            "ready",
            None,
            json!({"code": "ready", "message": "the pod's agent answered"}),
        );
        if let Err(e) = self.feed(st, profile, Event::PodReady { pod }, actions) {
            tracing::error!(%runtime_id, error = %e, "pool refused a ready pod");
        }
        false
    }

    async fn stop_pod(self, profile: String, pod: PodId, runtime_id: String) {
        if let Err(e) = self.inner.runtime.stop_pod(&runtime_id).await {
            tracing::warn!(%runtime_id, error = %e, "stopping pod failed");
        }
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            self.pod_gone(
                &mut st,
                &profile,
                pod,
                json!({"code": "stopped", "message": "the pod was stopped"}),
                &mut actions,
            );
        }
        self.perform(actions);
    }

    /// Drops a pod from the books and tells its pool.
    fn pod_gone(
        &self,
        st: &mut State,
        profile: &str,
        pod: PodId,
        why: Value,
        actions: &mut Vec<Action>,
    ) {
        let Some(pp) = st.pools.get_mut(profile) else {
            return;
        };
        let Some(slot) = pp.slots.remove(&pod) else {
            return;
        };
        pp.by_runtime.remove(&slot.runtime_id);
        self.record(None, Some(&slot.runtime_id), profile, "gone", None, why);
        if let Err(e) = self.feed(st, profile, Event::PodGone { pod }, actions) {
            tracing::debug!(pod_id = %slot.runtime_id, error = %e, "pool did not know the pod");
        }
    }

    /// A pod vanished without being asked to (its agent died).
    fn runtime_gone(&self, runtime_id: &str, reason: &str) {
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            let Some((profile, pod)) = st.pools.iter().find_map(|(name, pp)| {
                pp.by_runtime
                    .get(runtime_id)
                    .map(|&pod| (name.clone(), pod))
            }) else {
                return;
            };
            let phase = st.pools[&profile].slots.get(&pod).map(|s| s.phase);
            let lost = match phase {
                Some(Phase::Ready) => true,
                // A running job notices on its own connections and ends lost.
                Some(Phase::Busy(job)) => !st.jobs.get(&job).is_some_and(|j| j.running),
                Some(Phase::Starting | Phase::Draining) | None => false,
            };
            if lost {
                tracing::info!(pod_id = %runtime_id, %reason, "pod gone");
                self.pod_gone(
                    &mut st,
                    &profile,
                    pod,
                    json!({"code": "lost", "message": reason}),
                    &mut actions,
                );
            }
        }
        self.perform(actions);
    }

    /// Queues a job with its pool (the leader only; others leave it to the
    /// leader, which finds it in the store).
    fn enqueue(&self, st: &mut State, job: Queued, actions: &mut Vec<Action>) {
        if st.jobs.contains_key(&job.job_id) || !st.leading || st.draining {
            return;
        }
        let profile = job.spec.profile.clone();
        if !st.pools.contains_key(&profile) {
            // Validated at submission; a profile removed from the
            // configuration since then fails the job.
            let message = format!("profile `{profile}` is no longer configured");
            actions.push(Action::Fail {
                job,
                finish: run::failed("unknown_profile", message),
            });
            return;
        }
        let id = JobId(st.next_job);
        st.next_job += 1;
        let caller = st.caller_id(job.tenant_id, &job.spec.caller);
        let tenant = st.tenant_id(job.tenant_id);
        let request = Request {
            job: id,
            caller,
            tenant,
            shares: None,
            pods: job.spec.pods(),
            priority: job.spec.priority,
        };
        let uuid = job.job_id;
        st.job_ids.insert(id, uuid);
        st.jobs.insert(
            uuid,
            Job {
                queued: job,
                id,
                assigned: Vec::new(),
                covered_at: None,
                cancel: Arc::new(Notify::new()),
                running: false,
            },
        );
        if let Err(e) = self.feed(st, &profile, Event::JobQueued(request), actions) {
            st.job_ids.remove(&id);
            if let Some(job) = st.jobs.remove(&uuid) {
                actions.push(Action::Fail {
                    job: job.queued,
                    finish: run::failed("unplaceable", e.to_string()),
                });
            }
        }
    }

    /// The end of a job, whatever it was, reported to its pool: its pods are
    /// free again (warm for its caller, as the policy decides).
    fn finished(&self, job_id: Uuid) {
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            self.finished_locked(&mut st, job_id, &mut actions);
        }
        self.perform(actions);
    }

    fn finished_locked(&self, st: &mut State, job_id: Uuid, actions: &mut Vec<Action>) {
        let Some(job) = st.jobs.remove(&job_id) else {
            return;
        };
        if let Some(ended) = &mut st.scanning {
            ended.insert(job_id);
        }
        st.job_ids.remove(&job.id);
        let profile = job.queued.spec.profile.clone();
        if let Some(pp) = st.pools.get_mut(&profile) {
            for slot in pp.slots.values_mut() {
                if slot.phase == Phase::Busy(job_id) {
                    slot.phase = Phase::Ready;
                }
            }
        }
        if let Err(e) = self.feed(st, &profile, Event::JobFinished { job: job.id }, actions) {
            tracing::error!(%job_id, error = %e, "pool did not know the job");
        }
    }

    /// Queues a job again after its pods were lost.
    fn resubmit(&self, job: Queued) {
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            self.enqueue(&mut st, job, &mut actions);
        }
        self.perform(actions);
    }

    /// Ticks every pool: keep-alives expire, standby and budget follow demand.
    fn tick_all(&self) {
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            if !st.leading {
                return;
            }
            let names: Vec<String> = st.pools.keys().cloned().collect();
            for name in names {
                if let Err(e) = self.feed(&mut st, &name, Event::Tick, &mut actions) {
                    tracing::error!(profile = %name, error = %e, "pool tick failed");
                }
            }
            let now = Instant::now();
            if st
                .callers_swept_at
                .is_none_or(|t| now.duration_since(t) >= CALLER_SWEEP)
            {
                st.forget_callers();
                st.callers_swept_at = Some(now);
            }
        }
        self.perform(actions);
    }

    /// When the earliest pool wants its next tick.
    fn next_wakeup(&self) -> Option<Instant> {
        let st = self.state();
        st.pools
            .values()
            .filter_map(|pp| pp.pool.next_wakeup())
            .min()
            .map(|t| self.inner.epoch + Duration::from_millis(t.as_millis()))
    }

    // ---- the service's side ---------------------------------------------------

    /// Hands a freshly accepted job to the scheduler (a replica that does
    /// not lead leaves it to the leader, and keeps nothing of it).
    pub fn submit(&self, row: &JobRow) {
        match Queued::from_row(row) {
            Ok(job) => {
                let mut actions = Vec::new();
                {
                    let mut st = self.state();
                    self.enqueue(&mut st, job, &mut actions);
                }
                self.perform(actions);
            }
            Err(e) => tracing::error!(job_id = %row.job_id, error = %e, "stored spec unreadable"),
        }
    }

    /// Stops a job that holds pods, or drops a queued one (already cancelled in
    /// the store).
    pub fn cancel(&self, job_id: Uuid) {
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            let (running, signal, profile) = match st.jobs.get(&job_id) {
                Some(j) => (j.running, j.cancel.clone(), j.queued.spec.profile.clone()),
                None => return,
            };
            if running {
                signal.notify_one();
            } else {
                self.inner.metrics.job_finished(&profile, "cancelled");
                self.finished_locked(&mut st, job_id, &mut actions);
            }
        }
        self.perform(actions);
    }

    fn cancel_signal(&self, job_id: Uuid) -> Arc<Notify> {
        self.state()
            .jobs
            .get(&job_id)
            .map_or_else(|| Arc::new(Notify::new()), |j| j.cancel.clone())
    }

    /// Pod counts per profile.
    pub fn pod_counts(&self) -> BTreeMap<String, PodCounts> {
        let st = self.state();
        st.pools
            .iter()
            .map(|(name, pp)| {
                let c = pp.pool.snapshot().pods;
                (
                    name.clone(),
                    PodCounts {
                        starting: c.starting,
                        standby: c.standby,
                        active: c.active + c.reserved,
                        warm: c.warm,
                        stopping: c.draining,
                    },
                )
            })
            .collect()
    }

    /// Jobs waiting for pods.
    pub fn queue_depth(&self) -> usize {
        let st = self.state();
        st.jobs.values().filter(|j| !j.running).count()
    }

    /// The pool of `profile` as `tenant` may see it.
    pub fn pool_view(&self, profile: &str, tenant: Uuid) -> Option<PoolView> {
        let st = self.state();
        let pp = st.pools.get(profile)?;
        let tenant_id = st.tenants.get(&tenant).copied();
        let config = pp.pool.config();
        Some(PoolView {
            profile: profile.to_owned(),
            gpus: Gpus {
                count: config.gpus,
                real: self.inner.settings.pools.gpus.real,
            },
            snapshot: pp.pool.snapshot(),
            tenant: tenant_id,
            tenant_bounds: tenant_id.map_or(config.budget.tenant, |t| config.tenant_bounds(t)),
            callers: st
                .caller_names
                .iter()
                .filter(|(_, (t, _))| *t == tenant)
                .map(|(&id, (_, name))| (id, name.clone()))
                .collect(),
        })
    }

    /// The profiles with pools.
    pub fn pool_names(&self) -> Vec<String> {
        self.state().pools.keys().cloned().collect()
    }

    /// Gauges of every pool, for `/metrics`; none on a replica that does not
    /// lead, whose pools hold nothing (the leader's figures are the truth).
    pub fn pool_gauges(&self) -> Vec<PoolGauges> {
        let now = self.now();
        let st = self.state();
        if !st.leading {
            return Vec::new();
        }
        st.pools
            .iter()
            .map(|(name, pp)| {
                let snap = pp.pool.snapshot();
                let c = snap.pods;
                let g = pp.gpu_seconds(now);
                PoolGauges {
                    profile: name.clone(),
                    pods: vec![
                        ("starting", c.starting),
                        ("standby", c.standby),
                        ("warm", c.warm),
                        ("reserved", c.reserved),
                        ("active", c.active),
                        ("draining", c.draining),
                    ],
                    gpu_seconds: vec![
                        ("active", g[0]),
                        ("warm", g[1]),
                        ("standby", g[2]),
                        ("draining", g[3]),
                    ],
                    budget_gpus: snap.budget.map(|b| b.gpus),
                    queue_depth: snap.queued_jobs,
                }
            })
            .collect()
    }

    /// Checks a tenant budget against `profile`'s pool, in shares.
    pub fn budget_bounds(
        &self,
        profile: &str,
        floor_gpus: f64,
        ceiling_gpus: f64,
    ) -> Result<Bounds, BudgetError> {
        let st = self.state();
        let pp = st
            .pools
            .get(profile)
            .ok_or_else(|| BudgetError::UnknownProfile(profile.to_owned()))?;
        let per = pp.pool.config().shares_per_gpu;
        let shares = |what: &str, gpus: f64| {
            Shares::from_gpus(gpus, per).ok_or_else(|| {
                BudgetError::Invalid(format!(
                    "{what} must be a non-negative multiple of 1/{per} GPU"
                ))
            })
        };
        let bounds = Bounds {
            floor: shares("floor_gpus", floor_gpus)?,
            ceiling: shares("ceiling_gpus", ceiling_gpus)?,
        };
        if bounds.floor > bounds.ceiling {
            return Err(BudgetError::Invalid(
                "floor_gpus exceeds ceiling_gpus".to_owned(),
            ));
        }
        Ok(bounds)
    }

    /// Applies a tenant's budget to the live pool of `profile`.
    pub fn set_tenant_budget(
        &self,
        tenant: Uuid,
        profile: &str,
        floor_gpus: f64,
        ceiling_gpus: f64,
    ) -> Result<(), BudgetError> {
        let bounds = self.budget_bounds(profile, floor_gpus, ceiling_gpus)?;
        let mut actions = Vec::new();
        {
            let mut st = self.state();
            let id = st.tenant_id(tenant);
            let leading = st.leading;
            let Some(pp) = st.pools.get_mut(profile) else {
                return Err(BudgetError::UnknownProfile(profile.to_owned()));
            };
            if pp.pool.config().budget.tenants.get(&id) == Some(&bounds) {
                return Ok(());
            }
            pp.pool
                .set_tenant_bounds(id, Some(bounds))
                .map_err(|e| BudgetError::Invalid(e.to_string()))?;
            if leading && let Err(e) = self.feed(&mut st, profile, Event::Tick, &mut actions) {
                tracing::error!(%profile, error = %e, "pool tick failed");
            }
        }
        self.perform(actions);
        Ok(())
    }

    // ---- the loop ---------------------------------------------------------------

    /// Listens for job changes (every replica), and leads once it holds the
    /// lease: recovers unfinished jobs, then schedules until the process
    /// ends. Returns if the lease is lost.
    pub async fn run(self) {
        let listen = self.listen();
        tokio::pin!(listen);
        loop {
            tokio::select! {
                () = &mut listen => return,
                () = self.lead() => {}
            }
            if self.state().draining {
                // Shutting down: this replica's watchers still hear the jobs
                // other replicas run until the process ends.
                listen.await;
                return;
            }
            // The lease went with its connection (the database restarted, or
            // the connection was cut): another replica may lead now. Step
            // down and compete for the lease again; the next leader, this
            // one or another, re-queues the jobs that ran here.
            self.step_down().await;
        }
    }

    /// Forgets everything this replica held as the leader: its job tasks
    /// end (their writes would be refused by the new epoch anyway), its pods
    /// are stopped, and its pools start empty.
    async fn step_down(&self) {
        let halted = self.halt();
        let pods: Vec<String> = {
            let mut st = self.state();
            let pods = st
                .pools
                .values()
                .flat_map(|pp| pp.by_runtime.keys().cloned())
                .collect();
            match build_pools(&self.inner.profiles, &self.inner.settings) {
                Ok(pools) => {
                    *st = State {
                        pools,
                        draining: st.draining,
                        ..State::default()
                    };
                }
                // Built from the same configuration at start: cannot fail.
                Err(e) => tracing::error!(error = %e, "rebuilding the pools failed"),
            }
            pods
        };
        self.inner.metrics.set_leader(false);
        let stopped =
            futures::future::join_all(pods.iter().map(|pod| self.inner.runtime.stop_pod(pod)))
                .await;
        let failed = stopped.iter().filter(|r| r.is_err()).count();
        tracing::warn!(
            jobs = halted,
            pods = pods.len(),
            failed,
            "stepped down after losing the lease; competing for it again"
        );
    }

    async fn lead(&self) {
        let Some(mut lease) = self.acquire_lease().await else {
            return;
        };
        // A new epoch before anything else: from its commit on, the last
        // leader's agent requests and job writes are refused.
        let epoch = match hearth_store::leadership::take_over(&mut lease, &self.inner.replica.id)
            .await
        {
            Ok(epoch) => epoch,
            Err(e) => {
                tracing::error!(error = %e, "recording the takeover failed; the scheduler stops");
                return;
            }
        };
        self.inner.leadership.store(epoch, Ordering::SeqCst);
        self.inner.runtime.set_epoch(epoch as u64);
        tracing::info!(epoch, "leadership epoch");
        match self.inner.runtime.remove_orphans().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(pods = n, "removed pods left by an earlier run"),
            Err(e) => tracing::warn!(error = %e, "could not remove orphan pods"),
        }
        self.load_budgets().await;
        let mut pod_events = self.inner.runtime.subscribe();
        self.state().leading = true;
        self.inner.metrics.set_leader(true);
        self.tick_all();
        while let Err(e) = self.recover().await {
            tracing::error!(error = %e, "recovery failed; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let mut next_sync = Instant::now() + SYNC;
        let mut next_budgets = Instant::now() + BUDGET_SYNC;
        let mut last_pickup = Instant::now();
        let mut next_pickup = last_pickup + PICKUP_SCAN;
        let mut pickup_gap = PICKUP_GAP;
        loop {
            let pickup_at = if self.state().pickup_wanted {
                last_pickup + pickup_gap
            } else {
                next_pickup
            };
            let wake_at = self
                .next_wakeup()
                .map_or(next_sync, |w| w.min(next_sync))
                .min(pickup_at);
            tokio::select! {
                () = self.inner.wake.notified() => {}
                () = tokio::time::sleep_until(wake_at) => {}
                event = pod_events.recv() => match event {
                    Ok(PodEvent::Gone { pod_id, reason }) => self.runtime_gone(&pod_id, &reason),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "missed pod events");
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        pod_events = self.inner.runtime.subscribe();
                    }
                },
            }
            let (draining, wanted, idle) = {
                let st = self.state();
                let idle = self.inner.job_tasks.load(Ordering::Acquire) == 0;
                (st.draining, st.pickup_wanted, idle)
            };
            if draining && idle {
                // Nothing runs here any more: hand the lease over now, so the
                // next leader runs the queued jobs while this process ends.
                self.state().leading = false;
                self.inner.metrics.set_leader(false);
                if let Err(e) = sqlx::Connection::close(lease).await {
                    tracing::debug!(error = %e, "closing the lease connection");
                }
                tracing::info!("scheduler drained; lease released");
                return;
            }
            let now = Instant::now();
            if !draining && (now >= next_pickup || wanted && now >= last_pickup + pickup_gap) {
                if let Err(e) = self.pick_up(now >= next_pickup).await {
                    tracing::warn!(error = %e, "picking up queued jobs failed");
                }
                last_pickup = Instant::now();
                pickup_gap = PICKUP_GAP.max(last_pickup.duration_since(now) * 4);
                if now >= next_pickup {
                    next_pickup = last_pickup + PICKUP_SCAN;
                }
            }
            if now >= next_sync {
                let alive =
                    tokio::time::timeout(LEASE_CHECK, sqlx::Connection::ping(&mut lease)).await;
                if !matches!(alive, Ok(Ok(()))) {
                    // The advisory lock went with its connection: another
                    // replica may lead now. Stop rather than schedule twice;
                    // the service exits and the new leader recovers the jobs.
                    tracing::error!("scheduler lease lost; the scheduler stops");
                    self.state().leading = false;
                    self.inner.metrics.set_leader(false);
                    return;
                }
                next_sync = Instant::now() + SYNC;
            }
            if !draining && Instant::now() >= next_budgets {
                // Budgets set through another replica reach this leader.
                self.load_budgets().await;
                next_budgets = Instant::now() + BUDGET_SYNC;
            }
            self.tick_all();
        }
    }

    /// Applies the tenants' stored budgets to the pools.
    async fn load_budgets(&self) {
        let rows = match hearth_store::budget::all(&self.inner.db).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!(error = %e, "loading tenant budgets failed");
                return;
            }
        };
        for row in rows {
            if let Err(e) = self.set_tenant_budget(
                row.tenant_id,
                &row.profile,
                row.floor_gpus,
                row.ceiling_gpus,
            ) {
                tracing::warn!(tenant_id = %row.tenant_id, profile = %row.profile, error = %e, "stored tenant budget not applied");
            }
        }
    }

    /// Rebuilds the queue from the store. Jobs that held pods when the last
    /// leader stopped lost them: they are re-queued while they have attempts
    /// left, else failed with `pod_lost`.
    async fn recover(&self) -> Result<(), hearth_store::Error> {
        let db = &self.inner.db;
        for row in hearth_store::job::unfinished(db).await? {
            // Jobs accepted since this scheduler took the lead are its own.
            if self.state().jobs.contains_key(&row.job_id) {
                continue;
            }
            if row.state != "queued" {
                let max = self.inner.settings.max_attempts as i32;
                if hearth_store::job::requeue(db, self.epoch(), row.job_id, max).await? {
                    tracing::info!(job_id = %row.job_id, "re-queued a job whose pod was lost");
                    self.inner.hub.state(
                        self.epoch(),
                        row.job_id,
                        row.tenant_id,
                        hearth_core::State::Queued,
                    );
                } else {
                    let mut conn = db.acquire().await?;
                    let f = run::lost(
                        row.cancel_requested,
                        "the job's pod was lost when the service stopped, and it has no attempts left",
                    );
                    if let Some(done) =
                        hearth_store::job::finish(&mut conn, self.epoch(), row.job_id, &f).await?
                    {
                        self.inner.metrics.job_finished(&done.profile, &done.state);
                        self.inner.hub.done(done);
                    }
                    tracing::warn!(job_id = %row.job_id, "failed a job whose pod was lost");
                    continue;
                }
            }
            self.submit(&row);
        }
        Ok(())
    }

    /// Queues every job the store holds queued that this leader does not:
    /// jobs other replicas accepted, found by id whatever their ids and
    /// commit order. With `cancels`, also stops the jobs whose cancellation
    /// another replica recorded.
    async fn pick_up(&self, cancels: bool) -> Result<(), hearth_store::Error> {
        {
            let mut st = self.state();
            st.pickup_wanted = false;
            st.scanning = Some(HashSet::new());
        }
        let picked = self.scan_queued().await;
        self.state().scanning = None;
        let picked = picked?;
        if picked > 0 {
            tracing::debug!(jobs = picked, "picked up jobs accepted elsewhere");
        }
        if cancels {
            for job_id in hearth_store::job::cancel_requested(&self.inner.db).await? {
                self.cancel(job_id);
            }
        }
        Ok(())
    }

    async fn scan_queued(&self) -> Result<usize, hearth_store::Error> {
        let db = &self.inner.db;
        let queued = hearth_store::job::queued_ids(db).await?;
        let missing: Vec<Uuid> = {
            let st = self.state();
            queued
                .into_iter()
                .filter(|id| !st.jobs.contains_key(id))
                .collect()
        };
        if missing.is_empty() {
            return Ok(0);
        }
        let rows = hearth_store::job::queued_by_ids(db, &missing).await?;
        let mut actions = Vec::new();
        let mut picked = 0;
        {
            let mut st = self.state();
            for row in &rows {
                let ended = st
                    .scanning
                    .as_ref()
                    .is_some_and(|e| e.contains(&row.job_id));
                if ended || st.jobs.contains_key(&row.job_id) {
                    continue;
                }
                match Queued::from_row(row) {
                    Ok(job) => {
                        picked += 1;
                        self.enqueue(&mut st, job, &mut actions);
                    }
                    Err(e) => {
                        tracing::error!(job_id = %row.job_id, error = %e, "stored spec unreadable");
                    }
                }
            }
        }
        self.perform(actions);
        Ok(picked)
    }

    // ---- shutting down ----------------------------------------------------------

    /// Starts a graceful shutdown: no job is taken or started any more, the
    /// running ones go on; once none runs, a leader lets its lease go (see
    /// [`Scheduler::drained`]). A replica that does not lead stops waiting
    /// for the lease.
    pub fn drain(&self) {
        self.state().draining = true;
        self.inner.wake.notify_one();
    }

    /// Resolves once no job runs here (its end recorded) after [`Scheduler::drain`].
    pub async fn drained(&self) {
        loop {
            let ended = self.inner.job_tasks_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.inner.job_tasks.load(Ordering::Acquire) == 0 {
                return;
            }
            ended.await;
        }
    }

    /// Stops the jobs still running here at the end of a shutdown's grace
    /// period, before their pods go: their rows stay as they were last
    /// recorded, and the next leader re-queues them (see
    /// `HEARTH_MAX_ATTEMPTS`). Returns how many were stopped.
    pub fn halt(&self) -> usize {
        let aborts: Vec<_> = self
            .inner
            .aborts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, a)| a)
            .collect();
        for a in &aborts {
            a.abort();
        }
        aborts.len()
    }
}

/// The physical GPUs of a placement, in order: the pool numbers its GPUs
/// from zero, its part of the inventory starts at `first`.
fn devices(placement: &PoolPlacement, first: u32) -> Vec<u32> {
    let mut out: Vec<u32> = placement.0.iter().map(|s| first + s.gpu).collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_show_only_the_viewers_own_callers() {
        let mut st = State::default();
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let ca = st.caller_id(a, "loop-a");
        let cb = st.caller_id(b, "loop-b");
        let r = Reason::Recycled { from: ca, to: cb };
        let v = st.reason_json(&r, Some(a));
        assert_eq!(v["code"], "recycled");
        assert_eq!(v["from"], "loop-a");
        assert_eq!(v["to"], Value::Null);
        let message = v["message"].as_str().unwrap();
        assert!(
            message.contains("`loop-a`") && !message.contains("loop-b"),
            "{message}"
        );
    }

    #[test]
    fn callers_no_pool_tracks_are_forgotten_and_ids_never_reused() {
        let mut st = State::default();
        let t = Uuid::now_v7();
        let kept = st.caller_id(t, "busy");
        let gone = st.caller_id(t, "idle");
        let settings = PoolSettings {
            kind: Kind::Firepool,
            standby_min: 0,
            standby_max: 0,
            keep_alive_min: Duration::from_secs(1),
            keep_alive_max: Duration::from_secs(10),
            budget_floor_gpus: None,
            budget_ceiling_gpus: None,
            gpus: Gpus {
                count: 0,
                real: false,
            },
        };
        let config = settings.config_for(&Profile::cpu("cpu"), 0).unwrap();
        let mut pool = Pool::new(Kind::Firepool, config).unwrap();
        let mut out = Vec::new();
        pool.handle(
            PoolInstant::ZERO,
            Event::JobQueued(Request::new(JobId(1), kept, TenantId(0))),
            &mut out,
        )
        .unwrap();
        st.pools.insert(
            "cpu".to_owned(),
            ProfilePool {
                profile: Profile::cpu("cpu"),
                pool,
                gpu_first: 0,
                slots: HashMap::new(),
                by_runtime: HashMap::new(),
                share_ms: [0.0; 4],
                held_at: PoolInstant::ZERO,
            },
        );
        st.forget_callers();
        assert_eq!(st.caller_id(t, "busy"), kept);
        assert!(!st.caller_names.contains_key(&gone));
        assert_eq!(st.callers.len(), 1);
        let back = st.caller_id(t, "idle");
        assert_ne!(back, gone);
        assert_ne!(back, kept);
    }

    #[test]
    fn pool_settings_clamp_the_default_keep_alive_and_check_budgets() {
        let settings = PoolSettings {
            kind: Kind::Firepool,
            standby_min: 1,
            standby_max: 2,
            keep_alive_min: Duration::from_millis(100),
            keep_alive_max: Duration::from_secs(1),
            budget_floor_gpus: Some(0.5),
            budget_ceiling_gpus: None,
            gpus: Gpus {
                count: 2,
                real: false,
            },
        };
        let mut gpu = Profile::cpu("gpu-one");
        gpu.gpus = 1;
        let c = settings.config_for(&gpu, 2).unwrap();
        assert_eq!(c.keep_alive.default, Duration::from_secs(1));
        assert_eq!(c.gpus, 2);
        assert_eq!(c.budget.pool.floor, Shares(4));
        assert_eq!(
            settings.config_for(&Profile::cpu("cpu"), 0).unwrap().gpus,
            0
        );
        let odd = PoolSettings {
            budget_floor_gpus: Some(0.3),
            ..settings
        };
        assert!(odd.config_for(&gpu, 2).is_err());
    }

    #[test]
    fn gpu_profiles_get_disjoint_parts_of_the_inventory() {
        let settings = |count| PoolSettings {
            kind: Kind::Firepool,
            standby_min: 0,
            standby_max: 0,
            keep_alive_min: Duration::from_secs(1),
            keep_alive_max: Duration::from_secs(10),
            budget_floor_gpus: None,
            budget_ceiling_gpus: None,
            gpus: Gpus { count, real: true },
        };
        let gpu = |name: &str| Profile {
            gpus: 1,
            ..Profile::cpu(name)
        };
        let profiles = [
            gpu("b-gpu"),
            Profile::cpu("cpu"),
            gpu("a-gpu"),
            gpu("c-gpu"),
        ];
        let parts = settings(8).partition(&profiles);
        assert_eq!(
            parts.into_iter().collect::<Vec<_>>(),
            [
                ("a-gpu".to_owned(), (0, 3)),
                ("b-gpu".to_owned(), (3, 3)),
                ("c-gpu".to_owned(), (6, 2))
            ]
        );
        let parts = settings(2).partition(&profiles);
        assert_eq!(
            parts.values().map(|p| p.1).sum::<u32>(),
            2,
            "never more than the inventory"
        );
        let placement = PoolPlacement(vec![
            hearth_pool::policy::Slice { gpu: 0, shares: 8 },
            hearth_pool::policy::Slice { gpu: 1, shares: 8 },
        ]);
        assert_eq!(devices(&placement, 3), [3, 4]);
    }
}
