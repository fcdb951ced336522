-- Pool decisions of every pod (why it was started, promoted, assigned,
-- released), and per-tenant pool budgets set through the admin API.

create table pod_event (
    pod_event_id bigint generated always as identity,
    -- The tenant the event concerns; null for pods bound to nobody (standby,
    -- starting for the pool) and for the pool's budget notes.
    tenant_id   uuid,
    -- The runtime's pod id; null for budget notes.
    pod_id      text,
    profile     text not null,
    at          timestamptz not null,
    kind        text not null,
    job_id      uuid,
    reason      jsonb not null,
    constraint pod_event_pk primary key (pod_event_id),
    constraint pod_event_tenant_fk foreign key (tenant_id) references tenant (tenant_id) on delete cascade,
    constraint pod_event_kind_check check (kind in ('start', 'ready', 'promote', 'assign', 'reset', 'release', 'gone', 'budget'))
);
create index pod_event_tenant_pod_idx on pod_event (tenant_id, pod_id, pod_event_id);
create index pod_event_pod_idx on pod_event (pod_id, pod_event_id);

create table tenant_budget (
    tenant_id    uuid not null,
    profile      text not null,
    floor_gpus   double precision not null,
    ceiling_gpus double precision not null,
    updated_at   timestamptz not null default now(),
    constraint tenant_budget_pk primary key (tenant_id, profile),
    constraint tenant_budget_tenant_fk foreign key (tenant_id) references tenant (tenant_id) on delete cascade,
    constraint tenant_budget_bounds_check check (0 <= floor_gpus and floor_gpus <= ceiling_gpus)
);
