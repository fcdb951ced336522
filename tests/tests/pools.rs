//! The pool policy live: standby handover and refill, the opening burst's
//! standby, warm reuse per caller, a pod reset for another caller wiped
//! first, keep-alive release, tenant budgets, the pools and pod-events API
//! and `/metrics`, on the real local runtime; and the trace generator of
//! `hearth simulate` as a filter.

use std::collections::HashMap;

use hearth_tests::*;
use serde_json::{Value, json};

fn quick(caller: &str) -> Value {
    python_job(caller, "print('ok')")
}

async fn pool(app: &TestApp, key: &str, profile: &str) -> Value {
    let (s, v) = app.get(key, &format!("/v1/pools/{profile}")).await;
    assert_eq!(s, 200, "{v}");
    v
}

/// Samples of a Prometheus text exposition: `name{labels}` to value. Fails
/// on any line that is not a comment or a sample.
fn parse_metrics(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            let value = value
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("bad value in {l:?}"));
            (series.to_owned(), value)
        })
        .collect()
}

async fn pod_events(app: &TestApp, key: &str, pod: &str) -> (u16, Value) {
    app.get(key, &format!("/v1/pods/{pod}/events")).await
}

#[tokio::test]
async fn a_pool_opens_with_the_standby_its_opening_burst_needs() {
    let mut config = config();
    config.standby_min = 0;
    config.standby_max = 8;
    config.standby_initial = 3;
    let app = spawn_app_with(config).await;
    let a = app.create_tenant("opening").await;
    let p = eventually("three standby pods", async || {
        let p = pool(&app, &a.key, "cpu-small").await;
        (p["pods"]["standby"] == 3).then_some(p)
    })
    .await;
    assert_eq!(p["standby_target"], 3, "{p}");
    // The three callers it expected are handed them.
    for caller in ["w-0", "w-1", "w-2"] {
        let (s, job) = app.submit(&a.key, &quick(caller), Some(60.0)).await;
        assert_eq!(s, 200, "{job}");
        assert_eq!(job["source"], "standby", "{job}");
    }
}

/// A job that changes its pod's directories themselves (mode 000, a default
/// ACL that every file made there inherits, an extended attribute) leaves
/// the next tenant given the pod nothing of it: the wipe resets them.
#[tokio::test]
async fn a_wipe_resets_what_a_job_did_to_the_pod_s_directories() {
    let mut config = config();
    config.pool_policy = "always-on:1".parse().unwrap();
    let app = spawn_app_with(config).await;
    let a = app.create_tenant("taint-a").await;
    let b = app.create_tenant("taint-b").await;
    let taint = r#"
import os, struct
def acl(*entries):
    return struct.pack('<I', 2) + b''.join(struct.pack('<HHI', t, 0, 0xffffffff) for t in entries)
report = []
for d in ['/work', '/hearth']:
    for name, value in [('system.posix_acl_default', acl(1, 4, 0x20)), ('user.left', b'x')]:
        try:
            os.setxattr(d, name, value)
            report.append(name)
        except OSError as e:
            report.append(f'{name}: {e}')
    os.chmod(d, 0)
print(report)
"#;
    let (s, first) = app
        .submit(&a.key, &python_job("taint", taint), Some(60.0))
        .await;
    assert_eq!((s, &first["state"]), (200, &json!("succeeded")), "{first}");
    let pod = first["pods"][0].as_str().unwrap().to_owned();

    let look = r#"
import os, stat
print([oct(stat.S_IMODE(os.stat(d).st_mode)) for d in ['/work', '/hearth']],
      [os.listxattr(d) for d in ['/work', '/hearth']], open('main.py').read()[:6])
"#;
    for caller in ["stranger-1", "stranger-2"] {
        let (s, other) = app
            .submit(&b.key, &python_job(caller, look), Some(60.0))
            .await;
        assert_eq!(s, 200, "{other}");
        assert_eq!(other["pods"][0], pod.as_str(), "{other}");
        assert_eq!(other["state"], "succeeded", "{other}");
        assert_eq!(
            other["stdout"], "['0o755', '0o755'] [[], []] \nimpor\n",
            "{other}"
        );
    }
}

/// A pod reset for another caller (`Decision::Reset`) is wiped before it
/// serves them: what its last caller left in its work directory is gone.
#[tokio::test]
async fn a_pod_reset_for_another_caller_is_wiped_first() {
    let mut config = config();
    config.pool_policy = "always-on:1".parse().unwrap();
    let app = spawn_app_with(config).await;
    let a = app.create_tenant("reset-a").await;
    let b = app.create_tenant("reset-b").await;
    let leave = "open('left-behind.txt', 'w').write('secret')";
    let look = "import os; print(os.path.exists('left-behind.txt'))";

    let (s, first) = app
        .submit(&a.key, &python_job("owner", leave), Some(60.0))
        .await;
    assert_eq!(s, 200, "{first}");
    let pod = first["pods"][0].as_str().unwrap().to_owned();
    // Its caller's next job finds the file: the pod keeps it between jobs.
    let (_, again) = app
        .submit(&a.key, &python_job("owner", look), Some(60.0))
        .await;
    assert_eq!(
        (again["source"].as_str(), again["stdout"].as_str()),
        (Some("warm"), Some("True\n")),
        "{again}"
    );

    // The pool's only pod goes to another tenant's caller, wiped.
    let (s, other) = app
        .submit(&b.key, &python_job("stranger", look), Some(60.0))
        .await;
    assert_eq!(s, 200, "{other}");
    assert_eq!(other["pods"][0], pod.as_str(), "{other}");
    assert_eq!(other["stdout"], "False\n", "{other}");
    // The pod's record, as the tenant it served sees it: reset for a
    // caller it may not name.
    let events = eventually("the reset", async || {
        let (s, v) = pod_events(&app, &a.key, &pod).await;
        let events = v["events"].as_array().cloned().unwrap_or_default();
        (s == 200 && events.iter().any(|e| e["kind"] == "reset")).then_some(events)
    })
    .await;
    let reset = events.iter().find(|e| e["kind"] == "reset").unwrap();
    assert_eq!(reset["reason"]["code"], "recycled", "{reset}");
    assert_eq!(
        (&reset["reason"]["from"], &reset["reason"]["to"]),
        (&json!("owner"), &Value::Null),
        "{reset}"
    );
}

#[tokio::test]
async fn a_job_is_served_from_standby_and_the_standby_refilled() {
    let mut config = config();
    config.standby_min = 1;
    config.standby_max = 1;
    let app = spawn_app_with(config).await;
    let a = app.create_tenant("standby-a").await;
    let b = app.create_tenant("standby-b").await;

    let p = eventually("a standby pod", async || {
        let p = pool(&app, &a.key, "cpu-small").await;
        (p["pods"]["standby"] == 1).then_some(p)
    })
    .await;
    assert_eq!(p["policy"], "firepool");
    assert_eq!(p["standby_target"], 1);
    assert_eq!(p["gpus"]["inventory"], 0);

    // A new caller's first job is handed the standby pod.
    let (s, first) = app.submit(&a.key, &quick("loop-1"), Some(60.0)).await;
    assert_eq!(s, 200, "{first}");
    assert_eq!(first["state"], "succeeded");
    assert_eq!(first["source"], "standby");
    let pod = first["pods"][0].as_str().unwrap().to_owned();

    // The standby is refilled, and the served pod stays warm for its caller.
    let p = eventually("the standby refilled", async || {
        let p = pool(&app, &a.key, "cpu-small").await;
        (p["pods"]["standby"] == 1 && p["pods"]["warm"] == 1).then_some(p)
    })
    .await;
    let callers = p["callers"].as_array().unwrap();
    assert_eq!(callers.len(), 1, "{p}");
    assert_eq!(callers[0]["caller"], "loop-1");
    assert_eq!(callers[0]["warm_pods"], 1);
    assert!(callers[0]["keep_alive_ms"].as_u64().unwrap() > 0);

    // Warm reuse only for the same caller: loop-1 gets its pod back, another
    // caller of the same tenant gets the refilled standby pod.
    let (_, again) = app.submit(&a.key, &quick("loop-1"), Some(60.0)).await;
    assert_eq!(
        (again["source"].as_str(), again["pods"][0].as_str()),
        (Some("warm"), Some(pod.as_str()))
    );
    let (_, other) = app.submit(&a.key, &quick("loop-2"), Some(60.0)).await;
    assert_eq!(other["source"], "standby", "{other}");
    assert_ne!(other["pods"][0], pod.as_str());

    // The pod's record says why it was promoted and assigned, each time.
    let events = eventually("the pod's events", async || {
        let (s, v) = pod_events(&app, &a.key, &pod).await;
        let events = v["events"].as_array().cloned().unwrap_or_default();
        let assigns = events.iter().filter(|e| e["kind"] == "assign").count();
        (s == 200 && assigns == 2).then_some(events)
    })
    .await;
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[..2], ["start", "ready"], "{kinds:?}");
    assert_eq!(events[0]["reason"]["code"], "standby_refill");
    let promote = events
        .iter()
        .find(|e| e["kind"] == "promote")
        .expect("promote");
    assert_eq!(promote["reason"]["code"], "standby_handover");
    assert_eq!(promote["reason"]["caller"], "loop-1");
    assert_eq!(promote["job_id"], first["id"]);
    let assigns: Vec<&Value> = events.iter().filter(|e| e["kind"] == "assign").collect();
    assert_eq!(assigns[0]["reason"]["source"], "standby");
    assert_eq!(assigns[1]["reason"]["code"], "warm_affinity");
    assert_eq!(assigns[1]["job_id"], again["id"]);
    assert!(
        assigns[1]["reason"]["message"]
            .as_str()
            .unwrap()
            .contains("loop-1")
    );

    // Another tenant sees neither the pod nor tenant A's callers.
    let (s, v) = pod_events(&app, &b.key, &pod).await;
    assert_eq!((s, v["code"].as_str()), (404, Some("not_found")));
    let (s, _) = pod_events(&app, &a.key, "pod-unknown").await;
    assert_eq!(s, 404);
    let pb = pool(&app, &b.key, "cpu-small").await;
    assert_eq!(pb["callers"], json!([]));
    assert_eq!(pb["pods"]["warm"], 2, "aggregate counts are shared: {pb}");
    // So are the pool's objective and where it stands: of its three jobs,
    // one started warm.
    let objective = &pb["objective"];
    assert_eq!(
        (&objective["percentile"], &objective["class"]),
        (&json!(0.9), &json!("warm")),
        "{pb}"
    );
    let warm = objective["warm_share"].as_f64().unwrap();
    assert!((0.3..0.34).contains(&warm), "{pb}");
    let predicted = objective["predicted"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&predicted), "{pb}");
    let (s, all) = app.get(&b.key, "/v1/pools").await;
    assert_eq!(s, 200);
    let names: Vec<&str> = all["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["profile"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu-net", "cpu-small"]);
    assert!(all.to_string().find("loop-1").is_none());
    let (s, _) = app.get(&a.key, "/v1/pools/no-such-profile").await;
    assert_eq!(s, 404);

    // Metrics count the jobs by source.
    let (s, text) = app.get_text("/metrics").await;
    assert_eq!(s, 200);
    let m = parse_metrics(&text);
    let get = |k: &str| {
        m.get(k)
            .copied()
            .unwrap_or_else(|| panic!("no {k} in\n{text}"))
    };
    assert_eq!(
        get(r#"hearth_jobs_started_total{profile="cpu-small",source="standby"}"#),
        2.0
    );
    assert_eq!(
        get(r#"hearth_jobs_started_total{profile="cpu-small",source="warm"}"#),
        1.0
    );
    assert_eq!(
        get(r#"hearth_job_start_seconds_count{profile="cpu-small",source="standby"}"#),
        2.0
    );
    assert_eq!(
        get(r#"hearth_job_start_seconds_bucket{profile="cpu-small",source="warm",le="+Inf"}"#),
        1.0
    );
    assert_eq!(
        get(r#"hearth_jobs_finished_total{profile="cpu-small",state="succeeded"}"#),
        3.0
    );
    assert_eq!(get(r#"hearth_queue_depth{profile="cpu-small"}"#), 0.0);
    assert!(get(r#"hearth_pods{profile="cpu-small",state="warm"}"#) >= 1.0);
    get(r#"hearth_gpu_seconds_held_total{profile="cpu-small",state="standby"}"#);
}

#[tokio::test]
async fn a_warm_pod_is_released_after_its_keep_alive() {
    let mut config = config();
    config.keep_alive_max_s = 1.0;
    let app = spawn_app_with(config).await;
    let t = app.create_tenant("quiet").await;
    let (_, first) = app.submit(&t.key, &quick("q"), Some(60.0)).await;
    assert_eq!(first["source"], "cold", "{first}");
    let pod = first["pods"][0].as_str().unwrap().to_owned();
    let p = pool(&app, &t.key, "cpu-small").await;
    assert_eq!(p["callers"][0]["keep_alive_ms"], 1000, "{p}");

    eventually("the warm pod released", async || {
        let p = pool(&app, &t.key, "cpu-small").await;
        (p["pods"]["warm"] == 0 && p["pods"]["draining"] == 0).then_some(())
    })
    .await;
    let (_, next) = app.submit(&t.key, &quick("q"), Some(60.0)).await;
    assert_eq!(next["source"], "cold", "{next}");
    assert_ne!(next["pods"][0], pod.as_str());

    let events = eventually("the release recorded", async || {
        let (_, v) = pod_events(&app, &t.key, &pod).await;
        let events = v["events"].as_array().cloned().unwrap_or_default();
        events.iter().any(|e| e["kind"] == "gone").then_some(events)
    })
    .await;
    let release = events
        .iter()
        .find(|e| e["kind"] == "release")
        .expect("release");
    assert_eq!(release["reason"]["code"], "keep_alive_expired");
    assert_eq!(release["reason"]["caller"], "q");
    assert_eq!(release["reason"]["keep_alive_ms"], 1000);
}

#[tokio::test]
async fn tenant_budgets_are_set_by_the_admin_and_bound_warm_gpus() {
    let dir = state_dir();
    let profiles = dir.join("profiles.json");
    std::fs::write(
        &profiles,
        json!([
            {"name": "cpu-small"},
            {"name": "gpu-one", "gpus": 1, "max_pods": 4}
        ])
        .to_string(),
    )
    .unwrap();
    let mut config = config();
    config.profiles = Some(profiles);
    config.gpus = Some(2);
    config.pool_history_step_s = 0.2;
    let database_url = config.database_url.clone();
    let app = spawn_app_with(config).await;
    let t = app.create_tenant("budgeted").await;
    let path = format!("/v1/admin/tenants/{}/budgets", t.tenant_id);

    let p = pool(&app, &t.key, "gpu-one").await;
    assert_eq!(p["gpus"]["inventory"], 2);
    assert_eq!(p["gpus"]["kind"], "accounting-only");
    assert_eq!(p["tenant"]["ceiling_gpus"], Value::Null);

    // A job on an accounting-only GPU, whose pod then stays warm holding it.
    let mut job = quick("g");
    job["profile"] = json!("gpu-one");
    job["command"] = json!(["sh", "-c", "echo ${CUDA_VISIBLE_DEVICES:-none}"]);
    let (_, done) = app.submit(&t.key, &job, Some(60.0)).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(
        done["stdout"], "none\n",
        "accounting-only GPUs have no devices"
    );
    let p = pool(&app, &t.key, "gpu-one").await;
    assert_eq!(p["gpus"]["held_gpus"]["warm"], 1.0, "{p}");
    assert_eq!(p["tenant"]["warm_gpus"], 1.0);

    // The leader's history of GPUs held shows the warm pod within a step,
    // after samples from before the job, oldest first.
    let history = eventually("a sample with the warm GPU", async || {
        let (status, h) = app.get(&t.key, "/v1/pools/gpu-one/history").await;
        assert_eq!(status, 200, "{h}");
        let samples = h["samples"].as_array()?;
        (samples.last()?["warm"] == 1.0).then_some(h)
    })
    .await;
    assert_eq!(history["step_s"], 0.2);
    assert_eq!(history["leader"]["is_leader"], true);
    let samples = history["samples"].as_array().unwrap();
    assert!(samples.len() >= 2, "{history}");
    let at = |s: &Value| {
        time::OffsetDateTime::parse(
            s["at"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap()
    };
    assert!(
        samples.windows(2).all(|w| at(&w[0]) < at(&w[1])),
        "{history}"
    );
    assert!(
        samples
            .iter()
            .all(|s| s["active"].is_f64() && s["standby"].is_f64() && s["draining"].is_f64())
    );
    let (status, err) = app.get(&t.key, "/v1/pools/nope/history").await;
    assert_eq!((status, err["code"].as_str()), (404, Some("not_found")));
    assert!(p["budget"]["budget_gpus"].as_f64().unwrap() >= 1.0, "{p}");

    // A gang bigger than the inventory can never be placed.
    let mut big = job.clone();
    big["kind"] = json!("rollout");
    big["topology"] = json!({"pods": 3});
    let (_, v) = app.submit(&t.key, &big, Some(60.0)).await;
    assert_eq!(
        (v["state"].as_str(), v["error"]["code"].as_str()),
        (Some("failed"), Some("unplaceable")),
        "{v}"
    );

    // Bad budgets change nothing.
    let body = json!({"floor_gpus": 0, "ceiling_gpus": 0});
    let (s, _) = app.put(&t.key, &format!("{path}/gpu-one"), &body).await;
    assert_eq!(s, 401);
    for (bad, code) in [
        (
            json!({"floor_gpus": 2, "ceiling_gpus": 1}),
            "validation_failed",
        ),
        (
            json!({"floor_gpus": 0, "ceiling_gpus": 0.3}),
            "validation_failed",
        ),
        (
            json!({"floor_gpus": -1, "ceiling_gpus": 1}),
            "validation_failed",
        ),
        (
            json!({"floor_gpus": 0, "ceiling_gpus": 536_870_911.875}),
            "validation_failed",
        ),
    ] {
        let (s, v) = app.put(ADMIN_TOKEN, &format!("{path}/gpu-one"), &bad).await;
        assert_eq!((s, v["code"].as_str()), (422, Some(code)), "{bad}: {v}");
    }
    let (s, v) = app.put(ADMIN_TOKEN, &format!("{path}/nope"), &body).await;
    assert_eq!((s, v["code"].as_str()), (422, Some("unknown_profile")));
    let ghost = format!("/v1/admin/tenants/{}/budgets", uuid::Uuid::new_v4());
    let (s, _) = app
        .put(ADMIN_TOKEN, &format!("{ghost}/gpu-one"), &body)
        .await;
    assert_eq!(s, 404);
    let (s, v) = app.get(ADMIN_TOKEN, &path).await;
    assert_eq!((s, v), (200, json!([])));

    // A ceiling of zero: the tenant's warm pod is released at once. A value
    // within rounding of a multiple of 1/8 GPU is stored as that multiple.
    let within_rounding = json!({"floor_gpus": -0.0, "ceiling_gpus": 1e-300});
    let (s, v) = app
        .put(ADMIN_TOKEN, &format!("{path}/gpu-one"), &within_rounding)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (v["profile"].as_str(), v["ceiling_gpus"].as_f64()),
        (Some("gpu-one"), Some(0.0))
    );
    assert_eq!(v["floor_gpus"].to_string(), "0.0", "{v}");
    let (s, v) = app.get(ADMIN_TOKEN, &path).await;
    assert_eq!(s, 200);
    assert_eq!(v.as_array().unwrap().len(), 1);
    let p = eventually("the warm GPU pod released", async || {
        let p = pool(&app, &t.key, "gpu-one").await;
        (p["pods"]["warm"] == 0 && p["pods"]["draining"] == 0).then_some(p)
    })
    .await;
    assert_eq!(p["tenant"]["ceiling_gpus"], 0.0);
    assert_eq!(p["gpus"]["held_gpus"]["warm"], 0.0);
    let pod = done["pods"][0].as_str().unwrap();
    let events = eventually("the release recorded", async || {
        let (_, v) = pod_events(&app, &t.key, pod).await;
        let events = v["events"].as_array().cloned().unwrap_or_default();
        events
            .iter()
            .any(|e| e["kind"] == "release")
            .then_some(events)
    })
    .await;
    let release = events.iter().find(|e| e["kind"] == "release").unwrap();
    assert_eq!(release["reason"]["code"], "over_tenant_budget");
    assert_eq!(release["reason"]["tenant"], t.tenant_id.as_str());

    // A budget set through another replica (straight into the store) reaches
    // the leading scheduler within its budget sync.
    let db = sqlx::PgPool::connect(&database_url).await.unwrap();
    let tenant: uuid::Uuid = t.tenant_id.parse().unwrap();
    hearth_store::budget::put(&db, tenant, "gpu-one", 0.0, 1.0)
        .await
        .unwrap();
    eventually("the stored budget applied", async || {
        let p = pool(&app, &t.key, "gpu-one").await;
        (p["tenant"]["ceiling_gpus"] == 1.0).then_some(())
    })
    .await;

    let (_, text) = app.get_text("/metrics").await;
    let m = parse_metrics(&text);
    assert!(m[r#"hearth_pool_budget_gpus{profile="gpu-one"}"#] >= 0.0);
    assert!(m[r#"hearth_gpu_seconds_held_total{profile="gpu-one",state="active"}"#] > 0.0);
    assert_eq!(
        m[r#"hearth_jobs_finished_total{profile="gpu-one",state="failed"}"#],
        1.0
    );
}

#[test]
fn a_generated_trace_ends_quietly_when_its_reader_has_enough() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    // Far more rows than a pipe holds: the writer is still writing when the
    // reader goes.
    let mut child = Command::new(bin_dir().join("hearth"))
        .args(["simulate", "gen", "--kind", "rl", "--jobs", "1000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hearth binary (cargo build --workspace --bins)");
    let mut header = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut header)
        .unwrap();
    assert_eq!(
        header.trim_end(),
        "caller,seq,think_s,duration_s,profile,gpus"
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `hearth simulate --compare` on a trace across two profiles: the table of
/// every policy, the clairvoyant floor, each profile's pool under always-on
/// and firepool beside its own floor, the frontier's targets, the chart.
#[test]
fn a_comparison_tells_each_profile_apart() {
    use std::process::Command;
    let dir = std::env::temp_dir().join(format!("hearth-compare-{}", std::process::id()));
    let (trace, svg) = (dir.join("rl-mixed.csv"), dir.join("rl-mixed.svg"));
    let hearth = bin_dir().join("hearth");
    let generated = Command::new(&hearth)
        .args([
            "simulate",
            "gen",
            "--kind",
            "rl-mixed",
            "--callers",
            "8",
            "--jobs",
            "800",
        ])
        .output()
        .expect("hearth binary (cargo build --workspace --bins)");
    assert!(
        generated.status.success(),
        "{}",
        String::from_utf8_lossy(&generated.stderr)
    );
    // Made once nothing before the comparison can fail, and removed before
    // anything is checked.
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&trace, &generated.stdout).unwrap();
    let out = Command::new(&hearth)
        .args(["simulate", "--compare", "--trace"])
        .arg(&trace)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let chart = std::fs::read_to_string(&svg);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(chart.is_ok_and(|c| c.contains("<svg")));
    assert!(
        text.contains("clairvoyant floor (every job warm)"),
        "{text}"
    );
    for profile in ["gpu-1", "gpu-quarter"] {
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with(profile)).collect();
        let policies: Vec<&str> = rows
            .iter()
            .map(|l| l[16..].trim_start().split("  ").next().unwrap_or_default())
            .collect();
        assert_eq!(
            policies,
            ["always-on", "firepool", "clairvoyant floor"],
            "{text}"
        );
    }
    let targets = text.lines().filter(|l| l.starts_with("  [")).count();
    assert_eq!(targets, 5, "{text}");
}
