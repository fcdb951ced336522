//! The agent's server: accepts connections, reads their requests one after
//! another, and answers each with frames. Holds the state shared by all
//! connections ([`Agent`]). It knows the protocol, not how jobs are run.
//!
//! A connection has two threads for its whole life, whatever it carries:
//! its reader reads every line the service sends, and its worker answers
//! the requests the reader hands it, one at a time. While the connection
//! follows a run (its own, or one it attached to), a line from the service
//! cancels the run and the connection closing detaches it; otherwise a line
//! is the next request. So the service keeps its connection from job to job,
//! and a job costs the agent no connection and no thread of its own.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hearth_core::ErrorCode;
use hearth_core::agent::{Envelope, Frame, PROTOCOL_VERSION, Request, constant_time_eq};

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
    /// The last run, while a leader may still attach to it: running, or
    /// ended with its final frame not yet delivered.
    current: Mutex<Option<Current>>,
    /// The input file as the last bind left it (see [`crate::bind::Written`]).
    pub input: Mutex<Option<crate::bind::Written>>,
}

/// The run a leader may attach to.
#[derive(Debug, Clone)]
struct Current {
    job_id: String,
    out: Arc<Out>,
    /// Cancels it.
    cancel: Sender<Event>,
    /// How long it goes on without a leader.
    grace: Duration,
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
/// The mode of the pod's job directories (owned by the job's user).
const JOB_DIR_MODE: u32 = 0o755;

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
            current: Mutex::new(None),
            input: Mutex::new(None),
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

    /// The newest leadership epoch seen.
    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
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
        // A run whose end no leader has received yet still holds the pod.
        let pending = lock(&self.current).as_ref().map(|c| c.job_id.clone());
        let mut envs: Vec<String> = std::fs::read_dir(&self.layout.venvs)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| !name.starts_with('.'))
            .collect();
        envs.sort();
        Frame::Status {
            busy: !holds.running.is_empty() || pending.is_some(),
            job_id: holds.running.first().cloned().or(pending),
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
        // Whatever the last run left undelivered is given up with the pod's files.
        *lock(&self.current) = None;
        Ok(())
    }

    /// Deletes everything in the pod's job directories, and resets the
    /// directories' modes and extended attributes (jobs must not be
    /// running: the caller holds the run lock, or is the run).
    pub fn empty_job_dirs(&self) -> io::Result<()> {
        for dir in self.layout.job_dirs() {
            std::fs::create_dir_all(dir)?;
            // A job may have changed the directory itself, which outlives
            // it: its mode, or a default ACL that every file the agent makes
            // for the next job inherits. It goes back to what the agent made.
            crate::sys::remove_xattrs(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(JOB_DIR_MODE))?;
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

    /// Forgets run `out` once no leader can attach to it any more: its end
    /// was delivered, or it was given up.
    fn settle(&self, out: &Arc<Out>) {
        let mut current = lock(&self.current);
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(&c.out, out)) && out.settled() {
            *current = None;
        }
    }

    /// Hands run `job_id`'s stream to the connection `out` came in on;
    /// returns the run and the link number of the new connection.
    fn attach(&self, job_id: &str, out: &Out) -> Option<(Current, u64)> {
        let current = lock(&self.current).clone()?;
        if current.job_id != job_id {
            return None;
        }
        let conn = out.take_conn()?;
        let link = current.out.attach(conn)?;
        Some((current, link))
    }
}

/// What a connection follows: a run, through link `link` of its stream,
/// for a leader of `epoch`.
#[derive(Debug, Clone)]
struct Follow {
    current: Current,
    link: u64,
    epoch: u64,
}

impl Follow {
    /// A line from the service while the run goes on: it cancels the run,
    /// unless a newer leader was seen since (a stale leader cannot cancel
    /// what the new one took over).
    fn cancel(&self, agent: &Agent) {
        if agent.epoch() <= self.epoch {
            let _ = self.current.cancel.send(Event::Cancel);
        }
    }

    /// The connection closed: the run has no leader now. After the grace
    /// period, a run no leader attached to again is cancelled and given up.
    fn detach(&self, agent: &Agent) {
        let Follow { current, link, .. } = self;
        if !current.out.detach(*link) {
            return;
        }
        if !current.grace.is_zero() {
            std::thread::sleep(current.grace);
        }
        if current.out.abandon(*link) {
            let _ = current.cancel.send(Event::Cancel);
            agent.settle(&current.out);
        }
    }
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

/// The write side of an exchange, shared by its threads. Frames are whole
/// lines written under the mutex; nothing is written after the final frame.
///
/// A run's frames are also kept (they are bounded: the run's output is), so
/// that the stream survives its connection: a leader that attaches gets
/// them all, then the rest live, and the final frame is kept until one has.
#[derive(Debug)]
pub struct Out {
    inner: Mutex<OutInner>,
}

#[derive(Debug)]
struct OutInner {
    /// The service's connection; `None` while no leader follows the run.
    conn: Option<Conn>,
    /// Which connection `conn` is: bumped at every attach.
    link: u64,
    /// The final frame was sent (or, for a run, kept).
    closed: bool,
    /// A run's frames so far; `None` for other exchanges.
    history: Option<Vec<Frame>>,
    /// A run's final frame.
    last: Option<Frame>,
    /// The final frame reached a connection.
    delivered: bool,
    /// No leader attached within the grace period: the run is given up.
    abandoned: bool,
}

impl Out {
    fn new(conn: Conn, keep: bool) -> Self {
        Out {
            inner: Mutex::new(OutInner {
                conn: Some(conn),
                link: 0,
                closed: false,
                history: keep.then(Vec::new),
                last: None,
                delivered: false,
                abandoned: false,
            }),
        }
    }

    /// Sends a frame (and keeps it, for a run); false when the exchange is
    /// over or the peer is gone.
    pub fn send(&self, frame: &Frame) -> bool {
        let mut inner = lock(&self.inner);
        if inner.closed {
            return false;
        }
        if let Some(history) = &mut inner.history {
            history.push(frame.clone());
        }
        let Some(conn) = &mut inner.conn else {
            return false;
        };
        if write_frame(conn, frame).is_ok() {
            return true;
        }
        // The leader is gone: its watcher starts the grace period.
        if let Some(conn) = inner.conn.take() {
            conn.shutdown();
        }
        false
    }

    /// Sends the final frame; the connection stays open for the next
    /// request. A run keeps the frame until a leader received it.
    fn finish(&self, frame: &Frame) {
        let mut inner = lock(&self.inner);
        if inner.closed {
            return;
        }
        inner.closed = true;
        if inner.history.is_some() {
            inner.last = Some(frame.clone());
        }
        if let Some(mut conn) = inner.conn.take() {
            inner.delivered = write_frame(&mut conn, frame).is_ok();
        }
    }

    /// The final frame was sent (or kept).
    fn is_closed(&self) -> bool {
        lock(&self.inner).closed
    }

    /// The connection, taken for a run it attaches to.
    fn take_conn(&self) -> Option<Conn> {
        lock(&self.inner).conn.take()
    }

    /// Makes `conn` the run's connection: it gets every frame so far (and
    /// the final one, if the run ended). Returns its link number; `None`
    /// when the run's end was delivered already or it was given up.
    fn attach(&self, mut conn: Conn) -> Option<u64> {
        let mut inner = lock(&self.inner);
        if inner.delivered || inner.abandoned || inner.history.is_none() {
            return None;
        }
        if let Some(old) = inner.conn.take() {
            // The last leader's connection no longer follows the run.
            old.shutdown();
        }
        inner.link += 1;
        let kept = inner.history.iter().flatten().chain(&inner.last);
        let mut sent = kept.into_iter().try_for_each(|f| write_frame(&mut conn, f));
        if sent.is_ok() {
            sent = conn.flush();
        }
        if inner.closed {
            inner.delivered = sent.is_ok() && inner.last.is_some();
            conn.shutdown();
        } else if sent.is_ok() {
            inner.conn = Some(conn);
        } else {
            conn.shutdown();
        }
        Some(inner.link)
    }

    /// Connection `link` closed: the run has no leader now. False if
    /// another connection took over, or the run's end was delivered.
    fn detach(&self, link: u64) -> bool {
        let mut inner = lock(&self.inner);
        if inner.link != link || inner.delivered {
            return false;
        }
        if let Some(conn) = inner.conn.take() {
            conn.shutdown();
        }
        true
    }

    /// The grace period after connection `link` closed is over: true (and
    /// the run is given up) when no leader attached meanwhile.
    fn abandon(&self, link: u64) -> bool {
        let mut inner = lock(&self.inner);
        if inner.link != link || inner.delivered || inner.conn.is_some() {
            return false;
        }
        inner.abandoned = true;
        true
    }

    /// No leader can attach any more: the end was delivered, or given up.
    fn settled(&self) -> bool {
        let inner = lock(&self.inner);
        inner.closed && (inner.delivered || inner.abandoned)
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
    /// A run's exchange over `conn`, with no job yet.
    #[cfg(test)]
    pub fn new(conn: Conn) -> Self {
        let (events_tx, events) = mpsc::channel();
        Exchange {
            out: Arc::new(Out::new(conn, true)),
            events_tx,
            events,
            next_gen: AtomicU64::new(0),
        }
    }

    /// A fresh generation number for the processes of one spawn, so late
    /// events of an earlier process are told apart.
    pub fn next_gen(&self) -> u64 {
        self.next_gen.fetch_add(1, Ordering::Relaxed)
    }
}

/// Binds the listener and serves forever.
pub fn serve(args: &Args) -> io::Result<()> {
    // The parent to outlive no longer than, read before anything that takes
    // time: read by the watcher thread, it could already be init's pid when
    // the parent died while the agent was starting, and the agent would then
    // never notice that it is gone.
    let parent = std::os::unix::process::parent_id();
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
            .spawn(move || watch_parent(&agent, &root, parent))?;
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

/// Exits once the parent process (pid `parent`) is gone, so a killed service
/// leaves nothing behind: the running jobs are killed, and the pod's cgroups
/// and directory removed.
#[expect(clippy::exit, reason = "the agent must end from this watcher thread")]
fn watch_parent(agent: &Agent, root: &std::path::Path, parent: u32) {
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if std::os::unix::process::parent_id() != parent {
            eprintln!("hearth-agent: parent {parent} is gone; exiting");
            agent.kill_all_jobs();
            let _ = std::fs::remove_dir_all(root);
            if let Some(pods_dir) = root.parent() {
                let cgroups = agent.sandbox.cgroups();
                cgroups.remove_after_exit(agent.sandbox.agent_exe(), pods_dir);
            }
            std::process::exit(1);
        }
    }
}

fn spawn_conn(agent: &Arc<Agent>, conn: Conn) {
    let agent = Arc::clone(agent);
    let spawned = std::thread::Builder::new()
        .name("conn".into())
        .spawn(move || {
            if let Err(e) = serve_conn(&agent, conn) {
                eprintln!("hearth-agent: connection: {e}");
            }
        });
    if let Err(e) = spawned {
        eprintln!("hearth-agent: cannot start a connection thread: {e}");
    }
}

/// Serves one connection until it closes: this thread is its worker, and a
/// thread of its own its reader. The reader hands the worker request lines;
/// the worker says when it is ready for the next line (see [`read_conn`]).
fn serve_conn(agent: &Arc<Agent>, conn: Conn) -> io::Result<()> {
    let reader = BufReader::new(conn.try_clone()?);
    let follows: Arc<Mutex<Option<Follow>>> = Arc::default();
    let (requests_tx, requests) = mpsc::channel::<String>();
    let (ready, ready_rx) = mpsc::channel::<()>();
    {
        let (agent, follows) = (Arc::clone(agent), Arc::clone(&follows));
        std::thread::Builder::new()
            .name("conn-read".into())
            .spawn(move || read_conn(&agent, reader, &follows, &requests_tx, &ready_rx))?;
    }
    for line in requests {
        let open = answer(agent, &conn, &line, &follows, &ready)?;
        if !open {
            break;
        }
    }
    conn.shutdown();
    Ok(())
}

/// A connection's reader: hands each request line to the worker; the next
/// line (or the connection's end) is taken up once the worker is ready for
/// it (it follows what the request asked to); while the connection follows
/// a run that goes on, a line cancels it. Ends when the connection or the worker does; a
/// run followed then is detached.
fn read_conn(
    agent: &Agent,
    mut reader: impl BufRead,
    follows: &Mutex<Option<Follow>>,
    requests: &Sender<String>,
    ready: &Receiver<()>,
) {
    // A request was handed over and the worker has not yet said it is ready.
    // The reader reads on meanwhile and waits for the word only when it must
    // tell what came next (a line, or the connection's end), by which time
    // the worker has mostly said it: no hand-back per request.
    let mut unsettled = false;
    loop {
        let mut line = String::new();
        let read = matches!(reader.read_line(&mut line), Ok(n) if n > 0);
        if std::mem::take(&mut unsettled) && ready.recv().is_err() {
            break;
        }
        if !read {
            break;
        }
        let running = lock(follows).clone().filter(|f| !f.current.out.is_closed());
        if let Some(f) = running {
            f.cancel(agent);
            continue;
        }
        if requests.send(line).is_err() {
            break;
        }
        unsettled = true;
    }
    let last = lock(follows).take();
    if let Some(f) = last {
        f.detach(agent);
    }
}

/// Answers one request on `conn`; says `ready` once the connection follows
/// what the request asks it to (before a run starts). Returns whether the
/// connection stays open for another request: not after a request that was
/// refused.
fn answer(
    agent: &Arc<Agent>,
    conn: &Conn,
    line: &str,
    follows: &Mutex<Option<Follow>>,
    ready: &Sender<()>,
) -> io::Result<bool> {
    let parsed = serde_json::from_str::<Envelope>(line);
    let keep = matches!(&parsed, Ok(e) if matches!(e.request, Request::Run(_)));
    let out = Arc::new(Out::new(conn.try_clone()?, keep));
    let refuse = |code, message| {
        out.finish(&error_frame(code, message));
        let _ = ready.send(());
        Ok(false)
    };
    // The connection follows the run now: the reader may read on.
    let follow = |f: Follow| {
        *lock(follows) = Some(f);
        let _ = ready.send(());
    };
    let (epoch_seen, request) = match parsed {
        Ok(Envelope { token, .. }) if !agent.authorized(token.as_deref()) => {
            return refuse(
                ErrorCode::AgentProtocol,
                "unauthorized: the request does not carry this pod's token".to_owned(),
            );
        }
        Ok(Envelope { epoch, request, .. }) => match agent.admit(epoch) {
            Ok(()) => (epoch, request),
            Err(seen) => {
                return refuse(
                    ErrorCode::StaleEpoch,
                    format!("epoch {epoch} is older than {seen}: not the leader's request"),
                );
            }
        },
        Err(e) => return refuse(ErrorCode::AgentProtocol, format!("bad request: {e}")),
    };
    let prewarm = !matches!(
        request,
        Request::Ping | Request::Status | Request::Attach { .. }
    );
    if !matches!(request, Request::Run(_) | Request::Attach { .. }) {
        // Nothing to follow: the next line is the next request.
        let _ = ready.send(());
    }
    let last = match request {
        Request::Ping => Frame::Pong {
            protocol: PROTOCOL_VERSION,
            sandbox: agent.sandbox.kind().name().to_owned(),
        },
        Request::Status => agent.status(),
        Request::Attach { job_id } => {
            let Some((current, link)) = agent.attach(&job_id, &out) else {
                return refuse(
                    ErrorCode::PodLost,
                    format!("no run of job {job_id} to attach to"),
                );
            };
            agent.settle(&current.out);
            // The run's stream goes on this connection now (until the run
            // ends or another leader attaches).
            follow(Follow {
                current,
                link,
                epoch: epoch_seen,
            });
            return Ok(true);
        }
        Request::Wipe => match agent.wipe() {
            Ok(()) => Frame::Wiped,
            Err(e) => error_frame(ErrorCode::WipeFailed, format!("wipe failed: {e}")),
        },
        Request::Run(job) => {
            let (events_tx, events) = mpsc::channel();
            let current = Current {
                job_id: job.job_id.clone(),
                out: Arc::clone(&out),
                cancel: events_tx.clone(),
                grace: Duration::from_millis(job.detach_grace_ms),
            };
            *lock(&agent.current) = Some(current.clone());
            // Any further line from the service cancels the job; its side
            // closing too, once the grace period passed without an attach.
            follow(Follow {
                current,
                link: 0,
                epoch: epoch_seen,
            });
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
    agent.settle(&out);
    if prewarm {
        // Under the run lock: a run that started meanwhile ends with a sweep
        // of the cgroups, which would take a sandbox built during it along.
        let _run = lock(&agent.run_lock);
        agent.prewarm();
    }
    Ok(true)
}

pub fn error_frame(code: ErrorCode, message: String) -> Frame {
    Frame::Error {
        code,
        message,
        log: String::new(),
    }
}
