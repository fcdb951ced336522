#!/usr/bin/env bash
# Schemathesis against the live service's own `/openapi.json`: every check,
# a bounded number of examples per operation, a fixed seed. It starts the
# built `hearth serve` on a free loopback port with a fresh database (dropped
# at the end, failed runs too) and its own state directory, creates what the
# API cannot discover (tenants, a finished job and its pod, a bundle, a
# control policy and session), then runs twice: with a tenant's API key over
# the tenant API, and with the admin token over the admin API. Any failure
# (a 5xx, an undocumented status, a response that breaks its schema, a
# schema-valid request refused or a schema-violating one accepted) fails the
# script. Ids and overrides: `tests/schemathesis.toml`.
#
# Runs from tests/run.sh after the cargo tests, or alone:
#   bash tests/schemathesis.sh [extra `st run` options, e.g. --max-examples 5]
set -euo pipefail
cd "$(dirname "$0")/.."

ST_VERSION=4.32.5
# Test cases per operation and phase, and the seed they are drawn from.
MAX_EXAMPLES="${HEARTH_ST_MAX_EXAMPLES:-50}"
SEED="${HEARTH_ST_SEED:-20261205}"

installed() {
    python3 -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null || true
}
if [ "$(installed)" != "$ST_VERSION" ]; then
    echo "installing schemathesis $ST_VERSION"
    python3 -m pip install -q "schemathesis==$ST_VERSION"
fi

export SQLX_OFFLINE=true
cargo build --workspace --bins --locked -q

postgres="${HEARTH_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432}"
db="hearth_st_$(python3 -c 'import uuid; print(uuid.uuid4().hex)')"
state_dir="$(mktemp -d "${TMPDIR:-/tmp}/hearth-st.XXXXXX")"
admin_token="st-admin-$(python3 -c 'import uuid; print(uuid.uuid4().hex)')"
server_pid=""
testing=""

cleanup() {
    local rc=$?
    if [ -n "$server_pid" ]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    psql -q "$postgres/postgres" -c "drop database if exists \"$db\" with (force)" >/dev/null 2>&1 \
        || echo "could not drop database $db" >&2
    # A failed set-up says why in the service's log; schemathesis reports its own.
    if [ "$rc" -ne 0 ] && [ -z "$testing" ] && [ -f "$state_dir/serve.log" ]; then
        echo "== hearth serve log (last 40 lines)" >&2
        tail -n 40 "$state_dir/serve.log" >&2
    fi
    rm -rf "$state_dir"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Port 0: the service binds a free port and prints it.
DATABASE_URL="$postgres/$db" \
HEARTH_LISTEN=127.0.0.1:0 \
HEARTH_ADMIN_TOKEN="$admin_token" \
HEARTH_STATE_DIR="$state_dir/state" \
HEARTH_AGENT_BIN="$PWD/target/debug/hearth-agent" \
HEARTH_STANDBY_MIN=0 \
HEARTH_STANDBY_MAX=0 \
HEARTH_MAX_WAIT_S=2 \
HEARTH_SHUTDOWN_GRACE_S=2 \
HEARTH_DB_MAX_CONNECTIONS=8 \
HEARTH_CONTROL_K=0 \
    target/debug/hearth serve >"$state_dir/serve.log" 2>&1 &
server_pid=$!

base=""
for _ in $(seq 1 200); do
    base="$(sed -n 's/^Hearth listening on \(http:\/\/[^ ]*\).*/\1/p' "$state_dir/serve.log" | head -n1)"
    [ -n "$base" ] && break
    kill -0 "$server_pid" 2>/dev/null || { echo "hearth serve exited" >&2; exit 1; }
    sleep 0.1
done
[ -n "$base" ] || { echo "hearth serve did not start" >&2; exit 1; }
echo "hearth serve at $base (database $db)"

# What the API cannot discover by itself.
eval "$(python3 - "$base" "$admin_token" <<'EOF'
import json, shlex, sys, tomllib, urllib.request

base, admin = sys.argv[1], sys.argv[2]

def call(method, path, token, body=None):
    req = urllib.request.Request(base + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)

tenant = call("POST", "/v1/admin/tenants", admin, {"name": "st-tenant"})
target = call("POST", "/v1/admin/tenants", admin, {"name": "st-target"})
doomed = call("POST", "/v1/admin/tenants", admin, {"name": "st-doomed"})
key = tenant["api_key"]
bundle = call("POST", "/v1/bundles", key, {"files": {"main.py": "print('hi')\n"}})
with open("tests/schemathesis.toml", "rb") as f:
    if tomllib.load(f)["dictionaries"]["bundle"]["values"] != [bundle["bundle"]]:
        sys.exit(f"tests/schemathesis.toml: the bundle dictionary must be [{bundle['bundle']!r}]")
job = call("POST", "/v1/jobs?wait=60", key, {
    "kind": "tool_call", "profile": "cpu-small", "caller": "st-caller",
    "code": {"bundle": bundle["bundle"]}, "command": ["sh", "-c", "echo hi"]})
if job["state"] != "succeeded" or not job["pods"]:
    sys.exit(f"the set-up job did not succeed: {job}")
policy = call("POST", "/v1/control/policies", key, {
    # As many registers and inputs as a policy may have, so that every
    # schema-valid `state` and `input` fits it.
    "name": "st-policy", "version": 1, "registers": 16, "inputs": 8,
    "init": [0, 0, 0, 7], "max_steps": 8,
    "routes": [
        {"name": "classify", "body": [
            {"op": "add", "dst": 0, "a": {"reg": 0}, "b": {"input": 0}},
            {"op": "set_route", "route": "answer", "when": {"cmp": "gt", "a": {"reg": 0}, "b": {"imm": 100}}}]},
        {"name": "answer", "body": [
            {"op": "emit", "code": 9, "regs": [0, 3]},
            {"op": "set_route", "route": "classify"}]}]})
call("POST", "/v1/control/sessions", key, {"policy": policy["policy_id"], "session": "st-session"})
call("POST", "/v1/control/sessions", key, {"policy": policy["policy_id"], "session": "st-doomed"})
spare = call("POST", "/v1/keys", key, {"name": "st-spare"})
for name, value in {
    "HEARTH_ST_TENANT_KEY": key,
    "HEARTH_ST_JOB": job["id"],
    "HEARTH_ST_POD": job["pods"][0],
    "HEARTH_ST_BUNDLE": bundle["bundle"],
    "HEARTH_ST_POLICY": policy["policy_id"],
    "HEARTH_ST_SESSION": "st-session",
    "HEARTH_ST_DOOMED_SESSION": "st-doomed",
    "HEARTH_ST_TARGET_TENANT": target["tenant_id"],
    "HEARTH_ST_TARGET_KEY": target["api_key_id"],
    "HEARTH_ST_DOOMED_TENANT": doomed["tenant_id"],
    "HEARTH_ST_SPARE_KEY": spare["api_key_id"],
}.items():
    print(f"export {name}={shlex.quote(value)}")
EOF
)"

# Hypothesis keeps its files with the run's, not in the working tree.
export HYPOTHESIS_STORAGE_DIRECTORY="$state_dir/hypothesis"

run() {
    local title=$1
    shift
    echo
    echo "== schemathesis: $title"
    python3 -m schemathesis.cli --config-file tests/schemathesis.toml run "$base/openapi.json" \
        --checks all --max-examples "$MAX_EXAMPLES" --seed "$SEED" \
        --generation-database none --no-color "$@"
}

testing=1
start=$SECONDS
status=0
# A tenant's key over everything but the admin API.
HEARTH_ST_TOKEN="$HEARTH_ST_TENANT_KEY" run "tenant API key" \
    --exclude-path-regex '^/v1/admin/' "$@" || status=1
# The admin token over the admin API, against a tenant of its own (it may
# rename or delete it, and revoke its key).
HEARTH_ST_TOKEN="$admin_token" run "admin token" \
    --include-path-regex '^/v1/admin/' "$@" || status=1
echo
echo "schemathesis: $((SECONDS - start)) s, $([ "$status" -eq 0 ] && echo passed || echo FAILED)"
exit "$status"
