# syntax=docker/dockerfile:1
#
# gslb in a container (docs/deployment.md, "Container image").
#
# - Runtime: gcr.io/distroless/cc-debian12 (glibc, libgcc, the Debian CA bundle at
#   /etc/ssl/certs/ca-certificates.crt, which rustls-platform-verifier reads; no shell, no
#   package manager, no curl). Runs as uid/gid 10001.
# - Config and policies: mount /etc/gslb read-only (/etc/gslb/gslb.toml, /etc/gslb/policies/).
# - State (drill state file and audit log): /var/lib/gslb, a volume owned by uid 10001. Mount a
#   persistent volume there so drills and the audit log survive a restart; a bind mount must be
#   writable by uid 10001.
# - A token is REQUIRED: the admin API listens on 0.0.0.0:9464 here so it can be reached from
#   outside the container, and gslb refuses to start (exit 2) on a non-loopback address without
#   one. Give it as GSLB_ADMIN_TOKEN, or as `[admin] token_file` pointing at a mounted secret
#   (e.g. /run/secrets/gslb/admin-token).
# - Provider credentials (AWS, Cloudflare) come from the environment, mounted secrets or the
#   platform role, never from the image.
# - HEALTHCHECK: `gslb healthcheck` gets /healthz on the admin address of GSLB_CONFIG's settings
#   (GSLB_ADMIN__LISTEN below; 0.0.0.0 is reached as 127.0.0.1).
#   Run it read-only: `docker run --read-only -v gslb-state:/var/lib/gslb
#   -v "$PWD/etc:/etc/gslb:ro" -e GSLB_ADMIN_TOKEN ...`.
#
# Build: docker build --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" .

# Build stage: release binary of gslb. The dependency layer is built from the manifests and
# stub sources alone, so a change to gslb's own code rebuilds only gslb's crates
# (tests/deploy_files.rs checks that the manifests and stubs form a complete workspace).
FROM rust:1.95-slim-bookworm AS build
# protoc: etcd-client's build script compiles etcd's protobuf API (Debian protobuf-compiler),
# whose imports need the well-known .proto files (Debian libprotobuf-dev, only *recommended* by
# protobuf-compiler). .ci/check-protoc.sh proves the pair works before the long build starts.
WORKDIR /src
COPY .ci/check-protoc.sh .ci/
RUN apt-get update \
    && apt-get install -y --no-install-recommends protobuf-compiler=3.21.12* libprotobuf-dev=3.21.12* \
    && rm -rf /var/lib/apt/lists/* \
    && sh .ci/check-protoc.sh
COPY Cargo.toml Cargo.lock ./
COPY core/Cargo.toml core/
COPY providers/api/Cargo.toml providers/api/
COPY providers/route53/Cargo.toml providers/route53/
COPY providers/cloudflare/Cargo.toml providers/cloudflare/
COPY bench/Cargo.toml bench/
# Stub sources: every target the manifests declare, empty.
RUN mkdir -p src benches bench/src core/src providers/api/src providers/route53/src providers/cloudflare/src \
    && echo 'fn main() {}' > src/main.rs \
    && echo 'fn main() {}' > bench/src/main.rs \
    && echo 'fn main() {}' > benches/engine.rs \
    && touch src/lib.rs core/src/lib.rs providers/api/src/lib.rs \
        providers/route53/src/lib.rs providers/cloudflare/src/lib.rs \
    && cargo build --release --locked --bin gslb \
    && rm -rf src benches bench/src core/src providers/*/src
COPY . .
# COPY keeps the files' own times, which can be older than the stubs: touch the crate roots so
# cargo rebuilds every workspace crate from the real sources.
RUN touch src/main.rs src/lib.rs core/src/lib.rs providers/*/src/lib.rs \
    && cargo build --release --locked --bin gslb \
    && install -d -m 0750 /out/var/lib/gslb

# Runtime stage: distroless, non-root, config and policies mounted read-only.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gslb" \
      org.opencontainers.image.description="Multi-cloud GSLB health controller: per-region probes, a pure failover engine, fenced DNS provider writes." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="gcr.io/distroless/cc-debian12:nonroot"
COPY --from=build --chown=10001:10001 /out/var/lib/gslb /var/lib/gslb
COPY --from=build /src/target/release/gslb /usr/local/bin/gslb
USER 10001:10001
# An absolute [state] dir is used as is (a relative one would sit next to the read-only
# /etc/gslb/gslb.toml).
# One glibc malloc arena: at 5,000 services the default (eight per core) kept about 60 MB more
# of freed memory spread over the threads' arenas, at no measurable CPU cost on 2 cores
# (docs/benchmarks.md, "Allocator"). Raise it on hosts with many cores if malloc contends.
ENV MALLOC_ARENA_MAX=1 \
    GSLB_CONFIG=/etc/gslb/gslb.toml \
    GSLB_STATE__DIR=/var/lib/gslb \
    GSLB_ADMIN__LISTEN=0.0.0.0:9464
VOLUME /var/lib/gslb
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["gslb", "healthcheck"]
ENTRYPOINT ["gslb", "run"]
