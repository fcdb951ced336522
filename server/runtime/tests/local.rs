//! The local runtime against the real agent binary, bubblewrap and cgroups.
//!
//! Needs the agent built first: `cargo build -p hearth-agent` (or
//! `HEARTH_AGENT_BIN=/path/to/hearth-agent`). Assertions on an isolation
//! mechanism run only where `mechanisms()` reports it available.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hearth_core::ErrorCode;
use hearth_core::Profile;
use hearth_core::agent::{Frame, Outcome, Rank, Run, Stream};
use hearth_core::job::Deps;
use hearth_runtime::local::{LocalConfig, LocalRuntime};
use hearth_runtime::{Pod, PodEvent, PodSpec, Runtime, client};
use serde_json::{Value, json};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A name unique to this test process.
fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn agent_bin() -> PathBuf {
    hearth_runtime::test_agent_bin()
}

/// One runtime on its own state dir; `finish` stops its pods and removes it.
struct Harness {
    rt: LocalRuntime,
    state: PathBuf,
    pods: Vec<String>,
}

impl Harness {
    fn new(wheelhouse: Option<PathBuf>) -> Harness {
        Harness::in_dir(Path::new("/tmp"), wheelhouse)
    }

    fn in_dir(parent: &Path, wheelhouse: Option<PathBuf>) -> Harness {
        let state = parent.join(unique("hrt"));
        Harness {
            rt: LocalRuntime::new(config(&state, wheelhouse)).expect("local runtime"),
            state,
            pods: Vec::new(),
        }
    }

    fn has(&self, mechanism: &str) -> bool {
        self.rt
            .mechanisms()
            .iter()
            .any(|m| m.name == mechanism && m.available)
    }

    async fn start(&mut self, profile: Profile) -> Pod {
        let pod_id = unique("p");
        let pod = self
            .rt
            .start_pod(spec(&pod_id, profile))
            .await
            .expect("start pod");
        self.pods.push(pod_id);
        pod
    }

    async fn finish(mut self) {
        for pod in std::mem::take(&mut self.pods) {
            self.rt.stop_pod(&pod).await.expect("stop pod");
        }
    }
}

impl Drop for Harness {
    /// A failed test leaves no agents, cgroups or directories: a fresh
    /// runtime on the same state dir removes them as orphans.
    fn drop(&mut self) {
        if !self.pods.is_empty() {
            let cfg = config(&self.state, None);
            let cleanup = std::thread::spawn(move || {
                let tokio = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let rt = LocalRuntime::new(cfg).unwrap();
                tokio
                    .block_on(rt.adopt(Vec::new(), Vec::new()))
                    .map(|a| a.removed)
            });
            let _ = cleanup.join();
        }
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

fn config(state: &Path, wheelhouse: Option<PathBuf>) -> LocalConfig {
    LocalConfig {
        wheelhouse,
        ..LocalConfig::new(state, agent_bin())
    }
}

fn spec(pod_id: &str, profile: Profile) -> PodSpec {
    PodSpec {
        pod_id: pod_id.to_owned(),
        profile,
        gpu_devices: Vec::new(),
        labels: BTreeMap::new(),
    }
}

fn profile(network: bool) -> Profile {
    Profile {
        network,
        ..Profile::cpu("test")
    }
}

fn job(command: &[&str]) -> Run {
    Run {
        job_id: unique("j"),
        caller: Some("c1".into()),
        files: BTreeMap::new(),
        command: command.iter().map(|s| (*s).to_owned()).collect(),
        deps: Deps::default(),
        input: Value::Null,
        env: BTreeMap::new(),
        timeout_ms: 20_000,
        topology: None,
        max_log_bytes: 64 * 1024,
        detach_grace_ms: 0,
    }
}

fn python(code: &str) -> Run {
    job(&["python3", "-c", code])
}

async fn next(ex: &mut client::Exchange) -> Frame {
    tokio::time::timeout(Duration::from_secs(60), ex.next())
        .await
        .expect("agent answered in time")
        .expect("frame")
}

/// Every frame of a run, the final one last.
async fn run_all(pod: &Pod, run: Run) -> Vec<Frame> {
    let mut ex = client::run(&pod.address, pod.token.as_deref(), 0, run)
        .await
        .expect("open run");
    let mut frames = Vec::new();
    loop {
        let frame = next(&mut ex).await;
        let last = frame.is_final();
        frames.push(frame);
        if last {
            return frames;
        }
    }
}

struct Exit {
    outcome: Outcome,
    code: Option<i32>,
    output: Option<Value>,
    output_error: Option<String>,
}

fn exit_of(frames: &[Frame]) -> Exit {
    match frames.last() {
        Some(Frame::Exit {
            outcome,
            exit_code,
            output,
            output_error,
            ..
        }) => Exit {
            outcome: *outcome,
            code: *exit_code,
            output: output.clone(),
            output_error: output_error.clone(),
        },
        other => panic!("expected an exit frame, got {other:?} in {frames:?}"),
    }
}

fn lines(frames: &[Frame], want: Stream) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Line { stream, line } if *stream == want => Some(line.clone()),
            _ => None,
        })
        .collect()
}

/// Live processes whose command line contains `marker` (zombies have none).
fn processes_with(marker: &str) -> usize {
    pids_with(marker).len()
}

fn pids_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains(marker))
        })
        .collect()
}

/// Waits until `cond` holds, up to `limit`.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// A job whose tree (the shell, a background and a foreground `sleep`)
/// carries a unique marker, announced by a `started` line.
fn sleeping_tree(marker: &str) -> Run {
    let script = format!("sleep {marker} & echo started; sleep {marker}");
    job(&["sh", "-c", &script])
}

fn sleep_marker() -> String {
    format!(
        "4000.{}{:04}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[tokio::test]
async fn start_ping_and_report_mechanisms() {
    let mut h = Harness::new(None);
    let names: Vec<String> = h.rt.mechanisms().into_iter().map(|m| m.name).collect();
    for want in [
        "namespaces",
        "cgroup.memory",
        "cgroup.cpu",
        "cgroup.pids",
        "network-isolation",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not reported");
    }
    let pod = h
        .start(Profile {
            cpu_millis: 500,
            memory_mib: 300,
            pids: 77,
            ..profile(false)
        })
        .await;
    assert!(pod.address.starts_with("unix:"));
    // The profile's limits are in the pod's cgroups.
    let dirs = h.rt.cgroup_dirs(&h.pods[0]);
    let cg = |ctrl: &str, file: &str| {
        let v1 = format!("/sys/fs/cgroup/{ctrl}/");
        let dir = dirs
            .iter()
            .find(|d| d.starts_with(&v1))
            .or_else(|| dirs.first())
            .unwrap();
        std::fs::read_to_string(dir.join(file))
            .unwrap()
            .trim()
            .to_owned()
    };
    // A v1 pids hierarchy limits pods (its root group has no pids.max; the
    // pods' groups do).
    if Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists() {
        assert!(h.has("cgroup.pids"), "{:?}", h.rt.mechanisms());
    }
    if h.has("cgroup.memory") {
        let limit = if Path::new("/sys/fs/cgroup/memory").is_dir() {
            cg("memory", "memory.limit_in_bytes")
        } else {
            cg("memory", "memory.max")
        };
        assert_eq!(limit, (300u64 << 20).to_string());
    }
    if h.has("cgroup.pids") {
        assert_eq!(cg("pids", "pids.max"), "77");
    }
    if h.has("cgroup.cpu") {
        let quota = if Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists() {
            cg("cpu", "cpu.cfs_quota_us")
        } else {
            cg("cpu", "cpu.max")
        };
        assert!(quota.starts_with("50000"), "cpu quota {quota}");
    }
    assert_eq!(pod.peer_host, "127.0.0.1");
    match client::ping(&pod.address, pod.token.as_deref(), 0)
        .await
        .unwrap()
    {
        Frame::Pong { protocol, sandbox } => {
            assert_eq!(protocol, hearth_core::agent::PROTOCOL_VERSION);
            let want = if h.has("namespaces") { "bwrap" } else { "none" };
            assert_eq!(sandbox, want);
        }
        other => panic!("expected pong, got {other:?}"),
    }
    h.finish().await;
}

/// The supervisor finds a job's program on the job's own PATH (as a shell
/// would: the first executable of that name), reports one it cannot find as
/// a shell does (127), and hands a job its stdin whole however long it is:
/// written at once when it fits in a pipe, from a thread of its own when not.
#[tokio::test]
async fn programs_are_found_on_the_jobs_path_and_stdin_arrives_whole() {
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    let count = "import sys; data = sys.stdin.read(); print(len(data))";
    for input in [
        json!(null),
        json!("x".repeat(3000)),
        json!("y".repeat(200_000)),
    ] {
        let want = serde_json::to_string(&input).unwrap().len().to_string();
        let mut run = job(&["python3", "-c", count]);
        run.input = input;
        let frames = run_all(&pod, run).await;
        assert_eq!(lines(&frames, Stream::Stdout), [want], "{frames:?}");
        assert_eq!(exit_of(&frames).code, Some(0));
    }
    // A job that never reads its input, larger than a pipe holds, ends as it
    // would anyway: nothing waits on input it left unread.
    let mut run = job(&["sh", "-c", "echo unread; exit 3"]);
    run.input = json!("z".repeat(200_000));
    let frames = run_all(&pod, run).await;
    assert_eq!(lines(&frames, Stream::Stdout), ["unread"], "{frames:?}");
    assert_eq!(exit_of(&frames).code, Some(3), "{frames:?}");

    // A directory early on PATH whose entry of that name is not executable
    // is passed over for the next one's.
    let make = "mkdir -p a b && printf 'echo wrong' > a/tool && \
        printf '#!/bin/sh\necho found $1' > b/tool && chmod +x b/tool && pwd";
    let frames = run_all(&pod, job(&["sh", "-c", make])).await;
    let work = lines(&frames, Stream::Stdout).pop().expect("the work dir");
    let mut run = job(&["tool", "it"]);
    let path = format!("{work}/a:{work}/b:/usr/bin:/bin");
    run.env.insert("PATH".into(), path);
    let frames = run_all(&pod, run).await;
    assert_eq!(lines(&frames, Stream::Stdout), ["found it"], "{frames:?}");

    let frames = run_all(&pod, job(&["no-such-program-anywhere"])).await;
    assert_eq!(exit_of(&frames).code, Some(127), "{frames:?}");
    assert!(
        lines(&frames, Stream::Stderr)
            .iter()
            .any(|l| l.contains("no-such-program-anywhere")),
        "{frames:?}"
    );
    h.finish().await;
}

#[tokio::test]
async fn runs_a_job_with_files_input_env_and_output() {
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    let code = r#"
import json, os, sys
from helper import greet
stdin = json.load(sys.stdin)
with open(os.environ["HEARTH_INPUT"]) as f:
    from_file = json.load(f)
print(greet())
print("to stderr", file=sys.stderr)
json.dump({"stdin": stdin, "file": from_file, "env": dict(os.environ), "cwd": os.getcwd()},
          open(os.environ["HEARTH_OUTPUT"], "w"))
"#;
    let mut run = job(&["python3", "main.py"]);
    run.files.insert("main.py".into(), code.into());
    run.files.insert(
        "helper.py".into(),
        "def greet():\n    return 'hello'\n".into(),
    );
    run.input = json!({"question": 42});
    run.env.insert("FOO".into(), "bar".into());
    run.topology = Some(Rank {
        rank: 1,
        world_size: 2,
        peers: vec!["127.0.0.1:29500".into(), "127.0.0.1:29501".into()],
        master_addr: "127.0.0.1".into(),
        master_port: 29500,
    });
    let job_id = run.job_id.clone();
    let frames = run_all(&pod, run).await;

    assert!(
        matches!(
            frames[0],
            Frame::Bound {
                deps_cached: false,
                ..
            }
        ),
        "{frames:?}"
    );
    assert_eq!(lines(&frames, Stream::Stdout), ["hello"]);
    assert_eq!(lines(&frames, Stream::Stderr), ["to stderr"]);
    let exit = exit_of(&frames);
    assert_eq!((exit.outcome, exit.code), (Outcome::Exited, Some(0)));
    let out = exit.output.expect("output");
    assert_eq!(out["stdin"], json!({"question": 42}));
    assert_eq!(out["file"], json!({"question": 42}));
    let env = out["env"].as_object().unwrap();
    let get = |k: &str| {
        env.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(get("FOO"), "bar");
    assert_eq!(get("HEARTH_JOB_ID"), job_id);
    assert_eq!(get("RANK"), "1");
    assert_eq!(get("WORLD_SIZE"), "2");
    assert_eq!(get("HEARTH_PEERS"), "127.0.0.1:29500,127.0.0.1:29501");
    assert_eq!(get("MASTER_ADDR"), "127.0.0.1");
    assert_eq!(get("MASTER_PORT"), "29500");
    assert_eq!(get("LANG"), "C.UTF-8");
    // Nothing of the service's own environment leaks in.
    let allowed = [
        "PATH",
        "HOME",
        "LANG",
        "HEARTH_JOB_ID",
        "HEARTH_INPUT",
        "HEARTH_OUTPUT",
        "TMPDIR",
        "FOO",
        "RANK",
        "WORLD_SIZE",
        "HEARTH_PEERS",
        "MASTER_ADDR",
        "MASTER_PORT",
        "PWD",
        "SHLVL",
        "_",
        "LC_CTYPE",
    ];
    for key in env.keys() {
        assert!(allowed.contains(&key.as_str()), "unexpected env var {key}");
    }
    if h.has("namespaces") {
        assert_eq!(get("HEARTH_INPUT"), "/hearth/input.json");
        assert_eq!(get("HEARTH_OUTPUT"), "/hearth/output.json");
        assert_eq!(get("HOME"), "/work");
        assert_eq!(out["cwd"], "/work");
    }
    // The code really lives in the pod's work dir.
    let work = h.rt.pod_dir(&h.pods[0]).join("work");
    assert!(work.join("helper.py").is_file());

    // A second job in the same pod: a fresh output, and bad JSON is reported.
    let frames = run_all(
        &pod,
        python(
            "import os; open(os.environ['HEARTH_OUTPUT'], 'w').write('{nope'); raise SystemExit(3)",
        ),
    )
    .await;
    let exit = exit_of(&frames);
    assert_eq!((exit.outcome, exit.code), (Outcome::Exited, Some(3)));
    assert!(exit.output.is_none());
    assert!(exit.output_error.unwrap().contains("JSON"));
    let frames = run_all(&pod, job(&["true"])).await;
    let exit = exit_of(&frames);
    assert!(exit.output.is_none() && exit.output_error.is_none());
    h.finish().await;
}

#[tokio::test]
async fn lines_stream_while_the_job_runs() {
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    // The job only goes on once the test has seen its first line (and
    // created `go` in its work dir): without streaming it would wait forever.
    let code = r#"
import os, time
print("first", flush=True)
for _ in range(1000):
    if os.path.exists("go"):
        print("second")
        break
    time.sleep(0.01)
else:
    print("never released")
"#;
    let mut ex = client::run(&pod.address, pod.token.as_deref(), 0, python(code))
        .await
        .unwrap();
    assert!(matches!(next(&mut ex).await, Frame::Bound { .. }));
    match next(&mut ex).await {
        Frame::Line { stream, line } => {
            assert_eq!((stream, line.as_str()), (Stream::Stdout, "first"));
        }
        other => panic!("expected the first line before anything else, got {other:?}"),
    }
    std::fs::write(h.rt.pod_dir(&h.pods[0]).join("work/go"), "").unwrap();
    let mut rest = Vec::new();
    loop {
        let f = next(&mut ex).await;
        let last = f.is_final();
        rest.push(f);
        if last {
            break;
        }
    }
    assert_eq!(lines(&rest, Stream::Stdout), ["second"]);
    assert_eq!(exit_of(&rest).code, Some(0));
    h.finish().await;
}

#[tokio::test]
async fn timeout_kills_the_whole_tree() {
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    let marker = sleep_marker();
    let mut run = sleeping_tree(&marker);
    run.timeout_ms = 1500;
    let mut ex = client::run(&pod.address, pod.token.as_deref(), 0, run)
        .await
        .unwrap();
    let mut frames = Vec::new();
    loop {
        let f = next(&mut ex).await;
        if matches!(&f, Frame::Line { line, .. } if line == "started") {
            // Both sleeps are running before the timeout fires, inside the
            // pod's cgroups.
            assert!(eventually(Duration::from_secs(1), || processes_with(&marker) >= 2).await);
            let procs: Vec<u32> =
                h.rt.cgroup_dirs(&h.pods[0])
                    .iter()
                    .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
                    .flat_map(|t| {
                        t.lines()
                            .filter_map(|l| l.parse().ok())
                            .collect::<Vec<u32>>()
                    })
                    .collect();
            if h.has("cgroup.pids") {
                for pid in pids_with(&marker) {
                    assert!(procs.contains(&pid), "{pid} is outside the pod's cgroups");
                }
            }
        }
        let last = f.is_final();
        frames.push(f);
        if last {
            break;
        }
    }
    let exit = exit_of(&frames);
    assert_eq!((exit.outcome, exit.code), (Outcome::TimedOut, None));
    assert!(
        eventually(Duration::from_secs(1), || processes_with(&marker) == 0).await,
        "processes of the timed-out job survived"
    );
    h.finish().await;
}

#[tokio::test]
async fn cancel_kills_the_whole_tree() {
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    let marker = sleep_marker();
    let mut ex = client::run(
        &pod.address,
        pod.token.as_deref(),
        0,
        sleeping_tree(&marker),
    )
    .await
    .unwrap();
    loop {
        if matches!(next(&mut ex).await, Frame::Line { line, .. } if line == "started") {
            break;
        }
    }
    assert!(eventually(Duration::from_secs(1), || processes_with(&marker) >= 2).await);
    ex.cancel().await.unwrap();
    let frames = {
        let last = ex.finish().await.unwrap();
        vec![last]
    };
    assert_eq!(exit_of(&frames).outcome, Outcome::Cancelled);
    assert!(
        eventually(Duration::from_secs(1), || processes_with(&marker) == 0).await,
        "processes of the cancelled job survived"
    );

    // Dropping the connection cancels too.
    let marker = sleep_marker();
    let mut ex = client::run(
        &pod.address,
        pod.token.as_deref(),
        0,
        sleeping_tree(&marker),
    )
    .await
    .unwrap();
    loop {
        if matches!(next(&mut ex).await, Frame::Line { line, .. } if line == "started") {
            break;
        }
    }
    drop(ex);
    assert!(
        eventually(Duration::from_secs(3), || processes_with(&marker) == 0).await,
        "processes survived the service hanging up"
    );
    // The pod still serves.
    assert!(matches!(
        client::ping(&pod.address, pod.token.as_deref(), 0)
            .await
            .unwrap(),
        Frame::Pong { .. }
    ));
    h.finish().await;
}

/// One of the host's own addresses outside 127.0.0.0/8, if it has one.
fn host_address() -> Option<String> {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").ok()?;
    let first = *hearth_core::net::local_ipv4_addresses(&trie).first()?;
    Some(first.to_string())
}

#[tokio::test]
async fn network_follows_the_profile() {
    let mut h = Harness::new(None);
    // A service listening on every address of the host, as the API may.
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        r#"
import socket
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("127.0.0.1", {port}))
    print("connected")
except OSError as e:
    print("failed", e)
"#
    );
    if !h.has("network") {
        eprintln!("skipped: {:?}", h.rt.mechanisms());
        return h.finish().await;
    }
    // With network, a job has a routed interface of its own, and neither the
    // host's loopback, slirp4netns's way to it (10.0.2.2) nor the host's own
    // address reaches the host's listener.
    let open = h.start(profile(true)).await;
    let routed =
        "print(any(l.split()[1] == '00000000' for l in open('/proc/net/route').readlines()[1:]))";
    let frames = run_all(&open, python(routed)).await;
    assert_eq!(lines(&frames, Stream::Stdout), ["True"], "{frames:?}");
    let own = host_address();
    let mut hosts = vec!["127.0.0.1".to_owned(), "10.0.2.2".to_owned()];
    if h.has("network-isolation") {
        let own = own.expect("the host has an address of its own");
        // The host itself reaches its listener there.
        std::net::TcpStream::connect((own.as_str(), port)).unwrap();
        hosts.push(own);
    } else {
        eprintln!(
            "the host's own addresses stay reachable: {:?}",
            h.rt.mechanisms()
        );
    }
    for host in &hosts {
        let frames = run_all(&open, python(&code.replace("127.0.0.1", host))).await;
        let out = lines(&frames, Stream::Stdout);
        assert!(out[0].starts_with("failed"), "{host}: {out:?}");
    }
    let closed = h.start(profile(false)).await;
    let frames = run_all(&closed, python(routed)).await;
    assert_eq!(lines(&frames, Stream::Stdout), ["False"], "{frames:?}");
    let frames = run_all(&closed, python(&code)).await;
    let out = lines(&frames, Stream::Stdout);
    assert!(
        out[0].starts_with("failed"),
        "a no-network job connected: {out:?}"
    );
    drop(listener);
    h.finish().await;
}

#[tokio::test]
async fn a_job_sees_no_host_socket_runtime_directory_or_secret() {
    use std::os::linux::net::SocketAddrExt as _;
    use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};

    let mut h = Harness::new(None);
    if !h.has("namespaces") {
        eprintln!("skipped: namespaces unavailable");
        return;
    }
    // A host service on a socket file in the runtime directory (as
    // PostgreSQL's), and one on an abstract socket (as D-Bus's): both answer
    // the host, and neither may answer a job.
    let file = Path::new("/run").join(format!("{}.sock", unique("hearth-test")));
    let file_listener = UnixListener::bind(&file).ok();
    let name = unique("hearth-test-abstract");
    let abstract_listener =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    if file_listener.is_some() {
        UnixStream::connect(&file).expect("the host reaches its own socket");
    }
    UnixStream::connect_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
        .expect("the host reaches its own abstract socket");
    let probe = format!(
        r#"
import json, os, socket
def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    try:
        s.connect(path)
        return "connected"
    except OSError as e:
        return "failed"
def attempt(f):
    try:
        f()
        return "allowed"
    except OSError:
        return "denied"
print(json.dumps({{
    "uid": os.getuid(),
    "run": sorted(os.listdir("/run")),
    "var_run": sorted(os.listdir("/var/run")),
    "file": connect({file:?}),
    "abstract": connect("\0{name}"),
    "postgres": connect("/var/run/postgresql/.s.PGSQL.5432"),
    "shadow": attempt(lambda: open("/etc/shadow").read(1)),
    "root": attempt(lambda: os.listdir("/root")),
}}))
"#,
        file = file.display().to_string()
    );
    let mut profiles = vec![profile(false)];
    if h.has("network") {
        profiles.push(profile(true));
    }
    for p in profiles {
        let network = p.network;
        let pod = h.start(p).await;
        let frames = run_all(&pod, python(&probe)).await;
        let out = lines(&frames, Stream::Stdout);
        let seen: Value =
            serde_json::from_str(out.first().unwrap_or_else(|| panic!("{frames:?}"))).unwrap();
        assert_eq!(
            seen["run"],
            serde_json::json!([]),
            "network {network}: {seen}"
        );
        assert_eq!(
            seen["var_run"],
            serde_json::json!([]),
            "network {network}: {seen}"
        );
        for socket in ["file", "abstract", "postgres"] {
            assert_eq!(
                seen[socket], "failed",
                "network {network}: {socket}: {seen}"
            );
        }
        if h.has("unprivileged-user") {
            assert_ne!(seen["uid"], 0, "{seen}");
            assert_eq!(seen["shadow"], "denied", "{seen}");
            assert_eq!(seen["root"], "denied", "{seen}");
        }
    }
    drop((file_listener, abstract_listener));
    let _ = std::fs::remove_file(&file);
    h.finish().await;
}

#[tokio::test]
async fn a_disk_filler_is_killed_at_the_quota_and_its_files_go() {
    let mut h = Harness::new(None);
    let pod = h
        .start(Profile {
            disk_mib: 32,
            ..profile(false)
        })
        .await;
    // Writes 1 MiB at a time, far past the quota, then would sleep.
    let fill = "import time\nwith open('/work/fill', 'wb') as f:\n    for _ in range(4096):\n        f.write(b'x' * (1 << 20)); f.flush()\ntime.sleep(60)\n";
    let frames = run_all(&pod, python(fill)).await;
    match frames.last() {
        Some(Frame::Error { code, message, .. }) => {
            assert_eq!(*code, ErrorCode::DiskQuotaExceeded, "{message}");
        }
        other => panic!("expected a disk_quota_exceeded error, got {other:?}"),
    }
    let work = h.rt.pod_dir(&h.pods[0]).join("work");
    assert_eq!(
        std::fs::read_dir(&work).unwrap().count(),
        0,
        "the filler's file stayed"
    );
    // The pod serves the next job.
    let frames = run_all(&pod, python("print('ok')")).await;
    assert_eq!(lines(&frames, Stream::Stdout), ["ok"], "{frames:?}");
    h.finish().await;
}

#[tokio::test]
async fn a_pod_cannot_read_another_pods_files() {
    // Not under /tmp, which every sandbox replaces anyway: here only the
    // masking of the pods directory protects pod A.
    let parent = Path::new("/var/tmp");
    let mut h = if parent.is_dir() {
        Harness::in_dir(parent, None)
    } else {
        Harness::new(None)
    };
    if !h.has("namespaces") {
        eprintln!("skipped: namespaces unavailable");
        return;
    }
    let a = h.start(profile(false)).await;
    let b = h.start(profile(false)).await;
    let frames = run_all(&a, job(&["sh", "-c", "echo top-secret > secret.txt"])).await;
    assert_eq!(exit_of(&frames).code, Some(0));
    let secret = h.rt.pod_dir(&h.pods[0]).join("work/secret.txt");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top-secret\n");

    let path = secret.display().to_string();
    let frames = run_all(&b, job(&["cat", &path])).await;
    assert_ne!(exit_of(&frames).code, Some(0), "pod B read pod A's file");
    assert!(lines(&frames, Stream::Stdout).is_empty());
    // Nor the state dir listing of pods.
    let pods = h.state.join("pods").display().to_string();
    let frames = run_all(&b, job(&["ls", "-A", &pods])).await;
    assert!(lines(&frames, Stream::Stdout).is_empty(), "{frames:?}");
    h.finish().await;
}

/// Builds `hearthdemo-0.1-py3-none-any.whl` into a fresh wheelhouse.
fn build_wheelhouse() -> PathBuf {
    let dir = PathBuf::from("/tmp").join(unique("wheels"));
    std::fs::create_dir_all(&dir).unwrap();
    let script = r#"
import base64, hashlib, sys, zipfile
files = {
    "hearthdemo/__init__.py": "VALUE = 'demo-42'\n",
    "hearthdemo-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: hearthdemo\nVersion: 0.1\n",
    "hearthdemo-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hearth-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(text.encode())}")
record.append("hearthdemo-0.1.dist-info/RECORD,,")
files["hearthdemo-0.1.dist-info/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(sys.argv[1] + "/hearthdemo-0.1-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
"#;
    let status = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(status.success(), "building the test wheel failed");
    dir
}

#[tokio::test]
async fn deps_install_offline_from_the_wheelhouse_and_are_cached() {
    let wheels = build_wheelhouse();
    let mut h = Harness::new(Some(wheels.clone()));
    let pod = h.start(profile(false)).await;
    let mut run = python("import hearthdemo, sys; print(hearthdemo.VALUE); print(sys.prefix)");
    run.deps.pip = vec!["hearthdemo".into()];
    let key = run.deps.key().unwrap();

    let frames = run_all(&pod, run.clone()).await;
    assert!(
        matches!(
            frames[0],
            Frame::Bound {
                deps_cached: false,
                ..
            }
        ),
        "{frames:?}"
    );
    let out = lines(&frames, Stream::Stdout);
    assert_eq!(out[0], "demo-42", "{frames:?}");
    assert!(out[1].ends_with(&key), "not the venv: {out:?}");
    assert_eq!(exit_of(&frames).code, Some(0));
    assert!(h.rt.pod_dir(&h.pods[0]).join("venvs").join(&key).is_dir());

    let frames = run_all(&pod, run).await;
    assert!(
        matches!(
            frames[0],
            Frame::Bound {
                deps_cached: true,
                ..
            }
        ),
        "{frames:?}"
    );
    assert_eq!(
        lines(&frames, Stream::Stdout),
        ["demo-42", out[1].as_str()],
        "{frames:?}"
    );

    let mut missing = job(&["true"]);
    missing.deps.pip = vec!["hearth-no-such-package".into()];
    let frames = run_all(&pod, missing.clone()).await;
    match frames.last().unwrap() {
        Frame::Error { code, log, .. } => {
            assert_eq!(*code, ErrorCode::DepsInstallFailed);
            assert!(log.contains("hearth-no-such-package"), "pip log: {log}");
        }
        other => panic!("expected deps_install_failed, got {other:?}"),
    }
    // The half-built environment is gone.
    let venvs = h.rt.pod_dir(&h.pods[0]).join("venvs");
    assert!(!venvs.join(missing.deps.key().unwrap()).exists());
    h.finish().await;
    let _ = std::fs::remove_dir_all(wheels);
}

#[tokio::test]
async fn memory_limit_kills_a_greedy_job() {
    let mut h = Harness::new(None);
    if !h.has("cgroup.memory") {
        eprintln!("skipped: cgroup.memory unavailable");
        return;
    }
    let pod = h
        .start(Profile {
            memory_mib: 64,
            ..profile(false)
        })
        .await;
    let frames = run_all(
        &pod,
        python("b = b'x' * (256 * 1024 * 1024); print('allocated', len(b))"),
    )
    .await;
    let exit = exit_of(&frames);
    assert_eq!(exit.outcome, Outcome::Exited);
    assert_eq!(exit.code, Some(137), "{frames:?}");
    assert!(lines(&frames, Stream::Stdout).is_empty());
    // A job within the limit still runs.
    let frames = run_all(&pod, python("b = b'x' * (8 * 1024 * 1024); print(len(b))")).await;
    assert_eq!(exit_of(&frames).code, Some(0));
    h.finish().await;
}

#[tokio::test]
async fn output_past_the_budget_is_truncated() {
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    let mut run = python("for i in range(1000): print('line %05d' % i)");
    run.max_log_bytes = 100;
    let frames = run_all(&pod, run).await;
    let out = lines(&frames, Stream::Stdout);
    assert_eq!(out.len(), 9, "{out:?}"); // 11 bytes each
    assert_eq!(out[8], "line 00008");
    let truncated: Vec<&Frame> = frames
        .iter()
        .filter(|f| matches!(f, Frame::Truncated { .. }))
        .collect();
    assert_eq!(
        truncated,
        [&Frame::Truncated {
            stream: Stream::Stdout
        }]
    );
    assert_eq!(exit_of(&frames).code, Some(0));
    h.finish().await;
}

#[tokio::test]
async fn wipe_empties_the_pod() {
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    let mut run = job(&[
        "sh",
        "-c",
        "mkdir -p d && echo x > d/f && echo '{}' > $HEARTH_OUTPUT",
    ]);
    run.files.insert("code.py".into(), "print(1)".into());
    assert_eq!(exit_of(&run_all(&pod, run).await).code, Some(0));
    let dir = h.rt.pod_dir(&h.pods[0]);
    assert!(dir.join("work/d/f").exists() && dir.join("io/output.json").exists());

    client::wipe(&pod.address, pod.token.as_deref(), 0)
        .await
        .unwrap();
    for sub in ["work", "io", "venvs", "tmp"] {
        let entries = std::fs::read_dir(dir.join(sub)).unwrap().count();
        assert_eq!(entries, 0, "{sub} not empty after wipe");
    }
    // The pod still runs jobs.
    assert_eq!(exit_of(&run_all(&pod, job(&["true"])).await).code, Some(0));
    h.finish().await;
}

#[tokio::test]
async fn the_agent_refuses_a_stale_leaders_requests() {
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    let stale = |frame: &Frame| matches!(frame, Frame::Error { code, .. } if *code == ErrorCode::StaleEpoch);
    // Leader of epoch 5 runs a job: from then on older epochs are refused.
    let mut ex = client::run(&pod.address, pod.token.as_deref(), 5, job(&["true"]))
        .await
        .unwrap();
    let last = loop {
        let f = next(&mut ex).await;
        if f.is_final() {
            break f;
        }
    };
    assert!(
        matches!(
            last,
            Frame::Exit {
                exit_code: Some(0),
                ..
            }
        ),
        "{last:?}"
    );
    let refused = client::run(
        &pod.address,
        pod.token.as_deref(),
        4,
        job(&["touch", "/work/stale"]),
    )
    .await
    .unwrap()
    .finish()
    .await
    .unwrap();
    assert!(stale(&refused), "{refused:?}");
    assert!(!h.rt.pod_dir(&h.pods[0]).join("work/stale").exists());
    assert!(
        client::wipe(&pod.address, pod.token.as_deref(), 3)
            .await
            .is_err()
    );
    let pong = client::ping(&pod.address, pod.token.as_deref(), 0)
        .await
        .unwrap();
    assert!(stale(&pong), "{pong:?}");
    // The current and newer leaders are served.
    client::wipe(&pod.address, pod.token.as_deref(), 5)
        .await
        .unwrap();
    assert!(matches!(
        client::ping(&pod.address, pod.token.as_deref(), 6)
            .await
            .unwrap(),
        Frame::Pong { .. }
    ));
    let refused = client::ping(&pod.address, pod.token.as_deref(), 5)
        .await
        .unwrap();
    assert!(stale(&refused), "{refused:?}");
    h.finish().await;
}

#[tokio::test]
async fn stop_pod_removes_everything_and_is_idempotent() {
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    let pod_id = h.pods.pop().unwrap();
    let dir = h.rt.pod_dir(&pod_id);
    assert!(dir.is_dir());
    if h.has("cgroup.memory") {
        assert!(h.rt.cgroup_dirs(&pod_id).iter().any(|d| d.is_dir()));
    }
    let pid: u32 = std::fs::read_to_string(dir.join("agent.pid"))
        .unwrap()
        .parse()
        .unwrap();
    h.rt.stop_pod(&pod_id).await.unwrap();
    assert!(!dir.exists());
    assert!(h.rt.cgroup_dirs(&pod_id).iter().all(|d| !d.exists()));
    assert!(!Path::new(&format!("/proc/{pid}/cmdline")).exists() || !is_running(pid));
    assert!(
        client::ping(&pod.address, pod.token.as_deref(), 0)
            .await
            .is_err()
    );
    h.rt.stop_pod(&pod_id).await.unwrap();
    h.rt.stop_pod("never-started").await.unwrap();
    h.finish().await;
}

fn is_running(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
}

#[tokio::test]
async fn an_agent_killed_from_outside_is_announced_gone() {
    let mut h = Harness::new(None);
    let mut events = h.rt.subscribe();
    h.start(profile(false)).await;
    let pod_id = h.pods.pop().unwrap();
    let dir = h.rt.pod_dir(&pod_id);
    let pid = std::fs::read_to_string(dir.join("agent.pid")).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(status.success());
    let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("a Gone event")
        .unwrap();
    let PodEvent::Gone {
        pod_id: gone,
        reason,
    } = event;
    assert_eq!(gone, pod_id);
    assert!(reason.contains("agent exited"), "{reason}");
    assert!(!dir.exists(), "the gone pod's directory was left behind");
    h.rt.stop_pod(&pod_id).await.unwrap();
    h.finish().await;
}

#[tokio::test]
async fn remove_orphans_cleans_up_after_a_crashed_runtime() {
    let state = PathBuf::from("/tmp").join(unique("hrt"));
    let crashed = LocalRuntime::new(config(&state, None)).unwrap();
    let pod_id = unique("p");
    let pod = crashed
        .start_pod(spec(&pod_id, profile(false)))
        .await
        .unwrap();
    let dir = crashed.pod_dir(&pod_id);
    let cgroups = crashed.cgroup_dirs(&pod_id);
    let pid: u32 = std::fs::read_to_string(dir.join("agent.pid"))
        .unwrap()
        .parse()
        .unwrap();
    // A job runs while the service "crashes".
    let marker = sleep_marker();
    let mut ex = client::run(
        &pod.address,
        pod.token.as_deref(),
        0,
        sleeping_tree(&marker),
    )
    .await
    .unwrap();
    loop {
        if matches!(next(&mut ex).await, Frame::Line { line, .. } if line == "started") {
            break;
        }
    }
    drop(crashed);
    // As after a crash, the pod lives on (its agent cleans up when this
    // process ends): the watcher its runtime left behind does not kill it,
    // which would leave its cgroups to nobody.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(is_running(pid), "the dropped runtime's pod was killed");
    assert!(cgroups.iter().all(|d| d.exists()));

    let fresh = LocalRuntime::new(config(&state, None)).unwrap();
    let removed = fresh.adopt(Vec::new(), Vec::new()).await.unwrap().removed;
    assert!(removed >= 1, "removed {removed}");
    assert!(!dir.exists());
    assert!(cgroups.iter().all(|d| !d.exists()));
    assert!(eventually(Duration::from_secs(2), || !is_running(pid)).await);
    assert!(
        eventually(Duration::from_secs(2), || processes_with(&marker) == 0).await,
        "the orphan's job survived"
    );
    drop(ex);
    assert_eq!(
        fresh.adopt(Vec::new(), Vec::new()).await.unwrap().removed,
        0
    );
    let _ = std::fs::remove_dir_all(&state);
}

/// The agent as it runs in a Kubernetes pod: no bubblewrap (the pod is the
/// sandbox), no cgroups of its own, listening on TCP.
#[tokio::test]
async fn agent_without_a_sandbox_over_tcp() {
    let root = PathBuf::from("/tmp").join(unique("hk8s"));
    std::fs::create_dir_all(&root).unwrap();
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let mut agent = tokio::process::Command::new(agent_bin())
        .arg("--listen")
        .arg(format!("tcp:127.0.0.1:{port}"))
        .arg("--root")
        .arg(&root)
        .args(["--sandbox", "none", "--python", "python3"])
        .env("HEARTH_AGENT_TOKEN", "k8s-token")
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let address = format!("tcp:127.0.0.1:{port}");
    let pod = Pod {
        pod_id: "k8s".into(),
        address: address.clone(),
        peer_host: "127.0.0.1".into(),
        token: Some("k8s-token".into()),
    };
    assert!(
        eventually(Duration::from_secs(10), || std::net::TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok())
        .await
    );
    match client::ping(&address, Some("k8s-token"), 0).await.unwrap() {
        Frame::Pong { sandbox, .. } => assert_eq!(sandbox, "none"),
        other => panic!("expected pong, got {other:?}"),
    }
    // Over TCP only this pod's token is served: none, or another, is refused.
    for wrong in [None, Some("k8s-tokeN"), Some("k8s-token-longer")] {
        match client::ping(&address, wrong, 0).await.unwrap() {
            Frame::Error { message, .. } => assert!(message.contains("token"), "{message}"),
            other => panic!("{wrong:?} was let in: {other:?}"),
        }
        assert!(client::wipe(&address, wrong, 0).await.is_err());
    }
    let idle = client::status(&address, Some("k8s-token"), 0)
        .await
        .unwrap();
    assert!(!idle.busy && idle.caller.is_none(), "{idle:?}");

    let mut run = python(
        "import json, os, sys; json.dump({'input': os.environ['HEARTH_INPUT'], \
         'cwd': os.getcwd(), 'stdin': json.load(sys.stdin)}, open(os.environ['HEARTH_OUTPUT'], 'w'))",
    );
    run.input = json!([1, 2]);
    let frames = run_all(&pod, run).await;
    let out = exit_of(&frames).output.expect("output");
    assert_eq!(
        out["input"],
        root.join("io/input.json").display().to_string()
    );
    assert_eq!(out["cwd"], root.join("work").display().to_string());
    assert_eq!(out["stdin"], json!([1, 2]));
    // Input that fits in a pipe and input that does not both arrive whole;
    // a job that leaves a large input unread ends as it would anyway.
    let count = "import sys; data = sys.stdin.read(); print(len(data))";
    for input in [json!("x".repeat(3000)), json!("y".repeat(200_000))] {
        let want = serde_json::to_string(&input).unwrap().len().to_string();
        let mut run = job(&["python3", "-c", count]);
        run.input = input;
        let frames = run_all(&pod, run).await;
        assert_eq!(lines(&frames, Stream::Stdout), [want], "{frames:?}");
    }
    let mut run = job(&["sh", "-c", "echo unread; exit 3"]);
    run.input = json!("z".repeat(200_000));
    let frames = run_all(&pod, run).await;
    assert_eq!(lines(&frames, Stream::Stdout), ["unread"], "{frames:?}");
    assert_eq!(exit_of(&frames).code, Some(3), "{frames:?}");

    // Without a pid namespace or cgroup, the process group still takes the
    // whole tree down.
    let marker = sleep_marker();
    let mut run = sleeping_tree(&marker);
    run.timeout_ms = 1000;
    let frames = run_all(&pod, run).await;
    assert_eq!(exit_of(&frames).outcome, Outcome::TimedOut);
    assert!(
        eventually(Duration::from_secs(1), || processes_with(&marker) == 0).await,
        "processes of the timed-out job survived"
    );

    let after = client::status(&address, Some("k8s-token"), 0)
        .await
        .unwrap();
    assert!(!after.busy, "{after:?}");
    assert_eq!(after.caller.as_deref(), Some("c1"), "the last job's caller");
    client::wipe(&address, Some("k8s-token"), 0).await.unwrap();
    assert_eq!(std::fs::read_dir(root.join("work")).unwrap().count(), 0);
    agent.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&root);
}

/// An agent with `args` and `--exit-with-parent`, the child of a shell
/// standing in for its service; returns the shell and the agent's pid.
async fn agent_of_a_shell(args: &str) -> (tokio::process::Child, u32) {
    let script = format!(
        "{} {args} --exit-with-parent 2>/dev/null & echo $!; wait",
        agent_bin().display()
    );
    let mut parent = tokio::process::Command::new("sh")
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut pid_line = String::new();
    {
        use tokio::io::AsyncBufReadExt;
        let stdout = parent.stdout.take().unwrap();
        tokio::io::BufReader::new(stdout)
            .read_line(&mut pid_line)
            .await
            .unwrap();
    }
    (parent, pid_line.trim().parse().unwrap())
}

/// A service killed with SIGKILL leaves no agent, no job and no cgroup
/// behind. A v1 cgroup holding a zombie cannot be removed, and what the
/// agent killed stays a zombie until its parent reaps it (the agent, only
/// once it ends; init, for what was orphaned, every 2 s on this machine):
/// the removal is left to a remover that outlives the agent. The cgroup
/// part needs a cgroup v1 `cpu` hierarchy.
#[tokio::test]
async fn the_agent_exits_with_its_parent() {
    let root = PathBuf::from("/tmp").join(unique("hparent"));
    std::fs::create_dir_all(&root).unwrap();
    let socket = root.join("agent.sock");
    let sandbox = if LocalRuntime::new(config(&root.join("state"), None))
        .unwrap()
        .mechanisms()
        .iter()
        .any(|m| m.name == "namespaces" && m.available)
    {
        "bwrap"
    } else {
        "none"
    };
    let hierarchy = Path::new("/sys/fs/cgroup/cpu");
    let scope = hierarchy.join("hearth").join(unique("parent"));
    let cgroup = scope.join("p1");
    let cgroups =
        hierarchy.join("cgroup.procs").exists() && std::fs::create_dir_all(&cgroup).is_ok();
    let (mut parent, agent_pid) = agent_of_a_shell(&format!(
        "--listen unix:{} --root {} --sandbox {sandbox}{}",
        socket.display(),
        root.display(),
        if cgroups {
            format!(" --cgroup-v1 cpu={}", cgroup.display())
        } else {
            String::new()
        }
    ))
    .await;
    let address = format!("unix:{}", socket.display());
    assert!(
        eventually(Duration::from_secs(10), || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        })
        .await
    );
    let pod = Pod {
        pod_id: "parent".into(),
        address,
        peer_host: "127.0.0.1".into(),
        token: None,
    };
    let marker = sleep_marker();
    let mut ex = client::run(
        &pod.address,
        pod.token.as_deref(),
        0,
        sleeping_tree(&marker),
    )
    .await
    .unwrap();
    loop {
        if matches!(next(&mut ex).await, Frame::Line { line, .. } if line == "started") {
            break;
        }
    }
    parent.start_kill().unwrap();
    parent.wait().await.unwrap();
    assert!(
        eventually(Duration::from_secs(3), || !is_running(agent_pid)).await,
        "the agent outlived its parent"
    );
    assert!(
        eventually(Duration::from_secs(3), || processes_with(&marker) == 0).await,
        "the job outlived the agent"
    );
    // The agent removed its pod directory on the way out.
    assert!(eventually(Duration::from_secs(3), || !root.join("work").exists()).await);
    if cgroups {
        orphan_cleanup_done(&cgroup).await;
        // No pods lock next to the pod: no service holds the scope.
        assert!(!scope.exists(), "the scope of its last pod stays");
    }
    drop(ex);
    let _ = std::fs::remove_dir_all(&root);
}

/// An agent whose service is gone removes its pod's cgroup, and the
/// service's scope with it once no service holds the pods directory: a
/// service that ended without stopping its pods leaves no cgroups behind,
/// while a service on the same directory keeps its scope. Needs a cgroup v1
/// `cpu` hierarchy (skipped without one).
#[tokio::test]
async fn an_orphaned_agent_removes_its_services_scope_once_no_service_holds_it() {
    let hierarchy = Path::new("/sys/fs/cgroup/cpu");
    if !hierarchy.join("cgroup.procs").exists()
        || std::fs::create_dir_all(hierarchy.join("hearth")).is_err()
    {
        eprintln!("skipped: no cgroup v1 cpu hierarchy to write to");
        return;
    }
    let state = PathBuf::from("/tmp").join(unique("hscope"));
    let pods = state.join("pods");
    // Runs an agent for pod `id` under scope `scope` as the child of a
    // shell standing in for the service, kills the shell, and waits for
    // the agent and the remover it leaves to be gone.
    async fn orphan(pods: &Path, scope: &Path, id: &str) {
        let root = pods.join(id);
        std::fs::create_dir_all(&root).unwrap();
        let cgroup = scope.join(id);
        std::fs::create_dir_all(&cgroup).unwrap();
        let socket = root.join("agent.sock");
        let (mut parent, agent_pid) = agent_of_a_shell(&format!(
            "--listen unix:{} --root {} --sandbox none --cgroup-v1 cpu={}",
            socket.display(),
            root.display(),
            cgroup.display()
        ))
        .await;
        assert!(
            eventually(Duration::from_secs(10), || {
                std::os::unix::net::UnixStream::connect(&socket).is_ok()
            })
            .await
        );
        parent.start_kill().unwrap();
        parent.wait().await.unwrap();
        assert!(
            eventually(Duration::from_secs(5), || !is_running(agent_pid)).await,
            "the agent outlived its parent"
        );
        orphan_cleanup_done(&cgroup).await;
    }

    // A service holds the pods directory (its lock): its scope stays.
    let held_scope = hierarchy.join("hearth").join(unique("held"));
    std::fs::create_dir_all(&pods).unwrap();
    let lock = std::fs::File::create(state.join("pods.lock")).unwrap();
    lock.try_lock().unwrap();
    orphan(&pods, &held_scope, "p1").await;
    assert!(
        held_scope.is_dir(),
        "the scope of a live service was removed"
    );
    drop(lock);
    std::fs::remove_dir(&held_scope).unwrap();

    // No service holds it: the last agent out removes the scope; the one
    // before leaves it to the pod still in it.
    let scope = hierarchy.join("hearth").join(unique("free"));
    std::fs::create_dir_all(scope.join("other-pod")).unwrap();
    orphan(&pods, &scope, "p2").await;
    assert!(scope.is_dir(), "removed while another pod was in it");
    std::fs::remove_dir(scope.join("other-pod")).unwrap();
    orphan(&pods, &scope, "p3").await;
    assert!(!scope.exists(), "the scope stays after its last pod");
    // Also when the lock went with the state directory (a test's cleanup).
    std::fs::remove_dir_all(&state).unwrap();
    let scope = hierarchy.join("hearth").join(unique("gone"));
    orphan(&pods, &scope, "p4").await;
    assert!(
        !scope.exists(),
        "the scope stays without its state directory"
    );
    let _ = std::fs::remove_dir_all(&state);
}

/// Waits for the remover an orphaned agent left for the pod `cgroup` (its
/// command line names the cgroup) to end, and for the cgroup to be gone.
async fn orphan_cleanup_done(cgroup: &Path) {
    let named = cgroup.display().to_string();
    // The remover may still be starting or retrying on a loaded machine:
    // what counts is that the cgroup goes, and the remover with it.
    assert!(
        eventually(Duration::from_secs(20), || !cgroup.exists()).await,
        "the pod's cgroup stays"
    );
    assert!(
        eventually(Duration::from_secs(15), || processes_with(&named) == 0).await,
        "the cgroup remover did not end"
    );
}

#[tokio::test]
async fn an_agent_that_dies_at_start_fails_the_start_cleanly() {
    let state = PathBuf::from("/tmp").join(unique("hbad"));
    std::fs::create_dir_all(&state).unwrap();
    let fake = state.join("fake-agent");
    std::fs::write(&fake, "#!/bin/sh\necho boom-at-start >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let rt = LocalRuntime::new(LocalConfig::new(&state, &fake)).unwrap();
    let pod_id = unique("p");
    let err = rt
        .start_pod(spec(&pod_id, profile(false)))
        .await
        .expect_err("a dead agent cannot start a pod");
    let text = err.to_string();
    assert!(text.contains("boom-at-start"), "{text}");
    assert!(!rt.pod_dir(&pod_id).exists());
    assert!(rt.cgroup_dirs(&pod_id).iter().all(|d| !d.exists()));
    let _ = std::fs::remove_dir_all(&state);
}

#[tokio::test]
async fn jobs_share_the_pods_sandbox_but_nothing_a_job_leaves_behind() {
    let mut h = Harness::new(None);
    if !h.has("namespaces") {
        eprintln!("skipped: bubblewrap unavailable");
        return;
    }
    let pod = h.start(profile(false)).await;
    let pid_of = |frames: &[Frame]| -> u32 { lines(frames, Stream::Stdout)[0].parse().unwrap() };
    // Back to back, the second job runs in the sandbox of the first (its pid
    // namespace has moved on) and finds /tmp and /dev/shm empty again.
    let first = run_all(
        &pod,
        job(&[
            "sh",
            "-c",
            "echo $$; echo x > /tmp/left; echo y > /dev/shm/left",
        ]),
    )
    .await;
    assert_eq!(exit_of(&first).code, Some(0), "{first:?}");
    let second = run_all(&pod, job(&["sh", "-c", "echo $$; ls -A /tmp /dev/shm"])).await;
    assert_eq!(exit_of(&second).code, Some(0), "{second:?}");
    assert!(pid_of(&second) > pid_of(&first), "{first:?} {second:?}");
    let listed: Vec<String> = lines(&second, Stream::Stdout)[1..].to_vec();
    assert!(!listed.iter().any(|l| l.contains("left")), "{listed:?}");

    // A process a job leaves running ends with the job, and takes the
    // sandbox with it: the next job starts in a fresh one.
    let marker = sleep_marker();
    let script = format!("sleep {marker} > /dev/null 2>&1 & echo $$");
    let leaving = run_all(&pod, job(&["sh", "-c", &script])).await;
    assert_eq!(exit_of(&leaving).code, Some(0), "{leaving:?}");
    assert!(
        eventually(Duration::from_secs(5), || processes_with(&marker) == 0).await,
        "the background process outlived its job"
    );
    let after = run_all(&pod, job(&["sh", "-c", "echo $$"])).await;
    assert_eq!(exit_of(&after).code, Some(0), "{after:?}");
    assert!(pid_of(&after) < pid_of(&leaving), "{leaving:?} {after:?}");
    h.finish().await;
}

/// One connection carries one request after another: a line from the
/// service cancels the run that connection follows while it goes on, and is
/// the next request once the run has ended.
#[tokio::test]
async fn one_connection_carries_request_after_request() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut h = Harness::new(None);
    let pod = h.start(profile(false)).await;
    let path = pod.address.strip_prefix("unix:").expect("a local agent");
    let (read, mut write) = tokio::net::UnixStream::connect(path)
        .await
        .unwrap()
        .into_split();
    let mut incoming = BufReader::new(read).lines();
    let line_of = |request: hearth_core::agent::Request| {
        let envelope = hearth_core::agent::Envelope {
            epoch: 0,
            token: None,
            request,
        };
        let mut line = serde_json::to_vec(&envelope).unwrap();
        line.push(b'\n');
        line
    };
    let mut until_final = async || {
        let mut frames = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), incoming.next_line())
                .await
                .expect("answered in time")
                .unwrap()
                .expect("the connection stays open");
            let frame: Frame = serde_json::from_str(&line).unwrap();
            let last = frame.is_final();
            frames.push(frame);
            if last {
                return frames;
            }
        }
    };
    use hearth_core::agent::Request;
    write.write_all(&line_of(Request::Ping)).await.unwrap();
    assert!(matches!(until_final().await[..], [Frame::Pong { .. }]));
    write
        .write_all(&line_of(Request::Run(Box::new(job(&["echo", "one"])))))
        .await
        .unwrap();
    let frames = until_final().await;
    assert_eq!(lines(&frames, Stream::Stdout), ["one"]);
    assert_eq!(exit_of(&frames).outcome, Outcome::Exited);
    // A line while the next run goes on cancels it...
    let marker = sleep_marker();
    write
        .write_all(&line_of(Request::Run(Box::new(sleeping_tree(&marker)))))
        .await
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || processes_with(&marker) >= 2).await);
    write.write_all(b"{\"op\":\"cancel\"}\n").await.unwrap();
    let frames = until_final().await;
    assert_eq!(exit_of(&frames).outcome, Outcome::Cancelled);
    assert!(eventually(Duration::from_secs(3), || processes_with(&marker) == 0).await);
    // ...and after its end, a line is the next request.
    write
        .write_all(&line_of(Request::Run(Box::new(job(&["echo", "two"])))))
        .await
        .unwrap();
    assert_eq!(lines(&until_final().await, Stream::Stdout), ["two"]);
    write.write_all(&line_of(Request::Status)).await.unwrap();
    assert!(matches!(
        until_final().await[..],
        [Frame::Status { busy: false, .. }]
    ));
    h.finish().await;
}
