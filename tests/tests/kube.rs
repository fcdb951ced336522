//! The service on the Kubernetes runtime, against the fake API server and
//! kubelet of `server/kube/tests/fake_api` (real agents on 127.0.0.N): jobs
//! submitted over HTTP run on cold, warm and standby pods, and a restarted
//! service adopts the pods the last one left instead of creating new ones.

#[path = "../../server/kube/tests/fake_api/mod.rs"]
#[allow(dead_code, reason = "the runtime's own tests use the rest of the fake")]
mod fake_api;

use std::sync::Arc;
use std::time::Duration;

use fake_api::FakeCluster;
use hearth_kube::{InstallSecret, KubeConfig, KubeRuntime};
use hearth_tests::{ADMIN_TOKEN, agent_bin, config, python_job};
use serde_json::{Value, json};

struct Service {
    base: String,
    running: hearth::Running,
}

impl Service {
    async fn start(cfg: &hearth_tests::TestConfig, cluster: &FakeCluster, port: u16) -> Service {
        let mut kcfg = KubeConfig::new(
            "hearth",
            "e2e",
            InstallSecret::new(b"e2e-install-secret".to_vec()),
        );
        kcfg.template.agent_port = port;
        let runtime = KubeRuntime::new(cluster.client(), kcfg).expect("runtime");
        let running = hearth::start((**cfg).clone(), Arc::new(runtime))
            .await
            .expect("service starts");
        Service {
            base: format!("http://{}", running.addr),
            running,
        }
    }

    async fn post(&self, key: &str, path: &str, body: &Value) -> (u16, Value) {
        let r = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .bearer_auth(key)
            .json(body)
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        let r = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .bearer_auth(key)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// A new tenant named `name`, as the admin API answers it.
    async fn tenant(&self, name: &str) -> Value {
        let (status, tenant) = self
            .post(ADMIN_TOKEN, "/v1/admin/tenants", &json!({"name": name}))
            .await;
        assert_eq!(status, 201, "{tenant}");
        tenant
    }

    async fn run(&self, key: &str, caller: &str) -> Value {
        let job = python_job(
            caller,
            "import json, os; json.dump({'ok': 1}, open(os.environ['HEARTH_OUTPUT'], 'w'))",
        );
        let (status, body) = self.post(key, "/v1/jobs?wait=60", &job).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["state"], "succeeded", "{body}");
        assert_eq!(body["output"], json!({"ok": 1}));
        body
    }
}

/// A fake cluster whose agents listen on the returned port and keep their
/// files under the returned folder (new, named after the test).
async fn fake_cluster(name: &str) -> (FakeCluster, u16, std::path::PathBuf) {
    hearth::cli::init_tracing(hearth::config::LogFormat::Text);
    let root = std::env::temp_dir().join(format!("hearth-kube-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let port = hearth_tests::free_port();
    let cluster = FakeCluster::start(&agent_bin(), &root, port).await;
    (cluster, port, root)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_run_on_kubernetes_pods_and_a_restart_adopts_them() {
    let (cluster, port, root) = fake_cluster("e2e").await;
    let mut cfg = config();
    cfg.standby_min = 1;
    cfg.standby_max = 1;

    let first = Service::start(&cfg, &cluster, port).await;
    let tenant = first.tenant("kube").await;
    let key = tenant["api_key"].as_str().unwrap().to_owned();
    let tenant_id = tenant["tenant_id"].as_str().unwrap().to_owned();

    let one = first.run(&key, "c1").await;
    assert!(
        ["cold", "standby"].contains(&one["source"].as_str().unwrap()),
        "{one}"
    );
    let two = first.run(&key, "c1").await;
    assert_eq!(two["source"], "warm", "{two}");
    // Every pod is a Kubernetes pod whose labels name the install, pool,
    // profile and network, never the tenant or the caller.
    let names = cluster.pod_names();
    assert!(!names.is_empty());
    for name in &names {
        let pod = cluster.pod(name).unwrap();
        let labels = pod["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels.len(), 8, "{labels:?}");
        let network = if labels["hearth.dev/profile"] == "cpu-net" {
            "egress"
        } else {
            "none"
        };
        assert_eq!(labels["hearth.dev/network"], network, "{labels:?}");
        let text = serde_json::to_string(labels).unwrap();
        assert!(
            !text.contains("c1") && !text.contains(&tenant_id),
            "{labels:?}"
        );
    }

    // The service goes (no shutdown: as if killed); its pods stay.
    first.running.abort();
    drop(first);
    let created = cluster.creations();
    let left = cluster.pod_names().len();
    assert!(left >= 2, "{left}");

    let before = cluster.pod_names();
    let second = Service::start(&cfg, &cluster, port).await;
    // Its pools took the adopted idle pods as standby: the first handover
    // needs no new pod (the pool may start one after, to refill).
    let three = second.run(&key, "c3").await;
    assert_eq!(three["source"], "standby", "{three}");
    let pod = three["pods"][0].as_str().unwrap();
    assert!(
        before.iter().any(|n| n == pod),
        "{pod} was adopted: {before:?}"
    );
    assert!(
        cluster.creations() <= created + 1,
        "at most the refill of the standby it promoted"
    );
    second.running.abort();
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_profile_whose_pods_cannot_start_fails_the_jobs_waiting_for_them() {
    let (cluster, port, root) = fake_cluster("broken").await;
    let profiles = root.join("profiles.json");
    std::fs::write(
        &profiles,
        json!([
            {"name": "cpu-small"},
            {"name": "broken", "image": "missing/no-such-image:1"}
        ])
        .to_string(),
    )
    .unwrap();
    let mut cfg = config();
    cfg.profiles = Some(profiles);
    let service = Service::start(&cfg, &cluster, port).await;
    let key = service.tenant("broken").await["api_key"]
        .as_str()
        .unwrap()
        .to_owned();

    // Every start fails at once (the image cannot be pulled): after a few
    // tries the job fails with the reason instead of waiting forever.
    let mut job = python_job("b1", "print('never')");
    job["profile"] = json!("broken");
    let began = std::time::Instant::now();
    let (status, failed) = service.post(&key, "/v1/jobs?wait=60", &job).await;
    assert_eq!(status, 200, "{failed}");
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], "pod_start_failed", "{failed}");
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("ErrImagePull"), "{message}");
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "{:?}",
        began.elapsed()
    );
    // The pool recorded each failed start with its reason.
    let pod = failed["pods"][0].as_str().map(str::to_owned);
    assert!(pod.is_none(), "the job never held a pod: {failed}");

    // A job that arrives while starts still fail fails too, with the reason.
    job["caller"] = json!("b2");
    let (_, again) = service.post(&key, "/v1/jobs?wait=60", &job).await;
    assert_eq!(again["error"]["code"], "pod_start_failed", "{again}");
    // The other profile is untouched.
    service.run(&key, "ok").await;
    service.running.abort();
    let _ = std::fs::remove_dir_all(&root);
}

/// An API server that cannot take pod creations for a while (500s) is no
/// reason to fail the jobs waiting for pods: those starts are retried, not
/// counted against the profile, and the job runs once creations succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_wait_out_an_api_server_that_cannot_create_pods_for_a_while() {
    let (cluster, port, root) = fake_cluster("unavailable").await;
    let mut cfg = config();
    // No standby pod: the job's own pod is the one whose creation fails.
    cfg.standby_min = 0;
    cfg.standby_max = 0;
    let service = Service::start(&cfg, &cluster, port).await;
    let key = service.tenant("unavailable").await["api_key"]
        .as_str()
        .unwrap()
        .to_owned();
    // More refusals than the failed starts a profile's jobs fail after.
    cluster.refuse_creations(6);
    let created = cluster.creations();
    let body = service.run(&key, "u1").await;
    eprintln!(
        "DBG created {created} now {} body {body}",
        cluster.creations()
    );
    assert_eq!(body["source"], "cold", "{body}");
    assert!(
        cluster.creations() > created,
        "a pod was made once creations succeeded"
    );
    service.running.abort();
    let _ = std::fs::remove_dir_all(&root);
}

/// A broker restart with a job mid-run: the new leader keeps the busy pod
/// (no new pod created), counts it active for the job's caller in its
/// pools while the job runs, re-attaches to the run and records its end
/// with its whole output, lines shown once (logs and event stream); the
/// pod then stays warm for the caller, and the idle pods it adopted show
/// as standby in its pools.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restart_reattaches_to_a_job_mid_run() {
    let (cluster, port, root) = fake_cluster("resume").await;
    let mut cfg = config();
    cfg.standby_min = 1;
    cfg.standby_max = 1;
    let first = Service::start(&cfg, &cluster, port).await;
    let key = first.tenant("resume").await["api_key"]
        .as_str()
        .unwrap()
        .to_owned();
    // The job goes on once the test says so (the agents share this
    // machine's filesystem): the new leader is seen while it runs.
    let go = root.join("go");
    let job = python_job(
        "r1",
        &format!(
            "import json, os, time\n\
             print('before', flush=True)\n\
             for _ in range(600):\n    \
                 if os.path.exists({go:?}): break\n    \
                 time.sleep(0.1)\n\
             print('after', flush=True)\n\
             json.dump({{'done': True}}, open(os.environ['HEARTH_OUTPUT'], 'w'))"
        ),
    );
    let (status, accepted) = first.post(&key, "/v1/jobs", &job).await;
    assert!(status == 201 || status == 202, "{accepted}");
    let job_id = accepted["id"].as_str().unwrap().to_owned();
    let get = |base: String| {
        let (key, job_id) = (key.clone(), job_id.clone());
        async move {
            reqwest::Client::new()
                .get(format!("{base}/v1/jobs/{job_id}"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let mut running = false;
    for _ in 0..200 {
        let j = get(first.base.clone()).await;
        if j["state"] == "running" {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(running, "the job runs");
    // It printed its first line (the job sleeps 4 s after it).
    tokio::time::sleep(Duration::from_millis(1000)).await;

    // The broker dies mid-run (its job tasks with it); the pods stay.
    first.running.abort();
    first.running.state.scheduler.halt();
    drop(first);
    let created = cluster.creations();

    let second = Service::start(&cfg, &cluster, port).await;
    // From the takeover on, its pod is active in its pool, for its caller.
    let small = |pools: &Value| {
        pools["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["profile"] == "cpu-small")
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mut pool = Value::Null;
    for _ in 0..300 {
        let (status, pools) = second.get(&key, "/v1/pools").await;
        assert_eq!(status, 200, "{pools}");
        pool = small(&pools);
        if pool["pods"]["active"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pool["pods"]["active"], 1, "{pool}");
    let r1 = pool["callers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["caller"] == "r1")
        .cloned();
    assert_eq!(
        r1.as_ref().map(|c| c["in_flight"].clone()),
        Some(json!(1)),
        "{pool}"
    );
    assert_eq!(get(second.base.clone()).await["state"], "running");
    std::fs::write(&go, "").unwrap();
    let mut done = Value::Null;
    for _ in 0..300 {
        done = get(second.base.clone()).await;
        if done["state"] == "succeeded" || done["state"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["output"], json!({"done": true}), "{done}");
    assert_eq!(
        done["stdout"], "before\nafter\n",
        "the whole output, once: {done}"
    );
    assert_eq!(done["attempts"], 1, "not run again: {done}");
    assert_eq!(
        cluster.creations(),
        created,
        "the restarted service created no pod"
    );
    // The event stream shows each line once, as the logs do: the lines the
    // first leader stored are not announced again by the replay.
    let stream = reqwest::Client::new()
        .get(format!("{}/v1/jobs/{job_id}/events", second.base))
        .bearer_auth(&key)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines: Vec<String> = stream
        .split("\n\n")
        .filter(|block| block.lines().any(|l| l == "event: output"))
        .filter_map(|block| {
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            let event: Value = serde_json::from_str(data).ok()?;
            Some(event["line"].as_str()?.to_owned())
        })
        .collect();
    assert_eq!(lines, ["before", "after"], "{stream}");
    // Idle adopted pods are the new leader's standby.
    let (status, pools) = second.get(&key, "/v1/pools").await;
    assert_eq!(status, 200);
    let standby: u64 = pools["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pods"]["standby"].as_u64().unwrap_or(0))
        .sum();
    assert!(standby >= 1, "{pools}");
    // The job's end is any job's end: its pod is warm for its caller, and
    // serves the caller's next job.
    assert_eq!(small(&pools)["pods"]["active"], 0, "{pools}");
    let next = second.run(&key, "r1").await;
    assert_eq!(next["source"], "warm", "{next}");
    assert_eq!(next["pods"], done["pods"], "{next}");
    second.running.abort();
    let _ = std::fs::remove_dir_all(&root);
}
