//! A job's events as its event stream replays them (`GET /v1/jobs/{id}/events`):
//! the states its runs passed through and the lines it printed, in order.
//!
//! Each event has a sequence number, from 1 and without gaps per job, that
//! the store assigns when the event is written: it is the event's id in the
//! stream, the same whichever replica serves it. (Id 0 is the job's
//! acceptance, which every job has and which is not stored; its final state
//! is the job row itself.) The leader writes events in batches
//! ([`append`]), off every job's critical path; every replica reads them
//! ([`after`]).

use hearth_core::State;
use hearth_core::agent::Stream;
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::Result;

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The job entered this state (not a final one: that is the job row).
    State(State),
    /// The job printed a line (without its newline) on rank `rank`.
    Output {
        stream: Stream,
        rank: i32,
        line: String,
    },
}

impl Body {
    /// Bytes it takes in a batch, roughly.
    pub fn size(&self) -> usize {
        match self {
            Body::State(_) => 16,
            Body::Output { line, .. } => 16 + line.len(),
        }
    }
}

/// An event to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJobEvent {
    pub tenant_id: Uuid,
    pub job_id: Uuid,
    /// The leadership epoch of the scheduler that saw it happen: events of a
    /// leader whose epoch is no longer current are not written.
    pub epoch: i64,
    pub body: Body,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEventRow {
    pub seq: i64,
    pub body: Body,
}

fn stream_str(s: Stream) -> &'static str {
    match s {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    }
}

/// Appends `events` to their jobs' events in one statement, in the order
/// given, and returns the sequence number of the first event written per job
/// (the next ones of that job follow without gaps, in the order given).
/// Events of a leader no longer current, or of tenants deleted meanwhile, are
/// dropped. Fails with a conflict if another writer appended to one of these
/// jobs at the same moment: try again.
#[tracing::instrument(skip_all, fields(events = events.len()))]
pub async fn append(db: impl PgExecutor<'_>, events: &[NewJobEvent]) -> Result<Vec<(Uuid, i64)>> {
    let n = events.len();
    let (mut tenant_ids, mut job_ids, mut epochs) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut kinds, mut states, mut streams, mut ranks, mut lines) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for e in events {
        tenant_ids.push(e.tenant_id);
        job_ids.push(e.job_id);
        epochs.push(e.epoch);
        match &e.body {
            Body::State(s) => {
                kinds.push("state");
                states.push(Some(s.as_str()));
                streams.push(None);
                ranks.push(None);
                lines.push(None);
            }
            Body::Output { stream, rank, line } => {
                kinds.push("output");
                states.push(None);
                streams.push(Some(stream_str(*stream)));
                ranks.push(Some(*rank));
                lines.push(Some(line.as_str()));
            }
        }
    }
    let firsts = sqlx::query!(
        r#"with e as (
             select e.* from unnest($1::uuid[], $2::uuid[], $3::int8[], $4::text[], $5::text[],
                                    $6::text[], $7::int4[], $8::text[])
                  with ordinality as e(tenant_id, job_id, epoch, kind, state, stream, rank, line, ord)
             where exists (select 1 from leadership l where l.epoch = e.epoch for share)
               and exists (select 1 from tenant t where t.tenant_id = e.tenant_id)
           ),
           last as (
             select j.job_id, coalesce(l.seq, 0) as seq
             from (select distinct tenant_id, job_id from e) j
             left join lateral (
               select x.seq from job_event x
               where x.tenant_id = j.tenant_id and x.job_id = j.job_id
               order by x.seq desc limit 1
             ) l on true
           ),
           ins as (
             insert into job_event (tenant_id, job_id, seq, kind, state, stream, rank, line)
             select e.tenant_id, e.job_id,
                    last.seq + row_number() over (partition by e.job_id order by e.ord),
                    e.kind, e.state, e.stream, e.rank, e.line
             from e join last on last.job_id = e.job_id
             returning job_id, seq
           )
           select job_id as "job_id!", min(seq) as "first!" from ins group by job_id"#,
        &tenant_ids,
        &job_ids,
        &epochs,
        &kinds as &[&str],
        &states as &[Option<&str>],
        &streams as &[Option<&str>],
        &ranks as &[Option<i32>],
        &lines as &[Option<&str>],
    )
    .fetch_all(db)
    .await
    .map_err(crate::on_constraint("job_event_pk"))?;
    Ok(firsts.into_iter().map(|r| (r.job_id, r.first)).collect())
}

/// A tenant's job's events after `after`, oldest first, at most `limit`.
#[tracing::instrument(skip(db))]
pub async fn after(
    db: impl PgExecutor<'_>,
    tenant_id: Uuid,
    job_id: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<JobEventRow>> {
    let rows = sqlx::query!(
        "select seq, kind, state, stream, rank, line from job_event
         where tenant_id = $1 and job_id = $2 and seq > $3
         order by seq
         limit $4",
        tenant_id,
        job_id,
        after,
        limit
    )
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|r| {
            let body = match (r.kind.as_str(), r.state, r.stream, r.rank, r.line) {
                ("state", Some(s), ..) => State::parse(&s).map(Body::State),
                ("output", _, Some(stream), Some(rank), Some(line)) => {
                    let stream = match stream.as_str() {
                        "stdout" => Some(Stream::Stdout),
                        "stderr" => Some(Stream::Stderr),
                        _ => None,
                    };
                    stream.map(|stream| Body::Output { stream, rank, line })
                }
                _ => None,
            };
            let body = body.ok_or_else(|| {
                sqlx::Error::Decode(
                    format!("job event {} of job {job_id} is malformed", r.seq).into(),
                )
            })?;
            Ok(JobEventRow { seq: r.seq, body })
        })
        .collect()
}

/// The sequence number of a tenant's job's last stored event; 0 if none.
#[tracing::instrument(skip(db))]
pub async fn last(db: impl PgExecutor<'_>, tenant_id: Uuid, job_id: Uuid) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        r#"select coalesce(max(seq), 0) as "last!" from job_event
           where tenant_id = $1 and job_id = $2"#,
        tenant_id,
        job_id
    )
    .fetch_one(db)
    .await?)
}
