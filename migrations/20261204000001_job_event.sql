-- What a job's event stream replays (`GET /v1/jobs/{id}/events`): the states
-- its runs passed through and the lines it printed, in order. `seq` counts
-- from 1 per job without gaps and is the event's id in the stream (0 is the
-- job's acceptance, which is not stored; its final state is the job row).
-- The leader writes events in batches, at most the log limit of output per
-- stream and run. Rows go with their tenant: tenant_id leads the key, so the
-- cascade finds them by index.
create table job_event (
    tenant_id   uuid not null,
    job_id      uuid not null,
    seq         bigint not null,
    kind        text not null,
    state       text,
    stream      text,
    rank        integer,
    line        text,
    constraint job_event_pk primary key (tenant_id, job_id, seq),
    constraint job_event_tenant_fk foreign key (tenant_id) references tenant (tenant_id) on delete cascade,
    constraint job_event_seq_check check (seq > 0),
    constraint job_event_kind_check check (
        (kind = 'state' and state in ('queued', 'assigned', 'running')
            and stream is null and rank is null and line is null)
        or (kind = 'output' and state is null and stream in ('stdout', 'stderr')
            and rank is not null and line is not null))
);
