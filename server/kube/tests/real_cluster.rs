//! Opt-in: the Kubernetes runtime against a real cluster. Runs only when
//! `KUBECONFIG` is set and `HEARTH_KUBE_E2E_IMAGE` names an image with
//! `hearth-agent` on its PATH; skipped (passing) otherwise. The machine
//! running it must reach pod IPs (run it in the cluster, or on a node).
//!
//! `KUBECONFIG=~/.kube/config HEARTH_KUBE_E2E_IMAGE=ghcr.io/hearth/base-cpu:0.1 \
//!  HEARTH_KUBE_E2E_NAMESPACE=hearth-e2e cargo test -p hearth-kube --test real_cluster`

use std::collections::BTreeMap;

use hearth_core::Profile;
use hearth_core::agent::{Frame, Run};
use hearth_kube::{InstallSecret, KubeConfig, KubeRuntime};
use hearth_runtime::{PodSpec, Runtime, client};

#[tokio::test]
async fn a_pod_on_a_real_cluster_starts_answers_and_stops() {
    let (Some(_), Ok(image)) = (
        std::env::var_os("KUBECONFIG"),
        std::env::var("HEARTH_KUBE_E2E_IMAGE"),
    ) else {
        eprintln!("skipped: set KUBECONFIG and HEARTH_KUBE_E2E_IMAGE to run against a cluster");
        return;
    };
    let namespace = std::env::var("HEARTH_KUBE_E2E_NAMESPACE").unwrap_or_else(|_| "default".into());
    let secret = format!("e2e-{}", std::process::id());
    let cfg = KubeConfig::new(
        &namespace,
        "hearth-e2e",
        InstallSecret::new(secret.into_bytes()),
    );
    let rt = KubeRuntime::connect(cfg)
        .await
        .expect("client from KUBECONFIG");
    let id = format!("hearth-e2e-{}", std::process::id());
    let pod = rt
        .start_pod(PodSpec {
            pod_id: id.clone(),
            profile: Profile {
                image,
                ..Profile::cpu("e2e")
            },
            gpu_devices: Vec::new(),
            labels: BTreeMap::new(),
        })
        .await
        .expect("pod ready");
    let run = Run {
        job_id: "e2e".into(),
        caller: None,
        files: BTreeMap::new(),
        command: vec!["sh".into(), "-c".into(), "echo hello".into()],
        deps: Default::default(),
        input: serde_json::Value::Null,
        env: BTreeMap::new(),
        timeout_ms: 60_000,
        topology: None,
        max_log_bytes: 1 << 16,
        detach_grace_ms: 0,
    };
    let last = client::run(&pod.address, pod.token.as_deref(), 0, run)
        .await
        .unwrap()
        .finish()
        .await
        .unwrap();
    rt.stop_pod(&id).await.unwrap();
    assert!(
        matches!(
            last,
            Frame::Exit {
                exit_code: Some(0),
                ..
            }
        ),
        "{last:?}"
    );
}
