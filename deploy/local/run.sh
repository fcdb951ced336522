#!/usr/bin/env bash
# Sets up and runs Hearth with its embedded defaults on a fresh Debian machine:
# the local runtime (bubblewrap sandboxes, cgroup limits), PostgreSQL on
# 127.0.0.1:5432 (the `hearth` database is created and migrated on start),
# the API on 127.0.0.1:8080 and the web console at /console/. Extra arguments
# go to `hearth serve`.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v bwrap >/dev/null || ! command -v slirp4netns >/dev/null \
    || ! { command -v ip || test -x /usr/sbin/ip; } >/dev/null; then
    echo "installing bubblewrap, slirp4netns and iproute2" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap slirp4netns iproute2 >/dev/null
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    echo "starting PostgreSQL" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    for _ in $(seq 1 60); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done
fi

SQLX_OFFLINE=true cargo build --release --locked --bins >&2
# The web console (Node.js 20 and npm), served at /console/.
bash web/build.sh >&2
export HEARTH_CONSOLE_DIR="${HEARTH_CONSOLE_DIR:-$PWD/web/dist}"
exec target/release/hearth serve "$@"
