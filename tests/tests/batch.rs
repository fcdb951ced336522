//! Batch submission: up to 1,000 jobs accepted in one transaction or none,
//! every item's errors named, idempotent per item, waited on together.

use std::time::{Duration, Instant};

use hearth_tests::*;
use serde_json::{Value, json};

fn echo(caller: &str, i: usize) -> Value {
    json!({
        "kind": "rollout", "profile": "cpu-small", "caller": caller,
        "command": ["sh", "-c", format!("echo item {i}")], "timeout_s": 30
    })
}

fn items(jobs: impl IntoIterator<Item = Value>) -> Value {
    json!({"jobs": jobs.into_iter().map(|j| json!({"job": j})).collect::<Vec<_>>()})
}

async fn count_jobs(app: &TestApp, key: &str) -> usize {
    let (status, page) = app.get(key, "/v1/jobs?limit=200").await;
    assert_eq!(status, 200, "{page}");
    page["jobs"].as_array().unwrap().len()
}

#[tokio::test]
async fn a_batch_is_accepted_together_and_waited_on_together() {
    let app = spawn_app().await;
    let t = app.create_tenant("trainer").await;
    let batch = items((0..6).map(|i| echo(&format!("worker-{}", i % 3), i)));
    let (status, v) = app.post(&t.key, "/v1/jobs/batch?wait=60", &batch).await;
    assert_eq!(status, 200, "{v}");
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 6);
    for (i, j) in jobs.iter().enumerate() {
        // In the order sent, each its own job.
        assert_eq!(j["state"], "succeeded", "{j}");
        assert_eq!(j["stdout"], format!("item {i}\n"), "{j}");
        assert_eq!(j["caller"], format!("worker-{}", i % 3));
    }
    assert_eq!(count_jobs(&app, &t.key).await, 6);

    // Without a wait: 202 at once, and every job still runs.
    let (status, v) = app
        .post(
            &t.key,
            "/v1/jobs/batch",
            &items((0..3).map(|i| echo("late", i))),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    for j in v["jobs"].as_array().unwrap() {
        let done = app.wait_final(&t.key, j["id"].as_str().unwrap()).await;
        assert_eq!(done["state"], "succeeded", "{done}");
    }
}

#[tokio::test]
async fn a_batch_with_a_bad_item_accepts_nothing_and_names_every_error() {
    let app = spawn_app().await;
    let t = app.create_tenant("trainer").await;
    let mut bad_timeout = echo("w", 1);
    bad_timeout["timeout_s"] = json!(0);
    let mut bad_profile = echo("w", 3);
    bad_profile["profile"] = json!("no-such-profile");
    let mut bad_bundle = echo("w", 4);
    bad_bundle["code"] = json!({"bundle": format!("sha256:{}", "ab".repeat(32))});
    let batch = items([
        echo("w", 0),
        bad_timeout,
        echo("w", 2),
        bad_profile,
        bad_bundle,
    ]);
    let (status, err) = app.post(&t.key, "/v1/jobs/batch", &batch).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (422, Some("validation_failed")),
        "{err}"
    );
    let fields: Vec<&str> = err["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "jobs[1].job.timeout_s",
            "jobs[3].job.profile",
            "jobs[4].job.code.bundle"
        ],
        "{err}"
    );
    assert_eq!(count_jobs(&app, &t.key).await, 0, "nothing was accepted");

    // Empty, too large, and not a batch at all.
    let (status, err) = app
        .post(&t.key, "/v1/jobs/batch", &json!({"jobs": []}))
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (422, Some("validation_failed")),
        "{err}"
    );
    let many = items((0..1001).map(|i| echo("w", i)));
    let (status, err) = app.post(&t.key, "/v1/jobs/batch", &many).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (422, Some("validation_failed")),
        "{err}"
    );
    for body in [
        json!([echo("w", 0)]),
        json!({"jobs": [echo("w", 0)]}),
        json!({"jobs": [{"job": echo("w", 0), "extra": 1}]}),
    ] {
        let (status, err) = app.post(&t.key, "/v1/jobs/batch", &body).await;
        assert!((400..500).contains(&status), "{body}: {status} {err}");
    }
    assert_eq!(count_jobs(&app, &t.key).await, 0);
}

#[tokio::test]
async fn items_are_idempotent_and_a_reused_key_refuses_the_whole_batch() {
    let app = spawn_app().await;
    let t = app.create_tenant("trainer").await;
    let keyed = |i: usize| json!({"job": echo("w", i), "idempotency_key": format!("step-7-{i}")});
    let batch = json!({"jobs": [keyed(0), keyed(1), {"job": echo("w", 2)}]});
    let (status, first) = app.post(&t.key, "/v1/jobs/batch?wait=60", &batch).await;
    assert_eq!(status, 200, "{first}");
    // Sent again (a retry after a lost answer): the keyed jobs are the same
    // jobs, the unkeyed one is a new job.
    let (status, again) = app.post(&t.key, "/v1/jobs/batch?wait=60", &batch).await;
    assert_eq!(status, 200, "{again}");
    for i in 0..2 {
        assert_eq!(first["jobs"][i]["id"], again["jobs"][i]["id"], "item {i}");
    }
    assert_ne!(first["jobs"][2]["id"], again["jobs"][2]["id"]);
    assert_eq!(count_jobs(&app, &t.key).await, 4);

    // A retry that arrives while the first batch still runs waits for the
    // same jobs to end.
    let slow = |i: usize| {
        json!({"job": {"kind": "rollout", "profile": "cpu-small", "caller": "slow",
                       "command": ["sh", "-c", format!("sleep 1; echo slow {i}")], "timeout_s": 30},
               "idempotency_key": format!("slow-{i}")})
    };
    let batch = json!({"jobs": [slow(0), slow(1)]});
    let (status, running) = app.post(&t.key, "/v1/jobs/batch", &batch).await;
    assert_eq!(status, 202, "{running}");
    let (status, ended) = app.post(&t.key, "/v1/jobs/batch?wait=60", &batch).await;
    assert_eq!(status, 200, "{ended}");
    for i in 0..2 {
        assert_eq!(running["jobs"][i]["id"], ended["jobs"][i]["id"], "item {i}");
        assert_eq!(ended["jobs"][i]["state"], "succeeded", "{ended}");
        assert_eq!(ended["jobs"][i]["stdout"], format!("slow {i}\n"));
    }
    assert_eq!(count_jobs(&app, &t.key).await, 6);

    // A key used before with another job: nothing of the batch is accepted.
    let reused = json!({"jobs": [{"job": echo("w", 9)}, {"job": echo("w", 99), "idempotency_key": "step-7-1"}]});
    let (status, err) = app.post(&t.key, "/v1/jobs/batch", &reused).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (409, Some("idempotency_conflict")),
        "{err}"
    );
    assert!(
        err["message"].as_str().unwrap().contains("jobs[1]"),
        "{err}"
    );
    assert_eq!(
        count_jobs(&app, &t.key).await,
        6,
        "the batch's first job was not accepted"
    );
    // The header of `POST /v1/jobs` keys nothing here: refused, not ignored
    // (a retry would have submitted every job again).
    let r = app
        .http
        .post(app.url("/v1/jobs/batch"))
        .bearer_auth(&t.key)
        .header("idempotency-key", "whole-batch")
        .json(&items([echo("w", 0)]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let err: Value = r.json().await.unwrap();
    assert!(
        err["message"].as_str().unwrap().contains("idempotency_key"),
        "{err}"
    );
    assert_eq!(count_jobs(&app, &t.key).await, 6, "nothing was accepted");
    let bad_key = json!({"jobs": [{"job": echo("w", 0), "idempotency_key": ""}]});
    let (status, err) = app.post(&t.key, "/v1/jobs/batch", &bad_key).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (422, Some("validation_failed")),
        "{err}"
    );
}

/// Jobs/s of batches of 100 against one job per request, in one run on one
/// service: until every job is accepted, and until every job has run (a
/// real sandboxed process each). Each mode starts with nothing in flight.
/// Figures printed, nothing timed asserted:
/// `cargo test --release -p hearth-tests --test batch -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "benchmark: prints figures"]
async fn bench_batch_submission_against_one_by_one() {
    const JOBS: usize = 1000;
    let app = spawn_app().await;
    let t = app.create_tenant("bench").await;
    let job = |i: usize| {
        json!({
            "kind": "rollout", "profile": "cpu-small", "caller": format!("w{}", i % 8),
            "command": ["true"], "timeout_s": 30
        })
    };
    let in_flight = async || {
        let mut n = 0;
        for state in ["queued", "assigned", "running"] {
            let (_, page) = app
                .get(&t.key, &format!("/v1/jobs?state={state}&limit=1"))
                .await;
            n += page["jobs"].as_array().map_or(0, Vec::len);
        }
        n
    };
    let drain = async || {
        while in_flight().await > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let rate = |d: Duration| JOBS as f64 / d.as_secs_f64();

    let started = Instant::now();
    for i in 0..JOBS {
        let (status, v) = app.submit(&t.key, &job(i), None).await;
        assert_eq!(status, 202, "{v}");
    }
    let single_accept = started.elapsed();
    drain().await;
    let single_all = started.elapsed();

    let started = Instant::now();
    for chunk in 0..JOBS / 100 {
        let batch = items((0..100).map(|i| job(chunk * 100 + i)));
        let (status, v) = app.post(&t.key, "/v1/jobs/batch", &batch).await;
        assert_eq!(status, 202, "{v}");
    }
    let batch_accept = started.elapsed();
    drain().await;
    let batch_all = started.elapsed();

    println!(
        "{JOBS} jobs accepted: one per request {:.0} jobs/s, batches of 100 {:.0} jobs/s ({:.1}x)",
        rate(single_accept),
        rate(batch_accept),
        single_accept.as_secs_f64() / batch_accept.as_secs_f64()
    );
    println!(
        "{JOBS} jobs accepted and run: one per request {:.0} jobs/s, batches of 100 {:.0} jobs/s ({:.2}x)",
        rate(single_all),
        rate(batch_all),
        single_all.as_secs_f64() / batch_all.as_secs_f64()
    );
}
