-- A new job error code, `pod_start_failed`: pods of the job's profile failed
-- to start several times in a row while it waited. NOT VALID, as before.
alter table job drop constraint job_error_code_check;
alter table job add constraint job_error_code_check check (error_code in (
    'nonzero_exit', 'timed_out', 'cancelled', 'invalid_output', 'deps_install_failed',
    'bind_failed', 'spawn_failed', 'disk_quota_exceeded', 'pod_lost', 'pod_start_failed',
    'unknown_bundle', 'unknown_profile', 'unplaceable', 'result_unstorable', 'stale_epoch',
    'agent_protocol', 'wipe_failed'
)) not valid;
