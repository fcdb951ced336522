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
        KubeRuntime::new(self.cluster.client(), cfg).unwrap()
    }
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
    }
}

async fn run_all(pod: &Pod, run: Run) -> Vec<Frame> {
    let mut ex = client::run(&pod.address, pod.token.as_deref(), 2, run)
        .await
        .unwrap();
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

    rt.stop_pod("pod-life").await.unwrap();
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
}

/// A restarted leader adopts the install's pods: idle ones (wiped) serve
/// the next starts of their profile with no pod created; a busy pod no
/// claim names is deleted; a claimed busy one is kept.
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
    // Two jobs still running when the leader goes (a new leader's agents
    // would cancel them as their connections close; these hold theirs).
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
    second.set_epoch(2);
    let adoption = second
        .adopt(vec![Claim {
            job_id: "j-claimed".into(),
            pod_id: "pod-claimed".into(),
        }])
        .await
        .unwrap();
    let mut standby: Vec<&str> = adoption
        .standby
        .iter()
        .map(|a| a.pod.pod_id.as_str())
        .collect();
    standby.sort();
    assert_eq!(standby, ["pod-idle", "pod-warm"]);
    let warm_holding = &adoption
        .standby
        .iter()
        .find(|a| a.pod.pod_id == "pod-warm")
        .unwrap()
        .holding;
    assert_eq!(
        warm_holding.caller.as_deref(),
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

    // The next two starts of the profile are served by the adopted pods.
    let p1 = second.start_pod(spec("pod-new-1")).await.unwrap();
    let p2 = second.start_pod(spec("pod-new-2")).await.unwrap();
    assert_eq!(h.cluster.creations(), 4, "no pod created");
    assert_eq!(
        (p1.pod_id.as_str(), p2.pod_id.as_str()),
        ("pod-new-1", "pod-new-2")
    );
    for p in [&p1, &p2] {
        // Wiped: nothing the last caller left.
        let frames = run_all(p, job("j-next", "t/c9", &["sh", "-c", "ls"])).await;
        assert!(
            !frames
                .iter()
                .any(|f| matches!(f, Frame::Line { line, .. } if line == "left-behind")),
            "{frames:?}"
        );
        assert!(matches!(
            frames.last(),
            Some(Frame::Exit {
                exit_code: Some(0),
                ..
            })
        ));
    }
    // The old leader's epoch is refused now.
    let stale = client::ping(&p1.address, p1.token.as_deref(), 1)
        .await
        .unwrap();
    assert!(matches!(stale, Frame::Error { .. }), "{stale:?}");
    // A third start creates a pod.
    second.start_pod(spec("pod-new-3")).await.unwrap();
    assert_eq!(h.cluster.creations(), 5);
    // Stopping a pod served from an adopted one deletes the adopted pod.
    second.stop_pod("pod-new-1").await.unwrap();
    assert_eq!(h.cluster.pod_names().len(), 3);
}

/// Adopted idle pods no start takes within the spare TTL are deleted.
#[tokio::test]
async fn adopted_pods_no_start_takes_are_deleted_after_their_ttl() {
    let h = Harness::new("ttl").await;
    let first = h.runtime();
    first.start_pod(spec("pod-s1")).await.unwrap();
    first.start_pod(spec("pod-s2")).await.unwrap();
    drop(first);
    let mut cfg = KubeConfig::new("hearth", "test", InstallSecret::new(SECRET));
    cfg.template.agent_port = h.port;
    cfg.spare_ttl = Duration::from_millis(200);
    let second = KubeRuntime::new(h.cluster.client(), cfg).unwrap();
    let adoption = second.adopt(Vec::new()).await.unwrap();
    assert_eq!(adoption.standby.len(), 2);
    second.start_pod(spec("pod-n1")).await.unwrap();
    for _ in 0..100 {
        if h.cluster.pod_names().len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        h.cluster.pod_names().len(),
        1,
        "the spare no start took is gone"
    );
    assert_eq!(h.cluster.creations(), 2);
}
