//! Pod statuses as a kubelet reports them: the fake kubelet's, and the
//! mocked API server's answers (`tests/mock.rs` includes this file).

use serde_json::{Value, json};

/// The status of the pod's one container (`agent`), in `state`.
fn agent(image: &str, ready: bool, state: Value) -> Value {
    json!([{"name": "agent", "image": image, "imageID": "", "ready": ready,
            "restartCount": 0, "started": ready, "state": state}])
}

/// Pending, its container waiting for `reason` (an image pull, its
/// configuration).
pub fn waiting(image: &str, reason: &str, message: &str) -> Value {
    json!({"phase": "Pending", "containerStatuses": agent(image, false,
        json!({"waiting": {"reason": reason, "message": message}}))})
}

/// Pending, no node fits it.
pub fn unschedulable(message: &str) -> Value {
    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": message}]})
}

/// Running and Ready at `ip`.
pub fn ready(image: &str, ip: &str) -> Value {
    json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
           "conditions": [{"type": "PodScheduled", "status": "True"},
                          {"type": "Ready", "status": "True"}],
           "containerStatuses": agent(image, true, json!({"running": {}}))})
}

/// Failed: its container was OOM-killed.
pub fn oom_killed(image: &str) -> Value {
    json!({"phase": "Failed", "containerStatuses": agent(image, false,
        json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}}))})
}
