//! Where pods come from. The [`Runtime`] trait starts and stops pods and
//! reports pods that vanish; [`client`] talks to the agent inside a pod over
//! its address. Nothing above this crate knows whether a pod is a local
//! sandboxed process tree or a Kubernetes pod.
//!
//! Runtimes: [`local`] (the embedded default) and, in the `hearth-kube`
//! crate (its dependencies stay out of the agent's build), Kubernetes.

use std::collections::BTreeMap;
use std::fmt;

use futures::future::BoxFuture;
use hearth_core::Profile;
use serde::Serialize;
use tokio::sync::broadcast;

pub mod client;
pub mod local;

/// Where tests find the `hearth-agent` binary: `HEARTH_AGENT_BIN`, or the
/// workspace's build beside the test executable (`<target>/<profile>/deps/<test>`
/// -> `<target>/<profile>/hearth-agent`).
///
/// # Panics
/// The binary is not there.
#[doc(hidden)]
pub fn test_agent_bin() -> std::path::PathBuf {
    let path = std::env::var_os("HEARTH_AGENT_BIN").map_or_else(
        || {
            let exe = std::env::current_exe().expect("the test executable's path");
            exe.parent()
                .and_then(std::path::Path::parent)
                .expect("a target dir")
                .join("hearth-agent")
        },
        std::path::PathBuf::from,
    );
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first (or set HEARTH_AGENT_BIN)",
        path.display()
    );
    path
}

/// What the service asks a runtime to start.
#[derive(Debug, Clone)]
pub struct PodSpec {
    /// Chosen by the service; unique for the life of the deployment.
    pub pod_id: String,
    pub profile: Profile,
    /// Physical GPU indices the pod may use (empty for CPU profiles).
    pub gpu_devices: Vec<u32>,
    /// Free-form labels (tenant, pool) for the runtime's own bookkeeping.
    pub labels: BTreeMap<String, String>,
}

/// A started pod whose agent has answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub pod_id: String,
    /// Where the agent listens: `unix:/path` or `tcp:host:port`.
    pub address: String,
    /// The host other pods of a gang use to reach this one.
    pub peer_host: String,
    /// The pod's token, sent with every agent request. `None` for an agent
    /// on a unix socket only the service can reach.
    pub token: Option<String>,
}

/// A job the store says is running, and on which pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub job_id: String,
    pub pod_id: String,
}

/// What a pod left by an earlier leader holds, as its agent reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    pub busy: bool,
    pub job_id: Option<String>,
    pub caller: Option<String>,
    /// Dependency environments already built in the pod.
    pub envs: Vec<String>,
}

/// A pod kept by [`Runtime::adopt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub pod: Pod,
    pub profile: String,
    pub holding: Holding,
}

/// What [`Runtime::adopt`] did with the pods an earlier run left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adoption {
    /// Idle pods, wiped: standby capacity for the scheduler's pools. The
    /// runtime drives them as if it had started them (under their own
    /// names as pod ids): stopping one deletes it, losing one is announced.
    pub standby: Vec<Adopted>,
    /// Busy pods running the job their claim names.
    pub busy: Vec<Adopted>,
    /// Pods deleted (unreachable, busy without a claim, or not adoptable).
    pub removed: usize,
}

/// Something that happened to a pod without the service asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodEvent {
    /// The pod is gone (its agent died, the node went away, ...). `reason`
    /// starts with a code (`deleted`, `evicted`, `oom_killed`, `node_lost`,
    /// `failed`, `exited`), then `: ` and what the runtime knows.
    Gone { pod_id: String, reason: String },
}

/// One isolation mechanism and whether this runtime can use it here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mechanism {
    /// `namespaces`, `cgroup.memory`, `cgroup.cpu`, `cgroup.pids`, `network-isolation`, ...
    pub name: String,
    pub available: bool,
    /// How it is provided, or why it is missing.
    pub detail: String,
}

/// Errors a runtime or agent exchange can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("pod {0} not found")]
    PodNotFound(String),
    #[error("pod failed to start: {0}")]
    StartFailed(String),
    /// What makes pods could not be reached or was overloaded (the
    /// Kubernetes API server answered 429 or 5xx, or not at all): the same
    /// start may well succeed a moment later, so it says nothing about the
    /// profile.
    #[error("pods cannot be started now: {0}")]
    Unavailable(String),
    #[error("agent at {address}: {message}")]
    Agent { address: String, message: String },
    #[error("agent protocol: {0}")]
    Protocol(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Error {
    /// Whether the same request may succeed if tried again later, the pod
    /// and profile being as they are.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }
}

/// Starts, stops and watches pods. Implementations must be cheap to share
/// (`Arc<dyn Runtime>`) and safe to call concurrently.
pub trait Runtime: Send + Sync + fmt::Debug + 'static {
    /// `local` or `kubernetes`.
    fn name(&self) -> &'static str;

    /// The isolation mechanisms this runtime provides on this machine. Missing
    /// ones are reported, never silently skipped.
    fn mechanisms(&self) -> Vec<Mechanism>;

    /// Starts a pod and returns once its agent answers a ping.
    fn start_pod(&self, spec: PodSpec) -> BoxFuture<'_, Result<Pod, Error>>;

    /// Stops a pod and removes everything it held. Stopping a pod that is
    /// already gone succeeds.
    fn stop_pod(&self, pod_id: &str) -> BoxFuture<'_, Result<(), Error>>;

    /// Pods that vanish on their own are announced here.
    fn subscribe(&self) -> broadcast::Receiver<PodEvent>;

    /// The leadership epoch of the scheduler driving this runtime, carried
    /// on the runtime's own agent requests (the scheduler passes it on its).
    fn set_epoch(&self, epoch: u64);

    /// Takes over the pods an earlier run of the service left: asks each
    /// agent its status, keeps idle ones (wiped) of a configured profile,
    /// made as `profiles` would make them now, as standby, keeps busy ones
    /// that a `claims` entry says run that job, and deletes the rest. A
    /// runtime whose pods die with the service (local) removes them all.
    fn adopt(
        &self,
        profiles: Vec<Profile>,
        claims: Vec<Claim>,
    ) -> BoxFuture<'_, Result<Adoption, Error>>;

    /// The service is stopping. Pods that die with it (local) are removed;
    /// pods that outlive it (Kubernetes) stay for the next leader to adopt.
    fn shutdown(&self) -> BoxFuture<'_, Result<(), Error>>;
}
