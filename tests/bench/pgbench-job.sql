-- The issue's baseline: one job's life as four durable commits (accepted,
-- assigned, started, finished), each its own transaction. Run by the service
-- benchmark with pgbench, which counts one script run as one job.
insert into bench_job (state) values ('queued') returning bench_job_id \gset
update bench_job set state = 'assigned' where bench_job_id = :bench_job_id;
update bench_job set state = 'running' where bench_job_id = :bench_job_id;
update bench_job set state = 'succeeded' where bench_job_id = :bench_job_id;
