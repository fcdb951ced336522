#!/usr/bin/env bash
# Regenerates .sqlx/ (the build-time query cache committed for offline builds)
# against a scratch database migrated to the current schema. Run after changing
# a query or a migration.
set -euo pipefail
cd "$(dirname "$0")/.."
server="${HEARTH_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432}"
db="hearth_prepare_$$"
psql -q "$server/postgres" -c "create database $db"
trap 'psql -q "$server/postgres" -c "drop database if exists $db"' EXIT
for f in migrations/*.sql; do psql -q -v ON_ERROR_STOP=1 "$server/$db" -f "$f"; done
rm -rf .sqlx && mkdir .sqlx
# Touching the crates that hold queries makes their macros run again.
touch server/store/src/lib.rs server/hearth/src/lib.rs
SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$PWD/.sqlx" DATABASE_URL="$server/$db" \
    cargo check -p hearth-store -p hearth --all-targets --quiet
echo "wrote $(ls .sqlx | wc -l) queries to .sqlx/"
