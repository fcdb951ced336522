-- Ready-cohort control endpoint: registered policies (immutable, versioned),
-- snapshots of session state, and K_r per executable route from calibration.

create table control_policy (
    tenant_id   uuid not null,
    policy_id   uuid not null,
    name        text not null,
    version     bigint not null,
    -- The policy as registered (the `hearth_control` JSON language), normalised.
    spec        jsonb not null,
    -- Executable route ids in route order: hash of body, state schema and version.
    route_ids   text[] not null,
    created_at  timestamptz not null default now(),
    constraint control_policy_pk primary key (tenant_id, policy_id),
    constraint control_policy_version_unique unique (tenant_id, name, version),
    constraint control_policy_tenant_fk foreign key (tenant_id) references tenant (tenant_id) on delete cascade
);

create table control_session (
    tenant_id   uuid not null,
    policy_id   uuid not null,
    session     text not null,
    -- Index of the session's next route in the policy.
    route       integer not null,
    -- The registers, a JSON array of u32.
    state       jsonb not null,
    updated_at  timestamptz not null default now(),
    constraint control_session_pk primary key (tenant_id, policy_id, session),
    constraint control_session_policy_fk foreign key (tenant_id, policy_id)
        references control_policy (tenant_id, policy_id) on delete cascade
);

create table control_route_k (
    tenant_id   uuid not null,
    route_id    text not null,
    -- Smallest winning batch size; null: no tested size wins (CPU path only).
    k           integer,
    -- The executor's status line when measured.
    executor    text not null,
    measured_at timestamptz not null default now(),
    constraint control_route_k_pk primary key (tenant_id, route_id),
    constraint control_route_k_tenant_fk foreign key (tenant_id) references tenant (tenant_id) on delete cascade,
    constraint control_route_k_check check (k is null or k >= 1)
);
