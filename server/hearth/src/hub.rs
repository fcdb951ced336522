//! Live job events for `wait` and the server-sent event stream, and the
//! announcement of job state changes to the other replicas. Postgres stays
//! the source of truth; the hub only saves watchers from polling.
//!
//! A job's channel exists only while someone watches it ([`Hub::watch`]) and
//! goes with its last watcher, so a replica keeps nothing for the jobs nobody
//! watches. The scheduler hands over what happens to the jobs it runs: states
//! and output lines, which the [`journal`] writes to the store and then
//! publishes with their ids, and the final row, published at once. Every
//! state change is also announced on the store's notification channel
//! ([`hearth_store::job::CHANNEL`]) while another replica is there to hear
//! it ([`crate::replica::Company`]); each replica's listener hands what it
//! hears to [`Hub::stored`], which wakes that job's watchers there. Watchers
//! then read the job (and its stored events) again, so a lost notification
//! only delays them (they also read it every few seconds), and never misleads
//! them.
//!
//! It may not touch HTTP or the scheduler.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use hearth_core::State;
use hearth_core::agent::Stream;
use hearth_store::job::{Change, JobRow};
use hearth_store::job_event::{Body, NewJobEvent};
use sqlx::PgPool;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;
use uuid::Uuid;

use crate::replica::Company;

mod journal;

/// Events buffered per watcher before a slow one starts missing events.
const CAPACITY: usize = 1024;
/// Changes waiting to be announced before new ones are dropped (the other
/// replicas' watchers then learn of them by reading the store).
const ANNOUNCE_CAPACITY: usize = 65_536;
/// Notifications per announcing statement.
const ANNOUNCE_BATCH: usize = 512;
/// How long announcements of progress wait for company (see [`announce`]).
const ANNOUNCE_LINGER: Duration = Duration::from_millis(20);

/// How long a job's end waits for its events to be written.
const FLUSH_LIMIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub enum JobEvent {
    /// A state or output line this process handed over, once stored.
    Logged(Arc<Logged>),
    /// The job reached its final state here. Last event of a job.
    Done(Arc<JobRow>),
    /// The store says the job changed (to this state, when known): read the
    /// row again.
    Stored(Option<State>),
}

/// A stored event of a job: `seq` is its id in the job's event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    pub seq: i64,
    pub body: Body,
}

/// What woke a [`Watch`].
#[derive(Debug)]
pub enum Wake {
    Event(JobEvent),
    /// The watcher fell behind and missed this many events: read the job
    /// (and its stored events) again.
    Missed(u64),
    /// The time given to [`Watch::next`] passed.
    Timeout,
    /// The service is shutting down: answer with the job as it stands.
    Closing,
}

#[derive(Debug)]
pub struct Hub {
    channels: Mutex<HashMap<Uuid, broadcast::Sender<JobEvent>>>,
    closing: watch::Sender<bool>,
    announcer: OnceLock<mpsc::Sender<Change>>,
    journal: OnceLock<journal::Journal>,
    dropped: AtomicU64,
    /// Another replica said hello since the announcer last looked (shared
    /// with it).
    hello: Arc<AtomicBool>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            channels: Mutex::default(),
            closing: watch::channel(false).0,
            announcer: OnceLock::new(),
            journal: OnceLock::new(),
            dropped: AtomicU64::new(0),
            hello: Arc::default(),
        }
    }
}

impl Hub {
    fn channels(&self) -> MutexGuard<'_, HashMap<Uuid, broadcast::Sender<JobEvent>>> {
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts announcing state changes through `db` to the other replicas
    /// (while there are any: `replica_id` is this one), in batches off every
    /// job's path. Until then nothing is announced; a second call changes
    /// nothing.
    pub fn start_announcing(&self, db: PgPool, replica_id: String) {
        let (tx, rx) = mpsc::channel(ANNOUNCE_CAPACITY);
        if self.announcer.set(tx).is_ok() {
            let company = Company::new(replica_id);
            tokio::spawn(announce(Arc::clone(&self.hello), db, company, rx));
        }
    }

    /// Another replica started listening: announce from now on, without
    /// waiting for the next look at who is there.
    pub fn replica_joined(&self) {
        self.hello.store(true, Ordering::Relaxed);
    }

    /// Starts writing the job events handed over ([`Hub::state`],
    /// [`Hub::line`]) to the store through `db`, in batches off every job's
    /// path; they reach watchers once written. Until then they are only
    /// announced (states) or dropped (lines); a second call changes nothing.
    pub fn start_journal(self: &Arc<Self>, db: PgPool) {
        self.journal
            .get_or_init(|| journal::Journal::start(Arc::downgrade(self), db));
    }

    /// Watches a job: events published from now on reach the returned
    /// watcher. Watch before reading the job, so that no change slips
    /// between the read and the watch.
    pub fn watch(self: &Arc<Self>, job_id: Uuid) -> Watch {
        let rx = self
            .channels()
            .entry(job_id)
            .or_insert_with(|| broadcast::channel(CAPACITY).0)
            .subscribe();
        Watch {
            hub: self.clone(),
            job_id,
            rx: Some(rx),
            closing: self.closing.subscribe(),
        }
    }

    /// Jobs watched in this process now.
    pub fn watched(&self) -> usize {
        self.channels().len()
    }

    /// Hands an event to the job's watchers in this process, if it has any.
    pub fn publish(&self, job_id: Uuid, event: JobEvent) {
        if let Some(tx) = self.channels().get(&job_id) {
            // A watcher leaving meanwhile is fine.
            let _ = tx.send(event);
        }
    }

    /// A state the scheduler of leadership `epoch` recorded for a job (not a
    /// final one: see [`Hub::done`]): once it is among the job's stored
    /// events, its watchers here hear it and the other replicas are told.
    /// A re-queued job's `queued` is written at once: it may be assigned,
    /// and end, on another replica.
    pub fn state(&self, epoch: i64, job_id: Uuid, tenant_id: Uuid, state: State) {
        self.record_state(epoch, job_id, tenant_id, state, state == State::Queued);
    }

    /// A job started running. Its `running` is written at once when the job
    /// runs `alone` here, while it runs, so that its end finds nothing left to
    /// write; beside other jobs it waits for their company (their ends, or
    /// the writer's linger), and the events of jobs running together cost one
    /// insert rather than one each.
    pub fn running(&self, epoch: i64, job_id: Uuid, tenant_id: Uuid, alone: bool) {
        self.record_state(epoch, job_id, tenant_id, State::Running, alone);
    }

    fn record_state(&self, epoch: i64, job_id: Uuid, tenant_id: Uuid, state: State, now: bool) {
        let Some(journal) = self.journal.get() else {
            self.announce(Change {
                job_id,
                tenant_id,
                state,
                cancel_requested: false,
            });
            return;
        };
        journal.send(
            NewJobEvent {
                tenant_id,
                job_id,
                epoch,
                body: Body::State(state),
            },
            now,
        );
    }

    /// A line a job printed, as the scheduler of leadership `epoch` received
    /// it: stored among the job's events, then heard by its watchers here and
    /// announced. The caller bounds what it hands over (the log limit).
    pub fn line(
        &self,
        epoch: i64,
        job_id: Uuid,
        tenant_id: Uuid,
        stream: Stream,
        rank: u32,
        line: String,
    ) {
        if let Some(journal) = self.journal.get() {
            journal.send(
                NewJobEvent {
                    tenant_id,
                    job_id,
                    epoch,
                    body: Body::Output {
                        stream,
                        rank: i32::try_from(rank).unwrap_or(i32::MAX),
                        line,
                    },
                },
                false,
            );
        }
    }

    /// Waits until every event of a job handed over so far is stored (at
    /// most a few seconds: a job's end is not held up for long by a store
    /// that refuses its events). Call it before recording a job's end, so
    /// that whoever sees the end finds all its events.
    pub async fn flush(&self, job_id: Uuid) {
        if let Some(journal) = self.journal.get()
            && !journal.flush(job_id, FLUSH_LIMIT).await
        {
            tracing::warn!(%job_id, "job events not written in time; the job's end is recorded before them");
        }
    }

    /// The final row of a job, as this process recorded it.
    pub fn done(&self, row: JobRow) {
        let change = Change::of(&row);
        self.publish(row.job_id, JobEvent::Done(Arc::new(row)));
        self.announce(change);
    }

    /// Tells this replica's watchers of the job and the other replicas that
    /// a job changed as `row` now has it (a job accepted, a cancellation
    /// requested).
    pub fn changed(&self, row: &JobRow) {
        let change = Change::of(row);
        self.publish(row.job_id, JobEvent::Stored(Some(change.state)));
        self.announce(change);
    }

    fn announce(&self, change: Change) {
        let Some(tx) = self.announcer.get() else {
            return;
        };
        if tx.try_send(change).is_err() {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(
                    dropped = n,
                    "job change announcer behind; other replicas learn of these changes by polling"
                );
            }
        }
    }

    /// A change announced through the store (by any process, this one
    /// included) wakes the job's watchers here.
    pub fn stored(&self, job_id: Uuid, state: Option<State>) {
        self.publish(job_id, JobEvent::Stored(state));
    }

    /// Announcements may have been missed (the listener reconnected): every
    /// watcher reads its job again.
    pub fn resync(&self) {
        for tx in self.channels().values() {
            let _ = tx.send(JobEvent::Stored(None));
        }
    }

    /// Ends every watch, now and to come: waits answer with the job as it
    /// stands, event streams close.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }
}

/// Whether a change must reach the other replicas at once: a job to pick up
/// (`queued`), to stop (a cancellation) or whose end someone waits for.
/// `assigned` and `running` only tell watchers elsewhere how a job goes.
fn is_urgent(change: &Change) -> bool {
    change.cancel_requested || change.state == State::Queued || change.state.is_terminal()
}

/// Writes announcements in batches until the hub is dropped. A batch of
/// progress alone waits up to [`ANNOUNCE_LINGER`] for company, and goes as
/// soon as an urgent change joins it: a short job's `running` then goes out
/// with its end, one statement instead of two. A batch nobody else would
/// hear goes nowhere: this replica's own watchers learnt of its changes
/// when they were handed over.
async fn announce(
    hello: Arc<AtomicBool>,
    db: PgPool,
    mut company: Company,
    mut rx: mpsc::Receiver<Change>,
) {
    let mut batch = Vec::with_capacity(ANNOUNCE_BATCH);
    while rx.recv_many(&mut batch, ANNOUNCE_BATCH).await > 0 {
        if !company
            .present(&db, hello.swap(false, Ordering::Relaxed))
            .await
        {
            batch.clear();
            continue;
        }
        let deadline = Instant::now() + ANNOUNCE_LINGER;
        while batch.len() < ANNOUNCE_BATCH && !batch.iter().any(is_urgent) {
            let room = ANNOUNCE_BATCH - batch.len();
            tokio::select! {
                n = rx.recv_many(&mut batch, room) => if n == 0 { break },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        if let Err(e) = hearth_store::job::announce(&db, &batch).await {
            tracing::warn!(error = %e, changes = batch.len(), "announcing job changes failed; other replicas learn of them by polling");
        }
        batch.clear();
    }
}

/// One watcher of one job; the job's channel goes with its last watcher.
#[derive(Debug)]
pub struct Watch {
    hub: Arc<Hub>,
    job_id: Uuid,
    /// Taken only when dropped.
    rx: Option<broadcast::Receiver<JobEvent>>,
    closing: watch::Receiver<bool>,
}

impl Watch {
    /// The next event of the job, or why there is none before `until`.
    pub async fn next(&mut self, until: Instant) -> Wake {
        let Some(rx) = self.rx.as_mut() else {
            return Wake::Closing;
        };
        let closing = &mut self.closing;
        tokio::select! {
            biased;
            _ = closing.wait_for(|c| *c) => Wake::Closing,
            event = rx.recv() => match event {
                Ok(event) => Wake::Event(event),
                Err(broadcast::error::RecvError::Lagged(n)) => Wake::Missed(n),
                // Only a dropped hub closes a channel someone still watches.
                Err(broadcast::error::RecvError::Closed) => Wake::Closing,
            },
            () = tokio::time::sleep_until(until) => Wake::Timeout,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut channels = self.hub.channels();
        if channels
            .get(&self.job_id)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            channels.remove(&self.job_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(50)
    }

    #[tokio::test]
    async fn channels_live_only_while_someone_watches() {
        let hub = Arc::new(Hub::default());
        let job = Uuid::now_v7();
        // Nobody watches: publishing keeps nothing.
        hub.publish(job, JobEvent::Stored(Some(State::Running)));
        hub.state(1, job, Uuid::now_v7(), State::Running);
        hub.stored(job, Some(State::Running));
        assert_eq!(hub.watched(), 0);

        let mut a = hub.watch(job);
        let mut b = hub.watch(job);
        assert_eq!(hub.watched(), 1);
        hub.stored(job, Some(State::Succeeded));
        for w in [&mut a, &mut b] {
            assert!(matches!(
                w.next(soon()).await,
                Wake::Event(JobEvent::Stored(Some(State::Succeeded)))
            ));
        }
        drop(a);
        assert_eq!(hub.watched(), 1, "b still watches");
        drop(b);
        assert_eq!(hub.watched(), 0, "the last watcher takes the channel");

        // Many jobs watched and left: nothing stays behind.
        let watches: Vec<Watch> = (0..100).map(|_| hub.watch(Uuid::now_v7())).collect();
        assert_eq!(hub.watched(), 100);
        drop(watches);
        assert_eq!(hub.watched(), 0);
    }

    #[tokio::test]
    async fn watchers_time_out_resync_and_close() {
        let hub = Arc::new(Hub::default());
        let mut w = hub.watch(Uuid::now_v7());
        assert!(matches!(w.next(soon()).await, Wake::Timeout));
        hub.resync();
        assert!(matches!(
            w.next(soon()).await,
            Wake::Event(JobEvent::Stored(None))
        ));
        hub.close();
        assert!(matches!(w.next(soon()).await, Wake::Closing));
        // Watches begun after the close end at once.
        let mut late = hub.watch(Uuid::now_v7());
        assert!(matches!(
            late.next(Instant::now() + Duration::from_secs(60)).await,
            Wake::Closing
        ));
    }
}
