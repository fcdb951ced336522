//! The cgroups of local pods: detecting which controllers this machine lets
//! the runtime use (v2, or v1 hierarchies), creating `hearth/<scope>/<pod_id>`
//! with the profile's limits, killing what runs in them, and removing them.
//! Each runtime has a scope of its own (see [`crate::local`]), so two
//! instances on one machine never touch each other's pods. Touches nothing
//! outside `<mount>/hearth/<scope>`.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hearth_core::Profile;

use crate::Mechanism;

/// The directory, under each hierarchy, that holds the pods' cgroups.
const PARENT: &str = "hearth";
const CFS_PERIOD_US: u64 = 100_000;

/// A resource controller a pod is limited by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Controller {
    Memory,
    Cpu,
    Pids,
}

impl Controller {
    pub const ALL: [Controller; 3] = [Controller::Memory, Controller::Cpu, Controller::Pids];

    pub fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
            Controller::Pids => "pids",
        }
    }

    /// The file whose presence in a child group shows a v1 hierarchy can
    /// enforce the limit (the root group of a hierarchy has no `pids.max`).
    fn v1_limit_file(self) -> &'static str {
        match self {
            Controller::Memory => "memory.limit_in_bytes",
            Controller::Cpu => "cpu.cfs_quota_us",
            Controller::Pids => "pids.max",
        }
    }
}

/// How pods' cgroups are provided here.
#[derive(Debug, Clone)]
pub enum Cgroups {
    /// One unified hierarchy; `dir` is `<mount>/hearth/<scope>`.
    V2 {
        dir: PathBuf,
        controllers: Vec<Controller>,
    },
    /// One hierarchy per controller; each dir is `<mount>/<ctrl>/hearth/<scope>`.
    V1 { dirs: Vec<(Controller, PathBuf)> },
}

impl Cgroups {
    /// Finds the usable controllers under `mount` (normally `/sys/fs/cgroup`)
    /// and creates the `hearth/<scope>` parent cgroups. Reports one mechanism
    /// per controller, available or not.
    pub fn detect(mount: &Path, scope: &str) -> (Cgroups, Vec<Mechanism>) {
        let controllers_file = mount.join("cgroup.controllers");
        if let Ok(listed) = std::fs::read_to_string(&controllers_file) {
            return Self::detect_v2(mount, scope, &listed);
        }
        let mut dirs = Vec::new();
        let mut mechanisms = Vec::new();
        for ctrl in Controller::ALL {
            let hierarchy = mount.join(ctrl.name());
            let dir = hierarchy.join(PARENT).join(scope);
            let result = if !hierarchy.join("cgroup.procs").exists() {
                Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no {} hierarchy at {}", ctrl.name(), hierarchy.display()),
                ))
            } else {
                make_v1_scope(ctrl, &dir).and_then(|()| {
                    if dir.join(ctrl.v1_limit_file()).exists() {
                        Ok(dir)
                    } else {
                        // Unused: it goes (the `hearth` parent stays).
                        let _ = std::fs::remove_dir(&dir);
                        Err(io::Error::new(
                            io::ErrorKind::Unsupported,
                            format!("{} has no {}", dir.display(), ctrl.v1_limit_file()),
                        ))
                    }
                })
            };
            mechanisms.push(match result {
                Ok(dir) => {
                    dirs.push((ctrl, dir));
                    mechanism(ctrl, true, format!("cgroup v1 at {}", hierarchy.display()))
                }
                Err(e) => mechanism(ctrl, false, format!("cgroup v1 unusable: {e}")),
            });
        }
        (Cgroups::V1 { dirs }, mechanisms)
    }

    fn detect_v2(mount: &Path, scope: &str, listed: &str) -> (Cgroups, Vec<Mechanism>) {
        let listed: BTreeSet<&str> = listed.split_whitespace().collect();
        let dir = mount.join(PARENT).join(scope);
        let wanted: Vec<Controller> = Controller::ALL
            .into_iter()
            .filter(|c| listed.contains(c.name()))
            .collect();
        let enable = enabling(&wanted);
        // Pods' cgroups only get the controllers their parent delegates.
        let setup = std::fs::create_dir_all(&dir)
            .and_then(|()| write_if_needed(&mount.join("cgroup.subtree_control"), &enable))
            .and_then(|()| {
                write_if_needed(&mount.join(PARENT).join("cgroup.subtree_control"), &enable)
            })
            .and_then(|()| write_if_needed(&dir.join("cgroup.subtree_control"), &enable));
        let delegated: BTreeSet<String> =
            std::fs::read_to_string(dir.join("cgroup.subtree_control"))
                .unwrap_or_default()
                .split_whitespace()
                .map(|c| c.trim_start_matches('+').to_owned())
                .collect();
        if delegated.contains(Controller::Cpu.name()) {
            weigh(
                &[mount.join(PARENT), dir.clone()],
                V2_CPU_WEIGHT,
                v2_cpu_weight(),
            );
        }
        let mut controllers = Vec::new();
        let mechanisms = Controller::ALL
            .into_iter()
            .map(|ctrl| {
                if !listed.contains(ctrl.name()) {
                    mechanism(
                        ctrl,
                        false,
                        format!("cgroup v2 at {} lacks the controller", mount.display()),
                    )
                } else if delegated.contains(ctrl.name()) {
                    controllers.push(ctrl);
                    mechanism(ctrl, true, format!("cgroup v2 at {}", mount.display()))
                } else {
                    let why = setup
                        .as_ref()
                        .err()
                        .map_or_else(|| "not delegated".to_owned(), ToString::to_string);
                    mechanism(
                        ctrl,
                        false,
                        format!("cgroup v2 at {}: cannot enable: {why}", mount.display()),
                    )
                }
            })
            .collect();
        (Cgroups::V2 { dir, controllers }, mechanisms)
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Cgroups::V2 { controllers, .. } => controllers.is_empty(),
            Cgroups::V1 { dirs } => dirs.is_empty(),
        }
    }

    /// The pod's cgroup directories (whether they exist or not).
    pub fn pod_dirs(&self, pod_id: &str) -> Vec<PathBuf> {
        match self {
            Cgroups::V2 { .. } if self.is_empty() => Vec::new(),
            Cgroups::V2 { dir, .. } => vec![dir.join(pod_id)],
            Cgroups::V1 { dirs } => dirs.iter().map(|(_, d)| d.join(pod_id)).collect(),
        }
    }

    /// The agent's `--cgroup-v1` / `--cgroup-v2` arguments for the pod.
    pub fn agent_args(&self, pod_id: &str) -> Vec<String> {
        if self.is_empty() {
            return Vec::new();
        }
        match self {
            Cgroups::V2 { dir, .. } => {
                vec![
                    "--cgroup-v2".to_owned(),
                    dir.join(pod_id).display().to_string(),
                ]
            }
            Cgroups::V1 { dirs } => {
                let list = dirs
                    .iter()
                    .map(|(c, d)| format!("{}={}", c.name(), d.join(pod_id).display()))
                    .collect::<Vec<_>>()
                    .join(",");
                vec!["--cgroup-v1".to_owned(), list]
            }
        }
    }

    /// Makes the `hearth/<scope>` parents again where they are missing, set
    /// up as [`Cgroups::detect`] set them up: a runtime removes its scope
    /// once detection is done and makes it again with its first pod, so a
    /// service that never starts a pod (a follower replica), killed or not,
    /// leaves none behind. It goes with the runtime
    /// ([`Cgroups::remove_scope`]), or with the last pod's agent once no
    /// service holds it.
    pub fn ensure_scope(&self) -> io::Result<()> {
        match self {
            Cgroups::V2 { dir, controllers } => {
                if controllers.is_empty() || dir.is_dir() {
                    return Ok(());
                }
                std::fs::create_dir_all(dir)?;
                write_if_needed(&dir.join("cgroup.subtree_control"), &enabling(controllers))?;
                if controllers.contains(&Controller::Cpu) {
                    weigh(std::slice::from_ref(dir), V2_CPU_WEIGHT, v2_cpu_weight());
                }
            }
            Cgroups::V1 { dirs } => {
                for (ctrl, dir) in dirs.iter().filter(|(_, d)| !d.is_dir()) {
                    make_v1_scope(*ctrl, dir)?;
                }
            }
        }
        Ok(())
    }

    /// Creates the pod's cgroups (and its scope, if missing) and writes the
    /// profile's limits.
    pub fn create(&self, pod_id: &str, profile: &Profile) -> io::Result<()> {
        self.ensure_scope()?;
        let limits = Limits::of(profile);
        match self {
            Cgroups::V2 { dir, controllers } if !controllers.is_empty() => {
                let pod = dir.join(pod_id);
                std::fs::create_dir_all(&pod)?;
                for ctrl in controllers {
                    match ctrl {
                        Controller::Memory => {
                            write(&pod.join("memory.max"), &limits.memory_bytes.to_string())?;
                            // Swap would let a job exceed its memory unnoticed.
                            let _ = std::fs::write(pod.join("memory.swap.max"), "0");
                        }
                        Controller::Cpu => {
                            let quota = limits
                                .cpu_quota_us
                                .map_or_else(|| "max".to_owned(), |q| q.to_string());
                            write(&pod.join("cpu.max"), &format!("{quota} {CFS_PERIOD_US}"))?;
                        }
                        Controller::Pids => write(&pod.join("pids.max"), &limits.pids)?,
                    }
                }
            }
            Cgroups::V2 { .. } => {}
            Cgroups::V1 { dirs } => {
                for (ctrl, parent) in dirs {
                    let pod = parent.join(pod_id);
                    std::fs::create_dir_all(&pod)?;
                    match ctrl {
                        Controller::Memory => {
                            let bytes = limits.memory_bytes.to_string();
                            write(&pod.join("memory.limit_in_bytes"), &bytes)?;
                            // Memory plus swap, so the job cannot swap past
                            // its limit (absent without swap accounting).
                            let memsw = pod.join("memory.memsw.limit_in_bytes");
                            if memsw.exists() {
                                write(&memsw, &bytes)?;
                            }
                        }
                        Controller::Cpu => {
                            write(&pod.join("cpu.cfs_period_us"), &CFS_PERIOD_US.to_string())?;
                            let quota = limits.cpu_quota_us.map_or(-1, |q| q as i64);
                            write(&pod.join("cpu.cfs_quota_us"), &quota.to_string())?;
                        }
                        Controller::Pids => write(&pod.join("pids.max"), &limits.pids)?,
                    }
                }
            }
        }
        Ok(())
    }

    /// The `hearth/<scope>` directories, one per hierarchy used.
    pub fn scope_dirs(&self) -> Vec<&PathBuf> {
        match self {
            Cgroups::V2 { dir, .. } => vec![dir],
            Cgroups::V1 { dirs } => dirs.iter().map(|(_, d)| d).collect(),
        }
    }

    /// Removes the `hearth/<scope>` parents, once their pods' cgroups are
    /// gone: the scope goes with the runtime that owns it. A parent that
    /// still holds a pod stays (the next instance on the same pods
    /// directory adopts or removes what is in it).
    pub fn remove_scope(&self) {
        for dir in self.scope_dirs() {
            match std::fs::remove_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::debug!(error = %e, dir = %dir.display(), "the scope's cgroup stays")
                }
            }
        }
    }

    /// Pod ids that have a cgroup under `hearth/<scope>/` in any hierarchy.
    pub fn pod_ids(&self) -> BTreeSet<String> {
        self.scope_dirs()
            .into_iter()
            .filter_map(|p| std::fs::read_dir(p).ok())
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect()
    }
}

fn mechanism(ctrl: Controller, available: bool, detail: String) -> Mechanism {
    Mechanism {
        name: format!("cgroup.{}", ctrl.name()),
        available,
        detail,
    }
}

/// The profile's limits in the units cgroups take.
#[derive(Debug, PartialEq, Eq)]
struct Limits {
    memory_bytes: u64,
    /// CPU time per period; `None` is unlimited.
    cpu_quota_us: Option<u64>,
    /// `max` or a count.
    pids: String,
}

impl Limits {
    fn of(profile: &Profile) -> Limits {
        Limits {
            memory_bytes: u64::from(profile.memory_mib) * 1024 * 1024,
            cpu_quota_us: (profile.cpu_millis > 0)
                .then(|| u64::from(profile.cpu_millis) * CFS_PERIOD_US / 1000),
            pids: if profile.pids == 0 {
                "max".to_owned()
            } else {
                profile.pids.to_string()
            },
        }
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing {value} to {}: {e}", path.display()),
        )
    })
}

/// Gives the `hearth` cgroup and an install's the CPU weight of as many
/// tasks as the machine has CPUs (`weight`, in `file`'s units), as kubelet
/// weighs its pods' parent by the node's CPUs. With the default weight, all
/// the jobs' processes together would weigh as one task against the agents,
/// the service and Postgres, and a busy machine would starve them (at 16
/// clients in the service bench, a job's own run took 5-20 ms instead of
/// 1). Best effort: where the file is missing or cannot be written, the pods
/// keep the default weight.
fn weigh(dirs: &[PathBuf], file: &str, weight: u64) {
    for dir in dirs {
        let path = dir.join(file);
        if path.exists()
            && let Err(e) = write(&path, &weight.to_string())
        {
            tracing::debug!(error = %e, "cannot weigh the pods' cgroup");
        }
    }
}

fn cpus() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// Makes a v1 scope directory `<hierarchy>/hearth/<scope>`; under `cpu`, the
/// `hearth` parent and the scope weigh as a cgroup per CPU.
fn make_v1_scope(ctrl: Controller, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    if ctrl == Controller::Cpu {
        let parents: Vec<PathBuf> = dir
            .parent()
            .into_iter()
            .chain([dir])
            .map(Path::to_owned)
            .collect();
        weigh(&parents, V1_CPU_WEIGHT, v1_cpu_weight());
    }
    Ok(())
}

/// The files that weigh the pods' parents against the machine's other cgroups.
const V1_CPU_WEIGHT: &str = "cpu.shares";
const V2_CPU_WEIGHT: &str = "cpu.weight";

/// A parent's weight: that of a cgroup per CPU of the machine.
fn v1_cpu_weight() -> u64 {
    1024 * cpus()
}

/// As [`v1_cpu_weight`]; `cpu.weight` takes at most 10000.
fn v2_cpu_weight() -> u64 {
    (100 * cpus()).min(10_000)
}

/// What `cgroup.subtree_control` takes to enable `controllers`.
fn enabling(controllers: &[Controller]) -> String {
    controllers
        .iter()
        .map(|c| format!("+{}", c.name()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes to a `cgroup.subtree_control` only what is not enabled yet.
fn write_if_needed(path: &Path, enable: &str) -> io::Result<()> {
    let current = std::fs::read_to_string(path).unwrap_or_default();
    let missing: Vec<&str> = enable
        .split_whitespace()
        .filter(|c| !current.split_whitespace().any(|have| have == &c[1..]))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        write(path, &missing.join(" "))
    }
}

/// Kills every process in `dirs` (repeating, as they may fork meanwhile) and
/// removes the directories. Missing directories are fine.
pub fn remove_dirs(dirs: &[PathBuf]) -> io::Result<()> {
    let dirs: Vec<&PathBuf> = dirs.iter().filter(|d| d.exists()).collect();
    if dirs.is_empty() {
        return Ok(());
    }
    for dir in &dirs {
        let kill = dir.join("cgroup.kill");
        if kill.exists() {
            let _ = std::fs::write(kill, "1");
        }
    }
    let give_up = Instant::now() + Duration::from_secs(5);
    loop {
        let pids = live_pids(&dirs);
        if !pids.is_empty() {
            kill_pids(&pids);
        }
        let mut left = Vec::new();
        for dir in &dirs {
            match std::fs::remove_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => left.push(((*dir).clone(), e)),
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > give_up {
            let (dir, e) = left.swap_remove(0);
            return Err(io::Error::new(
                e.kind(),
                format!("cannot remove cgroup {}: {e}", dir.display()),
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn live_pids(dirs: &[&PathBuf]) -> Vec<u32> {
    let mut pids: Vec<u32> = dirs
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// SIGKILLs `pids` with the system `kill` (no libc here).
pub fn kill_pids(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = std::process::Command::new("kill")
        .arg("-9")
        .arg("--")
        .args(pids.iter().map(u32::to_string))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_the_profile() {
        let mut p = Profile::cpu("t");
        p.memory_mib = 512;
        p.cpu_millis = 1500;
        p.pids = 64;
        assert_eq!(
            Limits::of(&p),
            Limits {
                memory_bytes: 512 << 20,
                cpu_quota_us: Some(150_000),
                pids: "64".into(),
            }
        );
        p.cpu_millis = 0;
        p.pids = 0;
        let l = Limits::of(&p);
        assert_eq!((l.cpu_quota_us, l.pids.as_str()), (None, "max"));
    }

    #[test]
    fn agent_args_name_every_hierarchy() {
        let v1 = Cgroups::V1 {
            dirs: vec![
                (Controller::Memory, "/cg/memory/hearth".into()),
                (Controller::Pids, "/cg/pids/hearth".into()),
            ],
        };
        assert_eq!(
            v1.agent_args("p1"),
            [
                "--cgroup-v1",
                "memory=/cg/memory/hearth/p1,pids=/cg/pids/hearth/p1"
            ]
        );
        let v2 = Cgroups::V2 {
            dir: "/cg/hearth".into(),
            controllers: vec![Controller::Memory],
        };
        assert_eq!(v2.agent_args("p1"), ["--cgroup-v2", "/cg/hearth/p1"]);
        let none = Cgroups::V1 { dirs: Vec::new() };
        assert!(none.agent_args("p1").is_empty() && none.pod_dirs("p1").is_empty());
    }

    #[test]
    fn detects_a_fake_v2_mount() {
        let mount = std::env::temp_dir().join(format!("hearth-cg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&mount);
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::write(mount.join("cgroup.controllers"), "cpu memory io").unwrap();
        let (cg, mechs) = Cgroups::detect(&mount, "s1");
        assert!(mount.join("hearth/s1/cgroup.subtree_control").is_file());
        // A plain directory does not delegate like cgroupfs does, but the
        // written subtree_control files say what was asked for.
        assert!(matches!(cg, Cgroups::V2 { .. }));
        let by_name = |n: &str| mechs.iter().find(|m| m.name == n).unwrap().clone();
        assert!(by_name("cgroup.memory").available);
        assert!(by_name("cgroup.cpu").available);
        assert!(!by_name("cgroup.pids").available);
        // A scope gone with its pods is made again, delegating as before.
        std::fs::remove_dir_all(mount.join("hearth/s1")).unwrap();
        cg.create("p1", &Profile::cpu("t")).unwrap();
        let delegated = std::fs::read_to_string(mount.join("hearth/s1/cgroup.subtree_control"));
        assert_eq!(delegated.unwrap(), "+memory +cpu");
        assert!(mount.join("hearth/s1/p1/memory.max").is_file());
        std::fs::remove_dir_all(&mount).unwrap();
    }

    #[test]
    fn the_pods_parents_weigh_as_many_tasks_as_there_are_cpus() {
        let mount = std::env::temp_dir().join(format!("hearth-cgw-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&mount);
        let cpu = mount.join("cpu");
        std::fs::create_dir_all(cpu.join("hearth/s1")).unwrap();
        for file in ["cgroup.procs", "hearth/cpu.shares", "hearth/s1/cpu.shares"] {
            std::fs::write(cpu.join(file), "1024").unwrap();
        }
        std::fs::write(cpu.join("hearth/s1/cpu.cfs_quota_us"), "-1").unwrap();
        Cgroups::detect(&mount, "s1");
        let want = (1024 * cpus()).to_string();
        for file in ["hearth/cpu.shares", "hearth/s1/cpu.shares"] {
            assert_eq!(std::fs::read_to_string(cpu.join(file)).unwrap(), want);
        }
        std::fs::remove_dir_all(&mount).unwrap();
    }
}
