//! The writes every job makes on its way, through [`Group`]s: its assignment
//! and its start (relaxed), and its end (durable). Concurrent ones share a
//! statement and a commit: one per leadership epoch (and, for ends, final
//! state).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use hearth_store::job::{Assign, Finish, JobRow, Start};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::group::{Group, Write};

/// The end of one job, as the leader of `epoch` stores it.
#[derive(Debug)]
pub(super) struct End {
    pub epoch: i64,
    pub job_id: Uuid,
    /// Shared with the job's task, which may try again with it.
    pub finish: Arc<Finish>,
}

/// Writes [`End`]s: the final row, or `None` if the job could not take
/// this end (see [`hearth_store::job::finish`]).
#[derive(Debug)]
pub(super) struct EndWrite;

pub(super) type Ends = Group<EndWrite>;

type Stored = Result<Option<JobRow>, hearth_store::Error>;

impl Write for EndWrite {
    type Item = End;
    type Out = Option<JobRow>;
    const NAME: &'static str = "end";

    async fn one(conn: &mut PgConnection, end: &End) -> Stored {
        store_one(conn, end.epoch, end.job_id, &end.finish).await
    }

    async fn many(
        conn: &mut PgConnection,
        ends: &[End],
    ) -> Result<Vec<Option<JobRow>>, hearth_store::Error> {
        let mut rows = store_shared(conn, ends).await?;
        Ok(ends.iter().map(|e| rows.remove(&e.job_id)).collect())
    }
}

/// Stores the end of a job, durably: with others through `ends`, or, with
/// its full logs, in a transaction of its own.
pub(super) async fn store_end(
    ends: &Ends,
    db: &PgPool,
    epoch: i64,
    job_id: Uuid,
    finish: &Arc<Finish>,
) -> Stored {
    if finish.full_logs.is_some() {
        return store_one(&mut *db.acquire().await?, epoch, job_id, finish).await;
    }
    ends.write(End {
        epoch,
        job_id,
        finish: Arc::clone(finish),
    })
    .await
}

/// One job's assignment by the leader of `epoch`.
#[derive(Debug)]
pub(super) struct Assignment {
    pub epoch: i64,
    pub assign: Assign,
}

/// Writes [`Assignment`]s: the attempt the assignment starts, or `None` if
/// the job was no longer queued or was cancelled (see
/// [`hearth_store::job::assign_attempt`]).
#[derive(Debug)]
pub(super) struct AssignWrite;

pub(super) type Assignments = Group<AssignWrite>;

impl Write for AssignWrite {
    type Item = Assignment;
    type Out = Option<i32>;
    const NAME: &'static str = "assignment";

    async fn one(
        conn: &mut PgConnection,
        a: &Assignment,
    ) -> Result<Option<i32>, hearth_store::Error> {
        let Assign {
            job_id,
            source,
            pods,
            queued_ms,
        } = &a.assign;
        hearth_store::job::assign_attempt(conn, a.epoch, *job_id, *source, pods, *queued_ms).await
    }

    async fn many(
        conn: &mut PgConnection,
        items: &[Assignment],
    ) -> Result<Vec<Option<i32>>, hearth_store::Error> {
        let write = async |conn: &mut PgConnection, epoch, group: &[&Assign]| {
            hearth_store::job::assign_many(conn, epoch, group).await
        };
        let mut attempts: HashMap<Uuid, i32> =
            per_epoch(conn, items, |a| a.epoch, |a| &a.assign, write)
                .await?
                .into_iter()
                .collect();
        Ok(items
            .iter()
            .map(|a| attempts.remove(&a.assign.job_id))
            .collect())
    }
}

/// One job's start (`assigned -> running`) by the leader of `epoch`.
#[derive(Debug)]
pub(super) struct Started {
    pub epoch: i64,
    pub start: Start,
}

/// Writes [`Started`]s: whether the job started (`false`: it was no longer
/// assigned, or the epoch is not current; see [`hearth_store::job::start`]).
#[derive(Debug)]
pub(super) struct StartWrite;

pub(super) type Starts = Group<StartWrite>;

impl Write for StartWrite {
    type Item = Started;
    type Out = bool;
    const NAME: &'static str = "start";

    async fn one(conn: &mut PgConnection, s: &Started) -> Result<bool, hearth_store::Error> {
        let Start {
            job_id,
            acquire_ms,
            bind_ms,
        } = s.start;
        hearth_store::job::start(conn, s.epoch, job_id, acquire_ms, bind_ms).await
    }

    async fn many(
        conn: &mut PgConnection,
        items: &[Started],
    ) -> Result<Vec<bool>, hearth_store::Error> {
        let write = async |conn: &mut PgConnection, epoch, group: &[&Start]| {
            hearth_store::job::start_many(conn, epoch, group).await
        };
        let started: HashSet<Uuid> = per_epoch(conn, items, |s| s.epoch, |s| &s.start, write)
            .await?
            .into_iter()
            .collect();
        Ok(items
            .iter()
            .map(|s| started.contains(&s.start.job_id))
            .collect())
    }
}

/// Stores `ends` in one statement per leadership epoch and final state (in
/// one transaction when there are several); the rows stored, by job.
async fn store_shared(
    conn: &mut PgConnection,
    ends: &[End],
) -> Result<HashMap<Uuid, JobRow>, hearth_store::Error> {
    let groups = by_epoch(ends, |e| e.epoch, |e| (e.job_id, &*e.finish));
    let one_state = ends.iter().all(|e| e.finish.state == ends[0].finish.state);
    let write = async |conn: &mut PgConnection, epoch, group: &[(Uuid, &Finish)]| {
        hearth_store::job::finish_many(conn, epoch, group).await
    };
    let rows = in_one_commit(conn, &groups, groups.len() == 1 && one_state, write).await?;
    Ok(rows.into_iter().map(|r| (r.job_id, r)).collect())
}

/// `items` grouped by leadership epoch (what `epoch` says), each as `value`
/// makes it, in the order of their first items.
fn by_epoch<'a, T, V>(
    items: &'a [T],
    epoch: impl Fn(&T) -> i64,
    value: impl Fn(&'a T) -> V,
) -> Vec<(i64, Vec<V>)> {
    let mut groups: Vec<(i64, Vec<V>)> = Vec::new();
    for item in items {
        let e = epoch(item);
        match groups.iter_mut().find(|(g, _)| *g == e) {
            Some((_, group)) => group.push(value(item)),
            None => groups.push((e, vec![value(item)])),
        }
    }
    groups
}

/// Runs `write` for `items` on one connection: one statement per leadership
/// epoch (what `epoch` says), each on its items' values (what `value`
/// makes), all in one commit. Their outcomes, epoch by epoch.
async fn per_epoch<'a, T, V, R>(
    conn: &mut PgConnection,
    items: &'a [T],
    epoch: impl Fn(&T) -> i64,
    value: impl Fn(&'a T) -> V,
    write: impl AsyncFn(&mut PgConnection, i64, &[V]) -> Result<Vec<R>, hearth_store::Error>,
) -> Result<Vec<R>, hearth_store::Error> {
    let groups = by_epoch(items, epoch, value);
    in_one_commit(conn, &groups, groups.len() == 1, write).await
}

/// Runs `write` for each epoch's group on one connection: on its own when
/// that is `one_statement`, else in one transaction, so that all or none of
/// them are written.
async fn in_one_commit<V, R>(
    conn: &mut PgConnection,
    groups: &[(i64, Vec<V>)],
    one_statement: bool,
    write: impl AsyncFn(&mut PgConnection, i64, &[V]) -> Result<Vec<R>, hearth_store::Error>,
) -> Result<Vec<R>, hearth_store::Error> {
    if let ([(epoch, group)], true) = (groups, one_statement) {
        return write(conn, *epoch, group).await;
    }
    let mut tx = sqlx::Connection::begin(conn).await?;
    let mut out = Vec::new();
    for (epoch, group) in groups {
        out.extend(write(&mut tx, *epoch, group).await?);
    }
    tx.commit().await?;
    Ok(out)
}

/// Stores the end of one job (with its full logs in the same transaction).
async fn store_one(conn: &mut PgConnection, epoch: i64, job_id: Uuid, finish: &Finish) -> Stored {
    if finish.full_logs.is_none() {
        return hearth_store::job::finish(conn, epoch, job_id, finish).await;
    }
    let mut tx = sqlx::Connection::begin(conn).await?;
    let row = hearth_store::job::finish(&mut tx, epoch, job_id, finish).await?;
    tx.commit().await?;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::metrics::Metrics;
    use hearth_core::{Kind, Source, State};
    use hearth_store::job::NewJob;

    /// `n` queued jobs of a new tenant.
    async fn queued_jobs(db: &PgPool, n: usize) -> Vec<Uuid> {
        let tenant = hearth_store::tenant::create(db, "acme").await.unwrap();
        let spec = serde_json::json!({});
        let mut conn = db.acquire().await.unwrap();
        let mut ids = Vec::new();
        for _ in 0..n {
            let job = NewJob {
                job_id: Uuid::now_v7(),
                tenant_id: tenant.tenant_id,
                kind: Kind::ToolCall,
                profile: "cpu-small".to_owned(),
                caller: "a".to_owned(),
                priority: 0,
                spec: spec.clone(),
                idempotency_key: None,
                request_hash: None,
                traceparent: None,
            };
            hearth_store::job::insert(&mut conn, &job).await.unwrap();
            ids.push(job.job_id);
        }
        ids
    }

    fn success(stdout: &str) -> Finish {
        Finish {
            exit_code: Some(0),
            stdout: stdout.to_owned(),
            run_ms: Some(1.0),
            ..Finish::new(State::Succeeded)
        }
    }

    /// Assigns `ids` all at once (by the leader of epoch 0) through `group`.
    async fn assign_all(group: &Assignments, ids: &[Uuid]) -> Vec<Option<i32>> {
        let assign = |id: &Uuid| {
            group.write(Assignment {
                epoch: 0,
                assign: Assign {
                    job_id: *id,
                    source: Source::Warm,
                    pods: vec![format!("pod-{id}")],
                    queued_ms: 1.0,
                },
            })
        };
        futures::future::join_all(ids.iter().map(assign))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect()
    }

    #[sqlx::test(migrations = "../../migrations")]
    async fn concurrent_starts_share_a_statement_and_start_only_assigned_jobs(db: PgPool) {
        let ids = queued_jobs(&db, 12).await;
        let metrics = Arc::new(Metrics::default());
        let assignments = Assignments::start(db.clone(), Arc::clone(&metrics));
        assert_eq!(
            assign_all(&assignments, &ids[..10]).await,
            vec![Some(1); 10]
        );
        let starts = Starts::start(db.clone(), Arc::clone(&metrics));
        let start = |id: Uuid, epoch: i64| {
            starts.write(Started {
                epoch,
                start: Start {
                    job_id: id,
                    acquire_ms: 1.5,
                    bind_ms: 2.5,
                },
            })
        };
        // Handed over together: eight assigned jobs of the current leader,
        // one of a stale leader (epoch 7), and the two jobs still queued.
        let handed =
            ids[..8]
                .iter()
                .map(|id| (*id, 0))
                .chain([(ids[8], 7), (ids[10], 0), (ids[11], 0)]);
        let started: Vec<bool> = futures::future::join_all(handed.map(|(id, e)| start(id, e)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let mut expected = vec![true; 8];
        expected.extend([false; 3]);
        assert_eq!(started, expected);
        for (i, id) in ids.iter().enumerate() {
            let (state, acquire, bind, started_at): (
                State,
                Option<f64>,
                Option<f64>,
                Option<time::OffsetDateTime>,
            ) = sqlx::query_as(
                "select state, acquire_ms, bind_ms, started_at from job where job_id = $1",
            )
            .bind(id)
            .fetch_one(&db)
            .await
            .unwrap();
            let want = match i {
                0..8 => State::Running,
                8 | 9 => State::Assigned,
                _ => State::Queued,
            };
            assert_eq!(state, want, "job {i}");
            assert_eq!(
                (acquire, bind, started_at.is_some()),
                if want == State::Running {
                    (Some(1.5), Some(2.5), true)
                } else {
                    (None, None, false)
                },
                "job {i}"
            );
        }
        // They were handed over at once: all shared writes, or the first
        // went alone and the rest, waiting for it, shared the next.
        let (alone, shared) = (
            metrics.jobs_written_so_far("start", "alone"),
            metrics.jobs_written_so_far("start", "shared"),
        );
        assert_eq!(alone + shared, 11);
        assert!(shared >= 2, "{alone} alone, {shared} shared");
        // A job starts once: again, alone, it is refused.
        assert!(!start(ids[0], 0).await.unwrap());
        // And a lone start of an assigned job goes through.
        assert!(start(ids[9], 0).await.unwrap());
    }

    #[sqlx::test(migrations = "../../migrations")]
    async fn concurrent_writes_share_a_statement_and_a_refused_end_fails_alone(db: PgPool) {
        let ids = queued_jobs(&db, 26).await;
        // Assignments handed over together are written together, once.
        let metrics = Arc::new(Metrics::default());
        let shared = |write| metrics.jobs_written_so_far(write, "shared");
        let assignments = Assignments::start(db.clone(), Arc::clone(&metrics));
        assert_eq!(assign_all(&assignments, &ids).await, vec![Some(1); 26]);
        assert_eq!(assign_all(&assignments, &ids[..3]).await, vec![None; 3]);
        assert_eq!(shared("assignment"), 29);
        let ends = Ends::start(db.clone(), Arc::clone(&metrics));
        let store = |id: Uuid, finish: Finish| {
            let (ends, db) = (&ends, &db);
            async move { store_end(ends, db, 0, id, &Arc::new(finish)).await }
        };
        // Ends handed over together are written together...
        let first = futures::future::join_all(
            ids[..20]
                .iter()
                .map(|id| store(*id, success(&id.to_string()))),
        )
        .await;
        for (id, stored) in ids.iter().zip(first) {
            let row = stored.unwrap().unwrap();
            assert_eq!((row.job_id, row.state), (*id, State::Succeeded));
            assert_eq!(row.stdout, id.to_string());
            assert_eq!(row.pods, [format!("pod-{id}")]);
        }
        assert_eq!(shared("end"), 20);
        // ...and an end the database refuses (text with a NUL byte) fails
        // only its own job.
        let second = futures::future::join_all(
            ids[20..]
                .iter()
                .enumerate()
                .map(|(i, id)| store(*id, success(if i == 2 { "nul \0" } else { "fine" }))),
        )
        .await;
        for (i, stored) in second.into_iter().enumerate() {
            match stored {
                Ok(Some(row)) if i != 2 => assert_eq!(row.state, State::Succeeded),
                Err(_) if i == 2 => {}
                other => panic!("end {i}: {other:?}"),
            }
        }
        assert_eq!(shared("end"), 20);
        // An end that arrives alone is written alone.
        let alone = Finish::failed(
            State::Failed,
            hearth_core::ErrorCode::ResultUnstorable,
            "the job's result could not be stored",
        );
        let row = store(ids[22], alone.clone()).await.unwrap().unwrap();
        assert_eq!(row.state, State::Failed);
        assert!(store(ids[22], alone).await.unwrap().is_none());
        assert_eq!(shared("end"), 20);
        // The refused batch's six, each retried alone, and these two.
        assert_eq!(metrics.jobs_written_so_far("end", "alone"), 8);
    }
}
