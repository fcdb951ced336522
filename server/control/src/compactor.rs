//! The cohort compactor: pure launch logic over a caller-supplied clock
//! (integer ns). It decides *when* and *which* events run together; it never
//! executes anything, reads a clock or allocates ids other than batch ids.
//!
//! # Rules
//!
//! One queue per executable route, ordered by deadline (ties by arrival).
//! Route r has a minimum batch size `K_r` (from calibration) or none (no batch
//! ever wins on this machine: every event of r goes to the CPU at once). With
//! `c` the configured launch cost (how long before a deadline a launch must be
//! decided so the device starts in time), at time `now` a queue is **due**
//! when
//!
//! * it holds at least B events (a full batch: launch now), or
//! * its earliest deadline `d` satisfies `d <= now + c` (waiting longer would
//!   miss it), or
//! * `eager` is set and it holds at least `K_r` events.
//!
//! Due queues are served earliest deadline first (ties by route index). A due
//! queue with at least `K_r` events launches its up to B earliest-deadline
//! events as one batch; otherwise every queued event with `d <= now + c` falls
//! back to the CPU path (no batch of `K_r` can take it in time). By default a
//! batch launches as late as possible (at its earliest deadline minus `c`),
//! so it takes every event that arrived meanwhile, which is what the
//! contiguous-block optimum P* does with equal deadlines.

use std::collections::VecDeque;

/// Compactor settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Most events per batch (B), at least 1.
    pub max_batch: usize,
    /// Lead time `c` in ns: a queue whose earliest deadline is within `c` of
    /// now is due. Cover the executor's launch latency and any queueing
    /// behind a running batch.
    pub launch_cost_ns: u64,
    /// Launch as soon as `K_r` events are queued instead of as late as possible.
    pub eager: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_batch: 1024,
            launch_cost_ns: 1_000_000,
            eager: false,
        }
    }
}

/// A queued event: the caller's id plus its times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// The caller's event id.
    pub event: u64,
    /// Release time in ns.
    pub release_ns: u64,
    /// Launch deadline in ns (inclusive).
    pub deadline_ns: u64,
}

/// Why an event goes to the CPU path instead of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    /// The route has no `K_r`: no batch size beats the CPU path here.
    NoBatch,
    /// Its deadline would pass before a batch of `K_r` could launch.
    Deadline,
    /// The compactor was drained below `K_r` (shutdown).
    Drain,
}

/// A batch to launch now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Batch id, increasing from 1.
    pub batch: u64,
    /// Route index.
    pub route: usize,
    /// Members, by deadline.
    pub events: Vec<Pending>,
}

/// What the compactor decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run these events as one batch on the active executor.
    Launch(Launch),
    /// Run this event on the CPU path now.
    Fallback {
        /// Route index.
        route: usize,
        /// The event.
        event: Pending,
        /// Why.
        reason: FallbackReason,
    },
}

#[derive(Debug, Clone, Default)]
struct Queue {
    k: Option<u32>,
    events: VecDeque<Pending>,
}

/// Per-route deadline queues and the launch rules of the module docs.
#[derive(Debug, Clone)]
pub struct Compactor {
    config: Config,
    queues: Vec<Queue>,
    next_batch: u64,
}

impl Compactor {
    /// An empty compactor (B is raised to at least 1).
    pub fn new(mut config: Config) -> Self {
        config.max_batch = config.max_batch.max(1);
        Self {
            config,
            queues: Vec::new(),
            next_batch: 1,
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Adds a route with minimum batch size `k` (`None`: never batch) and returns its index.
    pub fn add_route(&mut self, k: Option<u32>) -> usize {
        self.queues.push(Queue {
            k: k.map(|k| k.max(1)),
            events: VecDeque::new(),
        });
        self.queues.len() - 1
    }

    /// Changes `K_r` of a route (e.g. after calibration).
    ///
    /// # Panics
    /// If `route` was not added.
    pub fn set_k(&mut self, route: usize, k: Option<u32>) {
        self.queues[route].k = k.map(|k| k.max(1));
    }

    /// `K_r` of a route.
    pub fn k(&self, route: usize) -> Option<u32> {
        self.queues.get(route).and_then(|q| q.k)
    }

    /// Number of routes.
    pub fn routes(&self) -> usize {
        self.queues.len()
    }

    /// Events queued on `route`.
    pub fn queued(&self, route: usize) -> usize {
        self.queues.get(route).map_or(0, |q| q.events.len())
    }

    /// Queues an event; returns the fallback at once if its route has no `K_r`.
    /// Call [`Compactor::poll`] afterwards: the event may make its queue due.
    ///
    /// # Panics
    /// If `route` was not added.
    pub fn push(&mut self, route: usize, event: Pending) -> Option<Action> {
        let q = &mut self.queues[route];
        if q.k.is_none() {
            return Some(Action::Fallback {
                route,
                event,
                reason: FallbackReason::NoBatch,
            });
        }
        let at = q
            .events
            .partition_point(|e| e.deadline_ns <= event.deadline_ns);
        q.events.insert(at, event);
        None
    }

    /// The launches and fallbacks due at `now`, in the order to run them.
    pub fn poll(&mut self, now: u64) -> Vec<Action> {
        let horizon = now.saturating_add(self.config.launch_cost_ns);
        let mut actions = Vec::new();
        loop {
            let due = self
                .queues
                .iter()
                .enumerate()
                .filter_map(|(r, q)| {
                    let front = q.events.front()?;
                    let k = q.k? as usize;
                    let is_due = q.events.len() >= self.config.max_batch
                        || front.deadline_ns <= horizon
                        || (self.config.eager && q.events.len() >= k);
                    is_due.then_some((front.deadline_ns, r))
                })
                .min();
            let Some((_, r)) = due else { break };
            if let Some(launch) = self.take_batch(r) {
                actions.push(Action::Launch(launch));
            } else {
                let q = &mut self.queues[r];
                while q.events.front().is_some_and(|e| e.deadline_ns <= horizon) {
                    let event = q.events.pop_front().expect("front exists");
                    actions.push(Action::Fallback {
                        route: r,
                        event,
                        reason: FallbackReason::Deadline,
                    });
                }
            }
        }
        actions
    }

    /// The earliest time at which [`Compactor::poll`] may have something to do
    /// without new events (`None` when every queue is empty).
    pub fn next_wake(&self) -> Option<u64> {
        self.queues
            .iter()
            .filter_map(|q| {
                let front = q.events.front()?;
                let k = q.k? as usize;
                if q.events.len() >= self.config.max_batch
                    || (self.config.eager && q.events.len() >= k)
                {
                    Some(0)
                } else {
                    Some(front.deadline_ns.saturating_sub(self.config.launch_cost_ns))
                }
            })
            .min()
    }

    /// The up to B earliest-deadline events of `route` as a batch, if it
    /// holds at least `K_r`.
    fn take_batch(&mut self, route: usize) -> Option<Launch> {
        let q = &mut self.queues[route];
        let k = q.k? as usize;
        if q.events.len() < k {
            return None;
        }
        let n = q.events.len().min(self.config.max_batch);
        let launch = Launch {
            batch: self.next_batch,
            route,
            events: q.events.drain(..n).collect(),
        };
        self.next_batch += 1;
        Some(launch)
    }

    /// Empties every queue: batches of at least `K_r` (at most B each), the rest to the CPU.
    pub fn drain(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        for r in 0..self.queues.len() {
            while let Some(launch) = self.take_batch(r) {
                actions.push(Action::Launch(launch));
            }
            let q = &mut self.queues[r];
            actions.extend(q.events.drain(..).map(|event| Action::Fallback {
                route: r,
                event,
                reason: FallbackReason::Drain,
            }));
        }
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: u64, release_ns: u64, delta: u64) -> Pending {
        Pending {
            event,
            release_ns,
            deadline_ns: release_ns + delta,
        }
    }

    fn launches(actions: &[Action]) -> Vec<(usize, Vec<u64>)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Launch(l) => Some((l.route, l.events.iter().map(|e| e.event).collect())),
                Action::Fallback { .. } => None,
            })
            .collect()
    }

    fn cfg(b: usize, c: u64, eager: bool) -> Config {
        Config {
            max_batch: b,
            launch_cost_ns: c,
            eager,
        }
    }

    #[test]
    fn waits_until_the_earliest_deadline_then_takes_everything() {
        let mut c = Compactor::new(cfg(100, 10, false));
        let r = c.add_route(Some(3));
        for i in 0..5 {
            assert!(c.push(r, ev(i, i * 10, 100)).is_none());
            assert!(c.poll(i * 10).is_empty());
        }
        assert_eq!(c.next_wake(), Some(90));
        assert!(c.poll(89).is_empty());
        let a = c.poll(90);
        assert_eq!(launches(&a), vec![(r, vec![0, 1, 2, 3, 4])]);
        assert_eq!(c.next_wake(), None);
    }

    #[test]
    fn below_k_expiring_events_fall_back_and_the_rest_wait() {
        let mut c = Compactor::new(cfg(100, 0, false));
        let r = c.add_route(Some(3));
        c.push(r, ev(1, 0, 100));
        c.push(r, ev(2, 50, 100));
        let a = c.poll(100);
        assert_eq!(
            a,
            vec![Action::Fallback {
                route: r,
                event: ev(1, 0, 100),
                reason: FallbackReason::Deadline
            }]
        );
        assert_eq!(c.queued(r), 1);
        c.push(r, ev(3, 120, 100));
        c.push(r, ev(4, 130, 100));
        assert!(c.poll(130).is_empty());
        assert_eq!(launches(&c.poll(150)), vec![(r, vec![2, 3, 4])]);
    }

    #[test]
    fn full_batches_launch_at_once_and_are_capped_at_b() {
        let mut c = Compactor::new(cfg(4, 0, false));
        let r = c.add_route(Some(2));
        for i in 0..9 {
            c.push(r, ev(i, 0, 1000 + i));
        }
        let a = c.poll(0);
        assert_eq!(
            launches(&a),
            vec![(r, vec![0, 1, 2, 3]), (r, vec![4, 5, 6, 7])]
        );
        assert_eq!(c.queued(r), 1);
    }

    #[test]
    fn eager_launches_at_k() {
        let mut c = Compactor::new(cfg(100, 0, true));
        let r = c.add_route(Some(2));
        c.push(r, ev(1, 0, 100));
        assert!(c.poll(0).is_empty());
        c.push(r, ev(2, 1, 100));
        assert_eq!(launches(&c.poll(1)), vec![(r, vec![1, 2])]);
    }

    #[test]
    fn earliest_deadline_route_first_and_deadline_order_inside() {
        let mut c = Compactor::new(cfg(100, 0, false));
        let a = c.add_route(Some(1));
        let b = c.add_route(Some(1));
        c.push(a, ev(1, 0, 50));
        c.push(b, ev(2, 0, 40));
        c.push(
            a,
            Pending {
                event: 3,
                release_ns: 0,
                deadline_ns: 45,
            },
        );
        let acts = c.poll(60);
        assert_eq!(launches(&acts), vec![(b, vec![2]), (a, vec![3, 1])]);
        let ids: Vec<u64> = acts
            .iter()
            .map(|x| match x {
                Action::Launch(l) => l.batch,
                Action::Fallback { .. } => 0,
            })
            .collect();
        assert_eq!(ids, vec![1, 2]);
    }

    #[test]
    fn routes_without_k_fall_back_immediately_and_drain_flushes() {
        let mut c = Compactor::new(cfg(4, 0, false));
        let none = c.add_route(None);
        let r = c.add_route(Some(2));
        assert_eq!(
            c.push(none, ev(1, 0, 10)),
            Some(Action::Fallback {
                route: none,
                event: ev(1, 0, 10),
                reason: FallbackReason::NoBatch
            })
        );
        for i in 0..5 {
            c.push(r, ev(10 + i, 0, 10));
        }
        c.set_k(r, Some(4));
        let a = c.drain();
        assert_eq!(launches(&a), vec![(r, vec![10, 11, 12, 13])]);
        assert!(matches!(
            a[1],
            Action::Fallback {
                reason: FallbackReason::Drain,
                ..
            }
        ));
        assert_eq!(c.queued(r), 0);
    }

    #[test]
    fn launch_cost_moves_the_decision_earlier() {
        let mut c = Compactor::new(cfg(100, 30, false));
        let r = c.add_route(Some(1));
        c.push(r, ev(1, 0, 100));
        assert_eq!(c.next_wake(), Some(70));
        assert!(c.poll(69).is_empty());
        assert_eq!(launches(&c.poll(70)).len(), 1);
    }
}
