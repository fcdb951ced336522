//! The pool policy: a pure state machine over events and a clock.
//!
//! One [`Pool`] per hardware profile. The driver (the live scheduler, or the
//! simulator) feeds it [`Event`]s stamped with an [`Instant`](crate::Instant) through
//! [`Pool::handle`] and carries out the [`Decision`]s it pushes: start a pod,
//! promote a standby pod, assign a job to a pod, reset or release a pod, and
//! notes of the budget. Every decision carries a [`Reason`], structured for
//! the API and readable through `Display`.
//!
//! The protocol, from the driver's side:
//!
//! * `JobQueued` when a job is accepted. The policy answers with `Assign` at
//!   once (warm, or standby after a `Promote`), or with `StartPod` and later,
//!   on that pod's `PodReady`, with `Assign` (cold). A job it cannot place
//!   waits in its queue (priority, then FIFO) until capacity frees.
//! * `Assign` means: this pod is the job's and is ready; bind and run. For a
//!   gang (several pods), all of the job's `Assign`s come together.
//! * `JobFinished` when a job ends for any reason, including cancellation
//!   before it started.
//! * `PodReady` when a started pod's agent is up; `PodGone` when a pod no
//!   longer exists, whether the policy released it or the runtime lost it.
//!   A released pod keeps its GPUs in the books until `PodGone`, so nothing
//!   is ever over-committed while pods drain.
//! * `Tick` whenever the driver likes; it must at least call at
//!   [`Pool::next_wakeup`] so keep-alives expire, re-warms happen and the
//!   budget follows falling demand.
//! * `LoopBusy` when a caller this pool knows starts or stops running jobs
//!   in another pool (another profile): a caller across profiles is one
//!   loop. A driver that never sends it gets per-pool loops.
//! * `Prewarm` means: this standby pod now holds the caller's full
//!   placement and is its warm pod; its next job is assigned to it.
//! * `Reset` means: wipe this pod before its next job; it is standby and
//!   holds the placement the decision names.
//!
//! `firepool` chooses each caller's keep-alive against the pool's
//! start-latency objective ([`ObjectiveConfig`], p90 at a warm start by
//! default) at the least capacity the callers' pauses allow (see
//! `objective`), and re-warms callers whose bursts come at a regular period
//! ahead of the next burst instead of holding their pods through the pause
//! ([`RewarmConfig`]). Every keep-alive it releases on says how it was
//! chosen ([`Basis`]). A pod past its keep-alive while standby is short of
//! its target becomes a standby pod (`Reset` to a standby share) rather
//! than being released while another starts.
//!
//! This module may not do I/O or read a clock; it owns no runtime handles.
//! Pod ids are allocated here so the driver can map them to runtime pods.

mod gpu;
mod objective;
mod pool;
mod stats;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use hearth_core::{Source, StartClass, StartObjective};
pub use pool::Pool;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident, $label:literal) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($label, " {}"), self.0)
            }
        }
    };
}

id!(
    /// A job, numbered by the driver (the scheduler maps its UUIDs).
    JobId,
    "job"
);
id!(
    /// A pod, numbered by the policy when it decides to start one.
    PodId,
    "pod"
);
id!(
    /// A caller (one loop of one tenant), numbered by the driver; unique
    /// across tenants. Warm reuse is keyed by it.
    CallerId,
    "caller"
);
id!(
    /// A tenant, numbered by the driver.
    TenantId,
    "tenant"
);

/// An amount of GPU, in shares of one GPU (a GPU has
/// [`Config::shares_per_gpu`] shares). A pod's size is either a share of one
/// GPU (fewer shares than a GPU) or whole GPUs (a multiple).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Shares(pub u32);

impl Shares {
    /// The amount in GPUs.
    pub fn gpus(self, shares_per_gpu: u32) -> f64 {
        f64::from(self.0) / f64::from(shares_per_gpu.max(1))
    }

    /// `gpus` GPUs in shares, if it is a whole number of shares.
    pub fn from_gpus(gpus: f64, shares_per_gpu: u32) -> Option<Shares> {
        let shares = gpus * f64::from(shares_per_gpu);
        let rounded = shares.round();
        let fits = gpus.is_finite()
            && gpus >= 0.0
            && (shares - rounded).abs() < 1e-6
            && rounded <= f64::from(u32::MAX);
        fits.then_some(Shares(rounded as u32))
    }

    /// Whether a pod of this size can be placed: a share of one GPU, or whole
    /// GPUs.
    pub fn is_pod_size(self, shares_per_gpu: u32) -> bool {
        self.0 < shares_per_gpu || self.0.is_multiple_of(shares_per_gpu)
    }
}

/// The named policies, for comparison. Only [`Kind::Firepool`] uses every
/// mechanism; the others are the baselines it is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `fresh`: a new pod per job, released when the job ends.
    Fresh,
    /// `always-on[:<pods>]`: a fixed pool of pods, started up front and never
    /// released; a pod idle for one caller is reset for another only when no
    /// free pod is left. Without a size, [`Config::max_pods`].
    AlwaysOn { size: Option<u32> },
    /// `keepalive:<seconds>`: warm reuse with a fixed keep-alive, no standby,
    /// no budget.
    KeepAlive { keep_alive: Duration },
    /// `firepool`: caller affinity, standby, budgets and keep-alive matched
    /// to each caller's pauses.
    Firepool,
}

impl Kind {
    /// The policies `simulate --compare` runs by default.
    pub fn comparison_set() -> Vec<Kind> {
        vec![
            Kind::Fresh,
            Kind::AlwaysOn { size: None },
            Kind::KeepAlive {
                keep_alive: Duration::from_secs(60),
            },
            Kind::Firepool,
        ]
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Fresh => f.write_str("fresh"),
            Kind::AlwaysOn { size: None } => f.write_str("always-on"),
            Kind::AlwaysOn { size: Some(n) } => write!(f, "always-on:{n}"),
            Kind::KeepAlive { keep_alive } => {
                let ms = crate::time::millis(*keep_alive);
                if ms.is_multiple_of(1000) {
                    write!(f, "keepalive:{}", ms / 1000)
                } else {
                    write!(f, "keepalive:{}", ms as f64 / 1000.0)
                }
            }
            Kind::Firepool => f.write_str("firepool"),
        }
    }
}

impl FromStr for Kind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Kind, Error> {
        let unknown = || Error::UnknownPolicy(s.to_owned());
        let (name, arg) = match s.split_once(':') {
            Some((name, arg)) => (name, Some(arg)),
            None => (s, None),
        };
        match (name, arg) {
            ("fresh", None) => Ok(Kind::Fresh),
            ("firepool", None) => Ok(Kind::Firepool),
            ("always-on", None) => Ok(Kind::AlwaysOn { size: None }),
            ("always-on", Some(n)) => match n.parse::<u32>() {
                Ok(n) if n > 0 => Ok(Kind::AlwaysOn { size: Some(n) }),
                _ => Err(unknown()),
            },
            ("keepalive", Some(secs)) => match secs.parse::<f64>() {
                Ok(secs) if (0.0..1e9).contains(&secs) => Ok(Kind::KeepAlive {
                    keep_alive: Duration::from_millis((secs * 1000.0).round() as u64),
                }),
                _ => Err(unknown()),
            },
            _ => Err(unknown()),
        }
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A floor and a ceiling, in shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    pub floor: Shares,
    pub ceiling: Shares,
}

impl Bounds {
    /// No floor, no ceiling.
    pub const UNBOUNDED: Bounds = Bounds {
        floor: Shares(0),
        ceiling: Shares(u32::MAX),
    };

    fn clamp(self, shares: f64) -> Shares {
        let lo = f64::from(self.floor.0);
        let hi = f64::from(self.ceiling.0.max(self.floor.0));
        Shares(shares.ceil().clamp(lo, hi) as u32)
    }
}

/// Configuration of one pool (one hardware profile).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Physical GPUs in the pool's inventory.
    pub gpus: u32,
    /// Shares each GPU divides into; the smallest allocation is one share.
    pub shares_per_gpu: u32,
    /// A pod's size when a job does not ask for another: whole GPUs (a
    /// multiple of `shares_per_gpu`) or a share of one GPU (fewer). Zero for
    /// CPU profiles, whose pods hold no GPU and which budgets do not limit.
    pub pod_shares: Shares,
    /// Most pods alive at once, draining ones included.
    pub max_pods: u32,
    pub standby: StandbyConfig,
    pub budget: BudgetConfig,
    pub keep_alive: KeepAliveConfig,
    /// The start-latency objective `firepool` chooses each caller's
    /// keep-alive against. `None`: keep-alives follow
    /// [`KeepAliveConfig::percentile`] of each caller's pauses instead.
    pub objective: Option<ObjectiveConfig>,
    pub rewarm: RewarmConfig,
    /// How long a pod is expected to take to start, until starts are observed.
    pub start_estimate: Duration,
    /// How often budget and standby target are reviewed while idle pods are
    /// held (the driver learns it through [`Pool::next_wakeup`]).
    pub review_every: Duration,
    /// A caller with no pods and no jobs for this long is forgotten, pause
    /// history included, so memory follows live callers.
    pub caller_ttl: Duration,
}

/// Standby pods: started, unbound, zero VRAM, one small GPU share each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StandbyConfig {
    /// The target never falls below this many pods.
    pub min: u32,
    /// Nor rises above this many.
    pub max: u32,
    /// Handovers the pool expects as it opens (callers that arrive together
    /// before any has a pod, such as a trainer's workers): counted as a
    /// burst seen at its start, they size the standby target like any
    /// other until `horizon` forgets them.
    pub initial: u32,
    /// What one standby pod holds.
    pub shares: Shares,
    /// Between `min` and `max`, the target is the largest number of handovers
    /// (jobs that found no warm pod) seen within one pod start time, over this
    /// horizon: enough standby to absorb a repeat of the recent worst burst
    /// while replacements start.
    pub horizon: Duration,
}

/// The budget on GPUs held by warm plus standby pods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// Bounds of the pool's budget.
    pub pool: Bounds,
    /// Bounds of each tenant's budget for its warm pods, unless `tenants`
    /// says otherwise. A tenant's budget is its share of the pool's budget
    /// (after standby) in proportion to its demand, within these bounds; a
    /// tenant at its floor is spared when the pool is over budget.
    pub tenant: Bounds,
    pub tenants: BTreeMap<TenantId, Bounds>,
    /// Demand is queued pods plus the pods expected to arrive within this
    /// horizon at the recent arrival rate. Keep it at least as long as the
    /// keep-alives in use: a caller with one job per horizon then still
    /// counts for one pod.
    pub horizon: Duration,
    /// Time constant of the exponentially weighted arrival rate.
    pub rate_window: Duration,
}

/// Keep-alive matched to each caller's pauses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeepAliveConfig {
    /// For callers with fewer than `min_samples` observed pauses while the
    /// pool's own pauses cannot choose for them (too few yet, or no
    /// objective).
    pub default: Duration,
    pub min: Duration,
    pub max: Duration,
    /// Which percentile of the caller's recent pauses, in (0, 1].
    pub percentile: f64,
    /// Added to the percentile.
    pub margin: Duration,
    /// Pauses remembered per caller (most recent), at most 256.
    pub history: u32,
    /// Pauses a caller must have made before its own choose its keep-alive.
    /// Fewer cannot show the tail a 90th percentile is about: the longest
    /// of `n` pauses is past their 90th percentile with a chance of
    /// 1 - 0.9^n, 34 % for 4 and 72 % for 12. Trusted sooner, a caller
    /// whose first pauses happen to be short gets a keep-alive shorter than
    /// its usual long pause, and every such pause costs its loop a pod start
    /// (agent sessions with heavy-tailed think times lost a tenth of their
    /// loop speed-up so); trusted later, periodic callers hold their pods
    /// through more of their first pauses. Raise it for an objective
    /// further out (a 99th percentile). Until then, against an objective,
    /// the pool's recent pauses (every caller's, once it has seen 64)
    /// choose the caller's keep-alive as its own would (`Basis::Pooled`);
    /// before that, `default` does.
    pub min_samples: u32,
}

/// A start-latency objective: at least `percentile` of the pool's jobs start
/// within `class` (a warm pod of their caller, or a warm or standby pod).
/// `firepool` reaches it at the least capacity its pauses allow: each
/// caller's keep-alive is the one whose extra warm starts are worth their
/// price, and the price is the lowest at which the pool's predicted share of
/// jobs within the class meets the objective. The price never falls below
/// what a handover costs (a standby refill: one pod start at the standby
/// share), so a pod is never released where keeping it is cheaper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ObjectiveConfig {
    /// In (0, 1): 0.9 for a p90 objective.
    pub percentile: f64,
    /// `warm` (p90 at a warm start) or `standby` (p90 at a promotion at
    /// worst; keep-alives are then chosen by cost alone).
    pub class: StartClass,
    /// Aimed above `percentile`, for what the pause history does not
    /// predict (first jobs, concurrent jobs, pauses longer than any seen).
    pub slack: f64,
    /// Added to each candidate keep-alive, relative to the pause it covers.
    pub margin: f64,
    /// How often the price is recomputed from the callers' pauses.
    pub review_every: Duration,
}

/// Re-warming ahead of periodic bursts (RL steps). A caller's burst starts
/// when its loop comes back from a quiet gap of at least `min_gap` (no job
/// in flight in any pool), here or in another pool: a gap here while the
/// loop runs elsewhere splits no burst. Once the gaps between burst starts
/// (the period) are regular, a pod is not held through the pause: it is
/// released, and a standby pod is bound to the caller `lead` before the
/// next burst is due (later by how long its bursts take to reach this
/// pool). A loop whose steps alternate two kinds (a long pause every other
/// step) is periodic where each kind is, every other period predicting the
/// next. Until then, and while a binding would come after the earliest
/// burst, its bursts are expected to take standby pods, counted in the
/// standby target from a pod start before they are due, and sooner by half
/// the spread of its regular periods, for a step whose pause was short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewarmConfig {
    pub enabled: bool,
    /// Shortest quiet gap that ends a burst.
    pub min_gap: Duration,
    /// Periods remembered per caller, at most 256.
    pub history: u32,
    /// Periods needed before a caller counts as periodic.
    pub min_periods: u32,
    /// Largest spread of the remembered periods (longest minus shortest,
    /// over the shortest) of a periodic caller: 1 by default, the longest
    /// at most twice the shortest. A wide spread costs a re-warm only what
    /// its curve charges (a binding early enough for the short periods
    /// holds the pod longer before the long ones), so the spread bounds
    /// what counts as a loop's step at all, not what is worth re-warming:
    /// a pause of 60 s jittered by a quarter is re-warmed ahead of, not
    /// held through.
    pub max_spread: f64,
    /// How long before the earliest predicted burst the pod is bound: the
    /// promotion, and a margin. 2 s by default: a promotion of about 1 s
    /// and as much again. Each second of it holds every re-warmed pod at
    /// its full size before its burst; a burst that comes before its
    /// binding is done waits only for the rest of it.
    pub lead: Duration,
    /// A re-warmed pod waits this long past the latest predicted burst.
    pub grace: Duration,
    /// A pod that would be re-warmed within this long of its release is
    /// held through instead (the release would save less than a refill).
    pub hold_under: Duration,
}

/// A profile's objective, with the policy's defaults for the rest.
impl From<StartObjective> for ObjectiveConfig {
    fn from(o: StartObjective) -> ObjectiveConfig {
        ObjectiveConfig {
            percentile: o.percentile,
            class: o.class,
            ..ObjectiveConfig::default()
        }
    }
}

impl Default for ObjectiveConfig {
    fn default() -> ObjectiveConfig {
        ObjectiveConfig {
            percentile: 0.9,
            class: StartClass::Warm,
            slack: 0.03,
            margin: 0.1,
            review_every: Duration::from_secs(5),
        }
    }
}

impl Default for RewarmConfig {
    fn default() -> RewarmConfig {
        RewarmConfig {
            enabled: true,
            min_gap: Duration::from_secs(10),
            history: 8,
            min_periods: 3,
            max_spread: 1.0,
            lead: Duration::from_secs(2),
            grace: Duration::from_secs(5),
            hold_under: Duration::from_secs(5),
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            gpus: 8,
            shares_per_gpu: 8,
            pod_shares: Shares(8),
            max_pods: 64,
            standby: StandbyConfig::default(),
            budget: BudgetConfig::default(),
            keep_alive: KeepAliveConfig::default(),
            objective: Some(ObjectiveConfig::default()),
            rewarm: RewarmConfig::default(),
            start_estimate: Duration::from_secs(30),
            review_every: Duration::from_secs(1),
            caller_ttl: Duration::from_secs(3600),
        }
    }
}

impl Default for StandbyConfig {
    fn default() -> StandbyConfig {
        StandbyConfig {
            min: 2,
            max: 64,
            initial: 0,
            shares: Shares(1),
            horizon: Duration::from_secs(120),
        }
    }
}

impl Default for BudgetConfig {
    fn default() -> BudgetConfig {
        BudgetConfig {
            pool: Bounds::UNBOUNDED,
            tenant: Bounds::UNBOUNDED,
            tenants: BTreeMap::new(),
            horizon: Duration::from_secs(120),
            rate_window: Duration::from_secs(60),
        }
    }
}

impl Default for KeepAliveConfig {
    fn default() -> KeepAliveConfig {
        KeepAliveConfig {
            default: Duration::from_secs(120),
            min: Duration::from_secs(1),
            max: Duration::from_secs(600),
            percentile: 0.9,
            margin: Duration::from_secs(2),
            history: 64,
            min_samples: 12,
        }
    }
}

#[cfg(test)]
impl KeepAliveConfig {
    /// For scripted callers, which pause alike from their first job: a few
    /// pauses tell.
    pub(crate) fn scripted() -> KeepAliveConfig {
        KeepAliveConfig {
            min_samples: 4,
            ..KeepAliveConfig::default()
        }
    }
}

impl Config {
    /// A pool of `gpus` GPUs for `profile`: pod size, pod limit, default
    /// keep-alive and start-latency objective come from the profile.
    pub fn for_profile(profile: &hearth_core::Profile, gpus: u32) -> Config {
        let base = Config::default();
        Config {
            gpus,
            pod_shares: Shares(profile.gpus.saturating_mul(base.shares_per_gpu)),
            max_pods: profile.max_pods,
            keep_alive: KeepAliveConfig {
                default: Duration::from_secs(u64::from(profile.keep_alive_s)),
                ..base.keep_alive.clone()
            },
            objective: Some(profile.start_objective.into()),
            ..base
        }
    }

    /// Checks the configuration is self-consistent.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::Config(m.to_owned()));
        let ka = &self.keep_alive;
        if self.shares_per_gpu == 0 {
            return bad("shares_per_gpu must be at least 1");
        }
        if !self.pod_shares.is_pod_size(self.shares_per_gpu) {
            return bad("pod_shares must be whole GPUs or a share of one GPU");
        }
        if self.standby.shares.0 > self.shares_per_gpu {
            return bad("a standby pod holds at most one GPU");
        }
        if self.standby.min > self.standby.max {
            return bad("standby.min exceeds standby.max");
        }
        if !(ka.percentile > 0.0 && ka.percentile <= 1.0) {
            return bad("keep_alive.percentile must be in (0, 1]");
        }
        if ka.min > ka.max {
            return bad("keep_alive.min exceeds keep_alive.max");
        }
        if ka.history == 0 || ka.history > 256 {
            return bad("keep_alive.history must be 1..=256");
        }
        if ka.min_samples == 0 || ka.min_samples > ka.history {
            return bad("keep_alive.min_samples must be 1..=history");
        }
        if let Some(o) = &self.objective {
            if !(o.percentile > 0.0 && o.percentile < 1.0) {
                return bad("objective.percentile must be in (0, 1)");
            }
            if !(0.0..1.0).contains(&o.slack) || !(0.0..=10.0).contains(&o.margin) {
                return bad("objective.slack must be in [0, 1) and objective.margin in [0, 10]");
            }
            if o.review_every.is_zero() {
                return bad("objective.review_every must be positive");
            }
        }
        let r = &self.rewarm;
        if r.history < 2 || r.history > 256 || r.min_periods == 0 || r.min_periods > r.history {
            return bad("rewarm.history must be 2..=256 and rewarm.min_periods 1..=history");
        }
        if !(r.max_spread >= 0.0 && r.max_spread.is_finite()) {
            return bad("rewarm.max_spread must be non-negative");
        }
        let b = &self.budget;
        for bounds in std::iter::once(&b.pool)
            .chain(std::iter::once(&b.tenant))
            .chain(b.tenants.values())
        {
            if bounds.floor > bounds.ceiling {
                return bad("a budget floor exceeds its ceiling");
            }
        }
        if b.rate_window.is_zero() || self.review_every.is_zero() {
            return bad("budget.rate_window and review_every must be positive");
        }
        Ok(())
    }

    /// The budget bounds of `tenant`'s warm pods.
    pub fn tenant_bounds(&self, tenant: TenantId) -> Bounds {
        self.budget
            .tenants
            .get(&tenant)
            .copied()
            .unwrap_or(self.budget.tenant)
    }
}

/// A job asking for pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub job: JobId,
    pub caller: CallerId,
    pub tenant: TenantId,
    /// Size of each pod; `None` for the pool's [`Config::pod_shares`].
    pub shares: Option<Shares>,
    /// Pods of a gang; all start together. At least 1.
    pub pods: u32,
    /// Higher runs first; FIFO within a priority.
    pub priority: i32,
}

impl Request {
    /// A one-pod job of the profile's size at priority 0.
    pub fn new(job: JobId, caller: CallerId, tenant: TenantId) -> Request {
        Request {
            job,
            caller,
            tenant,
            shares: None,
            pods: 1,
            priority: 0,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A job was accepted and waits for pods.
    JobQueued(Request),
    /// A job ended (succeeded, failed, timed out, or cancelled at any point).
    JobFinished { job: JobId },
    /// A pod the policy started is up and can take a binding.
    PodReady { pod: PodId },
    /// A pod no longer exists: released by the policy, or lost.
    PodGone { pod: PodId },
    /// Pods the policy did not start, which a new leader adopted from the
    /// last one. First the jobs of `running`, each still running on
    /// `pods` pods of its size: their pods are active for it from now, and
    /// the job ends with `JobFinished` like any other (its pods then follow
    /// its caller's keep-alive); a job there is no room for is left out,
    /// changing nothing (the driver keeps its pods outside). Then `idle`
    /// pods, up, unbound and wiped: as many as there is room for, each
    /// handled as a pod that just became ready (the job that waited longest
    /// takes it; otherwise it stands by, or is released where the policy
    /// keeps no standby or has enough). Every pod gets an id and a
    /// placement, announced by [`Decision::Adopted`] before any decision
    /// about it. One event for all, so that the pool counts them all before
    /// it decides what more it needs.
    PodsAdopted { running: Vec<Request>, idle: u32 },
    /// The caller's loop started (`busy`) or stopped running jobs in
    /// another pool: a caller that works across profiles is one loop, and
    /// the pod it holds here idles while it runs there. While it is busy
    /// elsewhere its warm pods here do not expire, and its pauses here are
    /// counted from the end of its last job in any pool. Ignored for a
    /// caller this pool does not know.
    LoopBusy { caller: CallerId, busy: bool },
    /// Time passed.
    Tick,
}

/// One caller's jobs in flight in each pool it has used: a caller that works
/// across profiles is one loop. A driver keeps one per caller and sends each
/// pool the [`Event::LoopBusy`] that [`Loop::moved`] returns, so that the live
/// scheduler and the simulator tell pools the same things.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop<P> {
    /// (pool, jobs in flight there), in the order the pools were first used.
    in_flight: Vec<(P, u32)>,
}

impl<P> Default for Loop<P> {
    fn default() -> Self {
        Loop {
            in_flight: Vec::new(),
        }
    }
}

impl<P: PartialEq + Clone> Loop<P> {
    /// A job of the caller was queued in pool `pool` (`up`), or ended there.
    /// Returns the pools that must hear `LoopBusy { busy }`: `pool` itself
    /// when a job arrives there while the loop runs elsewhere, and each other
    /// pool whose "busy elsewhere" changed.
    pub fn moved(&mut self, pool: &P, up: bool) -> Vec<(P, bool)> {
        let before: Vec<(P, bool)> = self
            .in_flight
            .iter()
            .map(|(q, _)| (q.clone(), self.busy_besides(q)))
            .collect();
        match self.in_flight.iter_mut().find(|(q, _)| q == pool) {
            Some((_, n)) if up => *n += 1,
            Some((_, n)) => *n = n.saturating_sub(1),
            None if up => self.in_flight.push((pool.clone(), 1)),
            None => {}
        }
        let mut tell = Vec::new();
        if up && self.busy_besides(pool) {
            tell.push((pool.clone(), true));
        }
        for (q, was) in before {
            if q != *pool && self.busy_besides(&q) != was {
                tell.push((q, !was));
            }
        }
        tell
    }

    /// Whether the loop runs jobs in a pool other than `pool`.
    pub fn busy_besides(&self, pool: &P) -> bool {
        self.in_flight.iter().any(|(q, n)| q != pool && *n > 0)
    }

    /// Whether no job of the loop is in flight anywhere.
    pub fn is_idle(&self) -> bool {
        self.in_flight.iter().all(|(_, n)| *n == 0)
    }
}

/// Why a pod was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// To be kept unbound, ready for a handover.
    Standby,
    /// For this job. When it becomes ready the policy may give it to another
    /// job (the one that waited longest) or keep it as standby instead.
    ForJob(JobId),
}

/// One slice of a placement: `shares` shares of GPU `gpu` of the pool's
/// inventory (indices 0..`Config::gpus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    pub gpu: u32,
    pub shares: u32,
}

/// Where a pod's GPU shares sit. Empty for pods that hold no GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Placement(pub Vec<Slice>);

impl Placement {
    pub fn shares(&self) -> u32 {
        self.0.iter().map(|s| s.shares).sum()
    }
}

/// What the driver should do.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Start a pod with these GPU shares; report `PodReady` when it is up.
    StartPod {
        pod: PodId,
        purpose: Purpose,
        placement: Placement,
        reason: Reason,
    },
    /// Standby pod `pod` becomes `job`'s: it now holds its full placement.
    /// The `Assign` that binds it follows when the job's pods are all ready.
    Promote {
        pod: PodId,
        job: JobId,
        placement: Placement,
        reason: Reason,
    },
    /// Bind `job` to `pod` and run it; the pod is ready. `source` is how the
    /// job got it: its caller's warm pod, a standby pod that was ready when
    /// the job asked, or cold (the job waited for a pod to start).
    Assign {
        job: JobId,
        pod: PodId,
        source: Source,
        reason: Reason,
    },
    /// Standby pod `pod` is bound to `caller` ahead of its next burst and
    /// becomes its warm pod: it now holds its full placement. The binding
    /// is the caller's last one; the next job of the caller runs on it.
    Prewarm {
        pod: PodId,
        caller: CallerId,
        tenant: TenantId,
        placement: Placement,
        reason: Reason,
    },
    /// Wipe `pod`'s binding before its next job: it becomes standby and
    /// now holds `placement`. The fixed pool keeps its GPUs (a pod
    /// recycled for another caller); `firepool` shrinks it to a standby
    /// share (a warm pod kept as standby rather than released and another
    /// started).
    Reset {
        pod: PodId,
        placement: Placement,
        reason: Reason,
    },
    /// Stop `pod`; report `PodGone` when it is gone. Never an active pod.
    Release { pod: PodId, reason: Reason },
    /// A pod of an [`Event::PodsAdopted`], with its id and placement:
    /// active for the running `job`, or (`None`) an idle one, in the order
    /// the driver listed them.
    Adopted {
        pod: PodId,
        placement: Placement,
        job: Option<JobId>,
    },
    /// The budget on GPUs held by warm plus standby pods changed.
    Budget {
        budget: Shares,
        gpus: f64,
        inputs: BudgetInputs,
    },
}

/// What the budget was computed from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BudgetInputs {
    /// Pods of jobs accepted but not started.
    pub queued_pods: u32,
    /// Recent arrival rate, pods per second (exponentially weighted).
    pub arrival_rate_per_s: f64,
    /// Standby target at the time.
    pub standby_target: u32,
    /// Unclamped demand: standby target plus queued pods plus the pods
    /// expected within the horizon, in shares.
    pub demand: Shares,
    pub floor: Shares,
    pub ceiling: Shares,
}

/// Why a decision was taken. `Display` renders it for people; serde for the
/// API (tagged by `code`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Reason {
    /// The caller's own warm pod, idle since its previous job.
    WarmAffinity { caller: CallerId, idle_ms: u64 },
    /// The caller had no warm pod; a standby pod is promoted (a handover).
    StandbyHandover { caller: CallerId, standby_left: u32 },
    /// The caller had no warm pod and no standby pod was free.
    ColdStart { caller: CallerId },
    /// The job waited `waited_ms` for a pod to start; this one (started for
    /// it, or a standby refill that was ready first) is up. Counts as cold.
    PodStarted { caller: CallerId, waited_ms: u64 },
    /// The fresh policy gives every job a new pod.
    FreshPerJob,
    /// Keeping `target` standby pods; `have` were standing by or starting.
    StandbyRefill { have: u32, target: u32 },
    /// The fixed pool holds `size` pods.
    FixedPool { size: u32 },
    /// The caller was quiet longer than its keep-alive.
    KeepAliveExpired {
        caller: CallerId,
        idle_ms: u64,
        keep_alive_ms: u64,
        basis: Basis,
    },
    /// The caller's bursts come every `period_ms`; the next is due in
    /// `due_in_ms` at the earliest, so a standby pod is bound to it now
    /// rather than a pod held through the pause. Bound now, it serves warm
    /// `covers_permille` of the bursts its recent periods predict: binding
    /// earlier would cost more per warm start than the pool's price.
    Rewarm {
        caller: CallerId,
        period_ms: u64,
        due_in_ms: u64,
        covers_permille: u32,
    },
    /// Warm plus standby pods held more than the pool's budget.
    OverBudget { held: Shares, budget: Shares },
    /// The tenant's warm pods held more than its budget.
    OverTenantBudget {
        tenant: TenantId,
        held: Shares,
        budget: Shares,
    },
    /// An idle pod made room for a job that could not otherwise be placed.
    MakeRoom { job: JobId },
    /// More standby pods than the target.
    StandbySurplus { have: u32, target: u32 },
    /// The caller was quiet longer than its keep-alive, and the pool had
    /// `have` standby pods ready of the `target` (this caller's return
    /// counted among them): its pod, up already, is kept as one, wiped.
    KeptAsStandby {
        caller: CallerId,
        keep_alive_ms: u64,
        have: u32,
        target: u32,
    },
    /// The fresh policy never reuses a pod.
    JobDone { job: JobId },
    /// A pod was started for a job that no longer needs it and nothing else
    /// wants it.
    NotNeeded,
    /// The fixed pool had no free pod: the pod idle longest, warm for
    /// another caller, is wiped and reused.
    Recycled { from: CallerId, to: CallerId },
    /// The caller's job an earlier leader started runs on it; a new leader
    /// took it over.
    Adopted { caller: CallerId },
}

/// How a warm pod's keep-alive was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "basis", rename_all = "snake_case")]
pub enum Basis {
    /// The pool's default: too few pauses seen.
    Default,
    /// The policy's fixed keep-alive.
    Fixed,
    /// A percentile of the caller's pauses, with a margin (no objective).
    Percentile,
    /// Against the pool's objective: the keep-alive covers
    /// `covers_permille` of the caller's recent pauses (those its re-warm
    /// covers included), the most whose extra warm starts cost no more
    /// than the pool's price of `price_share_ms` (GPU shares x ms per warm
    /// start).
    Objective {
        covers_permille: u32,
        price_share_ms: u64,
    },
    /// Against the pool's objective, as `Objective`, from the pool's recent
    /// pauses (every caller's): the caller has made too few of its own
    /// (`keep_alive.min_samples`). The keep-alive covers `covers_permille`
    /// of the pool's pauses.
    Pooled {
        covers_permille: u32,
        price_share_ms: u64,
    },
    /// Held through the pause: the caller's next burst (every `period_ms`)
    /// is due too soon for a release and a re-warm to save anything.
    NextBurst { period_ms: u64 },
    /// Bound ahead of the caller's next burst (every `period_ms`).
    Rewarmed { period_ms: u64 },
    /// Its burst here (every `period_ms`) was done, `jobs` jobs as in its
    /// recent bursts, while its loop ran on in another pool: its keep-alive
    /// ran from its last job here, not from the loop's pause, and its next
    /// burst is re-warmed.
    BurstDone { jobs: u32, period_ms: u64 },
}

impl fmt::Display for Basis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |ms: u64| ms as f64 / 1000.0;
        match *self {
            Basis::Default => f.write_str("the pool's default"),
            Basis::Fixed => f.write_str("the policy's fixed keep-alive"),
            Basis::Percentile => f.write_str("a percentile of its pauses"),
            Basis::Objective {
                covers_permille,
                price_share_ms,
            } => write!(
                f,
                "covers {:.1} % of its pauses at the pool's price of {:.1} share-s per warm start",
                f64::from(covers_permille) / 10.0,
                s(price_share_ms)
            ),
            Basis::Pooled {
                covers_permille,
                price_share_ms,
            } => write!(
                f,
                "too few pauses of its own: covers {:.1} % of the pool's recent pauses at the pool's price of {:.1} share-s per warm start",
                f64::from(covers_permille) / 10.0,
                s(price_share_ms)
            ),
            Basis::NextBurst { period_ms } => {
                write!(f, "held for its next burst (period {:.1} s)", s(period_ms))
            }
            Basis::Rewarmed { period_ms } => {
                write!(
                    f,
                    "re-warmed for its next burst (period {:.1} s)",
                    s(period_ms)
                )
            }
            Basis::BurstDone { jobs, period_ms } => write!(
                f,
                "its burst here was done after {jobs} jobs, as its recent ones (period {:.1} s)",
                s(period_ms)
            ),
        }
    }
}

/// How a reason's text names the callers and tenants it mentions.
pub trait Names {
    fn caller(&self, id: CallerId) -> String;
    fn tenant(&self, id: TenantId) -> String;
}

/// Callers and tenants by number (`caller 3`), as the driver numbered them.
#[derive(Debug, Clone, Copy)]
pub struct ByNumber;

impl Names for ByNumber {
    fn caller(&self, id: CallerId) -> String {
        id.to_string()
    }
    fn tenant(&self, id: TenantId) -> String {
        id.to_string()
    }
}

impl Reason {
    /// The reason as a sentence, callers and tenants named by `names`.
    pub fn describe(&self, names: &dyn Names) -> String {
        let s = |ms: &u64| *ms as f64 / 1000.0;
        let c = |id: &CallerId| names.caller(*id);
        match self {
            Reason::WarmAffinity { caller, idle_ms } => {
                format!("{}'s own warm pod, idle {:.1} s", c(caller), s(idle_ms))
            }
            Reason::StandbyHandover {
                caller,
                standby_left,
            } => format!(
                "{} had no warm pod: standby promoted ({standby_left} left)",
                c(caller)
            ),
            Reason::ColdStart { caller } => {
                format!("{} had no warm pod and no standby was free", c(caller))
            }
            Reason::PodStarted { caller, waited_ms } => {
                format!(
                    "pod started for {}'s job is ready after {:.1} s",
                    c(caller),
                    s(waited_ms)
                )
            }
            Reason::FreshPerJob => "fresh policy: a new pod per job".to_owned(),
            Reason::StandbyRefill { have, target } => {
                format!("standby below target ({have} of {target})")
            }
            Reason::FixedPool { size } => format!("fixed pool of {size} pods"),
            Reason::KeepAliveExpired {
                caller,
                idle_ms,
                keep_alive_ms,
                basis,
            } => format!(
                "{} quiet {:.1} s, past its keep-alive of {:.1} s ({basis})",
                c(caller),
                s(idle_ms),
                s(keep_alive_ms)
            ),
            Reason::Rewarm {
                caller,
                period_ms,
                due_in_ms,
                covers_permille,
            } => format!(
                "{}'s bursts come every {:.1} s, the next in {:.1} s: standby bound to it ahead \
                 (warm for {:.1} % of its recent bursts)",
                c(caller),
                s(period_ms),
                s(due_in_ms),
                f64::from(*covers_permille) / 10.0
            ),
            Reason::OverBudget { held, budget } => format!(
                "warm plus standby hold {} shares, over the budget of {}; idle longest goes first",
                held.0, budget.0
            ),
            Reason::OverTenantBudget {
                tenant,
                held,
                budget,
            } => format!(
                "{}'s warm pods hold {} shares, over its budget of {}",
                names.tenant(*tenant),
                held.0,
                budget.0
            ),
            Reason::MakeRoom { job } => format!("idle pod released to make room for {job}"),
            Reason::StandbySurplus { have, target } => {
                format!("standby above target ({have} of {target})")
            }
            Reason::KeptAsStandby {
                caller,
                keep_alive_ms,
                have,
                target,
            } => format!(
                "{} quiet past its keep-alive of {:.1} s; its pod is wiped and kept as standby ({have} of {target})",
                c(caller),
                s(keep_alive_ms)
            ),
            Reason::JobDone { job } => format!("{job} done; fresh pods are not reused"),
            Reason::NotNeeded => "started pod no longer needed".to_owned(),
            Reason::Recycled { from, to } => {
                format!(
                    "fixed pool full: {}'s idle pod wiped for {}",
                    c(from),
                    c(to)
                )
            }
            Reason::Adopted { caller } => {
                format!(
                    "{}'s running job taken over from an earlier leader",
                    c(caller)
                )
            }
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(&ByNumber))
    }
}

/// Errors of the policy. An event that fails changes nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("invalid pool configuration: {0}")]
    Config(String),
    #[error(
        "unknown policy {0:?}: expected fresh, always-on[:<pods>], keepalive:<seconds> or firepool"
    )]
    UnknownPolicy(String),
    #[error("{0} is already known")]
    DuplicateJob(JobId),
    #[error("unknown {0}")]
    UnknownJob(JobId),
    #[error("unknown {0}")]
    UnknownPod(PodId),
    #[error("{0} is not starting")]
    NotStarting(PodId),
    #[error("event at {now} is before the pool's clock at {last}")]
    ClockBackwards {
        now: crate::Instant,
        last: crate::Instant,
    },
    #[error("{job} can never be placed in this pool: {why}")]
    Unplaceable { job: JobId, why: String },
}

/// Pods by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodCounts {
    pub starting: u32,
    pub standby: u32,
    pub warm: u32,
    /// Ready and held for a gang whose other pods are still starting.
    pub reserved: u32,
    pub active: u32,
    pub draining: u32,
}

/// GPU shares held, by what holds them. Starting pods count under what they
/// start for: pods started for a job under `active`, standby under `standby`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub active: u64,
    pub warm: u64,
    pub standby: u64,
    pub draining: u64,
}

impl Held {
    pub fn total(&self) -> u64 {
        self.active + self.warm + self.standby + self.draining
    }
}

/// A view of the pool for the API.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    pub policy: String,
    pub at: crate::Instant,
    pub pods: PodCounts,
    pub gpus: GpuView,
    /// `None` for policies without a budget.
    pub budget: Option<BudgetView>,
    pub standby_target: u32,
    /// `None` for policies without an objective.
    pub objective: Option<ObjectiveView>,
    pub queued_jobs: u32,
    pub queued_pods: u32,
    pub tenants: Vec<TenantView>,
    pub callers: Vec<CallerView>,
    pub pod_list: Vec<PodView>,
}

/// GPUs of the inventory, and what holds them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuView {
    pub inventory: u32,
    pub shares_per_gpu: u32,
    pub held_shares: Held,
    pub active: f64,
    pub warm: f64,
    pub standby: f64,
    pub draining: f64,
    pub free: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetView {
    pub budget: Shares,
    pub gpus: f64,
    pub inputs: BudgetInputs,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantView {
    pub tenant: TenantId,
    pub warm: Shares,
    pub queued_pods: u32,
    pub budget: Option<Shares>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallerView {
    pub caller: CallerId,
    pub tenant: TenantId,
    /// `None` when warm pods never expire (fixed pool) or are not kept.
    pub keep_alive_ms: Option<u64>,
    /// Pauses remembered (at most `keep_alive.history`).
    pub pauses: u32,
    pub warm_pods: u32,
    pub in_flight: u32,
    /// How its keep-alive was chosen.
    pub basis: Option<Basis>,
    /// The period of its bursts, once regular.
    pub period_ms: Option<u64>,
    /// When a standby pod will be bound to it ahead of its next burst.
    pub rewarm_at: Option<crate::Instant>,
    /// Running jobs in another pool.
    pub busy_elsewhere: bool,
}

/// The objective and the price that meets it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectiveView {
    pub percentile: f64,
    pub class: StartClass,
    /// GPU shares x ms the pool pays for one more start within the class.
    pub price_share_ms: u64,
    /// The share of jobs the callers' pauses predict within the class at
    /// that price.
    pub predicted: f64,
    /// The share of recent jobs (about the last 256, exponentially
    /// weighted) that started on their caller's warm pod; `None` before
    /// the first.
    pub warm_share: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodView {
    pub pod: PodId,
    /// starting, standby, warm, reserved, active or draining.
    pub state: &'static str,
    pub caller: Option<CallerId>,
    pub job: Option<JobId>,
    pub placement: Placement,
}
