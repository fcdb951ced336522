//! A tenant's self-service: its own API keys (minted once, listed with their
//! last use, expiring and revocable, never another tenant's), its usage over
//! a window, and its jobs looked up by id prefix and time range.

use std::time::Duration;

use hearth_tests::*;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap()
}

async fn delete(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    let r = app
        .http
        .delete(app.url(path))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_tenant_mints_lists_and_revokes_its_own_keys() {
    let app = spawn_app().await;
    let acme = app.create_tenant("acme").await;
    let other = app.create_tenant("other").await;

    // Minted with a name; the secret is in this answer only.
    let (status, minted) = app
        .post(&acme.key, "/v1/keys", &json!({"name": "ci-runner"}))
        .await;
    assert_eq!(status, 201, "{minted}");
    assert_eq!(minted["name"], "ci-runner");
    assert!(minted["expires_at"].is_null());
    let ci_key = minted["api_key"].as_str().unwrap().to_owned();
    let ci_id = minted["api_key_id"].as_str().unwrap().to_owned();
    assert!(ci_key.starts_with("hk_"), "{ci_key}");

    // The new key works, and its use is recorded.
    let (status, _) = app.get(&ci_key, "/v1/jobs").await;
    assert_eq!(status, 200);
    let listed = eventually("the key's use to be recorded", async || {
        let (_, keys) = app.get(&acme.key, "/v1/keys").await;
        let keys = keys.as_array()?.clone();
        let ci = keys.iter().find(|k| k["api_key_id"] == ci_id.as_str())?;
        (!ci["last_used_at"].is_null()).then_some(keys)
    })
    .await;
    assert_eq!(listed.len(), 2, "the first key and the new one: {listed:?}");
    for k in &listed {
        assert!(
            k.get("api_key").is_none() && k.get("secret_hash").is_none(),
            "{k}"
        );
        assert_eq!(k["tenant_id"], acme.tenant_id.as_str());
    }

    // Another tenant sees none of them and cannot revoke one.
    let (_, theirs) = app.get(&other.key, "/v1/keys").await;
    assert_eq!(theirs.as_array().unwrap().len(), 1, "{theirs}");
    assert!(!theirs.to_string().contains(&ci_id));
    let (status, err) = delete(&app, &other.key, &format!("/v1/keys/{ci_id}")).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (404, Some("not_found")),
        "{err}"
    );
    let (status, _) = app.get(&ci_key, "/v1/jobs").await;
    assert_eq!(status, 200, "still valid after the other tenant's try");

    // Revoked by its tenant: refused from then on, listed as revoked.
    let (status, revoked) = delete(&app, &acme.key, &format!("/v1/keys/{ci_id}")).await;
    assert_eq!(status, 200, "{revoked}");
    assert!(!revoked["revoked_at"].is_null());
    let (status, err) = app.get(&ci_key, "/v1/jobs").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (401, Some("unauthorized")),
        "{err}"
    );
    let (status, again) = delete(&app, &acme.key, &format!("/v1/keys/{ci_id}")).await;
    assert_eq!(
        (status, &again["revoked_at"]),
        (200, &revoked["revoked_at"]),
        "revoking twice keeps the first time"
    );

    // A key may revoke itself.
    let (_, own) = app.get(&acme.key, "/v1/keys").await;
    let first = own[0]["api_key_id"].as_str().unwrap().to_owned();
    let (status, _) = delete(&app, &acme.key, &format!("/v1/keys/{first}")).await;
    assert_eq!(status, 200);
    let (status, _) = app.get(&acme.key, "/v1/keys").await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn keys_expire_and_bad_requests_change_nothing() {
    let app = spawn_app().await;
    let acme = app.create_tenant("acme").await;

    // A key that expires in a moment works until then, and not after.
    let soon = OffsetDateTime::now_utc() + time::Duration::seconds(3);
    let (status, minted) = app
        .post(&acme.key, "/v1/keys", &json!({"expires_at": rfc3339(soon)}))
        .await;
    assert_eq!(status, 201, "{minted}");
    assert_eq!(minted["name"], "default");
    assert!(!minted["expires_at"].is_null());
    let short = minted["api_key"].as_str().unwrap().to_owned();
    let (status, _) = app.get(&short, "/v1/jobs").await;
    assert_eq!(status, 200);
    let wait = soon - OffsetDateTime::now_utc() + time::Duration::milliseconds(200);
    tokio::time::sleep(wait.unsigned_abs().max(Duration::from_millis(1))).await;
    let (status, err) = app.get(&short, "/v1/jobs").await;
    assert_eq!(status, 401, "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("expired"),
        "{err}"
    );

    // Refused with a clear 4xx, and nothing minted.
    let past = rfc3339(OffsetDateTime::now_utc() - time::Duration::hours(1));
    for (body, code) in [
        (json!({"expires_at": past}), "validation_failed"),
        (json!({"name": "has space"}), "validation_failed"),
        (json!({"name": "x".repeat(65)}), "validation_failed"),
        (json!({"expires_at": "tomorrow"}), "validation_failed"),
        (json!({"scopes": ["all"]}), "validation_failed"),
        (json!([null, null]), "validation_failed"),
        (json!([]), "validation_failed"),
    ] {
        let (status, err) = app.post(&acme.key, "/v1/keys", &body).await;
        assert!((400..500).contains(&status), "{body}: {status} {err}");
        assert_eq!(err["code"], code, "{body}: {err}");
    }
    let (_, keys) = app.get(&acme.key, "/v1/keys").await;
    assert_eq!(keys.as_array().unwrap().len(), 2, "{keys}");
    let (status, _) = app.get("hk_nope_nope", "/v1/keys").await;
    assert_eq!(status, 401);
}

fn sh(caller: &str, profile: &str, script: &str) -> Value {
    json!({
        "kind": "tool_call", "profile": profile, "caller": caller,
        "code": {"files": {"run.sh": script}},
        "command": ["sh", "run.sh"], "timeout_s": 30
    })
}

#[tokio::test]
async fn usage_counts_a_tenant_s_jobs_seconds_and_gpu_seconds() {
    let dir = state_dir();
    let profiles = dir.join("profiles.json");
    std::fs::write(
        &profiles,
        json!([{"name": "cpu-small"}, {"name": "gpu-two", "gpus": 2, "max_pods": 4}]).to_string(),
    )
    .unwrap();
    let mut config = config();
    config.profiles = Some(profiles);
    config.gpus = Some(4);
    let app = spawn_app_with(config).await;
    let acme = app.create_tenant("acme").await;
    let other = app.create_tenant("other").await;

    let runs = [
        (&acme, "cpu-small", "sleep 0.3"),
        (&acme, "cpu-small", "exit 3"),
        (&acme, "gpu-two", "sleep 0.5"),
        (&other, "cpu-small", "sleep 1"),
    ];
    let mut done = Vec::new();
    for (t, profile, script) in runs {
        let (status, job) = app
            .submit(&t.key, &sh("u", profile, script), Some(60.0))
            .await;
        assert_eq!(status, 200, "{job}");
        done.push(job);
    }
    let run_s = |j: &Value| j["timing"]["run_ms"].as_f64().unwrap() / 1000.0;

    let (status, u) = app.get(&acme.key, "/v1/usage?window_s=3600").await;
    assert_eq!(status, 200, "{u}");
    assert_eq!(u["window_s"], 3600);
    assert_eq!(u["jobs"], 3, "the other tenant's job is not acme's: {u}");
    assert_eq!(u["by_state"], json!({"succeeded": 2, "failed": 1}));
    let sourced: i64 = u["by_source"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(sourced, 3, "{u}");
    let profiles = u["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2, "{u}");
    let (cpu, gpu) = (&profiles[0], &profiles[1]);
    assert_eq!(
        (&cpu["profile"], &cpu["jobs"]),
        (&json!("cpu-small"), &json!(2))
    );
    let cpu_s = run_s(&done[0]) + run_s(&done[1]);
    assert!(
        (cpu["job_seconds"].as_f64().unwrap() - cpu_s).abs() < 1e-6,
        "{cpu} vs {cpu_s}"
    );
    assert_eq!(cpu["gpu_seconds"], 0.0);
    assert_eq!(
        (&gpu["profile"], &gpu["jobs"]),
        (&json!("gpu-two"), &json!(1))
    );
    let gpu_s = gpu["gpu_seconds"].as_f64().unwrap();
    let gpu_want = 2.0 * run_s(&done[2]);
    assert!((gpu_s - gpu_want).abs() < 1e-6, "2 GPUs x its run: {gpu}");
    assert!(run_s(&done[2]) >= 0.5);

    // A window that ends before the jobs began counts none of them; a bad
    // window is refused.
    let (_, none) = app.get(&other.key, "/v1/usage?window_s=1").await;
    assert!(none["jobs"].as_i64().unwrap() <= 1, "{none}");
    for bad in ["0", "7776001", "-5", "day"] {
        let (status, err) = app
            .get(&acme.key, &format!("/v1/usage?window_s={bad}"))
            .await;
        assert_eq!(status, 400, "{bad}: {err}");
        assert_eq!(err["code"], "invalid_request", "{bad}: {err}");
    }
}

#[tokio::test]
async fn jobs_are_found_by_id_prefix_and_time_range() {
    let app = spawn_app().await;
    let acme = app.create_tenant("acme").await;
    let other = app.create_tenant("other").await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let (_, job) = app
            .submit(&acme.key, &sh("l", "cpu-small", "true"), None)
            .await;
        ids.push(job["id"].as_str().unwrap().to_owned());
        if i == 0 {
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
    }
    let (_, theirs) = app
        .submit(&other.key, &sh("l", "cpu-small", "true"), None)
        .await;
    let list = async |key: &str, query: &str| -> Vec<String> {
        let (status, page) = app.get(key, &format!("/v1/jobs?{query}")).await;
        assert_eq!(status, 200, "{query}: {page}");
        page["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect()
    };

    // A full id, the same with its dashes gone and in capitals, and a short
    // prefix shared by every job of the test.
    assert_eq!(
        list(&acme.key, &format!("id_prefix={}", ids[1])).await,
        [ids[1].clone()]
    );
    let loud = ids[2].replace('-', "").to_uppercase();
    assert_eq!(
        list(&acme.key, &format!("id_prefix={loud}")).await,
        [ids[2].clone()]
    );
    let short = &ids[0][..4];
    let found = list(&acme.key, &format!("id_prefix={short}")).await;
    assert!(ids.iter().all(|id| found.contains(id)), "{found:?}");
    // Dashes alone match every job; more digits than an id has, none.
    assert_eq!(list(&acme.key, "id_prefix=--").await.len(), 3);
    assert!(
        list(&acme.key, &format!("id_prefix={}", "0".repeat(33)))
            .await
            .is_empty()
    );
    // Never another tenant's, whatever the prefix.
    let their_id = theirs["id"].as_str().unwrap();
    assert!(
        list(&acme.key, &format!("id_prefix={their_id}"))
            .await
            .is_empty()
    );

    // By the time the first job was accepted: before it, at it, after it.
    let (_, first) = app.get(&acme.key, &format!("/v1/jobs/{}", ids[0])).await;
    let t0 = OffsetDateTime::parse(first["created_at"].as_str().unwrap(), &Rfc3339).unwrap();
    let at = |t: OffsetDateTime| rfc3339(t).replace('+', "%2B");
    let after_first = at(t0 + time::Duration::milliseconds(500));
    assert_eq!(
        list(&acme.key, &format!("created_after={after_first}")).await,
        [ids[2].clone(), ids[1].clone()]
    );
    assert_eq!(
        list(&acme.key, &format!("created_before={after_first}")).await,
        [ids[0].clone()]
    );
    assert_eq!(
        list(
            &acme.key,
            &format!("created_after={}&created_before={after_first}", at(t0))
        )
        .await,
        [ids[0].clone()]
    );

    for bad in [
        "id_prefix=xyz",
        "id_prefix=",
        "created_after=yesterday",
        "created_before=2026-13-01T00:00:00Z",
    ] {
        let (status, err) = app.get(&acme.key, &format!("/v1/jobs?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {err}");
        assert_eq!(err["code"], "invalid_request", "{bad}: {err}");
    }
}
