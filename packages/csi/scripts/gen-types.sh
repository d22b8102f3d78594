#!/bin/sh
# Regenerates src/generated/ (TypeScript types for csi.proto) with
# proto-loader-gen-types. The flags must match PROTO_LOADER_OPTIONS in
# src/proto.ts. Usage: scripts/gen-types.sh [OUT_DIR] (default src/generated).
set -eu
cd "$(dirname "$0")/.."
OUT="${1:-src/generated}"
BIN=../../node_modules/.bin/proto-loader-gen-types
rm -rf "$OUT"
mkdir -p "$OUT"
"$BIN" --longs=String --enums=String --defaults --oneofs \
  --grpcLib=@grpc/grpc-js --includeDirs ../../proto/csi/v1 --outDir "$OUT" csi.proto
