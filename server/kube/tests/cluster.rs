//! The Kubernetes runtime end to end against a fake API server and kubelet
//! on loopback (see `fake_api`): the real kube client and watchers, real
//! agents on 127.0.0.N answering real jobs over TCP with their tokens.
//!
//! Needs the agent binary: `cargo build -p hearth-agent` (or set
//! `HEARTH_AGENT_BIN`).

mod fake_api;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use fake_api::FakeCluster;
use hearth_core::Profile;
use hearth_core::agent::{Frame, Outcome, Run, Stream};
use hearth_kube::{InstallSecret, KubeConfig, KubeRuntime};
use hearth_runtime::{Claim, Pod, PodEvent, PodSpec, Runtime, client};

const SECRET: &[u8] = b"a-secret-of-the-install";

fn agent_bin() -> PathBuf {
    hearth_runtime::test_agent_bin()
}

struct Harness {
    cluster: FakeCluster,
    port: u16,
    root: PathBuf,
}

impl Harness {
    async fn new(name: &str) -> Harness {
        let root = std::env::temp_dir().join(format!("hearth-kube-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        // A port free on 127.0.0.1 is, in practice, free on 127.0.0.N too.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cluster = FakeCluster::start(&agent_bin(), &root, port).await;
        Harness {
            cluster,
            port,
            root,
        }
    }

    fn runtime(&self) -> KubeRuntime {
        let mut cfg = KubeConfig::new("hearth", "test", InstallSecret::new(SECRET));
        cfg.template.agent_port = self.port;
        cfg.start_timeout = Duration::from_secs(30);
        cfg.instance = Some("broker-0".to_owned());
        KubeRuntime::new(self.cluster.client(), cfg).unwrap()
    }

    /// The Event with `reason` regarding pod `name`, once written (they
    /// are written in the background).
    async fn event(&self, name: &str, reason: &str) -> serde_json::Value {
        for _ in 0..200 {
            let found = self
                .cluster
                .events()
                .into_iter()
                .find(|e| e["regarding"]["name"] == name && e["reason"] == reason);
            if let Some(e) = found {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no {reason} event for {name}: {:?}", self.cluster.events());
    }
}

/// The fields every Event of the runtime carries: a Warning regarding the
/// pod, reported by the broker.
fn assert_pod_warning(event: &serde_json::Value, name: &str, action: &str) {
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(event["action"], action, "{event}");
    assert_eq!(event["reportingController"], "hearth.dev/broker", "{event}");
    assert_eq!(event["reportingInstance"], "broker-0", "{event}");
    assert_eq!(event["metadata"]["namespace"], "hearth", "{event}");
    let regarding = &event["regarding"];
    assert_eq!(
        (
            &regarding["apiVersion"],
            &regarding["kind"],
            &regarding["name"]
        ),
        (&"v1".into(), &"Pod".into(), &name.into()),
        "{event}"
    );
    assert_eq!(regarding["namespace"], "hearth", "{event}");
    assert!(event["eventTime"].is_string(), "{event}");
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn spec(id: &str) -> PodSpec {
    PodSpec {
        pod_id: id.to_owned(),
        profile: Profile {
            disk_mib: 0,
            ..Profile::cpu("cpu-small")
        },
        gpu_devices: Vec::new(),
        labels: BTreeMap::new(),
    }
}

fn job(id: &str, caller: &str, command: &[&str]) -> Run {
    Run {
        job_id: id.to_owned(),
        caller: Some(caller.to_owned()),
        files: BTreeMap::new(),
        command: command.iter().map(|s| (*s).to_owned()).collect(),
        deps: Default::default(),
        input: serde_json::Value::Null,
        env: BTreeMap::new(),
        timeout_ms: 30_000,
        topology: None,
        max_log_bytes: 64 << 10,
        detach_grace_ms: 0,
    }
}

async fn run_all(pod: &Pod, run: Run) -> Vec<Frame> {
    let mut ex = client::run(&pod.address, pod.token.as_deref(), 2, run)
        .await
        .unwrap();
    rest(&mut ex).await
}

async fn next_event(events: &mut tokio::sync::broadcast::Receiver<PodEvent>) -> PodEvent {
    tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await
        .expect("event in time")
        .expect("event")
}

#[tokio::test]
async fn a_pod_starts_answers_a_job_and_stops() {
    let h = Harness::new("life").await;
    let rt = h.runtime();
    let pod = rt.start_pod(spec("pod-life")).await.expect("ready");
    assert!(pod.peer_host.starts_with("127.0.0."), "{pod:?}");
    assert_eq!(pod.address, format!("tcp:{}:{}", pod.peer_host, h.port));
    let frames = run_all(&pod, job("j1", "t/c1", &["sh", "-c", "echo hello"])).await;
    assert!(
        frames.iter().any(|f| matches!(f,
        Frame::Line { stream: Stream::Stdout, line } if line == "hello")),
        "{frames:?}"
    );
    assert!(matches!(
        frames.last(),
        Some(Frame::Exit {
            outcome: Outcome::Exited,
            exit_code: Some(0),
            ..
        })
    ));
    // Labels name the install, pool, profile and network, never a tenant
    // or caller; the token is only in the Secret.
    let object = h.cluster.pod("pod-life").unwrap();
    let labels = object["metadata"]["labels"].as_object().unwrap();
    assert_eq!(labels.len(), 8, "{labels:?}");
    assert!(
        !object["metadata"].to_string().contains("tenant"),
        "{labels:?}"
    );
    assert!(!object.to_string().contains(pod.token.as_deref().unwrap()));
    assert_eq!(h.cluster.secret_names(), ["pod-life-token"]);

    // The exchange's connection is kept for the pod's next job, and goes
    // with the pod.
    assert_eq!(client::kept(&pod.address), 1);
    rt.stop_pod("pod-life").await.unwrap();
    assert_eq!(client::kept(&pod.address), 0, "kept past its pod");
    assert!(h.cluster.pod_names().is_empty());
    assert!(h.cluster.secret_names().is_empty());
    assert!(
        client::ping(&pod.address, pod.token.as_deref(), 1)
            .await
            .is_err(),
        "agent stopped"
    );
    // Stopping again is fine.
    rt.stop_pod("pod-life").await.unwrap();
}

#[tokio::test]
async fn agents_refuse_other_tokens() {
    let h = Harness::new("tokens").await;
    let rt = h.runtime();
    let a = rt.start_pod(spec("pod-a")).await.unwrap();
    let b = rt.start_pod(spec("pod-b")).await.unwrap();
    for wrong in [None, b.token.as_deref(), Some("0000")] {
        match client::ping(&a.address, wrong, 1).await.unwrap() {
            Frame::Error { message, .. } => assert!(message.contains("token"), "{message}"),
            other => panic!("{wrong:?} let in: {other:?}"),
        }
        let refused = client::run(&a.address, wrong, 1, job("x", "t/c", &["true"]))
            .await
            .unwrap()
            .finish()
            .await
            .unwrap();
        assert!(matches!(refused, Frame::Error { .. }), "{refused:?}");
    }
    assert!(matches!(
        client::ping(&a.address, a.token.as_deref(), 1)
            .await
            .unwrap(),
        Frame::Pong { .. }
    ));
}

#[tokio::test]
async fn a_pod_deleted_mid_job_is_reported_and_the_job_ends() {
    let h = Harness::new("deleted").await;
    let rt = h.runtime();
    let mut events = rt.subscribe();
    let pod = rt.start_pod(spec("pod-del")).await.unwrap();
    // Two connections kept from before the job: the job takes one.
    let token = pod.token.as_deref();
    let (a, b) = tokio::join!(
        client::status(&pod.address, token, 1),
        client::status(&pod.address, token, 1)
    );
    a.unwrap();
    b.unwrap();
    assert_eq!(client::kept(&pod.address), 2);
    let mut ex = client::run(
        &pod.address,
        pod.token.as_deref(),
        1,
        job("j", "t/c", &["sh", "-c", "echo started; sleep 60"]),
    )
    .await
    .unwrap();
    loop {
        if matches!(ex.next().await.unwrap(), Frame::Line { line, .. } if line == "started") {
            break;
        }
    }
    h.cluster.delete("pod-del");
    assert_eq!(
        next_event(&mut events).await,
        PodEvent::Gone {
            pod_id: "pod-del".into(),
            reason: "deleted".into()
        }
    );
    // The agent died with its pod: the exchange ends without an exit.
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match ex.next().await {
                Err(_) => return true,
                Ok(f) if f.is_final() => return false,
                Ok(_) => {}
            }
        }
    })
    .await
    .unwrap();
    assert!(ended);
    assert_eq!(client::kept(&pod.address), 0, "kept past its pod");
    // Operators see it where they look: an Event on the pod.
    let event = h.event("pod-del", "PodLost").await;
    assert_pod_warning(&event, "pod-del", "Drop");
    assert_eq!(event["regarding"]["uid"], "uid-pod-del");
    assert_eq!(event["note"], "pod lost: deleted", "{event}");
}

#[tokio::test]
async fn an_oom_killed_pod_is_reported_with_its_reason() {
    let h = Harness::new("oom").await;
    let rt = h.runtime();
    let mut events = rt.subscribe();
    rt.start_pod(spec("pod-oom")).await.unwrap();
    h.cluster.oom_kill("pod-oom");
    match next_event(&mut events).await {
        PodEvent::Gone { pod_id, reason } => {
            assert_eq!(pod_id, "pod-oom");
            assert!(reason.starts_with("oom_killed"), "{reason}");
        }
    }
    // The failed pod is deleted, with its Secret.
    for _ in 0..100 {
        if h.cluster.pod_names().is_empty() && h.cluster.secret_names().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(h.cluster.pod_names().is_empty());
}

#[tokio::test]
async fn a_dropped_watch_relists_without_losing_a_deletion() {
    let h = Harness::new("relist").await;
    let rt = h.runtime();
    let mut events = rt.subscribe();
    rt.start_pod(spec("pod-keep")).await.unwrap();
    rt.start_pod(spec("pod-lost")).await.unwrap();
    // Deleted while no watch is open, and the history compacted: only the
    // re-list after 410 Gone shows it is gone.
    h.cluster.expire_watches(|c| c.delete("pod-lost"));
    assert_eq!(
        next_event(&mut events).await,
        PodEvent::Gone {
            pod_id: "pod-lost".into(),
            reason: "deleted".into()
        }
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(events.try_recv().is_err(), "the kept pod is not reported");
    assert_eq!(h.cluster.pod_names(), ["pod-keep"]);
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_fails_the_start_with_its_reason() {
    let h = Harness::new("pull").await;
    let rt = h.runtime();
    let mut s = spec("pod-pull");
    s.profile.image = "missing/image:1".into();
    let err = rt.start_pod(s).await.unwrap_err().to_string();
    assert!(err.contains("ErrImagePull"), "{err}");
    assert!(
        h.cluster.pod_names().is_empty(),
        "the failed pod is deleted"
    );
    let event = h.event("pod-pull", "StartFailed").await;
    assert_pod_warning(&event, "pod-pull", "Start");
    assert_eq!(event["regarding"]["uid"], "uid-pod-pull");
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("ErrImagePull: pull access denied"), "{event}");
    assert_eq!(h.cluster.events().len(), 1, "one event, for the failure");
}

/// Events are best effort: an API server that refuses them (no RBAC for
/// events.k8s.io) fails no start, and a failed start fails with the pod's
/// own reason.
#[tokio::test]
async fn refused_events_fail_no_start() {
    let h = Harness::new("no-events").await;
    h.cluster.refuse_events();
    let rt = h.runtime();
    let mut s = spec("pod-refused");
    s.profile.image = "missing/image:1".into();
    let err = rt.start_pod(s).await.unwrap_err().to_string();
    assert!(err.contains("ErrImagePull"), "{err}");
    let pod = rt.start_pod(spec("pod-fine")).await.expect("started");
    let frames = run_all(&pod, job("j", "t/c", &["true"])).await;
    assert!(
        matches!(
            frames.last(),
            Some(Frame::Exit {
                exit_code: Some(0),
                ..
            })
        ),
        "{frames:?}"
    );
    let mut events = rt.subscribe();
    h.cluster.delete("pod-fine");
    assert!(matches!(
        next_event(&mut events).await,
        PodEvent::Gone { .. }
    ));
    assert!(h.cluster.events().is_empty());
}

#[tokio::test]
async fn a_pod_deleted_while_starting_fails_the_start() {
    let h = Harness::new("gone-early").await;
    let rt = h.runtime();
    let mut s = spec("pod-early");
    s.profile.image = "pending/image:1".into();
    let start = tokio::spawn(async move {
        let r = rt.start_pod(s).await;
        (rt, r)
    });
    for _ in 0..100 {
        if !h.cluster.pod_names().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h.cluster.delete("pod-early");
    let (_rt, result) = tokio::time::timeout(Duration::from_secs(30), start)
        .await
        .expect("the start ends")
        .unwrap();
    let err = result.unwrap_err().to_string();
    assert!(err.contains("deleted while starting"), "{err}");
    assert!(h.cluster.secret_names().is_empty(), "its Secret goes too");
    let event = h.event("pod-early", "StartFailed").await;
    assert!(
        event["note"]
            .as_str()
            .is_some_and(|n| n.contains("deleted while starting")),
        "{event}"
    );
    assert!(
        !h.cluster.events().iter().any(|e| e["reason"] == "PodLost"),
        "a pod that never started is not lost"
    );
}

/// Frames of an exchange until its final one.
async fn rest(ex: &mut client::Exchange) -> Vec<Frame> {
    let mut frames = Vec::new();
    loop {
        let f = tokio::time::timeout(Duration::from_secs(30), ex.next())
            .await
            .expect("frame in time")
            .expect("frame");
        let last = f.is_final();
        frames.push(f);
        if last {
            return frames;
        }
    }
}

/// A restarted leader adopts the install's pods: idle ones, wiped, are
/// kept (the scheduler's pools take them as standby); a busy pod no claim
/// names is deleted; a claimed busy one is kept, and the new leader
/// re-attaches to its run while the old one can no longer.
#[tokio::test]
async fn a_restarted_leader_readopts_with_zero_new_creations() {
    let h = Harness::new("adopt").await;
    let first = h.runtime();
    let warm = first.start_pod(spec("pod-warm")).await.unwrap();
    let idle = first.start_pod(spec("pod-idle")).await.unwrap();
    let busy = first.start_pod(spec("pod-busy")).await.unwrap();
    let claimed = first.start_pod(spec("pod-claimed")).await.unwrap();
    let frames = run_all(
        &warm,
        job(
            "j-warm",
            "t/c1",
            &["sh", "-c", "echo state > /dev/null; touch left-behind"],
        ),
    )
    .await;
    assert!(matches!(
        frames.last(),
        Some(Frame::Exit {
            exit_code: Some(0),
            ..
        })
    ));
    // Two jobs still running when the leader goes.
    let mut ex_busy = client::run(
        &busy.address,
        busy.token.as_deref(),
        2,
        job("j-busy", "t/c2", &["sh", "-c", "echo started; sleep 60"]),
    )
    .await
    .unwrap();
    let mut ex_claimed = client::run(
        &claimed.address,
        claimed.token.as_deref(),
        2,
        job("j-claimed", "t/c3", &["sh", "-c", "echo started; sleep 60"]),
    )
    .await
    .unwrap();
    for ex in [&mut ex_busy, &mut ex_claimed] {
        loop {
            if matches!(ex.next().await.unwrap(), Frame::Line { line, .. } if line == "started") {
                break;
            }
        }
    }
    drop(first);
    assert_eq!(h.cluster.creations(), 4);
    let _ = idle;

    let second = h.runtime();
    second.set_epoch(3);
    let adoption = second
        .adopt(
            vec![spec("x").profile],
            vec![Claim {
                job_id: "j-claimed".into(),
                pod_id: "pod-claimed".into(),
            }],
        )
        .await
        .unwrap();
    let mut standby: Vec<&str> = adoption
        .standby
        .iter()
        .map(|a| a.pod.pod_id.as_str())
        .collect();
    standby.sort();
    assert_eq!(standby, ["pod-idle", "pod-warm"]);
    let adopted_warm = adoption
        .standby
        .iter()
        .find(|a| a.pod.pod_id == "pod-warm")
        .unwrap();
    assert_eq!(
        adopted_warm.holding.caller.as_deref(),
        Some("t/c1"),
        "the status op names the bound caller"
    );
    assert_eq!(adoption.busy.len(), 1);
    assert_eq!(adoption.busy[0].pod.pod_id, "pod-claimed");
    assert_eq!(
        adoption.busy[0].holding.job_id.as_deref(),
        Some("j-claimed")
    );
    assert_eq!(adoption.removed, 1, "the unclaimed busy pod is deleted");
    let mut left = h.cluster.pod_names();
    left.sort();
    assert_eq!(left, ["pod-claimed", "pod-idle", "pod-warm"]);

    // An adopted pod serves as it is, wiped: nothing the last caller left.
    let p = &adopted_warm.pod;
    let mut next = job("j-next", "t/c9", &["sh", "-c", "ls"]);
    next.job_id = "j-next".into();
    let mut ex = client::run(&p.address, p.token.as_deref(), 3, next)
        .await
        .unwrap();
    let frames = rest(&mut ex).await;
    assert!(
        !frames
            .iter()
            .any(|f| matches!(f, Frame::Line { line, .. } if line == "left-behind")),
        "{frames:?}"
    );
    assert_eq!(h.cluster.creations(), 4, "no pod created");

    // The old leader's epoch can neither attach nor run.
    let c = &adoption.busy[0].pod;
    let mut stale = client::attach(&c.address, c.token.as_deref(), 2, "j-claimed")
        .await
        .unwrap();
    assert!(
        matches!(stale.next().await.unwrap(), Frame::Error { code, .. } if code.as_str() == "stale_epoch")
    );
    let mut stale_run = client::run(
        &c.address,
        c.token.as_deref(),
        2,
        job("j-x", "t/x", &["true"]),
    )
    .await
    .unwrap();
    assert!(matches!(
        stale_run.next().await.unwrap(),
        Frame::Error { .. }
    ));
    // The new leader takes the run over: its stream from the start.
    let mut attached = client::attach(&c.address, c.token.as_deref(), 3, "j-claimed")
        .await
        .unwrap();
    let mut lines = Vec::new();
    while lines.is_empty() {
        if let Frame::Line { line, .. } = attached.next().await.unwrap() {
            lines.push(line);
        }
    }
    assert_eq!(lines, ["started"]);
    // The old leader's connection no longer follows the run, and a line
    // from it cancels nothing.
    let _ = ex_claimed.cancel().await;
    assert!(ex_claimed.finish().await.is_err(), "the old stream is cut");
    attached.cancel().await.unwrap();
    let end = attached.finish().await.unwrap();
    assert!(
        matches!(
            end,
            Frame::Exit {
                outcome: Outcome::Cancelled,
                ..
            }
        ),
        "{end:?}"
    );
    // Stopping an adopted pod deletes it.
    second.stop_pod("pod-warm").await.unwrap();
    assert_eq!(h.cluster.pod_names().len(), 2);
}

/// A creation the API server failed (500: its etcd timed out) says nothing
/// of the pod: the start fails as transient, leaves nothing behind, and
/// the next one goes through.
#[tokio::test]
async fn a_creation_the_api_server_failed_is_a_transient_start_failure() {
    let h = Harness::new("transient").await;
    let rt = h.runtime();
    h.cluster.refuse_creations(1);
    let err = rt.start_pod(spec("pod-t1")).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("etcdserver"), "{err}");
    assert!(h.cluster.pod_names().is_empty());
    assert!(h.cluster.secret_names().is_empty(), "its token goes too");
    rt.start_pod(spec("pod-t2")).await.unwrap();
    assert_eq!(h.cluster.pod_names(), ["pod-t2"]);
}

/// A leader whose lease ran out may still be running: it neither deletes
/// nor adopts the pods a newer leader adopted, while the newer one does
/// both; a pod carries the epoch of the leader that holds it.
#[tokio::test]
async fn a_stale_leader_deletes_no_pod_a_newer_one_adopted() {
    let h = Harness::new("stale").await;
    let epoch_of = |name: &str| {
        h.cluster.pod(name).unwrap()["metadata"]["annotations"]["hearth.dev/leader-epoch"]
            .as_str()
            .map(str::to_owned)
    };
    let old = h.runtime();
    old.set_epoch(1);
    old.start_pod(spec("pod-a")).await.unwrap();
    old.start_pod(spec("pod-b")).await.unwrap();
    assert_eq!(epoch_of("pod-a").as_deref(), Some("1"));

    let new = h.runtime();
    new.set_epoch(2);
    let adoption = new
        .adopt(vec![spec("x").profile], Vec::new())
        .await
        .unwrap();
    assert_eq!(adoption.standby.len(), 2, "{adoption:?}");
    assert_eq!(epoch_of("pod-a").as_deref(), Some("2"));

    // The old leader's keep-alive runs out: its release deletes nothing.
    old.stop_pod("pod-a").await.unwrap();
    let mut left = h.cluster.pod_names();
    left.sort();
    assert_eq!(left, ["pod-a", "pod-b"]);
    assert_eq!(
        h.cluster.secret_names().len(),
        2,
        "the token goes with its pod only"
    );
    // Nor does it adopt them (or remove them as unclaimed) on a restart.
    let stale = h.runtime();
    stale.set_epoch(1);
    let none = stale
        .adopt(vec![spec("x").profile], Vec::new())
        .await
        .unwrap();
    assert_eq!(
        (none.standby.len(), none.busy.len(), none.removed),
        (0, 0, 0)
    );
    assert_eq!(h.cluster.pod_names().len(), 2);
    // The pods still serve the new leader, which releases them.
    let a = adoption
        .standby
        .iter()
        .find(|p| p.pod.pod_id == "pod-a")
        .unwrap();
    client::ping(&a.pod.address, a.pod.token.as_deref(), 2)
        .await
        .unwrap();
    new.stop_pod("pod-a").await.unwrap();
    assert_eq!(h.cluster.pod_names(), ["pod-b"]);
}

/// Whether the pod's agent reports no run (none running, no end
/// undelivered) within 5 s.
async fn free_within_5s(address: &str, token: Option<&str>) -> bool {
    for _ in 0..100 {
        if !client::status(address, token, 3).await.unwrap().busy {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A run goes on when its leader's connection drops, for the grace period
/// it asked for: a leader that attaches within it gets every frame once,
/// the end included (even an end reached while no leader followed); a run
/// no leader attaches to is cancelled when it passes.
#[tokio::test]
async fn a_run_outlives_its_leaders_connection_for_its_grace_period() {
    let h = Harness::new("grace").await;
    let rt = h.runtime();
    let pod = rt.start_pod(spec("pod-grace")).await.unwrap();
    let (address, token) = (pod.address.as_str(), pod.token.as_deref());
    let mut run = job(
        "j-grace",
        "t/c1",
        &[
            "sh",
            "-c",
            "echo one; sleep 1; echo two; echo '{\"n\": 2}' > $HEARTH_OUTPUT",
        ],
    );
    run.detach_grace_ms = 10_000;
    let mut ex = client::run(address, token, 2, run).await.unwrap();
    while !matches!(ex.next().await.unwrap(), Frame::Line { .. }) {}
    drop(ex);
    // The job ends while no leader follows it; its end waits for one.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = client::status(address, token, 3).await.unwrap();
    assert!(status.busy, "an undelivered end holds the pod: {status:?}");
    assert_eq!(status.job_id.as_deref(), Some("j-grace"));
    let mut attached = client::attach(address, token, 3, "j-grace").await.unwrap();
    let frames = rest(&mut attached).await;
    let lines: Vec<&str> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::Line { line, .. } => Some(line.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(lines, ["one", "two"], "every line, once");
    assert!(
        matches!(frames.last(), Some(Frame::Exit { exit_code: Some(0), output: Some(o), .. }) if o["n"] == 2),
        "{frames:?}"
    );
    // The agent forgets the run just after it wrote the end: the pod is
    // free within moments of the end's arrival.
    assert!(
        free_within_5s(address, token).await,
        "a delivered end frees the pod"
    );
    // Delivered: nothing left to attach to.
    let mut again = client::attach(address, token, 3, "j-grace").await.unwrap();
    assert!(
        matches!(again.next().await.unwrap(), Frame::Error { code, .. } if code.as_str() == "pod_lost")
    );

    // No leader comes back: cancelled once the grace period passed.
    let mut run = job("j-left", "t/c1", &["sh", "-c", "echo in; sleep 60"]);
    run.detach_grace_ms = 300;
    let mut ex = client::run(address, token, 3, run).await.unwrap();
    while !matches!(ex.next().await.unwrap(), Frame::Line { .. }) {}
    drop(ex);
    assert!(free_within_5s(address, token).await, "the run was given up");
}
