# syntax=docker/dockerfile:1
# Base image of GPU job pods (profile image `ghcr.io/hearth/base-cuda:0.1`):
# the CUDA 12.6 runtime (the driver comes from the node), Python 3 with pip
# and venv, and `hearth-agent` as the entrypoint. No bubblewrap: on
# Kubernetes the pod is the sandbox. Build from the repository root:
#   docker build -f deploy/docker/python-cuda.Dockerfile -t ghcr.io/hearth/base-cuda:0.1 .

ARG RUST_VERSION=1.94
ARG DEBIAN_RELEASE=bookworm

# Identical to python-cpu.Dockerfile's agent stage (one cached build). Built
# against bookworm's glibc 2.36; Ubuntu 24.04 below has 2.39.
FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS agent
WORKDIR /src
ENV CARGO_TERM_COLOR=never CARGO_INCREMENTAL=0
COPY Cargo.toml Cargo.lock ./
COPY server ./server
COPY tests ./tests
RUN cargo build --release --locked -p hearth-agent \
    && install -D -m 0755 -t /out target/release/hearth-agent

FROM nvidia/cuda:12.6.3-base-ubuntu24.04
# Ask the NVIDIA container toolkit for compute and nvidia-smi only.
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-pip python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 hearth \
    && useradd --system --uid 10001 --gid hearth --home-dir /work \
        --no-create-home --shell /usr/sbin/nologin hearth \
    && install -d -o hearth -g hearth -m 0750 /work
COPY --from=agent /out/hearth-agent /usr/local/bin/hearth-agent
# The root filesystem is read-only in the pod: everything a job or pip writes
# goes to the `work` (/work) and `tmp` (/tmp) volumes. /work is the hearth
# user's for `docker run` too.
ENV HOME=/tmp \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CACHE_DIR=/tmp/pip-cache
USER 10001:10001
WORKDIR /work
EXPOSE 7070
ENTRYPOINT ["hearth-agent"]
CMD ["--listen", "tcp:0.0.0.0:7070", "--root", "/work", "--sandbox", "none"]
