//! Event streams that resume: every event has an id; a stream replays the
//! job's events from its acceptance (or from just after `Last-Event-ID` /
//! `?after=`), follows it live without a gap or a duplicate at the seam, and
//! ends with `done`, also for a job that finished before the client came or
//! that ran again after its pod was lost. Streams through a replica that does
//! not lead are in `replicas.rs`.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use hearth_tests::*;
use serde_json::{Value, json};

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
struct Ev {
    id: i64,
    event: String,
    data: Value,
}

/// An open event stream.
struct Events {
    body: BoxStream<'static, reqwest::Result<String>>,
    buf: String,
}

impl Events {
    /// Opens `/v1/jobs/{id}/events{query}`, with `Last-Event-ID` when given;
    /// `None` with the status when it is not 200.
    async fn open(
        app: &TestApp,
        key: &str,
        id: &str,
        query: &str,
        last_event_id: Option<&str>,
    ) -> Result<Events, u16> {
        let mut req = app
            .http
            .get(app.url(&format!("/v1/jobs/{id}/events{query}")))
            .bearer_auth(key);
        if let Some(last) = last_event_id {
            req = req.header("Last-Event-ID", last);
        }
        let r = req.send().await.expect("request");
        if r.status() != 200 {
            return Err(r.status().as_u16());
        }
        assert_eq!(
            r.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Ok(Events {
            body: r
                .bytes_stream()
                .map(|c| c.map(|b| String::from_utf8_lossy(&b).into_owned()))
                .boxed(),
            buf: String::new(),
        })
    }

    /// The next event; `None` when the stream ends.
    async fn next(&mut self) -> Option<Ev> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse::<i64>().expect("integer ids"));
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                // Comments (keep-alives) carry neither.
                let Some(event) = event else { continue };
                let id = id.unwrap_or_else(|| panic!("event `{event}` without an id"));
                let data = serde_json::from_str(&data).unwrap_or(Value::Null);
                return Some(Ev { id, event, data });
            }
            let chunk = self.body.next().await?.expect("the stream reads cleanly");
            self.buf.push_str(&chunk);
        }
    }

    /// Every event to the end of the stream, which must end with `done`.
    async fn rest(mut self) -> Vec<Ev> {
        let mut out = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(90), async {
            while let Some(ev) = self.next().await {
                out.push(ev);
            }
        })
        .await;
        assert!(ended.is_ok(), "the stream never ended: {out:?}");
        assert_eq!(
            out.last().map(|e| e.event.as_str()),
            Some("done"),
            "{out:?}"
        );
        out
    }
}

/// The whole stream of a job from its acceptance.
async fn all_events(app: &TestApp, key: &str, id: &str) -> Vec<Ev> {
    Events::open(app, key, id, "", None)
        .await
        .expect("200")
        .rest()
        .await
}

fn assert_ids_increase(events: &[Ev]) {
    for w in events.windows(2) {
        assert!(w[0].id < w[1].id, "ids must increase strictly: {events:?}");
    }
}

/// The `line`s of the `output` events, in order.
fn lines(events: &[Ev]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.event == "output")
        .map(|e| e.data["line"].as_str().unwrap().to_owned())
        .collect()
}

fn states(events: &[Ev]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.event == "state")
        .map(|e| e.data["state"].as_str().unwrap().to_owned())
        .collect()
}

fn sh_job(caller: &str, script: &str) -> Value {
    json!({
        "kind": "tool_call",
        "profile": "cpu-small",
        "caller": caller,
        "code": {"files": {"run.sh": script}},
        "command": ["sh", "run.sh"],
        "timeout_s": 60,
    })
}

async fn until_running(app: &TestApp, key: &str, id: &str) {
    eventually("the job to run", async || {
        let (_, j) = app.get(key, &format!("/v1/jobs/{id}")).await;
        (j["state"] == "running").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_stream_opened_late_replays_the_first_lines_then_follows_live() {
    let app = spawn_app().await;
    let t = app.create_tenant("late").await;
    let script = "echo one; echo two >&2; echo three\nsleep 2\necho four\n";
    let (s, v) = app.submit(&t.key, &sh_job("late", script), None).await;
    assert_eq!(s, 202, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    until_running(&app, &t.key, &id).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut stream = Events::open(&app, &t.key, &id, "", None).await.unwrap();
    let first = stream.next().await.unwrap();
    assert_eq!(
        (first.id, first.event.as_str(), &first.data),
        (0, "state", &json!({"state": "queued"}))
    );
    let mut seen = vec![first];
    while lines(&seen).len() < 3 {
        seen.push(stream.next().await.expect("the first lines are replayed"));
    }
    let (_, now) = app.get(&t.key, &format!("/v1/jobs/{id}")).await;
    assert_eq!(
        now["state"], "running",
        "the first lines come back while the job still runs"
    );
    seen.extend(stream.rest().await);
    assert_ids_increase(&seen);
    // In order per stream (stdout and stderr are separate pipes).
    let on = |stream: &str| -> Vec<String> {
        seen.iter()
            .filter(|e| e.event == "output" && e.data["stream"] == stream)
            .map(|e| e.data["line"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        (on("stdout"), on("stderr")),
        (
            vec!["one".to_owned(), "three".into(), "four".into()],
            vec!["two".to_owned()]
        )
    );
    assert!(
        seen.iter()
            .filter(|e| e.event == "output")
            .all(|e| e.data["rank"] == 0)
    );
    assert_eq!(states(&seen), ["queued", "assigned", "running"]);
    let done = seen.last().unwrap();
    assert_eq!(done.data["state"], "succeeded");
    assert_eq!(done.data["stdout"], "one\nthree\nfour\n");

    // Every replay of the finished job is the same, ids included.
    assert_eq!(all_events(&app, &t.key, &id).await, seen);
}

#[tokio::test]
async fn a_client_that_reconnects_gets_exactly_the_events_it_missed() {
    let app = spawn_app().await;
    let t = app.create_tenant("resume").await;
    let script = "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.4; done\n";
    let (_, v) = app.submit(&t.key, &sh_job("resume", script), None).await;
    let id = v["id"].as_str().unwrap().to_owned();

    // Read until the second line, then hang up.
    let mut stream = Events::open(&app, &t.key, &id, "", None).await.unwrap();
    let mut before = Vec::new();
    while lines(&before).len() < 2 {
        before.push(stream.next().await.expect("events before the end"));
    }
    drop(stream);
    let last = before.last().unwrap().id;
    // The job goes on printing meanwhile.
    tokio::time::sleep(Duration::from_millis(900)).await;

    let after = Events::open(&app, &t.key, &id, "", Some(&last.to_string()))
        .await
        .unwrap()
        .rest()
        .await;
    assert!(after[0].id > last, "{after:?}");
    let mut joined = before.clone();
    joined.extend(after.iter().cloned());
    assert_ids_increase(&joined);
    let full = all_events(&app, &t.key, &id).await;
    assert_eq!(joined, full, "no event missing, none twice");
    assert_eq!(
        lines(&full),
        (1..=6).map(|i| format!("line {i}")).collect::<Vec<_>>()
    );

    // `?after=` does what the header does; the header wins over it.
    let by_query = Events::open(&app, &t.key, &id, &format!("?after={last}"), None)
        .await
        .unwrap()
        .rest()
        .await;
    assert_eq!(by_query, after);
    let both = Events::open(&app, &t.key, &id, "?after=0", Some(&last.to_string()))
        .await
        .unwrap()
        .rest()
        .await;
    assert_eq!(both, after);

    // From every id on: the rest, exactly.
    for (i, ev) in full.iter().enumerate().take(full.len() - 1) {
        let rest = Events::open(&app, &t.key, &id, &format!("?after={}", ev.id), None)
            .await
            .unwrap()
            .rest()
            .await;
        assert_eq!(rest, full[i + 1..], "after {}", ev.id);
    }
    // After `done` there is nothing to resume: 204 stops an EventSource.
    let done = full.last().unwrap().id;
    let none = Events::open(&app, &t.key, &id, "", Some(&done.to_string())).await;
    assert_eq!(none.err(), Some(204));
    for bad in ["?after=-1", "?after=x"] {
        let r = Events::open(&app, &t.key, &id, bad, None).await;
        assert_eq!(r.err(), Some(400), "{bad}");
    }
    let r = Events::open(&app, &t.key, &id, "", Some("abc")).await;
    assert_eq!(r.err(), Some(400));
}

#[tokio::test]
async fn a_finished_job_replays_everything_and_ends() {
    let app = spawn_app().await;
    let t = app.create_tenant("finished").await;
    let script = "echo a\necho b\necho c\nexit 3\n";
    let (s, v) = app
        .submit(&t.key, &sh_job("finished", script), Some(30.0))
        .await;
    assert_eq!((s, &v["state"]), (200, &json!("failed")), "{v}");
    let id = v["id"].as_str().unwrap();

    let events = all_events(&app, &t.key, id).await;
    assert_ids_increase(&events);
    assert_eq!(events[0].id, 0);
    assert_eq!(states(&events), ["queued", "assigned", "running"]);
    assert_eq!(lines(&events), ["a", "b", "c"]);
    let done = events.last().unwrap();
    assert_eq!(done.data["state"], "failed");
    assert_eq!(done.data["exit_code"], 3);
    assert_eq!(done.data["error"]["code"], "nonzero_exit");
    // `done` closes the stream: nothing after it.
    assert_eq!(
        events.iter().filter(|e| e.event == "done").count(),
        1,
        "{events:?}"
    );

    // Another tenant sees nothing of it.
    let other = app.create_tenant("other").await;
    let r = Events::open(&app, &other.key, id, "", None).await;
    assert_eq!(r.err(), Some(404));
}

#[tokio::test]
async fn output_events_stay_within_the_log_limit() {
    let mut config = config();
    config.max_log_bytes = 200;
    // The job row keeps less, so the logs hold the full (bounded) copy.
    config.job_output_bytes = 100;
    let app = spawn_app_with(config).await;
    let t = app.create_tenant("chatty").await;
    let script = "i=0; while [ $i -lt 100 ]; do echo line-$i; i=$((i+1)); done\n";
    let (s, v) = app
        .submit(&t.key, &sh_job("chatty", script), Some(30.0))
        .await;
    assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
    let id = v["id"].as_str().unwrap();
    let events = all_events(&app, &t.key, id).await;
    assert_ids_increase(&events);
    let lines = lines(&events);
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    assert!(
        !lines.is_empty() && bytes <= 200,
        "{bytes} bytes: {lines:?}"
    );
    assert_eq!(lines[0], "line-0");
    let (_, logs) = app.get(&t.key, &format!("/v1/jobs/{id}/logs")).await;
    let logged: Vec<&str> = logs["stdout"].as_str().unwrap().lines().collect();
    assert_eq!(lines, logged, "the stream shows what the logs keep");
}

/// Empty lines are events too: a stream carries at most the first 10,000
/// lines of each of a job's streams, while its logs keep every line within
/// their byte limit.
#[tokio::test]
async fn output_events_stop_at_ten_thousand_lines_a_stream() {
    let app = spawn_app().await;
    let t = app.create_tenant("blank").await;
    let script = "head -c 25000 /dev/zero | tr '\\0' '\\n'\necho last >&2\n";
    let (s, v) = app
        .submit(&t.key, &sh_job("blank", script), Some(60.0))
        .await;
    assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
    let id = v["id"].as_str().unwrap();
    let events = all_events(&app, &t.key, id).await;
    assert_ids_increase(&events);
    let stdout = events
        .iter()
        .filter(|e| e.event == "output" && e.data["stream"] == "stdout")
        .count();
    assert_eq!(stdout, 10_000);
    assert!(
        events
            .iter()
            .any(|e| e.data["stream"] == "stderr" && e.data["line"] == "last"),
        "the other stream goes on"
    );
    let (_, logs) = app.get(&t.key, &format!("/v1/jobs/{id}/logs")).await;
    assert_eq!(logs["stdout"].as_str().unwrap().len(), 25_000);
}

/// The agent's pid of the runtime pod `pod_id`, from its directory's
/// `agent.pid` under the state directory.
fn agent_pid(state: &std::path::Path, pod_id: &str) -> u32 {
    for entry in std::fs::read_dir(state).expect("the state dir").flatten() {
        let pid_file = entry.path().join(pod_id).join("agent.pid");
        if let Ok(pid) = std::fs::read_to_string(&pid_file) {
            return pid.trim().parse().expect("a pid");
        }
    }
    panic!("no agent.pid for pod {pod_id} under {}", state.display());
}

#[tokio::test]
async fn a_job_run_again_after_its_pod_was_lost_streams_both_runs() {
    let config = config();
    let state = config.state_dir.clone();
    let app = spawn_app_with(config).await;
    let t = app.create_tenant("rerun").await;
    let script = "echo attempt $HEARTH_ATTEMPT\n\
                  if [ \"$HEARTH_ATTEMPT\" = 1 ]; then sleep 120; fi\n\
                  echo finished\n";
    let (_, v) = app.submit(&t.key, &sh_job("rerun", script), None).await;
    let id = v["id"].as_str().unwrap().to_owned();

    // Follow it live through the loss of its first pod.
    let mut live = Events::open(&app, &t.key, &id, "", None).await.unwrap();
    let mut seen = Vec::new();
    while lines(&seen).is_empty() {
        seen.push(live.next().await.expect("the first run's line"));
    }
    let (_, job) = app.get(&t.key, &format!("/v1/jobs/{id}")).await;
    let pod = job["pods"][0].as_str().unwrap();
    let kill = std::process::Command::new("kill")
        .args(["-KILL", &agent_pid(&state, pod).to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    seen.extend(live.rest().await);

    assert_ids_increase(&seen);
    assert_eq!(lines(&seen), ["attempt 1", "attempt 2", "finished"]);
    assert_eq!(
        states(&seen),
        [
            "queued", "assigned", "running", "queued", "assigned", "running"
        ]
    );
    let done = seen.last().unwrap();
    assert_eq!(
        (&done.data["state"], &done.data["attempts"]),
        (&json!("succeeded"), &json!(2))
    );
    // A replay tells the same story with the same ids.
    assert_eq!(all_events(&app, &t.key, &id).await, seen);
}

/// Another tenant's jobs while one tenant's jobs print floods of empty
/// lines (10,000 per stream each, the most a job's events carry): each of
/// their ends waits for its own events, which the journal's turns write in
/// the next batch, not behind the flood. Prints the quiet tenant's job
/// latency (`?wait`, one at a time) alone and during the flood.
///
/// `cargo test --release -p hearth-tests --test events -- --ignored --nocapture bench_a_flood`
#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark: prints figures"]
async fn bench_a_flood_of_lines_holds_up_another_tenant_by_a_batch() {
    const JOBS: usize = 40;
    let app = spawn_app().await;
    let loud = app.create_tenant("loud").await;
    let quiet = app.create_tenant("quiet").await;
    let quick = sh_job("quiet", "echo ok\n");
    let run = async |n: usize| {
        let mut ms = Vec::with_capacity(n);
        for _ in 0..n {
            let t0 = std::time::Instant::now();
            let (s, v) = app.submit(&quiet.key, &quick, Some(60.0)).await;
            assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
            ms.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        ms
    };
    run(5).await; // a warm pod for the quiet caller
    let alone = run(JOBS).await;
    // Each flooding job prints 10,000 empty lines on each stream and ends;
    // its caller submits the next at once, until the quiet runs are done.
    let flood = sh_job(
        "loud",
        "head -c 10000 /dev/zero | tr '\\0' '\\n'\nhead -c 10000 /dev/zero | tr '\\0' '\\n' >&2\n",
    );
    let stop = std::sync::atomic::AtomicBool::new(false);
    let flooded = std::sync::atomic::AtomicUsize::new(0);
    let flooder = async |caller: usize| {
        let mut job = flood.clone();
        job["caller"] = json!(format!("loud-{caller}"));
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let (s, v) = app.submit(&loud.key, &job, Some(60.0)).await;
            assert_eq!((s, &v["state"]), (200, &json!("succeeded")), "{v}");
            flooded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    };
    let measured = async {
        // The floods under way first.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let ms = run(JOBS).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        ms
    };
    let (during, ..) = tokio::join!(measured, flooder(0), flooder(1), flooder(2), flooder(3));
    let (p50a, p99a) = (percentile(&alone, 0.5), percentile(&alone, 0.99));
    let (p50d, p99d) = (percentile(&during, 0.5), percentile(&during, 0.99));
    println!(
        "quiet tenant's job, submit to end ({JOBS} one at a time): alone p50 {p50a:.1} ms p99 {p99a:.1} ms; \
         beside 4 callers of another tenant running {} jobs of 20,000 empty lines: p50 {p50d:.1} ms p99 {p99d:.1} ms \
         (x{:.2} p50, x{:.2} p99)",
        flooded.load(std::sync::atomic::Ordering::Relaxed),
        p50d / p50a,
        p99d / p99a
    );
}
