#!/usr/bin/env bash
# Compile-checks every kernels/*.cu to PTX with NVRTC (no GPU, no CUDA toolkit):
# NVRTC comes from the nvidia-cuda-nvrtc-cu12 wheel, installed into a venv
# (default .venv-nvrtc next to this script, override with NVRTC_VENV) when no
# Python on PATH can import it. Fails with the NVRTC log on the first error.
# Usage: kernels/compile-check.sh [ARCH...]   (default: compute_80 compute_90)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
archs=("$@")
[ ${#archs[@]} -eq 0 ] && archs=(compute_80 compute_90)

py=python3
if ! "$py" -c 'import nvidia.cuda_nvrtc' 2>/dev/null; then
    venv="${NVRTC_VENV:-$here/.venv-nvrtc}"
    if ! "$venv/bin/python" -c 'import nvidia.cuda_nvrtc' 2>/dev/null; then
        echo "installing nvidia-cuda-nvrtc-cu12 into $venv" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check 'nvidia-cuda-nvrtc-cu12>=12.4,<13'
    fi
    py="$venv/bin/python"
fi

shopt -s nullglob
sources=("$here"/*.cu)
[ ${#sources[@]} -gt 0 ] || { echo "no kernels/*.cu found" >&2; exit 1; }
for arch in "${archs[@]}"; do
    "$py" "$here/nvrtc_compile.py" --arch "$arch" "${sources[@]}"
done
