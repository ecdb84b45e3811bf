#!/usr/bin/env bash
# Fails when `go mod tidy` would change go.mod or go.sum.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'cp "$tmp/go.mod" go.mod; cp "$tmp/go.sum" go.sum; rm -rf "$tmp"' EXIT
cp go.mod go.sum "$tmp/"
go mod tidy
if ! diff -q "$tmp/go.mod" go.mod >/dev/null || ! diff -q "$tmp/go.sum" go.sum >/dev/null; then
  echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit" >&2
  diff -u "$tmp/go.mod" go.mod >&2 || true
  exit 1
fi
