#!/usr/bin/env bash
# make venv: .venv/ at the repository root with the Python client installed (editable) and
# the pinned test and code-generation tools of pyclient/requirements-dev.txt. Idempotent:
# does nothing when the venv exists and neither the requirements nor pyproject.toml changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.venv
stamp=$venv/.raygo-installed
want=$(cat "$root/pyclient/requirements-dev.txt" "$root/pyclient/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "ensure-venv: $python not found" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ]; then
  echo "==> $python -m venv .venv" >&2
  "$python" -m venv "$venv"
fi
echo "==> pip install -r pyclient/requirements-dev.txt, then the client (editable)" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/pyclient/requirements-dev.txt"
# No build isolation: the pinned setuptools above builds the editable install, offline.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e "$root/pyclient"
echo "$want" > "$stamp"
