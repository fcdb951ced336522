//! Prometheus metrics at `GET /metrics`, kept and encoded by the Prometheus
//! project's Rust client (`prometheus-client`).
//!
//! Counters and histograms of jobs live here; gauges of the pools (pods,
//! budget, queue) and the integrated GPU-seconds are read from the scheduler
//! when the metrics are scraped. Only the leading replica has pools: the
//! others report `hearth_leader 0` and no pool series. This module does no I/O.
//!
//! Two encodings ([`Format`]): OpenMetrics 1.0 text when the scraper's
//! `Accept` asks for it (Prometheus does, so that it can take exemplars),
//! else the classic Prometheus text format 0.0.4. Both come from the client
//! library's own encoders; the classic one has no exemplars.
//!
//! Catalogue:
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `hearth_jobs_started_total` | counter | `profile`, `source` | jobs whose pods were all bound, by where their pods came from (`warm`, `standby`, `cold`) |
//! | `hearth_job_start_seconds` | histogram | `profile`, `source` | start latency: queued + acquire + bind, as the job records them; each bucket's exemplar carries the `trace_id` of the latest job in it that was submitted in a sampled trace |
//! | `hearth_jobs_finished_total` | counter | `profile`, `state` | jobs that reached a final state (`succeeded`, `failed`, `timed_out`, `cancelled`) |
//! | `hearth_pods` | gauge | `profile`, `state` | pods by state (`starting`, `standby`, `warm`, `reserved`, `active`, `draining`) |
//! | `hearth_gpu_seconds_held_total` | counter | `profile`, `state` | GPU-seconds held by pods, by what held them (`active`, `warm`, `standby`, `draining`); warm plus standby is GPU time held idle |
//! | `hearth_pool_budget_gpus` | gauge | `profile` | the pool's budget on GPUs held by warm plus standby pods (absent for policies without a budget) |
//! | `hearth_queue_depth` | gauge | `profile` | jobs accepted and waiting for pods |
//! | `hearth_pods_lost_total` | counter | `profile`, `reason` | pods that went away without the scheduler asking, by the runtime's reason (`deleted`, `evicted`, `oom_killed`, `node_lost`, `failed`, `exited` for a local agent) |
//! | `hearth_leader` | gauge | | 1 on the replica that schedules (holds the lease), else 0; the pool series come from it alone |
//! | `hearth_job_writes_total` | counter | `write`, `how` | jobs' acceptances, assignments, starts and ends (`write`: `accept`, `assignment`, `start`, `end`) written through the group commit, `alone` or `shared` with others |
//! | `hearth_shared_writes_total` | counter | `write` | shared writes (one statement and commit each); `hearth_job_writes_total{how="shared"}` over this is the jobs' writes each one carried |

use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use hearth_core::Source;
use opentelemetry::trace::TraceId;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

/// Upper bounds of the start-latency buckets, in seconds.
const BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BySource {
    profile: String,
    source: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByState {
    profile: String,
    state: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByProfile {
    profile: String,
}

/// An exemplar's labels: the trace a latency came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Trace {
    trace_id: String,
}

type StartHistogram = HistogramWithExemplars<Trace>;

/// How `/metrics` is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text, with exemplars.
    OpenMetrics,
    /// The Prometheus text format 0.0.4 (no exemplars).
    Prometheus,
}

impl Format {
    /// OpenMetrics when an `Accept` header lists it, else the classic text.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let wants_openmetrics = accept.is_some_and(|a| {
            a.split(',').any(|part| {
                let mut params = part.split(';').map(str::trim);
                let media = params.next().unwrap_or_default();
                let refused = params.any(|p| {
                    p.strip_prefix("q=")
                        .and_then(|q| q.parse::<f64>().ok())
                        .is_some_and(|q| q <= 0.0)
                });
                media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
            })
        });
        if wants_openmetrics {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        }
    }
}

/// The job metrics; cheap to update (atomics, and a short lock the first
/// time a label set is seen).
#[derive(Debug)]
pub struct Metrics {
    started: Family<BySource, Counter>,
    start_seconds: Family<BySource, StartHistogram, fn() -> StartHistogram>,
    finished: Family<ByState, Counter>,
    lost: Family<ByReason, Counter>,
    leader: Gauge,
    job_writes: Family<ByWrite, Counter>,
    shared_writes: Family<OfWrite, Counter>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OfWrite {
    write: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByWrite {
    write: &'static str,
    /// `alone` or `shared`.
    how: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByReason {
    profile: String,
    reason: String,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            started: Family::default(),
            start_seconds: Family::new_with_constructor(|| {
                HistogramWithExemplars::new(BUCKETS.into_iter())
            }),
            finished: Family::default(),
            lost: Family::default(),
            leader: Gauge::default(),
            job_writes: Family::default(),
            shared_writes: Family::default(),
        }
    }
}

/// Gauges of one pool at scrape time.
#[derive(Debug, Clone, Default)]
pub struct PoolGauges {
    pub profile: String,
    /// `(state, pods)`.
    pub pods: Vec<(&'static str, u32)>,
    /// `(state, GPU-seconds)` held since the scheduler started.
    pub gpu_seconds: Vec<(&'static str, f64)>,
    pub budget_gpus: Option<f64>,
    pub queue_depth: u32,
}

impl Metrics {
    /// A job's pods are all bound; `start_s` is queued + acquire + bind;
    /// `trace` the trace the job was submitted in, if it was sampled (the
    /// exemplar of the latency's bucket).
    pub fn job_started(&self, profile: &str, source: Source, start_s: f64, trace: Option<TraceId>) {
        let labels = BySource {
            profile: profile.to_owned(),
            source: source.as_str(),
        };
        self.started.get_or_create(&labels).inc();
        let exemplar = trace.map(|t| Trace {
            trace_id: format!("{t:032x}"),
        });
        let at = exemplar.as_ref().map(|_| SystemTime::now());
        self.start_seconds
            .get_or_create(&labels)
            .observe(start_s, exemplar, at);
    }

    /// This replica took the lease (`true`) or let it go.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// A job reached its final `state`.
    pub fn job_finished(&self, profile: &str, state: hearth_core::State) {
        self.finished
            .get_or_create(&ByState {
                profile: profile.to_owned(),
                state: state.as_str().to_owned(),
            })
            .inc();
    }

    /// A pod of `profile` went away on its own. `reason` is the runtime's
    /// text; its code (before any `:`) labels the series, so the label set
    /// stays small.
    pub fn pod_lost(&self, profile: &str, reason: &str) {
        let code = reason.split(':').next().unwrap_or_default().trim();
        let code = if !code.is_empty()
            && code.len() <= 32
            && code.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        {
            code
        } else {
            "other"
        };
        self.lost
            .get_or_create(&ByReason {
                profile: profile.to_owned(),
                reason: code.to_owned(),
            })
            .inc();
    }

    /// The group commit of `write` wrote `jobs` jobs' writes: one on its own,
    /// or several in one shared statement.
    pub fn jobs_written(&self, write: &'static str, jobs: usize) {
        let how = if jobs == 1 { "alone" } else { "shared" };
        self.job_writes
            .get_or_create(&ByWrite { write, how })
            .inc_by(jobs as u64);
        if jobs > 1 {
            self.shared_writes.get_or_create(&OfWrite { write }).inc();
        }
    }

    /// Jobs' writes of `write` written `how` (`alone`, `shared`) so far.
    #[cfg(test)]
    pub fn jobs_written_so_far(&self, write: &'static str, how: &'static str) -> u64 {
        self.job_writes.get_or_create(&ByWrite { write, how }).get()
    }

    /// The exposition in `format`, with the pools' gauges.
    pub fn render(&self, pools: &[PoolGauges], format: Format) -> String {
        let registry = self.registry(pools);
        let mut out = String::new();
        let written = match format {
            Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &registry),
            Format::Prometheus => {
                prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
            }
        };
        // Writing to a String cannot fail.
        debug_assert!(written.is_ok());
        out
    }

    /// Every series, the pools' as they stand now. Help texts get a final
    /// period from the encoder.
    fn registry(&self, pools: &[PoolGauges]) -> Registry {
        let mut r = Registry::default();
        r.register(
            "hearth_jobs_started",
            "Jobs whose pods were all bound, by where the pods came from",
            self.started.clone(),
        );
        r.register_with_unit(
            "hearth_job_start",
            "Start latency (queued + acquire + bind) by source",
            Unit::Seconds,
            self.start_seconds.clone(),
        );
        r.register(
            "hearth_jobs_finished",
            "Jobs that reached a final state",
            self.finished.clone(),
        );
        r.register(
            "hearth_pods_lost",
            "Pods that went away without the scheduler asking, by reason",
            self.lost.clone(),
        );
        r.register(
            "hearth_job_writes",
            "Jobs' assignments and ends written through the group commit, alone or shared",
            self.job_writes.clone(),
        );
        r.register(
            "hearth_shared_writes",
            "Shared writes of the group commit, one statement and commit each",
            self.shared_writes.clone(),
        );
        let pods = Family::<ByState, Gauge>::default();
        let held = Family::<ByState, Counter<f64, AtomicU64>>::default();
        let budget = Family::<ByProfile, Gauge<f64, AtomicU64>>::default();
        let queue = Family::<ByProfile, Gauge>::default();
        for p in pools {
            let by_state = |state: &str| ByState {
                profile: p.profile.clone(),
                state: state.to_owned(),
            };
            for (state, n) in &p.pods {
                pods.get_or_create(&by_state(state)).set(i64::from(*n));
            }
            for (state, s) in &p.gpu_seconds {
                held.get_or_create(&by_state(state))
                    .inc_by(if s.is_finite() { *s } else { 0.0 });
            }
            let profile = ByProfile {
                profile: p.profile.clone(),
            };
            if let Some(b) = p.budget_gpus.filter(|b| b.is_finite()) {
                budget.get_or_create(&profile).set(b);
            }
            queue.get_or_create(&profile).set(i64::from(p.queue_depth));
        }
        r.register("hearth_pods", "Pods by state", pods);
        r.register(
            "hearth_gpu_seconds_held",
            "GPU-seconds held by pods, by pod state",
            held,
        );
        r.register(
            "hearth_pool_budget_gpus",
            "Budget on GPUs held by warm plus standby pods",
            budget,
        );
        r.register("hearth_queue_depth", "Jobs waiting for pods", queue);
        r.register(
            "hearth_leader",
            "1 on the replica that schedules jobs and holds the pools, else 0",
            self.leader.clone(),
        );
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pools() -> Vec<PoolGauges> {
        vec![PoolGauges {
            profile: "a\"b".to_owned(),
            pods: vec![("warm", 2)],
            gpu_seconds: vec![("standby", 1.5)],
            budget_gpus: Some(2.0),
            queue_depth: 3,
        }]
    }

    #[test]
    fn the_classic_text_keeps_the_catalogue() {
        let m = Metrics::default();
        m.job_started("cpu-small", Source::Warm, 0.0007, None);
        m.job_started("cpu-small", Source::Warm, 0.3, Some(TraceId::from(7)));
        m.job_started("cpu-small", Source::Cold, 400.0, None);
        m.job_finished("cpu-small", hearth_core::State::Succeeded);
        m.pod_lost(
            "cpu-small",
            "oom_killed: the agent's container ran out of memory",
        );
        m.pod_lost("cpu-small", "Some Free Text");
        m.jobs_written("end", 1);
        m.jobs_written("end", 5);
        m.jobs_written("end", 3);
        let text = m.render(&pools(), Format::Prometheus);
        for expected in [
            "# HELP hearth_jobs_started_total Jobs whose pods were all bound, by where the pods came from.\n",
            "# TYPE hearth_jobs_started_total counter\n",
            "hearth_jobs_started_total{profile=\"cpu-small\",source=\"warm\"} 2\n",
            "# HELP hearth_job_start_seconds Start latency (queued + acquire + bind) by source.\n",
            "# TYPE hearth_job_start_seconds histogram\n",
            "hearth_job_start_seconds_bucket{profile=\"cpu-small\",source=\"warm\",le=\"0.001\"} 1\n",
            "hearth_job_start_seconds_bucket{profile=\"cpu-small\",source=\"warm\",le=\"0.5\"} 2\n",
            "hearth_job_start_seconds_bucket{profile=\"cpu-small\",source=\"cold\",le=\"120\"} 0\n",
            "hearth_job_start_seconds_bucket{profile=\"cpu-small\",source=\"cold\",le=\"+Inf\"} 1\n",
            "hearth_job_start_seconds_count{profile=\"cpu-small\",source=\"cold\"} 1\n",
            "# TYPE hearth_jobs_finished_total counter\n",
            "hearth_jobs_finished_total{profile=\"cpu-small\",state=\"succeeded\"} 1\n",
            "hearth_pods_lost_total{profile=\"cpu-small\",reason=\"oom_killed\"} 1\n",
            "hearth_pods_lost_total{profile=\"cpu-small\",reason=\"other\"} 1\n",
            "# TYPE hearth_pods gauge\n",
            "hearth_pods{profile=\"a\\\"b\",state=\"warm\"} 2\n",
            "# TYPE hearth_gpu_seconds_held_total counter\n",
            "hearth_gpu_seconds_held_total{profile=\"a\\\"b\",state=\"standby\"} 1.5\n",
            "# HELP hearth_pool_budget_gpus Budget on GPUs held by warm plus standby pods.\n",
            "hearth_pool_budget_gpus{profile=\"a\\\"b\"} 2",
            "hearth_queue_depth{profile=\"a\\\"b\"} 3\n",
            "# TYPE hearth_leader gauge\n",
            "\nhearth_leader 0\n",
            "hearth_job_writes_total{write=\"end\",how=\"alone\"} 1\n",
            "hearth_job_writes_total{write=\"end\",how=\"shared\"} 8\n",
            "hearth_shared_writes_total{write=\"end\"} 2\n",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(!text.contains("# EOF"), "not OpenMetrics");
        assert!(
            !text.contains("trace_id"),
            "no exemplars in the classic text"
        );
        m.set_leader(true);
        assert!(
            m.render(&[], Format::Prometheus)
                .contains("\nhearth_leader 1\n")
        );
        // Every sample line is `name{labels} value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            value.parse::<f64>().unwrap();
        }
    }

    #[test]
    fn openmetrics_carries_the_trace_as_an_exemplar() {
        let m = Metrics::default();
        let trace = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
        m.job_started("cpu-small", Source::Standby, 0.3, Some(trace));
        m.job_started("cpu-small", Source::Standby, 0.0001, None);
        let text = m.render(&pools(), Format::OpenMetrics);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains("# UNIT hearth_job_start_seconds seconds\n"));
        assert!(text.contains("# TYPE hearth_jobs_started counter\n"));
        let bucket = text
            .lines()
            .find(|l| {
                l.starts_with(
                    "hearth_job_start_seconds_bucket{le=\"0.5\",profile=\"cpu-small\",source=\"standby\"}",
                )
            })
            .unwrap();
        assert!(
            bucket.contains(" # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"} 0.3"),
            "{bucket}"
        );
        // A bucket whose latest job had no sampled trace has no exemplar.
        let fast = text
            .lines()
            .find(|l| l.contains("{le=\"0.001\",profile=\"cpu-small\",source=\"standby\"}"))
            .unwrap();
        assert!(!fast.contains('#'), "{fast}");
    }

    #[test]
    fn openmetrics_only_when_asked_for() {
        assert_eq!(Format::negotiate(None), Format::Prometheus);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Prometheus);
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4;q=0.3,*/*;q=0.2")),
            Format::Prometheus
        );
        // What Prometheus sends.
        assert_eq!(
            Format::negotiate(Some(
                "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
            )),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0")),
            Format::Prometheus
        );
    }
}
