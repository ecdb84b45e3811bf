#!/usr/bin/env bash
# Generates the Go code of protos/*.proto into OUT (default protos/raygopb).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/protos/raygopb}
mkdir -p "$out"
cd "$root/protos"
PATH="$root/.cache/bin:$PATH" protoc -I . \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  ./*.proto
