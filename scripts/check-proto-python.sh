#!/usr/bin/env bash
# Fails when the committed Python stubs differ from what protos/*.proto generate.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/scripts/gen-proto-python.sh" "$tmp"
committed=$root/pyclient/raygo/_proto
if ! diff -r -x __pycache__ "$tmp" "$committed" >/dev/null; then
  echo "pyclient/raygo/_proto is out of sync with protos/*.proto: run 'make proto' and commit" >&2
  diff -r -x __pycache__ "$tmp" "$committed" | head -20 >&2
  exit 1
fi
echo "Python stubs in sync with protos/"
