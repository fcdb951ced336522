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
//! It is written at once when someone waits for it ([`Journal::flush`]: a
//! job's end is recorded only once its events are stored, so a stream that
//! sees the end has seen every event), and then takes every job's events
//! with it: the first of several jobs ending together writes the others'
//! events too, and their ends find nothing left to wait for. It is written
//! at once, too, when it holds an event its sender marked so (see
//! [`super::Hub::running`]). What waits to be written is bounded by the jobs
//! running here: each run hands over at most the log limit of output per
//! stream.

use std::collections::HashMap;
use std::collections::hash_map::Entry as Slot;
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

pub(super) enum Entry {
    /// An event, and whether its batch is written at once rather than
    /// waiting for company.
    Event(NewJobEvent, bool),
    /// Answered once every event handed over before it is written (or dropped).
    Flush(oneshot::Sender<()>),
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
        // Everything handed over before it is written when it is answered.
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Entry::Flush(tx)).is_err() {
            return false;
        }
        matches!(tokio::time::timeout(limit, rx).await, Ok(Ok(())))
    }
}

fn lock(unwritten: &Unwritten) -> std::sync::MutexGuard<'_, HashMap<Uuid, usize>> {
    unwritten.lock().unwrap_or_else(|e| e.into_inner())
}

async fn write(
    hub: Weak<Hub>,
    db: PgPool,
    mut rx: mpsc::UnboundedReceiver<Entry>,
    unwritten: Unwritten,
) {
    let mut pending: Vec<Entry> = Vec::new();
    let mut open = true;
    while open || !pending.is_empty() {
        if pending.is_empty() && rx.recv_many(&mut pending, BATCH).await == 0 {
            return;
        }
        let deadline = Instant::now() + LINGER;
        let mut now = false;
        let mut seen = 0;
        loop {
            now |= pending[seen..].iter().any(|e| match e {
                Entry::Flush(_) => true,
                Entry::Event(_, now) => *now,
            });
            seen = pending.len();
            if !open || now || pending.len() >= BATCH {
                break;
            }
            tokio::select! {
                n = rx.recv_many(&mut pending, BATCH - seen) => open = n > 0,
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        let mut take = 0;
        let mut bytes = 0;
        for e in &pending {
            if take == BATCH || (take > 0 && bytes >= BATCH_BYTES) {
                break;
            }
            if let Entry::Event(e, _) = e {
                bytes += e.body.size();
            }
            take += 1;
        }
        let batch: Vec<Entry> = pending.drain(..take).collect();
        write_batch(&hub, &db, &unwritten, batch).await;
    }
}

async fn write_batch(hub: &Weak<Hub>, db: &PgPool, unwritten: &Unwritten, batch: Vec<Entry>) {
    let mut events = Vec::with_capacity(batch.len());
    let mut flushes = Vec::new();
    for e in batch {
        match e {
            Entry::Event(e, _) => events.push(e),
            Entry::Flush(tx) => flushes.push(tx),
        }
    }
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
    for tx in flushes {
        let _ = tx.send(());
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
