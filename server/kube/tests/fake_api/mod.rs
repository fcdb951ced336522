//! A fake Kubernetes API server on loopback HTTP, with a fake kubelet that
//! starts a real `hearth-agent` for every pod created, on an address of its
//! own (127.0.0.N), and reports it Ready with that IP.
//!
//! It serves what the runtime uses: pods (create, get, list and watch with
//! label and field selectors, resource versions and bookmarks, delete) and
//! secrets (create, get, merge patch, delete), and events.k8s.io/v1 Events
//! (create, recorded for tests to read, or refused with 403 Forbidden when
//! a test asks). Tests drive the rest
//! directly: status changes (OOM kill), deletions behind the runtime's back,
//! and expiring every open watch (410 Gone on resume).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

pub mod pod_status;

/// One change, as a watch reports it.
#[derive(Debug, Clone)]
struct Change {
    rv: u64,
    kind: &'static str,
    object: Value,
}

#[derive(Debug, Default)]
struct Store {
    rv: u64,
    pods: BTreeMap<String, Value>,
    secrets: BTreeMap<String, Value>,
    /// Every pod change, oldest first.
    log: Vec<Change>,
    /// Watches resuming from a version older than this get 410 Gone.
    compacted: u64,
    /// Running agents by pod name.
    agents: BTreeMap<String, tokio::process::Child>,
    creations: u32,
    /// Changes are logged but not sent to open watches (they are lost to them).
    silent: bool,
    /// Events written, oldest first.
    events: Vec<Value>,
    /// Event writes are refused (403), as without RBAC for them.
    refuse_events: bool,
    /// Pod creations still to be answered 500, as by a server whose etcd
    /// timed out (kube's client retries 429, 503 and 504 itself).
    unavailable_creations: u32,
}

/// The fake API server and kubelet.
#[derive(Clone, Debug)]
pub struct FakeCluster {
    inner: Arc<Inner>,
    pub url: String,
}

#[derive(Debug)]
struct Inner {
    store: Mutex<Store>,
    changes: broadcast::Sender<Change>,
    /// Bumped to end every open watch stream.
    cut: tokio::sync::watch::Sender<u64>,
    next_ip: AtomicU32,
    agent_port: u16,
    agent_bin: PathBuf,
    root: PathBuf,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                      "code": code, "reason": reason, "message": message});
    (StatusCode::from_u16(code).unwrap(), axum::Json(body)).into_response()
}

/// Equality-only label selector (`a=b,c=d`) and `metadata.name=` field selector.
fn matches(pod: &Value, labels: Option<&str>, fields: Option<&str>) -> bool {
    let label_ok = labels
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
        .all(|term| {
            let (k, v) = term.split_once('=').unwrap_or((term, ""));
            pod["metadata"]["labels"][k].as_str() == Some(v)
        });
    let field_ok = fields
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
        .all(|term| match term.split_once('=') {
            Some(("metadata.name", v)) => pod["metadata"]["name"].as_str() == Some(v),
            Some(("metadata.namespace", v)) => pod["metadata"]["namespace"].as_str() == Some(v),
            _ => false,
        });
    label_ok && field_ok
}

impl Inner {
    /// Records a pod change (its new version set) and tells the watches.
    fn record(&self, st: &mut Store, kind: &'static str, mut object: Value) -> Value {
        st.rv += 1;
        object["metadata"]["resourceVersion"] = json!(st.rv.to_string());
        let change = Change {
            rv: st.rv,
            kind,
            object: object.clone(),
        };
        st.log.push(change.clone());
        if !st.silent {
            let _ = self.changes.send(change);
        }
        object
    }

    fn set_status(&self, name: &str, status: Value) -> bool {
        let mut st = lock(&self.store);
        let Some(mut pod) = st.pods.get(name).cloned() else {
            return false;
        };
        pod["status"] = status;
        let pod = self.record(&mut st, "MODIFIED", pod);
        st.pods.insert(name.to_owned(), pod);
        true
    }

    fn remove_pod(&self, st: &mut Store, name: &str) -> Option<Value> {
        let pod = st.pods.remove(name)?;
        if let Some(mut child) = st.agents.remove(name) {
            let _ = child.start_kill();
        }
        Some(self.record(st, "DELETED", pod))
    }

    /// The kubelet: starts the pod's agent on an address of its own and
    /// reports the pod Ready once the agent accepts connections.
    async fn kubelet(self: Arc<Self>, name: String) {
        let (pod, token) = {
            let st = lock(&self.store);
            let Some(pod) = st.pods.get(&name).cloned() else {
                return;
            };
            let secret_name =
                pod["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
            let token = st.secrets.get(&secret_name).and_then(|s| {
                let encoded = s["data"]["token"].as_str()?;
                Some(String::from_utf8(b64_decode(encoded)).unwrap())
            });
            (pod, token)
        };
        let image = pod["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default();
        let waiting = |reason: &str, message: &str| pod_status::waiting(image, reason, message);
        if image.starts_with("pending/") {
            // No node takes it: it stays Pending until deleted.
            self.set_status(
                &name,
                pod_status::unschedulable(
                    "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
                ),
            );
            return;
        }
        if image.starts_with("missing/") {
            self.set_status(&name, waiting("ErrImagePull", "pull access denied"));
            return;
        }
        let Some(token) = token else {
            self.set_status(
                &name,
                waiting("CreateContainerConfigError", "secret not found"),
            );
            return;
        };
        let n = self.next_ip.fetch_add(1, Ordering::SeqCst);
        let ip = format!("127.0.0.{n}");
        let root = self.root.join(&name);
        std::fs::create_dir_all(&root).unwrap();
        let child = tokio::process::Command::new(&self.agent_bin)
            .arg("--listen")
            .arg(format!("tcp:{ip}:{}", self.agent_port))
            .arg("--root")
            .arg(&root)
            .args(["--sandbox", "none"])
            .env("HEARTH_AGENT_TOKEN", token)
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("hearth-agent starts");
        {
            let mut st = lock(&self.store);
            if !st.pods.contains_key(&name) {
                return;
            }
            st.agents.insert(name.clone(), child);
        }
        // The readiness probe: a TCP connection.
        let addr: SocketAddr = format!("{ip}:{}", self.agent_port).parse().unwrap();
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                self.set_status(&name, pod_status::ready(image, &ip));
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the agent of {name} never listened");
    }
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

type Shared = Arc<Inner>;
type Params = Query<BTreeMap<String, String>>;

async fn create_pod(
    State(inner): State<Shared>,
    UrlPath(ns): UrlPath<String>,
    axum::Json(mut pod): axum::Json<Value>,
) -> Response {
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let created = {
        let mut st = lock(&inner.store);
        if st.unavailable_creations > 0 {
            st.unavailable_creations -= 1;
            return status(500, "InternalError", "etcdserver: request timed out");
        }
        if st.pods.contains_key(&name) {
            return status(
                409,
                "AlreadyExists",
                &format!("pods \"{name}\" already exists"),
            );
        }
        st.creations += 1;
        pod["metadata"]["namespace"] = json!(ns);
        pod["metadata"]["uid"] = json!(format!("uid-{name}"));
        pod["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        pod["status"] = json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True"}]});
        let pod = inner.record(&mut st, "ADDED", pod);
        st.pods.insert(name.clone(), pod.clone());
        pod
    };
    tokio::spawn(Arc::clone(&inner).kubelet(name));
    (StatusCode::CREATED, axum::Json(created)).into_response()
}

async fn pods(
    State(inner): State<Shared>,
    UrlPath(_ns): UrlPath<String>,
    Query(q): Params,
) -> Response {
    let labels = q.get("labelSelector").cloned();
    let fields = q.get("fieldSelector").cloned();
    if q.get("watch").map(String::as_str) != Some("true") {
        let st = lock(&inner.store);
        let items: Vec<Value> = st
            .pods
            .values()
            .filter(|p| matches(p, labels.as_deref(), fields.as_deref()))
            .cloned()
            .collect();
        let body = json!({"apiVersion": "v1", "kind": "PodList",
                          "metadata": {"resourceVersion": st.rv.to_string()}, "items": items});
        return axum::Json(body).into_response();
    }
    let since: u64 = q
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bookmarks = q.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let (backlog, mut live, rv_now) = {
        let st = lock(&inner.store);
        if since < st.compacted {
            let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                "metadata": {}, "status": "Failure", "code": 410, "reason": "Expired",
                "message": format!("too old resource version: {since} ({})", st.compacted)}});
            return Response::new(Body::from(format!("{gone}\n")));
        }
        let backlog: Vec<Change> = st.log.iter().filter(|c| c.rv > since).cloned().collect();
        (backlog, inner.changes.subscribe(), st.rv)
    };
    let mut cut = inner.cut.subscribe();
    cut.mark_unchanged();
    let line = |kind: &str, object: &Value| {
        Bytes::from(format!("{}\n", json!({"type": kind, "object": object})))
    };
    let stream = async_stream(move |tx| async move {
        let wanted = |c: &Change| matches(&c.object, labels.as_deref(), fields.as_deref());
        let mut last = rv_now;
        for c in backlog.iter().filter(|c| wanted(c)) {
            last = last.max(c.rv);
            if tx.send(line(c.kind, &c.object)).await.is_err() {
                return;
            }
        }
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                change = live.recv() => match change {
                    Ok(c) => {
                        last = last.max(c.rv);
                        if wanted(&c) && tx.send(line(c.kind, &c.object)).await.is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                },
                _ = tick.tick(), if bookmarks => {
                    let mark = json!({"kind": "Pod", "apiVersion": "v1",
                                      "metadata": {"resourceVersion": last.to_string()}});
                    if tx.send(line("BOOKMARK", &mark)).await.is_err() {
                        return;
                    }
                }
                _ = cut.changed() => return,
            }
        }
    });
    Response::new(Body::from_stream(stream))
}

/// A stream fed by a task: what `produce` sends on its channel.
fn async_stream<F, Fut>(produce: F) -> impl futures::Stream<Item = Result<Bytes, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(produce(tx));
    tokio_stream_from(rx).map(Ok)
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Bytes>,
) -> impl futures::Stream<Item = Bytes> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

async fn get_pod(
    State(inner): State<Shared>,
    UrlPath((_ns, name)): UrlPath<(String, String)>,
) -> Response {
    match lock(&inner.store).pods.get(&name) {
        Some(p) => axum::Json(p.clone()).into_response(),
        None => status(404, "NotFound", &format!("pods \"{name}\" not found")),
    }
}

/// Deletes a pod; with `preconditions` in the body (a `resourceVersion`,
/// a `uid`), only the pod they describe, else 409 as the API server does.
async fn delete_pod(
    State(inner): State<Shared>,
    UrlPath((_ns, name)): UrlPath<(String, String)>,
    body: Bytes,
) -> Response {
    let mut st = lock(&inner.store);
    let options: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(pod) = st.pods.get(&name) {
        for key in ["resourceVersion", "uid"] {
            if let Some(want) = options["preconditions"][key].as_str()
                && pod["metadata"][key].as_str() != Some(want)
            {
                return status(
                    409,
                    "Conflict",
                    &format!("Precondition failed: {key} in precondition: {want}"),
                );
            }
        }
    }
    match inner.remove_pod(&mut st, &name) {
        Some(p) => axum::Json(p).into_response(),
        None => status(404, "NotFound", &format!("pods \"{name}\" not found")),
    }
}

/// A merge patch of a pod's annotations (what the runtime patches).
async fn patch_pod(
    State(inner): State<Shared>,
    UrlPath((_ns, name)): UrlPath<(String, String)>,
    body: Bytes,
) -> Response {
    let mut st = lock(&inner.store);
    let Some(mut pod) = st.pods.get(&name).cloned() else {
        return status(404, "NotFound", &format!("pods \"{name}\" not found"));
    };
    let patch: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(Value::Object(set)) = patch["metadata"].get("annotations") {
        for (k, v) in set {
            pod["metadata"]["annotations"][k] = v.clone();
        }
    }
    let pod = inner.record(&mut st, "MODIFIED", pod);
    st.pods.insert(name, pod.clone());
    axum::Json(pod).into_response()
}

async fn create_secret(
    State(inner): State<Shared>,
    UrlPath(_ns): UrlPath<String>,
    axum::Json(secret): axum::Json<Value>,
) -> Response {
    let name = secret["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut st = lock(&inner.store);
    if st.secrets.contains_key(&name) {
        return status(
            409,
            "AlreadyExists",
            &format!("secrets \"{name}\" already exists"),
        );
    }
    st.secrets.insert(name, secret.clone());
    (StatusCode::CREATED, axum::Json(secret)).into_response()
}

async fn secret(
    State(inner): State<Shared>,
    UrlPath((_ns, name)): UrlPath<(String, String)>,
    method: axum::http::Method,
    body: Bytes,
) -> Response {
    let mut st = lock(&inner.store);
    match method.as_str() {
        "GET" => match st.secrets.get(&name) {
            Some(s) => axum::Json(s.clone()).into_response(),
            None => status(404, "NotFound", "secret not found"),
        },
        "DELETE" => match st.secrets.remove(&name) {
            Some(s) => axum::Json(s).into_response(),
            None => status(404, "NotFound", "secret not found"),
        },
        "PATCH" => {
            let Some(s) = st.secrets.get_mut(&name) else {
                return status(404, "NotFound", "secret not found");
            };
            let patch: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if let Some(owners) = patch["metadata"].get("ownerReferences") {
                s["metadata"]["ownerReferences"] = owners.clone();
            }
            axum::Json(s.clone()).into_response()
        }
        _ => status(405, "MethodNotAllowed", "method not allowed"),
    }
}

async fn create_event(
    State(inner): State<Shared>,
    UrlPath(ns): UrlPath<String>,
    axum::Json(mut event): axum::Json<Value>,
) -> Response {
    let mut st = lock(&inner.store);
    if st.refuse_events {
        return status(
            403,
            "Forbidden",
            "events.events.k8s.io is forbidden: cannot create resource \"events\"",
        );
    }
    event["metadata"]["namespace"] = json!(ns);
    st.events.push(event.clone());
    (StatusCode::CREATED, axum::Json(event)).into_response()
}

impl FakeCluster {
    /// Starts the fake on loopback. Agents listen on 127.0.0.N:`agent_port`.
    pub async fn start(agent_bin: &Path, root: &Path, agent_port: u16) -> FakeCluster {
        let (changes, _) = broadcast::channel(1024);
        let inner = Arc::new(Inner {
            store: Mutex::new(Store::default()),
            changes,
            cut: tokio::sync::watch::channel(0).0,
            next_ip: AtomicU32::new(2),
            agent_port,
            agent_bin: agent_bin.to_owned(),
            root: root.to_owned(),
        });
        let app = Router::new()
            .route("/api/v1/namespaces/{ns}/pods", get(pods).post(create_pod))
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}",
                get(get_pod).delete(delete_pod).patch(patch_pod),
            )
            .route(
                "/api/v1/namespaces/{ns}/secrets",
                axum::routing::post(create_secret),
            )
            .route(
                "/api/v1/namespaces/{ns}/secrets/{name}",
                get(secret).delete(secret).patch(secret),
            )
            .route(
                "/apis/events.k8s.io/v1/namespaces/{ns}/events",
                axum::routing::post(create_event),
            )
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        FakeCluster { inner, url }
    }

    /// A kube client of the fake.
    pub fn client(&self) -> kube::Client {
        let cfg = kube::Config::new(self.url.parse().unwrap());
        kube::Client::try_from(cfg).unwrap()
    }

    /// How many pods were ever created.
    pub fn creations(&self) -> u32 {
        lock(&self.inner.store).creations
    }

    pub fn pod_names(&self) -> Vec<String> {
        lock(&self.inner.store).pods.keys().cloned().collect()
    }

    pub fn secret_names(&self) -> Vec<String> {
        lock(&self.inner.store).secrets.keys().cloned().collect()
    }

    /// The Events written so far, oldest first.
    pub fn events(&self) -> Vec<Value> {
        lock(&self.inner.store).events.clone()
    }

    /// From now on Event writes are refused with 403 Forbidden.
    pub fn refuse_events(&self) {
        lock(&self.inner.store).refuse_events = true;
    }

    /// The next `n` pod creations are answered 500 (etcd timed out).
    pub fn refuse_creations(&self, n: u32) {
        lock(&self.inner.store).unavailable_creations = n;
    }

    pub fn pod(&self, name: &str) -> Option<Value> {
        lock(&self.inner.store).pods.get(name).cloned()
    }

    /// Deletes a pod as `kubectl delete` would (the watches see it).
    pub fn delete(&self, name: &str) {
        let mut st = lock(&self.inner.store);
        self.inner.remove_pod(&mut st, name);
    }

    /// The pod's container is OOM-killed: its agent dies and the pod fails.
    pub fn oom_kill(&self, name: &str) {
        if let Some(mut child) = lock(&self.inner.store).agents.remove(name) {
            let _ = child.start_kill();
        }
        self.inner.set_status(name, pod_status::oom_killed("x"));
    }

    /// What `meanwhile` does is never sent to the open watches; then they
    /// all end, and the history is compacted past their versions: resuming
    /// gets 410 Gone, and only a re-list shows what happened.
    pub fn expire_watches(&self, meanwhile: impl FnOnce(&FakeCluster)) {
        lock(&self.inner.store).silent = true;
        meanwhile(self);
        {
            let mut st = lock(&self.inner.store);
            st.compacted = st.rv;
            st.silent = false;
        }
        self.inner.cut.send_modify(|n| *n += 1);
    }
}
