//! How a process of a job is started and killed: the pod directory layout, the
//! bubblewrap command line (or none), the pod's cgroups, resident sandboxes
//! ([`crate::resident`]) and killing a whole process tree. Everything a job or
//! a dependency install runs is started by [`Sandbox::command`] or inside a
//! sandbox from [`Sandbox::prepare`], and ended by [`Sandbox::kill_tree`] or
//! by ending its sandbox. The agent binary doubles as the cgroup launcher.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc::{self, Sender};
use std::time::{Duration, Instant};

use crate::args::{Args, SandboxKind};
use crate::resident::{Resident, SERVE_JOBS};

/// First argument that turns the agent binary into the small launcher that
/// joins the pod's cgroups and then execs the job (so the job is limited from
/// its first instruction, with no race against its first fork). With
/// `--slirp`, it stays as the sandbox's parent instead, to give the
/// sandbox's network namespace a user-mode network for as long as it lives.
pub const ENTER_CGROUPS: &str = "enter-cgroups";

/// First argument that turns the agent binary into the remover an orphaned
/// agent leaves behind (`remove-cgroups <agent pid> <pods dir> <cgroup
/// dir>...`): it waits for the agent to end, then removes the pod's cgroups
/// and the service's scope. A v1 cgroup cannot be removed while a zombie is
/// in it: what the agent killed on its way out is its zombie until it ends,
/// and what was orphaned before is init's, which may reap only every few
/// seconds (this machine's init: every 2 s).
pub const REMOVE_CGROUPS: &str = "remove-cgroups";

/// How long the remover waits for the agent to end, and then for the
/// cgroups to empty.
const REMOVER_WAIT: Duration = Duration::from_secs(10);

/// First argument of the launcher inside bubblewrap: waits for the sandbox's
/// network if asked, drops to the unprivileged user, then execs the job.
pub const IN_SANDBOX: &str = "in-sandbox";

/// slirp4netns's own DNS forwarder, as seen from the sandbox.
const SLIRP_DNS: &str = "10.0.2.3";
/// How long the launcher inside waits for slirp4netns to configure the
/// sandbox's network before giving up.
const NETWORK_WAIT: Duration = Duration::from_secs(10);

/// Where the agent binary is bound inside bubblewrap (for the supervisor).
const AGENT_INSIDE: &str = "/.hearth-agent";

/// A standard PATH appended after the venv and the interpreter's directory.
const STANDARD_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Host paths of the pod directory.
#[derive(Debug, Clone)]
pub struct Layout {
    pub work: PathBuf,
    pub io: PathBuf,
    pub venvs: PathBuf,
    pub tmp: PathBuf,
}

impl Layout {
    pub fn new(root: &Path) -> Self {
        Layout {
            work: root.join("work"),
            io: root.join("io"),
            venvs: root.join("venvs"),
            tmp: root.join("tmp"),
        }
    }

    /// The directories jobs write to, in the order `wipe` clears them.
    pub fn job_dirs(&self) -> [&Path; 4] {
        [&self.work, &self.io, &self.venvs, &self.tmp]
    }

    pub fn create(&self) -> io::Result<()> {
        for dir in self.job_dirs() {
            std::fs::create_dir_all(dir)?;
        }
        Ok(())
    }
}

/// The pod layout as a job sees it (inside bubblewrap, or the host paths).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inside {
    pub work: PathBuf,
    pub io: PathBuf,
    pub venvs: PathBuf,
    pub tmp: PathBuf,
    pub wheelhouse: Option<PathBuf>,
}

impl Inside {
    pub fn input(&self) -> PathBuf {
        self.io.join("input.json")
    }
    pub fn output(&self) -> PathBuf {
        self.io.join("output.json")
    }
}

/// One entry of the host's `/`, re-created on bubblewrap's root.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RootEntry {
    Bind(PathBuf),
    Symlink { target: PathBuf, path: PathBuf },
}

/// Names under `/` that the sandbox provides itself. `/run` is the host's
/// runtime directory: its sockets (PostgreSQL's, Docker's, D-Bus's) accept
/// connections through a read-only bind, so it is never shown.
const OWN_ROOT_NAMES: [&str; 8] = [
    "proc",
    "dev",
    "tmp",
    "run",
    "work",
    "hearth",
    "venvs",
    "wheelhouse",
];

/// The pod's cgroup directories, as given by the runtime.
#[derive(Debug, Clone, Default)]
pub struct Cgroups {
    dirs: Vec<PathBuf>,
    /// v2 only: `cgroup.kill`.
    kill_file: Option<PathBuf>,
}

impl Cgroups {
    pub fn new(v1: &[(String, PathBuf)], v2: Option<&Path>) -> Self {
        let mut dirs: Vec<PathBuf> = v1.iter().map(|(_, dir)| dir.clone()).collect();
        dirs.extend(v2.map(Path::to_owned));
        Cgroups::of_dirs(dirs)
    }

    /// The cgroups at `dirs`, of either version (only v2 has `cgroup.kill`).
    fn of_dirs(dirs: Vec<PathBuf>) -> Self {
        let kill_file = dirs
            .iter()
            .map(|d| d.join("cgroup.kill"))
            .find(|f| f.exists());
        Cgroups { dirs, kill_file }
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    fn procs_files(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.dirs.iter().map(|d| d.join("cgroup.procs"))
    }

    /// Live (non-zombie) processes in any of the pod's cgroups.
    pub fn live_pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .procs_files()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .flat_map(|text| {
                text.lines()
                    .filter_map(|l| l.trim().parse::<u32>().ok())
                    .collect::<Vec<_>>()
            })
            .filter(|pid| !is_zombie(*pid))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Kills every process in the pod's cgroups, repeating until none is left
    /// (processes may fork while being killed) or two seconds pass.
    pub fn kill_all(&self) {
        if self.dirs.is_empty() {
            return;
        }
        if let Some(file) = &self.kill_file {
            let _ = std::fs::write(file, "1");
        }
        let give_up = Instant::now() + Duration::from_secs(2);
        loop {
            let pids = self.live_pids();
            if pids.is_empty() {
                return;
            }
            if Instant::now() > give_up {
                eprintln!("hearth-agent: processes survive in the pod cgroups: {pids:?}");
                return;
            }
            kill_pids(pids.iter().map(u32::to_string));
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Cgroups {
    /// After [`Cgroups::remove`], for an agent whose service is gone: the
    /// service's scope (the parent of the pod's cgroups) goes too when no
    /// service holds `pods_dir` (its lock, `<pods_dir>.lock`, is free or
    /// gone with the state directory) and no other pod is left in it, so a
    /// service that ended without stopping its pods (a test's, a killed
    /// one) leaves no cgroups behind. The lock is held while removing, so a
    /// service starting on the same directory meanwhile finds its scope as
    /// it made it. Other agents of the same service may hold the lock for a
    /// moment as they do the same: it is tried for up to half a second.
    pub fn remove_scope(&self, pods_dir: &Path) {
        let _held = match std::fs::File::open(hearth_core::agent::pods_lock(pods_dir)) {
            Ok(lock) => {
                let give_up = Instant::now() + Duration::from_millis(500);
                loop {
                    match lock.try_lock_shared() {
                        Ok(()) => break Some(lock),
                        Err(std::fs::TryLockError::WouldBlock) if Instant::now() < give_up => {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        // Held by a service (or unlockable): its scope.
                        Err(_) => return,
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(_) => return,
        };
        for scope in self.dirs.iter().filter_map(|d| d.parent()) {
            // Fails while another pod's cgroup is in it: the last one's
            // agent removes it.
            let _ = std::fs::remove_dir(scope);
        }
    }

    /// For an agent whose service is gone (nobody else will): has the pod's
    /// cgroups and then the service's scope ([`Cgroups::remove_scope`])
    /// removed once this agent has ended, by the remover
    /// ([`REMOVE_CGROUPS`]) started from `agent_exe`; removes them here if
    /// it cannot be started.
    pub fn remove_after_exit(&self, agent_exe: &Path, pods_dir: &Path) {
        if self.dirs.is_empty() {
            return;
        }
        let remover = Command::new(agent_exe)
            .arg(REMOVE_CGROUPS)
            .arg(std::process::id().to_string())
            .arg(pods_dir)
            .args(&self.dirs)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn();
        if let Err(e) = remover {
            eprintln!("hearth-agent: cannot start the cgroup remover: {e}");
            self.remove(Duration::from_secs(1));
            self.remove_scope(pods_dir);
        }
    }

    /// Kills what is left and removes the pod's cgroups, trying for at most
    /// `limit` while zombies keep them.
    pub fn remove(&self, limit: Duration) {
        self.kill_all();
        let give_up = Instant::now() + limit;
        for dir in &self.dirs {
            while let Err(e) = std::fs::remove_dir(dir) {
                if e.kind() == io::ErrorKind::NotFound || Instant::now() > give_up {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}

fn is_zombie(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

/// Sends SIGKILL with the system `kill` (std cannot signal a pid it did not
/// spawn). Targets starting with `-` are process groups.
pub fn kill_pids<I: IntoIterator<Item = String>>(targets: I) {
    let targets: Vec<String> = targets.into_iter().collect();
    if targets.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg("-9")
        .arg("--")
        .args(&targets)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Starts processes from one thread that lives as long as the agent.
/// bubblewrap's `--die-with-parent` (`PR_SET_PDEATHSIG`) fires when the
/// *thread* that forked it ends, and connection threads end all the time:
/// a sandbox built ahead by one would be killed under the next job.
#[derive(Debug)]
struct Spawner {
    requests: Sender<(Command, Sender<io::Result<Child>>)>,
}

impl Spawner {
    fn new() -> io::Result<Self> {
        let (requests, incoming) = mpsc::channel::<(Command, Sender<io::Result<Child>>)>();
        std::thread::Builder::new()
            .name("spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in incoming {
                    let _ = reply.send(cmd.spawn());
                }
            })?;
        Ok(Spawner { requests })
    }

    fn spawn(&self, cmd: Command) -> io::Result<Child> {
        let gone = || io::Error::other("the spawner thread is gone");
        let (reply, answer) = mpsc::channel();
        self.requests.send((cmd, reply)).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }
}

/// Starts and kills the processes of jobs.
#[derive(Debug)]
pub struct Sandbox {
    spawner: Spawner,
    kind: SandboxKind,
    network: bool,
    hide: Vec<PathBuf>,
    run_as: Option<(u32, u32)>,
    /// slirp4netns, for sandboxes with network.
    slirp: Option<PathBuf>,
    /// iproute2's `ip`, with which the launcher inside a sandbox with network
    /// makes the host's own addresses unreachable before the job starts.
    /// Only where the job then runs as another user (which clears the
    /// capability that takes): otherwise the job could undo it.
    ip: Option<PathBuf>,
    /// A `resolv.conf` naming slirp4netns's DNS, bound over the host's.
    resolv_conf: Option<PathBuf>,
    wheelhouse: Option<PathBuf>,
    bwrap: PathBuf,
    agent_exe: PathBuf,
    root_entries: Vec<RootEntry>,
    gpu_devices: Vec<PathBuf>,
    cgroups: Cgroups,
}

impl Sandbox {
    pub fn new(args: &Args) -> io::Result<Self> {
        let (bwrap, root_entries) = match args.sandbox {
            SandboxKind::Bwrap => (
                find_in_path("bwrap").ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "bwrap is not on PATH")
                })?,
                root_entries()?,
            ),
            SandboxKind::None => (PathBuf::new(), Vec::new()),
        };
        let cgroups = Cgroups::new(&args.cgroup_v1, args.cgroup_v2.as_deref());
        let (slirp, resolv_conf) = if args.sandbox == SandboxKind::Bwrap && args.network {
            let slirp = find_in_path("slirp4netns").ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "slirp4netns is not on PATH (profiles with network need it)",
                )
            })?;
            let resolv_conf = Path::new("/etc/resolv.conf").is_file().then(|| {
                let path = args.root.join("resolv.conf");
                std::fs::write(&path, format!("nameserver {SLIRP_DNS}\n")).map(|()| path)
            });
            (Some(slirp), resolv_conf.transpose()?)
        } else {
            (None, None)
        };
        let ip = if slirp.is_some() && args.run_as.is_some() {
            let sbin = hearth_core::net::IP_FALLBACKS.map(PathBuf::from);
            let ip = find_in_path("ip").or_else(|| sbin.into_iter().find(|p| p.is_file()));
            let ip = ip.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "ip (iproute2) is not on PATH (profiles with network need it)",
                )
            })?;
            // The real file, which the sandbox sees at the same path.
            Some(ip.canonicalize()?)
        } else {
            None
        };
        Ok(Sandbox {
            spawner: Spawner::new()?,
            kind: args.sandbox,
            network: args.network,
            hide: args.hide.clone(),
            run_as: args.run_as,
            slirp,
            ip,
            resolv_conf,
            wheelhouse: args.wheelhouse.clone(),
            bwrap,
            agent_exe: std::env::current_exe()?,
            root_entries,
            gpu_devices: gpu_devices(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()),
            cgroups,
        })
    }

    pub fn kind(&self) -> SandboxKind {
        self.kind
    }

    pub fn network(&self) -> bool {
        self.network
    }

    /// Hands a file or directory the agent made to the user jobs run as.
    pub fn give(&self, path: &Path) -> io::Result<()> {
        match self.run_as {
            Some((uid, gid)) => std::os::unix::fs::chown(path, Some(uid), Some(gid)),
            None => Ok(()),
        }
    }

    /// The pod layout as jobs see it.
    pub fn inside(&self, layout: &Layout) -> Inside {
        match self.kind {
            SandboxKind::Bwrap => Inside {
                work: "/work".into(),
                io: "/hearth".into(),
                venvs: "/venvs".into(),
                tmp: "/tmp".into(),
                wheelhouse: self.wheelhouse.as_ref().map(|_| "/wheelhouse".into()),
            },
            SandboxKind::None => Inside {
                work: layout.work.clone(),
                io: layout.io.clone(),
                venvs: layout.venvs.clone(),
                tmp: layout.tmp.clone(),
                wheelhouse: self.wheelhouse.clone(),
            },
        }
    }

    /// A command that runs `argv` in the sandbox with exactly `env`, its
    /// working directory the pod's work dir, inside the pod's cgroups.
    pub fn command(
        &self,
        layout: &Layout,
        argv: &[String],
        env: &BTreeMap<String, String>,
    ) -> io::Result<Command> {
        let Some((program, rest)) = argv.split_first() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
        };
        let (program, mut args): (PathBuf, Vec<OsString>) = match self.kind {
            SandboxKind::Bwrap => {
                let mut args = self.bwrap_args(layout);
                args.extend(["--".into(), AGENT_INSIDE.into(), IN_SANDBOX.into()]);
                if let Some((uid, gid)) = self.run_as {
                    args.extend(["--user".into(), format!("{uid}:{gid}").into()]);
                }
                if self.slirp.is_some() {
                    args.push("--wait-network".into());
                }
                if let Some(ip) = &self.ip {
                    args.extend(["--ip".into(), ip.into()]);
                    for addr in host_addresses() {
                        args.extend(["--unreachable".into(), addr.to_string().into()]);
                    }
                }
                args.push("--".into());
                args.extend(argv.iter().map(OsString::from));
                (self.bwrap.clone(), args)
            }
            SandboxKind::None => (program.into(), rest.iter().map(OsString::from).collect()),
        };
        let program = if self.cgroups.is_empty() && self.slirp.is_none() {
            program
        } else {
            let mut wrapped: Vec<OsString> = vec![ENTER_CGROUPS.into()];
            if let Some(slirp) = &self.slirp {
                wrapped.extend(["--slirp".into(), slirp.into()]);
            }
            wrapped.extend(self.cgroups.procs_files().map(OsString::from));
            wrapped.push("--".into());
            wrapped.push(program.into_os_string());
            wrapped.append(&mut args);
            args = wrapped;
            self.agent_exe.clone()
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(env)
            .current_dir(&layout.work);
        if self.uses_process_group() {
            cmd.process_group(0);
        }
        if let (SandboxKind::None, Some((uid, gid))) = (self.kind, self.run_as) {
            cmd.uid(uid).gid(gid);
        }
        Ok(cmd)
    }

    /// Starts a command made by [`Sandbox::command`]; every sandbox process
    /// must be started here (see [`Spawner`]).
    pub fn spawn(&self, cmd: Command) -> io::Result<Child> {
        self.spawner.spawn(cmd)
    }

    /// Builds a resident sandbox (bubblewrap only): the supervisor that runs
    /// the pod's jobs one after another, with the isolation of
    /// [`Sandbox::command`].
    pub fn prepare(&self, layout: &Layout) -> io::Result<Resident> {
        if self.kind != SandboxKind::Bwrap {
            return Err(io::Error::other("resident sandboxes need bubblewrap"));
        }
        let argv = [AGENT_INSIDE.to_owned(), SERVE_JOBS.to_owned()];
        let mut cmd = self.command(layout, &argv, &BTreeMap::new())?;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        Resident::new(self.spawn(cmd)?)
    }

    /// Without bubblewrap's pid namespace or a cgroup, the process group is
    /// the only handle on the tree.
    fn uses_process_group(&self) -> bool {
        self.kind == SandboxKind::None && self.cgroups.is_empty()
    }

    /// The bubblewrap options (everything before `--`).
    fn bwrap_args(&self, layout: &Layout) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::with_capacity(64);
        let mut push = |items: &[&dyn AsRef<std::ffi::OsStr>]| {
            a.extend(items.iter().map(|i| i.as_ref().to_owned()));
        };
        // Every sandbox has a network namespace of its own, with network or
        // without: the host's loopback services and abstract unix sockets
        // live in the host's. slirp4netns gives one network from outside.
        push(&[
            &"--die-with-parent",
            &"--unshare-pid",
            &"--unshare-ipc",
            &"--unshare-uts",
            &"--unshare-net",
            &"--unshare-cgroup-try",
        ]);
        // bwrap's root is a tmpfs; the host's top-level entries are bound onto
        // it read-only, so the pod's own mount points (/work, /hearth, /venvs)
        // can be created even though the host has no such directories.
        for entry in &self.root_entries {
            match entry {
                RootEntry::Bind(path) => push(&[&"--ro-bind", path, path]),
                RootEntry::Symlink { target, path } => push(&[&"--symlink", target, path]),
            }
        }
        push(&[
            &"--dev",
            &"/dev",
            &"--perms",
            &"1777",
            &"--tmpfs",
            &"/dev/shm",
        ]);
        for dev in &self.gpu_devices {
            push(&[&"--dev-bind", dev, dev]);
        }
        push(&[
            &"--proc", &"/proc", &"--perms", &"1777", &"--tmpfs", &"/tmp", &"--tmpfs", &"/run",
        ]);
        // The host's other scratch and runtime directories, if they are
        // directories of their own (on most systems /var/run links to /run).
        for (dir, perms) in [("/var/run", "0755"), ("/var/tmp", "1777")] {
            if self
                .root_entries
                .iter()
                .any(|e| root_entry_path(e) == Path::new("/var"))
                && std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir())
            {
                push(&[&"--perms", &perms, &"--tmpfs", &dir]);
            }
        }
        if let Some(resolv_conf) = &self.resolv_conf {
            push(&[&"--ro-bind", resolv_conf, &"/etc/resolv.conf"]);
        }
        for path in &self.hide {
            if path.exists() || path.starts_with("/tmp") {
                push(&[&"--tmpfs", path]);
            }
        }
        push(&[
            &"--bind",
            &layout.work,
            &"/work",
            &"--bind",
            &layout.io,
            &"/hearth",
            &"--bind",
            &layout.venvs,
            &"/venvs",
        ]);
        if let Some(dir) = &self.wheelhouse {
            push(&[&"--ro-bind", dir, &"/wheelhouse"]);
        }
        push(&[&"--ro-bind", &self.agent_exe, &AGENT_INSIDE]);
        push(&[
            &"--remount-ro",
            &"/",
            &"--chdir",
            &"/work",
            &"--hostname",
            &"hearth-pod",
            &"--new-session",
            &"--cap-drop",
            &"ALL",
        ]);
        if self.run_as.is_some() {
            // Only for the launcher inside to become the job's user; that
            // clears every capability, and bubblewrap's no_new_privs keeps
            // setuid binaries from bringing any back.
            push(&[&"--cap-add", &"CAP_SETUID", &"--cap-add", &"CAP_SETGID"]);
        }
        if self.ip.is_some() {
            // Only for the launcher to set the routes; becoming the job's
            // user clears it with the others.
            push(&[&"--cap-add", &"CAP_NET_ADMIN"]);
        }
        a
    }

    /// Whether each job has a pid namespace of its own. Its end then kills
    /// every process the job left, and nothing else: the pod's cgroups need
    /// no sweep, so the next job's sandbox can be built while a job runs.
    pub fn has_pid_namespace(&self) -> bool {
        self.kind == SandboxKind::Bwrap
    }

    /// Kills the whole tree of `child` and reaps it.
    pub fn kill_tree(&self, child: &mut Child) {
        // Killing bwrap ends its pid namespace, and with it every process of
        // the job; without one, the cgroup sweep catches the tree.
        let _ = child.kill();
        if self.uses_process_group() {
            kill_pids([format!("-{}", child.id())]);
        }
        let _ = child.wait();
        if !self.has_pid_namespace() {
            self.cgroups.kill_all();
        }
    }

    /// After the main process exited by itself: kills what it left behind
    /// (in a pid namespace, the kernel already did when its first process
    /// ended).
    pub fn kill_leftovers(&self, pid: u32) {
        if self.uses_process_group() {
            kill_pids([format!("-{pid}")]);
        }
        if !self.has_pid_namespace() {
            self.cgroups.kill_all();
        }
    }

    pub fn cgroups(&self) -> &Cgroups {
        &self.cgroups
    }

    /// This agent's binary.
    pub fn agent_exe(&self) -> &Path {
        &self.agent_exe
    }

    /// Kills the trees of the given job pids without owning their `Child`
    /// (used when the agent exits).
    pub fn kill_pids_and_trees(&self, pids: &[u32]) {
        let mut targets: Vec<String> = pids.iter().map(u32::to_string).collect();
        if self.uses_process_group() {
            targets.extend(pids.iter().map(|p| format!("-{p}")));
        }
        kill_pids(targets);
        self.cgroups.kill_all();
    }
}

/// The exit code a shell would report: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> Option<i32> {
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

fn root_entries() -> io::Result<Vec<RootEntry>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir("/")? {
        let entry = entry?;
        let name = entry.file_name();
        if OWN_ROOT_NAMES.iter().any(|own| name == *own) {
            continue;
        }
        let path = Path::new("/").join(&name);
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            entries.push(RootEntry::Symlink {
                target: std::fs::read_link(&path)?,
                path,
            });
        } else if kind.is_dir() || kind.is_file() {
            entries.push(RootEntry::Bind(path));
        }
    }
    entries.sort_by(|a, b| root_entry_path(a).cmp(root_entry_path(b)));
    Ok(entries)
}

fn root_entry_path(e: &RootEntry) -> &Path {
    match e {
        RootEntry::Bind(path) | RootEntry::Symlink { path, .. } => path,
    }
}

/// NVIDIA device nodes a job needs for the GPUs in `CUDA_VISIBLE_DEVICES`
/// (bwrap's `/dev` holds none by default).
fn gpu_devices(visible: Option<&str>) -> Vec<PathBuf> {
    let Some(visible) = visible.filter(|v| !v.trim().is_empty()) else {
        return Vec::new();
    };
    let mut devices: Vec<PathBuf> = [
        "nvidiactl",
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia-modeset",
    ]
    .iter()
    .map(|n| Path::new("/dev").join(n))
    .collect();
    devices.extend(
        visible
            .split(',')
            .filter_map(|i| i.trim().parse::<u32>().ok())
            .map(|i| PathBuf::from(format!("/dev/nvidia{i}"))),
    );
    devices.retain(|d| d.exists());
    devices
}

/// Looks a program up on the agent's PATH.
pub fn find_in_path(program: &str) -> Option<PathBuf> {
    find_in(program, &std::env::var_os("PATH")?)
}

/// Looks a program up on `path` as `execvp` would: a name with a slash is
/// itself, otherwise the first executable file of that name in `path`'s
/// directories.
pub fn find_in(program: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The job's PATH: the venv's scripts, the interpreter's directory, then the
/// standard directories.
pub fn job_path(venv_bin: Option<&Path>, python: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(bin) = venv_bin {
        parts.push(bin.display().to_string());
    }
    if let Some(dir) = python.parent().filter(|d| !d.as_os_str().is_empty()) {
        let dir = dir.display().to_string();
        if !STANDARD_PATH.split(':').any(|d| d == dir) {
            parts.push(dir);
        }
    }
    parts.push(STANDARD_PATH.to_owned());
    parts.join(":")
}

/// The launcher mode: `hearth-agent enter-cgroups [--slirp PATH]
/// PROCS_FILE... -- PROGRAM ARGS...`. Moves itself into each cgroup, then
/// becomes `PROGRAM`; with `--slirp`, starts `PROGRAM` (bubblewrap) as its
/// child instead, connects slirp4netns to the sandbox's network namespace,
/// and exits with the sandbox's status.
pub fn enter_cgroups_and_exec(argv: &[String]) -> ExitCode {
    let Some(split) = argv.iter().position(|a| a == "--") else {
        eprintln!("hearth-agent {ENTER_CGROUPS}: missing `--`");
        return ExitCode::from(126);
    };
    let (mut files, command) = (&argv[..split], &argv[split + 1..]);
    let mut slirp = None;
    if let [flag, path, rest @ ..] = files
        && flag == "--slirp"
    {
        slirp = Some(path);
        files = rest;
    }
    for file in files {
        // "0" moves the writing process (v1 and v2 alike).
        if let Err(e) = std::fs::write(file, "0") {
            eprintln!("hearth-agent: cannot join cgroup {file}: {e}");
            return ExitCode::from(126);
        }
    }
    let Some((program, args)) = command.split_first() else {
        eprintln!("hearth-agent {ENTER_CGROUPS}: empty command");
        return ExitCode::from(126);
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    match slirp {
        Some(slirp) => run_with_network(cmd, slirp),
        None => exec(cmd, program),
    }
}

/// The remover's main ([`REMOVE_CGROUPS`]): waits for the agent `pid` to end
/// (at most [`REMOVER_WAIT`]), then removes the cgroups and their scope.
pub fn remove_cgroups_after(args: &[String]) -> ExitCode {
    let (Some(pid), Some(pods_dir)) = (
        args.first().and_then(|p| p.parse::<u32>().ok()),
        args.get(1),
    ) else {
        eprintln!("hearth-agent {REMOVE_CGROUPS}: <agent pid> <pods dir> <cgroup dir>...");
        return ExitCode::from(2);
    };
    let give_up = Instant::now() + REMOVER_WAIT;
    // Its zombies go to init only once it is a zombie itself (or gone).
    while !is_zombie(pid) && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
    }
    let cgroups = Cgroups::of_dirs(args[2..].iter().map(PathBuf::from).collect());
    cgroups.remove(REMOVER_WAIT);
    cgroups.remove_scope(Path::new(pods_dir));
    ExitCode::SUCCESS
}

/// Replaces this process with `cmd`; returns only on failure, as a shell would.
fn exec(mut cmd: Command, program: &str) -> ExitCode {
    let err = cmd.exec();
    eprintln!("hearth-agent: cannot run {program}: {err}");
    ExitCode::from(if err.kind() == io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

/// Runs the sandbox `cmd` with slirp4netns serving its network namespace.
/// slirp4netns reads its exit pipe from its stdin: it ends when this
/// launcher does, however it ends (a SIGKILL from the agent included).
fn run_with_network(mut cmd: Command, slirp: &str) -> ExitCode {
    let mut sandbox = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("hearth-agent: cannot start the sandbox: {e}");
            return ExitCode::from(126);
        }
    };
    // bubblewrap creates the namespaces with its first child, which sets up
    // the namespace's loopback and then forks the command: slirp4netns may
    // only configure the namespace after that (the two would race on it).
    let give_up = Instant::now() + NETWORK_WAIT;
    let inner = loop {
        if let Some(pid) = first_child(sandbox.id()).filter(|&pid| first_child(pid).is_some()) {
            break Some(pid);
        }
        if Instant::now() > give_up || !matches!(sandbox.try_wait(), Ok(None)) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let network = inner.map(|pid| {
        Command::new(slirp)
            .args(["--configure", "--mtu=65520", "--disable-host-loopback"])
            .args(["--enable-sandbox", "--enable-seccomp", "--exit-fd=0"])
            .arg(pid.to_string())
            .arg("tap0")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
    });
    match &network {
        Some(Ok(_)) => {}
        Some(Err(e)) => eprintln!("hearth-agent: cannot start {slirp}: {e}"),
        None => eprintln!("hearth-agent: the sandbox's namespaces did not appear"),
    }
    let status = sandbox.wait();
    if let Some(Ok(mut slirp)) = network {
        drop(slirp.stdin.take());
        let _ = slirp.kill();
        let _ = slirp.wait();
    }
    match status {
        Ok(status) => ExitCode::from(exit_code(status).map_or(126, |c| c.clamp(0, 255) as u8)),
        Err(_) => ExitCode::from(126),
    }
}

/// Makes each of `addrs` unreachable from this network namespace, with one
/// `ip -batch` run: a route more specific than the default one that
/// slirp4netns set, answering `EHOSTUNREACH` at once.
fn block_routes(ip: &str, addrs: &[std::net::Ipv4Addr]) -> io::Result<()> {
    use std::io::Write as _;
    let mut child = Command::new(ip)
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let batch: String = addrs
        .iter()
        .map(|a| format!("route add unreachable {a}/32\n"))
        .collect();
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(batch.as_bytes())?;
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{ip} -batch: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The host's own IPv4 addresses outside `127.0.0.0/8` (which, inside a
/// sandbox, is its own loopback): where services bound to all addresses
/// listen, and what slirp4netns would connect a job to. The `LOCAL` routes
/// of `/proc/net/fib_trie`; none when it cannot be read.
pub fn host_addresses() -> Vec<std::net::Ipv4Addr> {
    std::fs::read_to_string("/proc/net/fib_trie")
        .map(|trie| hearth_core::net::local_ipv4_addresses(&trie))
        .unwrap_or_default()
}

/// The first child of `pid`, from `/proc/PID/task/PID/children`.
fn first_child(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The launcher inside bubblewrap: `hearth-agent in-sandbox [--user UID:GID]
/// [--wait-network] [--ip PATH [--unreachable ADDR]...] -- PROGRAM ARGS...`.
/// Waits until slirp4netns has given the sandbox a default route, makes each
/// `ADDR` (the host's own addresses) unreachable from it, then becomes
/// `PROGRAM` as the user (which clears every capability the sandbox kept for
/// these steps, so the job cannot take the routes back).
pub fn in_sandbox_exec(argv: &[String]) -> ExitCode {
    let Some(split) = argv.iter().position(|a| a == "--") else {
        eprintln!("hearth-agent {IN_SANDBOX}: missing `--`");
        return ExitCode::from(126);
    };
    let (options, command) = (&argv[..split], &argv[split + 1..]);
    let mut user = None;
    let mut wait_network = false;
    let mut ip = None;
    let mut unreachable: Vec<std::net::Ipv4Addr> = Vec::new();
    let mut it = options.iter();
    while let Some(option) = it.next() {
        match option.as_str() {
            "--wait-network" => wait_network = true,
            "--ip" => ip = it.next(),
            "--unreachable" => match it.next().and_then(|a| a.parse().ok()) {
                Some(addr) => unreachable.push(addr),
                None => {
                    eprintln!("hearth-agent {IN_SANDBOX}: bad --unreachable");
                    return ExitCode::from(126);
                }
            },
            "--user" => {
                user = it.next().and_then(|v| {
                    let (u, g) = v.split_once(':')?;
                    Some((u.parse::<u32>().ok()?, g.parse::<u32>().ok()?))
                });
                if user.is_none() {
                    eprintln!("hearth-agent {IN_SANDBOX}: bad --user");
                    return ExitCode::from(126);
                }
            }
            other => {
                eprintln!("hearth-agent {IN_SANDBOX}: unknown option `{other}`");
                return ExitCode::from(126);
            }
        }
    }
    if wait_network && !wait_for_default_route(NETWORK_WAIT) {
        eprintln!("hearth-agent: the sandbox's network did not come up");
        return ExitCode::from(126);
    }
    if !unreachable.is_empty() {
        let Some(ip) = ip else {
            eprintln!("hearth-agent {IN_SANDBOX}: --unreachable needs --ip");
            return ExitCode::from(126);
        };
        if let Err(e) = block_routes(ip, &unreachable) {
            eprintln!("hearth-agent: cannot keep the job from the host's addresses: {e}");
            return ExitCode::from(126);
        }
    }
    let Some((program, args)) = command.split_first() else {
        eprintln!("hearth-agent {IN_SANDBOX}: empty command");
        return ExitCode::from(126);
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some((uid, gid)) = user {
        // std drops the supplementary groups first when it runs as root.
        cmd.uid(uid).gid(gid);
    }
    exec(cmd, program)
}

/// Waits until this network namespace has an IPv4 default route.
fn wait_for_default_route(limit: Duration) -> bool {
    let give_up = Instant::now() + limit;
    loop {
        let routed = std::fs::read_to_string("/proc/net/route").is_ok_and(|table| {
            table
                .lines()
                .skip(1)
                .any(|line| line.split_whitespace().nth(1) == Some("00000000"))
        });
        if routed {
            return true;
        }
        if Instant::now() > give_up {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    fn sandbox(kind: SandboxKind, network: bool) -> Sandbox {
        Sandbox {
            spawner: Spawner::new().unwrap(),
            kind,
            network,
            hide: vec!["/tmp/state/pods".into()],
            run_as: None,
            slirp: network.then(|| "/usr/bin/slirp4netns".into()),
            ip: None,
            resolv_conf: None,
            wheelhouse: Some("/srv/wheels".into()),
            bwrap: "/usr/bin/bwrap".into(),
            agent_exe: "/usr/bin/hearth-agent".into(),
            root_entries: vec![
                RootEntry::Symlink {
                    target: "usr/bin".into(),
                    path: "/bin".into(),
                },
                RootEntry::Bind("/usr".into()),
            ],
            gpu_devices: Vec::new(),
            cgroups: Cgroups::default(),
        }
    }

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn command_line(sb: &Sandbox, layout: &Layout) -> Vec<String> {
        let cmd = sb
            .command(layout, &["python3".into()], &BTreeMap::new())
            .unwrap();
        std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn every_sandbox_has_its_own_network_namespace() {
        let layout = Layout::new(Path::new("/tmp/state/pods/p1"));
        let closed = command_line(&sandbox(SandboxKind::Bwrap, false), &layout);
        assert_eq!(closed[0], "/usr/bin/bwrap");
        assert!(closed.contains(&"--unshare-net".to_owned()));
        assert!(!closed.contains(&"--wait-network".to_owned()));
        // With network: the same namespace, served by slirp4netns from the
        // launcher outside, and the job waits for it inside.
        let open = command_line(&sandbox(SandboxKind::Bwrap, true), &layout);
        assert!(open.contains(&"--unshare-net".to_owned()));
        assert_eq!(
            open[..5],
            [
                "/usr/bin/hearth-agent",
                ENTER_CGROUPS,
                "--slirp",
                "/usr/bin/slirp4netns",
                "--"
            ]
        );
        let tail = open.join(" ");
        assert!(
            tail.ends_with("-- /.hearth-agent in-sandbox --wait-network -- python3"),
            "{tail}"
        );
    }

    #[test]
    fn a_network_job_s_launcher_may_set_routes_and_nothing_else() {
        let layout = Layout::new(Path::new("/tmp/state/pods/p1"));
        let mut sb = sandbox(SandboxKind::Bwrap, true);
        sb.run_as = Some((65534, 65534));
        sb.ip = Some("/usr/sbin/ip".into());
        let line = command_line(&sb, &layout).join(" ");
        assert!(
            line.contains(
                "--cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID \
                 --cap-add CAP_NET_ADMIN --"
            ),
            "{line}"
        );
        assert!(
            line.contains("in-sandbox --user 65534:65534 --wait-network --ip /usr/sbin/ip"),
            "{line}"
        );
        // Where the job keeps the launcher's user, the launcher gets no
        // capability the job would keep.
        let open = command_line(&sandbox(SandboxKind::Bwrap, true), &layout).join(" ");
        assert!(
            !open.contains("CAP_NET_ADMIN") && !open.contains("--ip"),
            "{open}"
        );
    }

    #[test]
    fn jobs_run_as_the_unprivileged_user() {
        let layout = Layout::new(Path::new("/tmp/state/pods/p1"));
        let mut sb = sandbox(SandboxKind::Bwrap, false);
        sb.run_as = Some((65534, 65533));
        let line = command_line(&sb, &layout).join(" ");
        assert!(
            line.contains("--cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID --"),
            "{line}"
        );
        assert!(line.ends_with("/.hearth-agent in-sandbox --user 65534:65533 -- python3"));
        // Without bubblewrap the agent itself switches user when spawning.
        let mut none = sandbox(SandboxKind::None, false);
        none.run_as = Some((65534, 65533));
        let cmd = none
            .command(&layout, &["id".into()], &BTreeMap::new())
            .unwrap();
        assert_eq!(cmd.get_program(), "id");
    }

    #[test]
    fn bwrap_hides_host_runtime_and_scratch_directories() {
        let layout = Layout::new(Path::new("/tmp/state/pods/p1"));
        let closed = strings(&sandbox(SandboxKind::Bwrap, false).bwrap_args(&layout));
        let joined = closed.join(" ");
        assert!(!joined.contains("--cap-add"));
        for expected in [
            "--symlink usr/bin /bin --ro-bind /usr /usr",
            "--perms 1777 --tmpfs /tmp --tmpfs /run --tmpfs /tmp/state/pods",
            "--dev /dev --perms 1777 --tmpfs /dev/shm",
            "--bind /tmp/state/pods/p1/work /work --bind /tmp/state/pods/p1/io /hearth",
            "--bind /tmp/state/pods/p1/venvs /venvs --ro-bind /srv/wheels /wheelhouse",
            "--chdir /work --hostname hearth-pod --new-session --cap-drop ALL",
        ] {
            assert!(
                joined.contains(expected),
                "`{expected}` missing in `{joined}`"
            );
        }
        // Hidden paths are masked after /tmp is replaced and before the binds.
        assert!(joined.find("/tmp/state/pods ").unwrap() < joined.find("--bind").unwrap());
    }

    #[test]
    fn commands_wrap_in_the_cgroup_launcher() {
        let layout = Layout::new(Path::new("/pods/p1"));
        let mut sb = sandbox(SandboxKind::None, false);
        sb.cgroups = Cgroups::new(&[("pids".into(), "/cg/pids/p1".into())], None);
        let cmd = sb
            .command(&layout, &["python3".into(), "-V".into()], &BTreeMap::new())
            .unwrap();
        assert_eq!(cmd.get_program(), "/usr/bin/hearth-agent");
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "enter-cgroups",
                "/cg/pids/p1/cgroup.procs",
                "--",
                "python3",
                "-V"
            ]
        );
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/pods/p1/work")));
        assert!(sb.command(&layout, &[], &BTreeMap::new()).is_err());
    }

    #[test]
    fn inside_paths_follow_the_sandbox() {
        let layout = Layout::new(Path::new("/pods/p1"));
        let bw = sandbox(SandboxKind::Bwrap, false).inside(&layout);
        assert_eq!(bw.input(), Path::new("/hearth/input.json"));
        assert_eq!(bw.wheelhouse.as_deref(), Some(Path::new("/wheelhouse")));
        let none = sandbox(SandboxKind::None, false).inside(&layout);
        assert_eq!(none.output(), Path::new("/pods/p1/io/output.json"));
        assert_eq!(none.work, Path::new("/pods/p1/work"));
    }

    #[test]
    fn children_outlive_the_thread_that_asked_for_them() {
        let Some(setpriv) = find_in_path("setpriv") else {
            eprintln!("skipped: no setpriv");
            return;
        };
        let sb = sandbox(SandboxKind::None, false);
        let layout = Layout::new(Path::new("/"));
        // Like bwrap --die-with-parent: SIGKILL when the parent thread ends.
        let argv: Vec<String> = [
            setpriv.to_str().unwrap(),
            "--pdeathsig",
            "KILL",
            "sh",
            "-c",
            "echo armed; exec sleep 5",
        ]
        .map(str::to_owned)
        .to_vec();
        let mut child = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let mut cmd = sb.command(&layout, &argv, &BTreeMap::new()).unwrap();
                    cmd.env("PATH", STANDARD_PATH).stdout(Stdio::piped());
                    let mut child = sb.spawn(cmd).unwrap();
                    let mut armed = [0u8; 6];
                    child
                        .stdout
                        .as_mut()
                        .unwrap()
                        .read_exact(&mut armed)
                        .unwrap();
                    child
                })
                .join()
                .unwrap()
        });
        // The asking thread is gone; a child of that thread would be dead now.
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            matches!(child.try_wait(), Ok(None)),
            "the child died with the thread"
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn job_path_puts_venv_and_python_first() {
        let p = job_path(
            Some(Path::new("/venvs/abc/bin")),
            Path::new("/opt/py/bin/python3"),
        );
        assert_eq!(p, format!("/venvs/abc/bin:/opt/py/bin:{STANDARD_PATH}"));
        assert_eq!(job_path(None, Path::new("/usr/bin/python3")), STANDARD_PATH);
    }
}
