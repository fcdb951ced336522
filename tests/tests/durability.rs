//! A `kill -9` of the service loses no accepted job: the real `hearth` binary
//! is killed mid-job and started again on the same database.

use std::time::Duration;

use hearth_tests::*;
use serde_json::{Value, json};

async fn start(db: &str, state: &std::path::Path) -> Served {
    Served::start(db, state, &[]).await
}

#[tokio::test]
async fn kill_9_mid_job_loses_no_accepted_job() {
    let db = fresh_database_url();
    let state = state_dir();
    let http = reqwest::Client::new();
    let mut svc = start(&db, &state).await;
    let tenant: Value = http
        .post(format!("{}/v1/admin/tenants", svc.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "durable"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = tenant["api_key"].as_str().unwrap().to_owned();
    let marker = format!("hearth-durable-{}", uuid::Uuid::new_v4().simple());
    let code = format!(
        "import json, os, time  # {marker}\ntime.sleep(2)\njson.dump({{'ok': True}}, open(os.environ['HEARTH_OUTPUT'], 'w'))\n"
    );
    let mut ids = Vec::new();
    for caller in ["a", "b", "c"] {
        let r: Value = http
            .post(format!("{}/v1/jobs", svc.base))
            .bearer_auth(&key)
            .json(&python_job(caller, &code))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        ids.push(r["id"].as_str().unwrap().to_owned());
    }
    // Wait until the first job runs, then kill -9 the service.
    let mut tries = 0;
    loop {
        let j: Value = http
            .get(format!("{}/v1/jobs/{}", svc.base, ids[0]))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if j["state"] == "running" {
            break;
        }
        tries += 1;
        assert!(tries < 400, "job never ran: {j}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    svc.kill();
    // The pods die with the service: nothing keeps running unsupervised.
    let mut tries = 0;
    while process_with_marker(&marker) {
        tries += 1;
        assert!(tries < 200, "a job process outlived the killed service");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let svc = start(&db, &state).await;
    for id in &ids {
        let j: Value = http
            .get(format!("{}/v1/jobs/{id}?wait=60", svc.base))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(j["state"], "succeeded", "{j}");
        assert_eq!(j["output"], json!({"ok": true}));
    }
}

#[tokio::test]
async fn a_leader_that_loses_its_lease_steps_down_and_leads_again() {
    let db = fresh_database_url();
    let state = state_dir();
    let http = reqwest::Client::new();
    let mut svc = start(&db, &state).await;
    let tenant: Value = http
        .post(format!("{}/v1/admin/tenants", svc.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "lease"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = tenant["api_key"].as_str().unwrap().to_owned();
    let marker = format!("hearth-lease-{}", uuid::Uuid::new_v4().simple());
    let slow = format!("import time  # {marker}\ntime.sleep(3)\nprint('slow done')\n");
    let mut job = python_job("a", &slow);
    job["command"] = json!(["python3", "main.py", marker]);
    let running: Value = http
        .post(format!("{}/v1/jobs", svc.base))
        .bearer_auth(&key)
        .json(&job)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = running["id"].as_str().unwrap().to_owned();
    eventually("the job to run", async || {
        process_with_marker(&marker).then_some(())
    })
    .await;
    // End the connection that holds the scheduler's advisory lock, as a
    // database restart or a network cut would.
    let pool = sqlx::PgPool::connect(&db).await.unwrap();
    let epoch = || async {
        sqlx::query_scalar::<_, i64>("select epoch from leadership")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let before = epoch().await;
    let ended: Vec<bool> = eventually("the lease held", async || {
        let ended: Vec<bool> = sqlx::query_scalar(
            "select pg_terminate_backend(pid) from pg_locks
             where locktype = 'advisory' and granted
               and database = (select oid from pg_database where datname = current_database())",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        (!ended.is_empty()).then_some(ended)
    })
    .await;
    assert_eq!(ended, [true]);
    // The leader steps down: the job it ran ends with its pod, and it takes
    // the lease again under a new epoch instead of exiting.
    eventually("the stepped-down job's processes to end", async || {
        (!process_with_marker(&marker)).then_some(())
    })
    .await;
    let after = eventually("a new epoch", async || {
        let e = epoch().await;
        (e > before).then_some(e)
    })
    .await;
    assert!(svc.exited().is_none(), "the service exited");
    println!("epoch {before} -> {after}");
    // The job it held is re-queued and runs again; new jobs run too.
    let j: Value = http
        .get(format!("{}/v1/jobs/{id}?wait=60", svc.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(j["state"], "succeeded", "{j}");
    assert_eq!(j["attempts"], 2, "{j}");
    let fresh: Value = http
        .post(format!("{}/v1/jobs?wait=60", svc.base))
        .bearer_auth(&key)
        .json(&python_job("b", "print('after')"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fresh["state"], "succeeded", "{fresh}");
}
