//! The ready-cohort control endpoint's runtime (DESIGN.md, "Ready-cohort
//! control endpoint"): [`Control`] is the async handle the HTTP layer and
//! `serve` use; behind it one [`engine`] thread owns the drivers, the live
//! sessions and the active executor. This module loads policies, calibrated
//! `K_r` and restored sessions from the store into the engine and writes the
//! engine's session state back: through one ordered writer task, which
//! commits the groups the engine hands it and only then answers the events
//! of `commit` policies, and which takes the snapshots of `snapshot`
//! policies (on a cadence and at shutdown). The policy language, executors,
//! compactor and accounting are `hearth_control`'s.

pub mod engine;
pub mod schema;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_control::policy::{MAX_REGISTERS, Regs};
use hearth_control::{Executor, ExecutorKind, Program, Spec, accounting};
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

pub use engine::{
    Answer, Creation, Deletion, Done, Event, SessionLimit, SessionState, Settings, Window,
    WriteGroup,
};
use engine::{Command, Engine};

/// The engine thread is gone (the service is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("the control engine has stopped")]
pub struct Stopped;

/// Errors of the control runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] hearth_store::Error),
    #[error(transparent)]
    Stopped(#[from] Stopped),
    #[error(transparent)]
    SessionLimit(#[from] SessionLimit),
    /// A stored policy no longer parses or compiles (the store was edited
    /// by hand, or a bug): it cannot run.
    #[error("stored policy {policy_id} is invalid: {why}")]
    StoredPolicy { policy_id: Uuid, why: String },
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// Why stats could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error(transparent)]
    Stopped(#[from] Stopped),
    /// The analysis itself failed (not for a hard instance: those are bounded).
    #[error("control stats failed: {0}")]
    Failed(String),
}

/// What a stats window covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    /// Start of the requested window, ns on the control clock.
    pub from_ns: u64,
    /// Its end (now), ns.
    pub to_ns: u64,
    /// The window reaches back before this process started: events of an
    /// earlier process are not in it (the log is in memory).
    pub started_in_window: bool,
    /// Every event finished and released from here to `to_ns` is counted;
    /// later than `from_ns` when the per-tenant cap dropped older records.
    pub complete_from_ns: u64,
    /// Records dropped by the cap since the engine started.
    pub evicted: u64,
    /// The cap on records kept per tenant.
    pub cap: usize,
    /// Records in the window.
    pub records: usize,
}

/// Stats of a window and what it covers.
#[derive(Debug, Clone, Copy)]
pub struct WindowStats {
    pub stats: accounting::Stats,
    pub coverage: Coverage,
    /// Time spent copying and analysing, off the engine.
    pub elapsed: Duration,
}

/// A registered policy as the service runs it.
#[derive(Debug)]
pub struct Policy {
    pub tenant_id: Uuid,
    pub policy_id: Uuid,
    pub program: Program,
    /// Per route, in policy order.
    pub routes: Vec<RouteInfo>,
    pub created_at: OffsetDateTime,
}

/// One executable route of a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    pub name: String,
    pub id: String,
    /// `K_r`; `None`: no batch size wins here, the route runs on the CPU path.
    pub k: Option<u32>,
    /// Whether `k` was measured (`hearth control calibrate`) or is the default.
    pub calibrated: bool,
}

impl Policy {
    /// Index of a route given by name or executable id.
    pub fn route(&self, name_or_id: &str) -> Option<u16> {
        self.program
            .route_index(name_or_id)
            .or_else(|| self.program.route_by_id(name_or_id))
    }
}

/// The executor this build runs: the GPU with the `cuda` feature and a usable
/// device, else the CPU (its status says why).
pub fn executor() -> Box<dyn Executor + Send> {
    #[cfg(feature = "cuda")]
    {
        hearth_control::cuda::best_executor()
    }
    #[cfg(not(feature = "cuda"))]
    {
        Box::new(hearth_control::CpuExecutor::with_note(
            "built without the `cuda` feature",
        ))
    }
}

/// Lowers the calling thread to the lowest CPU priority (nice 19), so the
/// work it does yields to every other thread of the service; a no-op where
/// that is not available.
#[allow(unsafe_code)]
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: neither call takes a pointer; on Linux `setpriority` with a
        // thread id changes that thread's nice value only.
        let failed = unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, 19) != 0
        };
        if failed {
            tracing::debug!("could not lower the stats thread's priority");
        }
    }
}

/// `K_r` of an uncalibrated route on `kind` when none is configured. On the
/// CPU executor a batch is the CPU path's work (vectorised at best), so until
/// a calibration shows a size that wins, waiting for K events only adds
/// latency (a lone event would wait until its deadline): no `K_r`, every
/// event runs at once. On a GPU the paper's K = 256. `hearth control
/// calibrate` measures `K_r` per route and replaces either.
pub fn initial_k(kind: ExecutorKind) -> Option<u32> {
    match kind {
        ExecutorKind::Cpu => None,
        ExecutorKind::Gpu => Some(256),
    }
}

/// A stored session's next route and registers; `None` if the row no
/// longer reads (edited by hand).
pub fn stored_session(row: &hearth_store::control::SessionRow) -> Option<SessionState> {
    let words: Vec<u32> = serde_json::from_value(row.state.clone()).ok()?;
    let mut state: Regs = [0; MAX_REGISTERS];
    let n = words.len().min(MAX_REGISTERS);
    state[..n].copy_from_slice(&words[..n]);
    Some(SessionState {
        route: u16::try_from(row.route).ok()?,
        state,
    })
}

/// Handle of the control engine; cheap to share (hold it in an `Arc`).
#[derive(Debug)]
pub struct Control {
    tx: std::sync::mpsc::Sender<Command>,
    epoch: Instant,
    kind: ExecutorKind,
    status: String,
    default_k: Option<u32>,
    max_exact_steps: u64,
    loaded: Mutex<HashMap<(Uuid, Uuid), Arc<Policy>>>,
    /// One stats computation at a time (see [`Control::stats`]); its thread
    /// holds the permit, so a caller that goes away frees it only when the
    /// computation ends.
    stats_gate: Arc<tokio::sync::Semaphore>,
    /// Set once the store writer runs; resolves when it has written the
    /// engine's last group.
    writer: Mutex<Option<oneshot::Receiver<()>>>,
    attached: std::sync::atomic::AtomicBool,
}

impl Control {
    /// Starts the engine thread with `executor`; `configured_k` is `K_r` of
    /// routes without a calibration (`Some(0)`: none, they run on the CPU
    /// path; `None`: [`initial_k`] of the executor).
    pub fn start(
        settings: Settings,
        configured_k: Option<u32>,
        executor: Box<dyn Executor + Send>,
    ) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let epoch = Instant::now();
        let kind = executor.kind();
        let default_k = match configured_k {
            None => initial_k(kind),
            Some(0) => None,
            Some(k) => Some(k),
        };
        let status = executor.status();
        let max_exact_steps = settings.max_exact_steps;
        std::thread::Builder::new()
            .name("hearth-control".to_owned())
            .spawn(move || Engine::new(settings, executor, epoch).run(&rx))?;
        tracing::info!(executor = %status, default_k, "control engine started");
        Ok(Self {
            tx,
            epoch,
            kind,
            status,
            default_k,
            max_exact_steps,
            loaded: Mutex::new(HashMap::new()),
            stats_gate: Arc::new(tokio::sync::Semaphore::new(1)),
            writer: Mutex::new(None),
            attached: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `K_r` of routes without a calibration (`None`: the CPU path).
    pub fn default_k(&self) -> Option<u32> {
        self.default_k
    }

    /// The active executor's kind.
    pub fn kind(&self) -> ExecutorKind {
        self.kind
    }

    /// The active executor's status line (`cpu (...)`, `gpu (NVIDIA H200)`).
    pub fn status(&self) -> &str {
        &self.status
    }

    /// Nanoseconds since the engine's epoch (the clock of every record).
    pub fn now_ns(&self) -> u64 {
        engine::since(self.epoch)
    }

    fn send(&self, cmd: Command) -> Result<(), Stopped> {
        self.tx.send(cmd).map_err(|_| Stopped)
    }

    async fn ask<T>(&self, cmd: impl FnOnce(oneshot::Sender<T>) -> Command) -> Result<T, Stopped> {
        let (reply, rx) = oneshot::channel();
        self.send(cmd(reply))?;
        rx.await.map_err(|_| Stopped)
    }

    /// A policy of `tenant`, loaded into the engine (with its calibrated
    /// `K_r` and stored sessions) on first use; `None` if the tenant has no
    /// such policy.
    ///
    /// # Errors
    /// The store's, [`Stopped`], or an invalid stored policy.
    pub async fn policy(
        &self,
        db: &PgPool,
        tenant_id: Uuid,
        policy_id: Uuid,
    ) -> Result<Option<Arc<Policy>>> {
        if let Some(p) = self.cached(tenant_id, policy_id) {
            return Ok(Some(p));
        }
        let Some(row) = hearth_store::control::policy(db, tenant_id, policy_id).await? else {
            return Ok(None);
        };
        let policy = Arc::new(self.describe(db, row).await?);
        let sessions = hearth_store::control::sessions(db, tenant_id, policy_id)
            .await?
            .into_iter()
            .filter_map(|row| {
                let s = stored_session(&row)?;
                Some((row.session, s.route, s.state))
            })
            .collect();
        self.ask(|reply| Command::Load {
            policy: policy.clone(),
            sessions,
            reply,
        })
        .await?;
        let mut loaded = self.loaded.lock().expect("not poisoned");
        Ok(Some(
            loaded
                .entry((tenant_id, policy_id))
                .or_insert(policy)
                .clone(),
        ))
    }

    /// Every policy of `tenant`, by name then version, without loading
    /// them into the engine (loaded ones as the engine runs them).
    ///
    /// # Errors
    /// The store's.
    pub async fn policies(&self, db: &PgPool, tenant_id: Uuid) -> Result<Vec<Arc<Policy>>> {
        let rows = hearth_store::control::policies(db, tenant_id).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push(match self.cached(tenant_id, row.policy_id) {
                Some(p) => p,
                None => Arc::new(self.describe(db, row).await?),
            });
        }
        Ok(out)
    }

    /// Compiles a stored policy and looks up its routes' calibrated `K_r`.
    async fn describe(&self, db: &PgPool, row: hearth_store::control::PolicyRow) -> Result<Policy> {
        let invalid = |why: String| Error::StoredPolicy {
            policy_id: row.policy_id,
            why,
        };
        let spec: Spec =
            serde_json::from_value(row.spec.clone()).map_err(|e| invalid(e.to_string()))?;
        let program = Program::compile(spec).map_err(|e| invalid(e.to_string()))?;
        let ids: Vec<String> = program.routes().iter().map(|r| r.id().to_owned()).collect();
        let measured: HashMap<String, Option<i32>> =
            hearth_store::control::route_ks(db, row.tenant_id, &ids)
                .await?
                .into_iter()
                .collect();
        let routes = program
            .routes()
            .iter()
            .map(|r| self.route_info(r.name(), r.id(), &measured))
            .collect();
        Ok(Policy {
            tenant_id: row.tenant_id,
            policy_id: row.policy_id,
            program,
            routes,
            created_at: row.created_at,
        })
    }

    fn route_info(
        &self,
        name: &str,
        id: &str,
        measured: &HashMap<String, Option<i32>>,
    ) -> RouteInfo {
        let m = measured.get(id);
        RouteInfo {
            name: name.to_owned(),
            id: id.to_owned(),
            k: match m {
                Some(k) => k.and_then(|k| u32::try_from(k).ok()),
                None => self.default_k,
            },
            calibrated: m.is_some(),
        }
    }

    /// Applies `K_r` calibrated since the policies were loaded (by `hearth
    /// control calibrate`, possibly from another process) to the engine and
    /// to the loaded policies; returns how many routes changed.
    ///
    /// # Errors
    /// The store's, or [`Stopped`].
    pub async fn refresh_k(&self, db: &PgPool) -> Result<usize> {
        let mut by_tenant: HashMap<Uuid, Vec<Arc<Policy>>> = HashMap::new();
        for p in self.loaded.lock().expect("not poisoned").values() {
            by_tenant.entry(p.tenant_id).or_default().push(p.clone());
        }
        let mut changed = 0;
        for (tenant, policies) in by_tenant {
            let ids: Vec<String> = policies
                .iter()
                .flat_map(|p| p.routes.iter().map(|r| r.id.clone()))
                .collect();
            let measured: HashMap<String, Option<i32>> =
                hearth_store::control::route_ks(db, tenant, &ids)
                    .await?
                    .into_iter()
                    .collect();
            let mut ks = Vec::new();
            for p in policies {
                let routes: Vec<RouteInfo> = p
                    .routes
                    .iter()
                    .map(|r| self.route_info(&r.name, &r.id, &measured))
                    .collect();
                if routes == p.routes {
                    continue;
                }
                for (new, old) in routes.iter().zip(&p.routes) {
                    if new.k != old.k {
                        ks.push((new.id.clone(), new.k));
                    }
                }
                let updated = Arc::new(Policy {
                    tenant_id: p.tenant_id,
                    policy_id: p.policy_id,
                    program: p.program.clone(),
                    routes,
                    created_at: p.created_at,
                });
                self.loaded
                    .lock()
                    .expect("not poisoned")
                    .insert((p.tenant_id, p.policy_id), updated);
            }
            if !ks.is_empty() {
                changed += ks.len();
                tracing::info!(%tenant, routes = ks.len(), "calibrated K_r applied to the control engine");
                self.send(Command::SetK { tenant, ks })?;
            }
        }
        Ok(changed)
    }

    fn cached(&self, tenant_id: Uuid, policy_id: Uuid) -> Option<Arc<Policy>> {
        self.loaded
            .lock()
            .expect("not poisoned")
            .get(&(tenant_id, policy_id))
            .cloned()
    }

    /// Queues events of one tenant, all of them or (when the sessions they
    /// would create pass its limit) none; every finished one arrives on the
    /// returned channel, in completion order.
    ///
    /// # Errors
    /// [`Error::SessionLimit`], [`Stopped`].
    pub async fn submit(
        &self,
        tenant: Uuid,
        events: Vec<Event>,
    ) -> Result<mpsc::UnboundedReceiver<Done>> {
        let (reply, rx) = mpsc::unbounded_channel();
        self.ask(|admitted| Command::Submit {
            tenant,
            events,
            admitted,
            reply,
        })
        .await??;
        Ok(rx)
    }

    /// Creates a session (once stored, for a `commit` policy).
    ///
    /// # Errors
    /// [`Stopped`].
    pub async fn create_session(
        &self,
        policy: Arc<Policy>,
        session: String,
        state: SessionState,
    ) -> Result<Creation, Stopped> {
        self.ask(|reply| Command::CreateSession {
            policy,
            session,
            state,
            reply,
        })
        .await
    }

    /// Deletes a session with no event in flight (answered once the store
    /// has it deleted).
    ///
    /// # Errors
    /// [`Stopped`], also when the deletion could not be stored.
    pub async fn delete_session(
        &self,
        policy: Arc<Policy>,
        session: String,
    ) -> Result<Deletion, Stopped> {
        self.ask(|reply| Command::DeleteSession {
            policy,
            session,
            reply,
        })
        .await
    }

    /// How many sessions `tenant` holds (against its limit).
    ///
    /// # Errors
    /// [`Stopped`].
    pub async fn session_count(&self, tenant: Uuid) -> Result<usize, Stopped> {
        self.ask(|reply| Command::SessionCount { tenant, reply })
            .await
    }

    /// A session's state, if it exists.
    ///
    /// # Errors
    /// [`Stopped`].
    pub async fn session(
        &self,
        policy: Arc<Policy>,
        session: String,
    ) -> Result<Option<SessionState>, Stopped> {
        self.ask(|reply| Command::GetSession {
            policy,
            session,
            reply,
        })
        .await
    }

    /// A tenant's event log, as shared chunks (O(chunks) on the engine thread).
    ///
    /// # Errors
    /// [`Stopped`].
    pub async fn log(&self, tenant: Uuid) -> Result<Window, Stopped> {
        self.ask(|reply| Command::Stats { tenant, reply }).await
    }

    /// A, R_A, F, P* (or its bounds) and U of `tenant`'s events released in
    /// the last `window`, with δ = `delta_ns`.
    ///
    /// Off the engine's path: the engine only hands out its shared log
    /// chunks; the copy of the window and the analysis run on a thread of
    /// their own at the lowest CPU priority (nice 19: the engine, the
    /// requests and the database run first when they want the CPU), one
    /// stats computation at a time for the whole service (so at most one
    /// window's copy is held), with the exact P* search capped at
    /// `Settings::max_exact_steps`.
    ///
    /// # Errors
    /// [`StatsError`].
    pub async fn stats(
        &self,
        tenant: Uuid,
        window: Duration,
        delta_ns: i64,
    ) -> Result<WindowStats, StatsError> {
        let window_ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        let permit = self
            .stats_gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StatsError::Stopped(Stopped))?;
        let now_ns = self.now_ns();
        let from_ns = now_ns.saturating_sub(window_ns);
        let log = self.log(tenant).await?;
        let max_exact_steps = self.max_exact_steps;
        let started = Instant::now();
        let (tx, rx) = oneshot::channel();
        let work = move || {
            lower_priority();
            let records = log.records_since(from_ns);
            let stats = accounting::stats_bounded(
                &records,
                delta_ns,
                |r| log.k.get(&r).copied().unwrap_or(u32::MAX),
                max_exact_steps,
            );
            (
                Coverage {
                    from_ns,
                    to_ns: now_ns,
                    started_in_window: window_ns > now_ns,
                    complete_from_ns: log
                        .dropped_until_ns
                        .map_or(from_ns, |d| from_ns.max(d.saturating_add(1))),
                    evicted: log.evicted,
                    cap: log.cap,
                    records: records.len(),
                },
                stats,
            )
        };
        std::thread::Builder::new()
            .name("hearth-control-stats".to_owned())
            .spawn(move || {
                let _ = tx.send(work());
                drop(permit);
            })
            .map_err(|e| StatsError::Failed(e.to_string()))?;
        let (coverage, stats) = rx
            .await
            .map_err(|_| StatsError::Failed("the stats thread panicked".to_owned()))?;
        let stats = stats.map_err(|e| StatsError::Failed(e.to_string()))?;
        Ok(WindowStats {
            stats,
            coverage,
            elapsed: started.elapsed(),
        })
    }

    /// Starts the store writer: from now on every session write goes through
    /// it in engine order, and events of `commit` policies are answered once
    /// committed. Idempotent; [`Control::restore`] calls it.
    ///
    /// # Errors
    /// [`Stopped`].
    pub fn attach_store(&self, db: &PgPool) -> Result<(), Stopped> {
        use std::sync::atomic::Ordering;
        if self.attached.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (finished, finished_rx) = oneshot::channel();
        *self.writer.lock().expect("not poisoned") = Some(finished_rx);
        tokio::spawn(write_loop(db.clone(), rx, finished));
        self.send(Command::AttachWriter(tx))
    }

    fn is_attached(&self) -> bool {
        self.attached.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Writes every session changed since the last snapshot to the store;
    /// returns how many. Sessions whose write failed are retried next time.
    ///
    /// # Errors
    /// The store's, or [`Stopped`].
    pub async fn snapshot(&self, db: &PgPool) -> Result<usize> {
        if self.is_attached() {
            let written = self.ask(|done| Command::Flush { done }).await?;
            return written.map_err(|e| {
                Error::Store(hearth_store::Error::Database(sqlx::Error::Protocol(e)))
            });
        }
        let rows = self.ask(|reply| Command::Snapshot { reply }).await?;
        let n = rows.len();
        if let Err(e) = hearth_store::control::put_sessions(db, &rows).await {
            let _ = self.send(Command::Redirty(rows));
            return Err(e.into());
        }
        Ok(n)
    }

    /// Runs every queued event, stops the engine and writes the changed
    /// sessions to the store. Later calls find the engine stopped.
    ///
    /// # Errors
    /// The store's, or [`Stopped`].
    pub async fn shutdown(&self, db: &PgPool) -> Result<usize> {
        let rows = self.ask(|reply| Command::Shutdown { reply }).await?;
        hearth_store::control::put_sessions(db, &rows).await?;
        let writer = self.writer.lock().expect("not poisoned").take();
        if let Some(finished) = writer {
            // The engine queued its last rows to the writer before it stopped.
            let _ = finished.await;
        }
        Ok(rows.len())
    }

    /// Snapshots, and picks up newly calibrated `K_r`, on a cadence until
    /// the engine stops; spawn it.
    pub async fn snapshot_every(self: Arc<Self>, db: PgPool, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            match self.snapshot(&db).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(sessions = n, "control sessions snapshotted"),
                Err(Error::Stopped(_)) => return,
                Err(e) => tracing::warn!(error = %e, "control session snapshot failed"),
            }
            match self.refresh_k(&db).await {
                Ok(_) => {}
                Err(Error::Stopped(_)) => return,
                Err(e) => tracing::warn!(error = %e, "reading calibrated K_r failed"),
            }
        }
    }

    /// Loads every policy with stored sessions, so sessions are resident
    /// from the start.
    ///
    /// # Errors
    /// The store's, or [`Stopped`].
    pub async fn restore(&self, db: &PgPool) -> Result<usize> {
        self.attach_store(db)?;
        let mut n = 0;
        for (tenant, policy) in hearth_store::control::policies_with_sessions(db).await? {
            if self.policy(db, tenant, policy).await?.is_some() {
                n += 1;
            }
        }
        Ok(n)
    }
}

/// Each session's last write by key `(tenant, policy, session)`; `None`: deleted.
type Writes = HashMap<(Uuid, Uuid, String), Option<hearth_store::control::SessionRow>>;

/// The rows to write and the keys to delete.
fn split_writes(
    writes: &Writes,
) -> (
    Vec<hearth_store::control::SessionRow>,
    Vec<(Uuid, Uuid, String)>,
) {
    let mut rows = Vec::new();
    let mut deleted = Vec::new();
    for (key, write) in writes {
        match write {
            Some(row) => rows.push(row.clone()),
            None => deleted.push(key.clone()),
        }
    }
    (rows, deleted)
}

/// Most groups merged into one transaction.
const MAX_GROUPS_PER_COMMIT: usize = 256;
/// Attempts of one commit before its answers are dropped.
const COMMIT_ATTEMPTS: u32 = 3;

/// The store writer: commits the engine's [`WriteGroup`]s in order (what is
/// queued when it gets to them merges into one transaction, the later write
/// of a session, state or deletion, winning), then answers what waited for
/// them. A commit that
/// fails after [`COMMIT_ATTEMPTS`] drops its answers (those clients see their
/// events unanswered, never acknowledged without their state) and keeps its
/// rows for the next commit. Ends when the engine has stopped.
async fn write_loop(
    db: PgPool,
    mut rx: mpsc::UnboundedReceiver<WriteGroup>,
    finished: oneshot::Sender<()>,
) {
    // What a failed commit leaves for the next: each session's last write
    // (`None`: deleted), in engine order.
    let mut failed: Writes = HashMap::new();
    while let Some(first) = rx.recv().await {
        let mut groups = vec![first];
        while groups.len() < MAX_GROUPS_PER_COMMIT {
            match rx.try_recv() {
                Ok(g) => groups.push(g),
                Err(_) => break,
            }
        }
        let mut merged = std::mem::take(&mut failed);
        for g in &mut groups {
            for row in g.rows.drain(..) {
                merged.insert(
                    (row.tenant_id, row.policy_id, row.session.clone()),
                    Some(row),
                );
            }
            for key in g.deleted.drain(..) {
                merged.insert(key, None);
            }
        }
        let (rows, deleted) = split_writes(&merged);
        let started = Instant::now();
        let mut outcome = Ok(());
        for attempt in 0..COMMIT_ATTEMPTS {
            outcome = hearth_store::control::write_sessions(&db, &rows, &deleted).await;
            match &outcome {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(error = %e, attempt, sessions = rows.len(), "control session commit failed");
                    tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                }
            }
        }
        match outcome {
            Ok(()) => {
                tracing::trace!(
                    sessions = rows.len(),
                    groups = groups.len(),
                    ms = started.elapsed().as_secs_f64() * 1e3,
                    "control sessions committed"
                );
                for g in groups {
                    g.answers.into_iter().for_each(Answer::send);
                    if let Some(done) = g.done {
                        let _ = done.send(Ok(rows.len()));
                    }
                }
            }
            Err(e) => {
                let dropped: usize = groups.iter().map(|g| g.answers.len()).sum();
                tracing::error!(error = %e, sessions = rows.len(), unanswered = dropped, "control session commit failed; its events are not acknowledged");
                for g in groups {
                    if let Some(done) = g.done {
                        let _ = done.send(Err(e.to_string()));
                    }
                }
                failed = merged;
            }
        }
    }
    let (rows, deleted) = split_writes(&failed);
    if !failed.is_empty()
        && let Err(e) = hearth_store::control::write_sessions(&db, &rows, &deleted).await
    {
        tracing::error!(error = %e, sessions = failed.len(), "control sessions not written at shutdown");
    }
    let _ = finished.send(());
}

#[cfg(test)]
mod tests {
    use hearth_control::driver::Path;
    use hearth_control::{CpuExecutor, DriverConfig, EXAMPLE_POLICY, Task, cpu};

    use super::*;

    fn policy(k: Option<u32>) -> Arc<Policy> {
        let program = Program::from_json(EXAMPLE_POLICY).unwrap();
        let routes = program
            .routes()
            .iter()
            .map(|r| RouteInfo {
                name: r.name().to_owned(),
                id: r.id().to_owned(),
                k,
                calibrated: false,
            })
            .collect();
        Arc::new(Policy {
            tenant_id: Uuid::new_v4(),
            policy_id: Uuid::new_v4(),
            program,
            routes,
            created_at: OffsetDateTime::now_utc(),
        })
    }

    fn control() -> Control {
        let settings = Settings {
            driver: DriverConfig::default(),
            records: 1000,
            max_exact_steps: accounting::DEFAULT_MAX_EXACT_STEPS,
            max_sessions: 1000,
        };
        Control::start(settings, Some(4), Box::new(CpuExecutor::new())).unwrap()
    }

    #[test]
    fn the_initial_k_follows_the_executor_unless_configured() {
        assert_eq!(initial_k(ExecutorKind::Cpu), None);
        assert_eq!(initial_k(ExecutorKind::Gpu), Some(256));
    }

    #[tokio::test]
    async fn an_unconfigured_k_on_the_cpu_runs_a_lone_event_at_once() {
        let settings = Settings {
            driver: DriverConfig::default(),
            records: 1000,
            max_exact_steps: accounting::DEFAULT_MAX_EXACT_STEPS,
            max_sessions: 1000,
        };
        let c = Control::start(settings, None, Box::new(CpuExecutor::new())).unwrap();
        assert_eq!(c.default_k(), None);
        let zero = Control::start(settings, Some(0), Box::new(CpuExecutor::new())).unwrap();
        assert_eq!(zero.default_k(), None);
        let p = policy(c.default_k());
        load(&c, &p, Vec::new()).await;
        let done = collect(
            c.submit(p.tenant_id, vec![event(&p, "s", vec![1, 2], 60_000)])
                .await
                .unwrap(),
            1,
        )
        .await;
        // No wait for a batch that cannot help: it ran long before its deadline.
        let r = done[0].record;
        assert!(matches!(r.path, Path::Fallback(_)), "{r:?}");
        assert!(r.launch_ns - r.release_ns < 10_000_000_000, "{r:?}");
    }

    async fn load(c: &Control, p: &Arc<Policy>, sessions: Vec<(String, u16, Regs)>) {
        c.ask(|reply| Command::Load {
            policy: p.clone(),
            sessions,
            reply,
        })
        .await
        .unwrap();
    }

    fn event(p: &Arc<Policy>, session: &str, input: Vec<u32>, deadline_ms: u64) -> Event {
        Event {
            policy: p.clone(),
            session: session.to_owned(),
            route: Some(0),
            input,
            deadline_ns: deadline_ms * 1_000_000,
        }
    }

    async fn collect(mut rx: mpsc::UnboundedReceiver<Done>, n: usize) -> Vec<Done> {
        let mut out = Vec::new();
        while out.len() < n {
            out.push(rx.recv().await.expect("every event finishes"));
        }
        out.sort_by_key(|d| d.index);
        out
    }

    #[tokio::test]
    async fn a_burst_of_k_runs_as_one_batch_and_matches_the_reference() {
        let c = control();
        let p = policy(Some(4));
        load(&c, &p, Vec::new()).await;
        let events: Vec<Event> = (0..6)
            .map(|i| event(&p, &format!("s{i}"), vec![i, 2 * i], 20))
            .collect();
        let done = collect(c.submit(p.tenant_id, events).await.unwrap(), 6).await;
        let batch = done[0].record.batch;
        for (i, d) in done.iter().enumerate() {
            assert_eq!(d.record.path, Path::Batch);
            assert_eq!(d.record.batch_size, 6);
            assert_eq!(d.record.batch, batch);
            let input = p.program.input(&[i as u32, 2 * i as u32]).unwrap();
            let want = cpu::run_scalar(
                &p.program,
                &[Task {
                    route: 0,
                    state: p.program.init(),
                    input,
                }],
            )[0];
            assert_eq!(d.outcome, want);
        }
        let w = c.log(p.tenant_id).await.unwrap();
        assert_eq!(w.records_since(0).len(), 6);
        assert_eq!(w.k.values().copied().collect::<Vec<_>>(), vec![4]);
        let s = c
            .stats(p.tenant_id, Duration::from_secs(60), 50_000_000)
            .await
            .unwrap();
        assert_eq!(s.stats.events, 6);
        assert_eq!(s.stats.achieved_events, 6);
        assert!(s.stats.exact_known);
        assert_eq!(s.coverage.records, 6);
        assert_eq!(s.coverage.evicted, 0);
        assert_eq!(s.coverage.complete_from_ns, s.coverage.from_ns);
    }

    #[tokio::test]
    async fn a_lone_event_falls_back_before_its_deadline_and_sessions_carry_on() {
        let c = control();
        let p = policy(Some(4));
        let mut start = p.program.init();
        start[0] = 500;
        load(&c, &p, vec![("kept".to_owned(), 1, start)]).await;
        let s = c.session(p.clone(), "kept".to_owned()).await.unwrap();
        assert_eq!(
            s,
            Some(SessionState {
                route: 1,
                state: start
            })
        );
        let t0 = Instant::now();
        let mut e = event(&p, "kept", vec![1, 1], 30);
        e.route = None;
        let done = collect(c.submit(p.tenant_id, vec![e]).await.unwrap(), 1).await;
        assert!(t0.elapsed() < Duration::from_millis(500));
        assert!(matches!(done[0].record.path, Path::Fallback(_)));
        assert_eq!(done[0].started_on, 1);
        let want = cpu::run_scalar(
            &p.program,
            &[Task {
                route: 1,
                state: start,
                input: p.program.input(&[1, 1]).unwrap(),
            }],
        )[0];
        assert_eq!(done[0].outcome, want);
        let rows = c.ask(|reply| Command::Shutdown { reply }).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].session, "kept");
        assert_eq!(rows[0].route, i32::from(want.route));
        assert!(c.session(p, "kept".to_owned()).await.is_err());
    }

    /// Restored sessions count toward the limit (and always load); what
    /// would pass it is refused whole; a deleted session frees its place.
    #[tokio::test]
    async fn the_session_limit_counts_restored_ones_and_frees_deleted_ones() {
        let settings = Settings {
            driver: DriverConfig::default(),
            records: 1000,
            max_exact_steps: accounting::DEFAULT_MAX_EXACT_STEPS,
            max_sessions: 3,
        };
        let c = Control::start(settings, Some(4), Box::new(CpuExecutor::new())).unwrap();
        let p = policy(Some(4));
        let init = p.program.init();
        let stored = ["r1", "r2"].map(|n| (n.to_owned(), 0, init)).to_vec();
        load(&c, &p, stored).await;
        let refused = c
            .submit(
                p.tenant_id,
                vec![
                    event(&p, "n1", vec![1, 1], 1),
                    event(&p, "n2", vec![1, 1], 1),
                ],
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused,
                Error::SessionLimit(SessionLimit {
                    held: 2,
                    new: 2,
                    max: 3
                })
            ),
            "{refused:?}"
        );
        assert_eq!(c.session(p.clone(), "n1".to_owned()).await.unwrap(), None);
        let fresh = SessionState {
            route: 0,
            state: init,
        };
        assert_eq!(
            c.create_session(p.clone(), "n1".to_owned(), fresh)
                .await
                .unwrap(),
            Creation::Created
        );
        assert_eq!(
            c.create_session(p.clone(), "n2".to_owned(), fresh)
                .await
                .unwrap(),
            Creation::Refused(SessionLimit {
                held: 3,
                new: 1,
                max: 3
            })
        );
        assert_eq!(
            c.create_session(p.clone(), "n1".to_owned(), fresh)
                .await
                .unwrap(),
            Creation::Exists
        );
        // A held session's events run at the limit; while one waits for
        // its batch (K = 4), its session is not deleted.
        let rx = c
            .submit(p.tenant_id, vec![event(&p, "r1", vec![2, 2], 300)])
            .await
            .unwrap();
        assert_eq!(
            c.delete_session(p.clone(), "r1".to_owned()).await.unwrap(),
            Deletion::Busy
        );
        assert_eq!(collect(rx, 1).await.len(), 1);
        assert_eq!(
            c.delete_session(p.clone(), "r1".to_owned()).await.unwrap(),
            Deletion::Deleted
        );
        assert_eq!(
            c.delete_session(p.clone(), "r1".to_owned()).await.unwrap(),
            Deletion::NotFound
        );
        let done = collect(
            c.submit(p.tenant_id, vec![event(&p, "n2", vec![1, 1], 1)])
                .await
                .unwrap(),
            1,
        )
        .await;
        assert_eq!(done[0].session, "n2");
    }
}
