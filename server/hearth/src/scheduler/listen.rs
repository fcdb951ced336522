//! Every replica's ear on the store: it `LISTEN`s for the job changes that
//! processes announce ([`hearth_store::job::CHANNEL`]), wakes this replica's
//! watchers of those jobs (through the hub), and tells a leading scheduler
//! of queued jobs it does not hold and of jobs to stop.
//!
//! Notifications are hints: when the connection drops, everything announced
//! meanwhile is lost, so every watcher reads its job again and the leader
//! scans the store. A replica says hello when it starts listening, so that
//! the others, which announce nothing while alone, start at once.

use std::time::Duration;

use hearth_core::State;
use hearth_store::job::{CHANNEL, Change};
use sqlx::postgres::PgListener;

use super::Scheduler;

/// Pause before connecting again after the listener failed.
const RETRY: Duration = Duration::from_secs(1);

impl Scheduler {
    /// Listens until the process ends.
    pub(super) async fn listen(&self) {
        loop {
            let mut listener = match self.connect_listener().await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "listening for job changes failed; retrying");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            };
            // Whatever was announced before listening began is unheard.
            self.missed_changes();
            // The others announce only while someone else is there to hear.
            let replica = &self.inner.settings.replica;
            let hello = replica.hello();
            if let Err(e) = hearth_store::job::notify(&mut listener, &hello).await {
                tracing::warn!(error = %e, "saying hello to the other replicas failed; they hear of this one within a second");
            }
            loop {
                match listener.try_recv().await {
                    Ok(Some(n)) => match Change::parse(n.payload()) {
                        Some(change) => self.changed(&change),
                        None if replica.is_hello_from_another(n.payload()) => {
                            self.inner.hub.replica_joined();
                        }
                        // Its own hello, heard like any other notification.
                        None if n.payload() == hello => {}
                        None => tracing::debug!(payload = n.payload(), "unknown job change"),
                    },
                    // The connection dropped and is back: changes were lost.
                    Ok(None) => self.missed_changes(),
                    Err(e) => {
                        tracing::warn!(error = %e, "listening for job changes failed; retrying");
                        break;
                    }
                }
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    async fn connect_listener(&self) -> Result<PgListener, sqlx::Error> {
        let mut listener = PgListener::connect_with(&self.inner.db).await?;
        listener.listen(CHANNEL).await?;
        Ok(listener)
    }

    /// One announced change.
    fn changed(&self, change: &Change) {
        let state = change.state;
        self.inner.hub.stored(change.job_id, Some(state));
        let mut st = self.state();
        if !st.leading || st.draining {
            return;
        }
        let held = st.jobs.contains_key(&change.job_id);
        if held && (change.cancel_requested || state == State::Cancelled) {
            // Cancelled through another replica: stop it now rather than at
            // the next scan.
            drop(st);
            self.cancel(change.job_id);
        } else if !held && state == State::Queued {
            st.pickup_wanted = true;
            drop(st);
            self.inner.wake.notify_one();
        }
    }

    fn missed_changes(&self) {
        self.inner.hub.resync();
        self.state().pickup_wanted = true;
        self.inner.wake.notify_one();
    }
}
