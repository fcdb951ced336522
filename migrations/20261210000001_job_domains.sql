-- The job columns whose values come from a fixed list (kind, source, error
-- code) or a fixed format (traceparent) are typed by domains that carry
-- the check, instead of checks on the table.
--
-- Why: Postgres enforces a table's checks on every insert and update of a
-- row, whichever columns change, and reads each check's stored expression
-- afresh for every statement (in Postgres 15 these four were 6 kB of node
-- text to parse per statement; the job's way from queued to finished is a
-- handful of statements). A domain's check is read once per session and
-- kept, and runs only where a value of the column is written. The checks
-- themselves are the same, with the same names.
--
-- The domains start bare, so that retyping the columns is a change of
-- catalog only (no table rewrite), and get their checks after. The error
-- code's check stays NOT VALID, as on the table: rows from before it may
-- hold codes outside the list. `state` keeps its table check: the generated
-- columns `unfinished` and `outcome` depend on it, and Postgres cannot
-- retype a column they use.
create domain job_kind as text;
create domain job_source as text;
create domain job_error_code as text;
create domain job_traceparent as text;

alter table job
    drop constraint job_kind_check,
    drop constraint job_source_check,
    drop constraint job_error_code_check,
    drop constraint job_traceparent_format,
    alter column kind type job_kind,
    alter column source type job_source,
    alter column error_code type job_error_code,
    alter column traceparent type job_traceparent;

alter domain job_kind add constraint job_kind_check
    check (value in ('tool_call', 'verifier', 'rollout'));
alter domain job_source add constraint job_source_check
    check (value in ('warm', 'standby', 'cold'));
alter domain job_traceparent add constraint job_traceparent_format
    check (value ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
alter domain job_error_code add constraint job_error_code_check check (value in (
    'nonzero_exit', 'timed_out', 'cancelled', 'invalid_output', 'deps_install_failed',
    'bind_failed', 'spawn_failed', 'disk_quota_exceeded', 'pod_lost', 'pod_start_failed',
    'unknown_bundle', 'unknown_profile', 'unplaceable', 'result_unstorable', 'stale_epoch',
    'agent_protocol', 'wipe_failed'
)) not valid;
