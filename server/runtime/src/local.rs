//! The local runtime: each pod is a `hearth-agent` process on this machine,
//! with its own directory (`<state_dir>/pods/<pod_id>`), cgroups
//! (`hearth/<scope>/<pod_id>` per controller) and a bubblewrap sandbox that
//! serves its jobs one after another (`hearth-agent`'s resident sandbox).
//!
//! Several instances may share a machine, even a state directory: each
//! holds an exclusive lock on its pods directory (`pods`, else `pods-1`,
//! `pods-2`, ...) for as long as it runs, and its cgroups live under a scope
//! named after that directory. What an instance finds in its own pods
//! directory and scope at start was left by a dead one, and only that is
//! removed as orphaned. The scope is made with the instance's first pod (a
//! follower replica, which starts none, makes none) and removed with the
//! instance, or by its last pod's agent when the instance died first (see
//! `hearth-agent`'s `--exit-with-parent`).
//!
//! Which isolation mechanisms exist is detected once, when the runtime is
//! built; every missing one is logged and reported by
//! [`Runtime::mechanisms`], and pods run without it (never silently). The
//! runtime touches only its state directory and the `hearth` cgroups.

use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use hearth_core::Profile;
use hearth_core::agent::Frame;
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;

use crate::{Adoption, Claim, Error, Mechanism, Pod, PodEvent, PodSpec, Runtime, client};

mod cgroup;

use cgroup::Cgroups;

/// Where the cgroup hierarchies are mounted.
const CGROUP_MOUNT: &str = "/sys/fs/cgroup";
/// How much of an agent's log a `Gone` event or a start failure quotes.
const LOG_TAIL_BYTES: u64 = 2048;
/// The longest path a unix socket can be bound at (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;
/// Leftover cgroups younger than this may belong to a pod another runtime is
/// starting right now; `remove_orphans` leaves them alone.
const ORPHAN_MIN_AGE: Duration = Duration::from_secs(10);

/// Configuration of the local runtime.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// Pods live in `state_dir/pods/<pod_id>`.
    pub state_dir: PathBuf,
    /// The `hearth-agent` binary.
    pub agent_bin: PathBuf,
    /// Local wheels that dependency installs may use (the only source for
    /// profiles without network).
    pub wheelhouse: Option<PathBuf>,
    /// The interpreter that builds dependency environments (`python3`).
    pub python: String,
    /// How long a pod's agent may take to answer its first ping.
    pub start_timeout: Duration,
    /// The unprivileged user and group jobs run as when the service runs as
    /// root (with bubblewrap); otherwise jobs run as the service's user.
    pub job_user: Option<(u32, u32)>,
}

/// `nobody`/`nogroup` on Debian: owns no file a job could use.
pub const DEFAULT_JOB_USER: (u32, u32) = (65534, 65534);
/// The most instances that may share one state directory.
const MAX_INSTANCES: usize = 64;

impl LocalConfig {
    /// A configuration with `python3`, no wheelhouse and a 10 s start timeout.
    pub fn new(state_dir: impl Into<PathBuf>, agent_bin: impl Into<PathBuf>) -> Self {
        LocalConfig {
            state_dir: state_dir.into(),
            agent_bin: agent_bin.into(),
            wheelhouse: None,
            python: "python3".to_owned(),
            start_timeout: Duration::from_secs(10),
            job_user: Some(DEFAULT_JOB_USER),
        }
    }
}

/// Pods as sandboxed process trees on this machine.
#[derive(Debug, Clone)]
pub struct LocalRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cfg: LocalConfig,
    /// `state_dir/pods` (or `pods-N`), absolute.
    pods_dir: PathBuf,
    /// `state_dir`, absolute: hidden from every sandbox.
    state_dir: PathBuf,
    /// Held for as long as the runtime lives: `pods_dir` is this instance's.
    _pods_lock: std::fs::File,
    /// The user jobs run as, if the agent is to switch to one.
    run_as: Option<(u32, u32)>,
    /// The interpreter behind `cfg.python`.
    python: String,
    /// Whether jobs run in bubblewrap (namespaces available).
    bwrap: bool,
    cgroups: Cgroups,
    mechanisms: Vec<Mechanism>,
    pods: Mutex<HashMap<String, PodHandle>>,
    events: broadcast::Sender<PodEvent>,
    /// The scheduler's leadership epoch, for the agent requests made here.
    epoch: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct PodHandle {
    state: Arc<PodState>,
    stop: Option<oneshot::Sender<()>>,
    watcher: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct PodState {
    /// `stop_pod` owns the cleanup from now on.
    stopping: AtomicBool,
    /// The agent answered; its death is news to the service.
    started: AtomicBool,
    exited: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LocalRuntime {
    /// Detects the isolation mechanisms (once) and prepares the state
    /// directory. Missing mechanisms are logged, not fatal.
    pub fn new(cfg: LocalConfig) -> Result<Self, Error> {
        std::fs::create_dir_all(&cfg.state_dir)?;
        let state_dir = cfg.state_dir.canonicalize()?;
        let (pods_dir, pods_lock) = claim_pods_dir(&state_dir)?;
        let scope = scope_of(&pods_dir);
        let mut cfg = cfg;
        if let Some(w) = &cfg.wheelhouse {
            cfg.wheelhouse = Some(w.canonicalize().map_err(|e| {
                io::Error::new(e.kind(), format!("wheelhouse {}: {e}", w.display()))
            })?);
        }
        if !cfg.agent_bin.is_file() {
            return Err(Error::StartFailed(format!(
                "agent binary {} not found",
                cfg.agent_bin.display()
            )));
        }

        let (bwrap, bwrap_detail) = probe_bwrap();
        let (cgroups, cgroup_mechanisms) = Cgroups::detect(Path::new(CGROUP_MOUNT), &scope);
        // Made to see what it can do; made again with the first pod (unless
        // a dead predecessor's pods keep it).
        cgroups.remove_scope();
        let root = is_root();
        let run_as = cfg.job_user.filter(|_| bwrap && root);
        let slirp = which("slirp4netns");
        let ip = which("ip").or_else(|| {
            hearth_core::net::IP_FALLBACKS
                .map(PathBuf::from)
                .into_iter()
                .find(|p| p.is_file())
        });
        // Jobs with network reach the host's own addresses (and whatever
        // listens on all of them) unless the launcher can route them away.
        let host_blocked = run_as.is_some() && ip.is_some();
        let mut mechanisms = vec![Mechanism {
            name: "namespaces".to_owned(),
            available: bwrap,
            detail: bwrap_detail.clone(),
        }];
        mechanisms.extend(cgroup_mechanisms);
        mechanisms.push(Mechanism {
            name: "network-isolation".to_owned(),
            available: bwrap && (slirp.is_none() || host_blocked),
            detail: match (bwrap, host_blocked) {
                (true, true) => "a network namespace per sandbox; profiles with network get a \
                                 user-mode network (slirp4netns) that reaches neither the host's \
                                 loopback nor the host's own addresses"
                    .to_owned(),
                (true, false) => format!(
                    "a network namespace per sandbox; profiles with network cannot reach the \
                     host's loopback but can reach services listening on the host's own \
                     addresses ({})",
                    if ip.is_none() {
                        "ip (iproute2) is not installed"
                    } else {
                        "jobs run as the service's user, who could undo a route"
                    }
                ),
                (false, _) => format!("jobs share the host network: {bwrap_detail}"),
            },
        });
        mechanisms.push(Mechanism {
            name: "network".to_owned(),
            available: bwrap && slirp.is_some() && (ip.is_some() || run_as.is_none()),
            detail: match (&slirp, bwrap) {
                (Some(_), true) if run_as.is_some() && ip.is_none() => {
                    "ip (iproute2) is not installed: pods of profiles with network fail to start"
                        .to_owned()
                }
                (Some(path), true) => format!("slirp4netns at {}", path.display()),
                (None, true) => "slirp4netns is not installed: pods of profiles with \
                                 network fail to start"
                    .to_owned(),
                (_, false) => format!("jobs share the host network: {bwrap_detail}"),
            },
        });
        mechanisms.push(Mechanism {
            name: "unprivileged-user".to_owned(),
            available: run_as.is_some() || (bwrap && !root),
            detail: match run_as {
                Some((uid, gid)) => format!("jobs run as uid {uid}, gid {gid}"),
                None if !root => "jobs run as the service's own (non-root) user".to_owned(),
                None if bwrap => "HEARTH_JOB_USER is off: jobs run as root \
                                  without capabilities"
                    .to_owned(),
                None => format!("jobs run as root: {bwrap_detail}"),
            },
        });
        for m in mechanisms.iter().filter(|m| !m.available) {
            tracing::warn!(
                mechanism = %m.name,
                detail = %m.detail,
                "isolation mechanism unavailable; local pods run without it"
            );
        }
        let mut python = resolve_python(&cfg.python);
        if run_as.is_some() && !reachable_by_others(Path::new(&python)) {
            // e.g. an interpreter under /root: the job's user cannot run it.
            let fallback = "/usr/bin/python3";
            if reachable_by_others(Path::new(fallback)) {
                tracing::warn!(%python, %fallback, "the job user cannot run the interpreter; using another");
                python = fallback.to_owned();
            } else {
                tracing::warn!(%python, "the job user cannot run the interpreter; dependency installs will fail");
            }
        }
        tracing::info!(
            state_dir = %cfg.state_dir.display(),
            python = %python,
            sandbox = if bwrap { "bwrap" } else { "none" },
            "local runtime ready"
        );
        let (events, _) = broadcast::channel(256);
        Ok(LocalRuntime {
            inner: Arc::new(Inner {
                cfg,
                pods_dir,
                state_dir,
                _pods_lock: pods_lock,
                run_as,
                python,
                bwrap,
                cgroups,
                mechanisms,
                pods: Mutex::new(HashMap::new()),
                events,
                epoch: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }

    /// The directory of a pod.
    pub fn pod_dir(&self, pod_id: &str) -> PathBuf {
        self.inner.pods_dir.join(pod_id)
    }

    /// The cgroup directories a pod has (or would have).
    pub fn cgroup_dirs(&self, pod_id: &str) -> Vec<PathBuf> {
        self.inner.cgroups.pod_dirs(pod_id)
    }
}

/// Takes the first pods directory of `state_dir` that no live instance holds.
fn claim_pods_dir(state_dir: &Path) -> Result<(PathBuf, std::fs::File), Error> {
    for n in 0..MAX_INSTANCES {
        let name = if n == 0 {
            "pods".to_owned()
        } else {
            format!("pods-{n}")
        };
        let dir = state_dir.join(name);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(hearth_core::agent::pods_lock(&dir))?;
        match lock.try_lock() {
            Ok(()) => {
                std::fs::create_dir_all(&dir)?;
                return Ok((dir, lock));
            }
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
    }
    Err(Error::StartFailed(format!(
        "{MAX_INSTANCES} instances already use {}",
        state_dir.display()
    )))
}

/// The agent address of a unix socket.
fn unix_address(socket: &Path) -> String {
    format!("unix:{}", socket.display())
}

/// The cgroup scope of a pods directory: a stable hash of its path (FNV-1a),
/// so a restart on the same directory finds its predecessor's cgroups.
fn scope_of(pods_dir: &Path) -> String {
    let hash = pods_dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    format!("{hash:016x}")
}

/// Whether a user who is neither owner nor in the group can execute `path`:
/// every directory on the way and the file itself have the `x` bit for others.
fn reachable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    path.ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// Whether this process runs as root (`/proc/self` belongs to the euid).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Looks a program up on PATH.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

/// Whether bubblewrap can build the sandboxes jobs run in.
fn probe_bwrap() -> (bool, String) {
    let args = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-all",
        "--die-with-parent",
        "true",
    ];
    match std::process::Command::new("bwrap")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(out) if out.status.success() => (
            true,
            "bubblewrap: pid, ipc, uts, cgroup and network namespaces per pod sandbox".to_owned(),
        ),
        Ok(out) => (
            false,
            format!(
                "bwrap cannot create namespaces here ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ),
        Err(e) => (false, format!("bwrap not usable: {e}")),
    }
}

/// The interpreter behind `python` (a PATH name may be a shim that only works
/// with the service's environment, e.g. pyenv's).
fn resolve_python(python: &str) -> String {
    let out = std::process::Command::new(python)
        .args(["-c", "import sys; print(sys.executable)"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match out {
        Ok(out) if out.status.success() => {
            let exe = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if exe.starts_with('/') {
                return exe;
            }
            python.to_owned()
        }
        _ => {
            tracing::warn!(%python, "python interpreter not usable; dependency installs will fail");
            python.to_owned()
        }
    }
}

/// A pod id becomes a directory and a cgroup name.
fn check_pod_id(pod_id: &str) -> Result<(), Error> {
    let ok = !pod_id.is_empty()
        && pod_id.len() <= 64
        && pod_id != "."
        && pod_id != ".."
        && pod_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Error::StartFailed(format!("invalid pod id `{pod_id}`")))
    }
}

impl Drop for Inner {
    /// The scope's cgroups go with the runtime, as the pods directory's lock
    /// does (a scope is a hash of that directory, so a scope left behind
    /// by a runtime on a temporary directory would never be used again).
    fn drop(&mut self) {
        self.cgroups.remove_scope();
    }
}

impl Inner {
    fn pod_dir(&self, pod_id: &str) -> PathBuf {
        self.pods_dir.join(pod_id)
    }

    async fn start(self: &Arc<Self>, spec: PodSpec) -> Result<Pod, Error> {
        check_pod_id(&spec.pod_id)?;
        let pod_id = spec.pod_id.clone();
        if lock(&self.pods).contains_key(&pod_id) {
            return Err(Error::StartFailed(format!("pod {pod_id} already exists")));
        }
        let dir = self.pod_dir(&pod_id);
        let socket = dir.join("agent.sock");
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(Error::StartFailed(format!(
                "pod {pod_id}: the agent socket {} is longer than the {MAX_SOCKET_PATH} bytes \
                 a unix socket path may have; use a shorter state_dir",
                socket.display()
            )));
        }
        let prepared = self.prepare(&spec, &dir);
        let child = match prepared.and_then(|cmd| self.spawn_agent(cmd, &dir)) {
            Ok(child) => child,
            Err(e) => {
                self.cleanup(&pod_id).await;
                return Err(Error::StartFailed(format!("pod {pod_id}: {e}")));
            }
        };

        let state = Arc::new(PodState::default());
        let (stop_tx, stop_rx) = oneshot::channel();
        let watcher = tokio::spawn(watch(
            Arc::downgrade(self),
            pod_id.clone(),
            child,
            stop_rx,
            Arc::clone(&state),
        ));
        lock(&self.pods).insert(
            pod_id.clone(),
            PodHandle {
                state: Arc::clone(&state),
                stop: Some(stop_tx),
                watcher,
            },
        );

        let address = unix_address(&socket);
        let now = Instant::now();
        let deadline = now.checked_add(self.cfg.start_timeout).unwrap_or(now);
        let why = loop {
            match client::ping(&address, None, self.epoch.load(Ordering::SeqCst)).await {
                Ok(Frame::Pong { .. }) => {
                    state.started.store(true, Ordering::SeqCst);
                    return Ok(Pod {
                        pod_id,
                        address,
                        peer_host: "127.0.0.1".to_owned(),
                        token: None,
                    });
                }
                Ok(other) => break format!("agent answered the ping with {other:?}"),
                Err(_) if state.exited.load(Ordering::SeqCst) => {
                    break "the agent exited during start".to_owned();
                }
                Err(e) if Instant::now() >= deadline => {
                    break format!(
                        "the agent did not answer within {:?}: {e}",
                        self.cfg.start_timeout
                    );
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        };
        let log = log_tail(&dir.join("agent.log"));
        self.stop(&pod_id).await;
        Err(Error::StartFailed(format!(
            "pod {pod_id}: {why}; agent log: {log}"
        )))
    }

    /// Creates the pod's directories and cgroups; returns the agent command.
    fn prepare(&self, spec: &PodSpec, dir: &Path) -> io::Result<tokio::process::Command> {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        for sub in ["work", "io", "venvs", "tmp"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        self.cgroups.create(&spec.pod_id, &spec.profile)?;

        let mut cmd = tokio::process::Command::new(&self.cfg.agent_bin);
        cmd.arg("--listen")
            .arg(unix_address(&dir.join("agent.sock")))
            .arg("--root")
            .arg(dir)
            .arg("--sandbox")
            .arg(if self.bwrap { "bwrap" } else { "none" })
            .arg("--hide")
            .arg(&self.state_dir)
            .arg("--exit-with-parent")
            .arg("--python")
            .arg(&self.python)
            .args(self.cgroups.agent_args(&spec.pod_id));
        if spec.profile.network {
            cmd.arg("--network");
        }
        if let Some((uid, gid)) = self.run_as {
            cmd.arg("--run-as").arg(format!("{uid}:{gid}"));
        }
        if spec.profile.disk_mib > 0 {
            cmd.arg("--disk-mib").arg(spec.profile.disk_mib.to_string());
        }
        if let Some(w) = &self.cfg.wheelhouse {
            cmd.arg("--wheelhouse").arg(w);
        }
        if spec.gpu_devices.is_empty() {
            cmd.env_remove("CUDA_VISIBLE_DEVICES");
        } else {
            let devices: Vec<String> = spec.gpu_devices.iter().map(u32::to_string).collect();
            cmd.env("CUDA_VISIBLE_DEVICES", devices.join(","));
        }
        Ok(cmd)
    }

    fn spawn_agent(
        &self,
        mut cmd: tokio::process::Command,
        dir: &Path,
    ) -> io::Result<tokio::process::Child> {
        let log = std::fs::File::create(dir.join("agent.log"))?;
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(false);
        let child = cmd.spawn()?;
        if let Some(pid) = child.id() {
            std::fs::write(dir.join("agent.pid"), pid.to_string())?;
        }
        Ok(child)
    }

    /// Stops a pod: kills its agent, then everything in its cgroups, and
    /// removes its cgroups and directory.
    async fn stop(&self, pod_id: &str) {
        let handle = {
            let mut pods = lock(&self.pods);
            let handle = pods.remove(pod_id);
            if let Some(h) = &handle {
                h.state.stopping.store(true, Ordering::SeqCst);
            }
            handle
        };
        if let Some(mut handle) = handle {
            if let Some(stop) = handle.stop.take() {
                let _ = stop.send(());
            }
            let _ = handle.watcher.await;
        }
        client::forget(&unix_address(&self.pod_dir(pod_id).join("agent.sock")));
        self.cleanup(pod_id).await;
    }

    /// Removes a pod's cgroups (killing what is in them) and directory.
    async fn cleanup(&self, pod_id: &str) {
        let dirs = self.cgroups.pod_dirs(pod_id);
        let pod_dir = self.pod_dir(pod_id);
        let id = pod_id.to_owned();
        let done = tokio::task::spawn_blocking(move || remove_pod(&id, &dirs, &pod_dir)).await;
        if let Err(e) = done {
            tracing::warn!(pod_id, error = %e, "pod cleanup panicked");
        }
    }

    fn remove_orphans(&self) -> usize {
        let live: Vec<String> = lock(&self.pods).keys().cloned().collect();
        let agents = running_agents();
        let mut removed = std::collections::BTreeSet::new();
        let entries = std::fs::read_dir(&self.pods_dir)
            .into_iter()
            .flatten()
            .flatten();
        for entry in entries {
            let Ok(pod_id) = entry.file_name().into_string() else {
                continue;
            };
            if live.contains(&pod_id) {
                continue;
            }
            let dir = entry.path();
            let mut pids: Vec<u32> = agents
                .iter()
                .filter(|a| a.root == dir)
                .map(|a| a.pid)
                .collect();
            if let Some(pid) = std::fs::read_to_string(dir.join("agent.pid"))
                .ok()
                .and_then(|p| p.trim().parse::<u32>().ok())
                .filter(|pid| is_agent_of(*pid, &dir))
            {
                pids.push(pid);
            }
            kill_and_wait(&pids);
            remove_pod(&pod_id, &self.cgroups.pod_dirs(&pod_id), &dir);
            tracing::info!(pod_id, "removed an orphaned pod");
            removed.insert(pod_id);
        }
        // Cgroups whose pod directory is gone; skip those of pods another
        // runtime (another state dir) is running or just starting.
        for pod_id in self.cgroups.pod_ids() {
            if live.contains(&pod_id) || removed.contains(&pod_id) {
                continue;
            }
            if agents
                .iter()
                .any(|a| a.root.file_name().is_some_and(|n| *n == *pod_id))
            {
                continue;
            }
            let dirs = self.cgroups.pod_dirs(&pod_id);
            let young = dirs.iter().any(|d| {
                std::fs::metadata(d)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_none_or(|age| age < ORPHAN_MIN_AGE)
            });
            if young {
                continue;
            }
            if let Err(e) = cgroup::remove_dirs(&dirs) {
                tracing::warn!(pod_id, error = %e, "cannot remove an orphaned cgroup");
                continue;
            }
            tracing::info!(pod_id, "removed an orphaned cgroup");
            removed.insert(pod_id);
        }
        removed.len()
    }
}

fn remove_pod(pod_id: &str, cgroup_dirs: &[PathBuf], pod_dir: &Path) {
    if let Err(e) = cgroup::remove_dirs(cgroup_dirs) {
        tracing::warn!(pod_id, error = %e, "cannot remove the pod's cgroups");
    }
    match std::fs::remove_dir_all(pod_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(pod_id, error = %e, "cannot remove the pod directory"),
    }
}

/// Awaits the agent; on an exit nobody asked for, cleans the pod up and
/// announces it. Holds the runtime weakly: a dropped runtime (a crash, as far
/// as the pod knows) leaves the pod running, as a crash would: its agent
/// removes it when the process ends (`--exit-with-parent`), or a runtime on
/// the same directory does first (`remove_orphans`). Only a stop kills it
/// here; the stop's sender going with the runtime is no stop, as a kill then
/// would leave the pod's cgroups to nobody.
async fn watch(
    inner: Weak<Inner>,
    pod_id: String,
    mut child: tokio::process::Child,
    stop: oneshot::Receiver<()>,
    state: Arc<PodState>,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        Ok(()) = stop => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    state.exited.store(true, Ordering::SeqCst);
    let Some(inner) = inner.upgrade() else {
        return;
    };
    {
        let mut pods = lock(&inner.pods);
        if state.stopping.load(Ordering::SeqCst) {
            return;
        }
        if pods
            .get(&pod_id)
            .is_some_and(|h| Arc::ptr_eq(&h.state, &state))
        {
            pods.remove(&pod_id);
        }
    }
    if !state.started.load(Ordering::SeqCst) {
        // start() reports this itself, then cleans up.
        return;
    }
    let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
    let log = log_tail(&inner.pod_dir(&pod_id).join("agent.log"));
    inner.cleanup(&pod_id).await;
    let reason = format!("exited: agent exited ({status}); log: {log}");
    tracing::warn!(pod_id, %reason, "pod gone");
    let _ = inner.events.send(PodEvent::Gone { pod_id, reason });
}

/// The last bytes of a log file, as one line.
fn log_tail(path: &Path) -> String {
    let read = || -> io::Result<String> {
        let mut f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)))?;
        let mut buf = Vec::new();
        f.take(LOG_TAIL_BYTES).read_to_end(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).trim().replace('\n', " | "))
    };
    read().unwrap_or_else(|e| format!("<no log: {e}>"))
}

/// A running `hearth-agent` and its pod directory.
#[derive(Debug)]
struct AgentProcess {
    pid: u32,
    root: PathBuf,
}

/// The agent processes on this machine (any state dir).
fn running_agents() -> Vec<AgentProcess> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let args = cmdline(pid)?;
            if !args.first()?.contains("hearth-agent") {
                return None;
            }
            let root = args.iter().enumerate().find_map(|(i, a)| {
                a.strip_prefix("--root=")
                    .map(str::to_owned)
                    .or_else(|| (a == "--root").then(|| args.get(i + 1).cloned()).flatten())
            })?;
            Some(AgentProcess {
                pid,
                root: PathBuf::from(root),
            })
        })
        .collect()
}

fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Whether `pid` is the agent of the pod in `dir` (a pid file may be stale and
/// the pid reused by an unrelated process).
fn is_agent_of(pid: u32, dir: &Path) -> bool {
    cmdline(pid).is_some_and(|args| {
        args.iter().any(|a| a.contains("hearth-agent"))
            && args
                .iter()
                .any(|a| Path::new(a.trim_start_matches("--root=")) == dir)
    })
}

/// SIGKILLs `pids` and waits (briefly) until they are gone or zombies.
fn kill_and_wait(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    cgroup::kill_pids(pids);
    let give_up = Instant::now() + Duration::from_secs(2);
    while Instant::now() < give_up && pids.iter().any(|p| is_alive(*p)) {
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

impl Runtime for LocalRuntime {
    fn name(&self) -> &'static str {
        "local"
    }

    fn mechanisms(&self) -> Vec<Mechanism> {
        self.inner.mechanisms.clone()
    }

    fn set_epoch(&self, epoch: u64) {
        self.inner.epoch.store(epoch, Ordering::SeqCst);
    }

    fn start_pod(&self, spec: PodSpec) -> BoxFuture<'_, Result<Pod, Error>> {
        Box::pin(async move { self.inner.start(spec).await })
    }

    fn stop_pod(&self, pod_id: &str) -> BoxFuture<'_, Result<(), Error>> {
        let pod_id = pod_id.to_owned();
        Box::pin(async move {
            if check_pod_id(&pod_id).is_err() {
                return Err(Error::PodNotFound(pod_id));
            }
            self.inner.stop(&pod_id).await;
            Ok(())
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<PodEvent> {
        self.inner.events.subscribe()
    }

    /// Local pods die with the service that started them: whatever an
    /// earlier run left is removed, never adopted.
    fn adopt(
        &self,
        _profiles: Vec<Profile>,
        _claims: Vec<Claim>,
    ) -> BoxFuture<'_, Result<Adoption, Error>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            let removed = tokio::task::spawn_blocking(move || inner.remove_orphans())
                .await
                .map_err(|e| Error::Io(io::Error::other(e)))?;
            Ok(Adoption {
                removed,
                ..Adoption::default()
            })
        })
    }

    /// Removes every pod, then the scope's cgroups.
    fn shutdown(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            self.adopt(Vec::new(), Vec::new()).await?;
            self.inner.cgroups.remove_scope();
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_cgroups_go_with_the_runtime() {
        let dir = std::env::temp_dir().join(format!("hearth-scope-{}", std::process::id()));
        let rt = LocalRuntime::new(LocalConfig::new(&dir, "/bin/sh")).unwrap();
        let parents: Vec<PathBuf> = rt.inner.cgroups.scope_dirs().into_iter().cloned().collect();
        if rt.inner.cgroups.is_empty() {
            eprintln!("skipped: this machine gives the runtime no cgroups");
        } else {
            // No scope without pods: a runtime that never starts one (a
            // follower replica) leaves none, even if killed.
            assert!(parents.iter().all(|p| !p.exists()), "a scope without pods");
            // The first pod makes it, set up as detection set it up.
            let profile = hearth_core::Profile::cpu("t");
            rt.inner.cgroups.create("p1", &profile).unwrap();
            let made: Vec<&PathBuf> = parents.iter().collect();
            assert!(made.iter().all(|p| p.join("p1").is_dir()));
            for p in made.iter().filter(|p| p.join("cpu.shares").exists()) {
                let shares = std::fs::read_to_string(p.join("cpu.shares")).unwrap();
                let cpus = std::thread::available_parallelism().unwrap().get() as u64;
                assert_eq!(shares.trim().parse::<u64>().unwrap(), 1024 * cpus);
            }
            // A pod's cgroup keeps its scope; once it is gone, so is the scope.
            let kept = rt.clone();
            drop(rt);
            assert!(
                made.iter().all(|p| p.is_dir()),
                "dropped while a runtime lives"
            );
            drop(kept);
            assert!(
                made.iter().all(|p| p.is_dir()),
                "a scope holding a pod stays"
            );
            for p in &made {
                std::fs::remove_dir(p.join("p1")).unwrap();
            }
            let again = LocalRuntime::new(LocalConfig::new(&dir, "/bin/sh")).unwrap();
            drop(again);
            for p in &made {
                assert!(!p.exists(), "{} left behind", p.display());
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_shut_down_runtime_leaves_no_scope() {
        let dir = std::env::temp_dir().join(format!("hearth-shut-{}", std::process::id()));
        let rt = LocalRuntime::new(LocalConfig::new(&dir, "/bin/sh")).unwrap();
        let parents: Vec<PathBuf> = rt.inner.cgroups.scope_dirs().into_iter().cloned().collect();
        rt.inner.cgroups.ensure_scope().unwrap();
        // Held by a clone (as the service's tasks hold it) through the
        // shutdown: the scope goes with its pods all the same.
        let kept = rt.clone();
        rt.shutdown().await.unwrap();
        for p in &parents {
            assert!(!p.exists(), "{} left behind", p.display());
        }
        drop(kept);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn too_long_socket_paths_fail_clearly() {
        let long = std::env::temp_dir().join("x".repeat(90));
        let rt = LocalRuntime::new(LocalConfig::new(&long, "/bin/sh")).unwrap();
        let spec = PodSpec {
            pod_id: "p".repeat(20),
            profile: hearth_core::Profile::cpu("t"),
            gpu_devices: Vec::new(),
            labels: Default::default(),
        };
        let err = rt.start_pod(spec).await.unwrap_err().to_string();
        assert!(err.contains("shorter state_dir"), "{err}");
        std::fs::remove_dir_all(&long).unwrap();
    }

    #[test]
    fn pod_ids_must_be_plain_names() {
        for ok in ["p1", "pool-a.3_x", "0193ab"] {
            assert!(check_pod_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "../x", &"x".repeat(65)] {
            assert!(check_pod_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn log_tail_quotes_the_end_on_one_line() {
        let path = std::env::temp_dir().join(format!("hearth-logtail-{}", std::process::id()));
        std::fs::write(&path, format!("{}\nlast line\n", "x".repeat(5000))).unwrap();
        let tail = log_tail(&path);
        assert!(tail.ends_with(" | last line"));
        assert!(tail.len() <= LOG_TAIL_BYTES as usize + 2);
        std::fs::remove_file(&path).unwrap();
        assert!(log_tail(&path).starts_with("<no log"));
    }
}
