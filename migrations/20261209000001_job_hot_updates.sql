-- A job's way from `queued` through `assigned` and `running` changes only
-- columns no index covers, so Postgres writes those updates as heap-only
-- tuples (HOT: no new index entries, the new version on the same page).
-- Before, `state` was in `job_tenant_state_idx` and in the predicate of
-- `job_unfinished_idx`, and every transition wrote an entry in each of the
-- job's five indexes. The indexes now cover two generated columns that
-- change once, at a job's end: whether it is unfinished, and how it ended.
alter table job
    add column unfinished boolean not null
        generated always as (state in ('queued', 'assigned', 'running')) stored,
    add column outcome text
        generated always as (case when state in ('queued', 'assigned', 'running')
                                  then null else state end) stored;

drop index job_tenant_state_idx;
drop index job_unfinished_idx;
-- The scheduler's scans: only unfinished jobs.
create index job_unfinished_idx on job (job_id) where unfinished;
-- A tenant's jobs listed by state: unfinished ones, and finished ones by
-- how they ended.
create index job_tenant_unfinished_idx on job (tenant_id, job_id desc) where unfinished;
create index job_tenant_outcome_idx on job (tenant_id, outcome, job_id desc)
    where outcome is not null;

-- Room on each page for the new versions of its rows.
alter table job set (fillfactor = 70);
