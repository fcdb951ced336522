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
//!
//! The writer keeps its connection from one write to the next while writes
//! wait for it ([`Kept`]), rather than handing it back to the pool in
//! between: the pool checks every connection that comes back with a round
//! trip to the database.

use std::future::Future;
use std::sync::Arc;

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, Span};

use crate::metrics::Metrics;

/// Items shared by one write at most.
const BATCH: usize = 256;
/// Writes in a row on one connection before the writer hands it back to the
/// pool, so that others waiting for one get their turn.
const HOLD: usize = 16;

/// One kind of write, alone and shared.
pub(crate) trait Write: Send + Sync + 'static {
    type Item: Send + Sync + 'static;
    type Out: Send + 'static;

    /// The `write` label of its metrics.
    const NAME: &'static str;

    /// Performs the write of one item on its own.
    fn one(
        conn: &mut PgConnection,
        item: &Self::Item,
    ) -> impl Future<Output = Result<Self::Out, hearth_store::Error>> + Send;

    /// Performs the writes of `items` together; the outcome of each, in
    /// their order. All or none of them are written.
    fn many(
        conn: &mut PgConnection,
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

/// The connection of a background writer, kept from one write to the next
/// while more writes wait for it ([`HOLD`] in a row at most, so that others
/// waiting for one get their turn), and handed back to the pool when the
/// writer goes idle or a write fails (the pool checks a returned connection
/// with a round trip, and closes a broken one).
#[derive(Debug)]
struct Kept {
    db: PgPool,
    /// The connection and how many writes in a row it made.
    conn: Option<(PoolConnection<Postgres>, usize)>,
}

impl Kept {
    fn new(db: PgPool) -> Kept {
        Kept { db, conn: None }
    }

    /// The connection for the next write: the kept one, else one from the
    /// pool.
    async fn get(&mut self) -> Result<&mut PgConnection, sqlx::Error> {
        let (conn, _) = match self.conn.take() {
            Some(kept) => self.conn.insert(kept),
            None => self.conn.insert((self.db.acquire().await?, 0)),
        };
        Ok(&mut **conn)
    }

    /// After a write: keeps the connection if the write went well and
    /// `more` writes wait, else hands it back.
    fn done(&mut self, ok: bool, more: bool) {
        match self.conn.take() {
            Some((conn, made)) if ok && more && made + 1 < HOLD => {
                self.conn = Some((conn, made + 1));
            }
            _ => {}
        }
    }
}

async fn run<W: Write>(
    db: PgPool,
    mut rx: mpsc::UnboundedReceiver<Handed<W>>,
    metrics: Arc<Metrics>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut kept = Kept::new(db.clone());
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let ok = match kept.get().await {
            Ok(conn) => write::<W>(conn, &db, &metrics, &mut batch).await,
            Err(e) => {
                for (_, reply, _) in batch.drain(..) {
                    let _ = reply.send(Err(unavailable(&e).into()));
                }
                false
            }
        };
        kept.done(ok, !rx.is_empty());
    }
}

/// Performs the writes of `batch` (emptied) on `conn`; whether they were
/// all written (a failed shared write is retried for each item alone, off
/// the writer).
async fn write<W: Write>(
    conn: &mut PgConnection,
    db: &PgPool,
    metrics: &Arc<Metrics>,
    batch: &mut Vec<Handed<W>>,
) -> bool {
    if batch.len() == 1 {
        let Some((item, reply, span)) = batch.pop() else {
            return true;
        };
        let out = W::one(conn, &item).instrument(span).await;
        let ok = out.is_ok();
        let _ = reply.send(out);
        metrics.jobs_written(W::NAME, 1);
        return ok;
    }
    let shared = tracing::info_span!("group.write", write = W::NAME, items = batch.len());
    let mut items = Vec::with_capacity(batch.len());
    let mut replies = Vec::with_capacity(batch.len());
    for (item, reply, span) in batch.drain(..) {
        shared.follows_from(&span);
        items.push(item);
        replies.push((reply, span));
    }
    match W::many(conn, &items).instrument(shared).await {
        Ok(outs) => {
            metrics.jobs_written(W::NAME, items.len());
            for ((reply, _), out) in replies.into_iter().zip(outs) {
                let _ = reply.send(Ok(out));
            }
            true
        }
        Err(e) => {
            tracing::warn!(items = items.len(), error = %e, "a shared write failed; writing each alone");
            let handed = items
                .into_iter()
                .zip(replies)
                .map(|(item, (reply, span))| (item, reply, span))
                .collect();
            alone::<W>(db, metrics, handed);
            false
        }
    }
}

/// The error of a connection the pool could not give, for each of the
/// writes it fails (an error cannot be cloned): the service is unavailable.
fn unavailable(e: &sqlx::Error) -> sqlx::Error {
    match e {
        sqlx::Error::PoolTimedOut => sqlx::Error::PoolTimedOut,
        sqlx::Error::PoolClosed => sqlx::Error::PoolClosed,
        e => sqlx::Error::Io(std::io::Error::other(e.to_string())),
    }
}

/// Performs each write on its own, in order, off the writer.
fn alone<W: Write>(db: &PgPool, metrics: &Arc<Metrics>, handed: Vec<Handed<W>>) {
    let db = db.clone();
    let metrics = Arc::clone(metrics);
    tokio::spawn(async move {
        for (item, reply, span) in handed {
            let out = async {
                let mut conn = db.acquire().await?;
                W::one(&mut conn, &item).await
            }
            .instrument(span)
            .await;
            let _ = reply.send(out);
            metrics.jobs_written(W::NAME, 1);
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::postgres::PgPoolOptions;

    use super::*;

    /// Asks the database which session it is, after a pause of `.0` ms.
    struct Pid;

    impl Write for Pid {
        type Item = u32;
        type Out = i32;
        const NAME: &'static str = "pid";

        async fn one(conn: &mut PgConnection, ms: &u32) -> Result<i32, hearth_store::Error> {
            let pid =
                sqlx::query_scalar("select pg_backend_pid() from pg_sleep($1::float8 / 1000)")
                    .bind(f64::from(*ms))
                    .fetch_one(conn)
                    .await?;
            Ok(pid)
        }

        async fn many(
            conn: &mut PgConnection,
            items: &[u32],
        ) -> Result<Vec<i32>, hearth_store::Error> {
            let pid = Self::one(conn, items.iter().max().unwrap_or(&0)).await?;
            Ok(vec![pid; items.len()])
        }
    }

    /// A busy writer keeps its connection between writes, yet hands it back
    /// often enough that others get it, and at once when it goes idle.
    #[sqlx::test(migrations = "../../migrations")]
    async fn a_busy_writer_keeps_its_connection_but_shares_it(pool: PgPool) {
        let one = PgPoolOptions::new()
            .max_connections(1)
            .connect_with((*pool.connect_options()).clone())
            .await
            .unwrap();
        let group = Arc::new(Group::<Pid>::start(one.clone(), Arc::default()));
        // Writes handed over without pause keep the writer busy.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flood = tokio::spawn({
            let (group, stop) = (Arc::clone(&group), Arc::clone(&stop));
            async move {
                let mut writes = tokio::task::JoinSet::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for _ in 0..16 {
                        let group = Arc::clone(&group);
                        writes.spawn(async move { group.write(3).await.unwrap() });
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                writes.join_all().await
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        for _ in 0..3 {
            let mut conn = tokio::time::timeout(Duration::from_secs(5), one.acquire())
                .await
                .expect("a busy writer hands its connection back now and then")
                .unwrap();
            sqlx::query("select 1").execute(&mut *conn).await.unwrap();
            drop(conn);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let pids = flood.await.unwrap();
        assert!(pids.len() > 10, "{} writes", pids.len());
        // Idle, the writer holds nothing (the pool's check of a returned
        // connection takes a moment).
        let mut idle = false;
        for _ in 0..100 {
            if one.num_idle() == 1 {
                idle = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(idle, "an idle writer keeps its connection");
        one.close().await;
    }
}
