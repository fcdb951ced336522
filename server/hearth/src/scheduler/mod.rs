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
//! Files: this one holds the state (pools, slots, jobs, the id books) and
//! the job queue; [`decide`] carries out the policy's decisions and the
//! runtime's reports; [`run`] runs a job on its pods; [`leader`] holds the
//! lease, the leadership epoch, the leading loop, recovery, pickup and
//! step-down; [`listen`] hears the other replicas; [`gpu`] is the GPU
//! inventory; [`views`] is what the API reads; [`record`] writes decisions.
//!
//! It may not touch HTTP; handlers read it through the view methods.

mod adopt;
mod decide;
mod gpu;
mod leader;
mod listen;
mod record;
mod run;
mod views;
mod writes;

use gpu::devices;
pub use gpu::{Gpus, PoolSettings};
pub use views::{BudgetError, GpuSample, PodCounts, PoolView};

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_core::job::Spec;
use hearth_core::{ErrorCode, Profile, Source};
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
use crate::replica::Replica;

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

/// Pod starts of a profile that fail in a row before the jobs waiting for
/// its pods fail (`pod_start_failed`) instead of waiting on: a start that
/// always fails (an image that cannot be pulled) must not hold them forever.
/// Starts that failed because what makes pods was unavailable (the API
/// server overloaded or unreachable: [`hearth_runtime::Error::is_transient`])
/// do not count: they are retried, at most one per starting pod each
/// [`START_RETRY_GAP`], and the jobs wait as for any pod.
const FAILED_STARTS_TO_GIVE_UP: u32 = 3;

/// Settings of the scheduler, taken from the service configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_attempts: u32,
    pub max_log_bytes: u64,
    pub job_output_bytes: usize,
    pub pod_start_timeout: Duration,
    /// How long an agent keeps a job running without its leader, for a new
    /// leader to re-attach (`HEARTH_REATTACH_GRACE_S`).
    pub reattach_grace: Duration,
    pub pools: PoolSettings,
    /// How often the leader samples the GPUs each pool holds (an hour of
    /// samples is kept).
    pub history_step: Duration,
    /// Writes the spans of each job's phases (off without trace export).
    pub tracer: crate::telemetry::Tracer,
    /// Who this replica is, as the others see it.
    pub replica: Replica,
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
    /// Pod starts that failed since the last one that succeeded.
    failed_starts: u32,
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
    /// Re-attached after a takeover ([`adopt`]) with its pods outside the
    /// pools (its pool had no room for them) until it ends.
    adopted: bool,
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
    /// Queued jobs whose stored rows or specs this leader cannot read: left
    /// in the store as they are, and out of its scans.
    unreadable: HashSet<Uuid>,
    /// Idle pods a new leader adopted, handed to the pool being told of
    /// them ([`Decision::Adopted`]), in order.
    adopting: VecDeque<Pod>,
    /// The pods of each running job adopted with them, by rank.
    adopting_jobs: HashMap<JobId, VecDeque<Pod>>,
    /// GPUs each pool held over the last hour, while this replica leads.
    gpu_history: BTreeMap<String, VecDeque<GpuSample>>,
    /// Each caller's jobs in flight per profile: a caller across profiles
    /// is one loop, and each pool it used hears when it runs elsewhere.
    loops: HashMap<CallerId, hearth_pool::Loop<String>>,
}

impl State {
    /// Whether `pod` of `profile` is still the runtime's pod `runtime_id`.
    fn owns(&self, profile: &str, pod: PodId, runtime_id: &str) -> bool {
        self.pools
            .get(profile)
            .and_then(|pp| pp.slots.get(&pod))
            .is_some_and(|slot| slot.runtime_id == runtime_id)
    }

    /// Leaves a queued job whose row or spec cannot be read where it is,
    /// out of this leader's scans; reported once.
    fn set_aside(&mut self, job_id: Uuid, error: &dyn std::fmt::Display) {
        if self.unreadable.insert(job_id) {
            tracing::error!(%job_id, %error, "job row unreadable: the job is left as it is, and not scheduled");
        }
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
        self.loops.retain(|id, _| names.contains_key(id));
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
    /// Group commits of job assignments and starts (relaxed) and ends
    /// (durable).
    assignments: writes::Assignments,
    starts: writes::Starts,
    ends: writes::Ends,
    /// The policy's epoch.
    epoch: Instant,
    state: Mutex<State>,
    wake: Notify,
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The scheduler's connections to the store.
#[derive(Debug)]
pub struct Pools {
    /// Requests and reads, single final states, the listener for changes.
    pub main: PgPool,
    /// Intermediate transitions and job events (`hearth_store::connect_relaxed`).
    pub relaxed: PgPool,
    /// Job ends stored together (`hearth_store::connect_writers_with`).
    pub writers: PgPool,
}

impl Scheduler {
    /// A scheduler with one empty pool per profile; fails on a pool
    /// configuration the policy refuses.
    pub fn new(
        store: Pools,
        runtime: Arc<dyn Runtime>,
        profiles: Arc<BTreeMap<String, Profile>>,
        hub: Arc<Hub>,
        settings: Settings,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        let Pools {
            main: db,
            relaxed,
            writers,
        } = store;
        let pools = build_pools(&profiles, &settings)?;
        // State changes reach the other replicas through the store.
        hub.start_announcing(db.clone(), settings.replica.id.clone());
        // Job events (states, output lines) are written in batches, relaxed
        // like the intermediate transitions: the durable commit of a job's
        // end, which waits for them, makes them durable too.
        hub.start_journal(relaxed.clone());
        Ok(Scheduler {
            inner: Arc::new(Inner {
                recorder: record::Recorder::start(db.clone()),
                assignments: writes::Assignments::start(relaxed.clone(), Arc::clone(&metrics)),
                starts: writes::Starts::start(relaxed.clone(), Arc::clone(&metrics)),
                ends: writes::Ends::start(writers, Arc::clone(&metrics)),
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
                    failed_starts: 0,
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
                finish: run::failed(ErrorCode::UnknownProfile, message),
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
                adopted: false,
            },
        );
        if let Err(e) = self.feed(st, &profile, Event::JobQueued(request), actions) {
            st.job_ids.remove(&id);
            if let Some(job) = st.jobs.remove(&uuid) {
                actions.push(Action::Fail {
                    job: job.queued,
                    finish: run::failed(ErrorCode::Unplaceable, e.to_string()),
                });
            }
            return;
        }
        self.loop_moved(st, caller, &profile, true, actions);
    }

    /// A job of `caller` was queued in (`up`) or left `profile`'s pool: each
    /// pool the caller used hears whether its loop now runs elsewhere.
    fn loop_moved(
        &self,
        st: &mut State,
        caller: CallerId,
        profile: &str,
        up: bool,
        actions: &mut Vec<Action>,
    ) {
        let tell = st
            .loops
            .entry(caller)
            .or_default()
            .moved(&profile.to_owned(), up);
        for (pool, busy) in tell {
            if let Err(e) = self.feed(st, &pool, Event::LoopBusy { caller, busy }, actions) {
                tracing::error!(profile = %pool, error = %e, "pool refused a loop's move");
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
        if job.adopted {
            return;
        }
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
        let key = (job.queued.tenant_id, job.queued.spec.caller.clone());
        if let Some(&caller) = st.callers.get(&key) {
            self.loop_moved(st, caller, &profile, false, actions);
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
    /// not lead leaves it to the leader, and keeps nothing of it). True when
    /// this replica leads and took the job: the leader need not hear of it.
    pub fn submit(&self, row: &JobRow) -> bool {
        match Queued::from_row(row) {
            Ok(job) => {
                let mut actions = Vec::new();
                let taken = {
                    let mut st = self.state();
                    self.enqueue(&mut st, job, &mut actions);
                    st.leading && !st.draining
                };
                self.perform(actions);
                taken
            }
            Err(e) => {
                tracing::error!(job_id = %row.job_id, error = %e, "stored spec unreadable");
                false
            }
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
                self.inner
                    .metrics
                    .job_finished(&profile, hearth_core::State::Cancelled);
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
            standby_initial: 0,
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
                failed_starts: 0,
            },
        );
        for caller in [kept, gone] {
            st.loops
                .entry(caller)
                .or_default()
                .moved(&"cpu".to_owned(), true);
        }
        st.forget_callers();
        assert_eq!(st.caller_id(t, "busy"), kept);
        assert!(!st.caller_names.contains_key(&gone));
        assert_eq!(
            st.loops.keys().collect::<Vec<_>>(),
            vec![&kept],
            "loops go with their callers"
        );
        assert_eq!(st.callers.len(), 1);
        let back = st.caller_id(t, "idle");
        assert_ne!(back, gone);
        assert_ne!(back, kept);
    }
}
