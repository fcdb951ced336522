//! [`Pool`]: the state machine behind [`super`]'s protocol.
//!
//! Invariants kept by every transition (and checked by the tests after every
//! event):
//!
//! * a warm pod is indexed under exactly one caller and only ever serves it;
//! * the shares held on each GPU never exceed the GPU, and the books (held
//!   shares by state, pod counts) match the pods;
//! * only idle pods (warm, standby, starting for nobody) are ever released;
//!   a pod reserved for or running a job is never touched.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use super::gpu::Inventory;
use super::objective::{self, Curve, NEVER, RewarmShape, Shape};
use super::stats::{Pauses, PeakWindow, Rate, StartTime};
use super::{
    Basis, Bounds, BudgetInputs, BudgetView, CallerId, CallerView, Config, Decision, Error, Event,
    GpuView, Held, JobId, Kind, ObjectiveView, Placement, PodCounts, PodId, PodView, Purpose,
    Reason, Request, Shares, Snapshot, Source, StartClass, TenantId, TenantView,
};
use crate::Instant;
use crate::time::millis;

/// Queue order: higher priority first, then arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    priority: Reverse<i32>,
    seq: u64,
}

#[derive(Debug, Clone, Copy)]
enum KeepAliveMode {
    /// Matched to each caller's pauses.
    Matched,
    Fixed(u64),
    Forever,
}

/// Which mechanisms a [`Kind`] uses.
#[derive(Debug, Clone, Copy)]
struct Mode {
    warm: bool,
    keep_alive: KeepAliveMode,
    standby: bool,
    budget: bool,
    /// Fixed pool size (always-on).
    fixed: Option<u32>,
    /// Keep-alives chosen against [`Config::objective`].
    objective: bool,
    /// Re-warm ahead of periodic bursts ([`Config::rewarm`]).
    rewarm: bool,
    /// A caller across pools is one loop ([`Event::LoopBusy`]).
    one_loop: bool,
}

impl Mode {
    fn of(kind: Kind, cfg: &Config) -> Mode {
        let base = Mode {
            warm: true,
            keep_alive: KeepAliveMode::Matched,
            standby: false,
            budget: false,
            fixed: None,
            objective: false,
            rewarm: false,
            one_loop: false,
        };
        match kind {
            Kind::Fresh => Mode {
                warm: false,
                ..base
            },
            Kind::AlwaysOn { size } => Mode {
                keep_alive: KeepAliveMode::Forever,
                fixed: Some(size.unwrap_or(cfg.max_pods)),
                ..base
            },
            Kind::KeepAlive { keep_alive } => Mode {
                keep_alive: KeepAliveMode::Fixed(millis(keep_alive)),
                ..base
            },
            Kind::Firepool => Mode {
                standby: true,
                budget: true,
                objective: cfg.objective.is_some(),
                rewarm: cfg.rewarm.enabled,
                one_loop: true,
                ..base
            },
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Warm {
    caller: CallerId,
    tenant: TenantId,
    since: Instant,
    /// When its keep-alive clock started: `since`, or later if it was
    /// stopped while the caller ran jobs in another pool.
    armed: Instant,
    expires: Option<Instant>,
    basis: Basis,
}

#[derive(Debug, Clone, Copy)]
enum PodState {
    Starting(Purpose),
    /// Ready and unbound.
    Standby,
    Warm(Warm),
    /// Ready, held for a job whose other pods are not ready yet.
    Reserved(JobId),
    Active(JobId),
    Draining,
}

/// Index into `Pool::counts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateKind {
    StartingJob,
    StartingStandby,
    Standby,
    Warm,
    Reserved,
    Active,
    Draining,
}

const STATE_KINDS: usize = 7;

/// How far a caller's next burst may stray from its last period, either
/// way, while one period is all that predicts it.
const GUESS_SPREAD: f64 = 0.3;

/// Pauses the pool remembers, every caller's together: as many as one
/// caller's history may hold at most.
const POOLED_PAUSES: usize = 256;

/// Pauses the pool must have seen before they choose the keep-alive of a
/// caller with too few of its own: several callers' worth of
/// [`KeepAliveConfig::min_samples`], so that no one caller's first pauses
/// set it, and as many as the objective's integral control waits for.
const PRIOR_PAUSES: usize = 64;

/// A caller's periods that predict its next burst, and their regular range.
type Steps<'a> = (Cow<'a, [u32]>, (u64, u64));

/// The shortest of `periods` and the longest but for the longest quarter
/// (at least `at_least` of them counted, if there are as many): a burst
/// held up may come late, and the periods it leaves may stray. `None`
/// without periods.
fn usual_range(periods: &[u32], at_least: usize) -> Option<(u64, u64)> {
    let mut sorted = periods.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let usual = (n - n / 4).max(at_least).min(n);
    Some((u64::from(*sorted.first()?), u64::from(sorted[usual - 1])))
}

impl StateKind {
    fn of(s: &PodState) -> StateKind {
        match s {
            PodState::Starting(Purpose::ForJob(_)) => StateKind::StartingJob,
            PodState::Starting(Purpose::Standby) => StateKind::StartingStandby,
            PodState::Standby => StateKind::Standby,
            PodState::Warm(_) => StateKind::Warm,
            PodState::Reserved(_) => StateKind::Reserved,
            PodState::Active(_) => StateKind::Active,
            PodState::Draining => StateKind::Draining,
        }
    }

    /// Index into `Pool::held`: active, warm, standby, draining.
    fn category(self) -> usize {
        match self {
            StateKind::StartingJob | StateKind::Reserved | StateKind::Active => 0,
            StateKind::Warm => 1,
            StateKind::StartingStandby | StateKind::Standby => 2,
            StateKind::Draining => 3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            StateKind::StartingJob | StateKind::StartingStandby => "starting",
            StateKind::Standby => "standby",
            StateKind::Warm => "warm",
            StateKind::Reserved => "reserved",
            StateKind::Active => "active",
            StateKind::Draining => "draining",
        }
    }
}

#[derive(Debug, Clone)]
struct Pod {
    state: PodState,
    placement: Placement,
    /// The size it serves when active.
    size: Shares,
    started: Instant,
}

#[derive(Debug, Clone)]
struct HeldPod {
    pod: PodId,
    source: Source,
    reason: Reason,
}

#[derive(Debug, Clone)]
struct Job {
    caller: CallerId,
    tenant: TenantId,
    size: Shares,
    pods: u32,
    key: Key,
    queued_at: Instant,
    /// Ready pods it holds (reserved, or active once running).
    held: Vec<HeldPod>,
    /// Pods started for it, not ready yet.
    starting: Vec<PodId>,
    /// In the queue (accepted, not started).
    enqueued: bool,
    running: bool,
    /// It took a pod re-warmed for its caller whose binding (`lead`) is not
    /// done: it waits for it, so it did not start warm.
    binding: bool,
}

impl Job {
    fn need(&self) -> u32 {
        self.pods.saturating_sub(self.held.len() as u32)
    }

    fn uncovered(&self) -> u32 {
        self.need().saturating_sub(self.starting.len() as u32)
    }
}

#[derive(Debug, Clone)]
struct CallerState {
    tenant: TenantId,
    /// Pauses of its loop: from the end of its last job in any pool to its
    /// next job here.
    pauses: Pauses,
    /// Keep-alive matched to the pauses, once there are enough of them.
    matched_ms: Option<u64>,
    basis: Basis,
    /// Its candidates against the objective: keep-alives, and when to bind
    /// a pod ahead of its next burst.
    curve: Curve,
    rewarm_curve: Curve,
    /// Mean time between its arrivals here (ms, exponentially weighted):
    /// its curve weighs by its rate of jobs.
    cycle_ms: f64,
    last_arrival: Option<Instant>,
    /// End of its loop's last job (here, or elsewhere as `LoopBusy` said).
    last_end: Option<Instant>,
    /// The longest quiet gap of its loop, ended by a job elsewhere, since
    /// its last job here (ms): its pod here idled through it, so it counts
    /// as a pause before its next job here.
    gap_elsewhere_ms: u64,
    /// When its loop last came back from a quiet gap of at least
    /// `rewarm.min_gap`, if it has run no job here since: its next job
    /// here belongs to the burst that started then.
    resumed: Option<Instant>,
    /// Start of its current or last burst here, and the periods between.
    last_burst: Option<Instant>,
    periods: Pauses,
    /// How long after its recent bursts started its first job here came
    /// (zero where a burst started here): a loop that starts its steps in
    /// another pool comes here later in the step.
    lags: Pauses,
    /// Jobs here in its current burst, and in its recent ones.
    burst_jobs: u32,
    burst_sizes: Pauses,
    /// Its pending re-warm here, if any.
    rewarm: Option<Rewarm>,
    /// When its next burst, not worth a re-warm, is due at the earliest
    /// (it will take a standby pod), and until when it is expected.
    handover_at: Option<(Instant, Instant)>,
    /// How long its jobs here waited for pods in its current burst, and in
    /// the one before: waits that delayed its loop and so its next burst.
    waited_ms: [u64; 2],
    /// Size of its last job here.
    size: Shares,
    /// Running jobs in another pool.
    elsewhere: bool,
    in_flight: u32,
    warm: Vec<PodId>,
    queued: Vec<JobId>,
    last_seen: Instant,
}

/// A caller's pending re-warm: a standby pod bound to it ahead of its next
/// burst here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rewarm {
    /// Bound at this instant (queued in [`Pool::rewarms`]).
    At(Instant),
    /// Its next burst reaches this pool only after its loop came back
    /// elsewhere: bound once it does, not by the clock (see
    /// [`Pool::trails`]).
    OnLoop,
}

impl Rewarm {
    fn at(self) -> Option<Instant> {
        match self {
            Self::At(t) => Some(t),
            Self::OnLoop => None,
        }
    }
}

impl CallerState {
    /// When its re-warm is due by the clock.
    fn rewarm_at(&self) -> Option<Instant> {
        self.rewarm.and_then(Rewarm::at)
    }
}

/// A caller's next burst, predicted from its regular period.
#[derive(Debug, Clone, Copy)]
struct Burst {
    /// Start of the caller's last burst.
    last: Instant,
    /// The soonest the burst is prepared for: the standby pods it would
    /// take are ready by then. Before `earliest` by half the spread of the
    /// regular periods: a period may fall short of the shortest remembered
    /// one (a synchronous step whose pause was short), by less the more
    /// regular they are. Only standby pods wait for it, not bound ones.
    early: Instant,
    /// The soonest a pod is bound for it: the shortest remembered period.
    earliest: Instant,
    latest: Instant,
    /// When a pod held or bound for it is released if it has not come:
    /// after the longest remembered period (a late burst, one of those the
    /// regular periods leave out, still finds it) and the grace.
    overdue: Instant,
    period_ms: u64,
    /// Predicted from when its loop came back elsewhere, by its lags, not
    /// from the clock (see [`Pool::trails`]).
    on_loop: bool,
}

#[derive(Debug, Clone, Default)]
struct TenantState {
    warm: u64,
    queued_pods: u32,
    arrivals: Rate,
}

/// The state of one pool, and the policy that moves it. See the module docs
/// of [`super`] for the protocol.
#[derive(Debug, Clone)]
pub struct Pool {
    kind: Kind,
    cfg: Config,
    mode: Mode,
    now: Instant,
    next_pod: u64,
    next_seq: u64,
    pods: HashMap<PodId, Pod>,
    jobs: HashMap<JobId, Job>,
    /// Accepted jobs that have not started.
    queue: BTreeMap<Key, JobId>,
    /// Those of them whose missing pods are not all starting.
    uncovered: BTreeMap<Key, JobId>,
    standby: BTreeSet<PodId>,
    /// Warm pods, idle longest first.
    idle: BTreeSet<(Instant, PodId)>,
    /// Warm pods by keep-alive expiry.
    expiry: BTreeSet<(Instant, PodId)>,
    callers: HashMap<CallerId, CallerState>,
    tenants: HashMap<TenantId, TenantState>,
    inv: Inventory,
    /// Shares held: active, warm, standby, draining.
    held: [u64; 4],
    counts: [u32; STATE_KINDS],
    queued_pods: u32,
    arrivals: Rate,
    handovers: PeakWindow,
    /// Handovers still expected from the opening burst
    /// ([`StandbyConfig::initial`]): counted at the start, they are not
    /// counted again as they come.
    opening: u32,
    /// The longest regular period of a periodic caller here, as of the
    /// last burst: handovers are remembered at least that long, so a step's
    /// burst still sizes standby when the next step comes.
    longest_period_ms: u64,
    start_time: StartTime,
    budget: Option<(Shares, BudgetInputs)>,
    emitted_budget: Option<Shares>,
    /// Re-warms due, by time.
    rewarms: BTreeSet<(Instant, CallerId)>,
    /// Bursts expected to start from a standby pod, by earliest start.
    handovers_due: BTreeSet<(Instant, CallerId)>,
    /// The objective's price (shares x ms per start within the class) and
    /// the share predicted at it.
    price: f64,
    predicted: f64,
    next_price: Instant,
    /// Jobs that started within the objective's class, and all jobs
    /// (exponentially weighted counts): what the objective achieves.
    served: [f64; 2],
    /// Added to the objective's aim so that what is achieved meets it: the
    /// pauses seen predict the next ones optimistically.
    boost: f64,
    next_review: Instant,
    next_sweep: Instant,
    /// When the first standby pod kept though it is surplus (it started
    /// within the minimum keep-alive) may go (see [`Pool::keep_standby`]).
    surplus_settles: Option<Instant>,
    /// The pool's recent pauses, every caller's (at most [`POOLED_PAUSES`]).
    pooled: Pauses,
    /// The keep-alive curve of those pauses for a pod of one share: what a
    /// caller with too few pauses of its own chooses from, once the pool
    /// has [`PRIOR_PAUSES`] (see [`Pool::prior`]).
    prior: Curve,
}

impl Pool {
    /// An empty pool. Call [`Pool::handle`] with [`Event::Tick`] to let it
    /// provision (standby pods, or the fixed pool).
    pub fn new(kind: Kind, config: Config) -> Result<Pool, Error> {
        config.validate()?;
        if let Kind::AlwaysOn { size: Some(0) } = kind {
            return Err(Error::Config("an always-on pool needs pods".to_owned()));
        }
        let mode = Mode::of(kind, &config);
        let mut pool = Pool {
            kind,
            mode,
            now: Instant::ZERO,
            next_pod: 0,
            next_seq: 0,
            pods: HashMap::new(),
            jobs: HashMap::new(),
            queue: BTreeMap::new(),
            uncovered: BTreeMap::new(),
            standby: BTreeSet::new(),
            idle: BTreeSet::new(),
            expiry: BTreeSet::new(),
            callers: HashMap::new(),
            tenants: HashMap::new(),
            inv: Inventory::new(config.gpus, config.shares_per_gpu),
            held: [0; 4],
            counts: [0; STATE_KINDS],
            queued_pods: 0,
            arrivals: Rate::default(),
            handovers: PeakWindow::default(),
            opening: if mode.standby {
                config.standby.initial
            } else {
                0
            },
            longest_period_ms: 0,
            start_time: StartTime::new(millis(config.start_estimate)),
            budget: None,
            emitted_budget: None,
            rewarms: BTreeSet::new(),
            handovers_due: BTreeSet::new(),
            price: f64::INFINITY,
            predicted: 0.0,
            next_price: Instant::ZERO,
            served: [0.0; 2],
            boost: 0.0,
            next_review: Instant::ZERO,
            surplus_settles: None,
            pooled: Pauses::default(),
            prior: Curve::default(),
            next_sweep: Instant::ZERO + config.caller_ttl / 2,
            cfg: config,
        };
        if pool.opening > 0 {
            let (start, horizon) = (pool.start_time.ms(), pool.standby_horizon());
            pool.handovers
                .record(Instant::ZERO, pool.opening, start, horizon);
        }
        Ok(pool)
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The time of the last event handled.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// GPU shares held, by what holds them. O(1).
    pub fn held(&self) -> Held {
        Held {
            active: self.held[0],
            warm: self.held[1],
            standby: self.held[2],
            draining: self.held[3],
        }
    }

    /// The latest time the driver should send [`Event::Tick`] if nothing else
    /// happens first: the next keep-alive expiry, or the next review of budget
    /// and standby while idle pods are held. `None`: nothing is pending.
    pub fn next_wakeup(&self) -> Option<Instant> {
        // A re-warm is due, or its standby pod must start.
        let notice = self.rewarm_notice();
        let rewarm = self
            .rewarms
            .iter()
            .flat_map(|&(t, _)| [t.saturating_sub(notice), t])
            .filter(|&t| t > self.now)
            .min();
        let expiry = self.expiry.first().map(|&(t, _)| t);
        let idle = self.counts[StateKind::Warm as usize]
            + self.counts[StateKind::Standby as usize]
            + self.counts[StateKind::StartingStandby as usize];
        let review =
            ((self.mode.budget || self.mode.standby) && idle > 0).then_some(self.next_review);
        // A standby surplus kept while it settles may go.
        let settles = self.surplus_settles.filter(|&t| t > self.now);
        [expiry, rewarm, review, settles]
            .into_iter()
            .flatten()
            .min()
    }

    /// Sets `tenant`'s budget bounds, or with `None` returns it to the
    /// pool's default tenant bounds (`budget.tenant`). Applied from the next
    /// event on (send [`Event::Tick`] to apply it at once).
    pub fn set_tenant_bounds(
        &mut self,
        tenant: TenantId,
        bounds: Option<Bounds>,
    ) -> Result<(), Error> {
        match bounds {
            Some(b) if b.floor > b.ceiling => Err(Error::Config(
                "a budget floor exceeds its ceiling".to_owned(),
            )),
            Some(b) => {
                self.cfg.budget.tenants.insert(tenant, b);
                Ok(())
            }
            None => {
                self.cfg.budget.tenants.remove(&tenant);
                Ok(())
            }
        }
    }

    /// What a warm pod of `caller` would be kept for if its job ended now.
    /// `None` if warm pods are not kept or never expire.
    pub fn keep_alive(&self, caller: CallerId) -> Option<Duration> {
        self.keep_alive_ms(caller).map(Duration::from_millis)
    }

    /// Whether the policy still tracks `caller`: it has jobs queued or
    /// running, warm pods, or was seen within [`Config::caller_ttl`]. A caller
    /// it forgot starts afresh (no affinity, default keep-alive) when it
    /// comes back, so the caller's id mapping can be dropped with it.
    pub fn knows_caller(&self, caller: CallerId) -> bool {
        self.callers.contains_key(&caller)
    }

    fn keep_alive_ms(&self, caller: CallerId) -> Option<u64> {
        self.keep_alive_of(caller).map(|k| k.0)
    }

    /// The keep-alive a warm pod of `caller` gets now, and how it was chosen.
    fn keep_alive_of(&self, caller: CallerId) -> Option<(u64, Basis)> {
        if !self.mode.warm {
            return None;
        }
        match self.mode.keep_alive {
            KeepAliveMode::Forever => None,
            KeepAliveMode::Fixed(ms) => Some((ms, Basis::Fixed)),
            KeepAliveMode::Matched => Some(
                self.callers
                    .get(&caller)
                    .and_then(|c| {
                        c.matched_ms
                            .map(|ms| (ms, c.basis))
                            .or_else(|| self.prior(c))
                    })
                    .unwrap_or((millis(self.cfg.keep_alive.default), Basis::Default)),
            ),
        }
    }

    /// The keep-alive of a caller with fewer pauses than
    /// [`KeepAliveConfig::min_samples`]: chosen against the objective as its
    /// own would be, from the pool's recent pauses (every caller's), once the
    /// pool has [`PRIOR_PAUSES`]. Its own few pauses cannot show their tail
    /// (see `min_samples`); the pool's many show the tail of pauses like
    /// its. Without an objective, or before, the pool's default.
    fn prior(&self, c: &CallerState) -> Option<(u64, Basis)> {
        // A pod of `size` shares costs `size` times a one-share pod's: the
        // one-share curve at the price per share.
        // Its candidates lie within the keep-alive's bounds already.
        let p = self.prior.choose(self.price / f64::from(c.size.0.max(1)))?;
        let basis = Basis::Pooled {
            covers_permille: (p.warm * 1000.0).round() as u32,
            price_share_ms: self.price_share_ms(),
        };
        Some((p.keep_ms, basis))
    }

    /// The caller's next burst here, if its bursts are regular and the next
    /// is not overdue.
    fn next_burst(&self, caller: CallerId) -> Option<Burst> {
        if !self.mode.rewarm {
            return None;
        }
        let c = self.callers.get(&caller)?;
        let last = c.last_burst?;
        let (periods, (lo, hi)) = self.step_periods(c)?;
        let longest = periods.iter().max().map_or(hi, |&p| u64::from(p));
        let (soonest, latest) = Self::lag(c);
        let earliest = last + Duration::from_millis(lo + soonest);
        let mut burst = Burst {
            last,
            early: earliest
                .saturating_sub(Duration::from_millis((hi - lo) / 2))
                .max(last),
            earliest,
            latest: last + Duration::from_millis(hi + latest),
            overdue: last + Duration::from_millis(longest.max(hi) + latest) + self.cfg.rewarm.grace,
            period_ms: lo,
            on_loop: false,
        };
        // A loop that trails here and has come back elsewhere: its burst
        // here follows from then, by its lags, whatever the clock said.
        if let Some(back) = c.resumed.filter(|&r| r > last)
            && self.trails(c).is_some()
        {
            let earliest = back + Duration::from_millis(soonest);
            let latest = back + Duration::from_millis(latest);
            burst = Burst {
                early: earliest,
                earliest,
                latest,
                overdue: latest + self.cfg.rewarm.grace,
                on_loop: true,
                ..burst
            };
        }
        (burst.latest + self.cfg.rewarm.grace > self.now).then_some(burst)
    }

    /// Whether the caller's current burst here is over while its loop runs
    /// on elsewhere: its bursts are periodic, each of its recent bursts ran
    /// the same number of jobs here, and this one has run as many. Its pod
    /// then follows its keep-alive (and is re-warmed for the next burst)
    /// instead of waiting for the loop to finish its step in another pool.
    /// Where the sizes vary, no count says the step here is over (a step
    /// larger than any remembered would lose its pod mid-step), so the pod
    /// waits for the loop. `Some`: the basis its keep-alive then has.
    fn burst_done(&self, caller: CallerId) -> Option<Basis> {
        let c = self.callers.get(&caller)?;
        let sizes = c.burst_sizes.as_slice();
        let most = sizes.iter().max().copied()?;
        let b = self.next_burst(caller)?;
        let done = c.in_flight == 0
            && c.queued.is_empty()
            && sizes.len() >= self.cfg.rewarm.min_periods as usize
            && sizes.iter().all(|&n| n == most)
            && c.burst_jobs >= most;
        done.then_some(Basis::BurstDone {
            jobs: c.burst_jobs,
            period_ms: b.period_ms,
        })
    }

    /// The shortest of the caller's recent lags, if every recent burst of
    /// its loop started in another pool and reached this one that long
    /// after or later (a verifier that follows each step's first rollout):
    /// then the loop coming back elsewhere tells when its next burst here
    /// is due, to within how long its bursts take to get here, which the
    /// period does not (it strays by the jitter of the pause). Needs
    /// `min_periods` lags, and a driver that tells the pool about the loop.
    fn trails(&self, c: &CallerState) -> Option<u64> {
        let lags = c.lags.as_slice();
        let soonest = lags.iter().min().copied()?;
        (self.mode.one_loop && soonest > 0 && lags.len() >= self.cfg.rewarm.min_periods as usize)
            .then_some(u64::from(soonest))
    }

    /// The share of recent jobs (exponentially weighted) that started on
    /// their caller's warm pod; `None` before the first.
    fn warm_share(&self) -> Option<f64> {
        (self.served[1] > 0.0).then(|| self.served[0] / self.served[1])
    }

    /// The shortest and longest of the caller's recent lags from a burst's
    /// start to its first job here.
    fn lag(c: &CallerState) -> (u64, u64) {
        let lags = c.lags.as_slice();
        let soonest = lags.iter().min().map_or(0, |&l| u64::from(l));
        let latest = lags.iter().max().map_or(0, |&l| u64::from(l));
        (soonest, latest)
    }

    /// The caller's next burst guessed from its last period alone, while it
    /// is not periodic (too few periods, or irregular ones): not enough to
    /// bind a pod ahead of it, but enough for the standby target to expect
    /// it. The window opens [`GUESS_SPREAD`] before the shortest remembered
    /// period, or the last net of the waits for pods in its burst (a step
    /// slowed by cold starts, whose loop ran late), if shorter; and closes
    /// as much after the last period, or the longest but for the longest
    /// quarter (which may stray, as in [`Pool::period`]), if longer. A loop whose
    /// steps alternate a short and a long pause (an evaluation every other
    /// step) is then expected as soon as its short pause and as late as its
    /// long one, whichever came last.
    fn guess_burst(&self, caller: CallerId) -> Option<Burst> {
        if !self.mode.rewarm {
            return None;
        }
        let c = self.callers.get(&caller)?;
        let last = c.last_burst?;
        if self.period(c).is_some() {
            return None;
        }
        let p = c.periods.last()?;
        let spread = GUESS_SPREAD;
        let quick = p.saturating_sub(c.waited_ms[1]);
        let (shortest, usual) = usual_range(c.periods.as_slice(), 1)
            .map_or((quick, p), |(lo, hi)| (lo.min(quick), hi.max(p)));
        let (soonest, latest) = Self::lag(c);
        let lo = (shortest as f64 * (1.0 - spread).max(0.0)) as u64 + soonest;
        let hi = (usual as f64 * (1.0 + spread)) as u64 + latest;
        let earliest = last + Duration::from_millis(lo);
        let burst = Burst {
            last,
            early: earliest,
            earliest,
            latest: last + Duration::from_millis(hi),
            overdue: last + Duration::from_millis(hi) + self.cfg.rewarm.grace,
            period_ms: p,
            on_loop: false,
        };
        (p > 0 && burst.latest + self.cfg.rewarm.grace > self.now).then_some(burst)
    }

    /// Handles one event at `now`, pushing decisions onto `out`. On error the
    /// pool is unchanged and nothing is pushed.
    pub fn handle(
        &mut self,
        now: Instant,
        event: Event,
        out: &mut Vec<Decision>,
    ) -> Result<(), Error> {
        if now < self.now {
            return Err(Error::ClockBackwards {
                now,
                last: self.now,
            });
        }
        let before = self.now;
        self.now = now;
        let result = match event {
            Event::JobQueued(req) => self.job_queued(req, out),
            Event::JobFinished { job } => self.job_finished(job, out),
            Event::PodReady { pod } => self.pod_ready(pod, out),
            Event::PodGone { pod } => self.pod_gone(pod),
            Event::PodsAdopted { running, idle } => {
                for req in running {
                    // No room: left out, and the driver keeps it outside.
                    let _ = self.job_adopted(req, out);
                }
                self.pods_adopted(idle, out);
                Ok(())
            }
            Event::LoopBusy { caller, busy } => {
                self.loop_busy(caller, busy);
                Ok(())
            }
            Event::Tick => Ok(()),
        };
        match result {
            Ok(()) => {
                self.maintain(out);
                Ok(())
            }
            Err(e) => {
                self.now = before;
                Err(e)
            }
        }
    }

    // ---- books -----------------------------------------------------------

    fn add_pod(&mut self, state: PodState, placement: Placement, size: Shares) -> PodId {
        let id = PodId(self.next_pod);
        self.next_pod += 1;
        let k = StateKind::of(&state);
        self.counts[k as usize] += 1;
        self.held[k.category()] += u64::from(placement.shares());
        self.pods.insert(
            id,
            Pod {
                state,
                placement,
                size,
                started: self.now,
            },
        );
        id
    }

    fn set_state(&mut self, id: PodId, state: PodState) {
        let Some(p) = self.pods.get_mut(&id) else {
            return;
        };
        let (old, new) = (StateKind::of(&p.state), StateKind::of(&state));
        let s = u64::from(p.placement.shares());
        self.counts[old as usize] -= 1;
        self.counts[new as usize] += 1;
        self.held[old.category()] -= s;
        self.held[new.category()] += s;
        p.state = state;
    }

    fn set_placement(&mut self, id: PodId, placement: Placement) {
        let Some(p) = self.pods.get_mut(&id) else {
            return;
        };
        let c = StateKind::of(&p.state).category();
        self.held[c] -= u64::from(p.placement.shares());
        self.held[c] += u64::from(placement.shares());
        p.placement = placement;
    }

    /// Takes the pod out of the indexes its state puts it in.
    fn detach(&mut self, id: PodId) {
        let Some(p) = self.pods.get(&id) else {
            return;
        };
        match p.state {
            PodState::Standby => {
                self.standby.remove(&id);
            }
            PodState::Warm(w) => {
                self.idle.remove(&(w.since, id));
                if let Some(e) = w.expires {
                    self.expiry.remove(&(e, id));
                }
                if let Some(c) = self.callers.get_mut(&w.caller) {
                    c.warm.retain(|&x| x != id);
                }
                if let Some(t) = self.tenants.get_mut(&w.tenant) {
                    t.warm -= u64::from(p.placement.shares());
                }
            }
            _ => {}
        }
    }

    fn release(&mut self, id: PodId, reason: Reason, out: &mut Vec<Decision>) {
        // Only idle pods; a pod whose job has just finished is idle.
        debug_assert!(
            match self.pods.get(&id).map(|p| p.state) {
                Some(PodState::Active(j) | PodState::Reserved(j)) => !self.jobs.contains_key(&j),
                Some(PodState::Draining) | None => false,
                Some(_) => true,
            },
            "release of a pod that is not idle"
        );
        self.detach(id);
        self.set_state(id, PodState::Draining);
        out.push(Decision::Release { pod: id, reason });
    }

    /// Idle warm pod `pod` (`w`) is past its keep-alive, which ran out at
    /// `t`. It is kept as a standby pod, wiped and shrunk to a standby
    /// share, when the pool has fewer standby pods than its target: it is
    /// up now, where a refill would hold the same share through a pod
    /// start. Where the target is met only by counting pods still starting,
    /// it takes the place of the latest of them (cancelled) when re-warms
    /// and handovers due before that one is up outnumber the standby pods
    /// ready: a loop whose steps come sooner than a pod starts, or a caller
    /// back from a pause just after a burst emptied the standby pods, would
    /// otherwise find them still starting. With `keep` it is
    /// kept as standby whatever the target: its caller's re-warm, due before
    /// any other standby pod is free for it, counts on it. Otherwise it is
    /// released.
    fn retire(&mut self, pod: PodId, w: Warm, t: Instant, keep: bool, out: &mut Vec<Decision>) {
        let keep_alive_ms = t.as_millis() - w.armed.as_millis();
        let (ready, have, target) = (
            self.standby.len() as u32,
            self.standby_have(),
            self.standby_target(),
        );
        let replaces = if self.mode.standby && have >= target && !keep {
            self.replaceable_start()
        } else {
            None
        };
        if !self.mode.standby || (have >= target && replaces.is_none() && !keep) {
            let reason = Reason::KeepAliveExpired {
                caller: w.caller,
                idle_ms: self.now.as_millis() - w.since.as_millis(),
                keep_alive_ms,
                basis: w.basis,
            };
            return self.release(pod, reason, out);
        }
        if let Some(start) = replaces {
            let surplus = Reason::StandbySurplus {
                have: have + 1,
                target,
            };
            self.release(start, surplus, out);
        }
        self.detach(pod);
        self.unbound(pod, out);
        out.push(Decision::Reset {
            pod,
            placement: self.pods[&pod].placement.clone(),
            reason: Reason::KeptAsStandby {
                caller: w.caller,
                keep_alive_ms,
                have: ready,
                target,
            },
        });
    }

    /// The latest standby pod still starting, if it comes too late: more
    /// re-warms and handovers are due before it is up than there are
    /// standby pods ready. Handovers come at the rate the standby target
    /// is sized for (its recent peak per pod start), however few have come
    /// yet: a pool that has just served a burst from its standby pods
    /// expects the next handover before their refills are up.
    fn replaceable_start(&self) -> Option<PodId> {
        let id = self.standby_starts().max()?;
        let start_ms = self.start_time.ms().max(1);
        let up_at = self.pods[&id].started + Duration::from_millis(start_ms);
        let rewarms = self.rewarms.range(..(up_at, CallerId(u64::MAX))).count() as u64;
        let peak = self
            .handovers
            .peak(self.now, start_ms, self.standby_horizon());
        let left = millis(up_at.saturating_since(self.now));
        let handovers = (u64::from(peak) * left).div_ceil(start_ms);
        (rewarms + handovers > self.standby.len() as u64).then_some(id)
    }

    /// Standby pods still starting. Pod ids grow with each start, so the
    /// largest is the latest start.
    fn standby_starts(&self) -> impl Iterator<Item = PodId> + '_ {
        self.pods
            .iter()
            .filter(|(_, p)| matches!(p.state, PodState::Starting(Purpose::Standby)))
            .map(|(&id, _)| id)
    }

    /// Standby pods, ready or starting.
    fn standby_have(&self) -> u32 {
        self.standby.len() as u32 + self.counts[StateKind::StartingStandby as usize]
    }

    fn standby_shares(&self) -> u32 {
        self.cfg.standby.shares.0.min(self.cfg.pod_shares.0)
    }

    fn live_pods(&self) -> u32 {
        self.pods.len() as u32 - self.counts[StateKind::Draining as usize]
    }

    /// Re-places pod `id` at `shares`, on its current GPU when it fits.
    /// Leaves it as it was and returns false when nothing fits.
    fn resize(&mut self, id: PodId, shares: u32) -> Option<Placement> {
        let old = self.pods.get(&id)?.placement.clone();
        if old.shares() == shares {
            return Some(old);
        }
        self.inv.release(&old);
        let prefer = old.0.first().map(|s| s.gpu);
        match self.inv.alloc(shares, prefer) {
            Some(p) => {
                self.set_placement(id, p.clone());
                Some(p)
            }
            None => {
                self.inv.restore(&old);
                None
            }
        }
    }

    // ---- events ----------------------------------------------------------

    /// The size of the pods of new job `req`, if the pool could ever hold
    /// them.
    fn check_request(&self, req: &Request) -> Result<Shares, Error> {
        let unplaceable = |why: &str| {
            Err(Error::Unplaceable {
                job: req.job,
                why: why.to_owned(),
            })
        };
        if self.jobs.contains_key(&req.job) {
            return Err(Error::DuplicateJob(req.job));
        }
        let size = req.shares.unwrap_or(self.cfg.pod_shares);
        if req.pods == 0 {
            return unplaceable("a job needs at least one pod");
        }
        if !size.is_pod_size(self.cfg.shares_per_gpu) {
            return unplaceable("a pod takes whole GPUs or a share of one GPU");
        }
        if !self.inv.can_ever_hold(size.0, req.pods) {
            return unplaceable("it needs more GPUs than the pool has");
        }
        if req.pods > self.mode.fixed.unwrap_or(self.cfg.max_pods) {
            return unplaceable("it needs more pods than the pool may hold");
        }
        Ok(size)
    }

    fn job_queued(&mut self, req: Request, out: &mut Vec<Decision>) -> Result<(), Error> {
        let size = self.check_request(&req)?;
        let now = self.now;
        let history = self.cfg.keep_alive.history as usize;
        let min_gap = self.cfg.rewarm.min_gap;
        self.arrived(&req);
        let caller = Self::caller(&mut self.callers, now, req.caller, req.tenant, size);
        // A pause runs from the loop's last job end to the next job's
        // submission; with jobs in flight, here or in another pool, the
        // loop is not pausing. A loop across pools may have paused before
        // a job elsewhere since its last job here: a pod here waited
        // through the longest of those pauses too.
        let idle = caller.in_flight == 0 && !caller.elsewhere;
        let elsewhere_ms = std::mem::take(&mut caller.gap_elsewhere_ms);
        let mut paused = false;
        if idle && let Some(end) = caller.last_end {
            let pause = now
                .as_millis()
                .saturating_sub(end.as_millis())
                .max(elsewhere_ms);
            caller.pauses.push(pause, history);
            self.pooled.push(pause, POOLED_PAUSES);
            paused = true;
        }
        // A burst starts with the loop's first job after a quiet gap of
        // the loop, here or in another pool (then it started when the loop
        // came back there). A gap here while the loop ran or waited for a
        // pod elsewhere is no quiet gap: within a step of a loop that
        // alternates profiles, it would split the step into bursts.
        if idle
            && caller
                .last_end
                .is_none_or(|e| now.saturating_since(e) >= min_gap)
        {
            caller.resumed = Some(now);
        }
        let resumed = caller.resumed.take();
        let burst = caller.in_flight == 0 && (caller.last_burst.is_none() || resumed.is_some());
        if burst {
            let start = resumed.unwrap_or(now);
            if let Some(prev) = caller.last_burst {
                let history = self.cfg.rewarm.history as usize;
                caller
                    .periods
                    .push(start.as_millis().saturating_sub(prev.as_millis()), history);
                caller
                    .burst_sizes
                    .push(u64::from(caller.burst_jobs), history);
            }
            // A caller's first burst here tells no lag: the pool did not
            // know it, nor where its loop came back.
            if caller.last_burst.is_some() {
                caller.lags.push(
                    now.as_millis().saturating_sub(start.as_millis()),
                    self.cfg.rewarm.history as usize,
                );
            }
            caller.burst_jobs = 0;
            caller.last_burst = Some(start);
            caller.waited_ms = [0, caller.waited_ms[0]];
        }
        // A new burst ends the wait for the one a re-warm was scheduled for.
        let rewarm = if burst {
            caller.rewarm.take().and_then(Rewarm::at)
        } else {
            None
        };
        let handover = if burst {
            caller.handover_at.take()
        } else {
            None
        };
        caller.size = size;
        caller.burst_jobs = caller.burst_jobs.saturating_add(1);
        if let Some(prev) = caller.last_arrival.replace(now) {
            let gap = now.as_millis().saturating_sub(prev.as_millis()) as f64;
            caller.cycle_ms = if caller.cycle_ms > 0.0 {
                (gap - caller.cycle_ms).mul_add(0.1, caller.cycle_ms)
            } else {
                gap
            };
        }
        caller.in_flight += 1;
        caller.last_seen = now;
        if let Some(t) = rewarm {
            self.rewarms.remove(&(t, req.caller));
        }
        if let Some((t, _)) = handover {
            self.handovers_due.remove(&(t, req.caller));
        }
        if paused || burst {
            self.rematch(req.caller);
        }
        if burst {
            self.longest_period_ms = self
                .callers
                .values()
                .filter_map(|c| self.period(c).map(|(_, hi)| hi))
                .max()
                .unwrap_or(0);
        }
        // Scheduled now, the re-warm for the next burst has its standby pod
        // started in time however short the pause.
        if burst && let Some(b) = self.next_burst(req.caller) {
            match self.bind_at(req.caller, b) {
                Some(bind_at) => self.schedule_rewarm(req.caller, b, bind_at),
                None => self.schedule_handover(req.caller, b),
            }
        } else if burst && let Some(b) = self.guess_burst(req.caller) {
            self.schedule_handover(req.caller, b);
        }

        self.add_job(&req, size, Vec::new());
        self.take_warm(req.job);
        if self.mode.objective {
            const ALPHA: f64 = 1.0 / 256.0;
            let job = &self.jobs[&req.job];
            let warm = job.need() == 0 && !job.binding;
            self.served[0] = self.served[0].mul_add(1.0 - ALPHA, f64::from(u8::from(warm)));
            self.served[1] = self.served[1].mul_add(1.0 - ALPHA, 1.0);
        }
        let need = self.jobs[&req.job].need();
        // A burst that came while its handover was expected had its standby
        // pod counted ahead of it, and its next one will be too: counted
        // in the recent peak as well, it would keep that pod standing by
        // through the whole pause instead of from a pod start before it.
        let notice = self.rewarm_notice();
        let expected = handover.is_some_and(|(at, until)| at <= now + notice && now <= until);
        if need > 0 {
            let opening = need.min(self.opening);
            self.opening -= opening;
            if !expected && need > opening {
                self.handovers.record(
                    now,
                    need - opening,
                    self.start_time.ms(),
                    self.standby_horizon(),
                );
            }
            self.take_standby(req.job, out);
        }
        if self.jobs[&req.job].need() == 0 {
            self.start_job(req.job, out);
        } else {
            self.enqueue(req.job);
        }
        Ok(())
    }

    /// The state of `caller`, new if the pool does not know it. (Of the
    /// map alone, so that the configuration stays readable meanwhile.)
    fn caller(
        callers: &mut HashMap<CallerId, CallerState>,
        now: Instant,
        caller: CallerId,
        tenant: TenantId,
        size: Shares,
    ) -> &mut CallerState {
        callers.entry(caller).or_insert_with(|| CallerState {
            tenant,
            pauses: Pauses::default(),
            matched_ms: None,
            basis: Basis::Default,
            curve: Curve::default(),
            rewarm_curve: Curve::default(),
            cycle_ms: 0.0,
            last_arrival: None,
            last_end: None,
            gap_elsewhere_ms: 0,
            resumed: None,
            last_burst: None,
            periods: Pauses::default(),
            lags: Pauses::default(),
            burst_jobs: 0,
            burst_sizes: Pauses::default(),
            rewarm: None,
            handover_at: None,
            waited_ms: [0; 2],
            size,
            elsewhere: false,
            in_flight: 0,
            warm: Vec::new(),
            queued: Vec::new(),
            last_seen: now,
        })
    }

    /// A running job an earlier leader started, on pods it started: they
    /// are active for it from now. On error nothing changed.
    fn job_adopted(&mut self, req: Request, out: &mut Vec<Decision>) -> Result<(), Error> {
        let size = self.check_request(&req)?;
        let unplaceable = |why: &str| {
            Err(Error::Unplaceable {
                job: req.job,
                why: why.to_owned(),
            })
        };
        if self.pods.len() as u32 + req.pods > self.cfg.max_pods {
            return unplaceable("the pool holds as many pods as it may");
        }
        let mut placements = Vec::new();
        for _ in 0..req.pods {
            match self.inv.alloc(size.0, None) {
                Some(p) => placements.push(p),
                None => {
                    for p in &placements {
                        self.inv.release(p);
                    }
                    return unplaceable("no room left on the pool's GPUs");
                }
            }
        }
        let now = self.now;
        let caller = Self::caller(&mut self.callers, now, req.caller, req.tenant, size);
        caller.in_flight += 1;
        caller.last_seen = now;
        // Demand, as for the leader that accepted it: the budget that keeps
        // its pods warm after it is that of any job's.
        self.arrived(&req);
        let mut held = Vec::new();
        for placement in placements {
            let pod = self.add_pod(PodState::Active(req.job), placement.clone(), size);
            out.push(Decision::Adopted {
                pod,
                placement,
                job: Some(req.job),
            });
            held.push(HeldPod {
                pod,
                source: Source::Cold,
                reason: Reason::Adopted { caller: req.caller },
            });
        }
        self.add_job(&req, size, held);
        Ok(())
    }

    /// The job's pods count toward the pool's and its tenant's arrivals.
    fn arrived(&mut self, req: &Request) {
        let tau = millis(self.cfg.budget.rate_window) as f64;
        let pods = f64::from(req.pods);
        self.arrivals.add(self.now, pods, tau);
        self.tenants
            .entry(req.tenant)
            .or_default()
            .arrivals
            .add(self.now, pods, tau);
    }

    /// Books job `req` of pods of `size`, next in its priority: running on
    /// `held` when it holds pods already, else yet to be placed.
    fn add_job(&mut self, req: &Request, size: Shares, held: Vec<HeldPod>) {
        let key = Key {
            priority: Reverse(req.priority),
            seq: self.next_seq,
        };
        self.next_seq += 1;
        let running = !held.is_empty();
        self.jobs.insert(
            req.job,
            Job {
                caller: req.caller,
                tenant: req.tenant,
                size,
                pods: req.pods,
                key,
                queued_at: self.now,
                held,
                starting: Vec::new(),
                enqueued: false,
                running,
                binding: false,
            },
        );
    }

    fn enqueue(&mut self, id: JobId) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.enqueued = true;
        self.queue.insert(job.key, id);
        if job.uncovered() > 0 {
            self.uncovered.insert(job.key, id);
        }
        self.queued_pods += job.pods;
        if let Some(c) = self.callers.get_mut(&job.caller) {
            c.queued.push(id);
        }
        self.tenants.entry(job.tenant).or_default().queued_pods += job.pods;
    }

    fn dequeue(&mut self, id: JobId, job: &Job) {
        if !job.enqueued {
            return;
        }
        self.queue.remove(&job.key);
        self.uncovered.remove(&job.key);
        self.queued_pods -= job.pods;
        if let Some(c) = self.callers.get_mut(&job.caller) {
            c.queued.retain(|&j| j != id);
        }
        if let Some(t) = self.tenants.get_mut(&job.tenant) {
            t.queued_pods -= job.pods;
        }
    }

    /// Gives the job its caller's warm pods of its size, most recent first.
    fn take_warm(&mut self, id: JobId) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let (caller, size, need) = (job.caller, job.size, job.need());
        let Some(c) = self.callers.get(&caller) else {
            return;
        };
        let mut fits: Vec<(Instant, PodId)> = c
            .warm
            .iter()
            .filter_map(|p| {
                let pod = self.pods.get(p)?;
                match pod.state {
                    PodState::Warm(w) if pod.size == size => {
                        debug_assert_eq!(w.caller, caller, "warm pod indexed under another caller");
                        Some((w.since, *p))
                    }
                    _ => None,
                }
            })
            .collect();
        fits.sort_unstable_by(|a, b| b.cmp(a));
        let lead = self.cfg.rewarm.lead;
        for (since, pod) in fits.into_iter().take(need as usize) {
            // A re-warmed pod is warm once its binding is done.
            let binding = self.pods.get(&pod).is_some_and(|p| {
                matches!(p.state, PodState::Warm(w) if matches!(w.basis, Basis::Rewarmed { .. }))
            }) && since + lead > self.now;
            self.detach(pod);
            self.set_state(pod, PodState::Reserved(id));
            let reason = Reason::WarmAffinity {
                caller,
                idle_ms: self.now.as_millis().saturating_sub(since.as_millis()),
            };
            if let Some(job) = self.jobs.get_mut(&id) {
                job.binding |= binding;
                job.held.push(HeldPod {
                    pod,
                    source: Source::Warm,
                    reason,
                });
            }
        }
    }

    fn take_standby(&mut self, id: JobId, out: &mut Vec<Decision>) {
        while self.jobs.get(&id).is_some_and(|j| j.need() > 0) {
            let Some(&pod) = self.standby.first() else {
                break;
            };
            if !self.promote(pod, id, false, out) {
                break;
            }
        }
    }

    /// Promotes ready, unbound `pod` for job `id`, growing it to the job's
    /// size. False when the inventory has no room for that.
    ///
    /// `just_started`: the pod became ready while the job waited. The job
    /// then waited for a pod start, so it counts as served cold whatever the
    /// pod was started for; standby means a pod was ready when it asked.
    fn promote(
        &mut self,
        pod: PodId,
        id: JobId,
        just_started: bool,
        out: &mut Vec<Decision>,
    ) -> bool {
        let Some(job) = self.jobs.get(&id) else {
            return false;
        };
        let (caller, size, queued_at) = (job.caller, job.size, job.queued_at);
        let Some(placement) = self.resize(pod, size.0) else {
            return false;
        };
        self.detach(pod);
        self.set_state(pod, PodState::Reserved(id));
        if let Some(p) = self.pods.get_mut(&pod) {
            p.size = size;
        }
        let (source, reason) = if just_started {
            let waited_ms = self.now.as_millis().saturating_sub(queued_at.as_millis());
            (Source::Cold, Reason::PodStarted { caller, waited_ms })
        } else {
            let standby_left = self.standby.len() as u32;
            (
                Source::Standby,
                Reason::StandbyHandover {
                    caller,
                    standby_left,
                },
            )
        };
        out.push(Decision::Promote {
            pod,
            job: id,
            placement,
            reason: reason.clone(),
        });
        if let Some(job) = self.jobs.get_mut(&id) {
            job.held.push(HeldPod {
                pod,
                source,
                reason,
            });
        }
        self.trim_starting(id, out);
        true
    }

    /// Pods started for a job that no longer needs them go elsewhere.
    fn trim_starting(&mut self, id: JobId, out: &mut Vec<Decision>) {
        loop {
            let Some(job) = self.jobs.get_mut(&id) else {
                return;
            };
            if job.starting.len() as u32 <= job.need() {
                return;
            }
            let Some(pod) = job.starting.pop() else {
                return;
            };
            self.repurpose(pod, out);
        }
    }

    /// All pods ready: run.
    fn start_job(&mut self, id: JobId, out: &mut Vec<Decision>) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        if job.running {
            return;
        }
        job.running = true;
        let held = job.held.clone();
        let starting = std::mem::take(&mut job.starting);
        let snapshot = job.clone();
        self.dequeue(id, &snapshot);
        let waited = millis(self.now.saturating_since(snapshot.queued_at));
        if let Some(c) = self.callers.get_mut(&snapshot.caller) {
            c.waited_ms[0] += waited;
        }
        if let Some(job) = self.jobs.get_mut(&id) {
            job.enqueued = false;
        }
        for h in held {
            self.set_state(h.pod, PodState::Active(id));
            out.push(Decision::Assign {
                job: id,
                pod: h.pod,
                source: h.source,
                reason: h.reason,
            });
        }
        for pod in starting {
            self.repurpose(pod, out);
        }
    }

    /// A starting pod whose job no longer needs it: to the job waiting
    /// longest for a pod of its size, else to standby, else released.
    fn repurpose(&mut self, pod: PodId, out: &mut Vec<Decision>) {
        let Some(size) = self.pods.get(&pod).map(|p| p.size) else {
            return;
        };
        if let Some((&key, &other)) = self.uncovered.first_key_value()
            && let Some(job) = self.jobs.get_mut(&other)
            && job.size == size
        {
            job.starting.push(pod);
            if job.uncovered() == 0 {
                self.uncovered.remove(&key);
            }
            self.set_state(pod, PodState::Starting(Purpose::ForJob(other)));
            return;
        }
        if self.mode.standby || self.mode.fixed.is_some() {
            if self.mode.fixed.is_none() {
                self.resize(pod, self.standby_shares());
            }
            self.set_state(pod, PodState::Starting(Purpose::Standby));
        } else {
            self.release(pod, Reason::NotNeeded, out);
        }
    }

    /// A ready pod nobody holds: standby where the policy keeps standby (a
    /// share only, unless the pool is fixed), released otherwise.
    fn unbound(&mut self, pod: PodId, out: &mut Vec<Decision>) {
        if self.mode.standby || self.mode.fixed.is_some() {
            if self.mode.fixed.is_none() {
                self.resize(pod, self.standby_shares());
            }
            self.set_state(pod, PodState::Standby);
            self.standby.insert(pod);
        } else {
            self.release(pod, Reason::NotNeeded, out);
        }
    }

    fn make_warm(&mut self, pod: PodId, caller: CallerId, tenant: TenantId) {
        let now = self.now;
        let keep = self.keep_alive_of(caller);
        let mut basis = keep.map_or(Basis::Fixed, |k| k.1);
        // While its loop runs elsewhere, the caller is not pausing, unless
        // its burst here is done.
        let done = self.burst_done(caller);
        let suspended = self.mode.one_loop
            && self.callers.get(&caller).is_some_and(|c| c.elsewhere)
            && done.is_none();
        if let Some(done) = done {
            basis = done;
        }
        // A burst done here leaves nothing for a keep-alive to catch before
        // the next burst, at least `rewarm.min_gap` away: the pod goes at
        // once (to stand by, or to be re-warmed for that burst).
        let expires = keep.filter(|_| !suspended).map(|(ms, _)| {
            if done.is_some() {
                now
            } else {
                now + Duration::from_millis(ms)
            }
        });
        self.set_state(
            pod,
            PodState::Warm(Warm {
                caller,
                tenant,
                since: now,
                armed: now,
                expires,
                basis,
            }),
        );
        self.idle.insert((now, pod));
        if let Some(e) = expires {
            self.expiry.insert((e, pod));
        }
        let shares = self.pods.get(&pod).map_or(0, |p| p.placement.shares());
        if let Some(c) = self.callers.get_mut(&caller) {
            c.warm.push(pod);
        }
        self.tenants.entry(tenant).or_default().warm += u64::from(shares);
    }

    fn job_finished(&mut self, id: JobId, out: &mut Vec<Decision>) -> Result<(), Error> {
        let Some(job) = self.jobs.remove(&id) else {
            return Err(Error::UnknownJob(id));
        };
        let now = self.now;
        if let Some(c) = self.callers.get_mut(&job.caller) {
            c.in_flight = c.in_flight.saturating_sub(1);
            c.last_end = Some(now);
            c.last_seen = now;
        }
        if !job.running {
            // Cancelled before it started: give back what it held.
            self.dequeue(id, &job);
            for h in &job.held {
                if h.source == Source::Warm && self.mode.warm {
                    self.make_warm(h.pod, job.caller, job.tenant);
                } else {
                    self.unbound(h.pod, out);
                }
            }
            for &pod in &job.starting {
                self.repurpose(pod, out);
            }
            return Ok(());
        }
        for h in &job.held {
            if self.mode.warm {
                self.make_warm(h.pod, job.caller, job.tenant);
            } else {
                self.release(h.pod, Reason::JobDone { job: id }, out);
            }
        }
        // Jobs of the same caller waiting in the queue take the pods now warm.
        let waiting = self
            .callers
            .get(&job.caller)
            .map(|c| c.queued.clone())
            .unwrap_or_default();
        for other in waiting {
            self.take_warm(other);
            self.trim_starting(other, out);
            if self.jobs.get(&other).is_some_and(|j| j.need() == 0) {
                self.start_job(other, out);
            }
        }
        Ok(())
    }

    fn pod_ready(&mut self, pod: PodId, out: &mut Vec<Decision>) -> Result<(), Error> {
        let Some(p) = self.pods.get(&pod) else {
            return Err(Error::UnknownPod(pod));
        };
        let PodState::Starting(purpose) = p.state else {
            return Err(Error::NotStarting(pod));
        };
        let now = self.now;
        self.start_time
            .observe(now.as_millis().saturating_sub(p.started.as_millis()));
        if let Purpose::ForJob(id) = purpose
            && let Some(job) = self.jobs.get_mut(&id)
            && job.starting.contains(&pod)
        {
            job.starting.retain(|&x| x != pod);
            let reason = Reason::PodStarted {
                caller: job.caller,
                waited_ms: now.as_millis().saturating_sub(job.queued_at.as_millis()),
            };
            job.held.push(HeldPod {
                pod,
                source: Source::Cold,
                reason,
            });
            let done = job.need() == 0;
            self.set_state(pod, PodState::Reserved(id));
            if done {
                self.start_job(id, out);
            }
            return Ok(());
        }
        self.stand_by(pod, out);
        Ok(())
    }

    /// Pods some earlier leader started: ready, unbound and wiped. Those
    /// there is no room for get no id (the driver stops them).
    fn pods_adopted(&mut self, pods: u32, out: &mut Vec<Decision>) {
        let mut ids = Vec::new();
        for _ in 0..pods {
            if self.pods.len() as u32 >= self.cfg.max_pods {
                break;
            }
            let Some(placement) = self.inv.alloc(self.standby_shares(), None) else {
                break;
            };
            let pod = self.add_pod(
                PodState::Starting(Purpose::Standby),
                placement.clone(),
                self.cfg.pod_shares,
            );
            out.push(Decision::Adopted {
                pod,
                placement,
                job: None,
            });
            ids.push(pod);
        }
        for pod in ids {
            self.stand_by(pod, out);
        }
    }

    /// Ready and unbound: the job that waited longest takes it, if it fits;
    /// otherwise it stands by.
    fn stand_by(&mut self, pod: PodId, out: &mut Vec<Decision>) {
        self.set_state(pod, PodState::Standby);
        self.standby.insert(pod);
        if let Some((_, &head)) = self.queue.first_key_value()
            && self.promote(pod, head, true, out)
            && self.jobs.get(&head).is_some_and(|j| j.need() == 0)
        {
            self.start_job(head, out);
        }
        if self.standby.contains(&pod) {
            self.standby.remove(&pod);
            self.unbound(pod, out);
        }
    }

    fn pod_gone(&mut self, pod: PodId) -> Result<(), Error> {
        let Some(p) = self.pods.get(&pod) else {
            return Err(Error::UnknownPod(pod));
        };
        let state = p.state;
        self.detach(pod);
        let k = StateKind::of(&state);
        if let Some(p) = self.pods.remove(&pod) {
            self.counts[k as usize] -= 1;
            self.held[k.category()] -= u64::from(p.placement.shares());
            self.inv.release(&p.placement);
        }
        let job = match state {
            PodState::Starting(Purpose::ForJob(j))
            | PodState::Reserved(j)
            | PodState::Active(j) => Some(j),
            _ => None,
        };
        if let Some(id) = job
            && let Some(job) = self.jobs.get_mut(&id)
        {
            job.starting.retain(|&x| x != pod);
            job.held.retain(|h| h.pod != pod);
            if job.enqueued && job.uncovered() > 0 {
                self.uncovered.insert(job.key, id);
            }
        }
        Ok(())
    }

    // ---- upkeep after every event ------------------------------------------

    fn maintain(&mut self, out: &mut Vec<Decision>) {
        let now = self.now;
        if self.mode.objective && now >= self.next_price {
            self.reprice();
            self.next_price = now
                + self
                    .cfg
                    .objective
                    .as_ref()
                    .map_or(self.cfg.review_every, |o| o.review_every);
        }
        let r = self.cfg.rewarm.clone();
        while let Some(&(t, pod)) = self.expiry.first() {
            if t > now {
                break;
            }
            let Some(PodState::Warm(w)) = self.pods.get(&pod).map(|p| p.state) else {
                self.expiry.remove(&(t, pod));
                continue;
            };
            // A pod held or bound for a burst that is now overdue: the
            // burst is late, not known to be gone.
            let overdue = matches!(w.basis, Basis::NextBurst { .. } | Basis::Rewarmed { .. });
            let burst = self.next_burst(w.caller).filter(|_| !overdue);
            if burst.is_none() {
                self.expect_return(w.caller, overdue);
            }
            // Past its keep-alive, the pod no longer covers its caller's next
            // burst: from now the burst counts in the standby target, and
            // `retire` keeps the pod as the standby pod for it where the pool
            // has too few, rather than release it while another starts.
            let keep = match burst.map(|b| (b, self.bind_at(w.caller, b))) {
                None => false,
                // A burst not worth re-warming for starts from a standby pod.
                Some((b, None)) => {
                    self.schedule_handover(w.caller, b);
                    false
                }
                Some((b, Some(bind_at))) => {
                    // Re-warmed from a standby pod: one that is ready and not
                    // claimed by an earlier re-warm, or one that can still
                    // start in time. Otherwise the pod stands by for it
                    // whatever the target; held through only where the
                    // re-warm is too near to be worth the shrinking.
                    let claimed = self.rewarms.range(..(bind_at, CallerId(u64::MAX))).count();
                    let spare = self.standby.len() > claimed;
                    let refill = bind_at >= now + self.rewarm_notice();
                    if bind_at <= now + r.hold_under || !(spare || refill || self.mode.standby) {
                        let basis = Basis::NextBurst {
                            period_ms: b.period_ms,
                        };
                        self.set_expiry(pod, Some(b.overdue), basis);
                        continue;
                    }
                    self.schedule_rewarm(w.caller, b, bind_at);
                    !(spare || refill)
                }
            };
            self.retire(pod, w, t, keep, out);
        }
        if self.mode.budget {
            self.enforce_budget(out);
        }
        if self.mode.rewarm {
            self.rewarm(out);
            self.expire_handovers();
        }
        self.cover(out);
        if self.mode.standby {
            self.keep_standby(out);
        }
        if let Some(size) = self.mode.fixed {
            self.fill_fixed(size, out);
        }
        self.next_review = now + self.cfg.review_every;
        if now >= self.next_sweep {
            self.sweep();
            self.next_sweep = now + self.cfg.caller_ttl / 2;
        }
    }

    /// Covers the queue's missing pods in order (priority, then FIFO); stops
    /// at the first job that cannot be covered, so capacity is not handed
    /// past it.
    fn cover(&mut self, out: &mut Vec<Decision>) {
        while let Some((&key, &id)) = self.uncovered.first_key_value() {
            let Some(n) = self.jobs.get(&id).map(Job::uncovered) else {
                self.uncovered.remove(&key);
                continue;
            };
            if n == 0 {
                self.uncovered.remove(&key);
                continue;
            }
            let covered = match self.mode.fixed {
                Some(size) => self.cover_fixed(id, n, size, out),
                None => self.cover_elastic(id, n, out),
            };
            if !covered {
                break;
            }
            if self.jobs.get(&id).is_none_or(|j| j.uncovered() == 0) {
                self.uncovered.remove(&key);
            }
        }
    }

    fn cover_elastic(&mut self, id: JobId, n: u32, out: &mut Vec<Decision>) -> bool {
        let Some(job) = self.jobs.get(&id) else {
            return true;
        };
        let (size, caller) = (job.size, job.caller);
        let pods_short = (self.pods.len() as u32 + n).saturating_sub(self.cfg.max_pods);
        if pods_short > 0 {
            self.make_room(id, pods_short, 0, out);
            return false;
        }
        let mut placed = Vec::with_capacity(n as usize);
        for _ in 0..n {
            match self.inv.alloc(size.0, None) {
                Some(p) => placed.push(p),
                None => {
                    for p in placed.iter().rev() {
                        self.inv.release(p);
                    }
                    let want = u64::from(size.0) * u64::from(n);
                    let short = want.saturating_sub(self.inv.free_total()).max(1);
                    self.make_room(id, 0, short, out);
                    return false;
                }
            }
        }
        let reason = if self.mode.warm {
            Reason::ColdStart { caller }
        } else {
            Reason::FreshPerJob
        };
        for placement in placed {
            self.start_for_job(id, placement, size, reason.clone(), out);
        }
        true
    }

    /// Starts a pod at `placement` for job `id`.
    fn start_for_job(
        &mut self,
        id: JobId,
        placement: Placement,
        size: Shares,
        reason: Reason,
        out: &mut Vec<Decision>,
    ) {
        let pod = self.add_pod(
            PodState::Starting(Purpose::ForJob(id)),
            placement.clone(),
            size,
        );
        if let Some(job) = self.jobs.get_mut(&id) {
            job.starting.push(pod);
        }
        out.push(Decision::StartPod {
            pod,
            purpose: Purpose::ForJob(id),
            placement,
            reason,
        });
    }

    /// The fixed pool never grows past its size: a job that finds no free
    /// pod takes the pod idle longest from another caller, wiped.
    fn cover_fixed(&mut self, id: JobId, n: u32, size: u32, out: &mut Vec<Decision>) -> bool {
        for _ in 0..n {
            let Some(job) = self.jobs.get(&id) else {
                return true;
            };
            let (job_size, caller) = (job.size, job.caller);
            if self.live_pods() < size {
                let Some(placement) = self.inv.alloc(job_size.0, None) else {
                    return false;
                };
                self.start_for_job(id, placement, job_size, Reason::FixedPool { size }, out);
                continue;
            }
            let Some(&(_, pod)) = self.idle.first() else {
                return false;
            };
            let Some(PodState::Warm(w)) = self.pods.get(&pod).map(|p| p.state) else {
                return false;
            };
            self.detach(pod);
            self.set_state(pod, PodState::Standby);
            self.standby.insert(pod);
            out.push(Decision::Reset {
                pod,
                placement: self.pods[&pod].placement.clone(),
                reason: Reason::Recycled {
                    from: w.caller,
                    to: caller,
                },
            });
            if !self.promote(pod, id, false, out) {
                return false;
            }
            if self.jobs.get(&id).is_some_and(|j| j.need() == 0) {
                self.start_job(id, out);
            }
        }
        true
    }

    /// Releases idle pods (warm idle longest first, then standby) so that a
    /// job can be placed; never an active one. Waits for pods already
    /// draining before it releases more.
    fn make_room(
        &mut self,
        id: JobId,
        pods_short: u32,
        shares_short: u64,
        out: &mut Vec<Decision>,
    ) {
        if self.counts[StateKind::Draining as usize] > 0 {
            return;
        }
        let (mut pods, mut shares) = (0u32, 0u64);
        while pods == 0 || pods < pods_short || shares < shares_short {
            let victim = self.idle.first().map(|&(_, p)| p).or_else(|| {
                // The standby pod on the emptiest GPU frees the most useful room.
                self.standby.iter().copied().max_by_key(|p| {
                    self.pods.get(p).map_or(0, |pod| {
                        pod.placement
                            .0
                            .first()
                            .map_or(0, |s| self.inv.free_on(s.gpu))
                    })
                })
            });
            let Some(victim) = victim else {
                return;
            };
            pods += 1;
            shares += self
                .pods
                .get(&victim)
                .map_or(0, |p| u64::from(p.placement.shares()));
            self.release(victim, Reason::MakeRoom { job: id }, out);
        }
    }

    /// Re-chooses `caller`'s keep-alive from its pauses: against the
    /// objective at the pool's price, or a percentile without one.
    fn rematch(&mut self, id: CallerId) {
        let Some(c) = self.callers.get(&id) else {
            return;
        };
        let ka = &self.cfg.keep_alive;
        if c.pauses.len() < ka.min_samples as usize {
            return;
        }
        let (min, max) = (millis(ka.min), millis(ka.max));
        let (ms, basis, curve, rewarm_curve) = match &self.cfg.objective {
            Some(o) if self.mode.objective => {
                let steps = self.mode.rewarm.then(|| self.step_periods(c)).flatten();
                let periodic = steps.is_some();
                let gap = millis(self.cfg.rewarm.min_gap);
                let covered_from = periodic.then_some(gap);
                let shape = Shape {
                    shares: c.size.0,
                    margin: o.margin,
                    min_ms: min,
                    max_ms: max,
                    covered_from,
                };
                let curve = Curve::new(c.pauses.as_slice(), shape);
                // The long pauses are the re-warm's, at a binding priced
                // from the periods.
                let rewarm_curve = if let Some((periods, _)) = &steps {
                    let pauses = c.pauses.as_slice();
                    let long = pauses.iter().filter(|&&p| u64::from(p) >= gap).count();
                    Curve::rewarm(
                        periods,
                        RewarmShape {
                            shares: c.size.0,
                            lead_ms: millis(self.cfg.rewarm.lead),
                            share: long as f64 / pauses.len().max(1) as f64,
                        },
                    )
                } else {
                    Curve::default()
                };
                let Some(p) = curve.choose(self.price) else {
                    return;
                };
                let warm = p.warm + rewarm_curve.choose(self.price).map_or(0.0, |r| r.warm);
                (p.keep_ms, self.objective_basis(warm), curve, rewarm_curve)
            }
            _ => {
                let Some(p) = c.pauses.percentile(ka.percentile) else {
                    return;
                };
                let ms = (p + millis(ka.margin)).clamp(min, max);
                (ms, Basis::Percentile, Curve::default(), Curve::default())
            }
        };
        if let Some(c) = self.callers.get_mut(&id) {
            c.matched_ms = Some(ms);
            c.basis = basis;
            c.curve = curve;
            c.rewarm_curve = rewarm_curve;
        }
    }

    /// When to bind a pod to `caller` ahead of burst `b`: at the offset from
    /// the last burst's start its re-warm curve chooses at the pool's price,
    /// or `lead` before the earliest period without one. `None`: the burst
    /// is not worth a re-warm and starts from a standby pod.
    fn bind_at(&self, caller: CallerId, b: Burst) -> Option<Instant> {
        let earliest = b.earliest.saturating_sub(self.cfg.rewarm.lead);
        let Some(p) = self
            .callers
            .get(&caller)
            .and_then(|c| c.rewarm_curve.choose(self.price))
        else {
            return Some(earliest);
        };
        (p.keep_ms != NEVER).then(|| (b.last + Duration::from_millis(p.keep_ms)).max(earliest))
    }

    /// The share of `caller`'s remembered periods that bring its next burst
    /// no sooner than `lead` after a binding at `at`; all of them for a
    /// burst predicted from its loop's return.
    fn covers(&self, caller: CallerId, b: Burst, at: Instant) -> f64 {
        let Some(c) = self.callers.get(&caller) else {
            return 0.0;
        };
        if b.on_loop {
            // Bound `lead` before the soonest of its lags from the loop's
            // return: before every recent burst came.
            return 1.0;
        }
        let from = at.as_millis().saturating_sub(b.last.as_millis()) + millis(self.cfg.rewarm.lead);
        let periods = self.step_periods(c).map(|(p, _)| p).unwrap_or_default();
        let later = periods.iter().filter(|&&p| u64::from(p) >= from).count();
        later as f64 / periods.len().max(1) as f64
    }

    fn objective_basis(&self, warm: f64) -> Basis {
        Basis::Objective {
            covers_permille: (warm * 1000.0).round() as u32,
            price_share_ms: self.price_share_ms(),
        }
    }

    /// The objective's price as a basis tells it: `u64::MAX` where no
    /// price reaches the objective.
    fn price_share_ms(&self) -> u64 {
        if self.price.is_finite() {
            self.price.round() as u64
        } else {
            u64::MAX
        }
    }

    /// Recomputes the objective's price from every caller's curve, and
    /// each caller's keep-alive at it. Callers in id order, so that the
    /// result does not depend on the map's order.
    fn reprice(&mut self) {
        let Some(o) = self.cfg.objective.clone() else {
            return;
        };
        // A handover costs a standby refill (one pod start at the standby
        // share) and its binding (the promotion, the `lead` of a re-warm,
        // at the pod's size, before the job runs). Keeping a pod is worth
        // at least that per warm start.
        let refill = self.start_time.ms() as f64 * f64::from(self.standby_shares().max(1));
        let binding = millis(self.cfg.rewarm.lead) as f64 * f64::from(self.cfg.pod_shares.0);
        let floor = refill + binding;
        let aim = (o.percentile + o.slack).min(1.0);
        // Integral control on what is achieved, once enough jobs were seen.
        if self.served[1] >= 64.0
            && let Some(achieved) = self.warm_share()
        {
            self.boost = (aim - achieved)
                .mul_add(0.2, self.boost)
                .clamp(-o.slack, 1.0 - aim);
        }
        let mut ids: Vec<CallerId> = self
            .callers
            .iter()
            .filter(|(_, c)| !c.curve.is_empty())
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        let (price, predicted) = if o.class == StartClass::Warm {
            let joint: Vec<(f64, Curve)> = ids
                .iter()
                .filter_map(|id| {
                    let c = self.callers.get(id)?;
                    Some((1.0 / c.cycle_ms.max(1.0), c.curve.plus(&c.rewarm_curve)))
                })
                .collect();
            objective::price(joint.iter().map(|(w, c)| (*w, c)), aim + self.boost, floor)
        } else {
            (floor, 1.0)
        };
        self.price = price;
        self.predicted = predicted;
        let (min, max) = (
            millis(self.cfg.keep_alive.min),
            millis(self.cfg.keep_alive.max),
        );
        if self.pooled.len() >= PRIOR_PAUSES {
            let shape = Shape {
                shares: 1,
                margin: o.margin,
                min_ms: min,
                max_ms: max,
                covered_from: None,
            };
            self.prior = Curve::new(self.pooled.as_slice(), shape);
        }
        for id in ids {
            let Some(c) = self.callers.get(&id) else {
                continue;
            };
            let Some(p) = c.curve.choose(price) else {
                continue;
            };
            let rewarmed = c.rewarm_curve.choose(price).map_or(0.0, |r| r.warm);
            let basis = self.objective_basis(p.warm + rewarmed);
            if let Some(c) = self.callers.get_mut(&id) {
                c.matched_ms = Some(p.keep_ms.clamp(min, max));
                c.basis = basis;
            }
        }
    }

    /// The shortest and longest of the caller's recent periods that predict
    /// its next ([`Pool::step_periods`]), if they are enough and regular. A
    /// burst comes late when its loop was held up
    /// (a cold start, a straggler before a barrier), seldom much early (a
    /// short pause, prepared for by [`Burst::early`]): the longest quarter
    /// of the periods may stray, and the bursts they predict are not waited
    /// for.
    fn period(&self, c: &CallerState) -> Option<(u64, u64)> {
        self.step_periods(c).map(|(_, range)| range)
    }

    /// The recent periods that predict the caller's next, if they are
    /// regular: all of them, or for a loop whose steps alternate two kinds
    /// (a long pause every other step, for an evaluation), every other
    /// one, those of the kind due next. Its steps alternate where each
    /// kind's periods are regular and all of one kind are shorter than all
    /// of the other. With them, their regular range (see [`Pool::period`]).
    fn step_periods<'a>(&self, c: &'a CallerState) -> Option<Steps<'a>> {
        let all = c.periods.as_slice();
        if let Some(range) = self.regular(all) {
            return Some((Cow::Borrowed(all), range));
        }
        let kind =
            |skip: usize| -> Vec<u32> { c.periods.newest_first().skip(skip).step_by(2).collect() };
        let (next, other) = (kind(1), kind(0));
        let range = self.regular(&next)?;
        self.regular(&other)?;
        // Apart in all their periods, strays included.
        let bounds = |p: &[u32]| (p.iter().min().copied(), p.iter().max().copied());
        let apart = match (bounds(&next), bounds(&other)) {
            ((Some(a), Some(b)), (Some(x), Some(y))) => b < x || y < a,
            _ => false,
        };
        apart.then_some((Cow::Owned(next), range))
    }

    /// The shortest and longest of `periods`, if they are enough and
    /// regular (see [`Pool::period`]).
    fn regular(&self, periods: &[u32]) -> Option<(u64, u64)> {
        let r = &self.cfg.rewarm;
        if periods.len() < r.min_periods as usize {
            return None;
        }
        let (lo, hi) = usual_range(periods, r.min_periods as usize)?;
        (lo > 0 && (hi - lo) as f64 <= r.max_spread * lo as f64).then_some((lo, hi))
    }

    /// Binds a standby pod to `caller` at `at`, ahead of its burst `b`. A
    /// binding later than the earliest the burst may need it leaves the
    /// bursts that come sooner to a standby pod: until the binding, they
    /// are expected as handovers.
    fn schedule_rewarm(&mut self, id: CallerId, b: Burst, at: Instant) {
        let trails = self
            .callers
            .get(&id)
            .is_some_and(|c| self.trails(c).is_some());
        let Some(c) = self.callers.get_mut(&id) else {
            return;
        };
        if let Some(old) = c.rewarm.take().and_then(Rewarm::at) {
            self.rewarms.remove(&(old, id));
        }
        // Bound when its loop comes back elsewhere; a standby pod waits
        // for it meanwhile, and takes the burst if the loop starts here.
        if trails {
            c.rewarm = Some(Rewarm::OnLoop);
            self.expect_handover(id, b.early, b.latest + self.cfg.rewarm.grace);
            return;
        }
        c.rewarm = Some(Rewarm::At(at));
        self.rewarms.insert((at, id));
        if at + self.cfg.rewarm.lead > b.early {
            self.expect_handover(id, b.early, at.min(b.latest + self.cfg.rewarm.grace));
        } else if let Some((t, _)) = c.handover_at.take() {
            self.handovers_due.remove(&(t, id));
        }
    }

    /// Expects `caller`'s burst `b` to start from a standby pod: the standby
    /// target counts it from a pod start before it is due until the latest
    /// it is expected.
    fn schedule_handover(&mut self, id: CallerId, b: Burst) {
        self.expect_handover(id, b.early, b.latest + self.cfg.rewarm.grace);
    }

    /// Expects `caller`'s burst to start from a standby pod between `from`
    /// and `until`.
    fn expect_handover(&mut self, id: CallerId, from: Instant, until: Instant) {
        let Some(c) = self.callers.get_mut(&id) else {
            return;
        };
        if let Some((old, _)) = c.handover_at.replace((from, until)) {
            self.handovers_due.remove(&(old, id));
        }
        self.handovers_due.insert((from, id));
    }

    /// A caller quiet after its first burst here has no period to predict
    /// its next one by, and one whose burst is `overdue` has outrun its
    /// periods: either is expected back within the standby horizon (as
    /// long as its first burst's handovers are remembered), and a standby
    /// pod waits for it meanwhile rather than its warm pod.
    fn expect_return(&mut self, id: CallerId, overdue: bool) {
        if !self.mode.rewarm {
            return;
        }
        let Some(c) = self.callers.get(&id) else {
            return;
        };
        if c.last_burst.is_none()
            || (c.periods.len() > 0 && !overdue)
            || c.handover_at.is_some()
            || c.rewarm_at().is_some()
        {
            return;
        }
        let until = self.now + Duration::from_millis(self.standby_horizon());
        self.expect_handover(id, self.now, until);
    }

    /// Forgets expected handovers whose burst never came.
    fn expire_handovers(&mut self) {
        let now = self.now;
        let stale: Vec<(Instant, CallerId)> = self
            .handovers_due
            .range(..(now, CallerId(u64::MAX)))
            .copied()
            .filter(|&(t, id)| {
                self.callers.get(&id).is_none_or(|c| {
                    c.handover_at
                        .is_none_or(|(at, until)| at != t || until < now)
                })
            })
            .collect();
        for (t, id) in stale {
            self.handovers_due.remove(&(t, id));
            if let Some(c) = self.callers.get_mut(&id)
                && c.handover_at.is_some_and(|(at, _)| at == t)
            {
                c.handover_at = None;
            }
        }
    }

    /// Binds a standby pod to each caller whose re-warm is due, if it is
    /// still idle here and its burst still expected.
    fn rewarm(&mut self, out: &mut Vec<Decision>) {
        let now = self.now;
        while let Some(&(t, id)) = self.rewarms.first() {
            if t > now {
                break;
            }
            self.rewarms.remove(&(t, id));
            let Some(c) = self.callers.get_mut(&id) else {
                continue;
            };
            c.rewarm = None;
            if c.in_flight > 0 || !c.warm.is_empty() || !c.queued.is_empty() {
                continue;
            }
            let (tenant, size) = (c.tenant, c.size);
            let Some(b) = self.next_burst(id) else {
                continue;
            };
            // The standby pod on the GPU with the most room grows in place.
            let Some(pod) = self.standby.iter().copied().max_by_key(|p| {
                let free = self
                    .pods
                    .get(p)
                    .and_then(|pod| pod.placement.0.first())
                    .map_or(0, |s| self.inv.free_on(s.gpu));
                (free, Reverse(*p))
            }) else {
                continue;
            };
            let Some(placement) = self.resize(pod, size.0) else {
                continue;
            };
            self.detach(pod);
            if let Some(p) = self.pods.get_mut(&pod) {
                p.size = size;
            }
            self.make_warm(pod, id, tenant);
            // Bound, the burst no longer needs a standby pod.
            if let Some((t, _)) = self.callers.get_mut(&id).and_then(|c| c.handover_at.take()) {
                self.handovers_due.remove(&(t, id));
            }
            let basis = Basis::Rewarmed {
                period_ms: b.period_ms,
            };
            self.set_expiry(pod, Some(b.overdue), basis);
            out.push(Decision::Prewarm {
                pod,
                caller: id,
                tenant,
                placement,
                reason: Reason::Rewarm {
                    caller: id,
                    period_ms: b.period_ms,
                    due_in_ms: b.earliest.as_millis().saturating_sub(now.as_millis()),
                    covers_permille: (self.covers(id, b, now) * 1000.0).round() as u32,
                },
            });
        }
    }

    /// Re-arms a warm pod's keep-alive from now (`None`: stopped).
    fn set_expiry(&mut self, pod: PodId, expires: Option<Instant>, basis: Basis) {
        let now = self.now;
        let Some(p) = self.pods.get_mut(&pod) else {
            return;
        };
        let PodState::Warm(mut w) = p.state else {
            return;
        };
        if let Some(e) = w.expires {
            self.expiry.remove(&(e, pod));
        }
        w.expires = expires;
        w.armed = now;
        w.basis = basis;
        p.state = PodState::Warm(w);
        if let Some(e) = expires {
            self.expiry.insert((e, pod));
        }
    }

    /// The caller's loop started or stopped running jobs in another pool.
    fn loop_busy(&mut self, id: CallerId, busy: bool) {
        if !self.mode.one_loop {
            return;
        }
        let now = self.now;
        let Some(c) = self.callers.get_mut(&id) else {
            return;
        };
        if c.elsewhere == busy {
            return;
        }
        c.elsewhere = busy;
        c.last_seen = now;
        // The loop comes back from a quiet gap in another pool: its burst
        // starts now, here too.
        let gap = self.cfg.rewarm.min_gap;
        let mut back = false;
        if busy
            && c.in_flight == 0
            && let Some(end) = c.last_end
        {
            let quiet = now.saturating_since(end);
            if quiet >= gap {
                c.resumed = Some(now);
                back = c.rewarm == Some(Rewarm::OnLoop);
            }
            c.gap_elsewhere_ms = c.gap_elsewhere_ms.max(millis(quiet));
        }
        if !busy && c.in_flight == 0 {
            c.last_end = Some(now);
        }
        let pods = c.warm.clone();
        // A re-warm that waited for the loop: its burst here is now
        // predicted from the return (`Burst::on_loop`), and bound `lead`
        // before its earliest.
        if back && let Some(b) = self.next_burst(id).filter(|b| b.on_loop) {
            let at = b.earliest.saturating_sub(self.cfg.rewarm.lead).max(now);
            if let Some(c) = self.callers.get_mut(&id) {
                c.rewarm = Some(Rewarm::At(at));
            }
            self.rewarms.insert((at, id));
        }
        let keep = self.keep_alive_of(id);
        let done = self.burst_done(id);
        for pod in pods {
            let Some(PodState::Warm(w)) = self.pods.get(&pod).map(|p| p.state) else {
                continue;
            };
            // Pods held for a burst, or done with theirs, keep their
            // deadline.
            if matches!(
                w.basis,
                Basis::NextBurst { .. } | Basis::Rewarmed { .. } | Basis::BurstDone { .. }
            ) {
                continue;
            }
            match (busy, keep) {
                (true, _) => match done {
                    None => self.set_expiry(pod, None, w.basis),
                    // Its keep-alive runs on from its job's end.
                    Some(basis) => {
                        if let Some(p) = self.pods.get_mut(&pod)
                            && let PodState::Warm(w) = &mut p.state
                        {
                            w.basis = basis;
                        }
                    }
                },
                (false, Some((ms, basis))) => {
                    self.set_expiry(pod, Some(now + Duration::from_millis(ms)), basis);
                }
                (false, None) => {}
            }
        }
    }

    fn standby_target(&self) -> u32 {
        if !self.mode.standby {
            return 0;
        }
        let s = &self.cfg.standby;
        let peak = self
            .handovers
            .peak(self.now, self.start_time.ms(), self.standby_horizon());
        // Re-warms due within a pod start (and a tenth and the lead, for a
        // margin) need standby pods ready by then, besides those for
        // handovers; so do periodic bursts due that soon which are not
        // re-warmed, though the recent peak may count them already. A
        // caller that still holds its pod needs none yet: that pod stands
        // by for it once its keep-alive runs out (`retire`), where a
        // standby pod started for it meanwhile would be surplus by then.
        let soon = (self.now + self.rewarm_notice(), CallerId(u64::MAX));
        let due = self
            .rewarms
            .range(..soon)
            .filter(|&&(_, id)| self.callers.get(&id).is_none_or(|c| !self.holds_pod(c)))
            .count();
        // A burst expected before its re-warm needs no pod of its own
        // once the re-warm is due: it takes the re-warm's, or the re-warm
        // takes its.
        let bursts = self
            .handovers_due
            .range(..soon)
            .filter(|&&(_, id)| {
                self.callers.get(&id).is_none_or(|c| {
                    !self.holds_pod(c) && c.rewarm_at().is_none_or(|at| at >= soon.0)
                })
            })
            .count();
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        peak.max(count(bursts))
            .saturating_add(count(due))
            .clamp(s.min, s.max)
    }

    /// Whether the caller holds a pod here, busy or warm within its
    /// keep-alive. Its next burst needs no standby pod yet: when the
    /// keep-alive runs out, the pod is counted as its caller's need and
    /// kept as the standby pod for it where the pool has too few.
    fn holds_pod(&self, c: &CallerState) -> bool {
        c.in_flight > 0
            || c.warm.iter().any(|p| {
                matches!(
                    self.pods.get(p).map(|p| p.state),
                    Some(PodState::Warm(w)) if w.expires.is_none_or(|e| e > self.now)
                )
            })
    }

    /// How long handovers size the standby target: the configured horizon,
    /// or the longest regular period of a periodic caller and a pod start,
    /// if longer, so a step's handovers are remembered until the next step.
    fn standby_horizon(&self) -> u64 {
        let step = self.longest_period_ms + self.start_time.ms();
        millis(self.cfg.standby.horizon).max(step)
    }

    /// How long before a re-warm the standby pod it takes is started.
    fn rewarm_notice(&self) -> Duration {
        Duration::from_millis(self.start_time.ms() * 11 / 10 + millis(self.cfg.rewarm.lead))
    }

    fn budget_now(&self) -> (Shares, BudgetInputs) {
        let tau = millis(self.cfg.budget.rate_window) as f64;
        let rate = self.arrivals.per_s(self.now, tau);
        let horizon_s = self.cfg.budget.horizon.as_secs_f64();
        let target = self.standby_target();
        let pods = rate.mul_add(horizon_s, f64::from(self.queued_pods));
        let demand = pods.mul_add(
            f64::from(self.cfg.pod_shares.0),
            f64::from(target * self.standby_shares()),
        );
        let bounds = self.cfg.budget.pool;
        let budget = bounds.clamp(demand);
        let inputs = BudgetInputs {
            queued_pods: self.queued_pods,
            arrival_rate_per_s: rate,
            standby_target: target,
            demand: Shares(demand.ceil().min(f64::from(u32::MAX)) as u32),
            floor: bounds.floor,
            ceiling: bounds.ceiling,
        };
        (budget, inputs)
    }

    /// Each tenant's budget for its warm pods: the pool's budget left after
    /// standby, split in proportion to the tenants' demand (evenly among
    /// tenants holding warm pods when there is none), within each tenant's
    /// floor and ceiling. With one tenant it is the pool's budget.
    fn tenant_budgets(&self, pool_budget: Shares) -> Vec<(TenantId, Shares)> {
        let tau = millis(self.cfg.budget.rate_window) as f64;
        let horizon_s = self.cfg.budget.horizon.as_secs_f64();
        let demand = |t: &TenantState| {
            t.arrivals
                .per_s(self.now, tau)
                .mul_add(horizon_s, f64::from(t.queued_pods))
        };
        // Summed in tenant order so that the result does not depend on the
        // map's iteration order: the policy is deterministic.
        let mut demands: Vec<(TenantId, f64)> = self
            .tenants
            .iter()
            .map(|(&id, t)| (id, demand(t)))
            .collect();
        demands.sort_unstable_by_key(|d| d.0);
        let total: f64 = demands.iter().map(|d| d.1).sum();
        let holders = self.tenants.values().filter(|t| t.warm > 0).count().max(1) as f64;
        let warm_budget = u64::from(pool_budget.0).saturating_sub(self.held[2]) as f64;
        let mut budgets: Vec<(TenantId, Shares)> = self
            .tenants
            .iter()
            .map(|(&id, t)| {
                let share = if total > 0.0 {
                    demand(t) / total
                } else if t.warm > 0 {
                    1.0 / holders
                } else {
                    0.0
                };
                (id, self.cfg.tenant_bounds(id).clamp(warm_budget * share))
            })
            .collect();
        budgets.sort_unstable();
        budgets
    }

    fn enforce_budget(&mut self, out: &mut Vec<Decision>) {
        let (budget, inputs) = self.budget_now();
        self.budget = Some((budget, inputs));
        let step = self.cfg.shares_per_gpu.max(self.cfg.pod_shares.0);
        let changed = self.emitted_budget.is_none_or(|e| {
            e.0.abs_diff(budget.0) >= step
                || (e != budget && (budget == inputs.floor || budget == inputs.ceiling))
        });
        if changed {
            self.emitted_budget = Some(budget);
            out.push(Decision::Budget {
                budget,
                gpus: budget.gpus(self.cfg.shares_per_gpu),
                inputs,
            });
        }

        // Warm plus standby within the pool's budget: warm idle longest first
        // (sparing tenants at their floor), then standby.
        loop {
            let held = self.held[1] + self.held[2];
            if held <= u64::from(budget.0) {
                break;
            }
            let victim = self
                .idle
                .iter()
                .find_map(|&(_, p)| {
                    let pod = self.pods.get(&p)?;
                    let PodState::Warm(w) = pod.state else {
                        return None;
                    };
                    let floor = u64::from(self.cfg.tenant_bounds(w.tenant).floor.0);
                    let t = self.tenants.get(&w.tenant)?;
                    (t.warm.saturating_sub(u64::from(pod.placement.shares())) >= floor).then_some(p)
                })
                .or_else(|| self.standby.last().copied())
                .or_else(|| self.standby_starts().max());
            let Some(victim) = victim else {
                break;
            };
            let reason = Reason::OverBudget {
                held: Shares(held.min(u64::from(u32::MAX)) as u32),
                budget,
            };
            self.release(victim, reason, out);
        }

        // Each tenant's warm pods within its own budget.
        let over: Vec<(TenantId, Shares)> = self
            .tenant_budgets(budget)
            .into_iter()
            .filter(|(id, b)| self.tenants[id].warm > u64::from(b.0))
            .collect();
        for (tenant, b) in over {
            while let Some(held) = self.tenants.get(&tenant).map(|t| t.warm)
                && held > u64::from(b.0)
            {
                let victim = self
                    .idle
                    .iter()
                    .find_map(|&(_, p)| match self.pods.get(&p)?.state {
                        PodState::Warm(w) if w.tenant == tenant => Some(p),
                        _ => None,
                    });
                let Some(victim) = victim else {
                    break;
                };
                let reason = Reason::OverTenantBudget {
                    tenant,
                    held: Shares(held.min(u64::from(u32::MAX)) as u32),
                    budget: b,
                };
                self.release(victim, reason, out);
            }
        }
    }

    fn keep_standby(&mut self, out: &mut Vec<Decision>) {
        let target = self.standby_target();
        let mut have = self.standby_have();
        let share = self.standby_shares();
        while have < target {
            if self.pods.len() as u32 >= self.cfg.max_pods {
                break;
            }
            if let Some((budget, _)) = self.budget
                && self.held[1] + self.held[2] + u64::from(share) > u64::from(budget.0)
            {
                break;
            }
            let Some(placement) = self.inv.alloc(share, None) else {
                break;
            };
            let size = self.cfg.pod_shares;
            let pod = self.add_pod(
                PodState::Starting(Purpose::Standby),
                placement.clone(),
                size,
            );
            out.push(Decision::StartPod {
                pod,
                purpose: Purpose::Standby,
                placement,
                reason: Reason::StandbyRefill { have, target },
            });
            have += 1;
        }
        // A pod is kept for a re-warm due within a pod start of its notice:
        // released and started again in time, it would hold its share
        // about as long.
        let keep = (
            self.now + self.rewarm_notice() + Duration::from_millis(self.start_time.ms()),
            CallerId(u64::MAX),
        );
        let far = self.rewarms.range(..keep).count();
        let target = target.max(u32::try_from(far).unwrap_or(u32::MAX));
        self.surplus_settles = None;
        if have > target {
            // Cancel surplus starts first: a ready standby pod is worth more.
            let mut surplus: Vec<PodId> = self.standby_starts().collect();
            surplus.sort_unstable();
            let mut order: Vec<PodId> = self.standby.iter().copied().collect();
            order.extend(surplus);
            let mut surplus = order;
            // A pod started within the minimum keep-alive stays until that
            // has passed, and none goes in its place: the target moves as
            // re-warms take standby pods and expected bursts come in, and a
            // pod released where the need for it comes back within a second
            // would be started again (with pods up at once, as a local
            // runtime's are, a loop's step flapped starts and releases).
            let settle = self.cfg.keep_alive.min;
            let mut n = have - target;
            while n > 0 {
                let Some(pod) = surplus.pop() else {
                    break;
                };
                n -= 1;
                let settles = self.pods[&pod].started + settle;
                if settles > self.now {
                    self.surplus_settles =
                        Some(self.surplus_settles.map_or(settles, |t| t.min(settles)));
                    continue;
                }
                self.release(pod, Reason::StandbySurplus { have, target }, out);
                have -= 1;
            }
        }
    }

    fn fill_fixed(&mut self, size: u32, out: &mut Vec<Decision>) {
        while self.live_pods() < size {
            let Some(placement) = self.inv.alloc(self.cfg.pod_shares.0, None) else {
                return;
            };
            let pod = self.add_pod(
                PodState::Starting(Purpose::Standby),
                placement.clone(),
                self.cfg.pod_shares,
            );
            out.push(Decision::StartPod {
                pod,
                purpose: Purpose::Standby,
                placement,
                reason: Reason::FixedPool { size },
            });
        }
    }

    /// Forgets callers and tenants with nothing left, so memory follows live
    /// callers rather than every caller ever seen.
    fn sweep(&mut self) {
        let now = self.now.as_millis();
        let ttl = millis(self.cfg.caller_ttl);
        self.callers.retain(|_, c| {
            c.in_flight > 0
                || !c.warm.is_empty()
                || !c.queued.is_empty()
                || now.saturating_sub(c.last_seen.as_millis()) < ttl
        });
        let tau = millis(self.cfg.budget.rate_window) as f64;
        let at = self.now;
        self.tenants
            .retain(|_, t| t.warm > 0 || t.queued_pods > 0 || t.arrivals.per_s(at, tau) > 1e-6);
    }

    // ---- views -------------------------------------------------------------

    /// The pool as the API shows it. O(pods + callers).
    pub fn snapshot(&self) -> Snapshot {
        let per = self.cfg.shares_per_gpu;
        let gpus = |s: u64| s as f64 / f64::from(per);
        let c = |k: StateKind| self.counts[k as usize];
        let budgets: HashMap<TenantId, Shares> = if self.mode.budget {
            self.tenant_budgets(self.budget_now().0)
                .into_iter()
                .collect()
        } else {
            HashMap::new()
        };
        let mut tenants: Vec<TenantView> = self
            .tenants
            .iter()
            .map(|(&tenant, t)| TenantView {
                tenant,
                warm: Shares(t.warm.min(u64::from(u32::MAX)) as u32),
                queued_pods: t.queued_pods,
                budget: budgets.get(&tenant).copied(),
            })
            .collect();
        tenants.sort_by_key(|t| t.tenant);
        let mut callers: Vec<CallerView> = self
            .callers
            .iter()
            .map(|(&caller, s)| CallerView {
                caller,
                tenant: s.tenant,
                keep_alive_ms: self.keep_alive_ms(caller),
                pauses: s.pauses.len() as u32,
                warm_pods: s.warm.len() as u32,
                in_flight: s.in_flight,
                basis: self.keep_alive_of(caller).map(|k| k.1),
                period_ms: self.period(s).map(|p| p.0),
                rewarm_at: s.rewarm_at(),
                busy_elsewhere: s.elsewhere,
            })
            .collect();
        callers.sort_by_key(|c| c.caller);
        let mut pod_list: Vec<PodView> = self
            .pods
            .iter()
            .map(|(&pod, p)| PodView {
                pod,
                state: StateKind::of(&p.state).name(),
                caller: match p.state {
                    PodState::Warm(w) => Some(w.caller),
                    PodState::Reserved(j) | PodState::Active(j) => {
                        self.jobs.get(&j).map(|j| j.caller)
                    }
                    _ => None,
                },
                job: match p.state {
                    PodState::Reserved(j)
                    | PodState::Active(j)
                    | PodState::Starting(Purpose::ForJob(j)) => Some(j),
                    _ => None,
                },
                placement: p.placement.clone(),
            })
            .collect();
        pod_list.sort_by_key(|p| p.pod);
        let held = self.held();
        let budget = if self.mode.budget {
            let (budget, inputs) = self.budget_now();
            Some(BudgetView {
                budget,
                gpus: budget.gpus(per),
                inputs,
            })
        } else {
            None
        };
        Snapshot {
            policy: self.kind.to_string(),
            at: self.now,
            pods: PodCounts {
                starting: c(StateKind::StartingJob) + c(StateKind::StartingStandby),
                standby: c(StateKind::Standby),
                warm: c(StateKind::Warm),
                reserved: c(StateKind::Reserved),
                active: c(StateKind::Active),
                draining: c(StateKind::Draining),
            },
            gpus: GpuView {
                inventory: self.cfg.gpus,
                shares_per_gpu: per,
                held_shares: held,
                active: gpus(held.active),
                warm: gpus(held.warm),
                standby: gpus(held.standby),
                draining: gpus(held.draining),
                free: gpus(self.inv.free_total()),
            },
            budget,
            standby_target: self.standby_target(),
            objective: self
                .cfg
                .objective
                .as_ref()
                .filter(|_| self.mode.objective)
                .map(|o| ObjectiveView {
                    percentile: o.percentile,
                    class: o.class,
                    price_share_ms: if self.price.is_finite() {
                        self.price.round() as u64
                    } else {
                        u64::MAX
                    },
                    predicted: self.predicted,
                    warm_share: self.warm_share(),
                }),
            queued_jobs: self.queue.len() as u32,
            queued_pods: self.queued_pods,
            tenants,
            callers,
            pod_list,
        }
    }

    /// Jobs that started within the objective's class, and all jobs, as
    /// the objective counts them.
    #[cfg(test)]
    pub(crate) fn served_warm(&self) -> (f64, f64) {
        (self.served[0], self.served[1])
    }

    /// Checks every invariant the module docs promise; panics with what broke.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let per = self.inv.per_gpu();
        let mut used = vec![0u32; self.inv.free_per_gpu().len()];
        let mut held = [0u64; 4];
        let mut counts = [0u32; STATE_KINDS];
        let mut tenant_warm: HashMap<TenantId, u64> = HashMap::new();
        for (&id, p) in &self.pods {
            for s in &p.placement.0 {
                used[s.gpu as usize] += s.shares;
            }
            let k = StateKind::of(&p.state);
            held[k.category()] += u64::from(p.placement.shares());
            counts[k as usize] += 1;
            match p.state {
                PodState::Warm(w) => {
                    assert!(self.idle.contains(&(w.since, id)), "{id} warm, not indexed");
                    let c = &self.callers[&w.caller];
                    assert_eq!(c.warm.iter().filter(|&&x| x == id).count(), 1);
                    if let Some(e) = w.expires {
                        assert!(self.expiry.contains(&(e, id)));
                    }
                    *tenant_warm.entry(w.tenant).or_default() += u64::from(p.placement.shares());
                    assert_eq!(p.placement.shares(), p.size.0, "warm pod at its size");
                }
                PodState::Standby => assert!(self.standby.contains(&id)),
                PodState::Reserved(j) | PodState::Active(j) => {
                    let job = &self.jobs[&j];
                    assert_eq!(job.running, matches!(p.state, PodState::Active(_)));
                    assert!(job.held.iter().any(|h| h.pod == id));
                    assert_eq!(
                        p.placement.shares(),
                        job.size.0,
                        "{id} holds its job's size"
                    );
                }
                PodState::Starting(Purpose::ForJob(j)) => {
                    assert!(
                        self.jobs[&j].starting.contains(&id),
                        "{id} starting for {j}"
                    );
                }
                _ => {}
            }
        }
        for (gpu, (&free, &u)) in self.inv.free_per_gpu().iter().zip(&used).enumerate() {
            assert_eq!(free + u, per, "GPU {gpu}: books disagree with placements");
        }
        assert_eq!(held, self.held, "held shares");
        assert_eq!(counts, self.counts, "pod counts");
        assert_eq!(
            self.standby.len() as u32,
            counts[StateKind::Standby as usize]
        );
        assert_eq!(self.idle.len() as u32, counts[StateKind::Warm as usize]);
        for (t, s) in &self.tenants {
            assert_eq!(s.warm, tenant_warm.get(t).copied().unwrap_or(0), "{t} warm");
        }
        for &(t, id) in &self.rewarms {
            assert_eq!(
                self.callers.get(&id).and_then(CallerState::rewarm_at),
                Some(t)
            );
        }
        for &(t, id) in &self.handovers_due {
            assert_eq!(
                self.callers
                    .get(&id)
                    .and_then(|c| c.handover_at)
                    .map(|h| h.0),
                Some(t)
            );
        }
        let mut queued = 0;
        for (key, j) in &self.queue {
            let job = &self.jobs[j];
            assert!(job.enqueued && !job.running && job.key == *key);
            queued += job.pods;
        }
        assert_eq!(queued, self.queued_pods);
        for (id, job) in &self.jobs {
            assert_eq!(
                job.enqueued,
                self.queue.contains_key(&job.key),
                "{id} queue"
            );
            if job.enqueued && job.uncovered() > 0 {
                assert!(
                    self.uncovered.contains_key(&job.key),
                    "{id} uncovered, not indexed"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{KeepAliveConfig, RewarmConfig, StandbyConfig};

    fn at(pool: &mut Pool, ms: u64, e: Event) -> Vec<Decision> {
        let mut out = Vec::new();
        pool.handle(Instant::from_millis(ms), e, &mut out).unwrap();
        pool.check_invariants();
        out
    }

    /// Four bursts of one job of `caller`, every `every_ms` from 0, each
    /// ended 200 ms after it came (before any pod was ready): periodic after
    /// the fourth.
    fn four_bursts(pool: &mut Pool, caller: CallerId, every_ms: u64) {
        bursts_at(pool, caller, &[0, every_ms, 2 * every_ms, 3 * every_ms]);
    }

    /// Bursts of one job of `caller` at each of `starts_ms`, each ended
    /// 200 ms after it came.
    fn bursts_at(pool: &mut Pool, caller: CallerId, starts_ms: &[u64]) {
        for (i, &t) in (0u64..).zip(starts_ms) {
            // Wake-ups before the burst that release a standby surplus.
            while let Some(w) = pool.surplus_settles.filter(|&w| w.as_millis() < t) {
                at(pool, w.as_millis(), Event::Tick);
            }
            let req = Request::new(JobId(i), caller, TenantId(0));
            at(pool, t, Event::JobQueued(req));
            at(pool, t + 200, Event::JobFinished { job: JobId(i) });
        }
    }

    /// Standby sized by expected bursts: recent handovers alone are
    /// forgotten within 10 s. A re-warm's notice is a pod start (30 s) and a
    /// tenth, and a lead of 3 s: 36 s.
    fn expected_bursts_alone() -> Config {
        Config {
            standby: StandbyConfig {
                min: 0,
                max: 8,
                horizon: Duration::from_secs(10),
                ..StandbyConfig::default()
            },
            rewarm: RewarmConfig {
                lead: Duration::from_secs(3),
                ..RewarmConfig::default()
            },
            keep_alive: KeepAliveConfig::scripted(),
            ..Config::default()
        }
    }

    /// [`expected_bursts_alone`]'s re-warm notice.
    const NOTICE: u64 = 36_000;

    fn forget_rewarm(pool: &mut Pool, caller: CallerId) {
        if let Some(t) = pool
            .callers
            .get_mut(&caller)
            .and_then(|c| c.rewarm.take().and_then(Rewarm::at))
        {
            pool.rewarms.remove(&(t, caller));
        }
    }

    /// Ticks the pool a second before `ms` and at it: the standby target
    /// is 0, then 1. Past handovers, remembered for a period, are forgotten
    /// first, so the expected burst alone counts. The decisions at `ms`.
    fn standby_for_one_from(pool: &mut Pool, ms: u64) -> Vec<Decision> {
        pool.longest_period_ms = 0;
        at(pool, ms - 1_000, Event::Tick);
        assert_eq!(pool.standby_target(), 0);
        let d = at(pool, ms, Event::Tick);
        assert_eq!(pool.standby_target(), 1);
        d
    }

    #[test]
    fn a_burst_left_to_standby_raises_the_standby_target() {
        let mut pool = Pool::new(Kind::Firepool, expected_bursts_alone()).unwrap();
        let caller = CallerId(1);
        // Bursts of one job every 80 s (cancelled before a pod is ready):
        // periodic after the fourth.
        four_bursts(&mut pool, caller, 80_000);
        // Its next burst (due at 320 s) is not worth a re-warm: it will take
        // a standby pod.
        let b = pool.next_burst(caller).unwrap();
        assert_eq!(b.earliest, Instant::from_millis(320_000));
        forget_rewarm(&mut pool, caller);
        pool.schedule_handover(caller, b);
        pool.check_invariants();
        let d = standby_for_one_from(&mut pool, 320_000 - NOTICE);
        assert!(d.iter().any(|d| matches!(
            d,
            Decision::StartPod {
                purpose: Purpose::Standby,
                reason: Reason::StandbyRefill { target: 1, .. },
                ..
            }
        )));
        // The burst comes: it no longer counts, and the pod it took is not
        // replaced for it.
        let req = Request::new(JobId(9), caller, TenantId(0));
        at(&mut pool, 321_000, Event::JobQueued(req));
        assert!(pool.handovers_due.is_empty());
        // A burst that never comes stops counting once overdue.
        let b = pool.next_burst(caller).unwrap();
        pool.schedule_handover(caller, b);
        let overdue = b.latest + pool.cfg.rewarm.grace + Duration::from_millis(1);
        at(&mut pool, overdue.as_millis(), Event::Tick);
        assert!(pool.handovers_due.is_empty());
    }

    #[test]
    fn handovers_are_remembered_for_the_longest_period() {
        let cfg = Config {
            standby: StandbyConfig {
                min: 0,
                max: 8,
                horizon: Duration::from_secs(10),
                ..StandbyConfig::default()
            },
            ..Config::default()
        };
        let mut pool = Pool::new(Kind::Firepool, cfg).unwrap();
        // Bursts of one job every 200 s, each a handover (no pod is warm):
        // periodic after the fourth.
        four_bursts(&mut pool, CallerId(1), 200_000);
        // Another caller's first job comes with the fourth burst: a
        // handover nothing predicted, where the fourth burst's was expected
        // (guessed from the periods before it).
        let req = Request::new(JobId(10), CallerId(2), TenantId(0));
        at(&mut pool, 600_200, Event::JobQueued(req));
        at(&mut pool, 600_400, Event::JobFinished { job: JobId(10) });
        // Unpredicted handovers are remembered for the period and a pod
        // start (30 s), not the 10 s horizon: the other caller's still
        // sizes standby 150 s on. The expected one does not: its caller's
        // next burst is counted from a pod start before it instead, and
        // standby is not held through the pause for it.
        assert_eq!(pool.standby_horizon(), 230_000);
        at(&mut pool, 750_000, Event::Tick);
        assert_eq!(pool.standby_target(), 1);
        at(&mut pool, 600_200 + 230_001, Event::Tick);
        assert!(pool.rewarms.is_empty() && pool.handovers_due.is_empty());
        assert_eq!(pool.standby_target(), 0);
    }

    #[test]
    fn a_burst_starts_when_the_loop_comes_back_from_a_quiet_gap() {
        let mut pool = Pool::new(Kind::Firepool, Config::default()).unwrap();
        let caller = CallerId(1);
        let busy = |busy| Event::LoopBusy { caller, busy };
        let req = |job| Event::JobQueued(Request::new(JobId(job), caller, TenantId(0)));
        at(&mut pool, 0, req(0));
        at(&mut pool, 1_000, Event::JobFinished { job: JobId(0) });
        // The loop runs (or waits for a pod) in another pool for 30 s: a
        // gap here, but not a quiet one, so the burst goes on.
        at(&mut pool, 1_000, busy(true));
        at(&mut pool, 31_000, busy(false));
        at(&mut pool, 31_500, req(1));
        at(&mut pool, 32_000, Event::JobFinished { job: JobId(1) });
        assert_eq!(pool.callers[&caller].periods.len(), 0);
        // Quiet for a minute, the loop comes back in another pool: its next
        // job here, 5 s later, belongs to the burst that started then.
        at(&mut pool, 92_000, busy(true));
        at(&mut pool, 97_000, req(2));
        let c = &pool.callers[&caller];
        assert_eq!(c.periods.as_slice(), &[92_000]);
        assert_eq!(c.last_burst, Some(Instant::from_millis(92_000)));
        // Its first burst here told no lag: the pool did not know it yet.
        assert_eq!(c.lags.as_slice(), &[5_000]);
    }

    #[test]
    fn a_burst_due_before_its_re_warm_is_expected_as_a_handover_until_then() {
        let mut pool = Pool::new(Kind::Firepool, Config::default()).unwrap();
        let caller = CallerId(1);
        four_bursts(&mut pool, caller, 80_000);
        let b = pool.next_burst(caller).unwrap();
        assert_eq!(b.earliest, Instant::from_millis(320_000));
        // Bound 3 s after the earliest burst, the re-warm leaves a burst
        // before then to a standby pod.
        let bind = Instant::from_millis(323_000);
        pool.schedule_rewarm(caller, b, bind);
        pool.check_invariants();
        assert_eq!(pool.callers[&caller].handover_at, Some((b.earliest, bind)));
        // Bound in time, it expects none.
        pool.schedule_rewarm(caller, b, Instant::from_millis(317_000));
        assert!(pool.callers[&caller].handover_at.is_none());
        pool.schedule_rewarm(caller, b, bind);
        // Its standby pod is up by then (the first up, the others are
        // surplus).
        let starting: Vec<PodId> = pool.standby_starts().collect();
        assert!(!starting.is_empty());
        for pod in starting {
            if pool.standby_starts().any(|p| p == pod) {
                at(&mut pool, 322_000, Event::PodReady { pod });
            }
        }
        let bound = at(&mut pool, 323_000, Event::Tick);
        assert!(bound.iter().any(|d| matches!(d, Decision::Prewarm { .. })));
        assert!(pool.callers[&caller].handover_at.is_none());
        assert!(pool.handovers_due.is_empty());
    }

    #[test]
    fn a_burst_is_prepared_for_as_early_as_its_periods_spread() {
        let mut pool = Pool::new(Kind::Firepool, expected_bursts_alone()).unwrap();
        let caller = CallerId(1);
        // Periods of 80, 88 and 84 s: the next burst is due from 80 s after
        // the last (at 332 s), and is prepared for half their spread sooner.
        bursts_at(&mut pool, caller, &[0, 80_000, 168_000, 252_000]);
        // The wake-up that releases the standby surplus the last burst left.
        at(&mut pool, 253_000, Event::Tick);
        let b = pool.next_burst(caller).unwrap();
        assert_eq!(b.earliest, Instant::from_millis(332_000));
        assert_eq!(b.early, Instant::from_millis(328_000));
        forget_rewarm(&mut pool, caller);
        // Bound in time for the earliest burst, the re-warm still leaves
        // one before its binding to a standby pod.
        let bind = Instant::from_millis(329_000);
        pool.schedule_rewarm(caller, b, bind);
        assert_eq!(pool.callers[&caller].handover_at, Some((b.early, bind)));
        // Its standby pod starts a notice before the early burst, not
        // before the binding.
        let d = standby_for_one_from(&mut pool, 328_000 - NOTICE);
        let pod = *standby_started(&d).first().expect("a standby pod started");
        // Up within a pod start, it is promoted for a burst 6 s before the
        // earliest.
        at(
            &mut pool,
            328_000 - NOTICE + 30_000,
            Event::PodReady { pod },
        );
        let req = Request::new(JobId(9), caller, TenantId(0));
        let d = at(&mut pool, 326_000, Event::JobQueued(req));
        assert!(
            d.iter()
                .any(|d| matches!(d, Decision::Assign { pod: p, .. } if *p == pod)),
            "{d:?}"
        );
    }

    #[test]
    fn a_pool_opens_ready_for_the_burst_it_expects() {
        let cfg = Config {
            standby: StandbyConfig {
                initial: 4,
                ..expected_bursts_alone().standby
            },
            ..Config::default()
        };
        let mut pool = Pool::new(Kind::Firepool, cfg.clone()).unwrap();
        let mut standby = Vec::new();
        for d in at(&mut pool, 0, Event::Tick) {
            if let Decision::StartPod {
                pod,
                purpose: Purpose::Standby,
                ..
            } = d
            {
                standby.push(pod);
                at(&mut pool, 0, Event::PodReady { pod });
            }
        }
        assert_eq!(standby.len(), 4);
        // The four callers it expected each take one. Counted at the
        // start, they are not counted again: the target stays 4, not 8.
        for i in 0..4 {
            let req = Request::new(JobId(i), CallerId(i), TenantId(0));
            let d = at(&mut pool, 1_000 + i, Event::JobQueued(req));
            assert!(
                d.iter()
                    .any(|d| matches!(d, Decision::Assign { pod, .. } if standby.contains(pod))),
                "{d:?}"
            );
        }
        assert_eq!(pool.standby_target(), 4);
        // A fifth is a burst of its own.
        let req = Request::new(JobId(4), CallerId(4), TenantId(0));
        at(&mut pool, 2_000, Event::JobQueued(req));
        assert_eq!(pool.standby_target(), 5);
        // The horizon forgets the opening as it would any burst.
        at(&mut pool, 7_000, Event::Tick);
        assert_eq!(pool.standby_target(), 5);
        let forgotten = 2_001 + pool.standby_horizon();
        at(&mut pool, forgotten, Event::Tick);
        assert_eq!(pool.standby_target(), 0);
        // Policies without standby expect nothing.
        let mut pool = Pool::new(
            Kind::KeepAlive {
                keep_alive: Duration::from_secs(60),
            },
            cfg,
        )
        .unwrap();
        assert!(at(&mut pool, 0, Event::Tick).is_empty());
    }

    /// A pool of [`expected_bursts_alone`] where `caller`'s first job found
    /// no standby and started a pod of its own (ready at 30 s), warm and idle
    /// since its job ended at 31 s.
    fn warm_alone(caller: CallerId) -> (Pool, PodId) {
        let mut pool = Pool::new(Kind::Firepool, expected_bursts_alone()).unwrap();
        let req = Request::new(JobId(0), caller, TenantId(0));
        let pod = at(&mut pool, 0, Event::JobQueued(req))
            .iter()
            .find_map(|d| match d {
                Decision::StartPod { pod, .. } => Some(*pod),
                _ => None,
            })
            .unwrap();
        at(&mut pool, 30_000, Event::PodReady { pod });
        at(&mut pool, 31_000, Event::JobFinished { job: JobId(0) });
        (pool, pod)
    }

    #[test]
    fn a_pod_past_its_keep_alive_is_kept_as_standby_when_standby_is_short() {
        let caller = CallerId(1);
        let (mut pool, pod) = warm_alone(caller);
        // Its keep-alive runs out. Expected back within the horizon, the
        // caller needs a standby pod, and its own pod, up already, is one:
        // wiped, holding a standby share; nothing started, nothing released.
        let expiry = 31_000 + millis(pool.cfg.keep_alive.default);
        let mut d = at(&mut pool, expiry, Event::Tick);
        d.retain(|d| !matches!(d, Decision::Budget { .. }));
        assert!(
            matches!(
                d.as_slice(),
                [Decision::Reset {
                    pod: p,
                    placement,
                    reason: Reason::KeptAsStandby { caller: c, have: 0, target: 1, .. },
                }] if *p == pod && placement.shares() == 1 && *c == caller
            ),
            "{d:?}"
        );
        let held = pool.held();
        assert_eq!((held.warm, held.standby), (0, 1), "{held:?}");
        // It comes back and is handed that pod at its full size.
        let req = Request::new(JobId(1), caller, TenantId(0));
        let d = at(&mut pool, expiry + 2_000, Event::JobQueued(req));
        assert!(
            d.iter().any(|d| matches!(d, Decision::Promote { pod: p, placement, .. } if *p == pod && placement.shares() == 8)),
            "{d:?}"
        );
        assert!(d.iter().any(
            |d| matches!(d, Decision::Assign { pod: p, source: Source::Standby, .. } if *p == pod)
        ));
        // Standby no longer short, a pod past its keep-alive is released.
        at(
            &mut pool,
            expiry + 3_000,
            Event::JobFinished { job: JobId(1) },
        );
        let forgotten = expiry + 3_000 + pool.standby_horizon() + millis(pool.cfg.keep_alive.max);
        let d = at(&mut pool, forgotten, Event::Tick);
        assert!(
            d.iter()
                .any(|d| matches!(d, Decision::Release { pod: p, .. } if *p == pod)),
            "{d:?}"
        );
    }

    /// The standby pods `d` starts.
    fn standby_started(d: &[Decision]) -> Vec<PodId> {
        d.iter()
            .filter_map(|d| match d {
                Decision::StartPod {
                    pod,
                    purpose: Purpose::Standby,
                    ..
                } => Some(*pod),
                _ => None,
            })
            .collect()
    }

    /// Retires warm pod `pod` as its keep-alive runs out now.
    fn retire_now(pool: &mut Pool, pod: PodId) -> Vec<Decision> {
        let PodState::Warm(w) = pool.pods[&pod].state else {
            unreachable!("{pod:?} is not warm")
        };
        let mut out = Vec::new();
        pool.retire(pod, w, pool.now, false, &mut out);
        pool.check_invariants();
        out
    }

    /// Whether `out` keeps `pod` as standby in place of standby start
    /// `start`, the target `target` met with it.
    fn kept_in_place_of(out: &[Decision], pod: PodId, start: PodId, target: u32) -> bool {
        matches!(
            out,
            [
                Decision::Release { pod: cancelled, reason: Reason::StandbySurplus { have, target: t } },
                Decision::Reset { pod: kept, reason: Reason::KeptAsStandby { have: 0, target: t2, .. }, .. },
            ] if *cancelled == start && *kept == pod && *have == target + 1 && *t == target && *t2 == target
        )
    }

    fn released_expired(out: &[Decision], pod: PodId) -> bool {
        matches!(
            out,
            [Decision::Release { pod: p, reason: Reason::KeepAliveExpired { .. } }] if *p == pod
        )
    }

    #[test]
    fn a_pod_past_its_keep_alive_replaces_a_standby_start_that_comes_too_late() {
        // A warm idle pod of caller 1, and two re-warms of other callers due
        // at `due_ms`, for which the pool starts two standby pods at 31 s.
        let setup = |due_ms: u64| {
            let (mut pool, pod) = warm_alone(CallerId(1));
            let due = Instant::from_millis(due_ms);
            for c in [2, 3] {
                let size = pool.cfg.pod_shares;
                Pool::caller(&mut pool.callers, pool.now, CallerId(c), TenantId(0), size).rewarm =
                    Some(Rewarm::At(due));
                pool.rewarms.insert((due, CallerId(c)));
            }
            let starts = standby_started(&at(&mut pool, 31_000, Event::Tick));
            assert_eq!(starts.len(), 2);
            (pool, pod, starts)
        };
        // Due in 5 s, long before the starts are up: the pod, up now, is
        // kept as standby in place of the later start.
        let (mut pool, pod, starts) = setup(36_000);
        let out = retire_now(&mut pool, pod);
        assert!(kept_in_place_of(&out, pod, starts[1], 2), "{out:?}");
        assert_eq!(pool.standby_have(), 2);
        // Due after the starts are up (within the re-warm notice, so they
        // count): the pod is released as before.
        let (mut pool, pod, _) = setup(31_000 + NOTICE - 1_000);
        let out = retire_now(&mut pool, pod);
        assert!(released_expired(&out, pod), "{out:?}");
    }

    #[test]
    fn a_pod_past_its_keep_alive_replaces_a_standby_start_handovers_come_before() {
        // Caller 1's pod is warm; at 40 s three new callers arrive, find no
        // pod, and the pool starts standby pods to refill for the next such
        // burst.
        let setup = || {
            let (mut pool, pod) = warm_alone(CallerId(1));
            let mut starts = Vec::new();
            for c in 2..5 {
                let req = Request::new(JobId(c), CallerId(c), TenantId(0));
                starts.extend(standby_started(&at(
                    &mut pool,
                    40_000,
                    Event::JobQueued(req),
                )));
            }
            assert_eq!(starts.len(), 3, "{starts:?}");
            (pool, pod, starts)
        };
        // Its keep-alive runs out 5 s after the burst: handovers at that
        // rate come long before the refills are up, so the pod, up now,
        // stands by in place of the latest of them.
        let (mut pool, pod, starts) = setup();
        at(&mut pool, 45_000, Event::Tick);
        let out = retire_now(&mut pool, pod);
        assert!(kept_in_place_of(&out, pod, starts[2], 3), "{out:?}");
        assert_eq!(pool.standby_have(), 3);
        // Once the refills are up, the pod is released as before.
        let (mut pool, pod, starts) = setup();
        for &s in &starts {
            at(&mut pool, 70_000, Event::PodReady { pod: s });
        }
        let out = retire_now(&mut pool, pod);
        assert!(released_expired(&out, pod), "{out:?}");
    }

    #[test]
    fn a_caller_holding_its_pod_needs_no_standby_pod_for_its_rewarm_until_the_pod_retires() {
        // Caller 1's pod is warm, and its re-warm is due 10 s after the pod's
        // keep-alive runs out: well within a pod start. (A budget floor keeps
        // the pod through the quiet.)
        let caller = CallerId(1);
        let (mut pool, pod) = warm_alone(caller);
        pool.cfg.budget.pool.floor = Shares(16);
        let expiry = 31_000 + millis(pool.cfg.keep_alive.default);
        let due = Instant::from_millis(expiry + 10_000);
        Pool::caller(&mut pool.callers, pool.now, caller, TenantId(0), Shares(8)).rewarm =
            Some(Rewarm::At(due));
        pool.rewarms.insert((due, caller));
        // While it holds the pod, nothing is started for the re-warm: the
        // pod will stand by for it.
        let d = at(&mut pool, expiry - 1_000, Event::Tick);
        assert_eq!(pool.standby_target(), 0);
        assert!(
            !d.iter().any(|d| matches!(d, Decision::StartPod { .. })),
            "{d:?}"
        );
        // Past its keep-alive, it is the re-warm's standby pod: kept, at a
        // standby share, rather than released while another starts.
        let mut d = at(&mut pool, expiry, Event::Tick);
        d.retain(|d| !matches!(d, Decision::Budget { .. }));
        assert!(
            matches!(
                d.as_slice(),
                [Decision::Reset {
                    pod: p,
                    reason: Reason::KeptAsStandby { have: 0, target: 1, .. },
                    ..
                }] if *p == pod
            ),
            "{d:?}"
        );
        assert_eq!((pool.standby.len(), pool.standby_have()), (1, 1));
        pool.check_invariants();
    }

    /// A runtime's pods starting: each ready `start_ms` after its start (30 s
    /// by default), and gone at once when released.
    struct Runtime {
        start_ms: u64,
        starting: Vec<(u64, PodId)>,
    }

    impl Default for Runtime {
        fn default() -> Runtime {
            Runtime::starting_in(30_000)
        }
    }

    impl Runtime {
        fn starting_in(start_ms: u64) -> Runtime {
            Runtime {
                start_ms,
                starting: Vec::new(),
            }
        }

        /// Readies the pods due by `t`; what the pool decided on each.
        fn ready(&mut self, pool: &mut Pool, t: u64) -> Vec<Decision> {
            let mut d = Vec::new();
            self.starting.retain(|&(ready, pod)| {
                if ready <= t {
                    d.extend(at(pool, t, Event::PodReady { pod }));
                }
                ready > t
            });
            d
        }

        /// Carries out `d` at `t`: a pod start, or a release.
        fn apply(&mut self, pool: &mut Pool, t: u64, d: &Decision) {
            match *d {
                Decision::StartPod { pod, .. } => self.starting.push((t + self.start_ms, pod)),
                Decision::Release { pod, .. } => {
                    self.starting.retain(|&(_, p)| p != pod);
                    at(pool, t, Event::PodGone { pod });
                }
                _ => {}
            }
        }
    }

    /// When steps `gaps` ms apart start, from 0.
    fn starts_of(gaps: impl Iterator<Item = u64>) -> Vec<u64> {
        gaps.scan(0, |at, gap| {
            let s = *at;
            *at += gap;
            Some(s)
        })
        .collect()
    }

    /// Four workers in steps of five 500 ms jobs, `periods` seconds apart,
    /// pods starting in 30 s. From the step `periodic_from` on, no worker's
    /// pod is held through a pause, and every step starts on pods bound
    /// ahead of it.
    fn rewarmed_not_held_through(periods: &[u64], periodic_from: usize) {
        let mut pool = Pool::new(Kind::Firepool, expected_bursts_alone()).unwrap();
        let workers: Vec<CallerId> = (1..=4).map(CallerId).collect();
        let starts = starts_of(periods.iter().map(|p| p * 1_000));
        let mut runtime = Runtime::default();
        let (mut held_through, mut prewarms) = (0, 0);
        let mut sources = Vec::new();
        let from = starts[periodic_from];
        for t in (0..*starts.last().unwrap()).step_by(250) {
            let mut d = runtime.ready(&mut pool, t);
            let n = starts.partition_point(|&s| s <= t) - 1;
            let step = t - starts[n];
            let n = n as u64;
            for (w, &caller) in (0u64..).zip(&workers) {
                let job = |k: u64| JobId(((n * 5 + k) << 8) | w);
                for k in 0..5 {
                    if step == k * 1_000 {
                        let req = Request::new(job(k), caller, TenantId(0));
                        d.extend(at(&mut pool, t, Event::JobQueued(req)));
                    }
                    if step == k * 1_000 + 500 {
                        d.extend(at(&mut pool, t, Event::JobFinished { job: job(k) }));
                    }
                }
                if t >= from && step == 20_000 && !pool.callers[&caller].warm.is_empty() {
                    held_through += 1;
                }
            }
            d.extend(at(&mut pool, t, Event::Tick));
            for d in d {
                runtime.apply(&mut pool, t, &d);
                match d {
                    Decision::Prewarm { .. } => prewarms += 1,
                    Decision::Assign { source, .. } if t >= from => sources.push(source),
                    _ => {}
                }
            }
        }
        assert_eq!(held_through, 0);
        let bound = 4 * (starts.len() - 1 - periodic_from);
        assert!(prewarms >= bound, "{prewarms} < {bound}");
        assert!(
            !sources.is_empty() && sources.iter().all(|&s| s == Source::Warm),
            "{sources:?}"
        );
        pool.check_invariants();
    }

    #[test]
    fn a_loop_whose_pauses_jitter_is_rewarmed_ahead_instead_of_held_through() {
        // Steps 45 to 75 s apart: a 60 s pause jittered by a quarter.
        let periods = [60, 45, 75, 52, 70, 48, 66, 57, 73, 46, 62, 55];
        rewarmed_not_held_through(&periods, 4);
    }

    #[test]
    fn a_loop_alternating_short_and_long_steps_is_rewarmed_for_each_kind() {
        // Steps 40 and 100 s apart by turns (an evaluation every other
        // step): too irregular as one period, regular as two kinds.
        let periods: Vec<u64> = (0..14).map(|i| if i % 2 == 0 { 40 } else { 100 }).collect();
        rewarmed_not_held_through(&periods, 7);
    }

    /// What [`eight_workers`] shows its test.
    enum Seen<'a> {
        /// A job was queued at this time.
        Queued(u64),
        /// A worker is halfway through its pause.
        MidPause(u64, CallerId),
        /// The pool decided this at this time.
        Decided(u64, &'a Decision),
    }

    /// Eight workers in steps of two 1 s jobs, 22 to 28 s apart unevenly
    /// (worker w's jobs w x 250 ms after the step's start), for 600 s on
    /// twelve GPUs, so that every worker can be served at once: on eight,
    /// some jobs would wait for room, and a job that never starts is not a
    /// warm start. Pods start in `start_ms`; the pool is ticked every
    /// `tick_ms`.
    fn eight_workers(start_ms: u64, tick_ms: u64, mut seen: impl FnMut(&Pool, Seen<'_>)) -> Pool {
        let cfg = Config {
            gpus: 12,
            ..expected_bursts_alone()
        };
        let mut pool = Pool::new(Kind::Firepool, cfg).unwrap();
        let workers: Vec<CallerId> = (1..=8).map(CallerId).collect();
        let mut runtime = Runtime::starting_in(start_ms);
        let starts = starts_of((0..40u64).map(|n| 22_000 + (n * 7_919 % 7) * 1_000));
        for t in (0..600_000u64).step_by(tick_ms as usize) {
            let mut d = runtime.ready(&mut pool, t);
            let n = starts.partition_point(|&s| s <= t) - 1;
            let step = t - starts[n];
            let n = n as u64;
            for (w, &caller) in (0u64..).zip(&workers) {
                let job = |k: u64| JobId(((n * 2 + k) << 8) | w);
                let lag = w * 250;
                for k in 0..2 {
                    if step == lag + k * 1_500 {
                        let req = Request::new(job(k), caller, TenantId(0));
                        d.extend(at(&mut pool, t, Event::JobQueued(req)));
                        seen(&pool, Seen::Queued(t));
                    }
                    if step == lag + k * 1_500 + 1_000 {
                        d.extend(at(&mut pool, t, Event::JobFinished { job: job(k) }));
                    }
                }
                if step == 12_500 {
                    seen(&pool, Seen::MidPause(t, caller));
                }
            }
            d.extend(at(&mut pool, t, Event::Tick));
            for d in d {
                runtime.apply(&mut pool, t, &d);
                seen(&pool, Seen::Decided(t, &d));
            }
        }
        pool
    }

    #[test]
    fn a_loop_whose_pauses_are_shorter_than_a_pod_start_waits_out_each_on_a_standby_share() {
        // Eight workers, pods starting in 30 s: no standby pod started after
        // a step is up before the next, and the ready ones are claimed by
        // the re-warms due first. A worker's pod, past its keep-alive,
        // stands by for its own re-warm (kept as standby, a standby share)
        // instead of being held whole through the pause, and every step
        // still starts warm.
        let (mut queued, mut held_through) = (0, 0);
        let mut sources = Vec::new();
        // Once the loop is known to be periodic.
        let from = 200_000;
        eight_workers(30_000, 250, |pool, seen| match seen {
            Seen::Queued(t) => queued += usize::from(t >= from),
            Seen::MidPause(t, caller) => {
                held_through += usize::from(t >= from && !pool.callers[&caller].warm.is_empty());
            }
            Seen::Decided(t, &Decision::Assign { source, .. }) if t >= from => {
                sources.push(source);
            }
            Seen::Decided(..) => {}
        });
        assert_eq!(held_through, 0);
        assert_eq!(sources.len(), queued, "every job started");
        assert!(
            !sources.is_empty() && sources.iter().all(|&s| s == Source::Warm),
            "{sources:?}"
        );
    }

    #[test]
    fn a_standby_surplus_lasts_a_second_before_it_is_released() {
        // The eight workers on pods that start at once (a local runtime's):
        // re-warms take standby pods and expected bursts come in, so the
        // standby target moves at every wake-up of a step. A pod started
        // for it is not released as surplus within the minimum keep-alive
        // of its start (before, 6 were, each as soon as it was up, 50 ms
        // after its start).
        let mut started = HashMap::new();
        let (mut early, mut queued, mut assigned) = (Vec::new(), 0, 0);
        // expected_bursts_alone's minimum keep-alive.
        let settle = millis(Config::default().keep_alive.min);
        let pool = eight_workers(50, 50, |_, seen| match seen {
            Seen::Queued(_) => queued += 1,
            Seen::Decided(
                t,
                &Decision::StartPod {
                    pod,
                    reason: Reason::StandbyRefill { .. },
                    ..
                },
            ) => {
                started.insert(pod, t);
            }
            Seen::Decided(
                t,
                &Decision::Release {
                    pod,
                    reason: Reason::StandbySurplus { .. },
                },
            ) => {
                if let Some(&s) = started.get(&pod)
                    && t < s + settle
                {
                    early.push((pod, s, t));
                }
            }
            Seen::Decided(_, Decision::Assign { .. }) => assigned += 1,
            _ => {}
        });
        assert!(
            early.is_empty(),
            "released within {settle} ms of the start: {early:?}"
        );
        assert_eq!(assigned, queued, "every job started");
        pool.check_invariants();
    }

    #[test]
    fn a_caller_quiet_after_its_first_burst_is_expected_back_within_the_horizon() {
        let mut pool = Pool::new(Kind::Firepool, Config::default()).unwrap();
        let caller = CallerId(1);
        // Standby pods provisioned and ready; the first job takes one.
        for d in at(&mut pool, 0, Event::Tick) {
            if let Decision::StartPod { pod, .. } = d {
                at(&mut pool, 0, Event::PodReady { pod });
            }
        }
        let req = Request::new(JobId(0), caller, TenantId(0));
        let pod = at(&mut pool, 0, Event::JobQueued(req))
            .iter()
            .find_map(|d| match d {
                Decision::Assign { pod, .. } => Some(*pod),
                _ => None,
            })
            .unwrap();
        at(&mut pool, 1_000, Event::JobFinished { job: JobId(0) });
        // Its warm pod expires on the pool's default keep-alive; no period
        // says when it comes back, so a standby pod waits for it for the
        // horizon instead.
        let expiry = 1_000 + millis(pool.cfg.keep_alive.default);
        let out = at(&mut pool, expiry, Event::Tick);
        assert!(
            out.iter()
                .any(|d| matches!(d, Decision::Release { pod: p, .. } if *p == pod))
        );
        let horizon = pool.standby_horizon();
        assert_eq!(
            pool.callers[&caller].handover_at,
            Some((
                Instant::from_millis(expiry),
                Instant::from_millis(expiry + horizon)
            ))
        );
        assert_eq!(pool.handovers_due.len(), 1);
    }

    /// Steps every 100 s of a loop that runs `sizes[step]` jobs here
    /// between jobs in another pool, then pauses. Its warm pod's expiry and
    /// basis once the step's jobs here are done and the loop runs on
    /// elsewhere, step by step.
    /// `None` for a step whose pod went at once.
    fn steps_here(sizes: &[u64]) -> Vec<Option<(Option<Instant>, Basis)>> {
        let mut pool = Pool::new(Kind::Firepool, Config::default()).unwrap();
        let caller = CallerId(1);
        // Every pod starts at once.
        let drive = |pool: &mut Pool, ms: u64, e: Event| {
            for d in at(pool, ms, e) {
                if let Decision::StartPod { pod, .. } = d {
                    at(pool, ms, Event::PodReady { pod });
                }
            }
        };
        let busy = |busy| Event::LoopBusy { caller, busy };
        let mut job = 0;
        let mut seen = Vec::new();
        for (step, &n) in (0u64..).zip(sizes) {
            let t = step * 100_000;
            drive(&mut pool, t, busy(true));
            for k in 0..n {
                let t = t + 1_000 + k * 4_000;
                drive(&mut pool, t, busy(false));
                let req = Request::new(JobId(job), caller, TenantId(0));
                drive(&mut pool, t, Event::JobQueued(req));
                drive(&mut pool, t + 1_000, Event::JobFinished { job: JobId(job) });
                drive(&mut pool, t + 1_000, busy(true));
                job += 1;
            }
            seen.push(
                pool.callers[&caller]
                    .warm
                    .first()
                    .map(|pod| match pool.pods[pod].state {
                        PodState::Warm(w) => (w.expires, w.basis),
                        _ => unreachable!(),
                    }),
            );
            drive(&mut pool, t + 10_000, busy(false));
        }
        seen
    }

    #[test]
    fn a_pod_whose_periodic_burst_is_done_is_not_held_while_the_loop_runs_on() {
        // Two jobs here a step: until its steps are periodic the pod waits
        // for the loop; then it goes as the step's last job here ends, as
        // the step here is done.
        for (step, seen) in steps_here(&[2; 5]).into_iter().enumerate() {
            if step < 3 {
                assert!(matches!(seen, Some((None, _))), "step {step}: {seen:?}");
            } else {
                assert_eq!(seen, None, "step {step}");
            }
        }
    }

    #[test]
    fn a_loop_pausing_before_a_job_elsewhere_pauses_for_its_pod_here_too() {
        let mut pool = Pool::new(Kind::Firepool, Config::default()).unwrap();
        let caller = CallerId(1);
        let busy = |busy| Event::LoopBusy { caller, busy };
        for d in at(&mut pool, 0, Event::Tick) {
            if let Decision::StartPod { pod, .. } = d {
                at(&mut pool, 0, Event::PodReady { pod });
            }
        }
        // A job here, then one elsewhere 50 ms after it; the loop pauses
        // 45 s, runs another job elsewhere, and 50 ms after it comes here.
        let job = |id| Event::JobQueued(Request::new(JobId(id), caller, TenantId(0)));
        at(&mut pool, 0, job(0));
        at(&mut pool, 1_000, Event::JobFinished { job: JobId(0) });
        at(&mut pool, 1_050, busy(true));
        at(&mut pool, 2_000, busy(false));
        at(&mut pool, 47_000, busy(true));
        at(&mut pool, 48_000, busy(false));
        at(&mut pool, 48_050, job(1));
        // Its pod here waited through the 45 s pause, not 50 ms.
        assert_eq!(pool.callers[&caller].pauses.as_slice(), [45_000]);
        // A pause before a job here counts as it is.
        at(&mut pool, 49_000, Event::JobFinished { job: JobId(1) });
        at(&mut pool, 49_500, job(2));
        assert_eq!(pool.callers[&caller].pauses.as_slice(), [45_000, 500]);
    }

    #[test]
    fn a_pod_is_held_while_the_loop_runs_on_when_its_bursts_vary_in_size() {
        // Two or three jobs here a step: no count says the step here is
        // over (the next may be larger than any so far), so the pod waits
        // for the loop every time.
        for (step, seen) in steps_here(&[2, 3, 2, 3, 2, 3]).into_iter().enumerate() {
            assert!(matches!(seen, Some((None, _))), "step {step}: {seen:?}");
        }
    }
}
