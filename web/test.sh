#!/usr/bin/env bash
# The console's tests: builds it (build.sh), runs the component tests
# (Vitest, happy-dom), then the browser tests: Debian's chromium driven by
# playwright-core against a live `hearth serve` started here on a free
# loopback port with a fresh database (dropped at the end, failed runs too),
# real Postgres, the real local runtime and the built console
# (HEARTH_CONSOLE_DIR=web/dist). Screenshots of every page go to
# web/artifacts/.
#
#   bash web/test.sh                 # everything
#   bash web/test.sh --unit          # component tests only (no server, no browser)
#
# Binaries: ${HEARTH_BIN_DIR:-target/debug} (relative to the repository root),
# built beforehand. Postgres: ${HEARTH_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432}.
# Installs chromium with apt-get when /usr/bin/chromium is missing (root).
# With HEARTH_WEB_TEST_URL and HEARTH_WEB_TEST_ADMIN_TOKEN set, the browser
# tests use that service instead of starting one (it must serve the console).
set -euo pipefail
cd "$(dirname "$0")"
web="$PWD"
root="$(cd .. && pwd)"
export CI=true

bash ./build.sh

echo
echo "== web: component tests (vitest)"
npx --no-install vitest run
if [ "${1:-}" = "--unit" ]; then
    exit 0
fi

if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "web/test.sh: /usr/bin/chromium is missing; install it as root: apt-get install chromium" >&2
        exit 1
    fi
    echo "== web: installing chromium (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi

rm -rf "$web/artifacts"
mkdir -p "$web/artifacts"
export HEARTH_ARTIFACTS="$web/artifacts"

server_pid=""
db=""
state_dir=""
postgres="${HEARTH_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432}"

cleanup() {
    local rc=$?
    if [ -n "$server_pid" ]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if [ -n "$db" ]; then
        psql -q "$postgres/postgres" -c "drop database if exists \"$db\" with (force)" >/dev/null 2>&1 \
            || echo "could not drop database $db" >&2
    fi
    if [ -n "$state_dir" ]; then
        if [ "$rc" -ne 0 ] && [ -f "$state_dir/serve.log" ]; then
            cp "$state_dir/serve.log" "$web/artifacts/serve.log" 2>/dev/null || true
            echo "== hearth serve log (last 40 lines; all of it in web/artifacts/serve.log)" >&2
            tail -n 40 "$state_dir/serve.log" >&2
        fi
        rm -rf "$state_dir"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${HEARTH_WEB_TEST_URL:-}" ] && [ -n "${HEARTH_WEB_TEST_ADMIN_TOKEN:-}" ]; then
    export HEARTH_URL="$HEARTH_WEB_TEST_URL" HEARTH_ADMIN_TOKEN="$HEARTH_WEB_TEST_ADMIN_TOKEN"
else
    bin_dir="${HEARTH_BIN_DIR:-target/debug}"
    case "$bin_dir" in /*) ;; *) bin_dir="$root/$bin_dir" ;; esac
    for b in hearth hearth-agent; do
        [ -x "$bin_dir/$b" ] || { echo "web/test.sh: $bin_dir/$b is missing (build the workspace first)" >&2; exit 1; }
    done
    db="hearth_web_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    state_dir="$(mktemp -d "${TMPDIR:-/tmp}/hearth-web.XXXXXX")"
    admin_token="web-admin-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    # cpu-small as built in, and a one-GPU profile on accounting-only GPUs so
    # that the pools page has GPU shares and a GPU chart to show.
    cat > "$state_dir/profiles.json" <<'JSON'
[
  {"name": "cpu-small", "description": "1 CPU, 1 GiB, no network"},
  {"name": "gpu-one", "description": "1 GPU (accounting-only in tests)", "gpus": 1, "max_pods": 2}
]
JSON
    DATABASE_URL="$postgres/$db" \
    HEARTH_LISTEN=127.0.0.1:0 \
    HEARTH_ADMIN_TOKEN="$admin_token" \
    HEARTH_STATE_DIR="$state_dir/state" \
    HEARTH_AGENT_BIN="$bin_dir/hearth-agent" \
    HEARTH_CONSOLE_DIR="$web/dist" \
    HEARTH_PROFILES="$state_dir/profiles.json" \
    HEARTH_GPUS=2 \
    HEARTH_STANDBY_MIN=0 \
    HEARTH_STANDBY_MAX=0 \
    HEARTH_SHUTDOWN_GRACE_S=2 \
    HEARTH_DB_MAX_CONNECTIONS=8 \
    HEARTH_CONTROL_K=0 \
    HEARTH_POOL_HISTORY_STEP_S=0.5 \
        "$bin_dir/hearth" serve >"$state_dir/serve.log" 2>&1 &
    server_pid=$!
    base=""
    for _ in $(seq 1 300); do
        base="$(sed -n 's/^Hearth listening on \(http:\/\/[^ ]*\).*/\1/p' "$state_dir/serve.log" | head -n1)"
        [ -n "$base" ] && break
        kill -0 "$server_pid" 2>/dev/null || { echo "hearth serve exited" >&2; exit 1; }
        sleep 0.1
    done
    [ -n "$base" ] || { echo "hearth serve did not start" >&2; exit 1; }
    echo "== web: hearth serve at $base (database $db)"
    export HEARTH_URL="$base" HEARTH_ADMIN_TOKEN="$admin_token"
fi

echo
echo "== web: browser tests (playwright-core, /usr/bin/chromium) against $HEARTH_URL"
timeout --kill-after=10 240 npx --no-install vitest run --config vitest.browser.config.ts
echo "web: screenshots in $web/artifacts/"
