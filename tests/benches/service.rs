//! Service benchmark: prints figures, asserts nothing.
//!
//! In one run, against the same Postgres, at 1 and 16 clients in closed loops:
//! 1. the baseline: pgbench running one job's life as four durable commits
//!    (`tests/bench/pgbench-job.sql`), the yardstick both peers are held to;
//! 2. the peer: graphile-worker 0.16.6 (`tests/bench/graphile`, run with
//!    node; its packages are installed on first use), adding a no-op job and
//!    waiting for its completion to commit, and the CPU each job cost
//!    (counted as Hearth's is below);
//! 3. Hearth's own commits without Hearth: the store calls of a job's
//!    lifecycle as a job submitted with `wait` makes them (insert, assign and
//!    start relaxed, finish durable);
//! 4. Hearth: no-op jobs (`true`, a real sandboxed process each) submitted
//!    with `wait`, each client on its warm pod: jobs/s, the ratio to the
//!    baseline (the figure to compare with graphile-worker's), the added
//!    latency (total minus the job's own run time) p50/p99, and the CPU
//!    each job cost, from `/proc`: Postgres, the service with its clients,
//!    the pods (agents, sandboxes, jobs) and the rest of the machine;
//!    beside them, what one process costs on this machine whoever starts it
//!    (`true` spawned and reaped on its own, no sandbox): the floor under a
//!    real process per job, which graphile-worker's jobs do not pay, with
//!    what one `cpuid` costs (glibc's start runs dozens, each a trap to the
//!    hypervisor in a VM: the machine sets much of that floor); the header
//!    says whether the pods are sandboxed (without bubblewrap they are not,
//!    and these rows are not the figures to compare);
//! 5. an agent loop of 50 sequential tool calls, each importing one extra
//!    package from a local wheelhouse, on the caller's warm pod versus a fresh
//!    pod per job.
//!
//! Run: `cargo build --release --bins && cargo bench -p hearth-tests --bench service`
//! (Hearth logs at `warn`, as the peer's logger is silenced, unless `RUST_LOG`
//! says otherwise; `HEARTH_BENCH_SECONDS` sets each measurement's length, default 5;
//! `HEARTH_BENCH_CLIENTS` the client counts, default `1,16`; `HEARTH_BENCH_ROUNDS`
//! how many times each count's rows are measured in turn, default 1 (more
//! rounds end with each round's Hearth and graphile-worker ratios, how
//! many rounds Hearth's ratio reached the peer's, and each round's added
//! p50/p99: on a shared VM one round is noise); `HEARTH_BENCH_PEERS=0`
//! measures Hearth alone, for profiling, and `HEARTH_BENCH_LOOP=0` leaves out
//! the agent loop; `HEARTH_DB_RELAXED_CONNECTIONS` sizes
//! the service's pool for intermediate transitions, default 2). Without pgbench or node the rows
//! they fill say why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_store::job::{Finish, NewJob};
use hearth_tests::*;
use serde_json::json;
use uuid::Uuid;

fn seconds() -> Duration {
    Duration::from_secs_f64(
        std::env::var("HEARTH_BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5.0),
    )
}

/// Where the peer benchmarks live.
fn bench_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench")
}

/// Runs a benchmark program to its end; its stdout, or why there is none.
async fn output_of(mut cmd: std::process::Command) -> Result<String, String> {
    let name = format!("{:?}", cmd.get_program());
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .map_err(|e| format!("{name}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{name}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The baseline: pgbench running a job's life as four durable commits.
async fn pgbench(
    db: &sqlx::PgPool,
    db_url: &str,
    clients: usize,
    length: Duration,
) -> Result<f64, String> {
    sqlx::query("create table if not exists bench_job (bench_job_id bigserial primary key, state text not null)")
        .execute(db)
        .await
        .map_err(|e| e.to_string())?;
    let mut cmd = std::process::Command::new("pgbench");
    cmd.args([
        "-n",
        "-c",
        &clients.to_string(),
        "-j",
        &clients.min(2).to_string(),
    ])
    .args(["-T", &length.as_secs().max(1).to_string(), "-f"])
    .arg(bench_dir().join("pgbench-job.sql"))
    .arg(db_url);
    let out = output_of(cmd).await?;
    // "tps = 1234.5 (without initial connection time)"
    out.lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("no tps in pgbench's output: {out}"))
}

/// The peer: graphile-worker's closed loop on the same database.
struct Peer {
    jobs_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Jobs measured, and the CPU they cost (`service`: the peer's own
    /// process, clients included; it has no pods).
    jobs: f64,
    cpu: CpuTime,
}

async fn graphile(db_url: &str, clients: usize, length: Duration) -> Result<Peer, String> {
    let dir = bench_dir().join("graphile");
    if !dir.join("node_modules").is_dir() {
        let mut npm = std::process::Command::new("npm");
        npm.args(["ci", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(&dir);
        output_of(npm).await?;
    }
    let mut node = std::process::Command::new("node");
    node.arg(dir.join("bench.mjs"))
        .arg(db_url)
        .arg(clients.to_string())
        .arg(length.as_secs_f64().to_string());
    let out = output_of(node).await?;
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).map_err(|e| format!("{e}: {out}"))?;
    let f = |k: &str| v[k].as_f64().ok_or_else(|| format!("no {k} in {out}"));
    let cpu = |k: &str| {
        v["cpu"][k]
            .as_f64()
            .ok_or_else(|| format!("no cpu.{k} in {out}"))
    };
    Ok(Peer {
        jobs_per_s: f("jobs_per_s")?,
        p50_ms: f("p50_ms")?,
        p99_ms: f("p99_ms")?,
        jobs: f("jobs")?,
        cpu: CpuTime {
            postgres: cpu("postgres")?,
            service: cpu("worker")?,
            pods: 0.0,
            machine: cpu("machine")?,
        },
    })
}

/// Hearth's commits per job without Hearth, in a database of their own (the
/// service must not see these rows as jobs to schedule).
async fn lifecycle(clients: usize, length: Duration) -> f64 {
    let own = fresh_database_url();
    let db_url = own.url();
    let durable = hearth_store::connect(db_url, true, clients as u32 + 1)
        .await
        .unwrap();
    let tenant_id = hearth_store::tenant::create(&durable, "lifecycle")
        .await
        .unwrap()
        .tenant_id;
    let relaxed = hearth_store::connect_relaxed(db_url, clients as u32 + 1)
        .await
        .unwrap();
    let spec = json!({"kind": "tool_call", "command": ["true"]});
    // The fenced writes need the current epoch.
    let epoch = hearth_store::leadership::current(&durable).await.unwrap();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (durable, relaxed, spec) = (durable.clone(), relaxed.clone(), spec.clone());
        tasks.push(tokio::spawn(async move {
            let caller = format!("base-{c}");
            let mut done = 0u64;
            let mut conn = durable.acquire().await.unwrap();
            // Accepted as a job submitted with `wait` is: relaxed.
            let mut accept = relaxed.acquire().await.unwrap();
            while start.elapsed() < length {
                let id = Uuid::now_v7();
                hearth_store::job::insert(
                    &mut accept,
                    &NewJob {
                        job_id: id,
                        tenant_id,
                        kind: hearth_core::Kind::ToolCall,
                        profile: "cpu-small".to_owned(),
                        caller: caller.clone(),
                        priority: 0,
                        spec: spec.clone(),
                        idempotency_key: None,
                        request_hash: None,
                        traceparent: None,
                    },
                )
                .await
                .unwrap();
                hearth_store::job::assign(
                    &relaxed,
                    epoch,
                    id,
                    hearth_core::Source::Warm,
                    &["pod".to_owned()],
                    0.1,
                )
                .await
                .unwrap();
                hearth_store::job::start(&relaxed, epoch, id, 0.1, 0.1)
                    .await
                    .unwrap();
                let f = Finish {
                    exit_code: Some(0),
                    run_ms: Some(1.0),
                    ..Finish::new(hearth_core::State::Succeeded)
                };
                hearth_store::job::finish(&mut conn, epoch, id, &f)
                    .await
                    .unwrap();
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}

fn row(clients: usize, what: &str, jobs: f64, base: Option<f64>, p50: f64, p99: f64) {
    let ratio = base.map_or("-".to_owned(), |b| format!("{:.1}%", 100.0 * jobs / b));
    println!("{clients:<8} {what:<34} {jobs:>9.0} {ratio:>10} {p50:>12.2} {p99:>12.2}");
}

/// One round's figures for one client count, for the summary over rounds.
struct Verdict {
    clients: usize,
    /// Hearth's and graphile-worker's jobs/s against pgbench's, where both
    /// were measured.
    ratios: Option<(f64, f64)>,
    /// Hearth's added latency (total - run), p50 and p99, in ms.
    added_ms: (f64, f64),
}

/// Each round's ratios and added latency, how many rounds Hearth's ratio
/// reached the peer's, and the median quotient: one round on a shared VM
/// is noise.
fn rounds_summary(of: &[&Verdict]) -> String {
    let added: Vec<String> = of
        .iter()
        .map(|v| format!("{:.2}/{:.2}", v.added_ms.0, v.added_ms.1))
        .collect();
    let ratios: Vec<(f64, f64)> = of.iter().filter_map(|v| v.ratios).collect();
    if ratios.is_empty() {
        return format!(
            "no peer measured; added p50/p99 ms each round: {}",
            added.join(", ")
        );
    }
    let each: Vec<String> = ratios
        .iter()
        .map(|(h, g)| format!("{:.1}/{:.1}", 100.0 * h, 100.0 * g))
        .collect();
    let reached = ratios.iter().filter(|(h, g)| h >= g).count();
    let mut quotient: Vec<f64> = ratios.iter().map(|(h, g)| h / g).collect();
    quotient.sort_by(f64::total_cmp);
    let n = quotient.len();
    let median = if n % 2 == 1 {
        quotient[n / 2]
    } else {
        f64::midpoint(quotient[n / 2 - 1], quotient[n / 2])
    };
    format!(
        "% each round: {}; Hearth reached the peer in {reached} of {n}; median Hearth / peer {median:.2}; added p50/p99 ms each round: {}",
        each.join(", "),
        added.join(", ")
    )
}

/// Prints Hearth's rows for one round; its added latency (total - run),
/// p50 and p99 in ms, for the summary over rounds.
fn report_hearth(clients: usize, base: Option<f64>, h: &Run) -> (f64, f64) {
    let added_ms = (
        percentile(&h.added_server, 0.5),
        percentile(&h.added_server, 0.99),
    );
    row(
        clients,
        "Hearth (added: total - run)",
        h.jobs_per_s,
        base,
        added_ms.0,
        added_ms.1,
    );
    println!(
        "{clients:<8} {:<34} {:>9} {:>10} {:>12.2} {:>12.2}",
        "Hearth (client rtt - run)",
        "",
        "",
        percentile(&h.added_client, 0.5),
        percentile(&h.added_client, 0.99),
    );
    for (label, p) in [("p50", 0.5), ("p99", 0.99)] {
        let phases: Vec<String> = ["queued", "acquire", "bind", "run", "rest"]
            .iter()
            .zip(&h.phases)
            .map(|(name, v)| format!("{name} {:.2}", percentile(v, p)))
            .collect();
        println!(
            "{clients:<8} {:<34} {}",
            format!("Hearth {label} ms per phase"),
            phases.join(", ")
        );
    }
    cpu_row(
        clients,
        "Hearth CPU ms per job",
        "service and clients",
        h.cpu,
        h.added_server.len() as f64,
    );
    added_ms
}

/// Where `jobs` jobs' CPU went, per job; `own` names the process measured.
fn cpu_row(clients: usize, what: &str, own: &str, c: CpuTime, jobs: f64) {
    let jobs = jobs.max(1.0);
    println!(
        "{clients:<8} {what:<34} postgres {:.2}, {own} {:.2}, pods {:.2}, rest {:.2} (machine {:.2})",
        c.postgres / jobs,
        c.service / jobs,
        c.pods / jobs,
        (c.machine - c.postgres - c.service - c.pods) / jobs,
        c.machine / jobs,
    );
}

/// CPU time in ms, from `/proc`, by part of a Hearth run: every `postgres`
/// process, this process (the service and the benchmark's clients), the
/// processes this one started and their descendants (the pods: agents,
/// sandboxes, jobs), and the machine's busy time (`/proc/stat`; the rest is
/// other processes and what the kernel does for nobody in particular). A
/// process counts with the children it reaped, so the jobs' short-lived
/// processes count with their supervisors (this process's own reaped
/// children, stopped pods, are left out).
#[derive(Debug, Clone, Copy, Default)]
struct CpuTime {
    postgres: f64,
    service: f64,
    pods: f64,
    machine: f64,
}

impl CpuTime {
    /// `/proc` counts in USER_HZ, 100 a second on Linux.
    const MS_PER_TICK: f64 = 10.0;

    fn now() -> CpuTime {
        let me = std::process::id();
        // pid -> (parent, comm, own ticks, reaped children's ticks)
        let mut procs: std::collections::HashMap<u32, (u32, String, u64, u64)> = Default::default();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`: the comm may hold anything.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
            let num = |i: usize| {
                fields
                    .get(i)
                    .and_then(|f| f.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            // After the comm: state (0), ppid (1), ..., utime (11), stime
            // (12), cutime (13), cstime (14).
            procs.insert(
                pid,
                (
                    num(1) as u32,
                    stat[open + 1..close].to_owned(),
                    num(11) + num(12),
                    num(13) + num(14),
                ),
            );
        }
        let started_here = |mut pid: u32| {
            for _ in 0..64 {
                match procs.get(&pid) {
                    Some(&(parent, ..)) if parent == me => return true,
                    Some(&(parent, ..)) if parent > 1 => pid = parent,
                    _ => return false,
                }
            }
            false
        };
        let mut t = CpuTime::default();
        for (&pid, (_, comm, own, reaped)) in &procs {
            let ms = |ticks: u64| ticks as f64 * Self::MS_PER_TICK;
            if pid == me {
                t.service += ms(*own);
            } else if comm == "postgres" {
                t.postgres += ms(own + reaped);
            } else if started_here(pid) {
                t.pods += ms(own + reaped);
            }
        }
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let busy: u64 = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .enumerate()
            // user nice system idle iowait irq softirq steal
            .filter(|(i, _)| matches!(i, 0 | 1 | 2 | 5 | 6 | 7))
            .filter_map(|(_, v)| v.parse::<u64>().ok())
            .sum();
        t.machine = busy as f64 * Self::MS_PER_TICK;
        t
    }

    fn since(self, before: CpuTime) -> CpuTime {
        CpuTime {
            postgres: self.postgres - before.postgres,
            service: self.service - before.service,
            pods: self.pods - before.pods,
            machine: self.machine - before.machine,
        }
    }
}

struct Run {
    jobs_per_s: f64,
    /// Server-side: total_ms - run_ms.
    added_server: Vec<f64>,
    /// Client-side: round trip - run_ms.
    added_client: Vec<f64>,
    /// Per job, as the service records it: queued, acquire, bind, run and
    /// the rest of total_ms.
    phases: [Vec<f64>; 5],
    /// Spent while the clients ran.
    cpu: CpuTime,
}

async fn hearth_noop(app: &Arc<TestApp>, key: &str, clients: usize, length: Duration) -> Run {
    let job = |c: usize| json!({"kind": "tool_call", "profile": "cpu-small", "caller": format!("noop-{c}"), "command": ["true"], "timeout_s": 30});
    // Warm every client's pod first.
    for c in 0..clients {
        let (s, v) = app.submit(key, &job(c), Some(30.0)).await;
        assert_eq!(s, 200, "{v}");
    }
    let cpu = CpuTime::now();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (app, key, body) = (app.clone(), key.to_owned(), job(c));
        tasks.push(tokio::spawn(async move {
            let (mut server, mut client) = (Vec::new(), Vec::new());
            let mut phases: [Vec<f64>; 5] = Default::default();
            while start.elapsed() < length {
                let t0 = Instant::now();
                let (s, v) = app.submit(&key, &body, Some(30.0)).await;
                let rtt = t0.elapsed().as_secs_f64() * 1000.0;
                assert_eq!((s, v["state"].as_str()), (200, Some("succeeded")), "{v}");
                assert_eq!(v["source"], "warm");
                let run = v["timing"]["run_ms"].as_f64().unwrap();
                let ms = |k: &str| v["timing"][k].as_f64().unwrap();
                let total = ms("total_ms");
                server.push(total - run);
                client.push(rtt - run);
                let parts = ["queued_ms", "acquire_ms", "bind_ms", "run_ms"].map(ms);
                for (i, p) in parts.iter().enumerate() {
                    phases[i].push(*p);
                }
                phases[4].push(total - parts.iter().sum::<f64>());
            }
            (server, client, phases)
        }));
    }
    let (mut added_server, mut added_client) = (Vec::new(), Vec::new());
    let mut phases: [Vec<f64>; 5] = Default::default();
    for t in tasks {
        let (s, c, p) = t.await.unwrap();
        added_server.extend(s);
        added_client.extend(c);
        for (all, mine) in phases.iter_mut().zip(p) {
            all.extend(mine);
        }
    }
    for p in &mut phases {
        p.sort_by(f64::total_cmp);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = CpuTime::now().since(cpu);
    added_server.sort_by(f64::total_cmp);
    added_client.sort_by(f64::total_cmp);
    Run {
        jobs_per_s: added_server.len() as f64 / elapsed,
        added_server,
        added_client,
        phases,
        cpu,
    }
}

/// What one process costs on this machine, whoever starts it: `true` spawned
/// and reaped 500 times in a row, outside any sandbox. Wall and machine CPU
/// ms per process.
fn process_floor() -> (f64, f64) {
    const N: u32 = 500;
    let cpu = CpuTime::now();
    let start = Instant::now();
    for _ in 0..N {
        let status = std::process::Command::new("true")
            .status()
            .expect("`true` runs");
        assert!(status.success());
    }
    let wall = start.elapsed().as_secs_f64() * 1000.0 / f64::from(N);
    (wall, CpuTime::now().since(cpu).machine / f64::from(N))
}

/// What one `cpuid` instruction costs on this machine, in microseconds:
/// executed natively on bare metal, a trap to the hypervisor in a VM. Every
/// dynamically linked process runs dozens while glibc detects the CPU's
/// caches, so it sets much of the floor under a process per job.
fn cpuid_us() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        const N: u32 = 2_000;
        let start = Instant::now();
        for _ in 0..N {
            // Leaf 2 (cache descriptors): what glibc's cache detection reads.
            std::hint::black_box(std::arch::x86_64::__cpuid(std::hint::black_box(2)));
        }
        Some(start.elapsed().as_secs_f64() * 1e6 / f64::from(N))
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// How the service isolates its pods here, from `GET /v1/profiles`: the
/// figures below measure a sandboxed process per job only where namespaces
/// are available (the local runtime runs jobs unsandboxed, and costlier,
/// without bubblewrap).
async fn isolation(app: &TestApp, key: &str) -> String {
    let (status, v) = app.get(key, "/v1/profiles").await;
    assert_eq!(status, 200, "{v}");
    let sandboxed = v["mechanisms"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["name"] == "namespaces" && m["available"] == true);
    if sandboxed {
        "a bubblewrap sandbox each (pid, ipc, uts, cgroup and network namespaces)".to_owned()
    } else {
        "NOT sandboxed (bubblewrap is missing): the Hearth rows below are not the figures to \
         compare; install bubblewrap"
            .to_owned()
    }
}

async fn agent_loop(app: &Arc<TestApp>, key: &str, fresh: bool) -> (f64, Vec<String>) {
    let code = "import json, os, hearthbenchpkg\njson.dump({'v': hearthbenchpkg.VALUE}, open(os.environ['HEARTH_OUTPUT'], 'w'))\n";
    let start = Instant::now();
    let mut sources = Vec::new();
    let run = Uuid::new_v4().simple().to_string();
    for i in 0..50 {
        // A fresh pod per job: every job is its own caller, so no warm pod fits.
        let caller = if fresh {
            format!("fresh-{run}-{i}")
        } else {
            format!("loop-{run}")
        };
        let mut job = python_job(&caller, code);
        job["deps"] = json!({"pip": ["hearthbenchpkg==1.0"]});
        let (s, v) = app.submit(key, &job, Some(120.0)).await;
        assert_eq!((s, &v["output"]), (200, &json!({"v": 42})), "{v}");
        sources.push(v["source"].as_str().unwrap().to_owned());
    }
    (start.elapsed().as_secs_f64(), sources)
}

fn main() {
    // The peer runs with its logger silenced (`tests/bench/graphile`), so
    // Hearth logs only warnings here too: at `info` it writes two lines per
    // job to stderr, which costs it about a tenth of its throughput on two
    // cores. `RUST_LOG` set by the caller wins. Installed first, this
    // subscriber is the one the service keeps.
    let logs = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned());
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::new(&logs))
        .try_init();
    block_on(async {
        let length = seconds();
        let wheelhouse = wheelhouse();
        let mut config = config();
        config.wheelhouse = Some(wheelhouse.to_path_buf());
        config.db_max_connections = 40;
        // The pool for intermediate transitions and job events (the
        // service's default is 2).
        if let Ok(n) = std::env::var("HEARTH_DB_RELAXED_CONNECTIONS") {
            config.db_relaxed_connections =
                n.parse().expect("HEARTH_DB_RELAXED_CONNECTIONS: a number");
        }
        let db_url = config.database_url.clone();
        let app = Arc::new(spawn_app_with(config).await);
        let t = app.create_tenant("bench").await;

        println!(
            "Hearth service benchmark ({} s per measurement, release build, {} cores)",
            length.as_secs_f64(),
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        let (wall, cpu) = process_floor();
        println!(
            "a process per job: `true` spawned and reaped alone costs {cpu:.2} ms of machine CPU \
             ({wall:.2} ms)"
        );
        if let Some(us) = cpuid_us() {
            println!(
                "  of which the machine decides much: one `cpuid` costs {us:.2} us here (a trap to \
                 the hypervisor in a VM), and glibc's start in every process runs dozens"
            );
        }
        println!("pods: {}", isolation(&app, &t.key).await);
        println!("logs: RUST_LOG={logs} (graphile-worker's logger is silenced)");
        println!();
        let db = hearth_store::connect(&db_url, false, 2).await.unwrap();
        println!(
            "{:<8} {:<34} {:>9} {:>10} {:>12} {:>12}",
            "clients", "", "jobs/s", "/ pgbench", "p50 ms", "p99 ms"
        );
        let peers = std::env::var("HEARTH_BENCH_PEERS").map_or(true, |v| v != "0");
        let counts: Vec<usize> = std::env::var("HEARTH_BENCH_CLIENTS")
            .unwrap_or_else(|_| "1,16".to_owned())
            .split(',')
            .map(|n| n.trim().parse().expect("HEARTH_BENCH_CLIENTS: numbers"))
            .collect();
        let rounds: usize = std::env::var("HEARTH_BENCH_ROUNDS")
            .map_or(1, |n| {
                n.trim().parse().expect("HEARTH_BENCH_ROUNDS: a number")
            })
            .max(1);
        let mut verdicts = Vec::new();
        for clients in counts.iter().flat_map(|&c| std::iter::repeat_n(c, rounds)) {
            if !peers {
                let hearth = hearth_noop(&app, &t.key, clients, length).await;
                let added_ms = report_hearth(clients, None, &hearth);
                verdicts.push(Verdict {
                    clients,
                    ratios: None,
                    added_ms,
                });
                continue;
            }
            let base = match pgbench(&db, &db_url, clients, length).await {
                Ok(tps) => {
                    println!(
                        "{clients:<8} {:<34} {tps:>9.0}",
                        "pgbench: 4 durable commits/job"
                    );
                    Some(tps)
                }
                Err(e) => {
                    println!("{clients:<8} pgbench: not run ({e})");
                    None
                }
            };
            let mut peer = None;
            match graphile(&db_url, clients, length).await {
                Ok(p) => {
                    peer = Some(p.jobs_per_s);
                    row(
                        clients,
                        "graphile-worker 0.16.6 (rtt)",
                        p.jobs_per_s,
                        base,
                        p.p50_ms,
                        p.p99_ms,
                    );
                    cpu_row(
                        clients,
                        "graphile-worker CPU ms per job",
                        "worker and clients",
                        p.cpu,
                        p.jobs,
                    );
                }
                Err(e) => println!("{clients:<8} graphile-worker: not run ({e})"),
            }
            let own = lifecycle(clients, length).await;
            println!(
                "{clients:<8} {:<34} {own:>9.0} {:>10}",
                "Hearth's commits alone",
                base.map_or("-".to_owned(), |b| format!("{:.1}%", 100.0 * own / b))
            );
            let hearth = hearth_noop(&app, &t.key, clients, length).await;
            let added_ms = report_hearth(clients, base, &hearth);
            let ratios = base.zip(peer).map(|(b, p)| (hearth.jobs_per_s / b, p / b));
            verdicts.push(Verdict {
                clients,
                ratios,
                added_ms,
            });
        }
        if rounds > 1 {
            println!(
                "rounds: Hearth / pgbench against graphile-worker / pgbench, and Hearth's added p50/p99 ms, each measured in turn"
            );
            for &clients in &counts {
                let of: Vec<&Verdict> = verdicts.iter().filter(|v| v.clients == clients).collect();
                println!("{clients:<8} {}", rounds_summary(&of));
            }
        }
        println!(
            "(/ pgbench: jobs/s against the baseline measured just before; graphile-worker's latency is its \
             round trip, its job doing nothing; Hearth's added latency is the job's total_ms minus its \
             run_ms as the service records them, and its rtt - run the client's round trip minus run_ms)"
        );
        println!();
        if std::env::var("HEARTH_BENCH_LOOP").is_ok_and(|v| v == "0") {
            return;
        }

        let (warm_s, warm_sources) = agent_loop(&app, &t.key, false).await;
        let (fresh_s, fresh_sources) = agent_loop(&app, &t.key, true).await;
        let count = |v: &[String], s: &str| v.iter().filter(|x| *x == s).count();
        println!(
            "agent loop: 50 sequential tool calls, each importing one extra package (deps.pip, local wheelhouse)"
        );
        println!(
            "  warm reuse:        {warm_s:>8.2} s  ({} warm, {} cold)",
            count(&warm_sources, "warm"),
            count(&warm_sources, "cold")
        );
        println!(
            "  fresh pod per job: {fresh_s:>8.2} s  ({} warm, {} cold)",
            count(&fresh_sources, "warm"),
            count(&fresh_sources, "cold")
        );
        println!("  speed-up:          {:>8.1}x", fresh_s / warm_s);
    });
}
