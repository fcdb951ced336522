# syntax=docker/dockerfile:1
# The broker image: `hearth` (the service) and `hearth-agent`, built from this
# repository. Build from the repository root (the context this file's COPY
# lines name; deploy/check.sh checks they exist):
#   docker build -f deploy/docker/broker.Dockerfile -t ghcr.io/hearth/broker:0.1 .
# With the CUDA control executor (loaded at run time; without a GPU the
# control endpoint stays on the CPU and says why):
#   docker build -f deploy/docker/broker.Dockerfile --build-arg CARGO_FEATURES=hearth/cuda ...

# The workspace's rust-version (Cargo.toml); check.sh holds them together.
ARG RUST_VERSION=1.94
ARG DEBIAN_RELEASE=bookworm

# The web console (web/, typed against the committed OpenAPI types), served
# by the broker at /console/ from HEARTH_CONSOLE_DIR.
FROM node:20-${DEBIAN_RELEASE}-slim AS console
WORKDIR /src/web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY openapi/typescript /src/openapi/typescript
COPY web ./
RUN npx --no-install tsc --noEmit -p tsconfig.json && npx --no-install vite build --logLevel warn

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
WORKDIR /src
# sqlx checks its queries against the committed .sqlx/: no database at build.
ENV SQLX_OFFLINE=true \
    CARGO_TERM_COLOR=never \
    CARGO_INCREMENTAL=0
COPY Cargo.toml Cargo.lock ./
COPY .sqlx ./.sqlx
COPY migrations ./migrations
COPY kernels ./kernels
COPY server ./server
COPY tests ./tests
ARG CARGO_FEATURES=""
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p hearth -p hearth-agent --features "${CARGO_FEATURES}" \
    && install -D -m 0755 -t /out target/release/hearth target/release/hearth-agent

FROM debian:${DEBIAN_RELEASE}-slim
# A fixed non-root user: the Deployment runs as 10001:10001 with a read-only
# root filesystem, and the namespace enforces `runAsNonRoot`.
RUN groupadd --system --gid 10001 hearth \
    && useradd --system --uid 10001 --gid hearth --home-dir /nonexistent \
        --no-create-home --shell /usr/sbin/nologin hearth
COPY --from=build /out/hearth /out/hearth-agent /usr/local/bin/
COPY --from=console /src/web/dist /usr/share/hearth/console
ENV HEARTH_CONSOLE_DIR=/usr/share/hearth/console
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["hearth"]
CMD ["serve"]
