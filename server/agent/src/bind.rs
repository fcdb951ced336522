//! Binding: makes the generic pod specific to one job before it runs. Writes
//! the job's files and input, and builds (or reuses) the dependency
//! environment for its `deps`, installing inside the same sandbox as jobs.

use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use hearth_core::ErrorCode;
use hearth_core::agent::{Frame, Outcome, Run};

use crate::run::{Ending, Process, supervise};
use crate::serve::{Agent, Exchange, error_frame, lock};

/// Most of pip's output kept for an error report (its tail, where the error is).
const MAX_INSTALL_LOG: usize = 64 * 1024;
/// Longest a dependency install may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Marks a dependency environment that was built completely.
const READY_MARKER: &str = ".hearth-ready";

/// A job bound to the pod.
#[derive(Debug)]
pub struct Bound {
    pub bind_ms: f64,
    pub deps_cached: bool,
    /// The key of the dependency environment, if the job has deps.
    pub venv: Option<String>,
}

/// Binds `run`; on failure returns the final frame to answer with.
pub fn bind(agent: &Agent, ex: &Exchange, run: &Run) -> Result<Bound, Frame> {
    let started = Instant::now();
    let failed =
        |what: &str, e: io::Error| error_frame(ErrorCode::BindFailed, format!("{what}: {e}"));
    for (path, content) in &run.files {
        let target = safe_join(&agent.layout.work, path, &|dir| agent.sandbox.give(dir))
            .map_err(|e| failed(&format!("cannot write `{path}`"), e))?;
        write_fresh(&target, content.as_bytes())
            .and_then(|()| agent.sandbox.give(&target))
            .map_err(|e| failed(&format!("cannot write `{path}`"), e))?;
    }
    let input = serde_json::to_vec(&run.input).unwrap_or_else(|_| b"null".to_vec());
    write_input(
        &agent.layout.io.join("input.json"),
        &input,
        &mut lock(&agent.input),
    )
    .map_err(|e| failed("cannot write the input", e))?;
    remove_any(&agent.layout.io.join("output.json"))
        .map_err(|e| failed("cannot remove the last output", e))?;

    let (venv, deps_cached) = match run.deps.key() {
        Some(key) => {
            let cached = ensure_venv(agent, ex, &key, &run.deps.pip)?;
            (Some(key), cached)
        }
        None => (None, false),
    };
    Ok(Bound {
        bind_ms: started.elapsed().as_secs_f64() * 1000.0,
        deps_cached,
        venv,
    })
}

/// `base/rel`, refusing absolute paths, `..`, and symlinks on the way (a job
/// may have left links in its work dir; the agent must never follow them out).
/// Directories it creates are passed to `made` (to hand them to the job's user).
fn safe_join(
    base: &Path,
    rel: &str,
    made: &dyn Fn(&Path) -> io::Result<()>,
) -> io::Result<PathBuf> {
    let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, why.to_owned());
    let rel_path = Path::new(rel);
    if rel.is_empty() || rel_path.is_absolute() {
        return Err(invalid("not a relative path"));
    }
    let mut path = base.to_owned();
    let mut components = rel_path.components().peekable();
    while let Some(component) = components.next() {
        match component {
            Component::Normal(name) => path.push(name),
            Component::CurDir => continue,
            _ => return Err(invalid("path leaves the work directory")),
        }
        if components.peek().is_none() {
            break;
        }
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => remove_any(&path)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        match std::fs::create_dir(&path) {
            Ok(()) => made(&path)?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    if path == base {
        return Err(invalid("not a file path"));
    }
    Ok(path)
}

/// Replaces whatever is at `path` with a new regular file (`create_new`
/// never follows a link).
fn write_fresh(path: &Path, content: &[u8]) -> io::Result<()> {
    remove_any(path)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(content)
}

/// A file the agent wrote, as it left it: the same inode, owner and mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    dev: u64,
    ino: u64,
    uid: u32,
    mode: u32,
}

impl Written {
    fn of(meta: &std::fs::Metadata) -> Written {
        use std::os::unix::fs::MetadataExt as _;
        Written {
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            mode: meta.mode(),
        }
    }

    /// Whether `meta` is still this file, a regular one with no other link.
    fn is(self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        meta.file_type().is_file() && meta.nlink() == 1 && Written::of(meta) == self
    }
}

/// Leaves `content` at `path` as a file of the agent's own. The file the
/// last bind wrote (`last`) is rewritten in place while it is still that
/// file; anything else there (gone, replaced, linked, a link itself: the job
/// may have done any of it) is replaced by a new file, as [`write_fresh`]
/// does. A new file per job cost the filesystem an inode allocation each,
/// the most expensive step of binding a job (about a tenth of the machine's
/// CPU under load, ext4's search for an inode not recently freed).
/// No job of the pod runs while it binds, so nothing changes `path` between
/// the checks and the write.
fn write_input(path: &Path, content: &[u8], last: &mut Option<Written>) -> io::Result<()> {
    if let Some(was) = last.take()
        && std::fs::symlink_metadata(path).is_ok_and(|m| was.is(&m))
    {
        // Checked again once open: it is the file seen, not what a link led to.
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        let meta = file.metadata()?;
        if was.is(&meta) {
            use std::os::unix::fs::FileExt as _;
            file.write_all_at(content, 0)?;
            // Cut only what the last content left beyond this one: a
            // truncation to the same length still costs ext4 a journaled
            // inode update.
            if meta.len() > content.len() as u64 {
                file.set_len(content.len() as u64)?;
            }
            *last = Some(was);
            return Ok(());
        }
    }
    write_fresh(path, content)?;
    *last = Some(Written::of(&std::fs::symlink_metadata(path)?));
    Ok(())
}

fn remove_any(path: &Path) -> io::Result<()> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Makes sure the environment for `key` exists; true when it already did.
fn ensure_venv(agent: &Agent, ex: &Exchange, key: &str, pkgs: &[String]) -> Result<bool, Frame> {
    let _guard = lock(&agent.venv_lock);
    let host_dir = agent.layout.venvs.join(key);
    if std::fs::symlink_metadata(host_dir.join(READY_MARKER)).is_ok_and(|m| m.is_file()) {
        return Ok(true);
    }
    let _ = remove_any(&host_dir);
    let result = build_venv(agent, ex, key, pkgs);
    match result {
        Ok(()) => {
            // The install ran code of the packages: never follow what it left.
            write_fresh(&host_dir.join(READY_MARKER), b"").map_err(|e| Frame::Error {
                code: ErrorCode::DepsInstallFailed,
                message: format!("cannot mark the environment ready: {e}"),
                log: String::new(),
            })?;
            Ok(false)
        }
        Err(last) => {
            let _ = remove_any(&host_dir);
            Err(last)
        }
    }
}

/// Creates the venv at the path it has inside the sandbox (its scripts embed
/// that path) and installs `pkgs` into it, both inside the sandbox.
fn build_venv(agent: &Agent, ex: &Exchange, key: &str, pkgs: &[String]) -> Result<(), Frame> {
    let inside = agent.sandbox.inside(&agent.layout);
    let venv = inside.venvs.join(key);
    let python = agent.python.display().to_string();
    let venv_python = venv.join("bin/python").display().to_string();
    let mut install = vec![
        python.clone(),
        "-m".to_owned(),
        "pip".to_owned(),
        "--python".to_owned(),
        venv_python,
        "install".to_owned(),
        "--no-input".to_owned(),
        "--disable-pip-version-check".to_owned(),
        "--no-cache-dir".to_owned(),
    ];
    if !agent.sandbox.network() {
        install.push("--no-index".to_owned());
    }
    if let Some(wheels) = &inside.wheelhouse {
        install.push("--find-links".to_owned());
        install.push(wheels.display().to_string());
    }
    install.push("--".to_owned());
    install.extend(pkgs.iter().cloned());
    let create = vec![
        python,
        "-m".to_owned(),
        "venv".to_owned(),
        "--without-pip".to_owned(),
        venv.display().to_string(),
    ];

    let env = [
        (
            "PATH".to_owned(),
            crate::sandbox::job_path(None, &agent.python),
        ),
        ("HOME".to_owned(), inside.tmp.display().to_string()),
        ("TMPDIR".to_owned(), inside.tmp.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("PIP_NO_COLOR".to_owned(), "1".to_owned()),
    ]
    .into_iter()
    .collect();
    let deadline = Instant::now() + INSTALL_TIMEOUT;
    let mut log = Tail::new(MAX_INSTALL_LOG);
    for argv in [create, install] {
        log.push(format!("$ {}\n", argv.join(" ")).as_bytes());
        let ending = run_logged(agent, ex, &argv, &env, deadline, &mut log)
            .map_err(|e| deps_failed(format!("cannot start `{}`: {e}", argv[0]), &log))?;
        match ending {
            Ending::Exited(status) if status.success() => {}
            Ending::Exited(status) => {
                return Err(deps_failed(
                    format!("installing {} failed ({status})", pkgs.join(" ")),
                    &log,
                ));
            }
            // Installs run without a quota (see `supervise`).
            Ending::DiskQuota | Ending::TimedOut => {
                return Err(deps_failed(
                    format!(
                        "installing {} took longer than {INSTALL_TIMEOUT:?}",
                        pkgs.join(" ")
                    ),
                    &log,
                ));
            }
            Ending::Cancelled => {
                return Err(Frame::Exit {
                    outcome: Outcome::Cancelled,
                    exit_code: None,
                    output: None,
                    output_error: None,
                    run_ms: 0.0,
                });
            }
        }
    }
    Ok(())
}

fn deps_failed(message: String, log: &Tail) -> Frame {
    Frame::Error {
        code: ErrorCode::DepsInstallFailed,
        message,
        log: log.text(),
    }
}

/// Runs one install step in the sandbox, its stdout and stderr combined into
/// `log`.
fn run_logged(
    agent: &Agent,
    ex: &Exchange,
    argv: &[String],
    env: &std::collections::BTreeMap<String, String>,
    deadline: Instant,
    log: &mut Tail,
) -> io::Result<Ending> {
    let (mut reader, writer) = io::pipe()?;
    // `cmd` holds the write ends: it drops at the end of this block, so the
    // pipe ends with the process.
    let mut child = {
        let mut cmd = agent.sandbox.command(&agent.layout, argv, env)?;
        cmd.stdin(Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer);
        Process::Child(agent.sandbox.spawn(cmd)?)
    };
    let gen_ = ex.next_gen();
    let tx = ex.events_tx.clone();
    let (tail_tx, tail_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("install-log".into())
        .spawn(move || {
            let mut tail = Tail::new(MAX_INSTALL_LOG);
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                tail.push(&buf[..n]);
            }
            let _ = tail_tx.send(tail);
            let _ = tx.send(crate::run::Event::Eof(gen_));
        })?;
    let job = agent.register(child.id());
    let ending = supervise(
        &agent.sandbox,
        &mut child,
        deadline,
        &ex.events,
        gen_,
        1,
        None,
    );
    agent.unregister(job);
    // Sent before the pipe's end was reported, so normally already there.
    if let Ok(tail) = tail_rx.recv_timeout(Duration::from_millis(100)) {
        log.push(&tail.buf);
    }
    Ok(ending)
}

/// The last `cap` bytes written to it.
#[derive(Debug)]
struct Tail {
    cap: usize,
    buf: Vec<u8>,
}

impl Tail {
    fn new(cap: usize) -> Self {
        Tail {
            cap,
            buf: Vec::new(),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > self.cap {
            let cut = self.buf.len() - self.cap;
            self.buf.drain(..cut);
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_owner(_: &Path) -> io::Result<()> {
        Ok(())
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hearth-bind-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn safe_join_refuses_escapes() {
        let base = temp_dir("join");
        assert_eq!(
            safe_join(&base, "a/b.py", &no_owner).unwrap(),
            base.join("a/b.py")
        );
        assert!(base.join("a").is_dir());
        assert_eq!(
            safe_join(&base, "./c.py", &no_owner).unwrap(),
            base.join("c.py")
        );
        for bad in ["", "/etc/passwd", "../x", "a/../../x", ".", "a/.."] {
            assert!(
                safe_join(&base, bad, &no_owner).is_err(),
                "{bad:?} accepted"
            );
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn writes_never_follow_links_a_job_left() {
        let base = temp_dir("links");
        let outside = temp_dir("links-outside");
        std::os::unix::fs::symlink(&outside, base.join("d")).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), base.join("f")).unwrap();
        let target = safe_join(&base, "d/x.py", &no_owner).unwrap();
        write_fresh(&target, b"1").unwrap();
        write_fresh(&safe_join(&base, "f", &no_owner).unwrap(), b"2").unwrap();
        assert!(!outside.join("x.py").exists() && !outside.join("f").exists());
        assert_eq!(std::fs::read(base.join("d/x.py")).unwrap(), b"1");
        assert_eq!(std::fs::read(base.join("f")).unwrap(), b"2");
        std::fs::remove_dir_all(&base).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn the_input_is_rewritten_in_place_only_while_it_is_the_agents_file() {
        use std::os::unix::fs::MetadataExt as _;
        let base = temp_dir("input");
        let outside = temp_dir("input-outside");
        let path = base.join("input.json");
        let ino = |p: &Path| std::fs::symlink_metadata(p).unwrap().ino();
        let mut last = None;
        write_input(&path, b"{\"long\": true}", &mut last).unwrap();
        let first = ino(&path);
        write_input(&path, b"1", &mut last).unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"1",
            "rewritten and cut to length"
        );
        assert_eq!(ino(&path), first, "the same file");
        for (content, what) in [(&b"123"[..], "grown"), (b"abc", "same length")] {
            write_input(&path, content, &mut last).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), content, "{what}");
        }
        assert_eq!(ino(&path), first, "still the same file");

        // A link left in its place is replaced, not followed.
        std::fs::write(outside.join("f"), b"theirs").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), &path).unwrap();
        write_input(&path, b"2", &mut last).unwrap();
        assert_eq!(std::fs::read(outside.join("f")).unwrap(), b"theirs");
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(std::fs::read(&path).unwrap(), b"2");

        // A second name for the file: the other name keeps what it had.
        std::fs::hard_link(&path, outside.join("g")).unwrap();
        write_input(&path, b"3", &mut last).unwrap();
        assert_eq!(std::fs::read(outside.join("g")).unwrap(), b"2");
        assert_eq!(std::fs::read(&path).unwrap(), b"3");
        assert_ne!(ino(&path), ino(&outside.join("g")));

        // Another file in its place, or a mode changed: a new file.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"other, longer").unwrap();
        write_input(&path, b"4", &mut last).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"4");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_input(&path, b"5", &mut last).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"5");
        assert_ne!(
            std::fs::symlink_metadata(&path).unwrap().mode() & 0o777,
            0o600
        );
        std::fs::remove_dir_all(&base).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn tail_keeps_the_end() {
        let mut t = Tail::new(4);
        t.push(b"abc");
        t.push(b"def");
        assert_eq!(t.text(), "cdef");
    }
}
