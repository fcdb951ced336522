-- Tenants manage their own API keys: a key may expire, and each records
-- when it was last used (to within a minute), so a tenant can tell stale
-- keys from live ones before revoking them.
alter table api_key add column expires_at timestamptz;
alter table api_key add column last_used_at timestamptz;
