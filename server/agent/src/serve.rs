//! The agent's server: accepts connections (one thread each), reads the one
//! request of each, and answers with frames. Holds the state shared by all
//! connections ([`Agent`]). It knows the protocol, not how jobs are run.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hearth_core::ErrorCode;
use hearth_core::agent::{Envelope, Frame, PROTOCOL_VERSION, Request};

use crate::args::{Args, Listen, SandboxKind};
use crate::resident::Resident;
use crate::run::{self, DiskQuota, Event, Process};
use crate::sandbox::{Layout, Sandbox};

/// State shared by every connection of the agent.
#[derive(Debug)]
pub struct Agent {
    pub layout: Layout,
    pub sandbox: Sandbox,
    /// The interpreter that builds dependency environments.
    pub python: PathBuf,
    /// Held while a dependency environment is built or the pod is wiped.
    pub venv_lock: Mutex<()>,
    /// Held for a whole run and for a wipe: jobs of a pod share its cgroups,
    /// so one ending (and its cgroups being swept) must not hit another.
    /// A run arriving while another is still being killed waits for it.
    run_lock: Mutex<()>,
    /// Running jobs: id -> pid of the sandbox process.
    jobs: Mutex<BTreeMap<u64, u32>>,
    next_job: AtomicU64,
    /// Resident sandboxes waiting for the next jobs, the next one first.
    residents: Mutex<VecDeque<Resident>>,
    /// The quota over the pod's job directories, if any.
    pub disk_quota: Option<DiskQuota>,
    /// The newest leadership epoch a request carried.
    epoch: AtomicU64,
    /// The pod token every request must carry (agents on TCP only; a unix
    /// socket is reachable by the service alone).
    token: Option<String>,
    /// What the pod holds, for `status`.
    holds: Mutex<Holds>,
}

/// The binding a `status` request reports.
#[derive(Debug, Default)]
struct Holds {
    /// Runs in progress (bound or running): job ids.
    running: Vec<String>,
    /// The caller of the last job bound since the last wipe.
    caller: Option<String>,
}

/// Environment variable the pod token arrives in (from a Secret: never
/// written into the pod spec).
pub const TOKEN_ENV: &str = "HEARTH_AGENT_TOKEN";

/// Resident sandboxes kept ready (bubblewrap only). Jobs reuse the sandbox
/// of the job before them; a spare is ready for when a job ends its own
/// (timeout, cancel, processes left behind), since building one takes longer
/// than a short job.
const PREPARED: usize = 2;

impl Agent {
    pub fn new(args: &Args) -> io::Result<Self> {
        let layout = Layout::new(&args.root);
        layout.create()?;
        let sandbox = Sandbox::new(args)?;
        for dir in layout.job_dirs() {
            sandbox.give(dir)?;
        }
        let layout_dirs = layout.job_dirs().map(ToOwned::to_owned).to_vec();
        Ok(Agent {
            sandbox,
            python: resolve_python(&args.python),
            layout,
            venv_lock: Mutex::new(()),
            run_lock: Mutex::new(()),
            jobs: Mutex::new(BTreeMap::new()),
            next_job: AtomicU64::new(0),
            residents: Mutex::new(VecDeque::with_capacity(PREPARED)),
            epoch: AtomicU64::new(0),
            token: None,
            holds: Mutex::new(Holds::default()),
            disk_quota: args.disk_mib.map(|mib| DiskQuota {
                dirs: layout_dirs,
                bytes: mib << 20,
            }),
        })
    }

    /// Builds sandboxes for the next jobs now, while the pod is idle, until
    /// [`PREPARED`] are waiting (bubblewrap only: without it a job is a
    /// process of its own).
    pub fn prewarm(&self) {
        if self.sandbox.kind() != SandboxKind::Bwrap {
            return;
        }
        let mut residents = lock(&self.residents);
        residents.retain_mut(|r| {
            let alive = r.is_alive();
            if !alive {
                r.kill();
            }
            alive
        });
        while residents.len() < PREPARED {
            match self.sandbox.prepare(&self.layout) {
                Ok(prepared) => residents.push_back(prepared),
                Err(e) => {
                    eprintln!("hearth-agent: cannot prepare a sandbox: {e}");
                    break;
                }
            }
        }
    }

    /// Starts building a spare sandbox on another thread.
    pub fn prewarm_in_background(self: &Arc<Self>) {
        let agent = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("prewarm".into())
            .spawn(move || agent.prewarm());
        if let Err(e) = spawned {
            eprintln!("hearth-agent: cannot start a prewarm thread: {e}");
        }
    }

    /// The sandbox for the next job, if one is ready.
    pub fn take_resident(&self) -> Option<Resident> {
        lock(&self.residents).pop_front()
    }

    /// After a job: its sandbox serves the next job if the job left it clean;
    /// otherwise it is gone and a spare is built.
    pub fn end_process(self: &Arc<Self>, process: Process) {
        match process.into_reusable() {
            Some(resident) => lock(&self.residents).push_front(resident),
            None if self.sandbox.kind() == SandboxKind::Bwrap => self.prewarm_in_background(),
            None => {}
        }
    }

    /// Ends the waiting sandboxes (before the pod is wiped, or the agent exits).
    pub fn discard_residents(&self) {
        let all: Vec<Resident> = lock(&self.residents).drain(..).collect();
        for mut r in all {
            r.kill();
        }
    }

    /// Records a running job so the agent can kill it when it exits.
    pub fn register(&self, pid: u32) -> u64 {
        let id = self.next_job.fetch_add(1, Ordering::Relaxed);
        lock(&self.jobs).insert(id, pid);
        id
    }

    pub fn unregister(&self, id: u64) {
        lock(&self.jobs).remove(&id);
    }

    /// Admits a request of leadership `epoch` unless a newer one was seen;
    /// the newest seen is kept.
    fn admit(&self, epoch: u64) -> Result<(), u64> {
        let seen = self.epoch.fetch_max(epoch, Ordering::SeqCst);
        if epoch < seen { Err(seen) } else { Ok(()) }
    }

    /// Whether `offered` is this pod's token, compared in constant time (the
    /// time taken says nothing of how much of it matched).
    fn authorized(&self, offered: Option<&str>) -> bool {
        match &self.token {
            None => true,
            Some(token) => {
                offered.is_some_and(|o| constant_time_eq(o.as_bytes(), token.as_bytes()))
            }
        }
    }

    /// The answer to `status`.
    fn status(&self) -> Frame {
        let holds = lock(&self.holds);
        let mut envs: Vec<String> = std::fs::read_dir(&self.layout.venvs)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| !name.starts_with('.'))
            .collect();
        envs.sort();
        Frame::Status {
            busy: !holds.running.is_empty(),
            job_id: holds.running.first().cloned(),
            caller: holds.caller.clone(),
            envs,
        }
    }

    /// Kills every running job's tree (the agent is about to exit).
    fn kill_all_jobs(&self) {
        self.discard_residents();
        let pids: Vec<u32> = lock(&self.jobs).values().copied().collect();
        self.sandbox.kill_pids_and_trees(&pids);
    }

    /// Deletes everything jobs left in the pod. The directories themselves
    /// stay: sandboxes bind them.
    fn wipe(&self) -> io::Result<()> {
        let _run = lock(&self.run_lock);
        let _guard = lock(&self.venv_lock);
        self.discard_residents();
        self.empty_job_dirs()?;
        lock(&self.holds).caller = None;
        Ok(())
    }

    /// Deletes everything in the pod's job directories (jobs must not be
    /// running: the caller holds the run lock, or is the run).
    pub fn empty_job_dirs(&self) -> io::Result<()> {
        for dir in self.layout.job_dirs() {
            std::fs::create_dir_all(dir)?;
            self.sandbox.give(dir)?;
            for entry in std::fs::read_dir(dir)? {
                let path = entry?.path();
                let removed = if std::fs::symlink_metadata(&path)?.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                match removed {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// Equal slices, in time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Finds the real interpreter behind `python` (a name on PATH may be a shim
/// that needs the caller's environment, e.g. pyenv's).
fn resolve_python(python: &str) -> PathBuf {
    if python.starts_with('/') {
        return PathBuf::from(python);
    }
    let resolved = std::process::Command::new(python)
        .args(["-c", "import sys; print(sys.executable)"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|exe| exe.starts_with('/'));
    match resolved {
        Some(exe) => PathBuf::from(exe),
        None => crate::sandbox::find_in_path(python).unwrap_or_else(|| PathBuf::from(python)),
    }
}

/// A connection from the service, over a unix socket or TCP.
#[derive(Debug)]
pub enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn try_clone(&self) -> io::Result<Conn> {
        Ok(match self {
            Conn::Unix(s) => Conn::Unix(s.try_clone()?),
            Conn::Tcp(s) => Conn::Tcp(s.try_clone()?),
        })
    }

    fn shutdown(&self) {
        let _ = match self {
            Conn::Unix(s) => s.shutdown(Shutdown::Both),
            Conn::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(buf),
            Conn::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(buf),
            Conn::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Unix(s) => s.flush(),
            Conn::Tcp(s) => s.flush(),
        }
    }
}

/// The write side of a connection, shared by the threads of one exchange.
/// Frames are whole lines written under the mutex; nothing is written after
/// the final frame.
#[derive(Debug)]
pub struct Out {
    inner: Mutex<OutInner>,
}

#[derive(Debug)]
struct OutInner {
    conn: Conn,
    closed: bool,
}

impl Out {
    fn new(conn: Conn) -> Self {
        Out {
            inner: Mutex::new(OutInner {
                conn,
                closed: false,
            }),
        }
    }

    /// Sends a frame; false when the exchange is over or the peer is gone.
    pub fn send(&self, frame: &Frame) -> bool {
        let mut inner = lock(&self.inner);
        if inner.closed {
            return false;
        }
        write_frame(&mut inner.conn, frame).is_ok()
    }

    /// Sends the final frame and closes the connection.
    fn finish(&self, frame: &Frame) {
        let mut inner = lock(&self.inner);
        if !inner.closed {
            let _ = write_frame(&mut inner.conn, frame);
            inner.closed = true;
            inner.conn.shutdown();
        }
    }
}

fn write_frame(w: &mut impl Write, frame: &Frame) -> io::Result<()> {
    let mut line = serde_json::to_vec(frame).map_err(io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)
}

/// What one exchange needs besides the agent: the frame writer and the events
/// (cancellation, end of an output stream) its threads report.
#[derive(Debug)]
pub struct Exchange {
    pub out: Arc<Out>,
    pub events_tx: Sender<Event>,
    pub events: Receiver<Event>,
    next_gen: AtomicU64,
}

impl Exchange {
    /// A fresh generation number for the processes of one spawn, so late
    /// events of an earlier process are told apart.
    pub fn next_gen(&self) -> u64 {
        self.next_gen.fetch_add(1, Ordering::Relaxed)
    }
}

/// Binds the listener and serves forever.
pub fn serve(args: &Args) -> io::Result<()> {
    let mut agent = Agent::new(args)?;
    if let Listen::Tcp(_) = &args.listen {
        // Over TCP anything on the network could connect: work is accepted
        // only with this pod's own token.
        match std::env::var(TOKEN_ENV) {
            Ok(token) if !token.is_empty() => agent.token = Some(token),
            _ => {
                return Err(io::Error::other(format!(
                    "listening on TCP needs the pod token in ${TOKEN_ENV}"
                )));
            }
        }
    }
    let agent = Arc::new(agent);
    if args.exit_with_parent {
        let agent = Arc::clone(&agent);
        let root = args.root.clone();
        std::thread::Builder::new()
            .name("parent-watch".into())
            .spawn(move || watch_parent(&agent, &root))?;
    }
    let sandbox = agent.sandbox.kind().name();
    agent.prewarm();
    match &args.listen {
        Listen::Unix(path) => {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let listener = UnixListener::bind(path)?;
            eprintln!(
                "hearth-agent: listening on unix:{} (sandbox {sandbox})",
                path.display()
            );
            for conn in listener.incoming() {
                match conn {
                    Ok(s) => spawn_conn(&agent, Conn::Unix(s)),
                    Err(e) => eprintln!("hearth-agent: accept: {e}"),
                }
            }
        }
        Listen::Tcp(hostport) => {
            let listener = TcpListener::bind(hostport)?;
            eprintln!("hearth-agent: listening on tcp:{hostport} (sandbox {sandbox})");
            for conn in listener.incoming() {
                match conn {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        spawn_conn(&agent, Conn::Tcp(s));
                    }
                    Err(e) => eprintln!("hearth-agent: accept: {e}"),
                }
            }
        }
    }
    Ok(())
}

/// Exits once the parent process is gone, so a killed service leaves nothing
/// behind: the running jobs are killed, and the pod's cgroups and directory
/// removed.
#[expect(clippy::exit, reason = "the agent must end from this watcher thread")]
fn watch_parent(agent: &Agent, root: &std::path::Path) {
    let parent = std::os::unix::process::parent_id();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if std::os::unix::process::parent_id() != parent {
            eprintln!("hearth-agent: parent {parent} is gone; exiting");
            agent.kill_all_jobs();
            agent.sandbox.cgroups().remove();
            let _ = std::fs::remove_dir_all(root);
            std::process::exit(1);
        }
    }
}

fn spawn_conn(agent: &Arc<Agent>, conn: Conn) {
    let agent = Arc::clone(agent);
    let spawned = std::thread::Builder::new()
        .name("conn".into())
        .spawn(move || {
            if let Err(e) = handle(&agent, conn) {
                eprintln!("hearth-agent: connection: {e}");
            }
        });
    if let Err(e) = spawned {
        eprintln!("hearth-agent: cannot start a connection thread: {e}");
    }
}

fn handle(agent: &Arc<Agent>, conn: Conn) -> io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let out = Arc::new(Out::new(conn));
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(());
    }
    let request = match serde_json::from_str::<Envelope>(&line) {
        Ok(Envelope { token, .. }) if !agent.authorized(token.as_deref()) => {
            out.finish(&error_frame(
                ErrorCode::AgentProtocol,
                "unauthorized: the request does not carry this pod's token".to_owned(),
            ));
            return Ok(());
        }
        Ok(Envelope { epoch, request, .. }) => match agent.admit(epoch) {
            Ok(()) => request,
            Err(seen) => {
                out.finish(&error_frame(
                    ErrorCode::StaleEpoch,
                    format!("epoch {epoch} is older than {seen}: not the leader's request"),
                ));
                return Ok(());
            }
        },
        Err(e) => {
            out.finish(&error_frame(
                ErrorCode::AgentProtocol,
                format!("bad request: {e}"),
            ));
            return Ok(());
        }
    };
    let prewarm = !matches!(request, Request::Ping | Request::Status);
    let last = match request {
        Request::Ping => Frame::Pong {
            protocol: PROTOCOL_VERSION,
            sandbox: agent.sandbox.kind().name().to_owned(),
        },
        Request::Status => agent.status(),
        Request::Wipe => match agent.wipe() {
            Ok(()) => Frame::Wiped,
            Err(e) => error_frame(ErrorCode::WipeFailed, format!("wipe failed: {e}")),
        },
        Request::Run(job) => {
            let (events_tx, events) = mpsc::channel();
            // Any further line from the service, or its side closing,
            // cancels the job.
            let cancel = events_tx.clone();
            std::thread::Builder::new()
                .name("cancel-watch".into())
                .spawn(move || {
                    let mut rest = String::new();
                    let _ = reader.read_line(&mut rest);
                    let _ = cancel.send(Event::Cancel);
                })?;
            let exchange = Exchange {
                out: Arc::clone(&out),
                events_tx,
                events,
                next_gen: AtomicU64::new(0),
            };
            {
                let mut holds = lock(&agent.holds);
                holds.running.push(job.job_id.clone());
                if job.caller.is_some() {
                    holds.caller.clone_from(&job.caller);
                }
            }
            let last = {
                let _run = lock(&agent.run_lock);
                run::execute(agent, &exchange, &job)
            };
            lock(&agent.holds).running.retain(|id| *id != job.job_id);
            last
        }
    };
    out.finish(&last);
    if prewarm {
        // Under the run lock: a run that started meanwhile ends with a sweep
        // of the cgroups, which would take a sandbox built during it along.
        let _run = lock(&agent.run_lock);
        agent.prewarm();
    }
    Ok(())
}

pub fn error_frame(code: ErrorCode, message: String) -> Frame {
    Frame::Error {
        code,
        message,
        log: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
