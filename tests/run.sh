#!/usr/bin/env bash
# Sets up what the tests need on a fresh Debian machine (bubblewrap, a running
# PostgreSQL), builds the workspace's binaries and runs every test, then
# schemathesis against the live service (tests/schemathesis.sh), then the
# generated SDKs: regenerated and compared, type-checked, and tested against
# the live service (openapi/check.sh), then the web console's component and
# browser tests (web/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null || ! command -v slirp4netns >/dev/null || ! command -v openssl >/dev/null \
    || ! { command -v ip || test -x /usr/sbin/ip; } >/dev/null; then
    echo "installing bubblewrap, slirp4netns, iproute2 and openssl"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap slirp4netns iproute2 openssl >/dev/null
fi

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    echo "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    for _ in $(seq 1 60); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done
fi

# Queries are checked at build time against the committed .sqlx/ cache, so the
# build needs no database; the tests then use the real server.
export SQLX_OFFLINE=true
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
export HEARTH_TEST_POSTGRES="${HEARTH_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432}"

cargo build --workspace --bins --locked
cargo test --workspace --locked "$@"

# The served OpenAPI document against the live service: schemathesis with a
# tenant's key and with the admin token.
bash tests/schemathesis.sh

# The Python and TypeScript SDKs (openapi/): installs their pinned tools.
bash openapi/check.sh

# The web console (web/): its component tests, then its browser tests in
# Debian's chromium (installed if missing) against a live service.
bash web/test.sh
