#!/usr/bin/env bash
# Installs the pinned tools of the OpenAPI document and its SDKs: Node
# packages from package-lock.json into openapi/node_modules (the linter,
# openapi-typescript, TypeScript 5, openapi-fetch) and Python packages from
# requirements.txt into openapi/.venv (openapi-python-client, ruff, mypy,
# pytest and the SDK's dependencies). Quick when nothing changed.
set -euo pipefail
cd "$(dirname "$0")"

command -v node >/dev/null && command -v npm >/dev/null \
    || { echo "openapi/setup.sh: Node.js 20 (node, npm) is required" >&2; exit 1; }

# npm ci reinstalls from scratch: only when the lockfile changed.
stamp=node_modules/.hearth-lock
if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
    echo "installing the Node tools (npm ci)"
    npm ci --no-audit --no-fund --loglevel=error
    cp package-lock.json "$stamp"
fi

if [ ! -x .venv/bin/python ]; then
    echo "creating openapi/.venv"
    python3 -m venv .venv
fi
if ! cmp -s requirements.txt .venv/.hearth-requirements 2>/dev/null; then
    echo "installing the Python tools (requirements.txt)"
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
    cp requirements.txt .venv/.hearth-requirements
fi
