-- A job's error code is one of the job error codes the API documents
-- (`hearth_core::ErrorCode`), present exactly when the job ended without
-- succeeding. NOT VALID: enforced on every write from now on without
-- rewriting the rows of earlier versions.
alter table job add constraint job_error_code_check check (error_code in (
    'nonzero_exit', 'timed_out', 'cancelled', 'invalid_output', 'deps_install_failed',
    'bind_failed', 'spawn_failed', 'disk_quota_exceeded', 'pod_lost', 'unknown_bundle',
    'unknown_profile', 'unplaceable', 'result_unstorable', 'stale_epoch', 'agent_protocol',
    'wipe_failed'
)) not valid;
alter table job add constraint job_error_code_when_unsuccessful check (
    (error_code is not null) = (state in ('failed', 'timed_out', 'cancelled'))
) not valid;
