//! Prometheus metrics, written by hand in the text exposition format
//! (version 0.0.4) at `GET /metrics`.
//!
//! Counters and histograms of jobs live here; gauges of the pools (pods,
//! budget, queue) and the integrated GPU-seconds are read from the scheduler
//! when the metrics are scraped. Only the leading replica has pools: the
//! others report `hearth_leader 0` and no pool series. This module does no I/O.
//!
//! Catalogue:
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `hearth_jobs_started_total` | counter | `profile`, `source` | jobs whose pods were all bound, by where their pods came from (`warm`, `standby`, `cold`) |
//! | `hearth_job_start_seconds` | histogram | `profile`, `source` | start latency: queued + acquire + bind, as the job records them |
//! | `hearth_jobs_finished_total` | counter | `profile`, `state` | jobs that reached a final state (`succeeded`, `failed`, `timed_out`, `cancelled`) |
//! | `hearth_pods` | gauge | `profile`, `state` | pods by state (`starting`, `standby`, `warm`, `reserved`, `active`, `draining`) |
//! | `hearth_gpu_seconds_held_total` | counter | `profile`, `state` | GPU-seconds held by pods, by what held them (`active`, `warm`, `standby`, `draining`); warm plus standby is GPU time held idle |
//! | `hearth_pool_budget_gpus` | gauge | `profile` | the pool's budget on GPUs held by warm plus standby pods (absent for policies without a budget) |
//! | `hearth_queue_depth` | gauge | `profile` | jobs accepted and waiting for pods |
//! | `hearth_leader` | gauge | | 1 on the replica that schedules (holds the lease), else 0; the pool series come from it alone |

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use hearth_core::Source;

/// Upper bounds of the start-latency buckets, in seconds.
const BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

#[derive(Debug, Clone, Default)]
struct Histogram {
    /// Per bucket (not cumulative); the last entry is `+Inf`.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        let i = BUCKETS
            .iter()
            .position(|&b| v <= b)
            .unwrap_or(BUCKETS.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }
}

#[derive(Debug, Default)]
struct Counters {
    started: BTreeMap<(String, &'static str), u64>,
    start_seconds: BTreeMap<(String, &'static str), Histogram>,
    finished: BTreeMap<(String, String), u64>,
}

/// The job counters; cheap to update (one short lock).
#[derive(Debug, Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
    leader: AtomicBool,
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
    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A job's pods are all bound; `start_s` is queued + acquire + bind.
    pub fn job_started(&self, profile: &str, source: Source, start_s: f64) {
        let mut c = self.counters();
        let key = (profile.to_owned(), source.as_str());
        *c.started.entry(key.clone()).or_default() += 1;
        c.start_seconds.entry(key).or_default().observe(start_s);
    }

    /// This replica took the lease (`true`) or let it go.
    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
    }

    /// A job reached its final `state`.
    pub fn job_finished(&self, profile: &str, state: &str) {
        *self
            .counters()
            .finished
            .entry((profile.to_owned(), state.to_owned()))
            .or_default() += 1;
    }

    /// The exposition text, with the pools' gauges.
    pub fn render(&self, pools: &[PoolGauges]) -> String {
        let c = self.counters();
        let mut out = String::new();
        let w = &mut out;
        header(
            w,
            "hearth_jobs_started_total",
            "counter",
            "Jobs whose pods were all bound, by where the pods came from.",
        );
        for ((profile, source), n) in &c.started {
            let _ = writeln!(
                w,
                "hearth_jobs_started_total{{profile=\"{}\",source=\"{source}\"}} {n}",
                esc(profile)
            );
        }
        header(
            w,
            "hearth_job_start_seconds",
            "histogram",
            "Start latency (queued + acquire + bind) by source.",
        );
        for ((profile, source), h) in &c.start_seconds {
            let labels = format!("profile=\"{}\",source=\"{source}\"", esc(profile));
            let mut cumulative = 0;
            for (i, n) in h.counts.iter().enumerate() {
                cumulative += n;
                let le = BUCKETS
                    .get(i)
                    .map_or_else(|| "+Inf".to_owned(), |b| b.to_string());
                let _ = writeln!(
                    w,
                    "hearth_job_start_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
                );
            }
            let _ = writeln!(w, "hearth_job_start_seconds_sum{{{labels}}} {}", num(h.sum));
            let _ = writeln!(w, "hearth_job_start_seconds_count{{{labels}}} {}", h.count);
        }
        header(
            w,
            "hearth_jobs_finished_total",
            "counter",
            "Jobs that reached a final state.",
        );
        for ((profile, state), n) in &c.finished {
            let _ = writeln!(
                w,
                "hearth_jobs_finished_total{{profile=\"{}\",state=\"{}\"}} {n}",
                esc(profile),
                esc(state)
            );
        }
        header(w, "hearth_pods", "gauge", "Pods by state.");
        for p in pools {
            for (state, n) in &p.pods {
                let _ = writeln!(
                    w,
                    "hearth_pods{{profile=\"{}\",state=\"{state}\"}} {n}",
                    esc(&p.profile)
                );
            }
        }
        header(
            w,
            "hearth_gpu_seconds_held_total",
            "counter",
            "GPU-seconds held by pods, by pod state.",
        );
        for p in pools {
            for (state, s) in &p.gpu_seconds {
                let _ = writeln!(
                    w,
                    "hearth_gpu_seconds_held_total{{profile=\"{}\",state=\"{state}\"}} {}",
                    esc(&p.profile),
                    num(*s)
                );
            }
        }
        header(
            w,
            "hearth_pool_budget_gpus",
            "gauge",
            "Budget on GPUs held by warm plus standby pods.",
        );
        for p in pools {
            if let Some(b) = p.budget_gpus {
                let _ = writeln!(
                    w,
                    "hearth_pool_budget_gpus{{profile=\"{}\"}} {}",
                    esc(&p.profile),
                    num(b)
                );
            }
        }
        header(w, "hearth_queue_depth", "gauge", "Jobs waiting for pods.");
        for p in pools {
            let _ = writeln!(
                w,
                "hearth_queue_depth{{profile=\"{}\"}} {}",
                esc(&p.profile),
                p.queue_depth
            );
        }
        header(
            w,
            "hearth_leader",
            "gauge",
            "1 on the replica that schedules jobs and holds the pools, else 0.",
        );
        let _ = writeln!(
            w,
            "hearth_leader {}",
            u8::from(self.leader.load(Ordering::Relaxed))
        );
        out
    }
}

fn header(w: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(w, "# HELP {name} {help}");
    let _ = writeln!(w, "# TYPE {name} {kind}");
}

/// A label value, escaped as the exposition format asks.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn num(v: f64) -> String {
    if v.is_finite() {
        v.to_string()
    } else {
        "0".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let m = Metrics::default();
        m.job_started("cpu-small", Source::Warm, 0.0007);
        m.job_started("cpu-small", Source::Warm, 0.3);
        m.job_started("cpu-small", Source::Cold, 400.0);
        m.job_finished("cpu-small", "succeeded");
        let text = m.render(&[PoolGauges {
            profile: "a\"b".to_owned(),
            pods: vec![("warm", 2)],
            gpu_seconds: vec![("standby", 1.5)],
            budget_gpus: Some(2.0),
            queue_depth: 3,
        }]);
        assert!(
            text.contains("hearth_jobs_started_total{profile=\"cpu-small\",source=\"warm\"} 2")
        );
        assert!(text.contains(
            "hearth_job_start_seconds_bucket{profile=\"cpu-small\",source=\"warm\",le=\"0.001\"} 1"
        ));
        assert!(text.contains(
            "hearth_job_start_seconds_bucket{profile=\"cpu-small\",source=\"warm\",le=\"0.5\"} 2"
        ));
        assert!(text.contains(
            "hearth_job_start_seconds_bucket{profile=\"cpu-small\",source=\"cold\",le=\"120\"} 0"
        ));
        assert!(text.contains(
            "hearth_job_start_seconds_bucket{profile=\"cpu-small\",source=\"cold\",le=\"+Inf\"} 1"
        ));
        assert!(
            text.contains(
                "hearth_job_start_seconds_count{profile=\"cpu-small\",source=\"cold\"} 1"
            )
        );
        assert!(
            text.contains(
                "hearth_jobs_finished_total{profile=\"cpu-small\",state=\"succeeded\"} 1"
            )
        );
        assert!(text.contains("hearth_pods{profile=\"a\\\"b\",state=\"warm\"} 2"));
        assert!(
            text.contains(
                "hearth_gpu_seconds_held_total{profile=\"a\\\"b\",state=\"standby\"} 1.5"
            )
        );
        assert!(text.contains("hearth_pool_budget_gpus{profile=\"a\\\"b\"} 2"));
        assert!(text.contains("hearth_queue_depth{profile=\"a\\\"b\"} 3"));
        assert!(text.contains("\nhearth_leader 0\n"));
        m.set_leader(true);
        assert!(m.render(&[]).contains("\nhearth_leader 1\n"));
        // Every sample line is `name{labels} value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            value.parse::<f64>().unwrap();
        }
    }
}
