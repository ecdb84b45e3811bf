#!/usr/bin/env bash
# make compat: installs Ray from PyPI into .venv-ray/ (once; a large download), then runs the
# placement-group scripts of tests/compat under Ray and under raygo and compares them.
# Needs .venv/ (`make venv`) and bin/raygo (`make build`). Extra arguments go to run.py
# (script names, to run only those). With --bench first (make bench-ray) it runs
# tests/compat/bench.py instead: the same Ray-API benchmark on both clusters.
#
# Both clusters run inside a network namespace this script creates (scripts/in-netns.sh),
# with loopback as its only interface: Ray advertises the machine's own address even when
# told 127.0.0.1, and must reach nothing but loopback. If no namespace can be created, it
# stops before installing or running anything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/in-netns.sh true

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
runner=tests/compat/run.py
if [ "${1:-}" = "--bench" ]; then
  shift
  runner=tests/compat/bench.py
fi
exec scripts/in-netns.sh .venv/bin/python "$runner" "$@"
