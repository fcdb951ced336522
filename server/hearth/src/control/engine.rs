//! The engine thread: one [`Driver`] per tenant (that tenant's policies, its
//! sessions and the compactor's queues) over one shared active executor,
//! driven by [`Command`]s and the service's monotonic clock. It sleeps until
//! the next command or the compactor's next wake-up, whichever is first.
//!
//! It owns the live session state; it never touches the database (the async
//! side loads policies and restored sessions into it and writes the
//! snapshots it hands out) and never blocks on a client.
//!
//! Durability: once a store writer is attached ([`Command::AttachWriter`]),
//! every session write leaves the engine as a [`WriteGroup`] on one channel,
//! in engine order, so a later state is never overwritten by an earlier one.
//! Events of `commit` policies are answered by the writer after their group
//! committed (one group per `advance`, i.e. per batch launch and whatever
//! else finished with it); events of `snapshot` policies are answered at once
//! and their sessions written by [`Command::Flush`] on the snapshot cadence.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use hearth_control::policy::{Durability, Regs};
use hearth_control::{
    Completed, Driver, DriverConfig, ExecError, Executor, ExecutorKind, Outcome, Program, Record,
    RouteKey, Task,
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
    /// The cap on the exact P* search of one stats request, in steps
    /// (`accounting::DEFAULT_MAX_EXACT_STEPS` unless configured).
    pub max_exact_steps: u64,
    /// Sessions a tenant may hold (over all its policies); past it, what
    /// would create one is refused with [`SessionLimit`]. Restored sessions
    /// always load.
    pub max_sessions: usize,
}

/// Work refused because it would take a tenant past its session limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "this tenant holds {held} control sessions; {new} more would pass its limit of {max}: delete sessions it no longer needs"
)]
pub struct SessionLimit {
    pub held: usize,
    pub new: usize,
    pub max: usize,
}

/// What became of a session to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creation {
    Created,
    Exists,
    Refused(SessionLimit),
}

/// What became of a session to delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// Gone, from the store too when a writer is attached.
    Deleted,
    NotFound,
    /// An event of it is queued or running; nothing changed.
    Busy,
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

/// Records per chunk of a tenant's event log: a stats request shares the
/// sealed chunks and copies at most this many records on the engine thread.
pub const LOG_CHUNK: usize = 4096;

/// A tenant's event log as a stats request sees it: shared chunks, in
/// completion order, and what the log no longer holds. Taking one costs the
/// engine O(chunks) plus one partial chunk, never O(records).
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// The kept records, oldest chunk first; filter by release off the engine.
    pub chunks: Vec<Arc<[Record]>>,
    /// `K_r` by route key (`u32::MAX` for routes without one).
    pub k: HashMap<u32, u32>,
    /// Records dropped from the front of the log (the per-tenant cap).
    pub evicted: u64,
    /// Every finished event released after this instant (ns) is in the log;
    /// `None`: nothing was dropped since the engine started.
    pub dropped_until_ns: Option<u64>,
    /// The cap on records kept per tenant.
    pub cap: usize,
}

impl Window {
    /// Records released at or after `since_ns` (a copy, made by the caller's thread).
    pub fn records_since(&self, since_ns: u64) -> Vec<Record> {
        self.chunks
            .iter()
            .flat_map(|c| c.iter())
            .filter(|r| r.release_ns >= since_ns)
            .copied()
            .collect()
    }
}

/// A tenant's event log: sealed chunks shared with stats requests, one open
/// chunk, whole chunks dropped from the front past the cap.
#[derive(Default)]
struct RecordLog {
    sealed: VecDeque<Arc<[Record]>>,
    open: Vec<Record>,
    len: usize,
    evicted: u64,
    dropped_until_ns: Option<u64>,
    routes: HashSet<u32>,
}

impl RecordLog {
    /// Appends; keeps at least the last `cap` records (at most `cap + LOG_CHUNK`).
    fn push(&mut self, r: Record, cap: usize) {
        if cap == 0 {
            return;
        }
        self.routes.insert(r.route.0);
        self.open.push(r);
        self.len += 1;
        if self.open.len() >= LOG_CHUNK {
            let chunk: Arc<[Record]> = Arc::from(std::mem::take(&mut self.open));
            self.open.reserve(LOG_CHUNK);
            self.sealed.push_back(chunk);
        }
        while let Some(front) = self.sealed.front() {
            if self.len - front.len() < cap {
                break;
            }
            let latest = front.iter().map(|r| r.release_ns).max().unwrap_or(0);
            self.dropped_until_ns = Some(self.dropped_until_ns.unwrap_or(0).max(latest));
            self.len -= front.len();
            self.evicted += front.len() as u64;
            self.sealed.pop_front();
        }
    }

    fn window(&self, k: impl Fn(u32) -> u32, cap: usize) -> Window {
        let mut chunks: Vec<Arc<[Record]>> = self.sealed.iter().cloned().collect();
        if !self.open.is_empty() {
            chunks.push(Arc::from(self.open.as_slice()));
        }
        Window {
            chunks,
            k: self.routes.iter().map(|&r| (r, k(r))).collect(),
            evicted: self.evicted,
            dropped_until_ns: self.dropped_until_ns,
            cap,
        }
    }
}

/// Session rows to commit in one transaction, and the answers that wait for it.
#[derive(Debug, Default)]
pub struct WriteGroup {
    pub rows: Vec<SessionRow>,
    /// Sessions to delete `(tenant, policy, session)`, after `rows`.
    pub deleted: Vec<(Uuid, Uuid, String)>,
    pub answers: Vec<Answer>,
    /// Told how many rows were written, or why not.
    pub done: Option<oneshot::Sender<Result<usize, String>>>,
}

/// An answer held back until its state is durable.
#[derive(Debug)]
pub enum Answer {
    Event(mpsc::UnboundedSender<Done>, Box<Done>),
    Created(oneshot::Sender<Creation>),
    Deleted(oneshot::Sender<Deletion>),
}

impl Answer {
    /// Sends it (the state is durable).
    pub fn send(self) {
        match self {
            Self::Event(reply, done) => {
                let _ = reply.send(*done);
            }
            Self::Created(reply) => {
                let _ = reply.send(Creation::Created);
            }
            Self::Deleted(reply) => {
                let _ = reply.send(Deletion::Deleted);
            }
        }
    }
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
    /// Queues events, all or (past the tenant's session limit) none, as
    /// `admitted` is told; each finished one is sent to `reply`.
    Submit {
        tenant: Uuid,
        events: Vec<Event>,
        admitted: oneshot::Sender<Result<(), SessionLimit>>,
        reply: mpsc::UnboundedSender<Done>,
    },
    CreateSession {
        policy: Arc<Policy>,
        session: String,
        state: SessionState,
        reply: oneshot::Sender<Creation>,
    },
    /// Deletes an idle session, answered once the store has it deleted.
    DeleteSession {
        policy: Arc<Policy>,
        session: String,
        reply: oneshot::Sender<Deletion>,
    },
    GetSession {
        policy: Arc<Policy>,
        session: String,
        reply: oneshot::Sender<Option<SessionState>>,
    },
    /// How many sessions a tenant holds.
    SessionCount {
        tenant: Uuid,
        reply: oneshot::Sender<usize>,
    },
    /// A tenant's event log (shared chunks; the caller filters and analyses).
    Stats {
        tenant: Uuid,
        reply: oneshot::Sender<Window>,
    },
    /// Every session changed since the last snapshot (marked clean).
    Snapshot {
        reply: oneshot::Sender<Vec<SessionRow>>,
    },
    /// From now on, session writes go to this writer, in order.
    AttachWriter(mpsc::UnboundedSender<WriteGroup>),
    /// Sends every session changed since the last write to the writer.
    Flush {
        done: oneshot::Sender<Result<usize, String>>,
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
    records: RecordLog,
}

/// The engine; [`Engine::run`] is its thread's body.
pub struct Engine {
    settings: Settings,
    executor: Shared,
    epoch: Instant,
    tenants: HashMap<Uuid, TenantState>,
    next_session: u64,
    writer: Option<mpsc::UnboundedSender<WriteGroup>>,
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
            writer: None,
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
            records: RecordLog::default(),
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
                admitted,
                reply,
            } => {
                let admission = self.admit(tenant, &events);
                let refused = admission.is_err();
                let _ = admitted.send(admission);
                if !refused {
                    self.submit(tenant, events, &reply);
                }
            }
            Command::CreateSession {
                policy,
                session,
                state,
                reply,
            } => {
                let id = self.next_session;
                let max = self.settings.max_sessions;
                let t = self.ensure_loaded(&policy);
                let key = (policy.policy_id, session);
                let route = policy.program.routes().get(usize::from(state.route));
                let held = t.sessions.len();
                let created = match route {
                    _ if t.sessions.contains_key(&key) => Creation::Exists,
                    _ if held >= max => Creation::Refused(SessionLimit { held, new: 1, max }),
                    Some(r) => {
                        t.driver
                            .put_session(id, r.id(), state.state)
                            .expect("a loaded policy's route is registered");
                        t.sessions.insert(key.clone(), Session { id, dirty: true });
                        self.next_session += 1;
                        Creation::Created
                    }
                    // The caller checked the route; a stale one creates nothing.
                    None => Creation::Exists,
                };
                let durable = policy.program.durability() == Durability::Commit;
                match &self.writer {
                    Some(writer) if created == Creation::Created && durable => {
                        let t = self
                            .tenants
                            .get_mut(&policy.tenant_id)
                            .expect("loaded above");
                        let rows = take_rows(policy.tenant_id, t, [key]);
                        let _ = writer.send(WriteGroup {
                            rows,
                            answers: vec![Answer::Created(reply)],
                            ..WriteGroup::default()
                        });
                    }
                    _ => {
                        let _ = reply.send(created);
                    }
                }
            }
            Command::DeleteSession {
                policy,
                session,
                reply,
            } => {
                let t = self.ensure_loaded(&policy);
                let key = (policy.policy_id, session);
                let deletion = match t.sessions.get(&key) {
                    None => Deletion::NotFound,
                    Some(s) => match t.driver.remove_session(s.id) {
                        Ok(_) => {
                            t.sessions.remove(&key);
                            Deletion::Deleted
                        }
                        Err(_) => Deletion::Busy,
                    },
                };
                match &self.writer {
                    Some(writer) if deletion == Deletion::Deleted => {
                        let _ = writer.send(WriteGroup {
                            deleted: vec![(policy.tenant_id, key.0, key.1)],
                            answers: vec![Answer::Deleted(reply)],
                            ..WriteGroup::default()
                        });
                    }
                    _ => {
                        let _ = reply.send(deletion);
                    }
                }
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
            Command::SessionCount { tenant, reply } => {
                let _ = reply.send(self.tenants.get(&tenant).map_or(0, |t| t.sessions.len()));
            }
            Command::Stats { tenant, reply } => {
                let cap = self.settings.records;
                let window = self.tenants.get(&tenant).map_or_else(
                    || Window {
                        cap,
                        ..Window::default()
                    },
                    |t| {
                        t.records
                            .window(|r| t.driver.k(RouteKey(r)).unwrap_or(u32::MAX), cap)
                    },
                );
                let _ = reply.send(window);
            }
            Command::Snapshot { reply } => {
                let _ = reply.send(self.snapshot());
            }
            Command::AttachWriter(writer) => self.writer = Some(writer),
            Command::Flush { done } => {
                let rows = self.snapshot();
                match &self.writer {
                    Some(writer) => {
                        let _ = writer.send(WriteGroup {
                            rows,
                            done: Some(done),
                            ..WriteGroup::default()
                        });
                    }
                    None => {
                        let _ = done.send(Err("no store writer is attached".to_owned()));
                    }
                }
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
                for (&tenant, t) in &mut self.tenants {
                    let now = since(self.epoch);
                    let done = t.driver.finish(now);
                    dispatch(tenant, t, done, self.settings.records, self.writer.as_ref());
                }
                let rows = self.snapshot();
                // With a writer the rows queue behind every earlier group; the
                // writer ends once it has written them (this engine's sender
                // is its last).
                let rows = match &self.writer {
                    Some(writer) => {
                        let _ = writer.send(WriteGroup {
                            rows,
                            ..WriteGroup::default()
                        });
                        Vec::new()
                    }
                    None => rows,
                };
                let _ = reply.send(rows);
                return false;
            }
        }
        true
    }

    /// Whether `events` fit in `tenant`'s session limit with the sessions
    /// they create (counted only when they might not).
    fn admit(&self, tenant: Uuid, events: &[Event]) -> Result<(), SessionLimit> {
        let max = self.settings.max_sessions;
        let sessions = self.tenants.get(&tenant).map(|t| &t.sessions);
        let held = sessions.map_or(0, HashMap::len);
        if held.saturating_add(events.len()) <= max {
            return Ok(());
        }
        let new: HashSet<(Uuid, &str)> = events
            .iter()
            .map(|e| (e.policy.policy_id, e.session.as_str()))
            .filter(|&(policy, name)| {
                sessions.is_none_or(|held| !held.contains_key(&(policy, name.to_owned())))
            })
            .collect();
        if held.saturating_add(new.len()) <= max {
            Ok(())
        } else {
            Err(SessionLimit {
                held,
                new: new.len(),
                max,
            })
        }
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
        for (&tenant, t) in &mut self.tenants {
            let done = t.driver.advance(since(self.epoch));
            dispatch(tenant, t, done, self.settings.records, self.writer.as_ref());
        }
    }

    fn snapshot(&mut self) -> Vec<SessionRow> {
        let mut rows = Vec::new();
        for (&tenant_id, t) in &mut self.tenants {
            for ((policy_id, name), s) in &mut t.sessions {
                if !s.dirty {
                    continue;
                }
                let Some(row) =
                    session_row(tenant_id, &t.policies, &t.driver, *policy_id, name, s.id)
                else {
                    continue;
                };
                s.dirty = false;
                rows.push(row);
            }
        }
        rows
    }
}

fn session_row(
    tenant_id: Uuid,
    policies: &HashMap<Uuid, Arc<Policy>>,
    driver: &Driver<Shared>,
    policy_id: Uuid,
    name: &str,
    id: u64,
) -> Option<SessionRow> {
    let (policy, (route, regs)) = (policies.get(&policy_id)?, driver.session(id)?);
    Some(SessionRow {
        tenant_id,
        policy_id,
        session: name.to_owned(),
        route: i32::from(route),
        state: state_json(&policy.program, &regs),
    })
}

/// The current rows of `keys`, marked clean (their write is being queued).
fn take_rows(
    tenant_id: Uuid,
    t: &mut TenantState,
    keys: impl IntoIterator<Item = (Uuid, String)>,
) -> Vec<SessionRow> {
    let mut rows = Vec::new();
    for key in keys {
        let Some(s) = t.sessions.get_mut(&key) else {
            continue;
        };
        if let Some(row) = session_row(tenant_id, &t.policies, &t.driver, key.0, &key.1, s.id) {
            s.dirty = false;
            rows.push(row);
        }
    }
    rows
}

/// Hands out finished events: at once for `snapshot` policies (their
/// sessions are left for the next flush), through one [`WriteGroup`] for
/// `commit` policies when a writer is attached (answered after the commit).
fn dispatch(
    tenant_id: Uuid,
    t: &mut TenantState,
    done: Vec<Completed>,
    keep: usize,
    writer: Option<&mpsc::UnboundedSender<WriteGroup>>,
) {
    let mut answers = Vec::new();
    let mut touched: HashSet<(Uuid, String)> = HashSet::new();
    for c in done {
        t.records.push(c.record, keep);
        let Some(w) = t.waiting.remove(&c.record.event) else {
            continue;
        };
        let key = (w.policy.policy_id, w.session.clone());
        if let Some(s) = t.sessions.get_mut(&key) {
            s.dirty = true;
        }
        let durable = writer.is_some() && w.policy.program.durability() == Durability::Commit;
        let done = Done {
            index: w.index,
            policy: w.policy,
            session: w.session,
            started_on: c.started_on,
            outcome: c.outcome,
            record: c.record,
        };
        if durable {
            touched.insert(key);
            answers.push(Answer::Event(w.reply, Box::new(done)));
        } else {
            let _ = w.reply.send(done);
        }
    }
    if let Some(writer) = writer
        && !answers.is_empty()
    {
        let rows = take_rows(tenant_id, t, touched);
        // A writer that is gone drops the answers: the clients see the
        // events unanswered, never acknowledged without their state.
        let _ = writer.send(WriteGroup {
            rows,
            answers,
            ..WriteGroup::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use hearth_control::ExecutorKind;
    use hearth_control::driver::Path;

    use super::*;

    fn record(event: u64, release_ns: u64) -> Record {
        Record {
            event,
            route: RouteKey(3),
            release_ns,
            deadline_ns: release_ns + 10,
            batch: None,
            batch_size: 1,
            executor: ExecutorKind::Cpu,
            path: Path::Batch,
            launch_ns: release_ns,
            done_ns: release_ns,
            exact: true,
        }
    }

    #[test]
    fn the_log_shares_whole_chunks_and_says_what_it_dropped() {
        let cap = LOG_CHUNK + 10;
        let mut log = RecordLog::default();
        let n = 3 * LOG_CHUNK as u64 + 5;
        for i in 0..n {
            log.push(record(i, 100 + i), cap);
        }
        let w = log.window(|_| 7, cap);
        let kept: Vec<Record> = w.records_since(0);
        // Whole chunks go: at least `cap` kept, fewer than `cap + LOG_CHUNK`.
        assert!(
            kept.len() >= cap && kept.len() < cap + LOG_CHUNK,
            "{}",
            kept.len()
        );
        assert_eq!(w.evicted + kept.len() as u64, n);
        assert_eq!(kept.last().unwrap().event, n - 1);
        let first_kept = kept[0].release_ns;
        assert_eq!(w.dropped_until_ns, Some(first_kept - 1));
        assert_eq!(w.k, HashMap::from([(3, 7)]));
        assert_eq!(w.records_since(first_kept + 10).len(), kept.len() - 10);
        // The sealed chunks are shared, not copied.
        assert!(Arc::ptr_eq(&w.chunks[0], log.sealed.front().unwrap()));
    }

    #[test]
    fn a_zero_cap_keeps_nothing() {
        let mut log = RecordLog::default();
        log.push(record(1, 1), 0);
        assert!(log.window(|_| 1, 0).chunks.is_empty());
    }
}
