#!/usr/bin/env bash
# Builds the console into web/dist (served by `hearth serve` at /console/ when
# HEARTH_CONSOLE_DIR points there): `npm ci` when package-lock.json changed,
# then a type check and `vite build` when any input changed since the last
# build. Idempotent; a no-op (about a second) when dist/ is current.
# Needs Node >= 20.19 and npm; runs as any user, without a terminal.
set -euo pipefail
cd "$(dirname "$0")"

export CI=true npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

if ! command -v node >/dev/null 2>&1; then
    echo "web/build.sh: Node.js >= 20.19 is required (node not found)" >&2
    exit 1
fi
if ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)'; then
    echo "web/build.sh: Node.js >= 20.19 is required (found $(node --version))" >&2
    exit 1
fi

# Dependencies: again only when the lock file changed since the last install.
lock_sum="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f node_modules/.hearth-lock ] || [ "$(cat node_modules/.hearth-lock)" != "$lock_sum" ]; then
    echo "web: npm ci"
    npm ci --no-audit --no-fund --loglevel=error
    echo "$lock_sum" > node_modules/.hearth-lock
fi

# The build's inputs, including the generated API types it is checked against.
inputs_sum="$(
    {
        find src -type f | LC_ALL=C sort
        printf '%s\n' index.html package-lock.json tsconfig.json vite.config.ts ../openapi/typescript/schema.d.ts
    } | while read -r f; do printf '%s  %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$f"; done | sha256sum | cut -d' ' -f1
)"
if [ -f dist/index.html ] && [ -f dist/.hearth-build ] && [ "$(cat dist/.hearth-build)" = "$inputs_sum" ]; then
    echo "web: dist/ is up to date"
    exit 0
fi

echo "web: type check and vite build"
npx --no-install tsc --noEmit -p tsconfig.json
npx --no-install vite build --logLevel warn
echo "$inputs_sum" > dist/.hearth-build
echo "web: built into $(pwd)/dist"
