# syntax=docker/dockerfile:1
#
# gslb in a container.
#
# - Config and policies: mount /etc/gslb read-only (/etc/gslb/gslb.toml, /etc/gslb/policies/).
# - State (drill state file and audit log): /var/lib/gslb, a volume owned by the image's
#   non-root user (uid 10001). Mount a persistent volume there so drills and the audit log
#   survive a restart; a bind mount must be writable by uid 10001.
# - A token is REQUIRED: the admin API listens on 0.0.0.0:9464 here so it can be reached from
#   outside the container, and gslb refuses to start (exit 2) on a non-loopback address without
#   one. Give it as GSLB_ADMIN_TOKEN, or as `[admin] token_file` pointing at a mounted secret
#   (e.g. /run/secrets/gslb-admin-token).
# - Provider credentials (AWS, Cloudflare) come from the environment, mounted secrets or the
#   platform role, never from the image.
# - HEALTHCHECK: `gslb healthcheck` gets /healthz on the admin address of GSLB_CONFIG's settings
#   (GSLB_ADMIN__LISTEN below; 0.0.0.0 is reached as 127.0.0.1): the image has no curl or wget.
#   Run it read-only: `docker run --read-only -v gslb-state:/var/lib/gslb
#   -v "$PWD/etc:/etc/gslb:ro" -e GSLB_ADMIN_TOKEN ...`.

# Build stage: release binary of gslb.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin gslb

# Runtime stage: small image, non-root user, config and policies mounted read-only.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates=20230311* \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --no-create-home gslb \
    && install -d -o gslb -g gslb -m 0750 /var/lib/gslb
COPY --from=build /src/target/release/gslb /usr/local/bin/gslb
USER 10001
# An absolute [state] dir is used as is (a relative one would sit next to the read-only
# /etc/gslb/gslb.toml).
ENV GSLB_CONFIG=/etc/gslb/gslb.toml \
    GSLB_STATE__DIR=/var/lib/gslb \
    GSLB_ADMIN__LISTEN=0.0.0.0:9464
VOLUME /var/lib/gslb
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["gslb", "healthcheck"]
ENTRYPOINT ["gslb", "run"]
