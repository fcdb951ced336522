# The broker: `hearth serve` (API, scheduler, runtimes) and the agent binary.
# Build from the repository root:
#   docker build -f deploy/docker/broker.Dockerfile -t ghcr.io/hearth/hearth:0.1 .
FROM rust:1.94-bookworm AS build
WORKDIR /src
COPY . .
ENV SQLX_OFFLINE=true
RUN cargo build --release --locked -p hearth -p hearth-agent

FROM debian:bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/hearth /usr/local/bin/hearth
COPY --from=build /src/target/release/hearth-agent /usr/local/bin/hearth-agent
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["hearth"]
CMD ["serve"]
