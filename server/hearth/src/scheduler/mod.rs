//! The live scheduler: gives queued jobs pods, runs them through the agent,
//! keeps finished pods warm for their caller and releases them after the
//! profile's keep-alive.
//!
//! It owns the in-memory view of pods and the queue; Postgres owns the jobs.
//! Every job transition is a compare-and-set in the store, so a job cancelled
//! or taken elsewhere is never run twice. Exactly one scheduler leads at a time
//! (a Postgres advisory lock); a new leader rebuilds its queue from the store.
//!
//! Pool decisions here are the minimal ones (warm reuse for the same caller,
//! cold start otherwise, release after keep-alive); they sit behind
//! [`Pools::place`] and [`Pools::expired`], the seam where the full pool policy
//! (`hearth-pool`: standby, budgets, adaptive keep-alive) plugs in.

mod run;

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_core::job::Spec;
use hearth_core::{Profile, Source};
use hearth_runtime::{Pod, PodEvent, Runtime};
use hearth_store::job::JobRow;
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::hub::Hub;

/// Advisory lock key of the scheduler lease ("HEARTH" + 1).
const LEASE_KEY: i64 = 0x4845_4152_5448_0001;
/// How often the scheduler looks for expired pods and jobs from other replicas.
const TICK: Duration = Duration::from_millis(500);

/// Settings of the scheduler, taken from the service configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_attempts: u32,
    pub max_log_bytes: u64,
    pub job_output_bytes: usize,
    pub pod_start_timeout: Duration,
}

/// A job waiting for pods.
#[derive(Debug, Clone)]
struct Queued {
    job_id: Uuid,
    tenant_id: Uuid,
    spec: Arc<Spec>,
    accepted_at: OffsetDateTime,
}

impl Queued {
    fn from_row(row: &JobRow) -> Result<Self, serde_json::Error> {
        Ok(Queued {
            job_id: row.job_id,
            tenant_id: row.tenant_id,
            spec: Arc::new(serde_json::from_value(row.spec.clone())?),
            accepted_at: row.created_at,
        })
    }
}

/// Who a warm pod belongs to: callers are named per tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Owner {
    tenant_id: Uuid,
    caller: String,
}

#[derive(Debug, Clone)]
enum PodState {
    /// Being started for a job.
    Starting,
    /// Running a job.
    Active(Uuid),
    /// Idle, holding `owner`'s last binding; serves only `owner`.
    Warm { owner: Owner, since: Instant },
    /// Being stopped.
    Stopping,
}

#[derive(Debug, Clone)]
struct Slot {
    profile: String,
    state: PodState,
    pod: Option<Pod>,
}

/// What a job was given.
#[derive(Debug, Clone)]
struct Placement {
    /// Pod ids in rank order; `cold[i]` says whether pod i must be started.
    pods: Vec<String>,
    cold: Vec<bool>,
    source: Source,
}

/// The pods of every profile and the jobs waiting for them.
#[derive(Debug, Default)]
struct Pools {
    queue: BTreeMap<(Reverse<i32>, Uuid), Queued>,
    queued: HashMap<Uuid, (Reverse<i32>, Uuid)>,
    slots: HashMap<String, Slot>,
    /// Cancel signals of jobs holding pods.
    running: HashMap<Uuid, Arc<Notify>>,
    /// Newest job id seen, for picking up jobs other replicas accepted.
    newest: Uuid,
}

impl Pools {
    fn enqueue(&mut self, job: Queued) {
        if self.queued.contains_key(&job.job_id) || self.running.contains_key(&job.job_id) {
            return;
        }
        self.newest = self.newest.max(job.job_id);
        let key = (Reverse(job.spec.priority), job.job_id);
        self.queued.insert(job.job_id, key);
        self.queue.insert(key, job);
    }

    fn dequeue(&mut self, job_id: Uuid) -> Option<Queued> {
        let key = self.queued.remove(&job_id)?;
        self.queue.remove(&key)
    }

    fn alive(&self, profile: &str) -> usize {
        self.slots
            .values()
            .filter(|s| s.profile == profile && !matches!(s.state, PodState::Stopping))
            .count()
    }

    /// Finds pods for a job: the caller's warm pods first, cold starts for the
    /// rest, evicting other callers' idle pods (longest idle first) when the
    /// profile is at its pod limit. `None` when the job must wait. Pods to evict
    /// are returned for stopping.
    fn place(&mut self, job: &Queued, profile: &Profile) -> Option<(Placement, Vec<String>)> {
        let need = job.spec.pods() as usize;
        let owner = Owner {
            tenant_id: job.tenant_id,
            caller: job.spec.caller.clone(),
        };
        let mut warm: Vec<(&String, Instant)> = self
            .slots
            .iter()
            .filter_map(|(id, s)| match &s.state {
                PodState::Warm { owner: o, since } if s.profile == profile.name && *o == owner => {
                    Some((id, *since))
                }
                _ => None,
            })
            .collect();
        // Most recently used first: its caches are the freshest.
        warm.sort_by_key(|(_, since)| Reverse(*since));
        let warm: Vec<String> = warm
            .into_iter()
            .take(need)
            .map(|(id, _)| id.clone())
            .collect();
        let missing = need - warm.len();

        let limit = profile.max_pods as usize;
        let over = (self.alive(&profile.name) + missing).saturating_sub(limit);
        let mut idle: Vec<(&String, Instant)> = self
            .slots
            .iter()
            .filter_map(|(id, s)| match &s.state {
                PodState::Warm { owner: o, since } if s.profile == profile.name && *o != owner => {
                    Some((id, *since))
                }
                _ => None,
            })
            .collect();
        if idle.len() < over {
            return None;
        }
        idle.sort_by_key(|(_, since)| *since);
        let evict: Vec<String> = idle
            .into_iter()
            .take(over)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &evict {
            if let Some(s) = self.slots.get_mut(id) {
                s.state = PodState::Stopping;
            }
        }

        let mut pods = warm;
        let mut cold = vec![false; pods.len()];
        for _ in 0..missing {
            let id = format!("pod-{}", Uuid::now_v7().simple());
            self.slots.insert(
                id.clone(),
                Slot {
                    profile: profile.name.clone(),
                    state: PodState::Starting,
                    pod: None,
                },
            );
            pods.push(id);
            cold.push(true);
        }
        for id in &pods {
            if let Some(s) = self.slots.get_mut(id) {
                s.state = PodState::Active(job.job_id);
            }
        }
        let source = if missing > 0 {
            Source::Cold
        } else {
            Source::Warm
        };
        Some((Placement { pods, cold, source }, evict))
    }

    /// Warm pods idle longer than their profile's keep-alive; marked stopping.
    fn expired(&mut self, now: Instant, keep_alive: impl Fn(&str) -> Duration) -> Vec<String> {
        let mut out = Vec::new();
        for (id, slot) in &mut self.slots {
            if let PodState::Warm { since, .. } = slot.state
                && now.duration_since(since) >= keep_alive(&slot.profile)
            {
                slot.state = PodState::Stopping;
                out.push(id.clone());
            }
        }
        out
    }
}

struct Inner {
    db: PgPool,
    /// For intermediate transitions only (see `hearth_store::connect_relaxed`).
    relaxed: PgPool,
    runtime: Arc<dyn Runtime>,
    profiles: Arc<BTreeMap<String, Profile>>,
    hub: Arc<Hub>,
    settings: Settings,
    pools: Mutex<Pools>,
    wake: Notify,
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

/// Pods of one profile by state, for the API.
#[derive(Debug, Clone, Default, serde::Serialize, utoipa::ToSchema)]
pub struct PodCounts {
    pub starting: usize,
    pub active: usize,
    pub warm: usize,
    pub stopping: usize,
}

impl Scheduler {
    pub fn new(
        db: PgPool,
        relaxed: PgPool,
        runtime: Arc<dyn Runtime>,
        profiles: Arc<BTreeMap<String, Profile>>,
        hub: Arc<Hub>,
        settings: Settings,
    ) -> Self {
        Scheduler {
            inner: Arc::new(Inner {
                db,
                relaxed,
                runtime,
                profiles,
                hub,
                settings,
                pools: Mutex::new(Pools::default()),
                wake: Notify::new(),
            }),
        }
    }

    fn pools(&self) -> std::sync::MutexGuard<'_, Pools> {
        self.inner.pools.lock().expect("scheduler state poisoned")
    }

    /// Hands a freshly accepted job to the scheduler.
    pub fn submit(&self, row: &JobRow) {
        match Queued::from_row(row) {
            Ok(job) => {
                self.inner.hub.open(job.job_id);
                self.pools().enqueue(job);
                self.inner.wake.notify_one();
            }
            Err(e) => tracing::error!(job_id = %row.job_id, error = %e, "stored spec unreadable"),
        }
    }

    /// Stops a job that holds pods, or drops a queued one (already cancelled in
    /// the store).
    pub fn cancel(&self, job_id: Uuid) {
        let mut pools = self.pools();
        pools.dequeue(job_id);
        if let Some(signal) = pools.running.get(&job_id) {
            signal.notify_one();
        }
    }

    /// Pod counts per profile.
    pub fn pod_counts(&self) -> BTreeMap<String, PodCounts> {
        let pools = self.pools();
        let mut out: BTreeMap<String, PodCounts> = self
            .inner
            .profiles
            .keys()
            .map(|p| (p.clone(), PodCounts::default()))
            .collect();
        for slot in pools.slots.values() {
            let c = out.entry(slot.profile.clone()).or_default();
            match slot.state {
                PodState::Starting => c.starting += 1,
                PodState::Active(_) => c.active += 1,
                PodState::Warm { .. } => c.warm += 1,
                PodState::Stopping => c.stopping += 1,
            }
        }
        out
    }

    /// Jobs waiting for pods.
    pub fn queue_depth(&self) -> usize {
        self.pools().queue.len()
    }

    /// Takes the lease, recovers unfinished jobs, then schedules until the
    /// process ends.
    pub async fn run(self) {
        let _lease = self.acquire_lease().await;
        match self.inner.runtime.remove_orphans().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(pods = n, "removed pods left by an earlier run"),
            Err(e) => tracing::warn!(error = %e, "could not remove orphan pods"),
        }
        while let Err(e) = self.recover().await {
            tracing::error!(error = %e, "recovery failed; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let mut pod_events = self.inner.runtime.subscribe();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.inner.wake.notified() => {}
                _ = tick.tick() => {
                    self.release_expired();
                    if let Err(e) = self.sync_with_store().await {
                        tracing::warn!(error = %e, "syncing with the store failed");
                    }
                }
                event = pod_events.recv() => match event {
                    Ok(PodEvent::Gone { pod_id, reason }) => self.pod_gone(&pod_id, &reason),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "missed pod events");
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        pod_events = self.inner.runtime.subscribe();
                    }
                },
            }
            self.dispatch();
        }
    }

    /// Holds the scheduler lease: a session-level advisory lock on a dedicated
    /// connection, kept for the life of the process.
    async fn acquire_lease(&self) -> sqlx::PgConnection {
        let mut waiting_logged = false;
        loop {
            let attempt = async {
                let mut conn = self.inner.db.acquire().await?;
                let got: bool =
                    sqlx::query_scalar!(r#"select pg_try_advisory_lock($1) as "got!""#, LEASE_KEY)
                        .fetch_one(&mut *conn)
                        .await?;
                Ok::<_, sqlx::Error>(got.then_some(conn))
            };
            match attempt.await {
                Ok(Some(conn)) => {
                    tracing::info!("scheduler lease acquired");
                    return conn.detach();
                }
                Ok(None) if !waiting_logged => {
                    tracing::info!("another scheduler leads; waiting for the lease");
                    waiting_logged = true;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "taking the scheduler lease failed"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Rebuilds the queue from the store. Jobs that held pods when the last
    /// leader stopped lost them: they are re-queued while they have attempts
    /// left, else failed with `pod_lost`.
    async fn recover(&self) -> Result<(), hearth_store::Error> {
        let db = &self.inner.db;
        for row in hearth_store::job::unfinished(db).await? {
            if row.state != "queued" {
                let max = self.inner.settings.max_attempts as i32;
                if hearth_store::job::requeue(db, row.job_id, max).await? {
                    tracing::info!(job_id = %row.job_id, "re-queued a job whose pod was lost");
                } else {
                    let mut conn = db.acquire().await?;
                    let f = run::lost(
                        row.cancel_requested,
                        "the job's pod was lost when the service stopped, and it has no attempts left",
                    );
                    hearth_store::job::finish(&mut conn, row.job_id, &f).await?;
                    tracing::warn!(job_id = %row.job_id, "failed a job whose pod was lost");
                    continue;
                }
            }
            self.submit(&row);
        }
        Ok(())
    }

    /// Queues jobs other replicas accepted, and stops jobs whose cancellation
    /// another replica recorded.
    async fn sync_with_store(&self) -> Result<(), hearth_store::Error> {
        let newest = self.pools().newest;
        for row in hearth_store::job::queued_after(&self.inner.db, newest).await? {
            self.submit(&row);
        }
        for job_id in hearth_store::job::cancel_requested(&self.inner.db).await? {
            self.cancel(job_id);
        }
        Ok(())
    }

    fn release_expired(&self) {
        let profiles = self.inner.profiles.clone();
        let expired = self.pools().expired(Instant::now(), |p| {
            profiles.get(p).map_or(Duration::ZERO, |p| {
                Duration::from_secs(p.keep_alive_s.into())
            })
        });
        for pod_id in expired {
            tracing::debug!(%pod_id, "keep-alive passed; releasing warm pod");
            self.stop_pod(pod_id);
        }
    }

    fn pod_gone(&self, pod_id: &str, reason: &str) {
        let mut pools = self.pools();
        // An active pod's job notices on its own connection; only idle pods are
        // dropped here.
        match pools.slots.get(pod_id).map(|s| &s.state) {
            Some(PodState::Warm { .. } | PodState::Stopping) => {
                tracing::info!(%pod_id, %reason, "pod gone");
                pools.slots.remove(pod_id);
            }
            Some(PodState::Active(job_id)) => {
                tracing::warn!(%pod_id, %job_id, %reason, "pod gone while running a job");
            }
            Some(PodState::Starting) | None => {}
        }
    }

    fn stop_pod(&self, pod_id: String) {
        let this = self.clone();
        tokio::spawn(async move {
            if let Err(e) = this.inner.runtime.stop_pod(&pod_id).await {
                tracing::warn!(%pod_id, error = %e, "stopping pod failed");
            }
            this.pools().slots.remove(&pod_id);
            this.inner.wake.notify_one();
        });
    }

    /// Gives pods to as many queued jobs as possible, in priority order.
    fn dispatch(&self) {
        let mut started = Vec::new();
        let mut evicted = Vec::new();
        {
            let mut pools = self.pools();
            let keys: Vec<_> = pools.queue.keys().copied().collect();
            for key in keys {
                let job = pools.queue[&key].clone();
                let Some(profile) = self.inner.profiles.get(&job.spec.profile) else {
                    // Validated at submission; a profile removed from the
                    // configuration since then fails the job.
                    pools.dequeue(job.job_id);
                    started.push((job, None));
                    continue;
                };
                let Some((placement, evict)) = pools.place(&job, profile) else {
                    continue;
                };
                pools.dequeue(job.job_id);
                pools.running.insert(job.job_id, Arc::new(Notify::new()));
                evicted.extend(evict);
                started.push((job, Some(placement)));
            }
        }
        for pod_id in evicted {
            tracing::debug!(%pod_id, "evicting idle pod of another caller to make room");
            self.stop_pod(pod_id);
        }
        for (job, placement) in started {
            let this = self.clone();
            tokio::spawn(async move { this.run_job(job, placement).await });
        }
    }
}
