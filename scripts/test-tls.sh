#!/usr/bin/env bash
# Runs one integration package (tests/actorstasks: drivers, raylets, workers, the GCS)
# whole with mutual TLS on every endpoint (RAYGO_USE_TLS=1), on a throwaway CA and
# loopback certificate. (pyclient/tests/test_tls.py does the same for the Python client.)
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
while IFS= read -r kv; do export "${kv?}"; done < <("$go" run ./internal/testutil/tlscerts/gen "$dir")
echo "==> tests/actorstasks with RAYGO_USE_TLS=1"
"$go" test -count=1 -timeout 10m ./tests/actorstasks/
