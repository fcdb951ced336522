//! Jobs end to end on the real local runtime: results, topology, live
//! events, cancel, timeout, warm reuse and isolation.

use std::time::Duration;

use futures::StreamExt;
use hearth_tests::*;
use serde_json::{Value, json};

#[tokio::test]
async fn tool_call_returns_its_result_in_the_same_request() {
    let app = spawn_app().await;
    let t = app.create_tenant("acme").await;
    let code = r#"
import json, os, sys
data = json.load(sys.stdin)
with open(os.environ["HEARTH_INPUT"]) as f:
    assert json.load(f) == data
print("got", data["x"])
print("warning", file=sys.stderr)
with open(os.environ["HEARTH_OUTPUT"], "w") as f:
    json.dump({"double": data["x"] * 2, "k": os.environ["K"]}, f)
"#;
    let mut job = python_job("agent-7", code);
    job["input"] = json!({"x": 21});
    job["env"] = json!({"K": "V"});
    let (s, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["state"], "succeeded");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["output"], json!({"double": 42, "k": "V"}));
    assert_eq!(v["stdout"], "got 21\n");
    assert_eq!(v["stderr"], "warning\n");
    assert_eq!(v["source"], "cold");
    assert_eq!(v["kind"], "tool_call");
    assert!(v["error"].is_null());
    for k in ["queued_ms", "acquire_ms", "bind_ms", "run_ms", "total_ms"] {
        assert!(v["timing"][k].as_f64().unwrap() >= 0.0, "{k}");
    }
    assert!(v["timing"]["total_ms"].as_f64().unwrap() >= v["timing"]["run_ms"].as_f64().unwrap());

    // Without wait: 202, then the job can be fetched.
    let (s, v) = app
        .submit(&t.key, &python_job("agent-7", "print('later')"), None)
        .await;
    assert_eq!(s, 202);
    let id = v["id"].as_str().unwrap();
    let done = app.wait_final(&t.key, id).await;
    assert_eq!(done["stdout"], "later\n");
    assert_eq!(done["source"], "warm", "same caller reuses its warm pod");
    let (s, logs) = app.get(&t.key, &format!("/v1/jobs/{id}/logs")).await;
    assert_eq!((s, logs["stdout"].as_str().unwrap()), (200, "later\n"));
}

/// A job waited for is accepted with a relaxed commit; whatever its answer,
/// it is made durable first (the store's test shows the flush). A wait that
/// runs out answers 202 with the job still running, a retry under the same
/// key finds that job, and it then ends as any other.
#[tokio::test]
async fn a_wait_that_runs_out_answers_with_the_job_still_running() {
    let app = spawn_app().await;
    let t = app.create_tenant("patient").await;
    let job = python_job("slow", "import time\ntime.sleep(2)\nprint('done')");
    let send = |wait: f64| {
        app.http
            .post(app.url(&format!("/v1/jobs?wait={wait}")))
            .bearer_auth(&t.key)
            .header("idempotency-key", "slow-1")
            .json(&job)
            .send()
    };
    let first = send(0.2).await.unwrap();
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    assert!(
        ["queued", "assigned", "running"].contains(&first["state"].as_str().unwrap()),
        "{first}"
    );
    let again = send(0.1).await.unwrap();
    assert_eq!(again.status(), 202);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["id"], first["id"]);
    let last = send(60.0).await.unwrap();
    assert_eq!(last.status(), 200);
    let last: Value = last.json().await.unwrap();
    assert_eq!(
        (&last["id"], &last["state"], &last["stdout"]),
        (&first["id"], &json!("succeeded"), &json!("done\n"))
    );
    let (s, list) = app.get(&t.key, "/v1/jobs").await;
    assert_eq!(s, 200);
    assert_eq!(list["jobs"].as_array().map(Vec::len), Some(1), "{list}");
}

#[tokio::test]
async fn a_job_s_request_as_accepted_submits_the_same_job_again() {
    let app = spawn_app().await;
    let t = app.create_tenant("acme").await;
    let other = app.create_tenant("other").await;
    let mut job = python_job(
        "replay",
        "import json, os, sys\nprint(json.load(sys.stdin)['x'] * 2, os.environ['GREETING'])",
    );
    job["input"] = json!({"x": 21, "nested": [1, {"y": null}]});
    job["env"] = json!({"GREETING": "hello"});
    let (status, first) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(status, 200, "{first}");
    let id = first["id"].as_str().unwrap();

    let (status, request) = app.get(&t.key, &format!("/v1/jobs/{id}/request")).await;
    assert_eq!(status, 200, "{request}");
    for field in [
        "kind",
        "profile",
        "caller",
        "command",
        "code",
        "input",
        "env",
        "timeout_s",
    ] {
        assert_eq!(request[field], job[field], "{field}: {request}");
    }
    assert_eq!(request["priority"], 0, "defaults are filled in: {request}");
    let (status, _) = app.get(&other.key, &format!("/v1/jobs/{id}/request")).await;
    assert_eq!(status, 404, "another tenant's job");

    // Submitted again as it came back: the same job, the same answer.
    let (status, again) = app.submit(&t.key, &request, Some(60.0)).await;
    assert_eq!(status, 200, "{again}");
    assert_ne!(again["id"], first["id"]);
    assert_eq!(again["stdout"], "42 hello\n");
    assert_eq!(again["stdout"], first["stdout"]);
}

#[tokio::test]
async fn verifier_failure_and_invalid_output_are_reported() {
    let app = spawn_app().await;
    let t = app.create_tenant("verify").await;
    let mut job = python_job("v", "import sys; print('checking'); sys.exit(3)");
    job["kind"] = json!("verifier");
    let (_, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(v["kind"], "verifier");
    assert_eq!(v["state"], "failed");
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["error"]["code"], "nonzero_exit");

    let job = python_job(
        "v",
        "import os; open(os.environ['HEARTH_OUTPUT'],'w').write('{broken')",
    );
    let (_, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(v["state"], "failed");
    assert_eq!(v["error"]["code"], "invalid_output");
    assert!(v["output"].is_null());

    // NUL, which Postgres cannot store, in the output and the logs: the job
    // still ends and is recorded.
    let code = r#"
import json, os, sys
print("a\0b")
print("c\0", file=sys.stderr)
json.dump({"k": "\0"}, open(os.environ["HEARTH_OUTPUT"], "w"))
"#;
    let (s, v) = app.submit(&t.key, &python_job("v", code), Some(60.0)).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["state"], "failed");
    assert_eq!(v["error"]["code"], "invalid_output");
    assert_eq!(v["stdout"], "a\u{FFFD}b\n");
    assert_eq!(v["stderr"], "c\u{FFFD}\n");
}

#[tokio::test]
async fn rollout_gang_sees_its_topology() {
    let app = spawn_app().await;
    let t = app.create_tenant("rl").await;
    let code = r#"
import json, os
keys = ["RANK", "WORLD_SIZE", "HEARTH_PEERS", "MASTER_ADDR", "MASTER_PORT"]
print(json.dumps({k: os.environ[k] for k in keys}))
if os.environ["RANK"] == "0":
    json.dump({"world": int(os.environ["WORLD_SIZE"])}, open(os.environ["HEARTH_OUTPUT"], "w"))
"#;
    let mut job = python_job("trainer-0", code);
    job["kind"] = json!("rollout");
    job["topology"] = json!({"pods": 2});
    let (s, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(v["output"], json!({"world": 2}));
    assert_eq!(v["pods"].as_array().unwrap().len(), 2);
    let lines: Vec<&str> = v["stdout"].as_str().unwrap().lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let rank0: Value =
        serde_json::from_str(lines.iter().find(|l| !l.starts_with("[rank")).unwrap()).unwrap();
    let rank1: Value = serde_json::from_str(
        lines
            .iter()
            .find(|l| l.starts_with("[rank 1] "))
            .unwrap()
            .trim_start_matches("[rank 1] "),
    )
    .unwrap();
    assert_eq!(rank0["RANK"], "0");
    assert_eq!(rank1["RANK"], "1");
    assert_eq!(rank0["WORLD_SIZE"], "2");
    assert_eq!(rank0["HEARTH_PEERS"], rank1["HEARTH_PEERS"]);
    assert_eq!(
        rank0["HEARTH_PEERS"].as_str().unwrap().split(',').count(),
        2
    );
    assert_eq!(rank0["MASTER_PORT"], rank1["MASTER_PORT"]);
}

/// Reads SSE events (`event`, parsed `data`) until `done`.
async fn sse_events(app: &TestApp, key: &str, id: &str, mut on_event: impl FnMut(&str, &Value)) {
    let r = app
        .http
        .get(app.url(&format!("/v1/jobs/{id}/events")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    while let Some(chunk) = body.next().await {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let mut event = "";
            let mut data = String::new();
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = e;
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            if event.is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
            on_event(event, &value);
            if event == "done" {
                return;
            }
        }
    }
    panic!("event stream ended without `done`");
}

#[tokio::test]
async fn events_stream_output_lines_before_the_job_ends() {
    let app = spawn_app().await;
    let t = app.create_tenant("watcher").await;
    // The job prints a line, sleeps, then prints another.
    let code =
        "import time\nprint('first', flush=True)\ntime.sleep(3)\nprint('second', flush=True)\n";
    let (s, v) = app.submit(&t.key, &python_job("w", code), None).await;
    assert_eq!(s, 202);
    let id = v["id"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    sse_events(&app, &t.key, &id, |event, data| {
        seen.push((event.to_owned(), data.clone()))
    })
    .await;
    let events: Vec<&str> = seen.iter().map(|(e, _)| e.as_str()).collect();
    let first = seen
        .iter()
        .position(|(e, d)| e == "output" && d["line"] == "first")
        .unwrap();
    let second = seen
        .iter()
        .position(|(e, d)| e == "output" && d["line"] == "second")
        .unwrap();
    let done = events.iter().position(|e| *e == "done").unwrap();
    assert!(first < second && second < done, "{events:?}");
    assert!(events.contains(&"state"));
    assert_eq!(seen[done].1["state"], "succeeded");

    // Live check: while a second job sleeps, its first line is already out.
    let (_, v) = app.submit(&t.key, &python_job("w", code), None).await;
    let id = v["id"].as_str().unwrap().to_owned();
    let r = app
        .http
        .get(app.url(&format!("/v1/jobs/{id}/events")))
        .bearer_auth(&t.key)
        .send()
        .await
        .unwrap();
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    while !buf.contains("\"line\":\"first\"") {
        buf.push_str(&String::from_utf8_lossy(
            &body.next().await.unwrap().unwrap(),
        ));
    }
    let (_, now) = app.get(&t.key, &format!("/v1/jobs/{id}")).await;
    assert_eq!(
        now["state"], "running",
        "the line arrived while the job was still running"
    );
    assert_eq!(app.wait_final(&t.key, &id).await["state"], "succeeded");
}

#[tokio::test]
async fn cancel_kills_the_whole_process_tree() {
    let app = spawn_app().await;
    let t = app.create_tenant("canceller").await;
    let marker = format!("hearth-cancel-{}", uuid::Uuid::new_v4().simple());
    let mut job = python_job("c", "");
    job["command"] = json!([
        "sh",
        "-c",
        format!("sleep 1000 & sleep 1001 & echo started; wait # {marker}")
    ]);
    let (_, v) = app.submit(&t.key, &job, None).await;
    let id = v["id"].as_str().unwrap().to_owned();
    // Wait until it runs.
    let mut tries = 0;
    while !process_with_marker(&marker) {
        tries += 1;
        assert!(tries < 200, "job never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (s, v) = app
        .post(&t.key, &format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert!(s == 200 || s == 202, "{s} {v}");
    let done = app.wait_final(&t.key, &id).await;
    assert_eq!(done["state"], "cancelled");
    assert_eq!(done["error"]["code"], "cancelled");
    // Every process of the tree is gone.
    let mut tries = 0;
    while process_with_marker(&marker) || process_with_marker("sleep 1001") {
        tries += 1;
        assert!(tries < 100, "a process of the cancelled job survived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Cancelling again is a conflict; a queued job cancels at once.
    assert_eq!(
        app.post(&t.key, &format!("/v1/jobs/{id}/cancel"), &json!({}))
            .await
            .0,
        409
    );
}

/// A cancel answers for what happened to the job: 200 only when it ended
/// cancelled, 409 when it ended on its own first (it answered 200 with the
/// job succeeded), 202 while it still stops. Cancels sent over the jobs'
/// short runs meet some that end as the cancel lands.
#[tokio::test]
async fn a_cancel_answers_for_what_happened_to_the_job() {
    let app = spawn_app().await;
    let t = app.create_tenant("racer").await;
    let jobs: Vec<Value> = (0..48)
        .map(|i| {
            json!({"job": {"kind": "rollout", "profile": "cpu-small",
                           "caller": format!("r{}", i % 4),
                           "command": ["sh", "-c", format!("sleep 0.0{}", 2 + i % 7)],
                           "timeout_s": 30}})
        })
        .collect();
    let (status, batch) = app
        .post(&t.key, "/v1/jobs/batch", &json!({"jobs": jobs}))
        .await;
    assert_eq!(status, 202, "{batch}");
    let ids: Vec<String> = batch["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    let answers = futures::future::join_all(ids.iter().enumerate().map(|(i, id)| {
        let app = &app;
        let key = &t.key;
        async move {
            tokio::time::sleep(Duration::from_millis(10 * i as u64)).await;
            app.post(key, &format!("/v1/jobs/{id}/cancel"), &json!({}))
                .await
        }
    }))
    .await;
    for ((status, answer), id) in answers.into_iter().zip(&ids) {
        let end = app.wait_final(&t.key, id).await;
        let cancelled = end["state"] == "cancelled";
        match status {
            200 => assert!(
                cancelled && answer["state"] == "cancelled",
                "200 for a job that ended {}: {answer}",
                end["state"]
            ),
            202 => {}
            409 => {
                assert_eq!(answer["code"], "job_finished", "{answer}");
                assert!(!cancelled, "409 for a job that was cancelled: {end}");
            }
            _ => panic!("{status} {answer}"),
        }
    }
}

#[tokio::test]
async fn timeout_kills_the_job() {
    let app = spawn_app().await;
    let t = app.create_tenant("slow").await;
    let mut job = python_job(
        "s",
        "import time\nprint('going', flush=True)\ntime.sleep(60)\n",
    );
    job["timeout_s"] = json!(1);
    let (s, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(s, 200);
    assert_eq!(v["state"], "timed_out");
    assert_eq!(v["error"]["code"], "timed_out");
    assert_eq!(v["stdout"], "going\n");
    assert!(v["timing"]["run_ms"].as_f64().unwrap() < 30_000.0);
}

#[tokio::test]
async fn warm_pods_never_cross_callers_and_files_stay_private() {
    let app = spawn_app().await;
    let t = app.create_tenant("shared").await;
    let write = r#"
import json, os
open("/work/secret.txt", "w").write("a's secret")
json.dump({"cwd": os.getcwd(), "host_pods": os.path.realpath(".")}, open(os.environ["HEARTH_OUTPUT"], "w"))
"#;
    let (_, a1) = app
        .submit(&t.key, &python_job("caller-a", write), Some(60.0))
        .await;
    assert_eq!(a1["state"], "succeeded", "{a1}");
    let pod_a = a1["pods"][0].as_str().unwrap().to_owned();
    let state_dir = app.running.state.config.state_dir.clone();
    let host_secret = state_dir.join("pods").join(&pod_a).join("work/secret.txt");
    assert!(
        host_secret.is_file(),
        "the secret is in A's pod dir on the host: {}",
        host_secret.display()
    );

    let read = format!(
        r#"
import json, os
found = {{}}
for p in ["/work/secret.txt", "{host}"]:
    try:
        found[p] = open(p).read()
    except OSError as e:
        found[p] = None
json.dump(found, open(os.environ["HEARTH_OUTPUT"], "w"))
"#,
        host = host_secret.display()
    );
    let (_, b) = app
        .submit(&t.key, &python_job("caller-b", &read), Some(60.0))
        .await;
    assert_eq!(b["state"], "succeeded", "{b}");
    assert_ne!(b["pods"][0], pod_a.as_str(), "B got A's warm pod");
    assert_eq!(b["source"], "cold");
    for (path, content) in b["output"].as_object().unwrap() {
        assert!(content.is_null(), "B read {path}");
    }
    // A's next job lands on A's warm pod and still sees its file.
    let (_, a2) = app
        .submit(&t.key, &python_job("caller-a", &read), Some(60.0))
        .await;
    assert_eq!(a2["source"], "warm");
    assert_eq!(a2["pods"][0], pod_a.as_str());
    assert_eq!(a2["output"]["/work/secret.txt"], "a's secret");

    // Another tenant's caller of the same name is another caller.
    let other = app.create_tenant("other").await;
    let (_, o) = app
        .submit(&other.key, &python_job("caller-a", &read), Some(60.0))
        .await;
    assert_ne!(o["pods"][0], pod_a.as_str());
    assert!(o["output"]["/work/secret.txt"].is_null());
}

#[tokio::test]
async fn network_is_cut_unless_the_profile_allows_it() {
    let app = spawn_app().await;
    let t = app.create_tenant("net").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            drop(s);
        }
    });
    let code = format!(
        r#"
import json, os, socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    ok = True
except OSError:
    ok = False
routed = any(l.split()[1] == "00000000" for l in open("/proc/net/route").readlines()[1:])
json.dump({{"connected": ok, "routed": routed}}, open(os.environ["HEARTH_OUTPUT"], "w"))
"#
    );
    let (_, v) = app
        .submit(&t.key, &python_job("n", &code), Some(60.0))
        .await;
    assert_eq!(
        v["output"],
        json!({"connected": false, "routed": false}),
        "{v}"
    );
    // With network, the job has a route out, but the host's loopback (where
    // this listener is) stays out of reach.
    let mut job = python_job("n", &code);
    job["profile"] = json!("cpu-net");
    let (_, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(
        v["output"],
        json!({"connected": false, "routed": true}),
        "{v}"
    );
}

#[tokio::test]
async fn bundles_are_uploaded_once_and_referenced() {
    let app = spawn_app().await;
    let t = app.create_tenant("bundler").await;
    let files = json!({"files": {"main.py": "from lib.util import f\nprint(f())\n", "lib/util.py": "def f():\n    return 'from bundle'\n", "lib/__init__.py": ""}});
    let (s, b) = app.post(&t.key, "/v1/bundles", &files).await;
    assert_eq!(s, 201, "{b}");
    let digest = b["bundle"].as_str().unwrap().to_owned();
    assert!(digest.starts_with("sha256:"));
    assert_eq!(
        app.post(&t.key, "/v1/bundles", &files).await.1["bundle"],
        digest.as_str()
    );
    let mut job = python_job("b", "");
    job["code"] = json!({ "bundle": digest });
    let (s, v) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(s, 200);
    assert_eq!(v["stdout"], "from bundle\n");
    // Another tenant cannot use it.
    let other = app.create_tenant("other-bundler").await;
    assert_eq!(
        app.submit(&other.key, &job, None).await.1["code"],
        "unknown_bundle"
    );
    let (s, v) = app
        .post(&t.key, "/v1/bundles", &json!({"files": {"../x": ""}}))
        .await;
    assert_eq!((s, v["code"].as_str().unwrap()), (422, "validation_failed"));
}

#[tokio::test]
async fn output_is_bounded_and_truncation_marked() {
    let mut config = config();
    config.job_output_bytes = 1000;
    config.max_log_bytes = 5000;
    let app = spawn_app_with(config).await;
    let t = app.create_tenant("chatty").await;
    let (_, v) = app
        .submit(
            &t.key,
            &python_job("c", "for i in range(2000): print('line', i)"),
            Some(60.0),
        )
        .await;
    assert_eq!(v["state"], "succeeded");
    assert!(v["stdout_truncated"].as_bool().unwrap());
    assert!(v["stdout"].as_str().unwrap().len() <= 1000);
    let (_, logs) = app
        .get(
            &t.key,
            &format!("/v1/jobs/{}/logs", v["id"].as_str().unwrap()),
        )
        .await;
    let full = logs["stdout"].as_str().unwrap();
    assert!(full.len() > 1000 && full.len() <= 5000, "{}", full.len());
    assert!(full.starts_with("line 0\n"));
    // The head is the stream's first 1000 bytes, the line it ends in cut.
    let head = v["stdout"].as_str().unwrap();
    assert_eq!(head.len(), 1000);
    assert!(full.starts_with(head));

    // A first line longer than the head shows its start (it showed nothing),
    // cut between characters.
    for (escaped, ch) in [("x", 'x'), ("\\u00e9", '\u{e9}'), ("\\u20ac", '\u{20ac}')] {
        let (_, v) = app
            .submit(
                &t.key,
                &python_job("c", &format!("print('{escaped}' * 1500)")),
                Some(60.0),
            )
            .await;
        assert_eq!(v["state"], "succeeded", "{v}");
        assert!(v["stdout_truncated"].as_bool().unwrap());
        let head = v["stdout"].as_str().unwrap();
        let bytes = ch.len_utf8();
        assert_eq!(head.len(), 1000 / bytes * bytes, "{ch}");
        assert!(head.chars().all(|c| c == ch), "{ch}: {head}");
    }
}

#[tokio::test]
async fn deps_are_bound_from_the_wheelhouse_and_cached_per_pod() {
    let wheelhouse = wheelhouse();
    let mut config = config();
    config.wheelhouse = Some(wheelhouse.to_path_buf());
    let app = spawn_app_with(config).await;
    let t = app.create_tenant("deps").await;
    let code = "import json, os, hearthbenchpkg\njson.dump({'v': hearthbenchpkg.VALUE}, open(os.environ['HEARTH_OUTPUT'], 'w'))\n";
    let mut job = python_job("d", code);
    job["deps"] = json!({"pip": ["hearthbenchpkg==1.0"]});
    let (_, first) = app.submit(&t.key, &job, Some(120.0)).await;
    assert_eq!(first["output"], json!({"v": 42}), "{first}");
    let (_, second) = app.submit(&t.key, &job, Some(120.0)).await;
    assert_eq!(second["output"], json!({"v": 42}));
    assert_eq!(second["source"], "warm");
    assert!(
        second["timing"]["bind_ms"].as_f64().unwrap()
            < first["timing"]["bind_ms"].as_f64().unwrap(),
        "the second job reuses the environment: {} vs {}",
        second["timing"]["bind_ms"],
        first["timing"]["bind_ms"]
    );
    // Without the package the import fails; a package that does not exist
    // fails the binding with pip's log.
    let (_, plain) = app.submit(&t.key, &python_job("d", code), Some(60.0)).await;
    assert_eq!(plain["state"], "failed");
    job["deps"] = json!({"pip": ["no-such-package-hearth==9.9"]});
    let (_, bad) = app.submit(&t.key, &job, Some(120.0)).await;
    assert_eq!(bad["state"], "failed");
    assert_eq!(bad["error"]["code"], "deps_install_failed");
    assert!(
        bad["stderr"]
            .as_str()
            .unwrap()
            .contains("no-such-package-hearth"),
        "{bad}"
    );
}
