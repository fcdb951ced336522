#!/usr/bin/env bash
# The SDKs' checks, from tests/run.sh (CI) or alone: the pinned tools
# installed (setup.sh), the SDKs regenerated from openapi.json and compared
# with the committed ones (the generators must print no warning), mypy
# --strict on the Python SDK, tsc --strict on the TypeScript one, then both
# against the live service (test-live.sh).
set -euo pipefail
cd "$(dirname "$0")"

bash setup.sh
echo "== SDKs: regenerated and compared"
bash generate.sh --check
echo "== SDKs: mypy --strict"
(cd python && ../.venv/bin/mypy --strict hearth_client hearth tests)
echo "== SDKs: tsc --strict --noEmit"
npx --no-install tsc -p typescript/tsconfig.json --strict --noEmit
echo "tsc: no errors"

(cd .. && SQLX_OFFLINE=true cargo build --workspace --bins --locked -q)
bash test-live.sh
