//! Resident sandboxes: one bubblewrap sandbox serves job after job of its pod.
//!
//! Building a sandbox (namespaces, a dozen mounts, tearing them down again)
//! costs more than a short job itself, so a pod keeps its sandbox: inside it
//! the agent binary runs as a small supervisor ([`serve_jobs`]) that reads
//! one job at a time from its stdin, spawns it, forwards its stdout and
//! stderr as frames on its own stdout (two forwarding threads kept from job
//! to job), and reports how it ended. On the agent's side one thread per
//! sandbox reads the frames and cuts the job's lines straight into the
//! service's stream ([`LineSink`]): a job costs the agent no thread of its
//! own beyond its connection's. A job that
//! leaves a process behind, times out or is cancelled ends its sandbox (and
//! with its pid namespace every process in it); the next job gets a fresh
//! one. Between jobs the supervisor empties `/tmp` and `/dev/shm`, so each
//! job starts as it would in a new sandbox; `/work` and `/venvs` are the
//! pod's, as before.
//!
//! Frames from the supervisor: a tag byte, a little-endian `u32` length and
//! the payload. `R` ready; `o`/`e` a chunk of the job's stdout/stderr;
//! `O`/`E` that stream's end; `x` the end: the raw wait status (`i32` LE)
//! and a byte, 1 if processes were left behind.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::run::LineSink;
use crate::serve::lock;

/// First argument that turns the agent binary into the supervisor.
pub const SERVE_JOBS: &str = "serve-jobs";

/// How long a job waits for a sandbox still being built.
const READY_WAIT: Duration = Duration::from_secs(5);
/// The fixed-size header before a job message: its length, in decimal.
const HEADER_LEN: usize = 16;
/// How long the supervisor waits for a job's pipes to drain after it ended.
const DRAIN_WAIT: Duration = Duration::from_millis(500);
/// What an empty pipe takes without blocking its writer, however low the
/// system's per-user pipe limits have pushed its capacity (one page).
const PIPE_MIN_CAPACITY: usize = 4096;
/// How much of the supervisor's frames the agent reads at once.
const FRAME_BUFFER: usize = 64 * 1024;
/// Directories emptied after every job.
const SCRATCH: [&str; 2] = ["/tmp", "/dev/shm"];

const READY: u8 = b'R';
const STDOUT: u8 = b'o';
const STDERR: u8 = b'e';
const STDOUT_END: u8 = b'O';
const STDERR_END: u8 = b'E';
const EXIT: u8 = b'x';

/// How a job in a resident sandbox ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub status: ExitStatus,
    /// Processes of the job outlived it (the sandbox must go).
    pub leftovers: bool,
}

/// The current job's receivers of the supervisor's frames.
#[derive(Debug, Default)]
struct Route {
    /// The supervisor's stdout ended: nothing will be routed any more.
    closed: bool,
    ready: Option<Sender<()>>,
    stdout: Option<LineSink>,
    stderr: Option<LineSink>,
    exit: Option<Sender<Exit>>,
    /// Told when the job's end arrives, so its watcher need not poll for it.
    wake: Option<Sender<crate::run::Event>>,
}

/// A sandbox with its supervisor, built ahead or kept from the last job.
#[derive(Debug)]
pub struct Resident {
    child: Child,
    stdin: ChildStdin,
    route: Arc<Mutex<Route>>,
    ready: Receiver<()>,
    is_ready: bool,
}

/// Where a job in a resident sandbox reports its end.
#[derive(Debug)]
pub struct ExitWatch {
    rx: Receiver<Exit>,
    seen: Option<Exit>,
}

impl Resident {
    /// Takes over a spawned supervisor (stdin and stdout piped).
    pub fn new(mut child: Child) -> io::Result<Self> {
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("the supervisor has no pipes"));
        };
        let (ready_tx, ready) = mpsc::channel();
        let route = Arc::new(Mutex::new(Route {
            ready: Some(ready_tx),
            ..Route::default()
        }));
        let demux = Arc::clone(&route);
        std::thread::Builder::new()
            .name("sandbox-frames".into())
            .spawn(move || demultiplex(stdout, &demux))?;
        Ok(Resident {
            child,
            stdin,
            route,
            ready,
            is_ready: false,
        })
    }

    /// The pid of the sandbox (bubblewrap): killing it ends every process in it.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits until the supervisor is ready for a job.
    ///
    /// # Errors
    /// The sandbox never got ready; discard it.
    pub fn wait_ready(&mut self) -> io::Result<()> {
        if !self.is_ready {
            self.ready
                .recv_timeout(READY_WAIT)
                .map_err(|_| io::Error::other("the sandbox did not get ready"))?;
            self.is_ready = true;
        }
        Ok(())
    }

    /// Hands a job to the ready supervisor: its output goes to the sinks
    /// (from the thread that reads the supervisor's frames), and `wake` is
    /// told when it ends.
    ///
    /// # Errors
    /// The sandbox is gone; discard it.
    pub fn launch(
        &mut self,
        argv: &[String],
        env: &BTreeMap<String, String>,
        input: &[u8],
        stdout: LineSink,
        stderr: LineSink,
        wake: Sender<crate::run::Event>,
    ) -> io::Result<ExitWatch> {
        let (exit_tx, exit) = mpsc::channel();
        {
            let mut route = lock(&self.route);
            if route.closed {
                return Err(io::Error::other("the sandbox is gone"));
            }
            route.stdout = Some(stdout);
            route.stderr = Some(stderr);
            route.exit = Some(exit_tx);
            route.wake = Some(wake);
        }
        let body = serde_json::to_vec(&serde_json::json!({
            "argv": argv,
            "env": env,
            "stdin": String::from_utf8_lossy(input),
        }))
        .map_err(io::Error::other)?;
        let mut message = format!("{:0width$}\n", body.len(), width = HEADER_LEN - 1).into_bytes();
        message.extend_from_slice(&body);
        self.stdin.write_all(&message)?;
        Ok(ExitWatch {
            rx: exit,
            seen: None,
        })
    }

    /// Ends the sandbox and every process in it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ExitWatch {
    /// How the job ended, once it has. A sandbox that died under the job
    /// reads as the job killed by SIGKILL, with the sandbox to be ended.
    pub fn poll(&mut self) -> Option<Exit> {
        if self.seen.is_none() {
            self.seen = match self.rx.try_recv() {
                Ok(exit) => Some(exit),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => Some(Exit {
                    status: ExitStatus::from_raw(9),
                    leftovers: true,
                }),
            };
        }
        self.seen
    }
}

/// Routes the supervisor's frames to the current job until its stdout ends.
fn demultiplex(stdout: ChildStdout, route: &Mutex<Route>) {
    let mut stdout = io::BufReader::with_capacity(FRAME_BUFFER, stdout);
    let mut header = [0u8; 5];
    let mut payload = Vec::new();
    loop {
        if stdout.read_exact(&mut header).is_err() {
            break;
        }
        let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
        payload.resize(len, 0);
        if stdout.read_exact(&mut payload).is_err() {
            break;
        }
        let mut r = lock(route);
        match header[0] {
            READY => {
                if let Some(tx) = r.ready.take() {
                    let _ = tx.send(());
                }
            }
            STDOUT => {
                if let Some(sink) = &mut r.stdout {
                    sink.feed(&payload);
                }
            }
            STDERR => {
                if let Some(sink) = &mut r.stderr {
                    sink.feed(&payload);
                }
            }
            STDOUT_END => r.stdout.take().map_or((), LineSink::end),
            STDERR_END => r.stderr.take().map_or((), LineSink::end),
            EXIT if len == 5 => {
                let raw = i32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]);
                if let Some(tx) = r.exit.take() {
                    let _ = tx.send(Exit {
                        status: ExitStatus::from_raw(raw),
                        leftovers: payload[4] != 0,
                    });
                }
                if let Some(wake) = r.wake.take() {
                    let _ = wake.send(crate::run::Event::Exited);
                }
            }
            tag => eprintln!("hearth-agent: unknown sandbox frame {tag}"),
        }
    }
    // The sandbox is gone: every stream of the job ends, and no job can start.
    let mut r = lock(route);
    for sink in [r.stdout.take(), r.stderr.take()].into_iter().flatten() {
        sink.end();
    }
    *r = Route {
        closed: true,
        ..Route::default()
    };
}

// ---- the supervisor, inside the sandbox --------------------------------------

/// A job message.
#[derive(Debug, PartialEq, Eq)]
struct Job {
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    stdin: String,
}

impl Job {
    fn parse(body: &[u8]) -> Option<Job> {
        let value: serde_json::Value = serde_json::from_slice(body).ok()?;
        let argv = value["argv"]
            .as_array()?
            .iter()
            .map(|a| a.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()?;
        let env = value["env"]
            .as_object()?
            .iter()
            .map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect::<Option<BTreeMap<_, _>>>()?;
        let stdin = value["stdin"].as_str().unwrap_or_default().to_owned();
        Some(Job { argv, env, stdin })
    }
}

/// Writes frames to the supervisor's stdout, whole under the lock.
#[derive(Clone)]
struct Frames(Arc<Mutex<io::Stdout>>);

impl Frames {
    fn send(&self, tag: u8, payload: &[u8]) -> io::Result<()> {
        let len = u32::try_from(payload.len()).map_err(io::Error::other)?;
        let mut out = lock(&self.0);
        let mut header = [tag, 0, 0, 0, 0];
        header[1..].copy_from_slice(&len.to_le_bytes());
        out.write_all(&header)?;
        out.write_all(payload)?;
        out.flush()
    }
}

/// The supervisor mode: `hearth-agent serve-jobs`, inside the sandbox. Runs
/// the jobs read from stdin one at a time until stdin ends.
pub fn serve_jobs() -> ExitCode {
    let frames = Frames(Arc::new(Mutex::new(io::stdout())));
    if frames.send(READY, &[]).is_err() {
        return ExitCode::from(126);
    }
    let forwarders = match Forwarders::start(&frames) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("hearth-agent {SERVE_JOBS}: {e}");
            return ExitCode::from(126);
        }
    };
    let mut stdin = io::stdin().lock();
    loop {
        let job = match read_job(&mut stdin) {
            Ok(job) => job,
            // The agent closed the sandbox.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hearth-agent {SERVE_JOBS}: {e}");
                return ExitCode::from(126);
            }
        };
        match run_job(&job, &frames, &forwarders) {
            Ok(true) => empty_scratch(),
            // Left processes behind: the agent ends this sandbox.
            Ok(false) => {}
            Err(e) => {
                eprintln!("hearth-agent {SERVE_JOBS}: {e}");
                return ExitCode::from(126);
            }
        }
    }
}

fn read_job(stdin: &mut impl Read) -> io::Result<Job> {
    let mut header = [0u8; HEADER_LEN];
    stdin.read_exact(&mut header)?;
    let len: usize = std::str::from_utf8(&header)
        .ok()
        .and_then(|h| h.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad job header"))?;
    let mut body = vec![0u8; len];
    stdin.read_exact(&mut body)?;
    Job::parse(&body).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad job"))
}

/// Runs one job; true when it left nothing behind.
fn run_job(job: &Job, frames: &Frames, forwarders: &Forwarders) -> io::Result<bool> {
    let Some((program, args)) = job.argv.split_first() else {
        return refuse(frames, "empty command", 126);
    };
    // Found here on the job's own PATH, the program is started with
    // posix_spawn (a vfork) rather than a fork of this supervisor: std only
    // forks when it must search a PATH the child's environment changes.
    let resolved = job
        .env
        .get("PATH")
        .and_then(|path| crate::sandbox::find_in(program, path.as_ref()));
    let spawned = Command::new(resolved.as_deref().unwrap_or(program.as_ref()))
        .args(args)
        .env_clear()
        .envs(&job.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let code = if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return refuse(frames, &format!("cannot run {program}: {e}"), code);
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        if job.stdin.len() <= PIPE_MIN_CAPACITY {
            // Fits in an empty pipe: written at once, whether or not the job
            // ever reads it. Dropping the pipe closes it.
            let _ = stdin.write_all(job.stdin.as_bytes());
        } else {
            let input = job.stdin.clone().into_bytes();
            // A job that never reads its stdin must not block the supervisor.
            std::thread::Builder::new()
                .name("stdin".into())
                .spawn(move || {
                    let _ = stdin.write_all(&input);
                })?;
        }
    }
    let pipes = [
        child
            .stdout
            .take()
            .map(|p| std::fs::File::from(std::os::fd::OwnedFd::from(p))),
        child
            .stderr
            .take()
            .map(|p| std::fs::File::from(std::os::fd::OwnedFd::from(p))),
    ];
    let pumps = forwarders.forward(pipes);
    let status = child.wait()?;
    let left = others_alive();
    let mut clean = left.is_empty();
    if !clean {
        // Processes the job left may hold its pipes: end them, so everything
        // the job wrote is forwarded before its end is reported. The agent
        // ends the sandbox anyway (a process may have escaped this).
        kill_all(left);
    }
    // A forwarder still held by a pipe would hold up the next job's stream:
    // the sandbox goes.
    clean &= forwarders.drained(pumps, Instant::now() + DRAIN_WAIT);
    let mut payload = status.into_raw().to_le_bytes().to_vec();
    payload.push(u8::from(!clean));
    frames.send(EXIT, &payload)?;
    Ok(clean)
}

/// Reports a job that could not start as a shell would: the message on
/// stderr and exit code `code`.
fn refuse(frames: &Frames, message: &str, code: i32) -> io::Result<bool> {
    frames.send(STDERR, format!("hearth-agent: {message}\n").as_bytes())?;
    frames.send(STDOUT_END, &[])?;
    frames.send(STDERR_END, &[])?;
    let mut payload = (code << 8).to_le_bytes().to_vec();
    payload.push(0);
    frames.send(EXIT, &payload)?;
    Ok(true)
}

/// The supervisor's two forwarding threads, kept from job to job: each
/// forwards a job's pipe as frames to its end, then says so with the job's
/// number (a late word from an earlier job is not this one's).
struct Forwarders {
    pipes: [Sender<(u64, std::fs::File)>; 2],
    done: Receiver<u64>,
    job: std::cell::Cell<u64>,
}

impl Forwarders {
    fn start(frames: &Frames) -> io::Result<Forwarders> {
        let (done_tx, done) = mpsc::channel();
        let spawn = |tag: u8, end: u8| -> io::Result<Sender<(u64, std::fs::File)>> {
            let (tx, rx) = mpsc::channel::<(u64, std::fs::File)>();
            let (frames, done) = (frames.clone(), done_tx.clone());
            std::thread::Builder::new()
                .name("forward".into())
                .spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    for (job, mut pipe) in rx {
                        loop {
                            match pipe.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    if frames.send(tag, &buf[..n]).is_err() {
                                        break;
                                    }
                                }
                                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                                Err(_) => break,
                            }
                        }
                        let _ = frames.send(end, &[]);
                        let _ = done.send(job);
                    }
                })?;
            Ok(tx)
        };
        Ok(Forwarders {
            pipes: [spawn(STDOUT, STDOUT_END)?, spawn(STDERR, STDERR_END)?],
            done,
            job: std::cell::Cell::new(0),
        })
    }

    /// Hands a new job's stdout and stderr to the forwarders; returns how
    /// many will report their end.
    fn forward(&self, pipes: [Option<std::fs::File>; 2]) -> usize {
        let job = self.job.get() + 1;
        self.job.set(job);
        let mut pumps = 0;
        for (to, pipe) in self.pipes.iter().zip(pipes) {
            if let Some(pipe) = pipe {
                pumps += usize::from(to.send((job, pipe)).is_ok());
            }
        }
        pumps
    }

    /// Waits until the current job's `pumps` pipes are forwarded to their
    /// end, until `give_up`; false if they were not.
    fn drained(&self, pumps: usize, give_up: Instant) -> bool {
        let job = self.job.get();
        let mut left = pumps;
        while left > 0 {
            match self
                .done
                .recv_timeout(give_up.saturating_duration_since(Instant::now()))
            {
                Ok(j) if j == job => left -= 1,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        true
    }
}

/// Live processes of the sandbox other than its init (pid 1) and this
/// supervisor: what a job left behind.
fn others_alive() -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != 1 && pid != me)
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
            })
        })
        .collect()
}

/// Kills `pids` and whatever they start meanwhile, for a moment.
fn kill_all(mut pids: Vec<u32>) {
    let give_up = Instant::now() + DRAIN_WAIT;
    while !pids.is_empty() && Instant::now() < give_up {
        let _ = Command::new("kill")
            .arg("-9")
            .arg("--")
            .args(pids.iter().map(u32::to_string))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        pids = others_alive();
    }
}

/// Empties the scratch directories a job may have written.
fn empty_scratch() {
    for dir in SCRATCH {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let _ = match entry.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
                _ => std::fs::remove_file(&path),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Event;
    use hearth_core::agent::{Frame, Stream};
    use std::io::BufRead;

    #[test]
    fn job_messages_round_trip() {
        let env: BTreeMap<String, String> = [("PATH".to_owned(), "/bin".to_owned())].into();
        let argv = vec!["python3".to_owned(), "-c".to_owned(), "print(1)".to_owned()];
        let body = serde_json::to_vec(
            &serde_json::json!({ "argv": argv, "env": env, "stdin": "{\"a\": 1}" }),
        )
        .unwrap();
        assert_eq!(
            Job::parse(&body),
            Some(Job {
                argv,
                env,
                stdin: "{\"a\": 1}".to_owned()
            })
        );
        assert_eq!(Job::parse(br#"{"argv": [1], "env": {}}"#), None);
        assert_eq!(Job::parse(b"nope"), None);
    }

    fn fake_supervisor(script: &str) -> Resident {
        let child = Command::new("python3")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 on PATH");
        Resident::new(child).unwrap()
    }

    /// Hands `true` with input `{}` to the sandbox, its streams of generation `gen_`.
    fn launch_true(
        r: &mut Resident,
        ex: &crate::serve::Exchange,
        gen_: u64,
    ) -> io::Result<ExitWatch> {
        let sink = |stream| LineSink::new(stream, 1 << 20, ex, gen_);
        r.launch(
            &["true".to_owned()],
            &BTreeMap::new(),
            b"{}",
            sink(Stream::Stdout),
            sink(Stream::Stderr),
            ex.events_tx.clone(),
        )
    }

    #[test]
    fn frames_from_the_supervisor_reach_the_job() {
        // Speaks the supervisor's side of the protocol for one job.
        let mut r = fake_supervisor(
            r#"
import sys, struct
out = sys.stdout.buffer
def frame(tag, payload=b""):
    out.write(tag + struct.pack("<I", len(payload)) + payload)
    out.flush()
frame(b"R")
body = sys.stdin.buffer.read(int(sys.stdin.buffer.read(16)))
frame(b"o", b"got ")
frame(b"o", body[body.index(b'"stdin"'):][:7] + b"\nnext")
frame(b"O")
frame(b"e", b"warn")
frame(b"E")
frame(b"x", struct.pack("<i", 3 << 8) + b"\x01")
"#,
        );
        let (conn, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let ex = crate::serve::Exchange::new(crate::serve::Conn::Unix(conn));
        r.wait_ready().unwrap();
        let mut exit = launch_true(&mut r, &ex, 7).unwrap();
        let mut ends = 0;
        let mut woken = false;
        while ends < 2 || !woken {
            match ex.events.recv_timeout(Duration::from_secs(5)).unwrap() {
                Event::Eof(7) => ends += 1,
                Event::Exited => woken = true,
                other => panic!("{other:?}"),
            }
        }
        let exit = exit.poll().unwrap();
        assert_eq!(exit.status.code(), Some(3));
        assert!(exit.leftovers);
        drop(ex);
        let frames: Vec<Frame> = io::BufReader::new(theirs)
            .lines()
            .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
            .collect();
        let line = |stream, line: &str| Frame::Line {
            stream,
            line: line.to_owned(),
        };
        assert_eq!(
            frames,
            [
                line(Stream::Stdout, "got \"stdin\""),
                line(Stream::Stdout, "next"),
                line(Stream::Stderr, "warn")
            ]
        );
        // Once the supervisor is gone, the sandbox takes no further job.
        let _ = r.child.wait();
        let (conn, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let ex = crate::serve::Exchange::new(crate::serve::Conn::Unix(conn));
        let refused = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(5));
            launch_true(&mut r, &ex, 8).is_err()
        });
        assert!(refused);
        r.kill();
    }

    #[test]
    fn a_sandbox_that_dies_before_it_is_ready_refuses_the_job() {
        let mut r = fake_supervisor("pass");
        assert!(r.wait_ready().is_err());
        r.kill();
    }
}
