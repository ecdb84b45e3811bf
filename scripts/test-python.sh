#!/usr/bin/env bash
# The Python client's tests: pytest from .venv/ (`make venv`) on pyclient/tests, which start
# their own clusters from bin/raygo (`make build`). Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ ! -x .venv/bin/python ]; then
  echo "test-python: .venv/ is missing: run 'make venv'" >&2
  exit 1
fi
# A hang fails instead of stalling CI; the suite takes well under a minute.
exec timeout --kill-after=10s "${PYTEST_TIMEOUT:-600}" \
  .venv/bin/python -m pytest -p no:cacheprovider -q pyclient/tests "$@"
