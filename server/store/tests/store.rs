//! Store functions against a fresh, migrated database per test.

use hearth_core::{ErrorCode, Kind, Source, State};
use hearth_store::job::{self, Cancel, Filter, Finish, Inserted, NewJob};
use hearth_store::{Error, leadership, tenant};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

/// Drops the test's database if the test panics. `#[sqlx::test]` drops it
/// after a passing test only and keeps a failed test's (until that test runs
/// again); this guard makes a failed run leave nothing behind either.
struct DropOnPanic(PgPool);

impl Drop for DropOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let options = self.0.connect_options();
        let Some(name) = options.get_database().map(str::to_owned) else {
            return;
        };
        let admin = (*options).clone().database("postgres");
        // A thread and runtime of its own: the test's runtime is unwinding.
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(async {
                    use sqlx::{ConnectOptions, Connection};
                    let mut conn = admin.connect().await?;
                    // Identifiers cannot be bound as parameters.
                    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
                    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                        "drop database if exists {quoted} with (force)"
                    )))
                    .execute(&mut conn)
                    .await?;
                    conn.close().await
                })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop the failed test's database: {dropped:?}");
        }
    }
}

fn new_job(
    tenant_id: Uuid,
    spec: &serde_json::Value,
    key: Option<&str>,
    hash: Option<&str>,
) -> NewJob {
    NewJob {
        job_id: Uuid::now_v7(),
        tenant_id,
        kind: Kind::ToolCall,
        profile: "cpu-small".to_owned(),
        caller: "agent-1".to_owned(),
        priority: 0,
        spec: spec.clone(),
        idempotency_key: key.map(str::to_owned),
        request_hash: hash.map(str::to_owned),
        traceparent: None,
    }
}

/// Inserts one job of `tenant_id` per entry of `assigned`, and assigns
/// those marked (as the leader of epoch 0); their ids.
async fn jobs_of(db: &PgPool, tenant_id: Uuid, assigned: &[bool]) -> Vec<Uuid> {
    let spec = json!({});
    let mut conn = db.acquire().await.unwrap();
    let mut ids = Vec::new();
    for &assign in assigned {
        let job = new_job(tenant_id, &spec, None, None);
        ids.push(job.job_id);
        job::insert(&mut conn, &job).await.unwrap();
        if assign {
            assert!(
                job::assign(db, 0, job.job_id, Source::Warm, &["p".into()], 1.0)
                    .await
                    .unwrap()
            );
        }
    }
    ids
}

#[sqlx::test(migrations = "../../migrations")]
async fn tenant_names_are_unique_and_keys_revocable(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    assert!(matches!(
        tenant::create(&db, "acme").await,
        Err(Error::Conflict("tenant_name_unique"))
    ));
    let k = tenant::create_key(&db, t.tenant_id, "default", "abcdefabcdef", "hash", None)
        .await
        .unwrap();
    assert_eq!((k.expires_at, k.last_used_at), (None, None));
    // A use is recorded once, and again only after a minute.
    tenant::touch_key(&db, k.api_key_id).await.unwrap();
    let used = tenant::find_key(&db, "abcdefabcdef")
        .await
        .unwrap()
        .unwrap();
    let first = used.last_used_at.expect("recorded");
    tenant::touch_key(&db, k.api_key_id).await.unwrap();
    let again = tenant::find_key(&db, "abcdefabcdef")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.last_used_at, Some(first));
    assert_eq!(
        tenant::find_key(&db, "abcdefabcdef")
            .await
            .unwrap()
            .unwrap()
            .tenant_id,
        t.tenant_id
    );
    let other = tenant::create(&db, "other").await.unwrap();
    // Another tenant cannot revoke it.
    assert!(
        tenant::revoke_key(&db, other.tenant_id, k.api_key_id)
            .await
            .unwrap()
            .is_none()
    );
    let revoked = tenant::revoke_key(&db, t.tenant_id, k.api_key_id)
        .await
        .unwrap()
        .unwrap();
    assert!(revoked.revoked_at.is_some());
    assert!(tenant::delete(&db, t.tenant_id).await.unwrap());
    assert!(
        tenant::find_key(&db, "abcdefabcdef")
            .await
            .unwrap()
            .is_none(),
        "keys go with the tenant"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn idempotent_insert(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let spec = json!({"x": 1});
    let mut conn = db.acquire().await.unwrap();
    let Inserted::New(first) = job::insert(
        &mut conn,
        &new_job(t.tenant_id, &spec, Some("k"), Some("h1")),
    )
    .await
    .unwrap() else {
        panic!("first insert is new");
    };
    let again = job::insert(
        &mut conn,
        &new_job(t.tenant_id, &spec, Some("k"), Some("h1")),
    )
    .await
    .unwrap();
    assert_eq!(again, Inserted::Existing(first.clone()));
    assert!(matches!(
        job::insert(
            &mut conn,
            &new_job(t.tenant_id, &spec, Some("k"), Some("h2"))
        )
        .await,
        Err(Error::IdempotencyMismatch)
    ));
    // The same key in another tenant is another job.
    let u = tenant::create(&db, "other").await.unwrap();
    assert!(matches!(
        job::insert(
            &mut conn,
            &new_job(u.tenant_id, &spec, Some("k"), Some("h2"))
        )
        .await
        .unwrap(),
        Inserted::New(_)
    ));
}

/// Many jobs in one statement come out as one insert after another would
/// have them: new, a key's repeat (within the batch or from before) the
/// job that holds it, a key reused for another request a mismatch of its
/// own item only; keys are per tenant.
#[sqlx::test(migrations = "../../migrations")]
async fn inserts_many_as_one_by_one(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let u = tenant::create(&db, "other").await.unwrap();
    let spec = json!({"x": 1});
    let mut conn = db.acquire().await.unwrap();
    let Inserted::New(before) = job::insert(
        &mut conn,
        &new_job(t.tenant_id, &spec, Some("old"), Some("h")),
    )
    .await
    .unwrap() else {
        panic!("a new job");
    };
    let jobs = vec![
        new_job(t.tenant_id, &spec, None, None),
        new_job(t.tenant_id, &spec, Some("k"), Some("h1")),
        new_job(t.tenant_id, &spec, Some("k"), Some("h1")),
        new_job(t.tenant_id, &spec, Some("k"), Some("h2")),
        new_job(t.tenant_id, &spec, Some("old"), Some("h")),
        new_job(t.tenant_id, &spec, Some("old"), Some("other")),
        new_job(u.tenant_id, &spec, Some("k"), Some("h2")),
        new_job(t.tenant_id, &spec, None, None),
    ];
    let out = job::insert_many(&mut conn, &jobs).await.unwrap();
    assert_eq!(out.len(), jobs.len());
    let new_row = |i: usize| match &out[i] {
        Ok(Inserted::New(row)) => {
            assert_eq!(row.job_id, jobs[i].job_id, "item {i} inserted as itself");
            assert_eq!(row.tenant_id, jobs[i].tenant_id);
            assert_eq!(row.idempotency_key, jobs[i].idempotency_key);
            assert_eq!(row.request_hash, jobs[i].request_hash);
            assert_eq!((row.state, row.kind), (State::Queued, Kind::ToolCall));
            assert_eq!(
                (row.profile.as_str(), row.caller.as_str()),
                ("cpu-small", "agent-1")
            );
            assert_eq!(row.spec, spec);
            row.clone()
        }
        other => panic!("item {i}: {other:?}"),
    };
    for i in [0, 6, 7] {
        new_row(i);
    }
    let first = new_row(1);
    assert_eq!(out[2].as_ref().unwrap(), &Inserted::Existing(first));
    assert!(matches!(out[3], Err(Error::IdempotencyMismatch)));
    assert_eq!(out[4].as_ref().unwrap(), &Inserted::Existing(before));
    assert!(matches!(out[5], Err(Error::IdempotencyMismatch)));
    // Each job once: the ones kept out were not written.
    let stored: i64 = sqlx::query_scalar("select count(*) from job")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(stored, 1 + 4);
    // And each reads back as inserted.
    for i in [0, 1, 6, 7] {
        let row = job::get(&db, jobs[i].tenant_id, jobs[i].job_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            &row,
            match &out[i] {
                Ok(Inserted::New(r)) => r,
                _ => unreachable!(),
            }
        );
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_trace_context_is_stored_with_the_job(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let spec = json!({"x": 1});
    let mut conn = db.acquire().await.unwrap();
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let Inserted::New(row) = job::insert(
        &mut conn,
        &NewJob {
            traceparent: Some(tp.to_owned()),
            ..new_job(t.tenant_id, &spec, None, None)
        },
    )
    .await
    .unwrap() else {
        panic!("a new job");
    };
    assert_eq!(row.traceparent.as_deref(), Some(tp));
    let read = job::get(&db, t.tenant_id, row.job_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.traceparent.as_deref(), Some(tp));
    let plain = job::insert(&mut conn, &new_job(t.tenant_id, &spec, None, None))
        .await
        .unwrap();
    assert!(matches!(plain, Inserted::New(r) if r.traceparent.is_none()));
    // Only a version-00 context, as the service writes it.
    let garbage = job::insert(
        &mut conn,
        &NewJob {
            traceparent: Some("not a traceparent".to_owned()),
            ..new_job(t.tenant_id, &spec, None, None)
        },
    )
    .await;
    assert!(garbage.is_err());
}

#[sqlx::test(migrations = "../../migrations")]
async fn lifecycle_is_compare_and_set(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let spec = json!({});
    let mut conn = db.acquire().await.unwrap();
    let Inserted::New(row) = job::insert(&mut conn, &new_job(t.tenant_id, &spec, None, None))
        .await
        .unwrap()
    else {
        panic!()
    };
    let id = row.job_id;
    assert!(
        !job::start(&db, 0, id, 1.0, 1.0).await.unwrap(),
        "cannot run before assigned"
    );
    assert!(
        job::assign(&db, 0, id, Source::Cold, &["pod-1".into()], 2.0)
            .await
            .unwrap()
    );
    assert!(
        !job::assign(&db, 0, id, Source::Cold, &["pod-2".into()], 2.0)
            .await
            .unwrap(),
        "assigned once"
    );
    assert!(job::start(&db, 0, id, 3.0, 4.0).await.unwrap());
    // Lost pod: back to the queue while attempts remain.
    assert!(
        !job::requeue(&db, 0, id, 1).await.unwrap(),
        "no attempts left at max 1"
    );
    assert!(job::requeue(&db, 0, id, 2).await.unwrap());
    assert!(
        job::assign(&db, 0, id, Source::Warm, &["pod-3".into()], 2.0)
            .await
            .unwrap()
    );
    let fin = Finish {
        exit_code: Some(0),
        output: Some(json!({"ok": true})),
        stdout: "head".into(),
        full_logs: Some(("head and more".into(), String::new())),
        ..Finish::new(State::Succeeded)
    };
    let done = job::finish(&mut conn, 0, id, &fin).await.unwrap().unwrap();
    assert_eq!((done.state, done.attempts), (State::Succeeded, 2));
    assert!(done.total_ms.is_some());
    assert!(
        job::finish(&mut conn, 0, id, &fin).await.unwrap().is_none(),
        "final states are final"
    );
    assert_eq!(
        job::logs(&mut conn, t.tenant_id, id)
            .await
            .unwrap()
            .unwrap()
            .0,
        "head and more"
    );
    assert!(
        job::logs(&mut conn, Uuid::now_v7(), id)
            .await
            .unwrap()
            .is_none(),
        "other tenant"
    );
    assert_eq!(
        job::request_cancel(&mut conn, t.tenant_id, id)
            .await
            .unwrap(),
        Cancel::Finished(done)
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn cancel_and_list(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let spec = json!({});
    let mut conn = db.acquire().await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let Inserted::New(r) = job::insert(&mut conn, &new_job(t.tenant_id, &spec, None, None))
            .await
            .unwrap()
        else {
            panic!()
        };
        ids.push(r.job_id);
    }
    // Queued: cancelled at once, and can no longer be assigned.
    assert!(matches!(
        job::request_cancel(&mut conn, t.tenant_id, ids[0])
            .await
            .unwrap(),
        Cancel::Cancelled(_)
    ));
    assert!(
        !job::assign(&db, 0, ids[0], Source::Cold, &[], 0.0)
            .await
            .unwrap()
    );
    // Running: marked for the scheduler, and no longer re-queued.
    assert!(
        job::assign(&db, 0, ids[1], Source::Cold, &[], 0.0)
            .await
            .unwrap()
    );
    assert!(matches!(
        job::request_cancel(&mut conn, t.tenant_id, ids[1])
            .await
            .unwrap(),
        Cancel::Requested(_)
    ));
    assert!(!job::requeue(&db, 0, ids[1], 5).await.unwrap());
    assert_eq!(
        job::request_cancel(&mut conn, Uuid::now_v7(), ids[2])
            .await
            .unwrap(),
        Cancel::NotFound
    );

    let all = job::list(
        &db,
        t.tenant_id,
        &Filter {
            limit: 10,
            ..Filter::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        all.iter().map(|r| r.job_id).collect::<Vec<_>>(),
        [ids[2], ids[1], ids[0]]
    );
    let page = job::list(
        &db,
        t.tenant_id,
        &Filter {
            limit: 10,
            before: Some(ids[1]),
            ..Filter::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(page.len(), 1);
    let cancelled = job::list(
        &db,
        t.tenant_id,
        &Filter {
            limit: 10,
            state: Some(State::Cancelled),
            ..Filter::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(cancelled.len(), 1);
    let unfinished = job::unfinished(&db).await.unwrap();
    assert!(unfinished.unreadable.is_empty());
    assert_eq!(
        unfinished.rows.iter().map(|r| r.job_id).collect::<Vec<_>>(),
        [ids[1], ids[2]]
    );
    assert_eq!(job::queued_after(&db, ids[1]).await.unwrap().len(), 1);
}

/// A row the code cannot decode (here a number beyond a double's range,
/// which only a hand-written row can hold) is reported apart, and the
/// scans still return every other row, in their order.
#[sqlx::test(migrations = "../../migrations")]
async fn a_row_that_does_not_decode_hides_no_other(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let ids = jobs_of(&db, t.tenant_id, &[false, true, false, false]).await;
    sqlx::query("update job set spec = '{\"input\": 1e400}', priority = 5 where job_id = $1")
        .bind(ids[2])
        .execute(&db)
        .await
        .unwrap();
    sqlx::query("update job set priority = 1 where job_id = $1")
        .bind(ids[3])
        .execute(&db)
        .await
        .unwrap();

    let read = job::unfinished(&db).await.unwrap();
    let rows: Vec<Uuid> = read.rows.iter().map(|r| r.job_id).collect();
    assert_eq!(rows, [ids[3], ids[0], ids[1]]);
    let bad: Vec<Uuid> = read.unreadable.iter().map(|(id, _)| *id).collect();
    assert_eq!(bad, [ids[2]]);

    let queued = job::queued_by_ids(&db, &ids).await.unwrap();
    let rows: Vec<Uuid> = queued.rows.iter().map(|r| r.job_id).collect();
    assert_eq!(rows, [ids[3], ids[0]], "the assigned job is not queued");
    let bad: Vec<Uuid> = queued.unreadable.iter().map(|(id, _)| *id).collect();
    assert_eq!(bad, [ids[2]]);

    // Nothing unreadable: one query, the same answer.
    let queued = job::queued_by_ids(&db, &[ids[0], ids[3]]).await.unwrap();
    assert!(queued.unreadable.is_empty());
    assert_eq!(queued.rows.len(), 2);
}

/// A short job's start is written with its end, `started_ms_ago` before it
/// by the database's clock; a start already written is kept.
#[sqlx::test(migrations = "../../migrations")]
async fn a_start_not_written_alone_is_written_with_the_end(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let mut conn = db.acquire().await.unwrap();
    let ids = jobs_of(&db, t.tenant_id, &[true, true]).await;
    assert!(job::start(&db, 0, ids[1], 1.0, 1.0).await.unwrap());
    let written = job::get(&db, t.tenant_id, ids[1]).await.unwrap().unwrap();
    let fin = Finish {
        exit_code: Some(0),
        run_ms: Some(40.0),
        started_ms_ago: Some(60_000.0),
        ..Finish::new(State::Succeeded)
    };
    let folded = job::finish(&mut conn, 0, ids[0], &fin)
        .await
        .unwrap()
        .unwrap();
    let (started, finished) = (folded.started_at.unwrap(), folded.finished_at.unwrap());
    assert_eq!(
        (finished - started).whole_seconds(),
        60,
        "{started} {finished}"
    );
    let kept = job::finish(&mut conn, 0, ids[1], &fin)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.started_at, written.started_at);
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_store_moves_jobs_only_as_the_lifecycle_allows(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let spec = json!({});
    let mut conn = db.acquire().await.unwrap();
    let queued = || {
        let job = new_job(t.tenant_id, &spec, None, None);
        let id = job.job_id;
        (job, id)
    };
    let (a, a_id) = queued();
    job::insert(&mut conn, &a).await.unwrap();
    // A queued job cannot succeed or time out without having run...
    let ok = Finish {
        exit_code: Some(0),
        ..Finish::new(State::Succeeded)
    };
    assert!(
        job::finish(&mut conn, 0, a_id, &ok)
            .await
            .unwrap()
            .is_none()
    );
    let late = Finish::failed(State::TimedOut, ErrorCode::TimedOut, "late");
    assert!(
        job::finish(&mut conn, 0, a_id, &late)
            .await
            .unwrap()
            .is_none()
    );
    let row = job::get(&db, t.tenant_id, a_id).await.unwrap().unwrap();
    assert_eq!((row.state, row.error_code), (State::Queued, None));
    // ...but may fail before it runs.
    let gone = Finish::failed(State::Failed, ErrorCode::UnknownProfile, "no such profile");
    let row = job::finish(&mut conn, 0, a_id, &gone)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (row.state, row.error_code),
        (State::Failed, Some(ErrorCode::UnknownProfile))
    );

    // Ends that are not ends are refused before they reach the database.
    for bad in [
        Finish::new(State::Running),
        Finish::new(State::Failed),
        Finish::failed(State::Succeeded, ErrorCode::NonzeroExit, "?"),
    ] {
        assert!(matches!(
            job::finish(&mut conn, 0, a_id, &bad).await,
            Err(Error::NotTerminal(..))
        ));
    }

    // Every error code the API documents is one the database takes.
    for &code in ErrorCode::ALL {
        let (j, id) = queued();
        job::insert(&mut conn, &j).await.unwrap();
        assert!(
            job::assign(&db, 0, id, Source::Cold, &[], 0.0)
                .await
                .unwrap()
        );
        let row = job::finish(&mut conn, 0, id, &Finish::failed(State::Failed, code, "x"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.error_code, Some(code));
    }
    // Success carries no code; the database refuses one written behind the
    // store's back, and a failure without one.
    let (j, id) = queued();
    job::insert(&mut conn, &j).await.unwrap();
    assert!(
        job::assign(&db, 0, id, Source::Warm, &[], 0.0)
            .await
            .unwrap()
    );
    for sql in [
        "update job set error_code = 'nonzero_exit' where job_id = $1",
        "update job set state = 'failed' where job_id = $1",
        "update job set state = 'failed', error_code = 'out_of_luck' where job_id = $1",
        "update job set kind = 'mystery' where job_id = $1",
        "update job set source = 'lukewarm' where job_id = $1",
        "update job set traceparent = '00-not-a-trace' where job_id = $1",
        "update job set state = 'paused' where job_id = $1",
    ] {
        let refused = sqlx::query(sql).bind(id).execute(&db).await.unwrap_err();
        assert!(
            refused
                .as_database_error()
                .and_then(|e| e.constraint())
                .is_some(),
            "{sql}: {refused}"
        );
    }

    // A name the code does not know is an error when read, never a default.
    sqlx::query("alter domain job_kind drop constraint job_kind_check")
        .execute(&db)
        .await
        .unwrap();
    sqlx::query("update job set kind = 'mystery' where job_id = $1")
        .bind(id)
        .execute(&db)
        .await
        .unwrap();
    let unknown = job::get(&db, t.tenant_id, id).await.unwrap_err();
    assert!(
        unknown.to_string().contains("\"mystery\" is not a Kind"),
        "{unknown}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn pod_events_are_batched_and_seen_only_by_tenants_the_pod_served(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    use hearth_store::pod_event::{self, NewPodEvent};
    let a = tenant::create(&db, "a").await.unwrap().tenant_id;
    let b = tenant::create(&db, "b").await.unwrap().tenant_id;
    let gone = Uuid::now_v7();
    let ev = |tenant_id: Option<Uuid>, kind: &'static str| NewPodEvent {
        tenant_id,
        pod_id: Some("pod-1".to_owned()),
        profile: "cpu-small".to_owned(),
        at: time::OffsetDateTime::now_utc(),
        kind,
        job_id: None,
        reason: json!({"code": kind}),
    };
    let batch = [
        ev(None, "start"),
        ev(Some(a), "assign"),
        ev(Some(gone), "assign"),
        ev(Some(b), "promote"),
    ];
    // The event of a tenant that no longer exists is dropped, not the batch.
    assert_eq!(pod_event::insert(&db, &batch).await.unwrap(), 3);
    assert!(pod_event::served(&db, a, "pod-1").await.unwrap());
    assert!(
        !pod_event::served(&db, b, "pod-1").await.unwrap(),
        "promoted, never assigned"
    );
    let seen = pod_event::list(&db, a, "pod-1", 0, 10).await.unwrap();
    let kinds: Vec<&str> = seen.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["start", "assign"]);
    let after = pod_event::list(&db, a, "pod-1", seen[0].pod_event_id, 10)
        .await
        .unwrap();
    assert_eq!(after.len(), 1);

    use hearth_store::budget;
    budget::put(&db, a, "gpu", 0.0, 1.0).await.unwrap();
    let row = budget::put(&db, a, "gpu", 0.5, 2.0).await.unwrap();
    assert_eq!((row.floor_gpus, row.ceiling_gpus), (0.5, 2.0));
    assert!(
        budget::put(&db, a, "cpu", 2.0, 1.0).await.is_err(),
        "floor above ceiling"
    );
    assert_eq!(budget::list(&db, a).await.unwrap().len(), 1);
    assert_eq!(budget::all(&db).await.unwrap().len(), 1);
    assert!(budget::list(&db, b).await.unwrap().is_empty());
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_stale_leaders_writes_are_refused(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let spec = json!({});
    let mut conn = db.acquire().await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let Inserted::New(row) = job::insert(&mut conn, &new_job(t.tenant_id, &spec, None, None))
            .await
            .unwrap()
        else {
            panic!()
        };
        ids.push(row.job_id);
    }
    let old = leadership::take_over(&db, "replica-a").await.unwrap();
    assert!(
        job::assign(&db, old, ids[0], Source::Cold, &["p".into()], 1.0)
            .await
            .unwrap()
    );
    assert!(job::start(&db, old, ids[0], 1.0, 1.0).await.unwrap());
    // Another replica takes over while the first still runs the job.
    let new = leadership::take_over(&db, "replica-b").await.unwrap();
    assert_eq!(
        (old + 1, leadership::current(&db).await.unwrap()),
        (new, new)
    );
    let fin = Finish {
        exit_code: Some(0),
        ..Finish::new(State::Succeeded)
    };
    assert!(
        job::finish(&mut conn, old, ids[0], &fin)
            .await
            .unwrap()
            .is_none()
    );
    assert!(!job::requeue(&db, old, ids[0], 5).await.unwrap());
    assert!(
        !job::assign(&db, old, ids[1], Source::Cold, &["p".into()], 1.0)
            .await
            .unwrap()
    );
    let untouched = job::get(&db, t.tenant_id, ids[0]).await.unwrap().unwrap();
    assert_eq!(untouched.state, State::Running);
    // The new leader's writes go through.
    assert!(job::requeue(&db, new, ids[0], 5).await.unwrap());
    assert!(
        job::assign(&db, new, ids[1], Source::Cold, &["p".into()], 1.0)
            .await
            .unwrap()
    );
    let done = job::finish(&mut conn, new, ids[1], &fin)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.state, State::Succeeded);
}

#[sqlx::test(migrations = "../../migrations")]
async fn job_events_are_numbered_per_job_in_order(db: PgPool) {
    use hearth_core::State;
    use hearth_core::agent::Stream;
    use hearth_store::job_event::{self, Body, JobEventRow, NewJobEvent};

    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let other = tenant::create(&db, "other").await.unwrap();
    let epoch = leadership::take_over(&db, "replica-a").await.unwrap();
    let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
    let event = |job_id, epoch, body: &Body| NewJobEvent {
        tenant_id: t.tenant_id,
        job_id,
        epoch,
        body: body.clone(),
    };
    let line = |line: &str| Body::Output {
        stream: Stream::Stdout,
        rank: 0,
        line: line.to_owned(),
    };
    let assigned = Body::State(State::Assigned);
    // Two jobs' events interleaved in one batch: each job counts from 1.
    let firsts = job_event::append(
        &db,
        &[
            event(a, epoch, &assigned),
            event(b, epoch, &assigned),
            event(a, epoch, &line("a1")),
            event(a, epoch, &line("a2")),
            event(b, epoch, &line("b1")),
        ],
    )
    .await
    .unwrap();
    let mut firsts = firsts;
    firsts.sort();
    let mut expected = vec![(a, 1), (b, 1)];
    expected.sort();
    assert_eq!(firsts, expected);
    // The next batch goes on from there.
    let firsts = job_event::append(&db, &[event(a, epoch, &line("a3"))])
        .await
        .unwrap();
    assert_eq!(firsts, vec![(a, 4)]);
    let all = job_event::after(&db, t.tenant_id, a, 0, 100).await.unwrap();
    let row = |seq, body: Body| JobEventRow { seq, body };
    assert_eq!(
        all,
        vec![
            row(1, assigned.clone()),
            row(2, line("a1")),
            row(3, line("a2")),
            row(4, line("a3")),
        ]
    );
    assert_eq!(
        job_event::after(&db, t.tenant_id, a, 2, 1).await.unwrap(),
        vec![row(3, line("a2"))]
    );
    assert_eq!(job_event::last(&db, t.tenant_id, a).await.unwrap(), 4);
    assert_eq!(job_event::last(&db, t.tenant_id, b).await.unwrap(), 2);
    // Only the job's tenant reads them.
    assert!(
        job_event::after(&db, other.tenant_id, a, 0, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(job_event::last(&db, other.tenant_id, a).await.unwrap(), 0);

    // A stale leader's events are not written, and take no number.
    let new = leadership::take_over(&db, "replica-b").await.unwrap();
    let firsts = job_event::append(
        &db,
        &[event(a, epoch, &line("stale")), event(a, new, &line("a4"))],
    )
    .await
    .unwrap();
    assert_eq!(firsts, vec![(a, 5)]);
    assert_eq!(
        job_event::after(&db, t.tenant_id, a, 4, 100).await.unwrap(),
        vec![row(5, line("a4"))]
    );
    // They go with their tenant.
    tenant::delete(&db, t.tenant_id).await.unwrap();
    assert_eq!(job_event::last(&db, t.tenant_id, a).await.unwrap(), 0);
}

/// Ends stored together (the scheduler's group commit) leave each row as
/// its end stored alone would, and refuse what each alone would refuse.
#[sqlx::test(migrations = "../../migrations")]
async fn ends_stored_together_are_stored_as_alone(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let mut conn = db.acquire().await.unwrap();
    let ids = jobs_of(&db, t.tenant_id, &[true, true, false, false, true]).await;
    let ok = Finish {
        exit_code: Some(0),
        output: Some(json!({"answer": [4, 2]})),
        stdout: "out\u{e9}".into(),
        stderr: "err".into(),
        stderr_truncated: true,
        acquire_ms: Some(1.5),
        bind_ms: Some(2.5),
        run_ms: Some(40.0),
        started_ms_ago: Some(60_000.0),
        ..Finish::new(State::Succeeded)
    };
    let failed = Finish {
        run_ms: Some(3.0),
        ..Finish::failed(State::Failed, ErrorCode::UnknownProfile, "no such profile")
    };
    // The last job ends first, alone, as the one it is compared with.
    let alone = job::finish(&mut conn, 0, ids[4], &ok)
        .await
        .unwrap()
        .unwrap();
    // Not while a stale leader asks, nor with what no end may carry.
    assert!(
        job::finish_many(&mut conn, 7, &[(ids[0], &ok)])
            .await
            .unwrap()
            .is_empty()
    );
    let with_logs = Finish {
        full_logs: Some(("a".into(), "b".into())),
        ..ok.clone()
    };
    let running = Finish::new(State::Running);
    for bad in [&with_logs, &running] {
        assert!(matches!(
            job::finish_many(&mut conn, 0, &[(ids[0], &ok), (ids[1], bad)]).await,
            Err(Error::NotTerminal(..))
        ));
    }
    assert_eq!(
        job::get(&db, t.tenant_id, ids[0])
            .await
            .unwrap()
            .unwrap()
            .state,
        State::Assigned,
        "nothing is written when one end is refused"
    );
    // Two final states at once; a queued job cannot succeed but may fail;
    // a finished job stays as it is.
    let rows = job::finish_many(
        &mut conn,
        0,
        &[
            (ids[0], &ok),
            (ids[1], &failed),
            (ids[2], &ok),
            (ids[3], &failed),
            (ids[4], &failed),
        ],
    )
    .await
    .unwrap();
    let mut got: Vec<(Uuid, State)> = rows.iter().map(|r| (r.job_id, r.state)).collect();
    got.sort_by_key(|(id, _)| *id);
    let mut want = vec![
        (ids[0], State::Succeeded),
        (ids[1], State::Failed),
        (ids[3], State::Failed),
    ];
    want.sort_by_key(|(id, _)| *id);
    assert_eq!(got, want);
    let together = rows.iter().find(|r| r.job_id == ids[0]).unwrap();
    let same = |r: &job::JobRow| {
        (
            r.exit_code,
            r.output.clone(),
            r.stdout.clone(),
            r.stderr.clone(),
            (r.stdout_truncated, r.stderr_truncated),
            (r.error_code, r.error_message.clone()),
            (r.acquire_ms, r.bind_ms, r.run_ms),
            r.finished_at
                .zip(r.started_at)
                .map(|(f, s)| (f - s).whole_seconds()),
            r.total_ms.is_some(),
        )
    };
    assert_eq!(same(together), same(&alone));
    let failed_row = rows.iter().find(|r| r.job_id == ids[3]).unwrap();
    assert_eq!(
        (failed_row.error_code, failed_row.error_message.as_deref()),
        (Some(ErrorCode::UnknownProfile), Some("no such profile"))
    );
    let untouched = job::get(&db, t.tenant_id, ids[2]).await.unwrap().unwrap();
    assert_eq!(untouched.state, State::Queued);
    let kept = job::get(&db, t.tenant_id, ids[4]).await.unwrap().unwrap();
    assert_eq!(kept, alone);
}

/// Assignments stored together take only queued, uncancelled jobs, under
/// the current epoch, each with its own pods, source and wait.
#[sqlx::test(migrations = "../../migrations")]
async fn assignments_stored_together_are_stored_as_alone(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let mut conn = db.acquire().await.unwrap();
    let ids = jobs_of(&db, t.tenant_id, &[false; 4]).await;
    // One is assigned already, one cancelled while queued.
    assert!(
        job::assign(&db, 0, ids[2], Source::Cold, &["p0".into()], 1.0)
            .await
            .unwrap()
    );
    assert!(matches!(
        job::request_cancel(&mut conn, t.tenant_id, ids[3])
            .await
            .unwrap(),
        Cancel::Cancelled(_)
    ));
    let assign = |i: usize, pods: &[&str]| job::Assign {
        job_id: ids[i],
        source: if i == 0 {
            Source::Warm
        } else {
            Source::Standby
        },
        pods: pods.iter().map(|p| (*p).to_owned()).collect(),
        queued_ms: 10.0 * i as f64,
    };
    let all = [
        assign(0, &["pod-a"]),
        assign(1, &["pod-b", "pod-c"]),
        assign(2, &["pod-d"]),
        assign(3, &["pod-e"]),
    ];
    let refs: Vec<&job::Assign> = all.iter().collect();
    assert!(
        job::assign_many(&db, 9, &refs).await.unwrap().is_empty(),
        "a stale leader assigns nothing"
    );
    let mut got = job::assign_many(&db, 0, &refs).await.unwrap();
    got.sort_by_key(|(id, _)| *id);
    let mut want = vec![(ids[0], 1), (ids[1], 1)];
    want.sort_by_key(|(id, _)| *id);
    assert_eq!(got, want);
    for (i, pods, source) in [
        (0, vec!["pod-a"], Source::Warm),
        (1, vec!["pod-b", "pod-c"], Source::Standby),
        (2, vec!["p0"], Source::Cold),
    ] {
        let row = job::get(&db, t.tenant_id, ids[i]).await.unwrap().unwrap();
        assert_eq!(row.state, State::Assigned);
        assert_eq!(row.pods, pods);
        assert_eq!(row.source, Some(source));
        assert_eq!(row.attempts, 1);
        if i < 2 {
            assert_eq!(row.queued_ms, Some(10.0 * i as f64));
            assert!(row.assigned_at.is_some());
        }
    }
    let cancelled = job::get(&db, t.tenant_id, ids[3]).await.unwrap().unwrap();
    assert_eq!(cancelled.state, State::Cancelled);
}

/// On a writer's connection the statements that write many jobs at once
/// are planned once, and that plan, made while the table was small, joins
/// through the key: the plan a growing table needs (see
/// `hearth_store::WRITER_SETTINGS`).
#[sqlx::test(migrations = "../../migrations")]
async fn shared_writes_are_planned_once_through_the_key(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let writers = hearth_store::connect_writers_with((*db.connect_options()).clone(), 1)
        .await
        .unwrap();
    let t = tenant::create(&db, "acme").await.unwrap();
    let ids = jobs_of(&db, t.tenant_id, &[false; 8]).await;
    let mut conn = writers.acquire().await.unwrap();
    // More calls than Postgres plans anew before it may keep a plan.
    for id in &ids {
        let assign = job::Assign {
            job_id: *id,
            source: Source::Warm,
            pods: vec!["p".into()],
            queued_ms: 1.0,
        };
        let assigned = job::assign_many(&mut *conn, 0, &[&assign]).await.unwrap();
        assert_eq!(assigned.len(), 1);
        let end = Finish::new(State::Succeeded);
        let ended = job::finish_many(&mut conn, 0, &[(*id, &end)])
            .await
            .unwrap();
        assert_eq!(ended.len(), 1);
    }
    let kept: Vec<(String, String, i64, i64, i32)> = sqlx::query_as(
        "select name, statement, generic_plans, custom_plans,
                coalesce(array_length(parameter_types, 1), 0)
           from pg_prepared_statements where statement like 'update job %from unnest%'",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert_eq!(
        kept.len(),
        2,
        "both shared writes are kept prepared: {kept:?}"
    );
    for (name, statement, generic, custom, params) in kept {
        assert_eq!((generic, custom), (8, 0), "planned once: {statement}");
        let nulls = vec!["null"; params as usize].join(", ");
        // The name is sqlx's own (`sqlx_s_<n>`), the rest literal.
        let explain = sqlx::AssertSqlSafe(format!("explain execute {name}({nulls})"));
        let plan: Vec<String> = sqlx::query_scalar(explain)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let plan = plan.join("\n");
        assert!(plan.contains("Index Scan using job_pkey on job"), "{plan}");
        assert!(!plan.contains("Seq Scan on job"), "{plan}");
        assert!(!plan.contains("Hash Join"), "{plan}");
    }
    // The main pool keeps Postgres's defaults.
    let mut main = db.acquire().await.unwrap();
    let mode: String = sqlx::query_scalar("show plan_cache_mode")
        .fetch_one(&mut *main)
        .await
        .unwrap();
    assert_eq!(mode, "auto");
    drop((conn, main));
    writers.close().await;
}

/// A relaxed commit is on disk once [`hearth_store::flush`] returns: the log
/// has been flushed past the commit. Without the flush the log usually has
/// not been yet (the log writer flushes relaxed commits in the background).
#[sqlx::test(migrations = "../../migrations")]
async fn a_relaxed_commit_is_durable_after_a_flush(db: PgPool) {
    use sqlx::ConnectOptions;
    let _guard = DropOnPanic(db.clone());
    let url = db.connect_options().to_url_lossy().to_string();
    let relaxed = hearth_store::connect_relaxed(&url, 1).await.unwrap();
    let past = |db: PgPool, lsn: String| async move {
        sqlx::query_scalar::<_, bool>("select pg_current_wal_flush_lsn() >= $1::pg_lsn")
            .bind(lsn)
            .fetch_one(&db)
            .await
            .unwrap()
    };
    let mut unflushed = 0;
    for i in 0..50 {
        tenant::create(&relaxed, &format!("relaxed-{i}"))
            .await
            .unwrap();
        // The end of the log, at or after the commit just made.
        let lsn: String = sqlx::query_scalar("select pg_current_wal_insert_lsn()::text")
            .fetch_one(&relaxed)
            .await
            .unwrap();
        if !past(db.clone(), lsn.clone()).await {
            unflushed += 1;
        }
        hearth_store::flush(&db).await.unwrap();
        assert!(
            past(db.clone(), lsn).await,
            "commit {i} not on disk after the flush"
        );
    }
    // The check above can fail: relaxed commits are not flushed at once.
    assert!(unflushed > 0, "every relaxed commit was already on disk");
    relaxed.close().await;
}

/// A pooled connection is checked on its way out of the pool only after a
/// second idle (not before every statement); one that died meanwhile is
/// then replaced, and the statement runs on a new one.
#[sqlx::test(migrations = "../../migrations")]
async fn a_pooled_connection_that_died_while_idle_is_replaced(db: PgPool) {
    use sqlx::ConnectOptions;
    let _guard = DropOnPanic(db.clone());
    let url = db.connect_options().to_url_lossy().to_string();
    let pool = hearth_store::connect_relaxed(&url, 1).await.unwrap();
    let backend = "select pg_backend_pid()";
    let first: i32 = sqlx::query_scalar(backend).fetch_one(&pool).await.unwrap();
    let killed: bool = sqlx::query_scalar("select pg_terminate_backend($1)")
        .bind(first)
        .fetch_one(&db)
        .await
        .unwrap();
    assert!(killed);
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let second: i32 = sqlx::query_scalar(backend).fetch_one(&pool).await.unwrap();
    assert_ne!(first, second);
    pool.close().await;
}

/// A job's way to its end changes no indexed column: its `assigned` and
/// `running` transitions are heap-only updates (no index entries, the new
/// version on the same page). The scheduler's scans and the listing of a
/// tenant's jobs by state use the indexes that cover what does change once,
/// at the end.
#[sqlx::test(migrations = "../../migrations")]
async fn transitions_before_the_end_write_no_index_entries(db: PgPool) {
    let _guard = DropOnPanic(db.clone());
    let t = tenant::create(&db, "acme").await.unwrap();
    let defs: Vec<String> =
        sqlx::query_scalar("select indexdef from pg_indexes where tablename = 'job'")
            .fetch_all(&db)
            .await
            .unwrap();
    for def in &defs {
        let words = def.split(|c: char| !c.is_alphanumeric() && c != '_');
        assert!(!words.into_iter().any(|w| w == "state"), "{def}");
    }
    // A few unfinished jobs and many newer finished ones, so that the
    // planner knows which are few and a scan of the newest finds none.
    let open = jobs_of(&db, t.tenant_id, &[false, true, true]).await;
    let ended = jobs_of(&db, t.tenant_id, &[true; 200]).await;
    let mut conn = db.acquire().await.unwrap();
    for id in &ended {
        let end = Finish::new(State::Succeeded);
        assert!(
            job::finish(&mut conn, 0, *id, &end)
                .await
                .unwrap()
                .is_some()
        );
    }
    sqlx::query("analyze job")
        .execute(&mut *conn)
        .await
        .unwrap();

    // Counters of this session not yet reported: within a transaction they
    // only grow.
    let mut tx = db.begin().await.unwrap();
    let hot = "select pg_stat_get_xact_tuples_hot_updated('job'::regclass)";
    let hot_before = count(&mut tx, hot).await;
    assert!(job::start(&mut *tx, 0, open[1], 1.0, 1.0).await.unwrap());
    let Inserted::New(row) = job::insert(&mut tx, &new_job(t.tenant_id, &json!({}), None, None))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert!(
        job::assign(&mut *tx, 0, row.job_id, Source::Warm, &["p".into()], 1.0)
            .await
            .unwrap()
    );
    assert!(job::start(&mut *tx, 0, row.job_id, 1.0, 1.0).await.unwrap());
    assert_eq!(
        count(&mut tx, hot).await - hot_before,
        3,
        "assigned and running (twice)"
    );

    // Plans as on a big table: no sequential scans.
    sqlx::query("set local enable_seqscan = off")
        .execute(&mut *tx)
        .await
        .unwrap();
    let scans = |index: &str| format!("select pg_stat_get_xact_numscans('{index}'::regclass)");
    let mut before = std::collections::HashMap::new();
    for index in [
        "job_unfinished_idx",
        "job_tenant_unfinished_idx",
        "job_tenant_outcome_idx",
    ] {
        before.insert(index, count(&mut tx, &scans(index)).await);
    }
    let scanned = async |tx: &mut sqlx::PgConnection, index: &str| {
        count(tx, &scans(index)).await > before[index]
    };
    let queued = job::queued_ids(&mut *tx).await.unwrap();
    assert_eq!(queued, [open[0]]);
    assert!(scanned(&mut tx, "job_unfinished_idx").await);
    let by_state = async |tx: &mut sqlx::PgConnection, state| {
        let filter = Filter {
            state: Some(state),
            limit: 10,
            ..Filter::default()
        };
        job::list(tx, t.tenant_id, &filter).await.unwrap().len()
    };
    let queued_scans = count(&mut tx, &scans("job_unfinished_idx")).await;
    assert_eq!(by_state(&mut tx, State::Running).await, 2);
    // Either index of unfinished jobs, as the planner sees fit.
    assert!(
        scanned(&mut tx, "job_tenant_unfinished_idx").await
            || count(&mut tx, &scans("job_unfinished_idx")).await > queued_scans
    );
    assert_eq!(by_state(&mut tx, State::Succeeded).await, 10);
    assert_eq!(by_state(&mut tx, State::Failed).await, 0);
    assert!(scanned(&mut tx, "job_tenant_outcome_idx").await);
    tx.rollback().await.unwrap();
}

/// What a statement that counts answers.
async fn count(conn: &mut sqlx::PgConnection, what: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(what.to_owned()))
        .fetch_one(conn)
        .await
        .unwrap()
}
