//! Runs one job: binds it ([`crate::bind`]), spawns its command in the
//! sandbox, streams stdout and stderr as `line` frames while they happen,
//! enforces the timeout and cancellation, and reads the output file.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use hearth_core::ErrorCode;
use hearth_core::agent::{Frame, INPUT_ENV, OUTPUT_ENV, Outcome, Run, Stream};

use crate::args::SandboxKind;
use crate::bind;
use crate::resident::{ExitWatch, Resident};
use crate::sandbox::{self, Inside, Sandbox};
use crate::serve::{Agent, Exchange, Out, error_frame};

/// The most output JSON the agent reads.
const MAX_OUTPUT_BYTES: u64 = 1 << 20;
/// Longer lines are cut into pieces of this size.
const MAX_LINE_BYTES: usize = 64 * 1024;
/// How long to wait for the output pipes to drain once the process is gone.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What the threads of an exchange report to the thread running it.
#[derive(Debug)]
pub enum Event {
    /// The service sent another line or closed its side.
    Cancel,
    /// An output pipe of the process of this generation reached its end.
    Eof(u64),
    /// The job in a resident sandbox ended: look at it again.
    Exited,
}

/// How a supervised process ended.
#[derive(Debug)]
pub enum Ending {
    Exited(ExitStatus),
    /// The pod's directories grew past the disk quota; the tree was killed.
    DiskQuota,
    TimedOut,
    Cancelled,
}

/// Binds and runs `run`; returns the final frame.
pub fn execute(agent: &Arc<Agent>, ex: &Exchange, run: &Run) -> Frame {
    let bound = match bind::bind(agent, ex, run) {
        Ok(b) => b,
        Err(last) => return last,
    };
    let inside = agent.sandbox.inside(&agent.layout);
    let env = job_env(
        &inside,
        &agent.python,
        run,
        bound.venv.as_deref(),
        agent.sandbox.kind() == crate::args::SandboxKind::None,
        std::env::var("CUDA_VISIBLE_DEVICES").ok(),
    );
    // Getting the sandbox (waiting for the one built ahead, or building one)
    // is part of binding, not of the job's own run time.
    let sandbox_start = Instant::now();
    let input = serde_json::to_vec(&run.input).unwrap_or_default();
    let spec = Job {
        argv: &run.command,
        env: &env,
        input,
        max_log_bytes: run.max_log_bytes,
    };
    let started_process = start(agent, ex, &spec, || {
        ex.out.send(&Frame::Bound {
            bind_ms: sandbox_start
                .elapsed()
                .as_secs_f64()
                .mul_add(1000.0, bound.bind_ms),
            deps_cached: bound.deps_cached,
        });
    });
    let started = Instant::now();
    let Started {
        mut process,
        gen_,
        streams,
    } = match started_process {
        Ok(started) => started,
        Err(e) => {
            return error_frame(
                ErrorCode::SpawnFailed,
                format!("cannot start {:?}: {e}", run.command),
            );
        }
    };
    let job = agent.register(process.id());

    let deadline = deadline_after(started, run.timeout_ms);
    let ending = supervise(
        &agent.sandbox,
        &mut process,
        deadline,
        &ex.events,
        gen_,
        streams,
        agent.disk_quota.as_ref(),
    );
    let run_ms = started.elapsed().as_secs_f64() * 1000.0;
    agent.unregister(job);
    agent.end_process(process);

    let (outcome, exit_code) = match ending {
        Ending::DiskQuota => {
            let quota_mib = agent.disk_quota.as_ref().map_or(0, |q| q.bytes >> 20);
            let removed = agent.empty_job_dirs();
            return error_frame(
                ErrorCode::DiskQuotaExceeded,
                format!(
                    "the job wrote more than its pod's disk quota ({quota_mib} MiB) and was \
                     killed; the pod's files {}",
                    match removed {
                        Ok(()) => "were removed".to_owned(),
                        Err(e) => format!("could not all be removed: {e}"),
                    }
                ),
            );
        }
        Ending::Exited(status) => (Outcome::Exited, sandbox::exit_code(status)),
        Ending::TimedOut => (Outcome::TimedOut, None),
        Ending::Cancelled => (Outcome::Cancelled, None),
    };
    let (output, output_error) = read_output(&agent.layout.io.join("output.json"));
    Frame::Exit {
        outcome,
        exit_code,
        output,
        output_error,
        run_ms,
    }
}

/// `timeout_ms` after `start`, saturating (a huge timeout is no timeout).
pub fn deadline_after(start: Instant, timeout_ms: u64) -> Instant {
    const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    start
        .checked_add(Duration::from_millis(timeout_ms).min(FOREVER))
        .unwrap_or(start)
}

/// What [`start`] runs.
struct Job<'a> {
    argv: &'a [String],
    env: &'a BTreeMap<String, String>,
    input: Vec<u8>,
    max_log_bytes: u64,
}

/// A started job: its process, the generation of its output streams and how
/// many of them will report their end.
struct Started {
    process: Process,
    gen_: u64,
    streams: usize,
}

/// Starts the job with its input on stdin: in the pod's resident sandbox
/// (bubblewrap), else as a process of its own. `bound` is called once the
/// sandbox is there, before the job can write a line (the service learns
/// that the job runs before it sees its output).
fn start(agent: &Agent, ex: &Exchange, job: &Job<'_>, bound: impl FnOnce()) -> io::Result<Started> {
    if job.argv.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
    }
    let sinks = |gen_| {
        let sink = |stream| LineSink::new(stream, job.max_log_bytes, ex, gen_);
        (sink(Stream::Stdout), sink(Stream::Stderr))
    };
    if agent.sandbox.kind() == SandboxKind::Bwrap {
        let mut bound = Some(bound);
        let mut last = None;
        // A sandbox kept from an earlier job may have died meanwhile: one retry
        // with a new one. Each try's streams have a generation of their own,
        // so the ends of a failed try's streams count for nothing.
        for _ in 0..2 {
            let mut sandbox = match agent.take_resident() {
                Some(r) => r,
                None => agent.sandbox.prepare(&agent.layout)?,
            };
            if let Err(e) = sandbox.wait_ready() {
                sandbox.kill();
                last = Some(e);
                continue;
            }
            if let Some(bound) = bound.take() {
                bound();
            }
            let gen_ = ex.next_gen();
            let (stdout, stderr) = sinks(gen_);
            let launched = sandbox.launch(
                job.argv,
                job.env,
                &job.input,
                stdout,
                stderr,
                ex.events_tx.clone(),
            );
            match launched {
                Ok(exit) => {
                    let process = Process::Resident {
                        sandbox,
                        exit,
                        ended: false,
                    };
                    return Ok(Started {
                        process,
                        gen_,
                        streams: 2,
                    });
                }
                Err(e) => {
                    sandbox.kill();
                    last = Some(e);
                }
            }
        }
        return Err(last.unwrap_or_else(|| io::Error::other("no sandbox")));
    }
    let mut cmd = agent.sandbox.command(&agent.layout, job.argv, job.env)?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = agent.sandbox.spawn(cmd)?;
    if let Some(stdin) = child.stdin.take() {
        let _ = crate::resident::feed_stdin(stdin, &job.input);
    }
    bound();
    let gen_ = ex.next_gen();
    let (stdout, stderr) = sinks(gen_);
    let mut streams = 0;
    if let Some(pipe) = child.stdout.take() {
        streams += spawn_pump(pipe, stdout);
    }
    if let Some(pipe) = child.stderr.take() {
        streams += spawn_pump(pipe, stderr);
    }
    Ok(Started {
        process: Process::Child(child),
        gen_,
        streams,
    })
}

/// A running job: a process of its own, or a job in a resident sandbox.
#[derive(Debug)]
pub enum Process {
    Child(Child),
    Resident {
        sandbox: Resident,
        exit: ExitWatch,
        /// The sandbox was ended (timeout, cancel, leftovers).
        ended: bool,
    },
}

impl Process {
    /// The pid that ends the job's tree when killed.
    pub fn id(&self) -> u32 {
        match self {
            Process::Child(c) => c.id(),
            Process::Resident { sandbox, .. } => sandbox.id(),
        }
    }

    /// Whether its exit is found only by asking (a resident sandbox says so
    /// with [`Event::Exited`]).
    fn polled(&self) -> bool {
        matches!(self, Process::Child(_))
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Process::Child(c) => c.try_wait(),
            Process::Resident { exit, .. } => Ok(exit.poll().map(|e| e.status)),
        }
    }

    fn kill_tree(&mut self, sandbox: &Sandbox) {
        match self {
            Process::Child(c) => sandbox.kill_tree(c),
            Process::Resident {
                sandbox: r, ended, ..
            } => {
                r.kill();
                *ended = true;
            }
        }
    }

    /// After the job exited by itself: ends what it left behind (in a
    /// resident sandbox, the whole sandbox).
    fn kill_leftovers(&mut self, sandbox: &Sandbox) {
        match self {
            Process::Child(c) => sandbox.kill_leftovers(c.id()),
            Process::Resident {
                sandbox: r,
                exit,
                ended,
            } => {
                if exit.poll().is_none_or(|e| e.leftovers) {
                    r.kill();
                    *ended = true;
                }
            }
        }
    }

    /// The resident sandbox, if it can take the next job.
    pub fn into_reusable(self) -> Option<Resident> {
        match self {
            Process::Resident {
                sandbox,
                ended: false,
                ..
            } => Some(sandbox),
            _ => None,
        }
    }
}

/// The job's whole environment: nothing of the agent's leaks in.
pub fn job_env(
    inside: &Inside,
    python: &Path,
    run: &Run,
    venv: Option<&str>,
    tmpdir: bool,
    cuda_visible_devices: Option<String>,
) -> BTreeMap<String, String> {
    let venv_dir = venv.map(|key| inside.venvs.join(key));
    let venv_bin = venv_dir.as_ref().map(|dir| dir.join("bin"));
    let mut env = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        env.insert(k.to_owned(), v);
    };
    set("PATH", sandbox::job_path(venv_bin.as_deref(), python));
    set("HOME", inside.work.display().to_string());
    set("LANG", "C.UTF-8".to_owned());
    set("HEARTH_JOB_ID", run.job_id.clone());
    set(INPUT_ENV, inside.input().display().to_string());
    set(OUTPUT_ENV, inside.output().display().to_string());
    if tmpdir {
        set("TMPDIR", inside.tmp.display().to_string());
    }
    if let Some(dir) = &venv_dir {
        set("VIRTUAL_ENV", dir.display().to_string());
    }
    if let Some(rank) = &run.topology {
        set("RANK", rank.rank.to_string());
        set("WORLD_SIZE", rank.world_size.to_string());
        set("HEARTH_PEERS", rank.peers.join(","));
        set("MASTER_ADDR", rank.master_addr.clone());
        set("MASTER_PORT", rank.master_port.to_string());
    }
    if let Some(devices) = cuda_visible_devices {
        set("CUDA_VISIBLE_DEVICES", devices);
    }
    env.extend(run.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// A disk quota over some directories, checked while a job runs (as the
/// kubelet checks ephemeral storage): a job may overshoot it by what it
/// writes between two checks.
#[derive(Debug)]
pub struct DiskQuota {
    pub dirs: Vec<PathBuf>,
    pub bytes: u64,
}

/// What the disk quota counts for an entry at the least: one block.
const ENTRY_BYTES: u64 = 4096;
/// How often a running job's disk use is measured.
const DISK_CHECK: Duration = Duration::from_millis(250);
/// How often a job in a resident sandbox is looked at without a word from it.
const RESIDENT_LOOK: Duration = Duration::from_secs(1);

impl DiskQuota {
    /// Whether the directories hold more than the quota: allocated blocks,
    /// so sparse files count for what they use, and at least one block per
    /// entry, so that a job cannot fill the file system's inodes with empty
    /// files or links (links are not followed). A directory that cannot be
    /// read (other than one deleted meanwhile) counts as over the quota: a
    /// job must not hide what it wrote, say below a path too long to open.
    /// Files deleted from the directories' file systems that the processes
    /// `pids` still hold open count too: a job must not hide what it writes
    /// by deleting the file and writing on.
    pub fn exceeded(&self, pids: &[u32]) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        let devs: Vec<u64> = self
            .dirs
            .iter()
            .filter_map(|d| std::fs::metadata(d).ok())
            .map(|m| m.dev())
            .collect();
        let mut used = deleted_but_open(pids, &devs);
        let mut stack: Vec<PathBuf> = self.dirs.clone();
        while let Some(dir) = stack.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(_) => return true,
            };
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                let size = meta.blocks().saturating_mul(512).max(ENTRY_BYTES);
                used = used.saturating_add(size);
                if used > self.bytes {
                    return true;
                }
                if meta.is_dir() {
                    stack.push(entry.path());
                }
            }
        }
        false
    }
}

/// Blocks of the regular files on the file systems `devs` that processes
/// `pids` hold open although no name is left to find them by (deleted,
/// or never linked: `O_TMPFILE`), each file counted once.
fn deleted_but_open(pids: &[u32], devs: &[u64]) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let mut seen = std::collections::HashSet::new();
    let mut bytes: u64 = 0;
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            // The open file itself (the link is followed).
            let Ok(meta) = std::fs::metadata(fd.path()) else {
                continue;
            };
            if meta.is_file()
                && meta.nlink() == 0
                && devs.contains(&meta.dev())
                && seen.insert((meta.dev(), meta.ino()))
            {
                bytes = bytes.saturating_add(meta.blocks().saturating_mul(512));
            }
        }
    }
    bytes
}

/// Waits until `child` exits, the deadline passes or the exchange is
/// cancelled; in the last two cases kills the whole tree. With a `quota`,
/// also kills it once the pod's directories outgrow it. Returns once the
/// `streams` output pipes of generation `gen_` are drained (or a grace period
/// passed), so every line is sent before the final frame.
pub fn supervise(
    sandbox: &Sandbox,
    child: &mut Process,
    deadline: Instant,
    events: &Receiver<Event>,
    gen_: u64,
    streams: usize,
    quota: Option<&DiskQuota>,
) -> Ending {
    let mut open = streams;
    let mut closed_at: Option<Instant> = None;
    let mut next_disk_check = Instant::now() + DISK_CHECK;
    let ending = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                child.kill_leftovers(sandbox);
                break Ending::Exited(status);
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("hearth-agent: wait: {e}");
                child.kill_tree(sandbox);
                break Ending::Cancelled;
            }
        }
        let now = Instant::now();
        if now >= deadline {
            child.kill_tree(sandbox);
            break Ending::TimedOut;
        }
        if let Some(quota) = quota.filter(|_| now >= next_disk_check) {
            if quota.exceeded(&sandbox.cgroups().live_pids()) {
                child.kill_tree(sandbox);
                break Ending::DiskQuota;
            }
            next_disk_check = Instant::now() + DISK_CHECK;
        }
        // A job in a resident sandbox wakes us when it exits (or its sandbox
        // dies): only the disk check, and a look now and then in case a word
        // went missing, wake us meanwhile. A process of its own cannot: once
        // its pipes closed it is about to be reapable, so poll closely for a
        // moment; otherwise the pipes' end wakes us.
        let tick = if !child.polled() {
            match quota {
                Some(_) => next_disk_check.saturating_duration_since(now),
                None => RESIDENT_LOOK,
            }
        } else if closed_at.is_some_and(|at| at.elapsed() < Duration::from_millis(50)) {
            Duration::from_micros(200)
        } else {
            Duration::from_millis(5)
        };
        match events.recv_timeout(tick.min(deadline - now)) {
            Ok(Event::Cancel) => {
                child.kill_tree(sandbox);
                break Ending::Cancelled;
            }
            Ok(Event::Eof(g)) if g == gen_ => {
                open = open.saturating_sub(1);
                if open == 0 {
                    closed_at = Some(Instant::now());
                }
            }
            Ok(Event::Eof(_) | Event::Exited)
            | Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
    };
    let give_up = Instant::now() + DRAIN_GRACE;
    while open > 0 {
        let left = give_up.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(Event::Eof(g)) if g == gen_ => open -= 1,
            Ok(_) => {}
            Err(_) => {
                eprintln!("hearth-agent: output pipes still open after the job ended");
                break;
            }
        }
    }
    ending
}

/// Starts the thread that streams one output pipe into `sink`; returns 1
/// (the number of pipes to wait for) if it started.
fn spawn_pump(mut pipe: impl Read + Send + 'static, mut sink: LineSink) -> usize {
    let spawned = std::thread::Builder::new()
        .name(format!("{:?}", sink.stream))
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => sink.feed(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            sink.end();
        });
    usize::from(spawned.is_ok())
}

/// One output stream of a job, cut into `line` frames within its byte budget
/// as its bytes arrive (from a pipe, or from the frames of a resident
/// sandbox). Lines longer than [`MAX_LINE_BYTES`] are cut into pieces of
/// that size. Its end sends the last piece and `Eof` of its generation.
#[derive(Debug)]
pub struct LineSink {
    stream: Stream,
    budget: LogBudget,
    line: Vec<u8>,
    out: Arc<Out>,
    events: Sender<Event>,
    gen_: u64,
}

impl LineSink {
    pub fn new(stream: Stream, max_bytes: u64, ex: &Exchange, gen_: u64) -> Self {
        LineSink {
            stream,
            budget: LogBudget::new(max_bytes),
            line: Vec::new(),
            out: Arc::clone(&ex.out),
            events: ex.events_tx.clone(),
            gen_,
        }
    }

    /// Takes the next bytes of the stream.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = MAX_LINE_BYTES - self.line.len();
            let window = &bytes[..bytes.len().min(room)];
            let take = match window.iter().position(|&b| b == b'\n') {
                Some(newline) => newline + 1,
                None if window.len() == room => room,
                None => {
                    self.line.extend_from_slice(bytes);
                    return;
                }
            };
            self.line.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            self.emit();
        }
    }

    /// The stream ended: the last line goes even without its newline.
    pub fn end(mut self) {
        if !self.line.is_empty() {
            self.emit();
        }
        let _ = self.events.send(Event::Eof(self.gen_));
    }

    fn emit(&mut self) {
        match self.budget.admit(self.line.len() as u64) {
            Admit::Send => {
                self.out.send(&Frame::Line {
                    stream: self.stream,
                    line: line_text(&self.line),
                });
            }
            Admit::Truncate => {
                self.out.send(&Frame::Truncated {
                    stream: self.stream,
                });
            }
            // Keep draining so the job never blocks on a full pipe.
            Admit::Drop => {}
        }
        self.line.clear();
    }
}

fn line_text(raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    String::from_utf8_lossy(raw).into_owned()
}

/// What to do with one line of a bounded stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Send,
    /// The budget is exhausted by this line: say so once.
    Truncate,
    Drop,
}

/// The bytes of one stream still allowed through.
#[derive(Debug)]
pub struct LogBudget {
    limit: u64,
    used: u64,
    truncated: bool,
}

impl LogBudget {
    pub fn new(limit: u64) -> Self {
        LogBudget {
            limit,
            used: 0,
            truncated: false,
        }
    }

    /// Accounts a line of `len` bytes (newline included).
    pub fn admit(&mut self, len: u64) -> Admit {
        if self.truncated {
            Admit::Drop
        } else if self.used.saturating_add(len) <= self.limit {
            self.used += len;
            Admit::Send
        } else {
            self.truncated = true;
            Admit::Truncate
        }
    }
}

/// Reads the job's output file: `(output, output_error)`. Refuses anything but
/// a regular file (the job controls the directory and could plant a link to a
/// host file).
pub fn read_output(path: &Path) -> (Option<serde_json::Value>, Option<String>) {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (None, None),
        Err(e) => return (None, Some(format!("cannot read output: {e}"))),
    };
    if !meta.is_file() {
        return (None, Some("output is not a regular file".to_owned()));
    }
    if meta.len() > MAX_OUTPUT_BYTES {
        return (
            None,
            Some(format!(
                "output is {} bytes, more than the {MAX_OUTPUT_BYTES} allowed",
                meta.len()
            )),
        );
    }
    let mut text = Vec::new();
    let read =
        std::fs::File::open(path).and_then(|f| f.take(MAX_OUTPUT_BYTES + 1).read_to_end(&mut text));
    if let Err(e) = read {
        return (None, Some(format!("cannot read output: {e}")));
    }
    match serde_json::from_slice(&text) {
        // Deeper output would not fit in the frame that carries it.
        Ok(value) => match hearth_core::validate::json_refused(&value) {
            None => (Some(value), None),
            Some(why) => (None, Some(format!("output {why}"))),
        },
        Err(e) => (None, Some(format!("output is not valid JSON: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::agent::Rank;

    #[test]
    fn budget_sends_then_truncates_once_then_drops() {
        let mut b = LogBudget::new(10);
        assert_eq!(b.admit(4), Admit::Send);
        assert_eq!(b.admit(6), Admit::Send);
        assert_eq!(b.admit(1), Admit::Truncate);
        assert_eq!(b.admit(1), Admit::Drop);
        assert_eq!(b.admit(0), Admit::Drop);
        let mut zero = LogBudget::new(0);
        assert_eq!(zero.admit(1), Admit::Truncate);
    }

    /// The frames an exchange wrote, once it is gone.
    fn frames_of(ex: Exchange, theirs: std::os::unix::net::UnixStream) -> Vec<Frame> {
        use std::io::BufRead as _;
        drop(ex);
        io::BufReader::new(theirs)
            .lines()
            .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn line_sinks_cut_lines_across_chunks_and_at_the_size_limit() {
        let (conn, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let ex = Exchange::new(crate::serve::Conn::Unix(conn));
        let mut sink = LineSink::new(Stream::Stdout, 1 << 20, &ex, 3);
        sink.feed(b"hel");
        sink.feed(b"");
        sink.feed(b"lo\r\nworld\n\nlong ");
        let long = vec![b'x'; MAX_LINE_BYTES];
        sink.feed(&long);
        sink.feed(b"tail");
        sink.end();
        assert!(matches!(ex.events.try_recv(), Ok(Event::Eof(3))));
        let lines: Vec<String> = frames_of(ex, theirs)
            .into_iter()
            .map(|f| match f {
                Frame::Line {
                    stream: Stream::Stdout,
                    line,
                } => line,
                other => panic!("{other:?}"),
            })
            .collect();
        let piece = format!("long {}", "x".repeat(MAX_LINE_BYTES - 5));
        assert_eq!(lines, ["hello", "world", "", &piece, "xxxxxtail"]);
    }

    #[test]
    fn line_sinks_keep_to_their_budget() {
        let (conn, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let ex = Exchange::new(crate::serve::Conn::Unix(conn));
        let mut sink = LineSink::new(Stream::Stderr, 8, &ex, 0);
        sink.feed(b"abc\ndefg\nhi\njk\n");
        sink.end();
        assert_eq!(
            frames_of(ex, theirs),
            [
                Frame::Line {
                    stream: Stream::Stderr,
                    line: "abc".to_owned()
                },
                Frame::Truncated {
                    stream: Stream::Stderr
                }
            ]
        );
    }

    #[test]
    fn deadlines_saturate() {
        let now = Instant::now();
        assert_eq!(deadline_after(now, 1500), now + Duration::from_millis(1500));
        assert!(deadline_after(now, u64::MAX) > now + Duration::from_secs(3600 * 24 * 365));
    }

    #[test]
    fn lines_lose_their_line_ending_only() {
        assert_eq!(line_text(b"a b\r\n"), "a b");
        assert_eq!(line_text(b" x \n"), " x ");
        assert_eq!(line_text(b"tail"), "tail");
        assert_eq!(line_text(b"\xff\n"), "\u{fffd}");
    }

    #[test]
    fn output_file_is_read_bounded_and_checked() {
        let dir = std::env::temp_dir().join(format!("hearth-agent-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("output.json");
        assert_eq!(read_output(&file), (None, None));
        std::fs::write(&file, r#"{"ok": true}"#).unwrap();
        assert_eq!(
            read_output(&file),
            (Some(serde_json::json!({"ok": true})), None)
        );
        std::fs::write(&file, "{nope").unwrap();
        assert!(read_output(&file).1.unwrap().contains("not valid JSON"));
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &file).unwrap();
        assert!(read_output(&file).1.unwrap().contains("not a regular file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn env_is_built_from_scratch() {
        let inside = Inside {
            work: "/work".into(),
            io: "/hearth".into(),
            venvs: "/venvs".into(),
            tmp: "/tmp".into(),
            wheelhouse: None,
        };
        let run = Run {
            job_id: "j1".into(),
            caller: None,
            files: BTreeMap::new(),
            command: vec!["true".into()],
            deps: Default::default(),
            input: serde_json::Value::Null,
            env: [("FOO".to_owned(), "bar".to_owned())].into(),
            timeout_ms: 1000,
            topology: Some(Rank {
                rank: 1,
                world_size: 2,
                peers: vec!["a:1".into(), "b:2".into()],
                master_addr: "a".into(),
                master_port: 1,
            }),
            max_log_bytes: 100,
            detach_grace_ms: 0,
        };
        let env = job_env(
            &inside,
            Path::new("/opt/py/bin/python3"),
            &run,
            Some("k"),
            false,
            Some("0".into()),
        );
        let get = |k: &str| env.get(k).map(String::as_str);
        assert!(
            get("PATH")
                .unwrap()
                .starts_with("/venvs/k/bin:/opt/py/bin:")
        );
        assert_eq!(get("HOME"), Some("/work"));
        assert_eq!(get("HEARTH_INPUT"), Some("/hearth/input.json"));
        assert_eq!(get("HEARTH_OUTPUT"), Some("/hearth/output.json"));
        assert_eq!(get("VIRTUAL_ENV"), Some("/venvs/k"));
        assert_eq!(get("HEARTH_PEERS"), Some("a:1,b:2"));
        assert_eq!(get("RANK"), Some("1"));
        assert_eq!(get("WORLD_SIZE"), Some("2"));
        assert_eq!(get("MASTER_PORT"), Some("1"));
        assert_eq!(get("CUDA_VISIBLE_DEVICES"), Some("0"));
        assert_eq!(get("FOO"), Some("bar"));
        assert_eq!(get("TMPDIR"), None);
        assert_eq!(env.len(), 14);
    }
}
