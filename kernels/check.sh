#!/usr/bin/env bash
# GPU check (one GPU, well under 8 minutes): builds the gpu_check example with
# the `cuda` feature and runs it:
#   1. the CUDA executor equals the CPU executor on >= 1,000,000 events of
#      random policies through the resident-session path (GPU_CHECK_EVENTS to
#      change), exit 1 on any mismatch;
#   2. device-resident (one graph launch, CUDA graph WHILE node) vs host
#      round-trip timing for N in {256, 2048, 16384} sessions x H in {2, 8, 32}
#      steps, ratio per cell, and the same batch with residency off;
#   3. the 100,000-session swarm through the driver on the GPU, verified: A/P*.
# Needs an NVIDIA driver (CUDA >= 12.3 for conditional graph nodes) and
# libnvrtc.so.12 on the loader path (e.g. from the nvidia-cuda-nvrtc-cu12 wheel:
# export LD_LIBRARY_PATH=$(python3 -c 'import nvidia.cuda_nvrtc,os;print(os.path.join(nvidia.cuda_nvrtc.__path__[0],"lib"))')).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target-control}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
timeout 450 cargo run --release -p hearth-control --features cuda --example gpu_check
