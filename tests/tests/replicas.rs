//! Replicas: real `hearth serve` processes sharing one database. Every job
//! accepted through either replica reaches a final state; `wait`, event
//! streams and cancels through the replica that does not lead end as soon as
//! the job does, and its event streams carry the job's output lines live,
//! with the ids the leader gives them; `/v1/pools` and `/metrics` say which replica leads; a new
//! leader re-runs a job whose pods went with the old one, with the next
//! attempt number; and SIGTERM shuts a replica down gracefully.
//!
//! Bounds here are correctness bounds (a `wait` that returns 20 s early did
//! not just time out), not timings; the figures are printed.

use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hearth_tests::*;
use serde_json::{Value, json};

/// One `hearth serve` process; killed (SIGKILL) when dropped.
struct Replica {
    served: Served,
    http: reqwest::Client,
}

/// Starts `hearth serve` on `db` with its own state directory, and waits
/// until it answers.
async fn start(db: &str, env: &[(&str, &str)]) -> Replica {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    Replica {
        served: Served::start_fresh(db, env).await,
        http,
    }
}

impl Replica {
    fn url(&self, path: &str) -> String {
        self.served.url(path)
    }

    async fn call(&self, req: reqwest::RequestBuilder, key: &str) -> (u16, Value) {
        let r = req.bearer_auth(key).send().await.expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        self.call(self.http.get(self.url(path)), key).await
    }

    async fn post(&self, key: &str, path: &str, body: &Value) -> (u16, Value) {
        self.call(self.http.post(self.url(path)).json(body), key)
            .await
    }

    async fn create_tenant(&self, name: &str) -> String {
        let (status, v) = self
            .post(ADMIN_TOKEN, "/v1/admin/tenants", &json!({ "name": name }))
            .await;
        assert_eq!(status, 201, "{v}");
        v["api_key"].as_str().unwrap().to_owned()
    }

    async fn metrics(&self) -> String {
        let r = self.http.get(self.url("/metrics")).send().await.unwrap();
        r.text().await.unwrap()
    }

    /// The `hearth_leader` gauge.
    async fn leads(&self) -> bool {
        self.metrics().await.lines().any(|l| l == "hearth_leader 1")
    }

    fn pid(&self) -> String {
        self.served.pid().to_string()
    }

    /// Waits at most `limit` for the process to exit.
    async fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        self.served.exit_within(limit).await
    }
}

/// A shell job: `script` is the whole of `run.sh`.
fn sh_job(caller: &str, script: &str) -> Value {
    json!({
        "kind": "tool_call",
        "profile": "cpu-small",
        "caller": caller,
        "code": {"files": {"run.sh": script}},
        "command": ["sh", "run.sh"],
        "timeout_s": 120,
    })
}

/// Writes the job's attempt number as its output, after sleeping `first_s`
/// seconds on its first attempt only.
fn attempt_job(caller: &str, first_s: u32) -> Value {
    sh_job(
        caller,
        &format!(
            "if [ \"$HEARTH_ATTEMPT\" = 1 ]; then sleep {first_s}; fi\n\
             printf '{{\"attempt\": \"%s\"}}' \"$HEARTH_ATTEMPT\" > \"$HEARTH_OUTPUT\"\n"
        ),
    )
}

/// Starts a replica on `db` and waits until it leads.
async fn leader(db: &str) -> Replica {
    let a = start(db, &[]).await;
    for _ in 0..200 {
        if a.leads().await {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the first replica never took the lease");
}

/// Starts leader `a`, then follower `b`, on one database.
async fn pair(db: &str) -> (Replica, Replica) {
    let a = leader(db).await;
    let b = start(db, &[]).await;
    (a, b)
}

/// Waits until a job is in `state`.
async fn until_state(r: &Replica, key: &str, id: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, j) = r.get(key, &format!("/v1/jobs/{id}")).await;
        if j["state"] == state {
            return;
        }
        assert!(Instant::now() < deadline, "job never {state}: {j}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Reads a server-sent event stream to its end: `(event, data)` pairs, and
/// whether the body ended cleanly.
async fn read_events(resp: reqwest::Response) -> (Vec<(String, String)>, Result<(), String>) {
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    let mut ended = Ok(());
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
            Err(e) => {
                ended = Err(e.to_string());
                break;
            }
        }
    }
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let mut name = String::new();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                name = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("data:") {
                data = v.trim().to_owned();
            }
        }
        if !name.is_empty() {
            events.push((name, data));
        }
    }
    (events, ended)
}

/// Server-sent events with their ids, `(id, event, data)`, read until the
/// stream ends or `enough` says so.
async fn events_with_ids(
    resp: reqwest::Response,
    enough: impl Fn(&[(i64, String, String)]) -> bool,
) -> Vec<(i64, String, String)> {
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut events = Vec::new();
    while !enough(&events) {
        let Some(chunk) = body.next().await else {
            break;
        };
        buf.push_str(&String::from_utf8_lossy(
            &chunk.expect("the stream reads cleanly"),
        ));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let (mut id, mut name, mut data) = (None, String::new(), String::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().parse::<i64>().expect("integer ids"));
                } else if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = v.trim().to_owned();
                }
            }
            if !name.is_empty() {
                events.push((id.expect("every event has an id"), name, data));
            }
        }
    }
    events
}

async fn store(db: &str) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(db)
        .await
        .expect("the test database")
}

#[tokio::test]
async fn jobs_through_both_replicas_all_finish_and_the_follower_answers_at_once() {
    let db = fresh_database_url();
    let (a, b) = pair(&db).await;
    let key = a.create_tenant("replicas").await;
    assert!(!b.leads().await, "only one replica leads");

    // Pools and metrics say who leads rather than passing an empty pool
    // off as the truth.
    let (s, pa) = a.get(&key, "/v1/pools").await;
    assert_eq!(s, 200, "{pa}");
    let (s, pb) = b.get(&key, "/v1/pools").await;
    assert_eq!(s, 200, "{pb}");
    assert_eq!(pa["leader"]["is_leader"], true, "{pa}");
    assert_eq!(pb["leader"]["is_leader"], false, "{pb}");
    let leader_id = pa["leader"]["replica_id"].as_str().unwrap().to_owned();
    assert_eq!(pb["leader"]["replica_id"], leader_id.as_str(), "{pb}");
    assert_eq!(pb["pools"][0]["leader"]["is_leader"], false);
    let (s, one) = b.get(&key, "/v1/pools/cpu-small").await;
    assert_eq!((s, &one["leader"]["replica_id"]), (200, &json!(leader_id)));
    let (ma, mb) = (a.metrics().await, b.metrics().await);
    assert!(ma.contains("\nhearth_leader 1\n") && ma.contains("hearth_pods{"));
    assert!(mb.contains("\nhearth_leader 0\n") && !mb.contains("hearth_pods{"));

    // A few hundred jobs through both replicas at once, without `wait`:
    // every one is picked up, whatever order their ids commit in.
    const JOBS: usize = 300;
    const CLIENTS: usize = 16;
    let started = Instant::now();
    let submitted = futures::stream::iter(0..JOBS)
        .map(|i| {
            let (r, key) = (if i % 2 == 0 { &a } else { &b }, &key);
            async move {
                let job = sh_job(&format!("c{}", i % 8), "exit 0\n");
                let (s, v) = r.post(key, "/v1/jobs", &job).await;
                assert!(s == 202 || s == 200, "{s} {v}");
                v["id"].as_str().unwrap().to_owned()
            }
        })
        .buffer_unordered(CLIENTS)
        .collect::<Vec<String>>()
        .await;
    assert_eq!(submitted.len(), JOBS);
    let accept_s = started.elapsed().as_secs_f64();
    let pool = store(&db).await;
    let deadline = Instant::now() + Duration::from_secs(180);
    let states = loop {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("select state, count(*) from job group by state order by state")
                .fetch_all(&pool)
                .await
                .unwrap();
        let unfinished: i64 = rows
            .iter()
            .filter(|(s, _)| matches!(s.as_str(), "queued" | "assigned" | "running"))
            .map(|(_, n)| n)
            .sum();
        if unfinished == 0 {
            break rows;
        }
        assert!(
            Instant::now() < deadline,
            "jobs stranded after 180 s: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "{JOBS} jobs through two replicas: accepted in {accept_s:.2} s, all final after {:.2} s: {states:?}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(states, vec![("succeeded".to_owned(), JOBS as i64)]);

    // `wait` through the follower returns when the job ends, with the job's
    // first attempt in its environment.
    let t = Instant::now();
    let (s, v) = b.post(&key, "/v1/jobs?wait=30", &attempt_job("w", 0)).await;
    let post_wait_s = t.elapsed().as_secs_f64();
    assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
    assert_eq!(v["output"], json!({"attempt": "1"}));
    assert!(post_wait_s < 10.0, "POST ?wait=30 took {post_wait_s:.1} s");

    let (s, v) = a.post(&key, "/v1/jobs", &sh_job("w", "sleep 1\n")).await;
    assert_eq!(s, 202, "{v}");
    let id = v["id"].as_str().unwrap();
    let t = Instant::now();
    let (s, v) = b.get(&key, &format!("/v1/jobs/{id}?wait=30")).await;
    let get_wait_s = t.elapsed().as_secs_f64();
    assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
    assert!(get_wait_s < 10.0, "GET ?wait=30 took {get_wait_s:.1} s");

    // The follower's event stream ends with the final state.
    let (s, v) = b
        .post(&key, "/v1/jobs", &sh_job("e", "sleep 1; echo hi\n"))
        .await;
    assert_eq!(s, 202, "{v}");
    let id = v["id"].as_str().unwrap();
    let t = Instant::now();
    let resp = b
        .http
        .get(b.url(&format!("/v1/jobs/{id}/events")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (events, ended) = tokio::time::timeout(Duration::from_secs(30), read_events(resp))
        .await
        .expect("the follower's event stream never ended");
    let stream_s = t.elapsed().as_secs_f64();
    ended.expect("the event stream ends cleanly");
    let (last, data) = events.last().expect("events");
    assert_eq!(last, "done", "{events:?}");
    let done: Value = serde_json::from_str(data).unwrap();
    assert_eq!(done["state"], "succeeded");
    assert_eq!(done["stdout"], "hi\n");
    assert!(
        events
            .iter()
            .any(|(e, d)| e == "state" && d.contains("running")),
        "the stream shows the job running: {events:?}"
    );

    // A cancel through the follower stops the leader's job at once.
    let (_, v) = b.post(&key, "/v1/jobs", &sh_job("x", "sleep 120\n")).await;
    let id = v["id"].as_str().unwrap().to_owned();
    until_state(&b, &key, &id, "running").await;
    let t = Instant::now();
    let (s, v) = b
        .post(&key, &format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    let cancel_s = t.elapsed().as_secs_f64();
    assert_eq!((s, &v["state"]), (200, &json!("cancelled")), "{v}");
    println!(
        "through the follower: POST ?wait=30 {post_wait_s:.2} s, GET ?wait=30 on a 1 s job {get_wait_s:.2} s, \
         events of a 1 s job {stream_s:.2} s, cancel {cancel_s:.2} s"
    );
    pool.close().await;
}

#[tokio::test]
async fn a_new_leader_reruns_a_lost_job_with_its_next_attempt() {
    let db = fresh_database_url();
    let (mut a, b) = pair(&db).await;
    let key = b.create_tenant("takeover").await;
    // Sleeps through its first attempt, which the leader's death cuts short.
    let (s, v) = b.post(&key, "/v1/jobs", &attempt_job("t", 120)).await;
    assert_eq!(s, 202, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    until_state(&b, &key, &id, "running").await;

    a.served.kill();
    let killed = Instant::now();
    let mut took_over = None;
    for _ in 0..600 {
        if b.leads().await {
            took_over = Some(killed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took_over = took_over.expect("the follower never took over");
    let (s, v) = b.get(&key, &format!("/v1/jobs/{id}?wait=60")).await;
    assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
    assert_eq!(v["attempts"], 2, "{v}");
    assert_eq!(v["output"], json!({"attempt": "2"}), "{v}");
    println!(
        "takeover after kill -9 of the leader: {:.2} s; the lost job re-ran and finished {:.2} s after the kill",
        took_over.as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
    let (_, pools) = b.get(&key, "/v1/pools").await;
    assert_eq!(pools["leader"]["is_leader"], true, "{pools}");
}

#[tokio::test]
async fn sigterm_lets_waits_and_streams_end_cleanly() {
    const GRACE_S: u64 = 4;
    let db = fresh_database_url();
    let mut svc = start(&db, &[("HEARTH_SHUTDOWN_GRACE_S", "4")]).await;
    let key = svc.create_tenant("shutdown").await;

    // One job that ends within the grace period, one that does not (it
    // finishes at once on its second attempt, after the restart).
    let (_, v) = svc
        .post(&key, "/v1/jobs", &sh_job("short", "sleep 2; echo done\n"))
        .await;
    let short = v["id"].as_str().unwrap().to_owned();
    let (_, v) = svc.post(&key, "/v1/jobs", &attempt_job("long", 120)).await;
    let long = v["id"].as_str().unwrap().to_owned();
    until_state(&svc, &key, &short, "running").await;
    until_state(&svc, &key, &long, "running").await;

    let client = |svc: &Replica, path: String| {
        let req = svc.http.get(svc.url(&path)).bearer_auth(&key);
        tokio::spawn(async move { req.send().await })
    };
    let short_wait = client(&svc, format!("/v1/jobs/{short}?wait=60"));
    let long_wait = client(&svc, format!("/v1/jobs/{long}?wait=60"));
    let long_events = client(&svc, format!("/v1/jobs/{long}/events"));
    tokio::time::sleep(Duration::from_millis(300)).await;

    let signalled = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &svc.pid()])
        .status()
        .unwrap();
    assert!(kill.success());
    // It stops accepting at once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fresh = reqwest::Client::new();
    assert!(
        fresh.get(svc.url("/healthz")).send().await.is_err(),
        "still accepting connections after SIGTERM"
    );
    let status = svc
        .exit_within(Duration::from_secs(GRACE_S + 10))
        .await
        .expect("the service did not exit after SIGTERM");
    let exit_s = signalled.elapsed().as_secs_f64();
    assert!(status.success(), "exit status {status}");
    assert!(
        exit_s < GRACE_S as f64 + 4.0,
        "exited {exit_s:.1} s after SIGTERM with a grace of {GRACE_S} s"
    );

    // The short job finished during the grace period and its wait said so.
    let r = short_wait
        .await
        .unwrap()
        .expect("the short wait was answered");
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (&v["state"], &v["stdout"]),
        (&json!("succeeded"), &json!("done\n"))
    );
    // The long one was answered as it stood when the grace period ended.
    let r = long_wait
        .await
        .unwrap()
        .expect("the long wait was answered");
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["state"], "running", "{v}");
    let (events, ended) = read_events(long_events.await.unwrap().unwrap()).await;
    ended.expect("the event stream ends cleanly");
    assert!(
        events.iter().all(|(e, _)| e == "state"),
        "no `done` for a job that did not end: {events:?}"
    );
    println!(
        "SIGTERM with two jobs running: exited with 0 after {exit_s:.2} s (grace {GRACE_S} s)"
    );

    // Nothing half-updated: the finished job is whole, the other still holds
    // its attempt, and a restart runs it again (its second attempt).
    let pool = store(&db).await;
    let (state, finished): (String, bool) =
        sqlx::query_as("select state, finished_at is not null from job where job_id = $1::uuid")
            .bind(&short)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((state.as_str(), finished), ("succeeded", true));
    let (state, finished): (String, bool) =
        sqlx::query_as("select state, finished_at is not null from job where job_id = $1::uuid")
            .bind(&long)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        matches!(state.as_str(), "assigned" | "running") && !finished,
        "{state} {finished}"
    );
    pool.close().await;
    let svc = start(&db, &[]).await;
    let (s, v) = svc.get(&key, &format!("/v1/jobs/{long}?wait=60")).await;
    assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
    assert_eq!(v["output"], json!({"attempt": "2"}), "{v}");
}

#[tokio::test]
async fn a_follower_streams_output_lines_live_and_resumes_with_the_leaders_ids() {
    let db = fresh_database_url();
    let (a, b) = pair(&db).await;
    let key = b.create_tenant("follower-events").await;
    let script = "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.4; done\n";
    let (s, v) = b.post(&key, "/v1/jobs", &sh_job("f", script)).await;
    assert_eq!(s, 202, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/jobs/{id}/events");
    let outputs = |evs: &[(i64, String, String)]| evs.iter().filter(|e| e.1 == "output").count();

    // Through the follower, from the start: its first lines arrive while the
    // leader still runs it.
    let resp = b
        .http
        .get(b.url(&path))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let t = Instant::now();
    let first = tokio::time::timeout(
        Duration::from_secs(60),
        events_with_ids(resp, |evs| outputs(evs) >= 2),
    )
    .await
    .expect("no output through the follower");
    let (_, j) = b.get(&key, &format!("/v1/jobs/{id}")).await;
    assert_eq!(j["state"], "running", "lines arrive live: {first:?}");
    let first_s = t.elapsed().as_secs_f64();

    // Hang up, and resume through the follower where it left off.
    let last = first.last().unwrap().0;
    let resp = b
        .http
        .get(b.url(&path))
        .bearer_auth(&key)
        .header("Last-Event-ID", last.to_string())
        .send()
        .await
        .unwrap();
    let rest = tokio::time::timeout(Duration::from_secs(60), events_with_ids(resp, |_| false))
        .await
        .expect("the follower's stream never ended");
    assert_eq!(rest.last().map(|e| e.1.as_str()), Some("done"), "{rest:?}");
    let mut joined = first.clone();
    joined.extend(rest);
    for w in joined.windows(2) {
        assert!(w[0].0 < w[1].0, "ids increase strictly: {joined:?}");
    }
    let lines: Vec<String> = joined
        .iter()
        .filter(|e| e.1 == "output")
        .map(|e| {
            serde_json::from_str::<Value>(&e.2).unwrap()["line"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        lines,
        (1..=6).map(|i| format!("line {i}")).collect::<Vec<_>>()
    );

    // The leader replays the very same events, ids included.
    let resp = a
        .http
        .get(a.url(&path))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let leader = events_with_ids(resp, |_| false).await;
    assert_eq!(joined, leader);
    println!("through the follower: the first two lines of a running job after {first_s:.2} s");
}

/// A replica alone on its database announces nothing (nobody would hear
/// it); one that joins says hello, and from then on the first announces its
/// jobs' changes.
#[tokio::test]
async fn a_lone_replica_announces_nothing_until_another_joins() {
    let db = fresh_database_url();
    let a = leader(&db).await;
    let key = a.create_tenant("alone").await;
    let mut ear = sqlx::postgres::PgListener::connect(&db).await.unwrap();
    ear.listen("hearth_job").await.unwrap();
    let run = async |r: &Replica| {
        let (s, v) = r
            .post(&key, "/v1/jobs?wait=30", &sh_job("c", "exit 0\n"))
            .await;
        assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
        v["id"].as_str().unwrap().to_owned()
    };
    for _ in 0..3 {
        run(&a).await;
    }
    let heard = tokio::time::timeout(Duration::from_millis(1500), ear.recv()).await;
    assert!(heard.is_err(), "a lone replica announced {heard:?}");

    let b = start(&db, &[]).await;
    let hello = tokio::time::timeout(Duration::from_secs(10), ear.recv())
        .await
        .expect("the new replica says hello")
        .unwrap();
    assert!(hello.payload().starts_with("hello "), "{}", hello.payload());
    let id = run(&a).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = tokio::time::timeout_at(deadline.into(), ear.recv())
            .await
            .expect("the leader announces its jobs once another replica is there")
            .unwrap();
        let change: Value = serde_json::from_str(n.payload()).unwrap();
        if change["job"] == id.as_str() && change["state"] == "succeeded" {
            break;
        }
    }
    // The follower's jobs reach the leader as before.
    run(&b).await;
    ear.unlisten_all().await.unwrap();
}
