//! The engine thread: one [`Driver`] per tenant (that tenant's policies, its
//! sessions and the compactor's queues) over one shared active executor,
//! driven by [`Command`]s and the service's monotonic clock. It sleeps until
//! the next command or the compactor's next wake-up, whichever is first.
//!
//! It owns the live session state; it never touches the database (the async
//! side loads policies and restored sessions into it and writes the
//! snapshots it hands out) and never blocks on a client.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use hearth_control::policy::Regs;
use hearth_control::{
    Completed, Driver, DriverConfig, ExecError, Executor, ExecutorKind, Outcome, Program, Record,
    Task,
};
use hearth_store::control::SessionRow;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::Policy;

/// Engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Compactor and driver settings.
    pub driver: DriverConfig,
    /// Records of the event log kept per tenant for the live accounting.
    pub records: usize,
}

/// One event for the engine (validated by the caller).
#[derive(Debug, Clone)]
pub struct Event {
    pub policy: Arc<Policy>,
    pub session: String,
    /// Route index in the policy; `None`: the session's next route.
    pub route: Option<u16>,
    pub input: Vec<u32>,
    /// Launch deadline after release, ns.
    pub deadline_ns: u64,
}

/// A finished event.
#[derive(Debug, Clone)]
pub struct Done {
    /// Position of the event in its submission.
    pub index: usize,
    pub policy: Arc<Policy>,
    pub session: String,
    /// Route index the event started on.
    pub started_on: u16,
    pub outcome: Outcome,
    pub record: Record,
}

/// A session as the engine holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionState {
    /// Index of the session's next route.
    pub route: u16,
    pub state: Regs,
}

/// A window of one tenant's event log.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub records: Vec<Record>,
    /// `K_r` by route key (`u32::MAX` for routes without one).
    pub k: HashMap<u32, u32>,
}

/// What the engine is asked to do.
#[derive(Debug)]
pub enum Command {
    /// Registers a policy in its tenant's driver with restored sessions
    /// `(name, next route, registers)`; a no-op if already loaded.
    Load {
        policy: Arc<Policy>,
        sessions: Vec<(String, u16, Regs)>,
        reply: oneshot::Sender<()>,
    },
    /// Queues events; each finished one is sent to `reply`.
    Submit {
        tenant: Uuid,
        events: Vec<Event>,
        reply: mpsc::UnboundedSender<Done>,
    },
    /// Creates a session; replies `false` if it exists.
    CreateSession {
        policy: Arc<Policy>,
        session: String,
        state: SessionState,
        reply: oneshot::Sender<bool>,
    },
    GetSession {
        policy: Arc<Policy>,
        session: String,
        reply: oneshot::Sender<Option<SessionState>>,
    },
    /// Records of a tenant released at or after `since_ns`.
    Stats {
        tenant: Uuid,
        since_ns: u64,
        reply: oneshot::Sender<Window>,
    },
    /// Every session changed since the last snapshot (marked clean).
    Snapshot {
        reply: oneshot::Sender<Vec<SessionRow>>,
    },
    /// Marks sessions changed again (their snapshot was not stored).
    Redirty(Vec<SessionRow>),
    /// Sets `K_r` of a tenant's routes `(route id, K_r)` (after a calibration).
    SetK {
        tenant: Uuid,
        ks: Vec<(String, Option<u32>)>,
    },
    /// Runs everything queued, replies with the changed sessions and stops.
    Shutdown {
        reply: oneshot::Sender<Vec<SessionRow>>,
    },
}

/// The active executor, shared by every tenant's driver on the engine thread.
#[derive(Clone)]
struct Shared(Rc<RefCell<Box<dyn Executor + Send>>>);

impl Executor for Shared {
    fn kind(&self) -> ExecutorKind {
        self.0.borrow().kind()
    }
    fn status(&self) -> String {
        self.0.borrow().status()
    }
    fn run(&mut self, program: &Program, tasks: &[Task]) -> Result<Vec<Outcome>, ExecError> {
        self.0.borrow_mut().run(program, tasks)
    }
    fn run_sessions(
        &mut self,
        program: &Program,
        sessions: &[u64],
        tasks: &[Task],
    ) -> Result<Vec<Outcome>, ExecError> {
        self.0.borrow_mut().run_sessions(program, sessions, tasks)
    }
}

struct Session {
    /// Driver session id, unique across tenants (the executor is shared).
    id: u64,
    dirty: bool,
}

struct Waiter {
    index: usize,
    policy: Arc<Policy>,
    session: String,
    reply: mpsc::UnboundedSender<Done>,
}

struct TenantState {
    driver: Driver<Shared>,
    policies: HashMap<Uuid, Arc<Policy>>,
    sessions: HashMap<(Uuid, String), Session>,
    waiting: HashMap<u64, Waiter>,
    records: VecDeque<Record>,
}

/// The engine; [`Engine::run`] is its thread's body.
pub struct Engine {
    settings: Settings,
    executor: Shared,
    epoch: Instant,
    tenants: HashMap<Uuid, TenantState>,
    next_session: u64,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("settings", &self.settings)
            .field("tenants", &self.tenants.len())
            .finish_non_exhaustive()
    }
}

/// Nanoseconds since `epoch`.
pub fn since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn state_json(program: &Program, regs: &Regs) -> serde_json::Value {
    serde_json::Value::from(regs[..program.registers() as usize].to_vec())
}

impl Engine {
    pub fn new(settings: Settings, executor: Box<dyn Executor + Send>, epoch: Instant) -> Self {
        Self {
            settings,
            executor: Shared(Rc::new(RefCell::new(executor))),
            epoch,
            tenants: HashMap::new(),
            next_session: 1,
        }
    }

    fn now(&self) -> u64 {
        since(self.epoch)
    }

    /// Serves commands until [`Command::Shutdown`] or every sender is gone.
    pub fn run(mut self, rx: &Receiver<Command>) {
        loop {
            let wake = self
                .tenants
                .values()
                .filter_map(|t| t.driver.next_wake())
                .min();
            let first = match wake {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(w) => {
                    let now = self.now();
                    if w <= now {
                        rx.try_recv().map_err(|e| match e {
                            std::sync::mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                            std::sync::mpsc::TryRecvError::Disconnected => {
                                RecvTimeoutError::Disconnected
                            }
                        })
                    } else {
                        rx.recv_timeout(Duration::from_nanos(w - now))
                    }
                }
            };
            match first {
                Ok(cmd) => {
                    if !self.handle(cmd) {
                        return;
                    }
                    // Take what else is waiting, so a burst is queued before
                    // the compactor looks at it.
                    while let Ok(cmd) = rx.try_recv() {
                        if !self.handle(cmd) {
                            return;
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            self.advance();
        }
    }

    fn tenant(&mut self, tenant: Uuid) -> &mut TenantState {
        let executor = self.executor.clone();
        let config = self.settings.driver;
        self.tenants.entry(tenant).or_insert_with(|| TenantState {
            driver: Driver::new(config, executor),
            policies: HashMap::new(),
            sessions: HashMap::new(),
            waiting: HashMap::new(),
            records: VecDeque::new(),
        })
    }

    fn ensure_loaded(&mut self, policy: &Arc<Policy>) -> &mut TenantState {
        let t = self.tenant(policy.tenant_id);
        if !t.policies.contains_key(&policy.policy_id) {
            let ks: HashMap<&str, Option<u32>> =
                policy.routes.iter().map(|r| (r.id.as_str(), r.k)).collect();
            t.driver
                .register(policy.program.clone(), |id| ks.get(id).copied().flatten());
            t.policies.insert(policy.policy_id, policy.clone());
        }
        t
    }

    /// Handles one command; `false` to stop.
    pub fn handle(&mut self, cmd: Command) -> bool {
        match cmd {
            Command::Load {
                policy,
                sessions,
                reply,
            } => {
                let fresh = !self
                    .tenants
                    .get(&policy.tenant_id)
                    .is_some_and(|t| t.policies.contains_key(&policy.policy_id));
                let first = self.next_session;
                let t = self.ensure_loaded(&policy);
                let mut id = first;
                if fresh {
                    for (name, route, regs) in sessions {
                        let Some(r) = policy.program.routes().get(usize::from(route)) else {
                            tracing::warn!(session = %name, route, "stored control session names no route of its policy; dropped");
                            continue;
                        };
                        if t.driver.put_session(id, r.id(), regs).is_ok() {
                            t.sessions
                                .insert((policy.policy_id, name), Session { id, dirty: false });
                            id += 1;
                        }
                    }
                }
                self.next_session = id;
                let _ = reply.send(());
            }
            Command::Submit {
                tenant,
                events,
                reply,
            } => self.submit(tenant, events, &reply),
            Command::CreateSession {
                policy,
                session,
                state,
                reply,
            } => {
                let id = self.next_session;
                let t = self.ensure_loaded(&policy);
                let key = (policy.policy_id, session);
                let route = policy.program.routes().get(usize::from(state.route));
                let created = match route {
                    Some(r) if !t.sessions.contains_key(&key) => {
                        t.driver
                            .put_session(id, r.id(), state.state)
                            .expect("a loaded policy's route is registered");
                        t.sessions.insert(key, Session { id, dirty: true });
                        self.next_session += 1;
                        true
                    }
                    _ => false,
                };
                let _ = reply.send(created);
            }
            Command::GetSession {
                policy,
                session,
                reply,
            } => {
                let t = self.ensure_loaded(&policy);
                let found = t
                    .sessions
                    .get(&(policy.policy_id, session))
                    .and_then(|s| t.driver.session(s.id))
                    .map(|(route, state)| SessionState { route, state });
                let _ = reply.send(found);
            }
            Command::Stats {
                tenant,
                since_ns,
                reply,
            } => {
                let window = self.tenants.get(&tenant).map_or_else(Window::default, |t| {
                    let records: Vec<Record> = t
                        .records
                        .iter()
                        .filter(|r| r.release_ns >= since_ns)
                        .copied()
                        .collect();
                    let k = records
                        .iter()
                        .map(|r| {
                            let k = t.driver.k(r.route).unwrap_or(u32::MAX);
                            (r.route.0, k)
                        })
                        .collect();
                    Window { records, k }
                });
                let _ = reply.send(window);
            }
            Command::Snapshot { reply } => {
                let _ = reply.send(self.snapshot());
            }
            Command::Redirty(rows) => {
                for r in rows {
                    if let Some(s) = self
                        .tenants
                        .get_mut(&r.tenant_id)
                        .and_then(|t| t.sessions.get_mut(&(r.policy_id, r.session)))
                    {
                        s.dirty = true;
                    }
                }
            }
            Command::SetK { tenant, ks } => {
                if let Some(t) = self.tenants.get_mut(&tenant) {
                    for (id, k) in ks {
                        if let Some(key) = t.driver.route_key(&id) {
                            t.driver.set_k(key, k);
                        }
                    }
                }
            }
            Command::Shutdown { reply } => {
                for t in self.tenants.values_mut() {
                    let now = since(self.epoch);
                    let done = t.driver.finish(now);
                    dispatch(t, done, self.settings.records);
                }
                let _ = reply.send(self.snapshot());
                return false;
            }
        }
        true
    }

    fn submit(&mut self, tenant: Uuid, events: Vec<Event>, reply: &mpsc::UnboundedSender<Done>) {
        let now = self.now();
        for e in &events {
            self.ensure_loaded(&e.policy);
        }
        let Some(t) = self.tenants.get_mut(&tenant) else {
            return;
        };
        for (index, e) in events.into_iter().enumerate() {
            let key = (e.policy.policy_id, e.session.clone());
            let id = match t.sessions.get(&key) {
                Some(s) => s.id,
                None => {
                    let id = self.next_session;
                    self.next_session += 1;
                    let first = e.policy.program.routes()[0].id();
                    t.driver
                        .put_session(id, first, e.policy.program.init())
                        .expect("a loaded policy's route is registered");
                    t.sessions.insert(key, Session { id, dirty: true });
                    id
                }
            };
            let route = match e.route {
                None => None,
                Some(r) => {
                    let found = e
                        .policy
                        .program
                        .routes()
                        .get(usize::from(r))
                        .and_then(|r| t.driver.route_key(r.id()));
                    if found.is_none() {
                        tracing::error!(session = %e.session, "control event on an unregistered route");
                        continue;
                    }
                    found
                }
            };
            match t
                .driver
                .submit(now, id, route, &e.input, now.saturating_add(e.deadline_ns))
            {
                Ok(event) => {
                    t.waiting.insert(
                        event,
                        Waiter {
                            index,
                            policy: e.policy,
                            session: e.session,
                            reply: reply.clone(),
                        },
                    );
                }
                Err(err) => tracing::error!(error = %err, "control event refused by the driver"),
            }
        }
    }

    /// Runs what is due in every tenant's driver and hands out finished events.
    pub fn advance(&mut self) {
        for t in self.tenants.values_mut() {
            let done = t.driver.advance(since(self.epoch));
            dispatch(t, done, self.settings.records);
        }
    }

    fn snapshot(&mut self) -> Vec<SessionRow> {
        let mut rows = Vec::new();
        for (&tenant_id, t) in &mut self.tenants {
            for ((policy_id, name), s) in &mut t.sessions {
                if !s.dirty {
                    continue;
                }
                let (Some(policy), Some((route, regs))) =
                    (t.policies.get(policy_id), t.driver.session(s.id))
                else {
                    continue;
                };
                s.dirty = false;
                rows.push(SessionRow {
                    tenant_id,
                    policy_id: *policy_id,
                    session: name.clone(),
                    route: i32::from(route),
                    state: state_json(&policy.program, &regs),
                });
            }
        }
        rows
    }
}

fn dispatch(t: &mut TenantState, done: Vec<Completed>, keep: usize) {
    for c in done {
        if keep > 0 {
            if t.records.len() >= keep {
                t.records.pop_front();
            }
            t.records.push_back(c.record);
        }
        let Some(w) = t.waiting.remove(&c.record.event) else {
            continue;
        };
        if let Some(s) = t.sessions.get_mut(&(w.policy.policy_id, w.session.clone())) {
            s.dirty = true;
        }
        let _ = w.reply.send(Done {
            index: w.index,
            policy: w.policy,
            session: w.session,
            started_on: c.started_on,
            outcome: c.outcome,
            record: c.record,
        });
    }
}
