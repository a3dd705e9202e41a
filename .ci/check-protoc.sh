#!/usr/bin/env sh
# Proves that protoc can build etcd-client's gRPC code: compiles a one-line .proto that imports
# google/protobuf/descriptor.proto, as etcd's API protos do (through google/api/annotations.proto).
# protoc alone (Debian `protobuf-compiler`) lacks the well-known .proto files; they are in Debian
# `libprotobuf-dev`, which protobuf-compiler only *recommends*, so an install with
# --no-install-recommends has protoc but cannot build gslb.
# Exit 0 when the proof compiles, 1 with a message naming the missing package otherwise.
# POSIX sh: the Dockerfile's build stage runs it too.
set -eu
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
if ! command -v protoc >/dev/null 2>&1; then
    echo "check-protoc: protoc not found: install Debian package protobuf-compiler" >&2
    exit 1
fi
printf 'syntax = "proto3"; import "google/protobuf/descriptor.proto";\n' >"$dir/proof.proto"
if ! protoc --proto_path="$dir" --descriptor_set_out="$dir/proof.pb" "$dir/proof.proto" \
    2>"$dir/err"; then
    cat "$dir/err" >&2
    echo "check-protoc: protoc cannot find google/protobuf/descriptor.proto: install Debian package libprotobuf-dev (the well-known .proto files etcd-client's build needs)" >&2
    exit 1
fi
echo "check-protoc: $(protoc --version) compiles an import of google/protobuf/descriptor.proto"
