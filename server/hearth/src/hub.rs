//! Live job events inside one process: state changes and output lines, for
//! `wait` and the server-sent event stream. Postgres stays the source of
//! truth; the hub only saves watchers from polling while a job runs here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hearth_core::State;
use hearth_core::agent::Stream;
use hearth_store::job::JobRow;
use tokio::sync::broadcast;
use uuid::Uuid;

/// Lines buffered per watcher before a slow one starts missing lines.
const CAPACITY: usize = 1024;

#[derive(Debug, Clone)]
pub enum JobEvent {
    State(State),
    Line {
        stream: Stream,
        rank: u32,
        line: String,
    },
    /// The job reached its final state. Last event of a job.
    Done(Arc<JobRow>),
}

#[derive(Debug, Default)]
pub struct Hub {
    channels: Mutex<HashMap<Uuid, broadcast::Sender<JobEvent>>>,
}

impl Hub {
    /// Starts carrying events of a job this process will run.
    pub fn open(&self, job_id: Uuid) {
        self.channels
            .lock()
            .expect("hub poisoned")
            .entry(job_id)
            .or_insert_with(|| broadcast::channel(CAPACITY).0);
    }

    /// Watches a job, if this process carries its events.
    pub fn subscribe(&self, job_id: Uuid) -> Option<broadcast::Receiver<JobEvent>> {
        self.channels
            .lock()
            .expect("hub poisoned")
            .get(&job_id)
            .map(broadcast::Sender::subscribe)
    }

    pub fn publish(&self, job_id: Uuid, event: JobEvent) {
        if let Some(tx) = self.channels.lock().expect("hub poisoned").get(&job_id) {
            // No watcher is fine.
            let _ = tx.send(event);
        }
    }

    /// Sends the final job and stops carrying the job's events.
    pub fn done(&self, row: JobRow) {
        let job_id = row.job_id;
        if let Some(tx) = self.channels.lock().expect("hub poisoned").remove(&job_id) {
            let _ = tx.send(JobEvent::Done(Arc::new(row)));
        }
    }
}
