//! The writer of job events: what the scheduler hands the hub (states, output
//! lines) is written to `job_event` in batches by one background task, off
//! every job's path, and only then published to this replica's watchers (with
//! the sequence number the store gave it) and announced to the others. So a
//! watcher that starts watching before it reads the stored events misses
//! nothing and learns every id from the store's numbering, whichever replica
//! it is on.
//!
//! A batch waits up to [`LINGER`] for company, so that a chatty job costs a
//! few inserts and announcements a second rather than one per line, and the
//! `assigned` and `running` of jobs that run side by side go in one insert.
//! It is written at once when someone waits for a job's events
//! ([`Journal::flush`]: a job's end is recorded only once its events are
//! stored, so a stream that sees the end has seen every event), and then
//! takes every job's events with it: the first of several jobs ending
//! together writes the others' events too, and their ends find nothing left
//! to wait for. It is written at once, too, when it holds an event its
//! sender marked so (see [`super::Hub::running`]).
//!
//! Tenants take turns: each batch takes up to [`TURN`] events of each
//! tenant with events waiting, round after round until it is full, so a
//! tenant whose jobs print floods of lines fills only what the others leave
//! of each batch, and another tenant's events (and the end of its jobs)
//! wait for one batch, not for the flood. A job's events are written in the
//! order handed over. What waits to be written is bounded by the jobs
//! running here: each run hands over at most the log limit of output, and
//! 10,000 lines, per stream and rank.

use std::collections::hash_map::Entry as Slot;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hearth_core::State;
use hearth_store::job::Change;
use hearth_store::job_event::{Body, NewJobEvent};
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use uuid::Uuid;

use super::{Hub, JobEvent, Logged};

/// How long a batch waits for company.
const LINGER: Duration = Duration::from_millis(20);
/// Events per insert.
const BATCH: usize = 1024;
/// Bytes of output per insert (a batch takes at least one event).
const BATCH_BYTES: usize = 4 << 20;
/// Tries per batch before it is dropped.
const TRIES: u32 = 4;
/// Events of one tenant a batch takes per round of turns.
const TURN: usize = 64;

pub(super) enum Entry {
    /// An event, and whether its batch is written at once rather than
    /// waiting for company.
    Event(NewJobEvent, bool),
    /// Answered once every event of the job handed over before it is
    /// written (or dropped).
    Flush(Uuid, oneshot::Sender<()>),
}

/// Events handed over and not yet written (or dropped), per job.
type Unwritten = Arc<Mutex<HashMap<Uuid, usize>>>;

/// The sending end; the writer ends once it is dropped and everything handed
/// over is written.
#[derive(Debug)]
pub(super) struct Journal {
    tx: mpsc::UnboundedSender<Entry>,
    unwritten: Unwritten,
}

impl Journal {
    pub(super) fn start(hub: Weak<Hub>, db: PgPool) -> Journal {
        let (tx, rx) = mpsc::unbounded_channel();
        let unwritten = Unwritten::default();
        tokio::spawn(write(hub, db, rx, unwritten.clone()));
        Journal { tx, unwritten }
    }

    /// Hands `event` over; with `now`, its batch is written without waiting
    /// for company.
    pub(super) fn send(&self, event: NewJobEvent, now: bool) {
        *lock(&self.unwritten).entry(event.job_id).or_default() += 1;
        // The writer outlives every sender.
        let _ = self.tx.send(Entry::Event(event, now));
    }

    /// Waits until every event of `job_id` handed over so far is written, at
    /// most `limit` (at once when none is left). Returns whether they were.
    pub(super) async fn flush(&self, job_id: Uuid, limit: Duration) -> bool {
        if !lock(&self.unwritten).contains_key(&job_id) {
            return true;
        }
        // Every event of the job handed over before it is written when it
        // is answered.
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Entry::Flush(job_id, tx)).is_err() {
            return false;
        }
        matches!(tokio::time::timeout(limit, rx).await, Ok(Ok(())))
    }
}

fn lock(unwritten: &Unwritten) -> std::sync::MutexGuard<'_, HashMap<Uuid, usize>> {
    unwritten.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the writer holds: events by tenant, in turn order, and the flushes
/// waiting for a job's events.
#[derive(Default)]
struct Pending {
    /// Each tenant's events, with whether their senders marked them to be
    /// written at once.
    queues: HashMap<Uuid, VecDeque<(NewJobEvent, bool)>>,
    /// Tenants with events waiting, the next to take its turn first.
    turns: VecDeque<Uuid>,
    events: usize,
    /// Events waiting that their senders marked to be written at once.
    marked: usize,
    flushes: HashMap<Uuid, Vec<oneshot::Sender<()>>>,
}

impl Pending {
    fn add(&mut self, entry: Entry, unwritten: &Unwritten) {
        match entry {
            Entry::Event(e, now) => {
                self.events += 1;
                self.marked += usize::from(now);
                let queue = self.queues.entry(e.tenant_id).or_default();
                if queue.is_empty() {
                    self.turns.push_back(e.tenant_id);
                }
                queue.push_back((e, now));
            }
            Entry::Flush(job_id, tx) => {
                if lock(unwritten).contains_key(&job_id) {
                    self.flushes.entry(job_id).or_default().push(tx);
                } else {
                    let _ = tx.send(());
                }
            }
        }
    }

    /// Whether a batch goes out without waiting for company.
    fn urgent(&self) -> bool {
        self.marked > 0 || !self.flushes.is_empty()
    }

    /// The next batch: tenants in turn, up to [`TURN`] events each a round,
    /// until [`BATCH`] events or [`BATCH_BYTES`] (at least one event).
    fn batch(&mut self) -> Vec<NewJobEvent> {
        let mut batch = Vec::new();
        let mut bytes = 0;
        while let Some(tenant) = self.turns.pop_front() {
            let queue = self
                .queues
                .get_mut(&tenant)
                .expect("a tenant in turn has a queue");
            let mut took = 0;
            while took < TURN && batch.len() < BATCH && (batch.is_empty() || bytes < BATCH_BYTES) {
                let Some((e, now)) = queue.pop_front() else {
                    break;
                };
                self.marked -= usize::from(now);
                bytes += e.body.size();
                batch.push(e);
                took += 1;
            }
            if queue.is_empty() {
                self.queues.remove(&tenant);
            } else {
                self.turns.push_back(tenant);
            }
            if batch.len() >= BATCH || bytes >= BATCH_BYTES {
                break;
            }
        }
        self.events -= batch.len();
        batch
    }

    /// Answers the flushes whose jobs have nothing left unwritten.
    fn answer(&mut self, unwritten: &Unwritten) {
        if self.flushes.is_empty() {
            return;
        }
        let unwritten = lock(unwritten);
        self.flushes.retain(|job_id, waiting| {
            if unwritten.contains_key(job_id) {
                return true;
            }
            for tx in waiting.drain(..) {
                let _ = tx.send(());
            }
            false
        });
    }
}

async fn write(
    hub: Weak<Hub>,
    db: PgPool,
    mut rx: mpsc::UnboundedReceiver<Entry>,
    unwritten: Unwritten,
) {
    let mut pending = Pending::default();
    let mut received: Vec<Entry> = Vec::new();
    let mut open = true;
    while open || pending.events > 0 {
        if pending.events == 0 {
            if rx.recv_many(&mut received, BATCH).await == 0 {
                return;
            }
            received.drain(..).for_each(|e| pending.add(e, &unwritten));
            if pending.events == 0 {
                continue;
            }
        }
        let deadline = Instant::now() + LINGER;
        while open && !pending.urgent() && pending.events < BATCH {
            tokio::select! {
                n = rx.recv_many(&mut received, BATCH) => open = n > 0,
                () = tokio::time::sleep_until(deadline) => break,
            }
            received.drain(..).for_each(|e| pending.add(e, &unwritten));
        }
        // What arrived meanwhile joins this batch's turns.
        while let Ok(e) = rx.try_recv() {
            pending.add(e, &unwritten);
        }
        let batch = pending.batch();
        write_batch(&hub, &db, &unwritten, batch).await;
        pending.answer(&unwritten);
    }
}

async fn write_batch(
    hub: &Weak<Hub>,
    db: &PgPool,
    unwritten: &Unwritten,
    events: Vec<NewJobEvent>,
) {
    if !events.is_empty() {
        let mut tries = 0;
        let firsts = loop {
            tries += 1;
            match hearth_store::job_event::append(db, &events).await {
                Ok(firsts) => break Some(firsts),
                Err(e) if tries < TRIES => {
                    tracing::warn!(error = %e, tries, events = events.len(), "writing job events failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(tries))).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, events = events.len(), "writing job events failed; they are dropped (the jobs' logs keep their output)");
                    break None;
                }
            }
        };
        let mut done: HashMap<Uuid, usize> = HashMap::new();
        for e in &events {
            *done.entry(e.job_id).or_default() += 1;
        }
        if let (Some(firsts), Some(hub)) = (firsts, hub.upgrade()) {
            written(&hub, events, firsts);
        }
        // Written (or given up on) and handed to the watchers here.
        let mut unwritten = lock(unwritten);
        for (job_id, n) in done {
            if let Slot::Occupied(mut left) = unwritten.entry(job_id) {
                *left.get_mut() = left.get().saturating_sub(n);
                if *left.get() == 0 {
                    left.remove();
                }
            }
        }
    }
}

/// Publishes written events here with their sequence numbers, and announces
/// each job's once: its latest state, or `running` for output alone.
fn written(hub: &Hub, events: Vec<NewJobEvent>, firsts: Vec<(Uuid, i64)>) {
    let mut next: HashMap<Uuid, i64> = firsts.into_iter().collect();
    let mut announce: HashMap<Uuid, (Uuid, State)> = HashMap::new();
    for e in events {
        // Not written: its leader is no longer current, or its tenant went.
        let Some(seq) = next.get_mut(&e.job_id) else {
            continue;
        };
        let state = match &e.body {
            Body::State(s) => *s,
            Body::Output { .. } => State::Running,
        };
        match announce.entry(e.job_id) {
            Slot::Vacant(v) => {
                v.insert((e.tenant_id, state));
            }
            Slot::Occupied(mut o) => {
                if matches!(e.body, Body::State(_)) {
                    o.get_mut().1 = state;
                }
            }
        }
        hub.publish(
            e.job_id,
            JobEvent::Logged(Arc::new(Logged {
                seq: *seq,
                body: e.body,
            })),
        );
        *seq += 1;
    }
    for (job_id, (tenant_id, state)) in announce {
        hub.announce(Change {
            job_id,
            tenant_id,
            state,
            cancel_requested: false,
        });
    }
}

#[cfg(test)]
mod tests {
    use hearth_core::agent::Stream;

    use super::*;

    fn line(tenant_id: Uuid, job_id: Uuid, n: usize) -> Entry {
        Entry::Event(
            NewJobEvent {
                tenant_id,
                job_id,
                epoch: 1,
                body: Body::Output {
                    stream: Stream::Stdout,
                    rank: 0,
                    line: n.to_string(),
                },
            },
            false,
        )
    }

    fn lines(batch: &[NewJobEvent], job_id: Uuid) -> Vec<String> {
        batch
            .iter()
            .filter(|e| e.job_id == job_id)
            .map(|e| match &e.body {
                Body::Output { line, .. } => line.clone(),
                Body::State(s) => format!("{s:?}"),
            })
            .collect()
    }

    /// A flood of one tenant's lines fills what the others leave of each
    /// batch: the others' events go in the first batch, each job's in order.
    #[test]
    fn tenants_take_turns_and_each_job_keeps_its_order() {
        let unwritten = Unwritten::default();
        let mut p = Pending::default();
        let (flood, quiet) = (Uuid::new_v4(), Uuid::new_v4());
        let (loud_job, quiet_job) = (Uuid::new_v4(), Uuid::new_v4());
        for n in 0..5 * BATCH {
            p.add(line(flood, loud_job, n), &unwritten);
        }
        for n in 0..3 {
            p.add(line(quiet, quiet_job, n), &unwritten);
        }
        assert!(!p.urgent());
        let first = p.batch();
        assert_eq!(first.len(), BATCH);
        assert_eq!(lines(&first, quiet_job), ["0", "1", "2"]);
        let mut loud = lines(&first, loud_job);
        assert_eq!(loud.len(), BATCH - 3);
        while p.events > 0 {
            let b = p.batch();
            assert!(!b.is_empty() && b.len() <= BATCH);
            loud.extend(lines(&b, loud_job));
        }
        let want: Vec<String> = (0..5 * BATCH).map(|n| n.to_string()).collect();
        assert_eq!(loud, want, "one job's events in the order handed over");
        assert!(p.queues.is_empty() && p.turns.is_empty());
    }

    /// A flush waits for its own job's events only, and a marked event
    /// makes the batch urgent until it is taken.
    #[test]
    fn a_flush_waits_for_its_job_and_marks_last_until_taken() {
        let unwritten = Unwritten::default();
        let mut p = Pending::default();
        let (tenant, job, other) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        lock(&unwritten).insert(job, 1);
        p.add(line(tenant, job, 0), &unwritten);
        let (tx, mut rx) = oneshot::channel();
        p.add(Entry::Flush(job, tx), &unwritten);
        let (done_tx, mut done_rx) = oneshot::channel();
        p.add(Entry::Flush(other, done_tx), &unwritten);
        assert_eq!(done_rx.try_recv(), Ok(()), "nothing of it is unwritten");
        assert!(p.urgent());
        p.answer(&unwritten);
        assert!(rx.try_recv().is_err(), "its event is not written yet");
        assert_eq!(p.batch().len(), 1);
        lock(&unwritten).remove(&job);
        p.answer(&unwritten);
        assert_eq!(rx.try_recv(), Ok(()));
        assert!(!p.urgent());

        let Entry::Event(e, _) = line(tenant, job, 1) else {
            unreachable!()
        };
        p.add(Entry::Event(e, true), &unwritten);
        assert!(p.urgent());
        assert_eq!(p.batch().len(), 1);
        assert!(!p.urgent());
    }
}
