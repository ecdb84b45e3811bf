#!/usr/bin/env bash
# make compat: installs Ray from PyPI into .venv-ray/ (once; a large download), then runs the
# placement-group scripts of tests/compat under Ray and under raygo and compares them.
# Needs .venv/ (`make venv`) and bin/raygo (`make build`). Extra arguments go to run.py
# (script names, to run only those). With --bench first (make bench-ray) it runs
# tests/compat/bench.py instead: the same Ray-API benchmark on both clusters.
#
# Both clusters run inside a network namespace this script creates (unshare -n as root,
# else unshare -rn in a user namespace), with loopback as its only interface: Ray
# advertises the machine's own address even when told 127.0.0.1, and must reach nothing
# but loopback. If no namespace can be created, it stops before running anything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

netns=()
for candidate in "unshare -n" "unshare -rn"; do
  # shellcheck disable=SC2086 # the candidate is a command and its flags
  if $candidate ip link set lo up 2>/dev/null; then
    read -r -a netns <<< "$candidate"
    break
  fi
done
if [ ${#netns[@]} -eq 0 ]; then
  echo "compat: cannot create a network namespace with loopback up (unshare -n / unshare -rn, and ip from iproute2); not running Ray" >&2
  exit 1
fi

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
# shellcheck disable=SC2016 # expanded by the inner shell
exec "${netns[@]}" bash -c 'ip link set lo up && exec .venv/bin/python "$0" "$@"' "$runner" "$@"
