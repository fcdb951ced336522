//! A `kill -9` of the service loses no accepted job: the real `hearth` binary
//! is killed mid-job and started again on the same database.

use std::time::Duration;

use hearth_tests::*;
use serde_json::{Value, json};

async fn start(db: &str, state: &std::path::Path) -> Served {
    Served::start(db, state, &[]).await
}

/// A new tenant's API key.
async fn tenant_key(http: &reqwest::Client, svc: &Served, name: &str) -> String {
    let tenant: Value = http
        .post(svc.url("/v1/admin/tenants"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "name": name }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    tenant["api_key"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn kill_9_mid_job_loses_no_accepted_job() {
    let db = fresh_database_url();
    let state = state_dir();
    let http = reqwest::Client::new();
    let mut svc = start(&db, &state).await;
    let key = tenant_key(&http, &svc, "durable").await;
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
    let key = tenant_key(&http, &svc, "lease").await;
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

/// Copies job `from` as a new queued job, its spec merged with `spec`: a row
/// as another writer (an operator, a newer version) may leave it. Its id.
async fn queue_copy(db: &mut sqlx::PgConnection, from: &str, spec: &str) -> String {
    let id = uuid::Uuid::now_v7();
    sqlx::query(
        "insert into job (job_id, tenant_id, kind, profile, caller, state, priority, spec)
         select $1, tenant_id, kind, profile, caller || '-copy', 'queued', priority,
                spec || $2::jsonb
         from job where job_id = $3::uuid",
    )
    .bind(id)
    .bind(spec)
    .bind(from)
    .execute(db)
    .await
    .unwrap();
    id.to_string()
}

/// A queued job whose stored row the service cannot read (a number beyond a
/// double's range, which no request can write) stops no other job: neither
/// when a new leader rebuilds its queue, nor in a running leader's scans
/// for jobs accepted elsewhere. It is left in the store as it is.
#[tokio::test]
async fn an_unreadable_row_stops_no_other_job() {
    use sqlx::Connection;
    let db = fresh_database_url();
    let state = state_dir();
    let http = reqwest::Client::new();
    let mut svc = start(&db, &state).await;
    let key = tenant_key(&http, &svc, "unreadable").await;
    let done = |svc: &Served, id: &str| {
        let request = http
            .get(svc.url(&format!("/v1/jobs/{id}?wait=60")))
            .bearer_auth(&key);
        async move {
            let j: Value = request.send().await.unwrap().json().await.unwrap();
            j
        }
    };
    let job =
        json!({"kind": "tool_call", "profile": "cpu-small", "command": ["true"], "caller": "a"});
    let r: Value = http
        .post(svc.url("/v1/jobs?wait=60"))
        .bearer_auth(&key)
        .json(&job)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["state"], "succeeded", "{r}");
    let template = r["id"].as_str().unwrap().to_owned();
    svc.kill();

    let mut conn = sqlx::PgConnection::connect(db.url()).await.unwrap();
    let bad = queue_copy(&mut conn, &template, r#"{"input": 1e400}"#).await;
    let good = queue_copy(&mut conn, &template, "{}").await;
    // Recovery at start.
    let svc = start(&db, &state).await;
    assert_eq!(done(&svc, &good).await["state"], "succeeded");
    // A running leader's scan.
    let bad_later = queue_copy(&mut conn, &template, r#"{"input": -1e400}"#).await;
    let good_later = queue_copy(&mut conn, &template, "{}").await;
    assert_eq!(done(&svc, &good_later).await["state"], "succeeded");

    for id in [&bad, &bad_later] {
        let state: String =
            sqlx::query_scalar("select state::text from job where job_id = $1::uuid")
                .bind(id)
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert_eq!(state, "queued", "an unreadable job is left as it is");
    }
    let health = http.get(svc.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    conn.close().await.unwrap();
}
