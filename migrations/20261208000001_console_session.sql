-- Console sessions: a tenant signs in to the web console with an API key and
-- gets an HttpOnly cookie naming one of these rows. The cookie's secret is
-- stored only as a hash; the session ends at `expires_at`, when it is revoked
-- (sign-out), or as soon as the key it was opened with is revoked or expires.
create table console_session (
    session_id  uuid primary key,
    tenant_id   uuid not null,
    api_key_id  uuid not null,
    secret_hash text not null,
    created_at  timestamptz not null default now(),
    expires_at  timestamptz not null,
    revoked_at  timestamptz,
    constraint console_session_tenant_fk foreign key (tenant_id) references tenant (tenant_id) on delete cascade,
    constraint console_session_key_fk foreign key (api_key_id) references api_key (api_key_id) on delete cascade
);

-- Sign-in sweeps sessions that ended a day ago or more.
create index console_session_expires_idx on console_session (expires_at);
