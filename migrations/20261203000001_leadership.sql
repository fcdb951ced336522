-- Leadership epochs. Every scheduler takeover increases the epoch in the
-- same transaction that records it; the leader carries its epoch on every
-- agent request and on every write of a job's progress or outcome, and both
-- refuse an epoch older than the current one. A leader that lost its lock
-- and has not noticed yet can then neither run, wipe nor record anything.
create table leadership (
    leadership_id int primary key default 1,
    epoch bigint not null default 0,
    replica_id text,
    since timestamptz,
    constraint leadership_single check (leadership_id = 1)
);

insert into leadership (leadership_id) values (1);
