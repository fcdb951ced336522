#!/usr/bin/env bash
# Lints openapi/openapi.json with the pinned Redocly CLI (package-lock.json):
# the recommended rules, any warning an error (redocly.yaml). CI runs it.
set -euo pipefail
cd "$(dirname "$0")"
bash setup.sh >/dev/null
rc=0
out="$(REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
    npx --no-install redocly lint openapi.json --config redocly.yaml 2>&1)" || rc=$?
# Without the boxed notice that Node 20 is near its end for Redocly CLI.
grep -v -e '║' -e '╔' -e '╚' <<<"$out" | grep -v '^ *$' || true
[ "$rc" -eq 0 ] || { echo "openapi/openapi.json: the lint failed" >&2; exit 1; }
