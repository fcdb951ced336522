-- The W3C trace context (`traceparent`, version 00) a job was accepted in:
-- the scheduler's spans of the job continue that trace, on whichever replica
-- leads, and the job's processes get it as TRACEPARENT. Null when the job was
-- accepted with trace export off and without a caller's `traceparent`.
alter table job add column traceparent text;
alter table job add constraint job_traceparent_format
    check (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
