//! The agent's command line, parsed by hand (the agent ships in every pod, so
//! it stays std-only). Parsing is pure; nothing here touches the system.

use std::path::PathBuf;

pub const USAGE: &str = "\
usage: hearth-agent --listen unix:/path/agent.sock|tcp:HOST:PORT --root DIR [options]

  --listen ADDR          where to accept the service's connections
  --root DIR             the pod directory; everything jobs write lives under it
  --sandbox bwrap|none   isolate each job with bubblewrap, or rely on the pod (default bwrap)
  --network              jobs may reach the network through slirp4netns (default: no network);
                         either way each sandbox has a network namespace of its own
  --run-as UID:GID       run everything inside the sandbox as this unprivileged user
  --disk-mib N           kill a job whose pod directories grow past N MiB (default: no quota)
  --cgroup-v1 C=DIR,...  cgroup v1 directories of the pod (e.g. memory=/sys/fs/cgroup/memory/hearth/p1)
  --cgroup-v2 DIR        the pod's cgroup v2 directory
  --hide PATH            host path masked by an empty tmpfs inside the sandbox (repeatable)
  --wheelhouse DIR       local wheels for dependency installs
  --python PATH          interpreter used for dependency environments (default python3)
  --exit-with-parent     kill the running job and exit when the parent process goes away

Over TCP the agent needs its pod token in $HEARTH_AGENT_TOKEN and refuses requests without it.";

/// Where the agent listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(String),
}

/// What isolates one job from the rest of the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxKind {
    /// Each job runs in its own bubblewrap sandbox.
    Bwrap,
    /// The pod itself is the sandbox (as in Kubernetes).
    None,
}

impl SandboxKind {
    pub fn name(self) -> &'static str {
        match self {
            SandboxKind::Bwrap => "bwrap",
            SandboxKind::None => "none",
        }
    }
}

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    pub listen: Listen,
    pub root: PathBuf,
    pub sandbox: SandboxKind,
    pub network: bool,
    /// `(controller, directory)` pairs.
    pub cgroup_v1: Vec<(String, PathBuf)>,
    pub cgroup_v2: Option<PathBuf>,
    pub hide: Vec<PathBuf>,
    /// The unprivileged user and group jobs run as (bubblewrap only).
    pub run_as: Option<(u32, u32)>,
    /// Disk quota of the pod's job directories, in MiB.
    pub disk_mib: Option<u64>,
    pub wheelhouse: Option<PathBuf>,
    pub python: String,
    pub exit_with_parent: bool,
}

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Run(Box<Args>),
    Help,
}

/// Parses the arguments after the program name. Accepts `--flag value` and
/// `--flag=value`.
pub fn parse<I: IntoIterator<Item = String>>(argv: I) -> Result<Parsed, String> {
    let mut listen = None;
    let mut root = None;
    let mut sandbox = SandboxKind::Bwrap;
    let mut network = false;
    let mut cgroup_v1 = Vec::new();
    let mut cgroup_v2 = None;
    let mut hide = Vec::new();
    let mut run_as = None;
    let mut disk_mib = None;
    let mut wheelhouse = None;
    let mut python = "python3".to_owned();
    let mut exit_with_parent = false;

    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone().or_else(|| it.next()) {
                Some(v) if !v.is_empty() => Ok(v),
                _ => Err(format!("{name} needs a value")),
            }
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--listen" => listen = Some(parse_listen(&value("--listen")?)?),
            "--root" => root = Some(PathBuf::from(value("--root")?)),
            "--sandbox" => {
                sandbox = match value("--sandbox")?.as_str() {
                    "bwrap" => SandboxKind::Bwrap,
                    "none" => SandboxKind::None,
                    other => return Err(format!("unknown sandbox `{other}` (bwrap|none)")),
                }
            }
            "--network" => network = true,
            "--exit-with-parent" => exit_with_parent = true,
            "--cgroup-v1" => cgroup_v1.extend(parse_cgroup_v1(&value("--cgroup-v1")?)?),
            "--cgroup-v2" => cgroup_v2 = Some(PathBuf::from(value("--cgroup-v2")?)),
            "--hide" => hide.push(absolute("--hide", value("--hide")?)?),
            "--run-as" => run_as = Some(parse_user(&value("--run-as")?)?),
            "--disk-mib" => {
                let v = value("--disk-mib")?;
                disk_mib = Some(
                    v.parse::<u64>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| format!("bad --disk-mib `{v}` (want a positive number)"))?,
                );
            }
            "--wheelhouse" => wheelhouse = Some(absolute("--wheelhouse", value("--wheelhouse")?)?),
            "--python" => python = value("--python")?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let listen = listen.ok_or("--listen is required")?;
    let root = absolute("--root", root.ok_or("--root is required")?.into_os_string())?;
    Ok(Parsed::Run(Box::new(Args {
        listen,
        root,
        sandbox,
        network,
        cgroup_v1,
        cgroup_v2,
        hide,
        run_as,
        disk_mib,
        wheelhouse,
        python,
        exit_with_parent,
    })))
}

/// `UID:GID`, both non-zero (running jobs as root is what `--run-as` avoids).
fn parse_user(value: &str) -> Result<(u32, u32), String> {
    let parsed = value
        .split_once(':')
        .and_then(|(u, g)| Some((u.parse::<u32>().ok()?, g.parse::<u32>().ok()?)));
    match parsed {
        Some((uid, gid)) if uid != 0 && gid != 0 => Ok((uid, gid)),
        _ => Err(format!(
            "bad --run-as `{value}` (want UID:GID, both non-zero)"
        )),
    }
}

fn absolute(flag: &str, value: impl Into<PathBuf>) -> Result<PathBuf, String> {
    let path = value.into();
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(format!(
            "{flag} must be an absolute path, got `{}`",
            path.display()
        ))
    }
}

fn parse_listen(value: &str) -> Result<Listen, String> {
    if let Some(path) = value.strip_prefix("unix:") {
        Ok(Listen::Unix(PathBuf::from(path)))
    } else if let Some(hostport) = value.strip_prefix("tcp:") {
        if hostport
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
        {
            Ok(Listen::Tcp(hostport.to_owned()))
        } else {
            Err(format!("bad tcp address `{hostport}` (want HOST:PORT)"))
        }
    } else {
        Err(format!(
            "bad --listen `{value}` (want unix:PATH or tcp:HOST:PORT)"
        ))
    }
}

fn parse_cgroup_v1(value: &str) -> Result<Vec<(String, PathBuf)>, String> {
    value
        .split(',')
        .filter(|part| !part.is_empty())
        .map(|part| match part.split_once('=') {
            Some((ctrl, dir)) if !ctrl.is_empty() => {
                Ok((ctrl.to_owned(), absolute("--cgroup-v1", dir)?))
            }
            _ => Err(format!(
                "bad --cgroup-v1 entry `{part}` (want CONTROLLER=DIR)"
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Parsed, String> {
        parse(list.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn parses_every_flag() {
        let parsed = args(&[
            "--listen",
            "unix:/p/agent.sock",
            "--root=/p",
            "--sandbox",
            "none",
            "--network",
            "--cgroup-v1",
            "memory=/sys/fs/cgroup/memory/hearth/p,pids=/sys/fs/cgroup/pids/hearth/p",
            "--cgroup-v2",
            "/sys/fs/cgroup/hearth/p",
            "--hide",
            "/state/pods",
            "--hide",
            "/secret",
            "--run-as",
            "65534:65534",
            "--disk-mib",
            "512",
            "--wheelhouse",
            "/wheels",
            "--python",
            "/usr/bin/python3",
            "--exit-with-parent",
        ])
        .unwrap();
        let expected = Args {
            listen: Listen::Unix("/p/agent.sock".into()),
            root: "/p".into(),
            sandbox: SandboxKind::None,
            network: true,
            cgroup_v1: vec![
                ("memory".into(), "/sys/fs/cgroup/memory/hearth/p".into()),
                ("pids".into(), "/sys/fs/cgroup/pids/hearth/p".into()),
            ],
            cgroup_v2: Some("/sys/fs/cgroup/hearth/p".into()),
            hide: vec!["/state/pods".into(), "/secret".into()],
            run_as: Some((65534, 65534)),
            disk_mib: Some(512),
            wheelhouse: Some("/wheels".into()),
            python: "/usr/bin/python3".into(),
            exit_with_parent: true,
        };
        assert_eq!(parsed, Parsed::Run(Box::new(expected)));
    }

    #[test]
    fn defaults_are_bwrap_without_network() {
        let Parsed::Run(a) = args(&["--listen", "tcp:0.0.0.0:7070", "--root", "/pod"]).unwrap()
        else {
            panic!("expected run")
        };
        assert_eq!(a.listen, Listen::Tcp("0.0.0.0:7070".into()));
        assert_eq!(a.sandbox, SandboxKind::Bwrap);
        assert!(!a.network && !a.exit_with_parent);
        assert_eq!(a.python, "python3");
        assert!(a.cgroup_v1.is_empty() && a.cgroup_v2.is_none() && a.hide.is_empty());
        assert_eq!((a.run_as, a.disk_mib), (None, None));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(args(&["--root", "/p"]).unwrap_err().contains("--listen"));
        assert!(
            args(&["--listen", "unix:/s"])
                .unwrap_err()
                .contains("--root")
        );
        assert!(args(&["--listen", "udp:x", "--root", "/p"]).is_err());
        assert!(args(&["--listen", "tcp:host", "--root", "/p"]).is_err());
        assert!(args(&["--listen", "unix:/s", "--root", "rel"]).is_err());
        assert!(args(&["--listen", "unix:/s", "--root", "/p", "--sandbox", "docker"]).is_err());
        assert!(
            args(&[
                "--listen",
                "unix:/s",
                "--root",
                "/p",
                "--cgroup-v1",
                "memory"
            ])
            .is_err()
        );
        assert!(args(&["--listen", "unix:/s", "--root", "/p", "--bogus"]).is_err());
        assert!(args(&["--listen", "unix:/s", "--root", "/p", "--disk-mib", "0"]).is_err());
        for user in ["0:0", "1000", "1000:0", "x:1"] {
            assert!(args(&["--listen", "unix:/s", "--root", "/p", "--run-as", user]).is_err());
        }
        assert!(args(&["--listen"]).unwrap_err().contains("needs a value"));
        assert_eq!(args(&["--help"]).unwrap(), Parsed::Help);
    }
}
