//! The record of pool decisions: the scheduler hands each event to
//! [`Recorder::record`] (a non-blocking channel send) and a background task
//! writes them to `pod_event` in batches, off every job's critical path.
//!
//! When the database falls behind and the channel fills, events are dropped
//! and counted in the log rather than slowing the scheduler down.

use std::sync::atomic::{AtomicU64, Ordering};

use hearth_store::pod_event::NewPodEvent;
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio::time::{Duration, Instant};

/// Events waiting to be written before new ones are dropped.
const CAPACITY: usize = 65_536;
/// Rows per insert.
const BATCH: usize = 512;
/// How long a batch waits for company. The record is read by people and
/// the console, not by jobs: waiting a little saves a statement per decision
/// when jobs come one by one.
const LINGER: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(super) struct Recorder {
    tx: mpsc::Sender<NewPodEvent>,
    dropped: AtomicU64,
}

impl Recorder {
    /// A recorder and its writer task, which ends when the recorder is dropped.
    pub(super) fn start(db: PgPool) -> Recorder {
        let (tx, rx) = mpsc::channel(CAPACITY);
        tokio::spawn(write(db, rx));
        Recorder {
            tx,
            dropped: AtomicU64::new(0),
        }
    }

    pub(super) fn record(&self, event: NewPodEvent) {
        if self.tx.try_send(event).is_err() {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(dropped = n, "pod event writer behind; events dropped");
            }
        }
    }
}

async fn write(db: PgPool, mut rx: mpsc::Receiver<NewPodEvent>) {
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let deadline = Instant::now() + LINGER;
        while batch.len() < BATCH {
            let room = BATCH - batch.len();
            tokio::select! {
                n = rx.recv_many(&mut batch, room) => if n == 0 { break },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match hearth_store::pod_event::insert(&db, &batch).await {
                Ok(_) => break,
                Err(e) if attempt < 3 => {
                    tracing::warn!(error = %e, attempt, "writing pod events failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, events = batch.len(), "writing pod events failed; dropped");
                    break;
                }
            }
        }
        batch.clear();
    }
}
