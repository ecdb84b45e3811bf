#!/usr/bin/env bash
# make compat: installs Ray from PyPI into .venv-ray/ (once; a large download), then runs the
# placement-group scripts of tests/compat under Ray and under raygo and compares them.
# Needs .venv/ (`make venv`) and bin/raygo (`make build`). Extra arguments go to run.py
# (script names, to run only those).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv=.venv-ray
req=tests/compat/requirements-ray.txt
stamp=$venv/.raygo-installed
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python=${PYTHON:-python3}
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  echo "==> pip install -r $req into $venv (Ray from PyPI)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  echo "$want" > "$stamp"
fi
exec .venv/bin/python tests/compat/run.py "$@"
