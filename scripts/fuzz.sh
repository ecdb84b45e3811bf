#!/usr/bin/env bash
# Runs every Go fuzz target (func FuzzX in a _test.go file) for a short, bounded time:
# scripts/fuzz.sh [duration, default 5s]. A failing input is written under the package's
# testdata/fuzz/ and the script exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-5s}
go=${GO:-go}
found=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "==> fuzz $pkg $name ($fuzztime)"
  "$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"
  found=$((found + 1))
done < <(git ls-files '*_test.go' | xargs grep -Ho '^func Fuzz[A-Za-z0-9_]*' | sed 's/func //' | sort)
if [ "$found" -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
echo "fuzz: $found targets passed"
