# syntax=docker/dockerfile:1
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
    && useradd --system --uid 10001 --no-create-home gslb
COPY --from=build /src/target/release/gslb /usr/local/bin/gslb
USER 10001
# /etc/gslb/gslb.toml and /etc/gslb/policies/ are mounted read-only; AWS credentials come from
# the environment or the platform role, never from the image.
ENV GSLB_CONFIG=/etc/gslb/gslb.toml \
    GSLB_ADMIN__LISTEN=0.0.0.0:9464
EXPOSE 9464
ENTRYPOINT ["gslb", "run"]
