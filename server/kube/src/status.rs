//! Reading a Pod's status: is it ready, can it still become ready, and if
//! it is gone, why. Pure: the runtime feeds it what the watch delivers.

use k8s_openapi::api::core::v1::Pod;

/// Where a starting pod stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Ready, with its IP.
    Ready { ip: String },
    /// Not yet; `unschedulable` carries the scheduler's message while no
    /// node fits it.
    Pending { unschedulable: Option<String> },
    /// It will never be ready: why.
    Failed(String),
}

/// Container waiting reasons that do not resolve by themselves.
const FATAL_WAITING: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
];

/// Where a starting pod stands.
pub fn progress(pod: &Pod) -> Progress {
    if let Some(reason) = gone_reason(pod) {
        return Progress::Failed(reason);
    }
    let Some(status) = &pod.status else {
        return Progress::Pending {
            unschedulable: None,
        };
    };
    for cs in status.container_statuses.iter().flatten() {
        if let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref())
            && let Some(reason) = w.reason.as_deref()
            && FATAL_WAITING.contains(&reason)
        {
            let message = w.message.as_deref().unwrap_or("");
            return Progress::Failed(
                format!("{reason}: {message}")
                    .trim_end_matches([':', ' '])
                    .to_owned(),
            );
        }
    }
    let conditions = status.conditions.iter().flatten();
    let mut unschedulable = None;
    let mut ready = false;
    for c in conditions {
        match c.type_.as_str() {
            "PodScheduled"
                if c.status == "False" && c.reason.as_deref() == Some("Unschedulable") =>
            {
                unschedulable = Some(
                    c.message
                        .clone()
                        .unwrap_or_else(|| "unschedulable".to_owned()),
                );
            }
            "Ready" if c.status == "True" => ready = true,
            _ => {}
        }
    }
    match status.pod_ip.as_deref() {
        Some(ip) if ready && !ip.is_empty() => Progress::Ready { ip: ip.to_owned() },
        _ => Progress::Pending { unschedulable },
    }
}

/// Why a pod that existed is gone or going, if it is: `oom_killed`,
/// `evicted`, `node_lost`, `deleted`, or `failed`, with what Kubernetes
/// said. `None` while it is alive.
pub fn gone_reason(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref();
    let detail = |code: &str, text: Option<&str>| match text.filter(|t| !t.is_empty()) {
        Some(t) => format!("{code}: {t}"),
        None => code.to_owned(),
    };
    let oom = status
        .into_iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .flat_map(|cs| {
            let now = cs.state.as_ref().and_then(|s| s.terminated.as_ref());
            let before = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref());
            now.into_iter().chain(before)
        })
        .any(|t| t.reason.as_deref() == Some("OOMKilled"));
    if oom {
        return Some("oom_killed: the agent's container ran out of memory".to_owned());
    }
    let reason = status.and_then(|s| s.reason.as_deref());
    let message = status.and_then(|s| s.message.as_deref());
    match reason {
        Some("Evicted") => return Some(detail("evicted", message)),
        Some("NodeLost" | "UnexpectedAdmissionError" | "NodeShutdown" | "Terminated") => {
            return Some(detail("node_lost", message.or(reason)));
        }
        _ => {}
    }
    let disruption = status
        .into_iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True");
    if let Some(c) = disruption {
        let code = match c.reason.as_deref() {
            Some("DeletionByTaintManager" | "DeletionByPodGC") => "node_lost",
            Some("EvictionByEvictionAPI" | "PreemptionByScheduler" | "TerminationByKubelet") => {
                "evicted"
            }
            _ => "deleted",
        };
        return Some(detail(code, c.message.as_deref()));
    }
    match status.and_then(|s| s.phase.as_deref()) {
        Some("Failed") => return Some(detail("failed", message.or(reason))),
        Some("Succeeded") => return Some("failed: the agent exited".to_owned()),
        _ => {}
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Some("deleted".to_owned());
    }
    None
}

/// Why a pod the watch reported deleted is gone: what its last status
/// says, else plain deletion.
pub fn deleted_reason(pod: &Pod) -> String {
    gone_reason(pod).unwrap_or_else(|| "deleted".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn ready_needs_the_condition_and_an_ip() {
        let ready = pod(serde_json::json!({
            "phase": "Running", "podIP": "10.0.0.7",
            "conditions": [{"type": "Ready", "status": "True"}],
        }));
        assert_eq!(
            progress(&ready),
            Progress::Ready {
                ip: "10.0.0.7".into()
            }
        );
        let no_ip = pod(serde_json::json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }));
        assert!(matches!(progress(&no_ip), Progress::Pending { .. }));
    }

    #[test]
    fn hopeless_pods_fail_with_their_reason() {
        let pull = pod(serde_json::json!({
            "phase": "Pending",
            "containerStatuses": [{"name": "agent", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff", "message": "back-off pulling x"}}}],
        }));
        assert_eq!(
            progress(&pull),
            Progress::Failed("ImagePullBackOff: back-off pulling x".into())
        );
        let config = pod(serde_json::json!({
            "phase": "Pending",
            "containerStatuses": [{"name": "agent", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "CreateContainerConfigError"}}}],
        }));
        assert_eq!(
            progress(&config),
            Progress::Failed("CreateContainerConfigError".into())
        );
        let unsched = pod(serde_json::json!({
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}],
        }));
        assert_eq!(
            progress(&unsched),
            Progress::Pending {
                unschedulable: Some(
                    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.".into()
                )
            }
        );
    }

    #[test]
    fn gone_pods_say_why() {
        let oom = pod(serde_json::json!({
            "phase": "Failed",
            "containerStatuses": [{"name": "agent", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}],
        }));
        assert!(gone_reason(&oom).unwrap().starts_with("oom_killed"));
        let evicted = pod(serde_json::json!({
            "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory.",
        }));
        assert_eq!(
            gone_reason(&evicted).unwrap(),
            "evicted: The node was low on resource: memory."
        );
        let lost = pod(serde_json::json!({
            "phase": "Running",
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint"}],
        }));
        assert!(gone_reason(&lost).unwrap().starts_with("node_lost"));
        let failed = pod(serde_json::json!({"phase": "Failed", "message": "agent crashed"}));
        assert_eq!(gone_reason(&failed).unwrap(), "failed: agent crashed");
        let running = pod(serde_json::json!({"phase": "Running"}));
        assert_eq!(gone_reason(&running), None);
        assert_eq!(deleted_reason(&running), "deleted");
    }
}
