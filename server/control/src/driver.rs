//! The in-process driver: registered programs, session states, the
//! [`Compactor`] and an [`Executor`], driven by a caller-supplied clock. It
//! turns the compactor's decisions into executions and one [`Record`] per
//! event (enough to compute A). The HTTP endpoint, the session store and the
//! real clock live outside this crate; a virtual clock ([`replay`]) gives
//! reproducible figures.
//!
//! Execution time is measured with the wall clock and added to the caller's
//! clock: a batch starts at `max(now, end of the previous batch)` on the
//! executor lane and ends after its measured run time; fallbacks run on a
//! separate CPU lane the same way.
//!
//! # Session order
//!
//! Events of one session apply in submission order, whatever their routes:
//! a session has at most one event in the compactor or running. A later
//! event waits in the session's backlog and becomes ready when its
//! predecessor is done; its release is that moment and its deadline keeps
//! the window it was submitted with (deadline − submission). An event
//! submitted without a route starts on the route its predecessor chose.

use std::collections::HashMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::compactor::{self, Action, Compactor, FallbackReason, Launch, Pending};
use crate::cpu::{self, Outcome, Task};
use crate::policy::{Input, PolicyError, Program, Regs};

/// Which executor ran an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    /// The CPU executor.
    Cpu,
    /// The CUDA executor.
    Gpu,
}

/// Why an executor could not run a batch.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The device or its driver failed.
    #[error("device error: {0}")]
    Device(String),
    /// The batch is not valid for the program.
    #[error("invalid batch: {0}")]
    Invalid(String),
}

/// Runs batches of one program. The CPU executor is the reference; every
/// other executor must return exactly [`cpu::run_batch`]'s outcomes.
pub trait Executor {
    /// Which kind of executor this is.
    fn kind(&self) -> ExecutorKind;
    /// A one-line status for operators, e.g. `cpu`, `gpu (NVIDIA H200)` or
    /// `cpu (no CUDA driver)`.
    fn status(&self) -> String;
    /// Runs a batch (tasks may start on different routes of `program`).
    ///
    /// # Errors
    /// [`ExecError`] when the executor cannot run it; the driver then reruns
    /// the batch on the CPU and counts it as not exact.
    fn run(&mut self, program: &Program, tasks: &[Task]) -> Result<Vec<Outcome>, ExecError>;

    /// Runs a batch whose task `i` belongs to session `sessions[i]` (all
    /// distinct). An executor that keeps session state resident between
    /// batches (the GPU's) uploads a task's state only when its own copy
    /// differs. Session ids must be unique across every driver that shares
    /// the executor. Default: [`Executor::run`].
    ///
    /// # Errors
    /// As [`Executor::run`].
    fn run_sessions(
        &mut self,
        program: &Program,
        sessions: &[u64],
        tasks: &[Task],
    ) -> Result<Vec<Outcome>, ExecError> {
        debug_assert_eq!(sessions.len(), tasks.len());
        self.run(program, tasks)
    }
}

/// The CPU executor: the vectorised batch path.
#[derive(Debug, Clone, Default)]
pub struct CpuExecutor {
    note: Option<String>,
}

impl CpuExecutor {
    /// A CPU executor.
    pub fn new() -> Self {
        Self::default()
    }

    /// A CPU executor standing in for an unavailable device, with the reason
    /// shown in its status (`cpu (no CUDA driver)`).
    pub fn with_note(note: impl Into<String>) -> Self {
        Self {
            note: Some(note.into()),
        }
    }
}

impl Executor for CpuExecutor {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Cpu
    }

    fn status(&self) -> String {
        match &self.note {
            None => "cpu".to_owned(),
            Some(n) => format!("cpu ({n})"),
        }
    }

    fn run(&mut self, program: &Program, tasks: &[Task]) -> Result<Vec<Outcome>, ExecError> {
        Ok(cpu::run_batch(program, tasks))
    }
}

impl<E: Executor + ?Sized> Executor for Box<E> {
    fn kind(&self) -> ExecutorKind {
        (**self).kind()
    }
    fn status(&self) -> String {
        (**self).status()
    }
    fn run(&mut self, program: &Program, tasks: &[Task]) -> Result<Vec<Outcome>, ExecError> {
        (**self).run(program, tasks)
    }
    fn run_sessions(
        &mut self,
        program: &Program,
        sessions: &[u64],
        tasks: &[Task],
    ) -> Result<Vec<Outcome>, ExecError> {
        (**self).run_sessions(program, sessions, tasks)
    }
}

/// How an event ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "path", content = "reason")]
pub enum Path {
    /// In a batch on the active executor.
    Batch,
    /// Alone on the CPU path.
    Fallback(FallbackReason),
}

/// The accounting record of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Event id (assigned by [`Driver::submit`]).
    pub event: u64,
    /// Route key.
    pub route: RouteKey,
    /// Release time (submission), ns.
    pub release_ns: u64,
    /// Launch deadline, ns.
    pub deadline_ns: u64,
    /// Batch id, for batched events.
    pub batch: Option<u64>,
    /// Events in its batch (1 on the CPU path).
    pub batch_size: u32,
    /// The executor that produced the outcome.
    pub executor: ExecutorKind,
    /// Batch or fallback.
    pub path: Path,
    /// When its execution started (device start for a batch), ns.
    pub launch_ns: u64,
    /// When its execution ended, ns.
    pub done_ns: u64,
    /// Whether the outcome is the reference outcome (always for the CPU;
    /// checked against the CPU when [`DriverConfig::verify`] is set).
    pub exact: bool,
}

/// A finished event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completed {
    /// The session.
    pub session: u64,
    /// Index in its program of the route the event started on.
    pub started_on: u16,
    /// The chain's outcome (new state, next route, effect, steps).
    pub outcome: Outcome,
    /// How it ran.
    pub record: Record,
}

/// Index of an executable route in a [`Driver`] (stable for its lifetime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RouteKey(pub u32);

/// Driver settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverConfig {
    /// Compactor settings.
    pub compactor: compactor::Config,
    /// Recompute every non-CPU batch on the CPU and compare (marks `exact`;
    /// on a mismatch the CPU outcome is used).
    pub verify: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            compactor: compactor::Config::default(),
            verify: true,
        }
    }
}

/// Why the driver refused an event.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// No registered route has this id.
    #[error("unknown route {0:?}")]
    UnknownRoute(String),
    /// The input does not fit the policy.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// An event without a route for a session that does not exist.
    #[error("session {0} does not exist, so it has no next route")]
    UnknownSession(u64),
    /// The session has an event queued or running.
    #[error("session {0} has events in flight")]
    SessionBusy(u64),
    /// The session belongs to another policy.
    #[error("session {session} belongs to policy {policy:?}")]
    SessionPolicy {
        /// The session.
        session: u64,
        /// Its policy.
        policy: String,
    },
}

/// An event in the compactor or running.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    session: u64,
    started_on: u16,
    input: Input,
    pending: Pending,
}

/// An event behind its session's outstanding one.
#[derive(Debug, Clone, Copy)]
struct Held {
    event: u64,
    /// `None`: the route its predecessor chooses.
    route: Option<RouteKey>,
    input: Input,
    /// Deadline minus release, ns.
    window_ns: u64,
}

#[derive(Debug, Clone)]
struct Session {
    program: usize,
    regs: Regs,
    /// Index of the next route in the program.
    next: u16,
    /// An event of the session is in the compactor or running.
    busy: bool,
    backlog: std::collections::VecDeque<Held>,
}

/// Programs, sessions, compactor and executor behind one clock.
#[derive(Debug)]
pub struct Driver<E> {
    config: DriverConfig,
    compactor: Compactor,
    executor: E,
    programs: Vec<Program>,
    /// Route keys of each program, in route order.
    program_keys: Vec<Vec<RouteKey>>,
    routes: Vec<(usize, u16)>,
    by_id: HashMap<String, RouteKey>,
    sessions: HashMap<u64, Session>,
    waiting: HashMap<u64, Waiting>,
    next_event: u64,
    busy_until: u64,
    cpu_busy_until: u64,
    ready: Vec<Completed>,
}

impl<E: Executor> Driver<E> {
    /// A driver with no programs.
    pub fn new(config: DriverConfig, executor: E) -> Self {
        Self {
            compactor: Compactor::new(config.compactor),
            config,
            executor,
            programs: Vec::new(),
            program_keys: Vec::new(),
            routes: Vec::new(),
            by_id: HashMap::new(),
            sessions: HashMap::new(),
            waiting: HashMap::new(),
            next_event: 1,
            busy_until: 0,
            cpu_busy_until: 0,
            ready: Vec::new(),
        }
    }

    /// The active executor.
    pub fn executor(&self) -> &E {
        &self.executor
    }

    /// Registers a program; `k` gives `K_r` per route id (`None`: CPU only).
    /// Routes already registered (same id) keep their key. Returns the keys in
    /// route order.
    pub fn register(&mut self, program: Program, k: impl Fn(&str) -> Option<u32>) -> Vec<RouteKey> {
        let p = self.programs.len();
        let mut keys = Vec::new();
        for (i, r) in program.routes().iter().enumerate() {
            if let Some(&key) = self.by_id.get(r.id()) {
                keys.push(key);
                continue;
            }
            let q = self.compactor.add_route(k(r.id()));
            let key = RouteKey(q as u32);
            self.routes.push((p, i as u16));
            self.by_id.insert(r.id().to_owned(), key);
            keys.push(key);
        }
        self.programs.push(program);
        self.program_keys.push(keys.clone());
        keys
    }

    /// The key of an executable route id.
    pub fn route_key(&self, id: &str) -> Option<RouteKey> {
        self.by_id.get(id).copied()
    }

    /// `K_r` of a route.
    pub fn k(&self, key: RouteKey) -> Option<u32> {
        self.compactor.k(key.0 as usize)
    }

    /// Sets `K_r` of a route (e.g. from calibration).
    pub fn set_k(&mut self, key: RouteKey, k: Option<u32>) {
        self.compactor.set_k(key.0 as usize, k);
    }

    /// A session's next route (index in its program) and registers, if it exists.
    pub fn session(&self, session: u64) -> Option<(u16, Regs)> {
        self.sessions.get(&session).map(|s| (s.next, s.regs))
    }

    /// Creates or overwrites a session (restore, explicit creation): its
    /// registers and its next route `route`, which also names its program.
    /// Events of the session already queued stay queued.
    ///
    /// # Errors
    /// [`DriverError::UnknownRoute`].
    pub fn put_session(
        &mut self,
        session: u64,
        route: &str,
        regs: Regs,
    ) -> Result<(), DriverError> {
        let key = self
            .route_key(route)
            .ok_or_else(|| DriverError::UnknownRoute(route.to_owned()))?;
        let (program, next) = self.routes[key.0 as usize];
        let s = self.sessions.entry(session).or_insert_with(|| Session {
            program,
            regs,
            next,
            busy: false,
            backlog: std::collections::VecDeque::new(),
        });
        s.program = program;
        s.regs = regs;
        s.next = next;
        Ok(())
    }

    /// Removes a session with no event queued or running; `false` if it
    /// does not exist.
    ///
    /// # Errors
    /// [`DriverError::SessionBusy`] while one of its events is in flight.
    pub fn remove_session(&mut self, session: u64) -> Result<bool, DriverError> {
        match self.sessions.get(&session) {
            None => Ok(false),
            Some(s) if s.busy || !s.backlog.is_empty() => Err(DriverError::SessionBusy(session)),
            Some(_) => Ok(self.sessions.remove(&session).is_some()),
        }
    }

    /// Queues an event released at `now` with launch deadline `deadline_ns`
    /// on `route`, or with `None` on the session's next route. A session
    /// seen for the first time starts from its policy's `init` (it needs a
    /// route then). Returns the event id. Call [`Driver::advance`] afterwards.
    ///
    /// If the session has an event outstanding, this one waits behind it
    /// (module docs, "Session order").
    ///
    /// # Errors
    /// [`DriverError`] for an unknown route key, an input longer than the
    /// policy allows, a session of another policy or a new session without
    /// a route.
    pub fn submit(
        &mut self,
        now: u64,
        session: u64,
        route: Option<RouteKey>,
        input: &[u32],
        deadline_ns: u64,
    ) -> Result<u64, DriverError> {
        let p = match route {
            Some(key) => {
                self.routes
                    .get(key.0 as usize)
                    .ok_or_else(|| DriverError::UnknownRoute(format!("key {}", key.0)))?
                    .0
            }
            None => {
                self.sessions
                    .get(&session)
                    .ok_or(DriverError::UnknownSession(session))?
                    .program
            }
        };
        let program = &self.programs[p];
        let input = program.input(input)?;
        let s = match self.sessions.entry(session) {
            std::collections::hash_map::Entry::Occupied(o) => {
                let s = o.into_mut();
                if self.programs[s.program].name() != program.name() {
                    return Err(DriverError::SessionPolicy {
                        session,
                        policy: self.programs[s.program].name().to_owned(),
                    });
                }
                s
            }
            std::collections::hash_map::Entry::Vacant(v) => v.insert(Session {
                program: p,
                regs: program.init(),
                next: 0,
                busy: false,
                backlog: std::collections::VecDeque::new(),
            }),
        };
        let event = self.next_event;
        self.next_event += 1;
        s.backlog.push_back(Held {
            event,
            route,
            input,
            window_ns: deadline_ns.saturating_sub(now),
        });
        if !s.busy
            && let Some(done) = self.start_next(session, now)
        {
            self.complete(done);
        }
        Ok(event)
    }

    /// Moves the session's oldest held event into the compactor, released at
    /// `at`; returns its outcome if it had to run on the CPU at once.
    fn start_next(&mut self, session: u64, at: u64) -> Option<Completed> {
        let s = self.sessions.get_mut(&session)?;
        let held = s.backlog.pop_front()?;
        s.busy = true;
        let key = held
            .route
            .unwrap_or(self.program_keys[s.program][usize::from(s.next)]);
        let pending = Pending {
            event: held.event,
            release_ns: at,
            deadline_ns: at.saturating_add(held.window_ns),
        };
        self.waiting.insert(
            held.event,
            Waiting {
                session,
                started_on: self.routes[key.0 as usize].1,
                input: held.input,
                pending,
            },
        );
        match self.compactor.push(key.0 as usize, pending) {
            Some(Action::Fallback { reason, .. }) => {
                Some(self.fallback(at, key, held.event, reason))
            }
            _ => None,
        }
    }

    /// Hands out a finished event and starts its session's next one (which
    /// may finish at once on the CPU, and so on).
    fn complete(&mut self, done: Completed) {
        let mut next = Some(done);
        while let Some(c) = next.take() {
            if let Some(s) = self.sessions.get_mut(&c.session) {
                s.regs = c.outcome.state;
                s.next = c.outcome.route;
                s.busy = false;
            }
            let (session, at) = (c.session, c.record.done_ns);
            self.ready.push(c);
            next = self.start_next(session, at);
        }
    }

    /// Runs everything due at `now` and returns the events finished since the last call.
    pub fn advance(&mut self, now: u64) -> Vec<Completed> {
        let actions = self.compactor.poll(now);
        self.run_actions(now, actions);
        std::mem::take(&mut self.ready)
    }

    /// When [`Driver::advance`] next has work without new events.
    pub fn next_wake(&self) -> Option<u64> {
        self.compactor.next_wake()
    }

    /// Runs everything still queued (batches of at least `K_r`, the rest on
    /// the CPU), including events held behind their session's, in order.
    pub fn finish(&mut self, mut now: u64) -> Vec<Completed> {
        loop {
            let actions = self.compactor.drain();
            if actions.is_empty() {
                break;
            }
            self.run_actions(now, actions);
            now = now.max(self.busy_until).max(self.cpu_busy_until);
        }
        std::mem::take(&mut self.ready)
    }

    fn run_actions(&mut self, now: u64, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Launch(l) => self.launch(now, l),
                Action::Fallback {
                    route,
                    event,
                    reason,
                } => {
                    let done = self.fallback(now, RouteKey(route as u32), event.event, reason);
                    self.complete(done);
                }
            }
        }
    }

    /// Runs one event alone on the CPU path (its session is updated by [`Driver::complete`]).
    fn fallback(
        &mut self,
        now: u64,
        route: RouteKey,
        event: u64,
        reason: FallbackReason,
    ) -> Completed {
        let w = self
            .waiting
            .remove(&event)
            .expect("queued events are waiting");
        let s = &self.sessions[&w.session];
        let program = &self.programs[s.program];
        let task = Task {
            route: w.started_on,
            state: s.regs,
            input: w.input,
        };
        let start = now.max(self.cpu_busy_until);
        let t0 = Instant::now();
        let outcome = cpu::run_scalar(program, &[task])[0];
        let done = start + elapsed_ns(t0);
        self.cpu_busy_until = done;
        Completed {
            session: w.session,
            started_on: w.started_on,
            outcome,
            record: Record {
                event,
                route,
                release_ns: w.pending.release_ns,
                deadline_ns: w.pending.deadline_ns,
                batch: None,
                batch_size: 1,
                executor: ExecutorKind::Cpu,
                path: Path::Fallback(reason),
                launch_ns: start,
                done_ns: done,
                exact: true,
            },
        }
    }

    fn launch(&mut self, now: u64, launch: Launch) {
        let route = RouteKey(launch.route as u32);
        let (p, r) = self.routes[launch.route];
        let program = &self.programs[p];
        // One event per session is outstanding, so members are distinct sessions.
        let members: Vec<(u64, Waiting)> = launch
            .events
            .iter()
            .map(|e| {
                let w = self
                    .waiting
                    .remove(&e.event)
                    .expect("queued events are waiting");
                (e.event, w)
            })
            .collect();
        let sessions: Vec<u64> = members.iter().map(|(_, w)| w.session).collect();
        let tasks: Vec<Task> = members
            .iter()
            .map(|(_, w)| Task {
                route: r,
                state: self.sessions[&w.session].regs,
                input: w.input,
            })
            .collect();
        let start = now.max(self.busy_until);
        let t0 = Instant::now();
        let result = self.executor.run_sessions(program, &sessions, &tasks);
        let mut done = start + elapsed_ns(t0);
        self.busy_until = done;
        let kind = self.executor.kind();
        let (outcomes, exact, executor) = match result {
            Ok(out) if kind == ExecutorKind::Cpu || !self.config.verify => (out, true, kind),
            Ok(out) => {
                let reference = cpu::run_batch(program, &tasks);
                let exact = out == reference;
                (reference, exact, kind)
            }
            Err(_) => {
                let t1 = Instant::now();
                let out = cpu::run_batch(program, &tasks);
                done += elapsed_ns(t1);
                self.busy_until = done;
                (out, false, ExecutorKind::Cpu)
            }
        };
        let size = members.len() as u32;
        for ((event, w), outcome) in members.into_iter().zip(outcomes) {
            self.complete(Completed {
                session: w.session,
                started_on: r,
                outcome,
                record: Record {
                    event,
                    route,
                    release_ns: w.pending.release_ns,
                    deadline_ns: w.pending.deadline_ns,
                    batch: Some(launch.batch),
                    batch_size: size,
                    executor,
                    path: Path::Batch,
                    launch_ns: start,
                    done_ns: done,
                    exact,
                },
            });
        }
    }
}

fn elapsed_ns(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// One event of a replayed workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Release time, ns (arrivals must come in release order).
    pub release_ns: u64,
    /// The session.
    pub session: u64,
    /// The route.
    pub route: RouteKey,
    /// Input words (zero-padded to the policy's inputs; longer is rejected).
    pub input: Input,
    /// Launch deadline, ns.
    pub deadline_ns: u64,
}

/// Replays arrivals on a virtual clock: the clock jumps to each arrival or
/// compactor wake-up in turn, so batches launch exactly when the rules say.
/// Returns every finished event.
///
/// # Errors
/// The first [`DriverError`] from [`Driver::submit`].
pub fn replay<E: Executor>(
    driver: &mut Driver<E>,
    arrivals: impl IntoIterator<Item = Arrival>,
) -> Result<Vec<Completed>, DriverError> {
    let mut out = Vec::new();
    let mut now = 0;
    for a in arrivals {
        while let Some(w) = driver.next_wake() {
            if w >= a.release_ns {
                break;
            }
            now = now.max(w);
            out.extend(driver.advance(now));
        }
        now = now.max(a.release_ns);
        let inputs = driver.programs[driver.routes[a.route.0 as usize].0].inputs() as usize;
        driver.submit(
            now,
            a.session,
            Some(a.route),
            &a.input[..inputs],
            a.deadline_ns,
        )?;
        out.extend(driver.advance(now));
    }
    while let Some(w) = driver.next_wake() {
        now = now.max(w);
        out.extend(driver.advance(now));
    }
    out.extend(driver.finish(now));
    Ok(out)
}
