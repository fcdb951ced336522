//! Resident sandboxes: one bubblewrap sandbox serves job after job of its pod.
//!
//! Building a sandbox (namespaces, a dozen mounts, tearing them down again)
//! costs more than a short job itself, so a pod keeps its sandbox: inside it
//! the agent binary runs as a small supervisor ([`serve_jobs`]) that reads
//! one job at a time from its stdin, spawns it, forwards its stdout and
//! stderr as frames on its own stdout, and reports how it ended: one thread
//! that waits on the job's pipes and its exit at once, and tells whether it
//! left a process behind by adopting its orphans (see [`crate::sys`]). On
//! the agent's side one thread per
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
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
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
/// How much of a job's pipe the supervisor reads at once.
const PIPE_READ: usize = 64 * 1024;
/// How often the supervisor looks for a job's exit where the kernel cannot
/// tell it (no pidfd).
const EXIT_POLL: Duration = Duration::from_millis(5);
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
    // The sandbox is gone: every stream of the job ends, its watcher is told
    // (it finds the job killed), and no job can start.
    let mut r = lock(route);
    for sink in [r.stdout.take(), r.stderr.take()].into_iter().flatten() {
        sink.end();
    }
    let wake = r.wake.take();
    *r = Route {
        closed: true,
        ..Route::default()
    };
    drop(r);
    if let Some(wake) = wake {
        let _ = wake.send(crate::run::Event::Exited);
    }
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

/// Frames for the agent, gathered and then written at once: what one wake of
/// the supervisor turned up (a job's end is three frames) costs one write.
#[derive(Debug, Default)]
struct Frames(Vec<u8>);

impl Frames {
    fn push(&mut self, tag: u8, payload: &[u8]) {
        let len = u32::try_from(payload.len()).expect("a frame holds less than 4 GiB");
        self.0.push(tag);
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.extend_from_slice(payload);
    }

    /// Writes the frames gathered to `out` and forgets them.
    fn send(&mut self, out: &mut impl Write) -> io::Result<()> {
        if !self.0.is_empty() {
            out.write_all(&self.0)?;
            out.flush()?;
            self.0.clear();
        }
        Ok(())
    }
}

/// The supervisor mode: `hearth-agent serve-jobs`, inside the sandbox. Runs
/// the jobs read from stdin one at a time until stdin ends.
pub fn serve_jobs() -> ExitCode {
    // A job's orphans become this process's children, so whether it left a
    // process behind is one `waitpid` away (see `left_behind`).
    let adopts = crate::sys::become_subreaper().is_ok();
    let mut out = io::stdout().lock();
    let mut frames = Frames::default();
    frames.push(READY, &[]);
    if frames.send(&mut out).is_err() {
        return ExitCode::from(126);
    }
    let mut stdin = io::stdin().lock();
    let mut buf = vec![0u8; PIPE_READ];
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
        let mut run = Run {
            out: &mut out,
            frames: &mut frames,
            buf: &mut buf,
            adopts,
        };
        match run.job(&job) {
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

/// What the supervisor runs a job with: the agent's end of the frames, the
/// frames not yet written, a buffer for the job's pipes, and whether a job's
/// orphans become this process's children.
struct Run<'a, W> {
    out: &'a mut W,
    frames: &'a mut Frames,
    buf: &'a mut [u8],
    adopts: bool,
}

impl<W: Write> Run<'_, W> {
    /// Runs one job, forwarding its output as it comes, and reports its end;
    /// true when it left nothing behind.
    ///
    /// One thread waits on everything at once: the job's stdout and stderr
    /// and its exit (a pidfd; where the kernel has none, a look every
    /// `EXIT_POLL`). The job's end goes out in the same write as the last of
    /// its output.
    fn job(&mut self, job: &Job) -> io::Result<bool> {
        let Some((program, args)) = job.argv.split_first() else {
            return self.refuse("empty command", 126);
        };
        // Found here on the job's own PATH, the program is started with
        // posix_spawn (a vfork) rather than a fork of this supervisor: std
        // only forks when it must search a PATH the child's environment
        // changes.
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
                return self.refuse(&format!("cannot run {program}: {e}"), code);
            }
        };
        if let Some(stdin) = child.stdin.take() {
            feed_stdin(stdin, job.stdin.as_bytes())?;
        }
        let mut pipes = [
            child.stdout.take().map(|p| File::from(OwnedFd::from(p))),
            child.stderr.take().map(|p| File::from(OwnedFd::from(p))),
        ];
        let exit = crate::sys::pidfd_open(child.id()).ok();
        let mut ended: Option<(ExitStatus, Instant)> = None;
        let mut clean = true;
        let status = loop {
            let timeout = match (ended, &exit) {
                (Some((status, since)), _) => {
                    if pipes.iter().all(Option::is_none) {
                        break status;
                    }
                    // A pipe still open after the job and whatever it left
                    // behind are gone (or killed): held by something that
                    // escaped; the sandbox goes.
                    let left = (since + DRAIN_WAIT).saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        clean = false;
                        break status;
                    }
                    Some(left)
                }
                (None, Some(_)) => None,
                (None, None) => Some(EXIT_POLL),
            };
            let ready = self.wait(
                &mut pipes,
                exit.as_ref().filter(|_| ended.is_none()),
                timeout,
            )?;
            if ended.is_none()
                && (ready || exit.is_none())
                && let Some(status) = child.try_wait()?
            {
                if left_behind(self.adopts) {
                    // Processes the job left may hold its pipes: end them, so
                    // everything the job wrote is forwarded before its end is
                    // reported. The agent ends the sandbox anyway (a process
                    // may have escaped this).
                    clean = false;
                    kill_leftovers(self.adopts);
                }
                ended = Some((status, Instant::now()));
            }
            self.frames.send(self.out)?;
        };
        self.end(status.into_raw(), clean)
    }

    /// Reports the job's end (both streams' and its exit: the raw wait
    /// status, and whether it left nothing behind) with whatever output is
    /// still gathered, in one write; returns `clean`.
    fn end(&mut self, status: i32, clean: bool) -> io::Result<bool> {
        self.frames.push(STDOUT_END, &[]);
        self.frames.push(STDERR_END, &[]);
        let mut payload = status.to_le_bytes().to_vec();
        payload.push(u8::from(!clean));
        self.frames.push(EXIT, &payload);
        self.frames.send(self.out)?;
        Ok(clean)
    }

    /// Waits until a pipe or `exit` can be read, or `timeout`; forwards what
    /// the pipes hold as frames and closes those at their end. True when
    /// `exit` is readable (the job exited).
    fn wait(
        &mut self,
        pipes: &mut [Option<File>; 2],
        exit: Option<&OwnedFd>,
        timeout: Option<Duration>,
    ) -> io::Result<bool> {
        let mut fds = Vec::with_capacity(3);
        let mut streams = Vec::with_capacity(2);
        for (i, pipe) in pipes.iter().enumerate() {
            if let Some(pipe) = pipe {
                fds.push(pipe.as_fd());
                streams.push(i);
            }
        }
        if let Some(exit) = exit {
            fds.push(exit.as_fd());
        }
        let mut ready = [false; 3];
        crate::sys::poll_readable(&fds, timeout, &mut ready[..fds.len()])?;
        for (slot, &i) in streams.iter().enumerate() {
            if !ready[slot] {
                continue;
            }
            let Some(mut pipe) = pipes[i].as_ref() else {
                continue;
            };
            match pipe.read(self.buf) {
                Ok(0) => pipes[i] = None,
                Ok(n) => self.frames.push([STDOUT, STDERR][i], &self.buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => pipes[i] = None,
            }
        }
        Ok(exit.is_some() && ready[streams.len()])
    }

    /// Reports a job that could not start as a shell would: the message on
    /// stderr and exit code `code`.
    fn refuse(&mut self, message: &str, code: i32) -> io::Result<bool> {
        self.frames
            .push(STDERR, format!("hearth-agent: {message}\n").as_bytes());
        self.end(code << 8, true)
    }
}

/// Hands `input` to a job's stdin and closes it. Input that fits in an
/// empty pipe is written at once, whether or not the job ever reads it;
/// larger input is written by a thread of its own, so that a job that never
/// reads its stdin blocks nobody. Fails only if that thread cannot start.
pub(crate) fn feed_stdin(mut stdin: ChildStdin, input: &[u8]) -> io::Result<()> {
    if input.len() <= PIPE_MIN_CAPACITY {
        // Dropping the pipe closes it.
        let _ = stdin.write_all(input);
        return Ok(());
    }
    let input = input.to_vec();
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let _ = stdin.write_all(&input);
        })?;
    Ok(())
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

/// Whether a process of the job that just ended (and was reaped) is alive.
/// Where this process `adopts` the job's orphans, every such process
/// descends from a live child of it: reaping the children that exited
/// answers. Elsewhere (the kernel refused the adoption), `/proc` does.
fn left_behind(adopts: bool) -> bool {
    if adopts && let Ok(alive) = crate::sys::reap_children() {
        return alive;
    }
    !others_alive().is_empty()
}

/// Kills what a job left behind, and whatever it starts meanwhile, for a
/// moment; reaps those that are this process's children.
fn kill_leftovers(adopts: bool) {
    let give_up = Instant::now() + DRAIN_WAIT;
    loop {
        for pid in others_alive() {
            let _ = crate::sys::kill(pid);
        }
        std::thread::sleep(Duration::from_millis(1));
        if !left_behind(adopts) || Instant::now() >= give_up {
            return;
        }
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

    /// Counts the writes made to it.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_jobs_end_goes_out_in_one_write() {
        let mut frames = Frames::default();
        let mut out = Writes::default();
        frames.send(&mut out).unwrap();
        assert!(out.0.is_empty(), "nothing gathered, nothing written");
        frames.push(STDOUT, b"hi\n");
        frames.push(STDOUT_END, &[]);
        frames.push(STDERR_END, &[]);
        frames.push(EXIT, &[0, 0, 0, 0, 0]);
        frames.send(&mut out).unwrap();
        assert_eq!(
            out.0,
            [b"o\x03\0\0\0hi\nO\0\0\0\0E\0\0\0\0x\x05\0\0\0\0\0\0\0\0".to_vec()]
        );
        frames.send(&mut out).unwrap();
        assert_eq!(out.0.len(), 1, "sent frames are forgotten");
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
    fn a_sandbox_dying_under_a_job_wakes_its_watcher() {
        // Ready, takes the job, and dies without reporting its end.
        let mut r = fake_supervisor(
            r#"
import sys, struct
sys.stdout.buffer.write(b"R" + struct.pack("<I", 0))
sys.stdout.buffer.flush()
sys.stdin.buffer.read(int(sys.stdin.buffer.read(16)))
"#,
        );
        let (conn, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let ex = crate::serve::Exchange::new(crate::serve::Conn::Unix(conn));
        r.wait_ready().unwrap();
        let mut exit = launch_true(&mut r, &ex, 3).unwrap();
        // Told at once, not at the watcher's next look.
        let mut woken = false;
        while !woken {
            match ex.events.recv_timeout(Duration::from_millis(500)).unwrap() {
                Event::Eof(3) => {}
                Event::Exited => woken = true,
                other => panic!("{other:?}"),
            }
        }
        let exit = exit
            .poll()
            .expect("the end is known once the watcher is woken");
        assert_eq!(exit.status.signal(), Some(9));
        assert!(exit.leftovers, "the sandbox is to be ended");
        r.kill();
    }

    #[test]
    fn a_sandbox_that_dies_before_it_is_ready_refuses_the_job() {
        let mut r = fake_supervisor("pass");
        assert!(r.wait_ready().is_err());
        r.kill();
    }
}
