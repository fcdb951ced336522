//! Group commit of the writes every job makes on its way (its acceptance,
//! its assignment, its end). Each job's task hands its write to [`Group::write`] and waits
//! for it; one writer task per kind of write performs them. A write that
//! arrives while the writer is idle is performed at once, on its own,
//! exactly as without the group; writes that arrive while one is in flight
//! wait for it and then share one statement and one commit, so under load a
//! job's write costs a fraction of a statement, and alone it waits for
//! nothing.
//!
//! A shared write that fails is retried for each item on its own (off the
//! writer), so an item the database refuses fails only its own job.

use std::future::Future;
use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, Span};

use crate::metrics::Metrics;

/// Items shared by one write at most.
const BATCH: usize = 256;

/// One kind of write, alone and shared.
pub(crate) trait Write: Send + Sync + 'static {
    type Item: Send + Sync + 'static;
    type Out: Send + 'static;

    /// The `write` label of its metrics.
    const NAME: &'static str;

    /// Performs the write of one item on its own.
    fn one(
        db: &PgPool,
        item: &Self::Item,
    ) -> impl Future<Output = Result<Self::Out, hearth_store::Error>> + Send;

    /// Performs the writes of `items` together; the outcome of each, in
    /// their order. All or none of them are written.
    fn many(
        db: &PgPool,
        items: &[Self::Item],
    ) -> impl Future<Output = Result<Vec<Self::Out>, hearth_store::Error>> + Send;
}

type Reply<W> = oneshot::Sender<Result<<W as Write>::Out, hearth_store::Error>>;

/// A write handed over: its item, where its outcome goes, and the span it
/// was handed over in.
type Handed<W> = (<W as Write>::Item, Reply<W>, Span);

/// The handle of a writer task, which ends when this is dropped.
#[derive(Debug)]
pub(crate) struct Group<W: Write> {
    tx: mpsc::UnboundedSender<Handed<W>>,
}

impl<W: Write> Group<W> {
    /// Starts the writer; it counts what it writes in `metrics`.
    pub(crate) fn start(db: PgPool, metrics: Arc<Metrics>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run::<W>(db, rx, metrics));
        Group { tx }
    }

    /// Performs the write of `item`, alone or with others. Alone, it runs in
    /// the caller's span; shared, in a span of its own that follows from
    /// each of its items' callers'.
    pub(crate) async fn write(&self, item: W::Item) -> Result<W::Out, hearth_store::Error> {
        let (reply, done) = oneshot::channel();
        self.tx
            .send((item, reply, Span::current()))
            .map_err(|_| sqlx::Error::WorkerCrashed)?;
        // Without its writer (the service is shutting down) the write did
        // not happen: the caller's retries see a failed write.
        done.await.map_err(|_| sqlx::Error::WorkerCrashed)?
    }
}

async fn run<W: Write>(
    db: PgPool,
    mut rx: mpsc::UnboundedReceiver<Handed<W>>,
    metrics: Arc<Metrics>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        if batch.len() == 1 {
            if let Some((item, reply, span)) = batch.pop() {
                let _ = reply.send(W::one(&db, &item).instrument(span).await);
                metrics.jobs_written(W::NAME, 1);
            }
            continue;
        }
        let shared = tracing::info_span!("group.write", write = W::NAME, items = batch.len());
        let mut items = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        for (item, reply, span) in batch.drain(..) {
            shared.follows_from(&span);
            items.push(item);
            replies.push((reply, span));
        }
        match W::many(&db, &items).instrument(shared).await {
            Ok(outs) => {
                metrics.jobs_written(W::NAME, items.len());
                for ((reply, _), out) in replies.into_iter().zip(outs) {
                    let _ = reply.send(Ok(out));
                }
            }
            Err(e) => {
                tracing::warn!(items = items.len(), error = %e, "a shared write failed; writing each alone");
                let db = db.clone();
                let metrics = Arc::clone(&metrics);
                tokio::spawn(async move {
                    for (item, (reply, span)) in items.iter().zip(replies) {
                        let _ = reply.send(W::one(&db, item).instrument(span).await);
                        metrics.jobs_written(W::NAME, 1);
                    }
                });
            }
        }
    }
}
