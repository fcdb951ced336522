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
/// its first instruction, with no race against its first fork).
pub const ENTER_CGROUPS: &str = "enter-cgroups";

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

/// Names under `/` that the sandbox provides itself.
const OWN_ROOT_NAMES: [&str; 7] = [
    "proc",
    "dev",
    "tmp",
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
        let mut kill_file = None;
        if let Some(dir) = v2 {
            dirs.push(dir.to_owned());
            let file = dir.join("cgroup.kill");
            kill_file = file.exists().then_some(file);
        }
        Cgroups { dirs, kill_file }
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    fn procs_files(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.dirs.iter().map(|d| d.join("cgroup.procs"))
    }

    /// Live (non-zombie) processes in any of the pod's cgroups.
    fn live_pids(&self) -> Vec<u32> {
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
    /// Kills what is left and removes the pod's cgroups (for an agent whose
    /// service is gone: nobody else will).
    pub fn remove(&self) {
        self.kill_all();
        let give_up = Instant::now() + Duration::from_secs(1);
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
        Ok(Sandbox {
            spawner: Spawner::new()?,
            kind: args.sandbox,
            network: args.network,
            hide: args.hide.clone(),
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
                args.push("--".into());
                args.extend(argv.iter().map(OsString::from));
                (self.bwrap.clone(), args)
            }
            SandboxKind::None => (program.into(), rest.iter().map(OsString::from).collect()),
        };
        let program = if self.cgroups.is_empty() {
            program
        } else {
            let mut wrapped: Vec<OsString> = vec![ENTER_CGROUPS.into()];
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
        push(&[
            &"--die-with-parent",
            &"--unshare-pid",
            &"--unshare-ipc",
            &"--unshare-uts",
            &"--unshare-cgroup-try",
        ]);
        if !self.network {
            push(&[&"--unshare-net"]);
        }
        // bwrap's root is a tmpfs; the host's top-level entries are bound onto
        // it read-only, so the pod's own mount points (/work, /hearth, /venvs)
        // can be created even though the host has no such directories.
        for entry in &self.root_entries {
            match entry {
                RootEntry::Bind(path) => push(&[&"--ro-bind", path, path]),
                RootEntry::Symlink { target, path } => push(&[&"--symlink", target, path]),
            }
        }
        push(&[&"--dev", &"/dev", &"--tmpfs", &"/dev/shm"]);
        for dev in &self.gpu_devices {
            push(&[&"--dev-bind", dev, dev]);
        }
        push(&[&"--proc", &"/proc", &"--tmpfs", &"/tmp"]);
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
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
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

/// The launcher mode: `hearth-agent enter-cgroups PROCS_FILE... -- PROGRAM ARGS...`.
/// Moves itself into each cgroup, then becomes `PROGRAM`.
pub fn enter_cgroups_and_exec(argv: &[String]) -> ExitCode {
    let Some(split) = argv.iter().position(|a| a == "--") else {
        eprintln!("hearth-agent {ENTER_CGROUPS}: missing `--`");
        return ExitCode::from(126);
    };
    let (files, command) = (&argv[..split], &argv[split + 1..]);
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
    let err = Command::new(program).args(args).exec();
    eprintln!("hearth-agent: cannot run {program}: {err}");
    ExitCode::from(if err.kind() == io::ErrorKind::NotFound {
        127
    } else {
        126
    })
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

    #[test]
    fn bwrap_isolates_network_unless_allowed() {
        let layout = Layout::new(Path::new("/tmp/state/pods/p1"));
        let closed = strings(&sandbox(SandboxKind::Bwrap, false).bwrap_args(&layout));
        assert!(closed.contains(&"--unshare-net".to_owned()));
        let open = strings(&sandbox(SandboxKind::Bwrap, true).bwrap_args(&layout));
        assert!(!open.contains(&"--unshare-net".to_owned()));
        let joined = closed.join(" ");
        for expected in [
            "--symlink usr/bin /bin --ro-bind /usr /usr",
            "--tmpfs /tmp --tmpfs /tmp/state/pods",
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
