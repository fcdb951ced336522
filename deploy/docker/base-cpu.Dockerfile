# The CPU base image of Hearth pods: Python and the agent, as its entrypoint
# (the Kubernetes runtime sets the command and its flags).
#   docker build -f deploy/docker/base-cpu.Dockerfile -t ghcr.io/hearth/base-cpu:0.1 .
FROM rust:1.94-bookworm AS build
WORKDIR /src
COPY . .
ENV SQLX_OFFLINE=true
RUN cargo build --release --locked -p hearth-agent

FROM python:3.12-slim-bookworm
COPY --from=build /src/target/release/hearth-agent /usr/local/bin/hearth-agent
# Jobs run as this user; the pod's root filesystem is read-only, so HOME and
# pip's caches live in the writable /tmp.
ENV HOME=/tmp PIP_NO_CACHE_DIR=1
USER 65532:65532
EXPOSE 7070
ENTRYPOINT ["hearth-agent"]
