//! Chaos: real `hearth serve` processes under load while something breaks.
//! The leader of two replicas is killed; PostgreSQL crashes; the state
//! directory's disk fills up; a pod's agent is killed mid-job. Each test
//! asserts outcomes (no accepted job lost or finished twice, no job running
//! twice at once, clear error codes rather than hangs or 500s, a service that
//! recovers without a restart) and prints its figures. Bounds are generous
//! correctness bounds (an answer that never comes is a hang), not timings.
//!
//! Needs what `tests/run.sh` sets up (bubblewrap, a PostgreSQL server), root
//! (tmpfs mounts) and PostgreSQL's `initdb` and `pg_ctl` for a private cluster
//! (`HEARTH_TEST_PG_BIN`, else `/usr/lib/postgresql/<newest>/bin`, else the
//! `PATH`); without them the PostgreSQL test fails under `CI`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hearth_tests::*;
use serde_json::{Value, json};
use uuid::Uuid;

const FINAL: [&str; 4] = ["succeeded", "failed", "timed_out", "cancelled"];

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_nanos()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A unique tag for one test's jobs, found in `/proc` command lines.
fn marker() -> String {
    format!("hearth-chaos-{}", Uuid::new_v4().simple())
}

// ---- the service -------------------------------------------------------------

/// How a client reaches one service; cheap to clone into client tasks.
#[derive(Clone)]
struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The status and JSON body (null when there is none), or `None` when no
    /// answer came (the connection was refused or cut).
    async fn try_send(&self, req: reqwest::RequestBuilder, key: &str) -> Option<(u16, Value)> {
        let r = req.bearer_auth(key).send().await.ok()?;
        let status = r.status().as_u16();
        Some((status, r.json().await.unwrap_or(Value::Null)))
    }

    async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        self.try_send(self.http.get(self.url(path)), key)
            .await
            .unwrap_or_else(|| panic!("GET {path}: no answer"))
    }

    async fn post(&self, key: &str, path: &str, body: &Value) -> (u16, Value) {
        self.try_send(self.http.post(self.url(path)).json(body), key)
            .await
            .unwrap_or_else(|| panic!("POST {path}: no answer"))
    }

    async fn create_tenant(&self, name: &str) -> String {
        let (status, v) = self
            .post(ADMIN_TOKEN, "/v1/admin/tenants", &json!({ "name": name }))
            .await;
        assert_eq!(status, 201, "{v}");
        v["api_key"].as_str().unwrap().to_owned()
    }

    /// The `hearth_leader` gauge; false when the service does not answer.
    async fn leads(&self) -> bool {
        match self.http.get(self.url("/metrics")).send().await {
            Ok(r) => r
                .text()
                .await
                .is_ok_and(|t| t.lines().any(|l| l == "hearth_leader 1")),
            Err(_) => false,
        }
    }

    async fn health(&self) -> Option<u16> {
        let r = self.http.get(self.url("/healthz")).send().await.ok()?;
        Some(r.status().as_u16())
    }

    /// Polls a job until it is final, for at most `limit`.
    async fn until_final(&self, key: &str, id: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let (status, job) = self.get(key, &format!("/v1/jobs/{id}?wait=10")).await;
            assert!(
                status == 200 || status == 202,
                "GET job {id}: {status} {job}"
            );
            if FINAL.contains(&job["state"].as_str().unwrap_or("")) {
                return job;
            }
            assert!(
                Instant::now() < deadline,
                "job {id} not final after {limit:?}: {job}"
            );
        }
    }

    /// Waits until a job is running.
    async fn until_running(&self, key: &str, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, job) = self.get(key, &format!("/v1/jobs/{id}")).await;
            if job["state"] == "running" {
                return job;
            }
            assert!(Instant::now() < deadline, "job never ran: {job}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One `hearth serve` process; killed (SIGKILL) when dropped.
struct Service {
    served: Served,
    api: Api,
}

impl Service {
    /// `kill -9`, and reaps the process.
    fn kill(&mut self) {
        self.served.kill();
    }

    /// Whether the process ended by itself (it should not).
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.served.exited()
    }
}

/// Starts `hearth serve` on `db` with the state directory `state`, and waits
/// until it answers.
async fn start(db: &str, state: &Path, env: &[(&str, &str)]) -> Service {
    let served = Served::start(db, state, env).await;
    let api = Api {
        base: served.base.clone(),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(90))
            .build()
            .unwrap(),
    };
    Service { served, api }
}

/// A shell job: `script` is the whole of `run.sh`.
fn sh_job(caller: &str, script: &str, timeout_s: u32) -> Value {
    json!({
        "kind": "tool_call",
        "profile": "cpu-small",
        "caller": caller,
        "code": {"files": {"run.sh": script}},
        "command": ["sh", "run.sh"],
        "timeout_s": timeout_s,
    })
}

/// A job that notes its attempt and its start and end (wall clock, ns) on
/// stdout and as its output, and between them runs a child for `run_s`
/// seconds whose last argument is `<tag>:<job id>:<attempt>`, for a
/// [`Watcher`] to see.
fn timeline_job(caller: &str, tag: &str, run_s: f64) -> Value {
    sh_job(
        caller,
        &format!(
            "set -e\n\
             s=$(date +%s%N)\n\
             echo \"start $s attempt $HEARTH_ATTEMPT\"\n\
             sh -c 'sleep {run_s}; :' \"{tag}:$HEARTH_JOB_ID:$HEARTH_ATTEMPT\"\n\
             e=$(date +%s%N)\n\
             echo \"end $e attempt $HEARTH_ATTEMPT\"\n\
             printf '{{\"attempt\": %s, \"start_ns\": %s, \"end_ns\": %s}}' \"$HEARTH_ATTEMPT\" \"$s\" \"$e\" > \"$HEARTH_OUTPUT\"\n"
        ),
        60,
    )
}

// ---- load --------------------------------------------------------------------

/// One request of the load and its answer.
#[derive(Debug, Clone)]
struct Answer {
    sent: Instant,
    took: Duration,
    /// `None`: no answer (the connection was refused or cut).
    status: Option<u16>,
    /// The error body's `code` of a non-2xx answer.
    code: Option<String>,
}

/// What the load's clients saw.
#[derive(Default)]
struct Seen {
    /// Jobs answered with a 2xx: id -> the final state the answer carried.
    accepted: HashMap<String, Option<String>>,
    answers: Vec<Answer>,
}

impl Seen {
    fn finished(&self) -> usize {
        self.accepted.values().filter(|s| s.is_some()).count()
    }
}

/// Closed-loop clients: each submits a job with `?wait=`, and the next once
/// it is answered, through one of `targets` (client `i` uses
/// `targets[i % len]`, read afresh for every request), until `stop`.
struct Load {
    stop: Arc<AtomicBool>,
    targets: Arc<Mutex<Vec<Api>>>,
    seen: Arc<Mutex<Seen>>,
    clients: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(
        clients: usize,
        targets: Vec<Api>,
        key: &str,
        wait_s: u32,
        job: impl Fn(usize) -> Value + Send + Sync + 'static,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let targets = Arc::new(Mutex::new(targets));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let job = Arc::new(job);
        let clients = (0..clients)
            .map(|i| {
                let (stop, targets, seen, job) =
                    (stop.clone(), targets.clone(), seen.clone(), job.clone());
                let key = key.to_owned();
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let api = {
                            let t = lock(&targets);
                            t[i % t.len()].clone()
                        };
                        let sent = Instant::now();
                        let req = api
                            .http
                            .post(api.url(&format!("/v1/jobs?wait={wait_s}")))
                            .json(&job(i));
                        let answer = api.try_send(req, &key).await;
                        let took = sent.elapsed();
                        let (status, code) = match &answer {
                            Some((s, _)) if (200..300).contains(s) => (Some(*s), None),
                            Some((s, v)) => (Some(*s), v["code"].as_str().map(str::to_owned)),
                            None => (None, None),
                        };
                        {
                            let mut seen = lock(&seen);
                            if let Some((s, v)) = &answer
                                && (200..300).contains(s)
                            {
                                let id = v["id"].as_str().expect("a job id").to_owned();
                                let state = v["state"].as_str().unwrap_or("");
                                let done = FINAL.contains(&state).then(|| state.to_owned());
                                seen.accepted.insert(id, done);
                            }
                            seen.answers.push(Answer {
                                sent,
                                took,
                                status,
                                code,
                            });
                        }
                        let refused = !status.is_some_and(|s| (200..300).contains(&s));
                        if refused {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            targets,
            seen,
            clients,
        }
    }

    fn retarget(&self, targets: Vec<Api>) {
        *lock(&self.targets) = targets;
    }

    fn finished(&self) -> usize {
        lock(&self.seen).finished()
    }

    /// Waits until `n` more jobs than now were answered as finished, for at
    /// most `limit`.
    async fn until_finished(&self, n: usize, limit: Duration) {
        let target = self.finished() + n;
        let deadline = Instant::now() + limit;
        while self.finished() < target {
            assert!(
                Instant::now() < deadline,
                "the load finished only {} of {target} jobs in {limit:?}",
                self.finished()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the clients (each ends its request in flight) and returns what
    /// they saw.
    async fn stop(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        for c in self.clients {
            c.await.expect("a client panicked");
        }
        std::mem::take(&mut *lock(&self.seen))
    }
}

/// Status counts of answers, `none` for requests that got no answer.
fn tally<'a>(answers: impl IntoIterator<Item = &'a Answer>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for a in answers {
        let name = match (a.status, &a.code) {
            (None, _) => "none".to_owned(),
            (Some(s), Some(code)) => format!("{s} {code}"),
            (Some(s), None) => s.to_string(),
        };
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

/// A stored job: `(id, state, attempts, output, error_code)`.
type Row = (String, String, i32, Option<Value>, Option<String>);

/// Waits until no job in the database is unfinished, for at most `limit`;
/// returns every job.
async fn all_final(db: &str, limit: Duration) -> Vec<Row> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(db)
        .await
        .expect("the test database");
    let deadline = Instant::now() + limit;
    let rows = loop {
        let rows: Vec<Row> = sqlx::query_as(
            "select job_id::text, state, attempts, output, error_code from job order by job_id",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        let unfinished: Vec<_> = rows
            .iter()
            .filter(|r| !FINAL.contains(&r.1.as_str()))
            .map(|r| (&r.0, &r.1))
            .collect();
        if unfinished.is_empty() {
            break rows;
        }
        assert!(
            Instant::now() < deadline,
            "{} jobs still unfinished after {limit:?}: {:?}",
            unfinished.len(),
            &unfinished[..unfinished.len().min(10)]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    pool.close().await;
    rows
}

fn states(rows: &[Row]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for r in rows {
        let name = match &r.4 {
            Some(code) => format!("{} {code}", r.1),
            None => r.1.clone(),
        };
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

// ---- 1. the leader killed under load ------------------------------------------

/// `(job id, attempt, pid)` of a job process a [`Watcher`] saw.
type Sighting = (String, u32, u32);

/// Every process of one test's jobs, seen from outside their sandboxes: a
/// thread polls `/proc` for command lines ending in `<tag>:<job>:<attempt>`
/// (see [`timeline_job`]) and notes when each was first and last seen (wall
/// clock, ns). Polling can miss an overlap shorter than a poll, never invent
/// one: a process's sightings are stamped as they are read.
struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<HashMap<Sighting, (u128, u128)>>>,
}

impl Watcher {
    fn start(tag: &str) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let prefix = format!("{tag}:");
        let done = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen: HashMap<Sighting, (u128, u128, u32)> = HashMap::new();
            while !done.load(Ordering::Relaxed) {
                for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                    let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
                        continue;
                    };
                    let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                        continue;
                    };
                    let at = now_ns();
                    let cmdline = String::from_utf8_lossy(&cmdline);
                    let Some(arg) = cmdline.split('\0').find(|a| a.starts_with(&prefix)) else {
                        continue;
                    };
                    let mut parts = arg[prefix.len()..].split(':');
                    let (Some(job), Some(Ok(attempt))) =
                        (parts.next(), parts.next().map(str::parse::<u32>))
                    else {
                        continue;
                    };
                    // A child forked by the tagged shell carries its command
                    // line until it execs: the same run, not another one.
                    let ppid = parent(pid).unwrap_or(0);
                    seen.entry((job.to_owned(), attempt, pid))
                        .and_modify(|s| s.1 = at)
                        .or_insert((at, at, ppid));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let runs: std::collections::HashSet<Sighting> = seen.keys().cloned().collect();
            seen.into_iter()
                .filter(|((job, attempt, _), (_, _, ppid))| {
                    !runs.contains(&(job.clone(), *attempt, *ppid))
                })
                .map(|(k, (from, to, _))| (k, (from, to)))
                .collect()
        });
        Watcher {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> HashMap<Sighting, (u128, u128)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("finished once")
            .join()
            .expect("the watcher panicked")
    }
}

/// A process's parent, from `/proc/<pid>/stat` (its fourth field, after the
/// command name in parentheses, which may hold anything).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One run of a job: its attempt, the process it was seen as (`None`: the
/// job's own account in its output), and its span in ns.
#[derive(Debug, Clone, Copy)]
struct Run {
    attempt: u32,
    pid: Option<u32>,
    from: u128,
    to: u128,
}

/// Pairs of runs of one job that overlap in time: different attempts, or
/// the same attempt in two processes.
fn overlaps(runs: &[Run]) -> Vec<(Run, Run)> {
    let mut found = Vec::new();
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            let distinct = a.attempt != b.attempt || a.pid.is_some() && b.pid.is_some();
            if distinct && a.from <= b.to && b.from <= a.to {
                found.push((*a, *b));
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_leader_under_load_loses_no_job_and_runs_none_twice_at_once() {
    const CLIENTS: usize = 16;
    let db = fresh_database_url();
    let (state_a, state_b) = (state_dir(), state_dir());
    let mut a = start(&db, &state_a, &[]).await;
    let mut led = false;
    for _ in 0..200 {
        if a.api.leads().await {
            led = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(led, "the first replica never took the lease");
    let b = start(&db, &state_b, &[]).await;
    let key = a.api.create_tenant("chaos-leader").await;

    // Every state change the replicas announce, to count final ones per job.
    let mut listener = sqlx::postgres::PgListener::connect(&db).await.unwrap();
    listener.listen("hearth_job").await.unwrap();
    let announced: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let listening = {
        let announced = announced.clone();
        tokio::spawn(async move {
            while let Ok(n) = listener.recv().await {
                let Ok(v) = serde_json::from_str::<Value>(n.payload()) else {
                    continue;
                };
                if let (Some(job), Some(state)) = (v["job_id"].as_str(), v["state"].as_str()) {
                    lock(&announced).push((job.to_owned(), state.to_owned()));
                }
            }
        })
    };

    let tag = marker();
    let watcher = Watcher::start(&tag);
    let job_tag = tag.clone();
    let load = Load::start(
        CLIENTS,
        vec![a.api.clone(), b.api.clone()],
        &key,
        30,
        move |i| timeline_job(&format!("c{i}"), &job_tag, 0.4),
    );
    // Warm up, then kill the leader while jobs run on it.
    load.until_finished(3 * CLIENTS, Duration::from_secs(90))
        .await;
    let before_kill = load.finished();
    let killed_ns = now_ns();
    let killed = Instant::now();
    a.kill();
    load.retarget(vec![b.api.clone()]);
    let mut takeover = None;
    while killed.elapsed() < Duration::from_secs(60) {
        if b.api.leads().await {
            takeover = Some(killed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let takeover = takeover.expect("the surviving replica never took the lease");
    load.until_finished(3 * CLIENTS, Duration::from_secs(90))
        .await;
    let seen = load.stop().await;
    let rows = all_final(&db, Duration::from_secs(120)).await;
    let settled = killed.elapsed();
    let sightings = watcher.finish();
    // Late announcements of the last jobs.
    tokio::time::sleep(Duration::from_millis(500)).await;
    listening.abort();
    let announced = std::mem::take(&mut *lock(&announced));

    // Every job the database holds (a superset of those answered 2xx)
    // reached a final state; none failed.
    let by_id: HashMap<&str, _> = rows.iter().map(|r| (r.0.as_str(), r)).collect();
    for (id, answered) in &seen.accepted {
        let row = by_id
            .get(id.as_str())
            .unwrap_or_else(|| panic!("job {id} was accepted but is not stored"));
        if let Some(state) = answered {
            assert_eq!(&row.1, state, "job {id} changed its final state");
        }
    }
    let counts = states(&rows);
    assert_eq!(
        counts.keys().collect::<Vec<_>>(),
        ["succeeded"],
        "every job succeeds, on a later attempt if its pods died with the leader: {counts:?}"
    );
    // At most one final state was announced per job, and it is the stored one.
    let mut finals: HashMap<&str, Vec<&str>> = HashMap::new();
    for (job, state) in &announced {
        if FINAL.contains(&state.as_str()) {
            finals.entry(job).or_default().push(state);
        }
    }
    for (job, announced) in &finals {
        let stored = by_id.get(job).map(|r| r.1.as_str());
        assert!(
            announced.len() == 1 && stored == Some(announced[0]),
            "job {job}: final states announced {announced:?}, stored {stored:?}"
        );
    }

    // No two runs of a job overlapped: the runs the watcher saw, and the
    // last run's own account in its output, which is the job's last attempt
    // and, if not the first, began after the kill.
    let mut runs: HashMap<&str, Vec<Run>> = HashMap::new();
    for ((job, attempt, pid), (from, to)) in &sightings {
        runs.entry(job.as_str()).or_default().push(Run {
            attempt: *attempt,
            pid: Some(*pid),
            from: *from,
            to: *to,
        });
    }
    let mut ran_twice = 0;
    for (id, state, attempts, output, _) in &rows {
        let out = output.as_ref().expect("a succeeded job's output");
        let attempt = out["attempt"].as_u64().expect("attempt") as u32;
        let (from, to) = (
            u128::from(out["start_ns"].as_u64().expect("start_ns")),
            u128::from(out["end_ns"].as_u64().expect("end_ns")),
        );
        assert_eq!(state, "succeeded");
        assert_eq!(
            attempt as i32, *attempts,
            "job {id}: its output comes from its last attempt"
        );
        if attempt > 1 {
            ran_twice += 1;
            assert!(
                from > killed_ns,
                "job {id}: attempt {attempt} began before the leader was killed"
            );
        }
        runs.entry(id.as_str()).or_default().push(Run {
            attempt,
            pid: None,
            from,
            to,
        });
    }
    let watched_twice = runs
        .values()
        .filter(|r| {
            let mut attempts: Vec<u32> = r.iter().map(|r| r.attempt).collect();
            attempts.sort_unstable();
            attempts.dedup();
            attempts.len() > 1
        })
        .count();
    let overlapping: Vec<_> = runs
        .iter()
        .flat_map(|(job, r)| overlaps(r).into_iter().map(move |o| (*job, o)))
        .collect();
    assert!(
        overlapping.is_empty(),
        "{} runs of one job overlapped, e.g. {:?}",
        overlapping.len(),
        &overlapping[..overlapping.len().min(5)]
    );
    let max_attempts = rows.iter().map(|r| r.2).max().unwrap_or(0);
    assert!(
        max_attempts <= 2,
        "a job had {max_attempts} attempts after one kill"
    );

    println!(
        "kill -9 of the leader under {CLIENTS}-client load: {} jobs stored, {} answered 2xx \
         ({before_kill} finished before the kill); answers {:?}; takeover {:.2} s; all final \
         {:.2} s after the kill; ran twice: {ran_twice} (the watcher saw {watched_twice} jobs \
         in two attempts, {} processes in all); overlaps: 0",
        rows.len(),
        seen.accepted.len(),
        tally(&seen.answers),
        takeover.as_secs_f64(),
        settled.as_secs_f64(),
        sightings.len(),
    );
}

// ---- 2. PostgreSQL crashed under load -------------------------------------------

/// A private PostgreSQL cluster in a temporary directory, so that stopping it
/// disturbs no other test: `initdb` (trust auth) and `pg_ctl` run as
/// `postgres` when the tests run as root. Stopped and removed when dropped,
/// whether the test passed or is unwinding from a panic.
struct PgCluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

/// Where `initdb` and `pg_ctl` are: `HEARTH_TEST_PG_BIN`, the newest
/// `/usr/lib/postgresql/<version>/bin`, or the `PATH`.
fn pg_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HEARTH_TEST_PG_BIN") {
        return Some(PathBuf::from(dir)).filter(|d| d.join("initdb").is_file());
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
    })
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

impl PgCluster {
    /// A new cluster, running; `None` (said loudly) where PostgreSQL's
    /// server programs are missing.
    fn start() -> Option<PgCluster> {
        let bin = pg_bin()?;
        let dir = std::env::temp_dir().join(format!("hearth-chaos-pg-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("the cluster's directory");
        let cluster = PgCluster {
            bin,
            dir,
            port: free_port(),
        };
        if is_root() {
            let owned = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&cluster.dir)
                .status()
                .expect("chown");
            assert!(
                owned.success(),
                "chown to postgres failed (is there a `postgres` user?)"
            );
        }
        let data = cluster.dir.join("data");
        cluster.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "-A".as_ref(),
                "trust".as_ref(),
                "--no-sync".as_ref(),
            ],
        );
        cluster.up();
        Some(cluster)
    }

    /// Runs one of the server programs (as `postgres` when root); panics with
    /// its output if it fails.
    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) {
        let path = self.bin.join(program);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let out = cmd
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(
            out.status.success(),
            "{program} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.dir.join("data");
        let log = self.dir.join("server.log");
        let mut all: Vec<&std::ffi::OsStr> = vec![
            "-D".as_ref(),
            data.as_os_str(),
            "-l".as_ref(),
            log.as_os_str(),
        ];
        all.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
        self.run("pg_ctl", &all);
    }

    /// Starts the server and waits until it accepts connections.
    fn up(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=40 -c fsync=off",
            self.port,
            self.dir.display()
        );
        self.pg_ctl(&["-w", "-t", "60", "-o", &options, "start"]);
    }

    /// Stops the server as a crash does: immediate mode ends every process
    /// at once, without writing out what is not on disk yet (relaxed commits
    /// among it); the next start recovers from the log.
    fn crash(&self) {
        self.pg_ctl(&["-w", "-t", "60", "-m", "immediate", "stop"]);
    }

    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Never panics: this may run while a panic unwinds.
        let data = self.dir.join("data");
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"));
            c
        } else {
            Command::new(self.bin.join("pg_ctl"))
        };
        let _ = cmd
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!(
                "could not remove the test cluster {}: {e}",
                self.dir.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_crash_answers_503_meanwhile_and_loses_no_job() {
    const CLIENTS: usize = 8;
    const ACQUIRE_TIMEOUT_S: f64 = 2.0;
    let Some(pg) = PgCluster::start() else {
        let msg = "CHAOS TEST NOT RUN: PostgreSQL's initdb/pg_ctl not found (set HEARTH_TEST_PG_BIN, \
                   or install postgresql): the PostgreSQL-crash case needs a private cluster";
        // Straight to stderr: the test harness captures `eprintln!`.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("\n!!!!!!!!\n{msg}\n!!!!!!!!\n").as_bytes(),
        );
        // Skipped on a developer's machine, never in CI.
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "{msg}");
        return;
    };
    let db = pg.url("hearth_chaos");
    let state = state_dir();
    let mut svc = start(
        &db,
        &state,
        &[(
            "HEARTH_DB_ACQUIRE_TIMEOUT_S",
            &ACQUIRE_TIMEOUT_S.to_string(),
        )],
    )
    .await;
    let key = svc.api.create_tenant("chaos-postgres").await;
    let load = Load::start(CLIENTS, vec![svc.api.clone()], &key, 10, |i| {
        sh_job(&format!("c{i}"), "sleep 0.2; echo ok\n", 60)
    });
    load.until_finished(2 * CLIENTS, Duration::from_secs(60))
        .await;

    // Down for a few seconds, under load.
    pg.crash();
    let down = Instant::now();
    let mut health = Vec::new();
    while down.elapsed() < Duration::from_secs(4) {
        let t = Instant::now();
        health.push((svc.api.health().await, t.elapsed()));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let up_at = Instant::now();
    pg.up();
    let restarted = Instant::now();

    // The service recovers by itself: new jobs are accepted and run.
    let mut recovered = None;
    while restarted.elapsed() < Duration::from_secs(60) {
        if let Some(status) = svc.exited() {
            // A leader that loses its lease steps down and competes for it
            // again (`Scheduler::step_down`): the service must not exit.
            panic!(
                "the service exited ({status}) when PostgreSQL restarted, rather than recovering by itself"
            );
        }
        let (s, v) = svc
            .api
            .try_send(
                svc.api
                    .http
                    .post(svc.api.url("/v1/jobs?wait=10"))
                    .json(&sh_job("probe", "echo ok\n", 60)),
                &key,
            )
            .await
            .unwrap_or((0, Value::Null));
        if s == 200 && v["state"] == "succeeded" {
            recovered = Some(restarted.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let recovered = recovered.expect("no job ran within 60 s of PostgreSQL's restart");
    load.until_finished(2 * CLIENTS, Duration::from_secs(60))
        .await;
    let seen = load.stop().await;
    let rows = all_final(&db, Duration::from_secs(60)).await;

    // Every request was answered, 2xx or 503 `unavailable`, never 500;
    // those sent while it was down were refused with 503 within about the
    // configured acquire timeout (those answered after the restart may
    // have been accepted), rather than hanging.
    for a in &seen.answers {
        let s = a
            .status
            .unwrap_or_else(|| panic!("a request got no answer: {a:?}"));
        assert!(
            (200..300).contains(&s) || s == 503 && a.code.as_deref() == Some("unavailable"),
            "answered {s} {:?}",
            a.code
        );
    }
    let during: Vec<&Answer> = seen
        .answers
        .iter()
        .filter(|a| a.sent >= down && a.sent < up_at)
        .collect();
    // Whether a request sent during the outage is refused or waits for
    // the database to come back depends on where it was when the database
    // went: both are fine, an answer after the bound below is not.
    let refused = during.iter().filter(|a| a.status == Some(503)).count();
    println!(
        "sent while PostgreSQL was down: {}, refused with 503: {refused}",
        during.len()
    );
    for a in &during {
        assert!(
            a.status == Some(503) || a.sent + a.took > up_at,
            "a job was accepted while PostgreSQL was down: {a:?}"
        );
    }
    let slowest = during.iter().map(|a| a.took).max().unwrap_or_default();
    assert!(
        slowest < Duration::from_secs_f64(ACQUIRE_TIMEOUT_S + 10.0),
        "a request hung for {slowest:?} while PostgreSQL was down"
    );
    let unavailable = seen
        .answers
        .iter()
        .filter(|a| a.status == Some(503))
        .count();
    assert!(
        health.iter().all(|(s, _)| *s == Some(503)),
        "/healthz while PostgreSQL was down: {health:?}"
    );

    // No accepted job is lost: each reached a final state, and none of
    // those answered as final changed.
    let by_id: HashMap<&str, _> = rows.iter().map(|r| (r.0.as_str(), r)).collect();
    for (id, answered) in &seen.accepted {
        let row = by_id
            .get(id.as_str())
            .unwrap_or_else(|| panic!("job {id} was accepted but is not stored"));
        if let Some(state) = answered {
            assert_eq!(&row.1, state, "job {id} changed its final state");
        }
    }
    let counts = states(&rows);
    assert!(
        counts
            .keys()
            .all(|k| k == "succeeded" || k == "failed pod_lost"),
        "{counts:?}"
    );
    assert!(svc.exited().is_none(), "the service exited");
    println!(
        "PostgreSQL crashed and down for {:.1} s under {CLIENTS}-client load: {} requests sent while \
         down, {refused} refused with 503 unavailable, the slowest answered in {:.2} s \
         ({unavailable} 503s in all); /healthz {:?}; first \
         job run {:.2} s after the restart; {} jobs accepted, all final: {counts:?}; answers {:?}",
        up_at.duration_since(down).as_secs_f64(),
        during.len(),
        slowest.as_secs_f64(),
        tally_health(&health),
        recovered.as_secs_f64(),
        seen.accepted.len(),
        tally(&seen.answers),
    );
}

fn tally_health(health: &[(Option<u16>, Duration)]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (s, _) in health {
        *counts
            .entry(s.map_or("none".to_owned(), |s| s.to_string()))
            .or_insert(0) += 1;
    }
    counts
}

// ---- 3. a full disk, and a killed agent ----------------------------------------

/// A small tmpfs for a service's state directory; unmounted (lazily, so a
/// process still inside does not keep it) and removed when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(size_mib: u32) -> Tmpfs {
        let dir =
            // Short: agent sockets live under it (107 bytes at most).
            std::env::temp_dir().join(format!("hc-{}", &Uuid::new_v4().simple().to_string()[..8]));
        std::fs::create_dir_all(&dir).expect("the mount point");
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size_mib}m,mode=0755"),
                "tmpfs",
            ])
            .arg(&dir)
            .output()
            .expect("mount");
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            panic!(
                "mounting a tmpfs failed (the chaos tests run as root): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Tmpfs { dir }
    }

    fn filler(&self) -> PathBuf {
        self.dir.join("filler")
    }

    /// Fills the file system from outside: writes until no byte fits.
    /// Returns how many bytes it took.
    fn fill(&self) -> u64 {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .expect("the filler");
        let mut written = 0u64;
        for size in [1 << 20, 4096, 1] {
            let chunk = vec![0u8; size];
            loop {
                match f.write(&chunk) {
                    Ok(0) => break,
                    Ok(n) => written += n as u64,
                    Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                    Err(e) => panic!("filling the disk: {e}"),
                }
            }
        }
        written
    }

    fn free(&self) {
        std::fs::remove_file(self.filler()).expect("removing the filler");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Pod starts that failed since `since`, from the pool's record.
async fn failed_starts(db: &str, since: SystemTime) -> i64 {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(db)
        .await
        .expect("the test database");
    let since = since
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let n: i64 = sqlx::query_scalar(
        "select count(*) from pod_event
         where kind = 'gone' and reason->>'code' = 'start_failed' and at >= to_timestamp($1)",
    )
    .bind(since)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_state_disk_fails_jobs_clearly_and_they_run_again_once_space_is_freed() {
    let disk = Tmpfs::mount(32);
    let db = fresh_database_url();
    let svc = start(&db, &disk.dir, &[]).await;
    let api = &svc.api;
    let key = api.create_tenant("chaos-disk").await;
    // Writes 256 KiB to its work directory and its output after `pause_s`.
    let writer = |caller: &str, pause_s: f64| {
        sh_job(
            caller,
            &format!(
                "set -e\nsleep {pause_s}\nhead -c 262144 /dev/zero > blob\n\
                 printf '{{\"ok\": true}}' > \"$HEARTH_OUTPUT\"\necho written\n"
            ),
            60,
        )
    };
    // Warm pods for two callers.
    for caller in ["w1", "w2"] {
        let (s, v) = api
            .post(&key, "/v1/jobs?wait=60", &writer(caller, 0.0))
            .await;
        assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
    }

    // Jobs running while the disk fills up from outside.
    let mut jobs = Vec::new();
    for caller in ["w1", "w2"] {
        let (s, v) = api.post(&key, "/v1/jobs", &writer(caller, 2.0)).await;
        assert_eq!(s, 202, "{v}");
        jobs.push(v["id"].as_str().unwrap().to_owned());
    }
    for id in &jobs {
        api.until_running(&key, id).await;
    }
    let full_at = SystemTime::now();
    let filled = disk.fill();
    let full_since = Instant::now();

    // Jobs accepted while it is full: the warm callers' and new callers'.
    for caller in ["w1", "w2", "n1", "n2"] {
        let (s, v) = api.post(&key, "/v1/jobs", &writer(caller, 0.0)).await;
        assert_eq!(
            s, 202,
            "a job accepted while the state disk is full: {s} {v}"
        );
        jobs.push(v["id"].as_str().unwrap().to_owned());
    }
    // Each ends with a clear error, or waits for a pod (its starts are
    // retried) and runs once space is freed, below. None hangs half-way,
    // assigned or running.
    let mut outcomes = BTreeMap::new();
    let mut waiting = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut pending = jobs.clone();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for id in pending {
            let (s, v) = api.get(&key, &format!("/v1/jobs/{id}")).await;
            assert!(
                s == 200 || s == 202,
                "GET job while the disk is full: {s} {v}"
            );
            let state = v["state"].as_str().unwrap_or("").to_owned();
            if FINAL.contains(&state.as_str()) {
                let code = v["error"]["code"].as_str().unwrap_or("");
                let message = v["error"]["message"].as_str().unwrap_or("");
                println!(
                    "while full: {} {state} {code}: {message}; stderr {:?}",
                    v["caller"], v["stderr"]
                );
                if state != "succeeded" {
                    assert!(
                        !code.is_empty() && !message.is_empty() && code != "internal",
                        "a job failed without a clear error: {v}"
                    );
                }
                *outcomes.entry(format!("{state} {code}")).or_insert(0) += 1;
            } else if Instant::now() >= deadline {
                assert_eq!(state, "queued", "a job stuck {state} on a full disk: {v}");
                waiting.push(id);
            } else {
                still.push(id);
            }
        }
        pending = still;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The service stays healthy and answers.
    assert_eq!(api.health().await, Some(200));
    for path in ["/v1/jobs?limit=10", "/v1/pools", "/v1/profiles"] {
        let (s, v) = api.get(&key, path).await;
        assert_eq!(s, 200, "GET {path} while the disk is full: {v}");
    }
    let full_for = full_since.elapsed();
    // Failed pod starts are retried, not in a busy loop.
    let failed = failed_starts(&db, full_at).await;
    let per_s = failed as f64 / full_for.as_secs_f64();
    assert!(
        per_s < 20.0,
        "{failed} pod starts failed in {:.1} s: retried in a busy loop",
        full_for.as_secs_f64()
    );

    // Space freed: what waited runs, and new jobs succeed, warm or not.
    disk.free();
    let freed = Instant::now();
    for id in &waiting {
        let v = api.until_final(&key, id, Duration::from_secs(60)).await;
        assert_eq!(v["state"], "succeeded", "a job that waited for space: {v}");
    }
    let waited_s = freed.elapsed().as_secs_f64();
    for caller in ["w1", "w2", "n1", "n3"] {
        let (s, v) = api
            .post(&key, "/v1/jobs?wait=60", &writer(caller, 0.0))
            .await;
        assert_eq!(
            (s, &v["state"]),
            (200, &json!("succeeded")),
            "a job after the disk was freed: {v}"
        );
    }
    println!(
        "state disk full ({} MiB written from outside) for {:.1} s: {outcomes:?}; {} waited \
         for a pod and ran {waited_s:.2} s after space was freed; {failed} pod starts failed \
         meanwhile ({per_s:.1}/s); new jobs succeed again",
        filled >> 20,
        full_for.as_secs_f64(),
        waiting.len(),
    );
}

/// The agent's pid of the runtime pod `pod_id`, from its directory's
/// `agent.pid` under the state directory.
fn agent_pid(state: &Path, pod_id: &str) -> u32 {
    for entry in std::fs::read_dir(state).expect("the state dir").flatten() {
        let pid_file = entry.path().join(pod_id).join("agent.pid");
        if let Ok(pid) = std::fs::read_to_string(&pid_file) {
            let pid: u32 = pid.trim().parse().expect("a pid");
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            assert!(
                String::from_utf8_lossy(&cmdline).contains("hearth-agent"),
                "{} names pid {pid}, which is no agent",
                pid_file.display()
            );
            return pid;
        }
    }
    panic!("no agent.pid for pod {pod_id} under {}", state.display());
}

fn kill_9(pid: u32) {
    let ok = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -9 {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_agent_reruns_then_fails_its_job_with_pod_lost_and_the_pool_replaces_the_pod() {
    let db = fresh_database_url();
    let state = state_dir();
    let svc = start(&db, &state, &[("HEARTH_MAX_ATTEMPTS", "2")]).await;
    let api = &svc.api;
    let key = api.create_tenant("chaos-agent").await;
    let tag = marker();
    let victim = sh_job(
        "victim",
        &format!("echo attempt $HEARTH_ATTEMPT\nsh -c 'sleep 120; :' \"{tag}:$HEARTH_ATTEMPT\"\n"),
        300,
    );
    let (s, v) = api.post(&key, "/v1/jobs", &victim).await;
    assert_eq!(s, 202, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();

    // Attempt 1's agent killed: the job is re-queued and runs again on a new pod.
    let first = api.until_running(&key, &id).await;
    let first_pod = first["pods"][0].as_str().expect("a pod").to_owned();
    kill_9(agent_pid(&state, &first_pod));
    let killed = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(60);
    let second = loop {
        let (_, j) = api.get(&key, &format!("/v1/jobs/{id}")).await;
        if j["state"] == "running" && j["attempts"] == 2 {
            break j;
        }
        assert!(
            !FINAL.contains(&j["state"].as_str().unwrap_or("")),
            "the job ended instead of running again: {j}"
        );
        assert!(Instant::now() < deadline, "the job never ran again: {j}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let rerun_after = killed.elapsed();
    let second_pod = second["pods"][0].as_str().expect("a pod").to_owned();
    assert_ne!(second_pod, first_pod, "attempt 2 ran on the dead pod");

    // Attempt 2's agent killed: no attempt is left, so it fails with pod_lost.
    kill_9(agent_pid(&state, &second_pod));
    let killed = Instant::now();
    let done = api.until_final(&key, &id, Duration::from_secs(60)).await;
    let failed_after = killed.elapsed();
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["error"]["code"], "pod_lost", "{done}");
    assert_eq!(done["attempts"], 2, "{done}");

    // What the job ran ended with its pods, and the pods are gone.
    eventually("the killed pods' jobs to end", async || {
        (!process_with_marker(&tag)).then_some(())
    })
    .await;
    for pod in [&first_pod, &second_pod] {
        eventually("the killed pods' directories to go", async || {
            let left = std::fs::read_dir(&state)
                .unwrap()
                .flatten()
                .any(|e| e.path().join(pod).exists());
            (!left).then_some(())
        })
        .await;
    }

    // The pool replaced them: the same caller and a new one run jobs.
    for caller in ["victim", "newcomer"] {
        let (s, v) = api
            .post(&key, "/v1/jobs?wait=60", &sh_job(caller, "echo fine\n", 60))
            .await;
        assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
        assert_ne!(v["pods"][0], json!(first_pod));
        assert_ne!(v["pods"][0], json!(second_pod));
    }
    assert_eq!(api.health().await, Some(200));
    println!(
        "agent killed mid-job: re-run on a new pod {:.2} s after the first kill; failed with \
         pod_lost {:.2} s after the second ({})",
        rerun_after.as_secs_f64(),
        failed_after.as_secs_f64(),
        done["error"]["message"],
    );
}
