#!/usr/bin/env bash
# Generates the SDKs from openapi/openapi.json with the pinned generators
# (setup.sh installs them):
#   python/hearth_client/   openapi-python-client (requirements.txt)
#   typescript/schema.d.ts  openapi-typescript (package-lock.json), used with
#                           openapi-fetch
# Both are committed; the hand-written layers beside them (python/hearth/,
# typescript/index.ts) are not touched. A generator that prints a warning
# fails the script.
#
#   bash openapi/generate.sh           regenerate in place
#   bash openapi/generate.sh --check   regenerate elsewhere and fail on a diff
set -euo pipefail
cd "$(dirname "$0")"
bash setup.sh >/dev/null

check=""
[ "${1:-}" = "--check" ] && check=1

out="$(mktemp -d "${TMPDIR:-/tmp}/hearth-sdk.XXXXXX")"
trap 'rm -rf "$out"' EXIT

export PATH="$PWD/.venv/bin:$PATH"

# Python: the package alone (`--meta none`); python/pyproject.toml is ours.
.venv/bin/openapi-python-client generate --path openapi.json --meta none \
    --config python-client.yaml --output-path "$out/hearth_client" --fail-on-warning \
    >"$out/python.log" 2>&1 || { cat "$out/python.log" >&2; exit 1; }
if grep -v -x -e "Generating $out/hearth_client" "$out/python.log" | grep -q .; then
    echo "openapi-python-client printed more than its progress:" >&2
    cat "$out/python.log" >&2
    exit 1
fi

# TypeScript: the types of every path and schema. From the output folder,
# so that it validates with its own defaults, not with lint.sh's rules
# (redocly.yaml here), which lint.sh applies.
here="$PWD"
(cd "$out" && REDOCLY_TELEMETRY=off "$here/node_modules/.bin/openapi-typescript" \
    "$here/openapi.json" --output schema.d.ts) >"$out/typescript.log" 2>&1 \
    || { cat "$out/typescript.log" >&2; exit 1; }
if grep -v -e '^✨ openapi-typescript' -e '^🚀 .*openapi.json → ' "$out/typescript.log" | grep -q .; then
    echo "openapi-typescript printed more than its progress:" >&2
    cat "$out/typescript.log" >&2
    exit 1
fi

if [ -n "$check" ]; then
    status=0
    diff -ru python/hearth_client "$out/hearth_client" -x __pycache__ -x .mypy_cache -x .ruff_cache \
        || status=1
    diff -u typescript/schema.d.ts "$out/schema.d.ts" || status=1
    [ "$status" -eq 0 ] \
        || { echo "the SDKs are stale: run \`bash openapi/generate.sh\`" >&2; exit 1; }
    echo "the SDKs match openapi/openapi.json"
else
    rm -rf python/hearth_client
    mkdir -p python typescript
    cp -r "$out/hearth_client" python/hearth_client
    cp "$out/schema.d.ts" typescript/schema.d.ts
    echo "generated openapi/python/hearth_client and openapi/typescript/schema.d.ts"
fi
