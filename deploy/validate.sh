#!/usr/bin/env bash
# Validates deploy/kubernetes/ and the pod specs the Kubernetes runtime generates (golden files
# written by `cargo test -p hearth-kube --test golden`) against the
# Kubernetes 1.33 schemas, strictly (unknown fields are errors). The
# validator accepts bad names and quantities: the runtime checks those
# itself (server/kube/src/spec.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.37.0
venv="${XDG_CACHE_HOME:-$HOME/.cache}/hearth/kubernetes-validate-$VERSION"
if [[ ! -x "$venv/bin/kubernetes-validate" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "kubernetes-validate==$VERSION"
fi
shopt -s nullglob
files=(deploy/generated/*.yaml deploy/kubernetes/*.yaml)
[[ ${#files[@]} -gt 0 ]] || { echo "no manifests under deploy/generated or deploy/kubernetes" >&2; exit 1; }
"$venv/bin/kubernetes-validate" --strict --quiet -k 1.33.0 "${files[@]}"
echo "validated ${#files[@]} manifests against Kubernetes 1.33"
