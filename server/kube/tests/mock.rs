//! The exact requests the Kubernetes runtime makes, against kube-rs's mocked
//! service (`tower-test`, the pattern of kube-rs/controller-rs's
//! `ApiServerVerifier`): create 201, 409 AlreadyExists, 404, 422 Status, a
//! watch answered 410 Gone and the re-list that follows, and a pod's agent
//! answering over TCP with its token.

#[path = "fake_api/pod_status.rs"]
#[allow(
    dead_code,
    reason = "the fake kubelet's statuses, not all of them mocked here"
)]
mod pod_status;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_core::Profile;
use hearth_kube::{InstallSecret, KubeConfig, KubeRuntime};
use hearth_runtime::{PodEvent, PodSpec, Runtime};
use http::{Request, Response};
use kube::client::Body;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

const NS: &str = "hearth";
const SECRET: &[u8] = b"install-secret";

/// One request the runtime made.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: String,
    body: Value,
}

impl Seen {
    fn is_watch(&self) -> bool {
        self.query.contains("watch=true")
    }
    fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// An answer: a status and a body; `None` parks the request (a watch with
/// nothing more to say).
type Answer = Option<(u16, String)>;

/// Serves the mocked API server with `answer`, recording every request.
fn serve(
    handle: Handle,
    answer: impl FnMut(&Seen) -> Answer + Send + 'static,
) -> Arc<Mutex<Vec<Seen>>> {
    serve_gated(handle, answer, |_| false, Arc::new(Notify::new()))
}

/// As [`serve`], but the answers to requests `gated` picks wait for `gate`.
fn serve_gated(
    mut handle: Handle,
    mut answer: impl FnMut(&Seen) -> Answer + Send + 'static,
    gated: impl Fn(&Seen) -> bool + Send + 'static,
    gate: Arc<Notify>,
) -> Arc<Mutex<Vec<Seen>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut parked = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap();
            let s = Seen {
                method: parts.method.to_string(),
                path: parts.uri.path().to_owned(),
                query: urlencoding_decode(parts.uri.query().unwrap_or("")),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            log.lock().unwrap().push(s.clone());
            match answer(&s) {
                Some((status, body)) => {
                    let response = Response::builder()
                        .status(status)
                        .body(Body::from(body.into_bytes()))
                        .unwrap();
                    if gated(&s) {
                        let gate = Arc::clone(&gate);
                        tokio::spawn(async move {
                            gate.notified().await;
                            send.send_response(response);
                        });
                    } else {
                        send.send_response(response);
                    }
                }
                None => parked.push(send),
            }
        }
    });
    seen
}

fn urlencoding_decode(q: &str) -> String {
    q.replace("%2F", "/")
        .replace("%3D", "=")
        .replace("%2C", ",")
}

fn pod(name: &str, rv: u32, status: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": rv.to_string(),
            "labels": {"hearth.dev/install": "prod", "hearth.dev/pool": "cpu-small",
                       "hearth.dev/profile": "cpu-small"},
        },
        "status": status,
    })
}

fn ready(ip: &str) -> Value {
    pod_status::ready("x", ip)
}

fn pending() -> Value {
    json!({"phase": "Pending"})
}

fn list(rv: u32, items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "PodList",
           "metadata": {"resourceVersion": rv.to_string()}, "items": items})
    .to_string()
}

fn watch_events(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(t, o)| json!({"type": t, "object": o}).to_string() + "\n")
        .collect()
}

fn status(code: u16, reason: &str, message: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
           "code": code, "reason": reason, "message": message})
    .to_string()
}

/// A stand-in agent on loopback: answers `ping` with `pong` when the
/// request carries `token`, and refuses otherwise.
async fn fake_agent(token: String) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let token = token.clone();
            tokio::spawn(async move {
                let (r, mut w) = conn.into_split();
                let mut line = String::new();
                BufReader::new(r).read_line(&mut line).await.unwrap();
                let req: Value = serde_json::from_str(&line).unwrap();
                let answer = if req["token"] == token.as_str() {
                    json!({"type": "pong", "protocol": 2, "sandbox": "none"})
                } else {
                    json!({"type": "error", "code": "agent_protocol", "message": "unauthorized token"})
                };
                w.write_all(format!("{answer}\n").as_bytes()).await.unwrap();
            });
        }
    });
    port
}

fn runtime(handle_port: u16) -> (KubeRuntime, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, NS);
    let mut cfg = KubeConfig::new(NS, "prod", InstallSecret::new(SECRET));
    cfg.template.agent_port = handle_port;
    cfg.start_timeout = Duration::from_secs(20);
    cfg.unschedulable_timeout = Duration::from_millis(300);
    (KubeRuntime::new(client, cfg).unwrap(), handle)
}

fn spec(id: &str) -> PodSpec {
    PodSpec {
        pod_id: id.to_owned(),
        profile: Profile::cpu("cpu-small"),
        gpu_devices: Vec::new(),
        labels: [("tenant".to_owned(), "t1".to_owned())].into(),
    }
}

/// The install-wide watch: an empty list, then a watch parked open.
fn install_watch(s: &Seen) -> Option<Answer> {
    if !s.query.contains("labelSelector=hearth.dev/install=prod") {
        return None;
    }
    Some(if s.is_watch() {
        None
    } else {
        Some((200, list(1, vec![])))
    })
}

fn non_watch(seen: &Arc<Mutex<Vec<Seen>>>) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|s| !s.query.contains("labelSelector"))
        .map(|s| {
            let kind = if s.is_watch() { " (watch)" } else { "" };
            format!("{}{kind}", s.line())
        })
        .collect()
}

#[tokio::test]
async fn start_creates_a_secret_and_a_pod_then_follows_it_to_ready() {
    let token = hearth_core::agent::pod_token(SECRET, "pod-1");
    let port = fake_agent(token.clone()).await;
    let (rt, handle) = runtime(port);
    let seen = serve(handle, move |s| {
        if let Some(a) = install_watch(s) {
            return a;
        }
        match (s.method.as_str(), s.path.as_str()) {
            ("POST", "/api/v1/namespaces/hearth/secrets") => Some((201, s.body.to_string())),
            ("POST", "/api/v1/namespaces/hearth/pods") => {
                let mut created = s.body.clone();
                created["metadata"]["uid"] = json!("uid-pod-1");
                created["metadata"]["resourceVersion"] = json!("5");
                Some((201, created.to_string()))
            }
            ("PATCH", "/api/v1/namespaces/hearth/secrets/pod-1-token") => Some((200, "{}".into())),
            ("GET", "/api/v1/namespaces/hearth/pods") if !s.is_watch() => {
                Some((200, list(5, vec![pod("pod-1", 5, pending())])))
            }
            ("GET", "/api/v1/namespaces/hearth/pods") => Some((
                200,
                watch_events(&[("MODIFIED", pod("pod-1", 6, ready("127.0.0.1")))]),
            )),
            _ => Some((500, status(500, "InternalError", "unexpected"))),
        }
    });
    let started = rt.start_pod(spec("pod-1")).await.expect("started");
    assert_eq!(started.address, format!("tcp:127.0.0.1:{port}"));
    assert_eq!(started.peer_host, "127.0.0.1");
    assert_eq!(started.token.as_deref(), Some(token.as_str()));
    assert_eq!(
        non_watch(&seen),
        [
            "POST /api/v1/namespaces/hearth/secrets",
            "POST /api/v1/namespaces/hearth/pods",
            "PATCH /api/v1/namespaces/hearth/secrets/pod-1-token",
            "GET /api/v1/namespaces/hearth/pods",
            "GET /api/v1/namespaces/hearth/pods (watch)",
        ]
    );
    let all = seen.lock().unwrap().clone();
    let follow = &all
        .iter()
        .find(|s| s.is_watch() && !s.query.contains("labelSelector"))
        .unwrap();
    assert!(
        follow.query.contains("fieldSelector=metadata.name=pod-1"),
        "{}",
        follow.query
    );
    assert!(
        follow.query.contains("resourceVersion=5"),
        "{}",
        follow.query
    );
    // The token travels in the Secret, never in the pod.
    let secret = &all[all
        .iter()
        .position(|s| s.path.ends_with("/secrets"))
        .unwrap()]
    .body;
    let encoded = secret["data"]["token"].as_str().unwrap();
    assert_eq!(b64_decode(encoded), token.as_bytes());
    let pod_body = &all[all
        .iter()
        .position(|s| s.path.ends_with("/pods") && s.method == "POST")
        .unwrap()]
    .body;
    let text = pod_body.to_string();
    assert!(!text.contains(&token) && !text.contains("t1"), "{text}");
    assert_eq!(
        pod_body["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"],
        "pod-1-token"
    );
    let owner = &all.iter().find(|s| s.method == "PATCH").unwrap().body;
    assert_eq!(owner["metadata"]["ownerReferences"][0]["uid"], "uid-pod-1");
}

fn b64_decode(s: &str) -> Vec<u8> {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|&c| c != b'=') {
        acc = (acc << 6) | A.iter().position(|&a| a == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[tokio::test]
async fn a_pod_that_exists_or_is_invalid_fails_with_the_api_servers_reason() {
    for (code, reason, message) in [
        (409, "AlreadyExists", "pods \"pod-2\" already exists"),
        (
            422,
            "Invalid",
            "Pod \"pod-2\" is invalid: spec.containers[0].image: Required value",
        ),
    ] {
        let (rt, handle) = runtime(1);
        let seen = serve(handle, move |s| {
            if let Some(a) = install_watch(s) {
                return a;
            }
            match (s.method.as_str(), s.path.as_str()) {
                ("POST", "/api/v1/namespaces/hearth/secrets") => {
                    // An earlier try left the Secret: fine, the token is derived.
                    Some((
                        409,
                        status(
                            409,
                            "AlreadyExists",
                            "secrets \"pod-2-token\" already exists",
                        ),
                    ))
                }
                ("POST", "/api/v1/namespaces/hearth/pods") => {
                    Some((code, status(code, reason, message)))
                }
                // The pod was never made: there is no pod to delete.
                ("GET", "/api/v1/namespaces/hearth/pods/pod-2") => {
                    Some((404, status(404, "NotFound", "not found")))
                }
                ("DELETE", _) => Some((404, status(404, "NotFound", "not found"))),
                _ => Some((500, status(500, "InternalError", "unexpected"))),
            }
        });
        let err = rt.start_pod(spec("pod-2")).await.unwrap_err();
        assert!(
            !err.is_transient(),
            "the API server refused this pod: {err}"
        );
        let err = err.to_string();
        assert!(err.contains(message) && err.contains(reason), "{err}");
        assert_eq!(
            non_watch(&seen),
            [
                "POST /api/v1/namespaces/hearth/secrets",
                "POST /api/v1/namespaces/hearth/pods",
                "GET /api/v1/namespaces/hearth/pods/pod-2",
                "DELETE /api/v1/namespaces/hearth/secrets/pod-2-token",
            ],
            "{reason}"
        );
    }
}

#[tokio::test]
async fn names_and_quantities_are_refused_before_any_request() {
    let (rt, handle) = runtime(1);
    let seen = serve(handle, |s| {
        install_watch(s).unwrap_or(Some((500, String::new())))
    });
    let err = rt.start_pod(spec("Pod_Bad")).await.unwrap_err().to_string();
    assert!(err.contains("pod name"), "{err}");
    assert!(non_watch(&seen).is_empty());
}

#[tokio::test]
async fn stopping_a_pod_that_is_gone_succeeds() {
    let (rt, handle) = runtime(1);
    let seen = serve(handle, |s| {
        install_watch(s).unwrap_or_else(|| Some((404, status(404, "NotFound", "gone"))))
    });
    // Unknown to this runtime: nothing to delete.
    rt.stop_pod("pod-x").await.unwrap();
    assert!(non_watch(&seen).is_empty());
}

#[tokio::test]
async fn a_start_watch_answered_410_gone_relists_and_goes_on() {
    let token = hearth_core::agent::pod_token(SECRET, "pod-3");
    let port = fake_agent(token).await;
    let (rt, handle) = runtime(port);
    let mut lists = VecDeque::from([
        list(5, vec![pod("pod-3", 5, pending())]),
        list(9, vec![pod("pod-3", 9, ready("127.0.0.1"))]),
    ]);
    let seen = serve(handle, move |s| {
        if let Some(a) = install_watch(s) {
            return a;
        }
        match (s.method.as_str(), s.path.as_str()) {
            ("POST", p) if p.ends_with("/secrets") || p.ends_with("/pods") => {
                let mut created = s.body.clone();
                created["metadata"]["uid"] = json!("u");
                created["metadata"]["resourceVersion"] = json!("5");
                Some((201, created.to_string()))
            }
            ("PATCH", _) => Some((200, "{}".into())),
            ("GET", _) if !s.is_watch() => Some((200, lists.pop_front().expect("two lists"))),
            ("GET", _) if s.query.contains("resourceVersion=5") => Some((
                200,
                watch_events(&[(
                    "ERROR",
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "code": 410, "reason": "Expired", "message": "too old resource version: 5 (7)"}),
                )]),
            )),
            ("GET", _) => None,
            _ => Some((500, status(500, "InternalError", "unexpected"))),
        }
    });
    let started = tokio::time::timeout(Duration::from_secs(30), rt.start_pod(spec("pod-3")))
        .await
        .expect("in time")
        .expect("started after the re-list");
    assert_eq!(started.peer_host, "127.0.0.1");
    let calls = non_watch(&seen);
    let lists = calls
        .iter()
        .filter(|c| *c == "GET /api/v1/namespaces/hearth/pods")
        .count();
    assert_eq!(lists, 2, "{calls:?}");
}

/// Starts pod `name`, which the API server lists with `status` and whose
/// watch then says nothing more; returns the start's error and the
/// requests made.
async fn failed_start(name: &str, status: Value) -> (String, Vec<String>) {
    let (rt, handle) = runtime(1);
    let object = pod(name, 5, status);
    let listed = list(5, vec![object.clone()]);
    let path = format!("/api/v1/namespaces/hearth/pods/{name}");
    let seen = serve(handle, move |s| {
        if let Some(a) = install_watch(s) {
            return a;
        }
        match (s.method.as_str(), s.path.as_str()) {
            ("POST", _) => {
                let mut created = s.body.clone();
                created["metadata"]["resourceVersion"] = json!("5");
                Some((201, created.to_string()))
            }
            // Read before its deletion.
            ("GET", p) if p == path => Some((200, object.to_string())),
            ("GET", _) if !s.is_watch() => Some((200, listed.clone())),
            ("DELETE", _) => Some((200, "{}".into())),
            _ => None,
        }
    });
    let err = rt.start_pod(spec(name)).await.unwrap_err().to_string();
    (err, non_watch(&seen))
}

#[tokio::test]
async fn a_pod_that_cannot_pull_its_image_fails_fast_and_is_deleted() {
    let pulling = pod_status::waiting("x", "ErrImagePull", "pull access denied");
    let (err, calls) = failed_start("pod-4", pulling).await;
    assert!(err.contains("ErrImagePull: pull access denied"), "{err}");
    assert!(
        calls.contains(&"DELETE /api/v1/namespaces/hearth/pods/pod-4".to_owned()),
        "{calls:?}"
    );
}

#[tokio::test]
async fn an_unschedulable_pod_fails_after_its_timeout() {
    let full = pod_status::unschedulable("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.");
    let (err, _) = failed_start("pod-5", full).await;
    assert!(
        err.contains("unschedulable") && err.contains("Insufficient nvidia.com/gpu"),
        "{err}"
    );
}

/// The install watch is answered 410 Gone once a pod has started; the
/// re-list no longer holds it, and it is announced deleted: nothing that
/// happened between the two watches is lost.
#[tokio::test]
async fn a_dropped_install_watch_relists_and_reports_what_vanished_meanwhile() {
    let token = hearth_core::agent::pod_token(SECRET, "pod-6");
    let port = fake_agent(token).await;
    let (rt, handle) = runtime(port);
    let gate = Arc::new(Notify::new());
    let mut install_watches = 0;
    let seen = serve_gated(
        handle,
        move |s| {
            if s.query.contains("labelSelector") {
                if !s.is_watch() {
                    return Some((200, list(7, vec![])));
                }
                install_watches += 1;
                if install_watches > 1 {
                    return None;
                }
                return Some((
                    200,
                    watch_events(&[(
                        "ERROR",
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "code": 410, "reason": "Expired", "message": "too old resource version"}),
                    )]),
                ));
            }
            match (s.method.as_str(), s.path.as_str()) {
                ("POST", _) => {
                    let mut created = s.body.clone();
                    created["metadata"]["resourceVersion"] = json!("5");
                    created["metadata"]["uid"] = json!("u");
                    Some((201, created.to_string()))
                }
                ("PATCH", _) => Some((200, "{}".into())),
                ("GET", _) if !s.is_watch() => {
                    Some((200, list(5, vec![pod("pod-6", 5, ready("127.0.0.1"))])))
                }
                ("DELETE", _) => Some((200, "{}".into())),
                _ => None,
            }
        },
        |s| s.is_watch() && s.query.contains("labelSelector"),
        Arc::clone(&gate),
    );
    let mut events = rt.subscribe();
    rt.start_pod(spec("pod-6")).await.unwrap();
    gate.notify_one();
    let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await
        .expect("announced in time")
        .unwrap();
    assert_eq!(
        event,
        PodEvent::Gone {
            pod_id: "pod-6".into(),
            reason: "deleted".into()
        }
    );
    let installs: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.query.contains("labelSelector"))
        .map(|s| {
            if s.is_watch() {
                "watch".to_owned()
            } else {
                "list".to_owned()
            }
        })
        .collect();
    assert_eq!(installs[..3], ["list", "watch", "list"], "{installs:?}");
}
