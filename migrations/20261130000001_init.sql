-- Tenants, their API keys, uploaded bundles and jobs.

create table tenant (
    tenant_id   uuid primary key,
    name        text not null,
    created_at  timestamptz not null default now(),
    constraint tenant_name_unique unique (name)
);

create table api_key (
    api_key_id  uuid primary key,
    tenant_id   uuid not null,
    name        text not null,
    -- Shown to users to tell keys apart; the secret is stored only as a hash.
    prefix      text not null,
    secret_hash text not null,
    created_at  timestamptz not null default now(),
    revoked_at  timestamptz,
    constraint api_key_tenant_fk foreign key (tenant_id) references tenant (tenant_id) on delete cascade,
    constraint api_key_prefix_unique unique (prefix)
);
create index api_key_tenant_idx on api_key (tenant_id, api_key_id);

create table bundle (
    tenant_id   uuid not null,
    digest      text not null,
    files       jsonb not null,
    size_bytes  bigint not null,
    created_at  timestamptz not null default now(),
    constraint bundle_pk primary key (tenant_id, digest),
    constraint bundle_tenant_fk foreign key (tenant_id) references tenant (tenant_id) on delete cascade
);

create table job (
    job_id          uuid primary key,
    tenant_id       uuid not null,
    kind            text not null,
    profile         text not null,
    caller          text not null,
    state           text not null,
    priority        integer not null,
    spec            jsonb not null,
    idempotency_key text,
    request_hash    text,
    -- How many times the job was given a pod; a lost pod re-queues it while
    -- attempts stay within the configured limit.
    attempts        integer not null default 0,
    cancel_requested boolean not null default false,
    source          text,
    pods            text[] not null default '{}',
    exit_code       integer,
    output          jsonb,
    stdout          text not null default '',
    stderr          text not null default '',
    stdout_truncated boolean not null default false,
    stderr_truncated boolean not null default false,
    error_code      text,
    error_message   text,
    created_at      timestamptz not null default now(),
    assigned_at     timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    queued_ms       double precision,
    acquire_ms      double precision,
    bind_ms         double precision,
    run_ms          double precision,
    total_ms        double precision,
    constraint job_tenant_fk foreign key (tenant_id) references tenant (tenant_id) on delete cascade,
    constraint job_idempotency_key_unique unique (tenant_id, idempotency_key),
    constraint job_state_check check (state in ('queued', 'assigned', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled')),
    constraint job_kind_check check (kind in ('tool_call', 'verifier', 'rollout')),
    constraint job_source_check check (source in ('warm', 'standby', 'cold'))
);
create index job_tenant_idx on job (tenant_id, job_id desc);
create index job_tenant_state_idx on job (tenant_id, state, job_id desc);
-- The scheduler's recovery scan: only unfinished jobs.
create index job_unfinished_idx on job (job_id)
    where state in ('queued', 'assigned', 'running');

-- Full output of finished jobs (the job row keeps a bounded head).
create table job_log (
    job_id      uuid primary key,
    tenant_id   uuid not null,
    stdout      text not null,
    stderr      text not null,
    constraint job_log_job_fk foreign key (job_id) references job (job_id) on delete cascade
);
