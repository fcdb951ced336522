# syntax=docker/dockerfile:1
# Base image of CPU job pods (profile image `ghcr.io/hearth/base-cpu:0.1`):
# Python 3 with pip and venv for dependency environments, and `hearth-agent`
# as the entrypoint. On Kubernetes the pod is the sandbox (`--sandbox none`),
# so no bubblewrap. Build from the repository root:
#   docker build -f deploy/docker/python-cpu.Dockerfile -t ghcr.io/hearth/base-cpu:0.1 .

ARG RUST_VERSION=1.94
ARG DEBIAN_RELEASE=bookworm

# The agent is std-only: this stage compiles it and hearth-core alone (and is
# shared, layer for layer, with python-cuda.Dockerfile's).
FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS agent
WORKDIR /src
ENV CARGO_TERM_COLOR=never CARGO_INCREMENTAL=0
COPY Cargo.toml Cargo.lock ./
COPY server ./server
COPY tests ./tests
RUN cargo build --release --locked -p hearth-agent \
    && install -D -m 0755 -t /out target/release/hearth-agent

FROM python:3.12-slim-${DEBIAN_RELEASE}
RUN groupadd --system --gid 10001 hearth \
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
