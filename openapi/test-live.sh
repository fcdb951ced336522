#!/usr/bin/env bash
# The SDKs against the live service: starts the built `hearth serve` on a
# free loopback port with a fresh database (dropped at the end, failed runs
# too), real Postgres and the real local runtime, creates a tenant, then runs
# the Python SDK's tests (pytest, python/tests) and the TypeScript SDK's
# (node --test, typescript/test) with HEARTH_URL, HEARTH_TOKEN (the tenant's
# key) and HEARTH_ADMIN_TOKEN. Expects the workspace's binaries built and
# openapi/setup.sh done (check.sh does both).
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-$PWD/target}"
postgres="${HEARTH_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432}"
db="hearth_sdk_$(python3 -c 'import uuid; print(uuid.uuid4().hex)')"
state_dir="$(mktemp -d "${TMPDIR:-/tmp}/hearth-sdk.XXXXXX")"
admin_token="sdk-admin-$(python3 -c 'import uuid; print(uuid.uuid4().hex)')"
server_pid=""

cleanup() {
    local rc=$?
    if [ -n "$server_pid" ]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    psql -q "$postgres/postgres" -c "drop database if exists \"$db\" with (force)" >/dev/null 2>&1 \
        || echo "could not drop database $db" >&2
    if [ "$rc" -ne 0 ] && [ -f "$state_dir/serve.log" ]; then
        echo "== hearth serve log (last 40 lines)" >&2
        tail -n 40 "$state_dir/serve.log" >&2
    fi
    rm -rf "$state_dir"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

DATABASE_URL="$postgres/$db" \
HEARTH_LISTEN=127.0.0.1:0 \
HEARTH_ADMIN_TOKEN="$admin_token" \
HEARTH_STATE_DIR="$state_dir/state" \
HEARTH_AGENT_BIN="$target/debug/hearth-agent" \
HEARTH_STANDBY_MIN=0 \
HEARTH_STANDBY_MAX=0 \
HEARTH_SHUTDOWN_GRACE_S=2 \
HEARTH_DB_MAX_CONNECTIONS=8 \
    "$target/debug/hearth" serve >"$state_dir/serve.log" 2>&1 &
server_pid=$!

base=""
for _ in $(seq 1 300); do
    base="$(sed -n 's/^Hearth listening on \(http:\/\/[^ ]*\).*/\1/p' "$state_dir/serve.log" | head -n1)"
    [ -n "$base" ] && break
    kill -0 "$server_pid" 2>/dev/null || { echo "hearth serve exited" >&2; exit 1; }
    sleep 0.1
done
[ -n "$base" ] || { echo "hearth serve did not start" >&2; exit 1; }
echo "hearth serve at $base (database $db)"

tenant_key="$(python3 - "$base" "$admin_token" <<'PY'
import json, sys, urllib.request
base, admin = sys.argv[1], sys.argv[2]
req = urllib.request.Request(base + "/v1/admin/tenants", method="POST",
    data=json.dumps({"name": "sdk-tenant"}).encode(),
    headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=60) as r:
    print(json.load(r)["api_key"])
PY
)"
export HEARTH_URL="$base" HEARTH_TOKEN="$tenant_key" HEARTH_ADMIN_TOKEN="$admin_token"

status=0
echo
echo "== Python SDK against the live service"
(cd openapi/python && PYTHONPATH=. ../.venv/bin/python -m pytest -q -p no:cacheprovider tests) || status=1

echo
echo "== TypeScript SDK against the live service"
rm -rf openapi/build
(cd openapi && npx --no-install tsc -p typescript/tsconfig.json && node --test build/test/) || status=1
exit "$status"
