//! The ready-cohort control endpoint's runtime (DESIGN.md, "Ready-cohort
//! control endpoint"): [`Control`] is the async handle the HTTP layer and
//! `serve` use; behind it one [`engine`] thread owns the drivers, the live
//! sessions and the active executor. This module loads policies, calibrated
//! `K_r` and restored sessions from the store into the engine and writes the
//! engine's session snapshots back (on a cadence and at shutdown). The policy
//! language, executors, compactor and accounting are `hearth_control`'s.

pub mod engine;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_control::policy::{MAX_REGISTERS, Regs};
use hearth_control::{Executor, ExecutorKind, Program, Spec};
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use engine::{Command, Engine};
pub use engine::{Done, Event, SessionState, Settings, Window};

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
    /// A stored policy no longer parses or compiles (the store was edited
    /// by hand, or a bug): it cannot run.
    #[error("stored policy {policy_id} is invalid: {why}")]
    StoredPolicy { policy_id: Uuid, why: String },
}

type Result<T, E = Error> = std::result::Result<T, E>;

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

/// Handle of the control engine; cheap to share (hold it in an `Arc`).
#[derive(Debug)]
pub struct Control {
    tx: std::sync::mpsc::Sender<Command>,
    epoch: Instant,
    kind: ExecutorKind,
    status: String,
    default_k: Option<u32>,
    loaded: Mutex<HashMap<(Uuid, Uuid), Arc<Policy>>>,
}

impl Control {
    /// Starts the engine thread with `executor`; `default_k` is `K_r` of
    /// routes without a calibration.
    pub fn start(
        settings: Settings,
        default_k: Option<u32>,
        executor: Box<dyn Executor + Send>,
    ) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let epoch = Instant::now();
        let kind = executor.kind();
        let status = executor.status();
        std::thread::Builder::new()
            .name("hearth-control".to_owned())
            .spawn(move || Engine::new(settings, executor, epoch).run(&rx))?;
        tracing::info!(executor = %status, "control engine started");
        Ok(Self {
            tx,
            epoch,
            kind,
            status,
            default_k,
            loaded: Mutex::new(HashMap::new()),
        })
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
            .filter_map(|s| {
                let words: Vec<u32> = serde_json::from_value(s.state).ok()?;
                let mut regs: Regs = [0; MAX_REGISTERS];
                let n = words.len().min(MAX_REGISTERS);
                regs[..n].copy_from_slice(&words[..n]);
                Some((s.session, u16::try_from(s.route).ok()?, regs))
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

    /// Queues events of one tenant; every finished one arrives on the
    /// returned channel, in completion order.
    ///
    /// # Errors
    /// [`Stopped`].
    pub fn submit(
        &self,
        tenant: Uuid,
        events: Vec<Event>,
    ) -> Result<mpsc::UnboundedReceiver<Done>, Stopped> {
        let (reply, rx) = mpsc::unbounded_channel();
        self.send(Command::Submit {
            tenant,
            events,
            reply,
        })?;
        Ok(rx)
    }

    /// Creates a session; `false` if it already exists.
    ///
    /// # Errors
    /// [`Stopped`].
    pub async fn create_session(
        &self,
        policy: Arc<Policy>,
        session: String,
        state: SessionState,
    ) -> Result<bool, Stopped> {
        self.ask(|reply| Command::CreateSession {
            policy,
            session,
            state,
            reply,
        })
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

    /// The records of a tenant's events released in the last `window`.
    ///
    /// # Errors
    /// [`Stopped`].
    pub async fn window(&self, tenant: Uuid, window: Duration) -> Result<Window, Stopped> {
        let window_ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        let since_ns = self.now_ns().saturating_sub(window_ns);
        self.ask(|reply| Command::Stats {
            tenant,
            since_ns,
            reply,
        })
        .await
    }

    /// Writes every session changed since the last snapshot to the store;
    /// returns how many. Sessions whose write failed are retried next time.
    ///
    /// # Errors
    /// The store's, or [`Stopped`].
    pub async fn snapshot(&self, db: &PgPool) -> Result<usize> {
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
        let mut n = 0;
        for (tenant, policy) in hearth_store::control::policies_with_sessions(db).await? {
            if self.policy(db, tenant, policy).await?.is_some() {
                n += 1;
            }
        }
        Ok(n)
    }
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
        };
        Control::start(settings, Some(4), Box::new(CpuExecutor::new())).unwrap()
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
        let done = collect(c.submit(p.tenant_id, events).unwrap(), 6).await;
        let batch = done[0].record.batch;
        for (i, d) in done.iter().enumerate() {
            assert_eq!(d.record.path, Path::Batch);
            assert_eq!(d.record.batch_size, 6);
            assert_eq!(d.record.batch, batch);
            assert!(d.record.launch_ns <= d.record.deadline_ns);
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
        let w = c
            .window(p.tenant_id, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(w.records.len(), 6);
        assert_eq!(w.k.values().copied().collect::<Vec<_>>(), vec![4]);
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
        let done = collect(c.submit(p.tenant_id, vec![e]).unwrap(), 1).await;
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
}
