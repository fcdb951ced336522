//! The Kubernetes runtime: one Kubernetes pod per Hearth pod, created and
//! followed through the Kubernetes API (watches only, never a polling
//! loop), its agent reached over TCP with the pod's own token, and the
//! install's pods adopted by a new leader instead of thrown away.
//!
//! A crate of its own so that `kube`, `k8s-openapi` and rustls stay out of
//! the agent's build and of the local runtime's. It may not touch the store:
//! what it knows of jobs arrives as [`Claim`]s.
//!
//! Why a start failed or a pod was lost is also written where cluster
//! operators look: a Warning Event (events.k8s.io/v1) regarding the pod,
//! best effort (see [`Inner::warn`]).
//!
//! Modules: [`spec`] (the Pod and Secret objects, name and quantity checks),
//! [`status`] (reading a pod's status: ready, hopeless, gone and why).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use hearth_core::Profile;
use hearth_core::agent::{Frame, pod_token};
use hearth_runtime::{
    Adopted, Adoption, Claim, Error, Mechanism, Pod, PodEvent, PodSpec, Runtime, client,
};
use k8s_openapi::api::core::v1::{ObjectReference, Pod as KubePod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use tokio::sync::broadcast;

pub mod spec;
pub mod status;

/// The client crate, for callers that build a [`kube::Client`].
pub use kube;
pub use spec::{Gpu, ProfileSettings, Template};
use status::Progress;

/// The install's secret pod tokens are derived from. Never printed.
#[derive(Clone)]
pub struct InstallSecret(Vec<u8>);

impl InstallSecret {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        InstallSecret(bytes.into())
    }

    /// The token of pod `name`.
    pub fn token(&self, name: &str) -> String {
        pod_token(&self.0, name)
    }
}

impl fmt::Debug for InstallSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InstallSecret(..)")
    }
}

/// Settings of the Kubernetes runtime.
#[derive(Debug, Clone)]
pub struct KubeConfig {
    pub template: Template,
    pub secret: InstallSecret,
    /// How long a pod may take from creation to a ready agent.
    pub start_timeout: Duration,
    /// How long a pod may stay unschedulable before its start fails.
    pub unschedulable_timeout: Duration,
    /// How long an agent may take to answer during adoption.
    pub agent_timeout: Duration,
    /// The `reportingInstance` of the Events this runtime writes; `None`:
    /// the host name (in a cluster, the broker's pod name).
    pub instance: Option<String>,
}

/// The `reportingController` of the Events this runtime writes.
pub const REPORTING_CONTROLLER: &str = "hearth.dev/broker";

/// Event reasons and actions (CamelCase, as Kubernetes' own).
mod pod_event {
    /// A pod this runtime created will not become ready.
    pub const START_FAILED: &str = "StartFailed";
    /// A started pod went away: deleted, evicted, OOM-killed, its node
    /// lost, or failed.
    pub const POD_LOST: &str = "PodLost";
    /// The action of [`START_FAILED`]: starting the pod.
    pub const START: &str = "Start";
    /// The action of [`POD_LOST`]: the pod is dropped from service (and
    /// what is left of it deleted).
    pub const DROP: &str = "Drop";
}

/// Most bytes of an Event's note (the API server's limit is 1 kB).
const NOTE_MAX: usize = 1024;

impl KubeConfig {
    pub fn new(namespace: &str, install: &str, secret: InstallSecret) -> Self {
        KubeConfig {
            template: Template {
                namespace: namespace.to_owned(),
                install: install.to_owned(),
                agent_port: 7070,
                run_as: 65532,
                settings: BTreeMap::new(),
            },
            secret,
            start_timeout: Duration::from_secs(600),
            unschedulable_timeout: Duration::from_secs(120),
            agent_timeout: Duration::from_secs(5),
            instance: None,
        }
    }
}

/// A pod this runtime drives, by Kubernetes name.
#[derive(Debug, Clone)]
struct Live {
    /// The id the service knows it by (an adopted pod keeps its own name).
    pod_id: String,
    /// Its start returned: vanishing is then news for the service.
    started: bool,
    /// When this runtime took it on: a re-list begun earlier cannot show it.
    since: tokio::time::Instant,
    /// Its agent's address once it serves: the connections kept to it go
    /// with the pod.
    address: Option<String>,
}

impl Live {
    fn new(pod_id: &str, address: Option<String>) -> Live {
        Live {
            pod_id: pod_id.to_owned(),
            started: address.is_some(),
            since: tokio::time::Instant::now(),
            address,
        }
    }

    /// Closes the connections kept to the pod's agent.
    fn forget(&self) {
        if let Some(a) = &self.address {
            client::forget(a);
        }
    }
}

#[derive(Default, Debug)]
struct Pods {
    /// Kubernetes name -> what the service knows.
    live: HashMap<String, Live>,
    /// Service id -> Kubernetes name.
    names: HashMap<String, String>,
}

struct Inner {
    cfg: KubeConfig,
    pods_api: Api<KubePod>,
    secrets_api: Api<Secret>,
    epoch: AtomicU64,
    events: broadcast::Sender<PodEvent>,
    /// Writes Kubernetes Events regarding pods.
    recorder: Recorder,
    pods: Mutex<Pods>,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner")
            .field("namespace", &self.cfg.template.namespace)
            .field("install", &self.cfg.template.install)
            .finish_non_exhaustive()
    }
}

/// The Kubernetes runtime. Cheap to share; its pod watch ends when it is
/// dropped.
#[derive(Debug)]
pub struct KubeRuntime {
    inner: Arc<Inner>,
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for KubeRuntime {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// Deletes a pod whose start was abandoned midway.
struct Undo {
    inner: Option<Arc<Inner>>,
    name: String,
}

impl Drop for Undo {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.forget(&self.name);
            let name = std::mem::take(&mut self.name);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { inner.delete(&name).await });
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether an API error is the API server's `NotFound`.
fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict())
}

/// The epoch of the leader that started or last adopted `pod` (0: none
/// said).
fn holder_epoch(pod: &KubePod) -> u64 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(spec::EPOCH_ANNOTATION))
        .and_then(|e| e.parse().ok())
        .unwrap_or(0)
}

/// Reads before a fenced deletion, when the pod changed in between.
const DELETE_TRIES: u32 = 5;

fn already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_already_exists())
}

/// A failed API request as a start failure: [`Error::Unavailable`] where
/// the API server was overloaded or failing (429, 5xx) or could not be
/// reached, which says nothing of the pod; else what it refused (or what
/// could not even be asked).
fn api_error(what: &str, e: &kube::Error) -> Error {
    match e {
        kube::Error::Api(s) => {
            let message = format!("{what}: {} ({}, {})", s.message, s.reason, s.code);
            if s.code == 429 || s.code >= 500 {
                Error::Unavailable(message)
            } else {
                Error::StartFailed(message)
            }
        }
        // Could not reach it, or lost it mid-answer.
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Error::Unavailable(format!("{what}: {e}"))
        }
        other => Error::StartFailed(format!("{what}: {other}")),
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn truncated(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

impl KubeRuntime {
    /// A runtime on `client` (in-cluster configuration or `KUBECONFIG`: see
    /// [`kube::Client::try_default`]). Starts the watch over the install's
    /// pods; must run inside a Tokio runtime.
    pub fn new(client: kube::Client, cfg: KubeConfig) -> Result<Self, Error> {
        cfg.template
            .check()
            .map_err(|e| Error::StartFailed(format!("kubernetes settings: {e}")))?;
        let ns = cfg.template.namespace.clone();
        let (events, _) = broadcast::channel(1024);
        let reporter = match &cfg.instance {
            Some(instance) => Reporter {
                controller: REPORTING_CONTROLLER.to_owned(),
                instance: Some(instance.clone()),
            },
            // The host name: a pod's is its name.
            None => Reporter::from(REPORTING_CONTROLLER),
        };
        let inner = Arc::new(Inner {
            pods_api: Api::namespaced(client.clone(), &ns),
            secrets_api: Api::namespaced(client.clone(), &ns),
            recorder: Recorder::new(client, reporter),
            cfg,
            epoch: AtomicU64::new(0),
            events,
            pods: Mutex::new(Pods::default()),
        });
        let watch = tokio::spawn(watch_install(Arc::downgrade(&inner)));
        Ok(KubeRuntime { inner, watch })
    }

    /// Connects with in-cluster configuration or `KUBECONFIG`.
    pub async fn connect(cfg: KubeConfig) -> Result<Self, Error> {
        let client = kube::Client::try_default()
            .await
            .map_err(|e| Error::StartFailed(format!("kubernetes client: {e}")))?;
        Self::new(client, cfg)
    }

    /// The Pod object the runtime would create for `spec` (for golden files
    /// and checks).
    pub fn pod_object(&self, spec: &PodSpec) -> Result<KubePod, Error> {
        self.inner
            .cfg
            .template
            .pod(&spec.pod_id, &spec.profile)
            .map_err(|e| Error::StartFailed(e.to_string()))
    }
}

/// Follows every pod of the install for the life of the runtime and
/// announces the ones that vanish. The watcher re-lists after a dropped
/// watch (410 Gone); pods missing from the new list are reported deleted,
/// so nothing is lost in between.
async fn watch_install(inner: Weak<Inner>) {
    let (api, selector) = match inner.upgrade() {
        Some(i) => (i.pods_api.clone(), i.cfg.template.selector()),
        None => return,
    };
    let stream =
        watcher::watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
    futures::pin_mut!(stream);
    let mut listed: HashSet<String> = HashSet::new();
    let mut listing_since = tokio::time::Instant::now();
    while let Some(event) = stream.next().await {
        let Some(inner) = inner.upgrade() else { return };
        match event {
            Ok(Event::Init) => {
                listed.clear();
                listing_since = tokio::time::Instant::now();
            }
            Ok(Event::InitApply(pod)) => {
                if let Some(name) = pod.metadata.name.clone() {
                    listed.insert(name);
                }
                if let Some(reason) = status::gone_reason(&pod) {
                    inner.vanished(&pod, reason);
                }
            }
            Ok(Event::InitDone) => {
                let missing: Vec<String> = lock(&inner.pods)
                    .live
                    .iter()
                    .filter(|(n, l)| !listed.contains(*n) && l.since < listing_since)
                    .map(|(n, _)| n.clone())
                    .collect();
                for name in missing {
                    inner.vanished_name(&name, None, "deleted".to_owned());
                }
            }
            Ok(Event::Apply(pod)) => {
                if let Some(reason) = status::gone_reason(&pod) {
                    inner.vanished(&pod, reason);
                }
            }
            Ok(Event::Delete(pod)) => inner.vanished(&pod, status::deleted_reason(&pod)),
            Err(e) => tracing::warn!(error = %e, "watch of the install's pods"),
        }
    }
}

impl Inner {
    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// A reference to pod `name` of this runtime's namespace.
    fn pod_ref(&self, name: &str, uid: Option<&str>) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            name: Some(name.to_owned()),
            namespace: Some(self.cfg.template.namespace.clone()),
            uid: uid.map(str::to_owned),
            ..ObjectReference::default()
        }
    }

    /// Writes a Warning Event regarding `pod`, in the background: best
    /// effort, so that no start or loss waits for the API server or fails
    /// because it refused (RBAC, quota); a refusal is logged.
    fn warn(&self, pod: ObjectReference, reason: &'static str, action: &'static str, note: String) {
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(truncated(note, NOTE_MAX)),
            action: action.to_owned(),
            secondary: None,
        };
        let recorder = self.recorder.clone();
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&event, &pod).await {
                let name = pod.name.unwrap_or_default();
                tracing::warn!(pod = %name, reason = event.reason, error = %e, "writing a pod event failed");
            }
        });
    }

    fn vanished(self: &Arc<Self>, pod: &KubePod, reason: String) {
        if let Some(name) = &pod.metadata.name {
            self.vanished_name(name, pod.metadata.uid.as_deref(), reason);
        }
    }

    /// A pod went away on its own: a started one is announced (once), with
    /// an Event, and whatever is left of it deleted.
    fn vanished_name(self: &Arc<Self>, name: &str, uid: Option<&str>, reason: String) {
        let gone = {
            let mut pods = lock(&self.pods);
            match pods.live.get(name) {
                Some(l) if l.started => {
                    let l = pods.live.remove(name).expect("present");
                    l.forget();
                    pods.names.remove(&l.pod_id);
                    Some(l.pod_id)
                }
                _ => None,
            }
        };
        if let Some(pod_id) = gone {
            tracing::warn!(pod = name, %reason, "pod lost");
            self.warn(
                self.pod_ref(name, uid),
                pod_event::POD_LOST,
                pod_event::DROP,
                format!("pod lost: {reason}"),
            );
            let _ = self.events.send(PodEvent::Gone { pod_id, reason });
            let this = Arc::clone(self);
            let name = name.to_owned();
            tokio::spawn(async move { this.delete(&name).await });
        }
    }

    /// Deletes pod `name` and its token Secret (either being gone already
    /// is fine), unless a newer leader holds it. A
    /// leader whose lease ran out may not know it yet and still release
    /// pods: each deletion reads the pod's holder epoch first and deletes
    /// on the condition that the pod is unchanged since (its
    /// `resourceVersion`), so an adoption by a newer leader in between
    /// (which writes its epoch on the pod) makes the deletion fail, and
    /// the next read leaves the pod alone.
    /// Returns whether the pod is gone.
    async fn delete(&self, name: &str) -> bool {
        let epoch = self.epoch();
        let mut tries = 0;
        loop {
            tries += 1;
            let pod = match self.pods_api.get_opt(name).await {
                Ok(Some(pod)) => pod,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(pod = name, error = %e, "reading a pod to delete");
                    return false;
                }
            };
            let holder = holder_epoch(&pod);
            if holder > epoch {
                tracing::info!(
                    pod = name,
                    holder,
                    epoch,
                    "not deleting a pod a newer leader holds"
                );
                return false;
            }
            let dp = DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    resource_version: pod.metadata.resource_version.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
                ..DeleteParams::default()
            };
            match self.pods_api.delete(name, &dp).await {
                Ok(_) => break,
                Err(e) if not_found(&e) => break,
                Err(e) if conflict(&e) && tries < DELETE_TRIES => {}
                Err(e) => {
                    tracing::warn!(pod = name, error = %e, "deleting a pod");
                    return false;
                }
            }
        }
        if let Err(e) = self
            .secrets_api
            .delete(&Template::secret_name(name), &DeleteParams::default())
            .await
            && !not_found(&e)
        {
            tracing::warn!(pod = name, error = %e, "deleting a pod's token");
        }
        true
    }

    /// Writes this leader's epoch on adopted pod `name`, so that an older
    /// leader still running deletes it no more (see [`Inner::delete`]).
    async fn hold(&self, name: &str) {
        let patch = serde_json::json!({"metadata": {"annotations": {
            spec::EPOCH_ANNOTATION: self.epoch().to_string(),
        }}});
        if let Err(e) = self
            .pods_api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(pod = name, error = %e, "an adopted pod does not name its leader: an older one could still delete it");
        }
    }

    /// Starts a pod for `spec`. Its `labels` (tenant, pool) stay with the
    /// service: a Kubernetes pod carries install, pool and profile only.
    /// Its `gpu_devices` are the local runtime's: here the device plugin or
    /// DRA driver picks the devices.
    async fn start(self: &Arc<Self>, spec: PodSpec) -> Result<Pod, Error> {
        if lock(&self.pods).names.contains_key(&spec.pod_id) {
            return Err(Error::StartFailed(format!("pod {} exists", spec.pod_id)));
        }
        let name = spec.pod_id.clone();
        let mut object = self
            .cfg
            .template
            .pod(&name, &spec.profile)
            .map_err(|e| Error::StartFailed(e.to_string()))?;
        object
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(spec::EPOCH_ANNOTATION.to_owned(), self.epoch().to_string());
        {
            let mut pods = lock(&self.pods);
            pods.live.insert(name.clone(), Live::new(&name, None));
            pods.names.insert(name.clone(), name.clone());
        }
        // A start that fails, or is dropped by its caller (the scheduler's
        // own timeout), leaves nothing behind.
        let mut undo = Undo {
            inner: Some(Arc::clone(self)),
            name: name.clone(),
        };
        let started = self.create_and_follow(&name, object).await;
        match started {
            Ok(pod) => {
                undo.inner = None;
                if let Some(l) = lock(&self.pods).live.get_mut(&name) {
                    l.started = true;
                    l.address = Some(pod.address.clone());
                }
                Ok(pod)
            }
            Err(e) => {
                undo.inner = None;
                self.forget(&name);
                self.delete(&name).await;
                Err(e)
            }
        }
    }

    fn forget(&self, name: &str) {
        let mut pods = lock(&self.pods);
        pods.live.remove(name);
        pods.names.remove(name);
    }

    async fn create_and_follow(&self, name: &str, object: KubePod) -> Result<Pod, Error> {
        let token = self.cfg.secret.token(name);
        let secret = self.cfg.template.secret(name, &token);
        let pp = PostParams::default();
        match self.secrets_api.create(&pp, &secret).await {
            Ok(_) => {}
            // Left by an earlier try: its token is the same (derived).
            Err(e) if already_exists(&e) => {}
            Err(e) => return Err(api_error("creating the pod's token Secret", &e)),
        }
        let created = self
            .pods_api
            .create(&pp, &object)
            .await
            .map_err(|e| api_error("creating the pod", &e))?;
        // The Secret goes with its pod (garbage collection), whoever deletes it.
        if let Some(uid) = created.metadata.uid.as_deref() {
            let owner = serde_json::json!({"metadata": {"ownerReferences": [{
                "apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid,
            }]}});
            if let Err(e) = self
                .secrets_api
                .patch(
                    &Template::secret_name(name),
                    &PatchParams::default(),
                    &Patch::Merge(&owner),
                )
                .await
            {
                tracing::warn!(pod = name, error = %e, "the token Secret is not owned by its pod");
            }
        }
        let ready = async {
            let ip = self.follow(name).await?;
            let address = format!("tcp:{ip}:{}", self.cfg.template.agent_port);
            self.ping(&address, &token).await?;
            Ok((ip, address))
        };
        // The pod exists from here: why it will not serve goes on it too.
        let (ip, address) = ready.await.inspect_err(|e: &Error| {
            let why = match e {
                Error::StartFailed(why) => why.clone(),
                other => other.to_string(),
            };
            let pod = self.pod_ref(name, created.metadata.uid.as_deref());
            self.warn(pod, pod_event::START_FAILED, pod_event::START, why);
        })?;
        Ok(Pod {
            pod_id: name.to_owned(),
            address,
            peer_host: ip,
            token: Some(token),
        })
    }

    /// Follows pod `name` through a watch until it is ready; fails fast on
    /// what will not resolve, on deletion, and on staying unschedulable past
    /// the timeout.
    async fn follow(&self, name: &str) -> Result<String, Error> {
        // The default list semantic is a quorum read: the pod just created
        // is in the first list, so missing from it means deleted.
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let stream = watcher::watcher(self.pods_api.clone(), cfg).default_backoff();
        futures::pin_mut!(stream);
        let overall = tokio::time::sleep(self.cfg.start_timeout);
        tokio::pin!(overall);
        let mut unschedulable: Option<(tokio::time::Instant, String)> = None;
        let mut seen = false;
        loop {
            let give_up_at = unschedulable
                .as_ref()
                .map(|(since, _)| *since + self.cfg.unschedulable_timeout);
            let unschedulable_timer = async {
                match give_up_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => futures::future::pending().await,
                }
            };
            let event = tokio::select! {
                event = stream.try_next() => event,
                () = &mut overall => {
                    return Err(Error::StartFailed(format!(
                        "pod {name} was not ready within {:?}", self.cfg.start_timeout
                    )));
                }
                () = unschedulable_timer => {
                    let why = unschedulable.map(|(_, m)| m).unwrap_or_default();
                    return Err(Error::StartFailed(format!(
                        "pod {name} stayed unschedulable for {:?}: {why}", self.cfg.unschedulable_timeout
                    )));
                }
            };
            let pod = match event {
                Ok(Some(Event::Apply(pod) | Event::InitApply(pod))) => pod,
                Ok(Some(Event::Delete(pod))) => {
                    return Err(Error::StartFailed(format!(
                        "pod {name} was deleted while starting ({})",
                        status::deleted_reason(&pod)
                    )));
                }
                Ok(Some(Event::InitDone)) if !seen => {
                    return Err(Error::StartFailed(format!(
                        "pod {name} was deleted while starting"
                    )));
                }
                Ok(Some(Event::Init | Event::InitDone)) => continue,
                Ok(None) => {
                    return Err(Error::StartFailed(format!("the watch of pod {name} ended")));
                }
                Err(e) => {
                    // The backoff retries; a re-list follows.
                    tracing::debug!(pod = name, error = %e, "watch of a starting pod");
                    continue;
                }
            };
            seen = true;
            match status::progress(&pod) {
                Progress::Ready { ip } => return Ok(ip),
                Progress::Failed(why) => {
                    return Err(Error::StartFailed(format!("pod {name}: {why}")));
                }
                Progress::Pending {
                    unschedulable: Some(message),
                } => {
                    if unschedulable.is_none() {
                        unschedulable = Some((tokio::time::Instant::now(), message));
                    }
                }
                Progress::Pending {
                    unschedulable: None,
                } => unschedulable = None,
            }
        }
    }

    /// The agent of a ready pod answers (its readiness probe opened a TCP
    /// connection; a ping proves the protocol and the token).
    async fn ping(&self, address: &str, token: &str) -> Result<(), Error> {
        let mut last = None;
        for attempt in 0..5u32 {
            let pinged = client::ping(address, Some(token), self.epoch());
            match tokio::time::timeout(self.cfg.agent_timeout, pinged).await {
                Ok(Ok(Frame::Pong { .. })) => return Ok(()),
                Ok(Ok(other)) => {
                    return Err(Error::StartFailed(format!(
                        "agent at {address} answered the ping with {other:?}"
                    )));
                }
                Ok(Err(e)) => last = Some(e.to_string()),
                Err(_) => last = Some("no answer in time".to_owned()),
            }
            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
        }
        Err(Error::StartFailed(format!(
            "agent at {address} did not answer: {}",
            last.unwrap_or_default()
        )))
    }

    async fn stop(&self, pod_id: &str) {
        let name = {
            let mut pods = lock(&self.pods);
            let name = pods.names.remove(pod_id);
            if let Some(l) = name.as_ref().and_then(|n| pods.live.remove(n)) {
                l.forget();
            }
            name
        };
        if let Some(name) = name {
            self.delete(&name).await;
        }
    }

    async fn adopt(
        self: &Arc<Self>,
        profiles: Vec<Profile>,
        claims: Vec<Claim>,
    ) -> Result<Adoption, Error> {
        let lp = ListParams::default().labels(&self.cfg.template.selector());
        let list = self.pods_api.list(&lp).await.map_err(|e| {
            Error::Io(std::io::Error::other(format!(
                "listing the install's pods: {e}"
            )))
        })?;
        let claimed: HashMap<&str, &str> = claims
            .iter()
            .map(|c| (c.pod_id.as_str(), c.job_id.as_str()))
            .collect();
        // What an idle pod of each profile must be made from to serve it now.
        let hashes: HashMap<String, String> = profiles
            .iter()
            .map(|p| (p.name.clone(), self.cfg.template.spec_hash(p)))
            .collect();
        let mut adoption = Adoption::default();
        for kpod in list.items {
            let Some(name) = kpod.metadata.name.clone() else {
                continue;
            };
            if lock(&self.pods).live.contains_key(&name) {
                continue;
            }
            let holder = holder_epoch(&kpod);
            if holder > self.epoch() {
                tracing::info!(pod = name, holder, "not adopted: a newer leader holds it");
                continue;
            }
            let made_as = kpod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(spec::SPEC_HASH_ANNOTATION));
            match self.examine(&name, &kpod, &claimed, &hashes, made_as).await {
                Some((adopted, busy)) => {
                    self.hold(&name).await;
                    // Driven as if started here, under its own name.
                    {
                        let mut pods = lock(&self.pods);
                        let address = Some(adopted.pod.address.clone());
                        pods.live.insert(name.clone(), Live::new(&name, address));
                        pods.names.insert(name.clone(), name.clone());
                    }
                    if busy {
                        adoption.busy.push(adopted);
                    } else {
                        adoption.standby.push(adopted);
                    }
                }
                None => {
                    if self.delete(&name).await {
                        adoption.removed += 1;
                    }
                }
            }
        }
        Ok(adoption)
    }

    /// Whether pod `name` can be kept, and as busy or idle.
    async fn examine(
        &self,
        name: &str,
        kpod: &KubePod,
        claimed: &HashMap<&str, &str>,
        hashes: &HashMap<String, String>,
        made_as: Option<&String>,
    ) -> Option<(Adopted, bool)> {
        let Progress::Ready { ip } = status::progress(kpod) else {
            tracing::info!(pod = name, "not adopted: not ready");
            return None;
        };
        let profile = kpod
            .metadata
            .labels
            .as_ref()?
            .get(spec::PROFILE_LABEL)?
            .clone();
        let token = self.cfg.secret.token(name);
        let address = format!("tcp:{ip}:{}", self.cfg.template.agent_port);
        let asked = client::status(&address, Some(&token), self.epoch());
        let holding = match tokio::time::timeout(self.cfg.agent_timeout, asked).await {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                tracing::info!(pod = name, error = %e, "not adopted: its agent refused");
                return None;
            }
            Err(_) => {
                tracing::info!(pod = name, "not adopted: its agent did not answer");
                return None;
            }
        };
        let pod = Pod {
            pod_id: name.to_owned(),
            address,
            peer_host: ip,
            token: Some(token),
        };
        if holding.busy {
            let runs_claimed = holding
                .job_id
                .as_deref()
                .is_some_and(|j| claimed.get(name) == Some(&j));
            if !runs_claimed {
                tracing::info!(pod = name, job = ?holding.job_id, "not adopted: busy with a job no claim names");
                return None;
            }
            return Some((
                Adopted {
                    pod,
                    profile,
                    holding,
                },
                true,
            ));
        }
        if hashes.get(&profile) != made_as {
            tracing::info!(pod = name, %profile, "not adopted: its profile is gone or made differently now");
            return None;
        }
        // Idle: wiped, it is standby capacity (nothing of its last caller stays).
        let wiped = client::wipe(&pod.address, pod.token.as_deref(), self.epoch());
        match tokio::time::timeout(self.cfg.agent_timeout, wiped).await {
            Ok(Ok(())) => Some((
                Adopted {
                    pod,
                    profile,
                    holding,
                },
                false,
            )),
            _ => {
                tracing::info!(pod = name, "not adopted: the wipe failed");
                None
            }
        }
    }
}

impl Runtime for KubeRuntime {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    fn mechanisms(&self) -> Vec<Mechanism> {
        let m = |name: &str, detail: &str| Mechanism {
            name: name.to_owned(),
            available: true,
            detail: detail.to_owned(),
        };
        vec![
            m(
                "pod",
                "one Kubernetes pod per Hearth pod; the pod is the sandbox",
            ),
            m("cgroup.memory", "the pod's memory limit"),
            m("cgroup.cpu", "the pod's CPU limit"),
            m(
                "seccomp",
                "RuntimeDefault, no capabilities, read-only root filesystem, non-root",
            ),
            m(
                "network-isolation",
                "a NetworkPolicy (deploy/): only brokers reach agents",
            ),
            m(
                "agent-token",
                "an HMAC of the pod id under the install secret, from a Secret",
            ),
        ]
    }

    fn start_pod(&self, spec: PodSpec) -> BoxFuture<'_, Result<Pod, Error>> {
        Box::pin(async move { self.inner.start(spec).await })
    }

    fn stop_pod(&self, pod_id: &str) -> BoxFuture<'_, Result<(), Error>> {
        let pod_id = pod_id.to_owned();
        Box::pin(async move {
            self.inner.stop(&pod_id).await;
            Ok(())
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<PodEvent> {
        self.inner.events.subscribe()
    }

    fn set_epoch(&self, epoch: u64) {
        self.inner.epoch.store(epoch, Ordering::SeqCst);
    }

    fn adopt(
        &self,
        profiles: Vec<Profile>,
        claims: Vec<Claim>,
    ) -> BoxFuture<'_, Result<Adoption, Error>> {
        Box::pin(async move { self.inner.adopt(profiles, claims).await })
    }

    /// Pods outlive the service: the next leader adopts them.
    fn shutdown(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }
}
