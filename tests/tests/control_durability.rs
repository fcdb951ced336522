//! A `kill -9` of the service and acknowledged control events: the real
//! `hearth` binary counts with a one-register policy, is killed right after
//! an answer and started again on the same database. A `commit` policy (the
//! default) loses no answered event; a `snapshot` policy loses what its
//! stated window allows (everything since the last snapshot) and no more.

use hearth_tests::*;
use serde_json::{Value, json};

async fn start(db: &str, state: &std::path::Path, snapshot_s: f64) -> Served {
    let snapshot_s = snapshot_s.to_string();
    Served::start(db, state, &[("HEARTH_CONTROL_SNAPSHOT_S", &snapshot_s)]).await
}

/// A counter: each event adds its input to register 0.
fn counter(durability: Option<&str>) -> Value {
    let mut p = json!({
        "name": "counter", "version": 1, "registers": 1, "inputs": 1,
        "routes": [{"name": "tick", "body": [
            {"op": "add", "dst": 0, "a": {"reg": 0}, "b": {"input": 0}}
        ]}]
    });
    if let Some(d) = durability {
        p["durability"] = d.into();
    }
    p
}

struct Client {
    http: reqwest::Client,
    key: String,
    policy: String,
}

impl Client {
    async fn new(svc: &Served, tenant: &str, durability: Option<&str>) -> (Self, Value) {
        let http = reqwest::Client::new();
        let tenant: Value = http
            .post(format!("{}/v1/admin/tenants", svc.base))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"name": tenant}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let key = tenant["api_key"].as_str().unwrap().to_owned();
        let policy: Value = http
            .post(format!("{}/v1/control/policies", svc.base))
            .bearer_auth(&key)
            .json(&counter(durability))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = policy["policy_id"].as_str().expect("registered").to_owned();
        (
            Self {
                http,
                key,
                policy: id,
            },
            policy,
        )
    }

    /// Sends one event and returns the acknowledged count.
    async fn tick(&self, svc: &Served, session: &str) -> u32 {
        let v: Value = self
            .http
            .post(format!("{}/v1/control/events", svc.base))
            .bearer_auth(&self.key)
            .json(&json!({"policy": self.policy, "session": session, "input": [1]}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["results"][0]["state"][0]
            .as_u64()
            .unwrap_or_else(|| panic!("an answer: {v}")) as u32
    }

    /// The session's stored count after a restart (`None`: no such session).
    async fn count(&self, svc: &Served, session: &str) -> Option<u32> {
        let r = self
            .http
            .get(format!(
                "{}/v1/control/sessions/{session}?policy={}",
                svc.base, self.policy
            ))
            .bearer_auth(&self.key)
            .send()
            .await
            .unwrap();
        if r.status() == 404 {
            return None;
        }
        let v: Value = r.json().await.unwrap();
        Some(v["state"][0].as_u64().unwrap() as u32)
    }
}

#[tokio::test]
async fn kill_9_loses_no_event_a_commit_policy_answered() {
    let db = fresh_database_url();
    let state = state_dir();
    // No snapshot during the test: only the per-launch commits can save state.
    let mut svc = start(db.url(), &state, 3600.0).await;
    let (client, policy) = Client::new(&svc, "ctl-commit", None).await;
    assert_eq!(policy["durability"], "commit", "{policy}");
    let mut acknowledged = 0;
    for _ in 0..40 {
        acknowledged = client.tick(&svc, "c").await;
    }
    // Two sessions advanced by one array: one launch, one commit.
    let http = &client.http;
    let v: Value = http
        .post(format!("{}/v1/control/events", svc.base))
        .bearer_auth(&client.key)
        .json(&json!([
            {"policy": client.policy, "session": "c", "input": [5]},
            {"policy": client.policy, "session": "d", "input": [7]},
        ]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["results"][0]["state"][0], acknowledged + 5, "{v}");
    acknowledged += 5;
    svc.kill();

    let svc = start(db.url(), &state, 3600.0).await;
    assert_eq!(client.count(&svc, "c").await, Some(acknowledged));
    assert_eq!(client.count(&svc, "d").await, Some(7));
    // And it counts on from there.
    assert_eq!(client.tick(&svc, "c").await, acknowledged + 1);
}

#[tokio::test]
async fn kill_9_loses_a_snapshot_policys_events_since_its_last_snapshot_only() {
    let db = fresh_database_url();
    let state = state_dir();
    let mut svc = start(db.url(), &state, 0.2).await;
    let (client, policy) = Client::new(&svc, "ctl-snapshot", Some("snapshot")).await;
    assert_eq!(policy["durability"], "snapshot", "{policy}");
    for _ in 0..10 {
        client.tick(&svc, "s").await;
    }
    // Wait for a snapshot of the 10.
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    eventually("the snapshot of 10 events", async || {
        let state: Option<Value> =
            sqlx::query_scalar("select state from control_session where session = 's'")
                .fetch_optional(&pool)
                .await
                .unwrap();
        (state == Some(json!([10]))).then_some(())
    })
    .await;
    let mut acknowledged = 0;
    for _ in 0..10 {
        acknowledged = client.tick(&svc, "s").await;
    }
    assert_eq!(acknowledged, 20);
    svc.kill();

    let mut svc = start(db.url(), &state, 3600.0).await;
    let restored = client.count(&svc, "s").await.expect("snapshotted");
    // The loss is bounded by the stated window: what the last snapshot held
    // (10, or a later snapshot of the second ten), never more than answered.
    assert!((10..=acknowledged).contains(&restored), "{restored}");

    // Without any snapshot in the window, everything answered is lost.
    let (client, _) = Client::new(&svc, "ctl-snapshot-lost", Some("snapshot")).await;
    for _ in 0..5 {
        client.tick(&svc, "lost").await;
    }
    svc.kill();
    let svc = start(db.url(), &state, 3600.0).await;
    assert_eq!(client.count(&svc, "lost").await, None);
}
