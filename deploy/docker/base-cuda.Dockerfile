# The CUDA base image of Hearth pods: the CUDA runtime, Python and the agent.
# Standby pods open no GPU context: the agent touches the GPU only through
# the jobs it runs.
#   docker build -f deploy/docker/base-cuda.Dockerfile -t ghcr.io/hearth/base-cuda:0.1 .
FROM rust:1.94-bookworm AS build
WORKDIR /src
COPY . .
ENV SQLX_OFFLINE=true
RUN cargo build --release --locked -p hearth-agent

FROM nvidia/cuda:12.6.3-runtime-ubuntu24.04
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-pip \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/hearth-agent /usr/local/bin/hearth-agent
ENV HOME=/tmp PIP_NO_CACHE_DIR=1
USER 65532:65532
EXPOSE 7070
ENTRYPOINT ["hearth-agent"]
