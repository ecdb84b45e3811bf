#!/usr/bin/env bash
# Fails when the committed generated code differs from what protos/*.proto generate.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/scripts/gen-proto.sh" "$tmp"
if ! diff -r "$tmp" "$root/protos/raygopb" >/dev/null; then
  echo "protos/raygopb is out of sync with protos/*.proto: run 'make proto' and commit" >&2
  diff -r "$tmp" "$root/protos/raygopb" | head -20 >&2
  exit 1
fi
echo "generated code in sync with protos/"
