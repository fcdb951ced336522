//! Small bounded statistics the policy keeps: recent pauses per caller, an
//! exponentially weighted arrival rate, the peak burst of handovers, and an
//! estimate of pod start time. All take time as an argument.

use std::collections::VecDeque;

use crate::Instant;

/// The most recent pauses of a caller (ms), in a ring.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pauses {
    ring: Vec<u32>,
    next: usize,
}

impl Pauses {
    pub(crate) fn push(&mut self, ms: u64, cap: usize) {
        let ms = u32::try_from(ms).unwrap_or(u32::MAX);
        if self.ring.len() < cap {
            self.ring.push(ms);
        } else {
            self.ring[self.next] = ms;
            self.next = (self.next + 1) % cap;
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ring.len()
    }

    /// The pauses, the one pushed last first.
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = u32> + '_ {
        let (older, newer) = self.ring.split_at(self.next.min(self.ring.len()));
        older.iter().rev().chain(newer.iter().rev()).copied()
    }

    /// The pause pushed last.
    pub(crate) fn last(&self) -> Option<u64> {
        let n = self.ring.len();
        let i = if self.next == 0 {
            n.checked_sub(1)?
        } else {
            self.next - 1
        };
        self.ring.get(i).map(|&ms| u64::from(ms))
    }

    /// The remembered pauses, in no particular order.
    pub(crate) fn as_slice(&self) -> &[u32] {
        &self.ring
    }

    /// Nearest-rank percentile `p` in (0, 1]: the smallest pause such that at
    /// least a fraction `p` of the remembered pauses are no longer.
    pub(crate) fn percentile(&self, p: f64) -> Option<u64> {
        let n = self.ring.len();
        if n == 0 {
            return None;
        }
        let mut buf = [0u32; 256];
        let sorted = &mut buf[..n];
        sorted.copy_from_slice(&self.ring);
        sorted.sort_unstable();
        let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
        Some(u64::from(sorted[rank - 1]))
    }
}

/// An exponentially weighted event rate: each event adds 1/tau, and the sum
/// decays with time constant tau. Tracks a steady rate of r per ms as r.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rate {
    per_ms: f64,
    at: Instant,
}

impl Rate {
    pub(crate) fn add(&mut self, now: Instant, n: f64, tau_ms: f64) {
        self.per_ms = n.mul_add(1.0 / tau_ms, self.get_per_ms(now, tau_ms));
        self.at = now;
    }

    pub(crate) fn get_per_ms(&self, now: Instant, tau_ms: f64) -> f64 {
        let dt = now.as_millis().saturating_sub(self.at.as_millis()) as f64;
        self.per_ms * (-dt / tau_ms).exp()
    }

    pub(crate) fn per_s(&self, now: Instant, tau_ms: f64) -> f64 {
        self.get_per_ms(now, tau_ms) * 1000.0
    }
}

/// The largest number of events seen within any `window` ending in the last
/// `horizon`: a peak-hold of a sliding count. Memory is bounded by the events
/// of one window.
#[derive(Debug, Clone, Default)]
pub(crate) struct PeakWindow {
    /// Times of events within the window (one entry per event), in order.
    recent: VecDeque<Instant>,
    /// (time, count within the window then); counts strictly decrease front
    /// to back, so the front is the peak.
    peaks: VecDeque<(Instant, u32)>,
}

impl PeakWindow {
    pub(crate) fn record(&mut self, now: Instant, n: u32, window_ms: u64, horizon_ms: u64) {
        for _ in 0..n {
            self.recent.push_back(now);
        }
        let cutoff = now.as_millis().saturating_sub(window_ms);
        while self.recent.front().is_some_and(|t| t.as_millis() < cutoff) {
            self.recent.pop_front();
        }
        let c = u32::try_from(self.recent.len()).unwrap_or(u32::MAX);
        while self.peaks.back().is_some_and(|&(_, p)| p <= c) {
            self.peaks.pop_back();
        }
        self.peaks.push_back((now, c));
        let cutoff = now.as_millis().saturating_sub(horizon_ms);
        while self
            .peaks
            .front()
            .is_some_and(|&(t, _)| t.as_millis() < cutoff)
        {
            self.peaks.pop_front();
        }
    }

    pub(crate) fn peak(&self, now: Instant, window_ms: u64, horizon_ms: u64) -> u32 {
        let cutoff = now.as_millis().saturating_sub(window_ms);
        let in_window = self.recent.len() - self.recent.partition_point(|t| t.as_millis() < cutoff);
        let cutoff = now.as_millis().saturating_sub(horizon_ms);
        let held = self
            .peaks
            .iter()
            .find(|&&(t, _)| t.as_millis() >= cutoff)
            .map_or(0, |&(_, p)| p);
        held.max(u32::try_from(in_window).unwrap_or(u32::MAX))
    }
}

/// Exponentially weighted mean of observed pod start times.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StartTime {
    ms: f64,
}

impl StartTime {
    pub(crate) fn new(ms: u64) -> StartTime {
        StartTime { ms: ms as f64 }
    }

    pub(crate) fn observe(&mut self, ms: u64) {
        const ALPHA: f64 = 0.2;
        self.ms = (ms as f64 - self.ms).mul_add(ALPHA, self.ms);
    }

    pub(crate) fn ms(&self) -> u64 {
        self.ms.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_runs_back_from_the_last_pushed_across_the_wrap() {
        let mut p = Pauses::default();
        for ms in 1..=3 {
            p.push(ms, 4);
        }
        assert_eq!(p.newest_first().collect::<Vec<_>>(), [3, 2, 1]);
        for ms in 4..=6 {
            p.push(ms, 4);
        }
        assert_eq!(p.newest_first().collect::<Vec<_>>(), [6, 5, 4, 3]);
        assert_eq!(p.last(), Some(6));
    }

    #[test]
    fn percentile_is_nearest_rank_over_recent_pauses() {
        let mut p = Pauses::default();
        for ms in 1..=10 {
            p.push(ms * 100, 10);
        }
        assert_eq!(p.percentile(0.9), Some(900));
        assert_eq!(p.percentile(1.0), Some(1000));
        assert_eq!(p.percentile(0.05), Some(100));
        // The ring forgets the oldest.
        for _ in 0..10 {
            p.push(50, 10);
        }
        assert_eq!(p.percentile(1.0), Some(50));
    }

    #[test]
    fn rate_tracks_a_steady_stream() {
        let mut r = Rate::default();
        for i in 0..600 {
            r.add(Instant::from_millis(i * 500), 1.0, 60_000.0);
        }
        let at = Instant::from_millis(599 * 500);
        assert!((r.per_s(at, 60_000.0) - 2.0).abs() < 0.1);
        let later = Instant::from_millis(599 * 500 + 600_000);
        assert!(r.per_s(later, 60_000.0) < 0.001);
    }

    #[test]
    fn peak_window_holds_the_largest_burst_for_the_horizon() {
        let mut w = PeakWindow::default();
        let t = Instant::from_millis;
        w.record(t(0), 5, 1000, 10_000);
        w.record(t(500), 2, 1000, 10_000);
        assert_eq!(w.peak(t(500), 1000, 10_000), 7);
        // The burst left the window but not the horizon.
        assert_eq!(w.peak(t(5_000), 1000, 10_000), 7);
        assert_eq!(w.peak(t(10_600), 1000, 10_000), 0);
    }
}
