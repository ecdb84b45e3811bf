#!/usr/bin/env bash
# make bench-ray, autoscaler cost: raygo's autoscaler plan against Ray's two planners
# (v1 and v2, called in process from the Ray of .venv-ray/) and against the integer
# optimum (HiGHS MIP, highspy in .venv-bench/), on seeded demand sets; prints
# `BENCH <name> <value> <unit>` lines (tests/compat/bench/autoscaler_cost/main.go says
# what each is). No Ray cluster runs, so no network namespace is needed.
#
# SETS (default 1000) demand sets from SEED (default 1); the optimum on the first
# OPT_SETS (default 200) with OPT_TIME_LIMIT seconds per set (default 10).
# About 3 minutes on 2 cores: Ray's planners ~15 s, the MIP ~2.5 min (most sets solve in
# under a second, a few take seconds), raygo and the checks ~10 s. Extra arguments go to
# eval (-v: every set's costs and shortfall reasons).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
SETS=${SETS:-1000}
SEED=${SEED:-1}
OPT_SETS=${OPT_SETS:-200}
OPT_TIME_LIMIT=${OPT_TIME_LIMIT:-10}
python=${PYTHON:-python3}

# venv DIR REQUIREMENTS: create DIR and install REQUIREMENTS into it, again only when
# the file changes (the stamp holds its hash), as scripts/compat.sh does for .venv-ray.
venv() {
  local dir=$1 req=$2 want
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ ! -x "$dir/bin/python" ] || [ "$(cat "$dir/.raygo-installed" 2>/dev/null)" != "$want" ]; then
    [ -x "$dir/bin/python" ] || "$python" -m venv "$dir"
    echo "==> pip install -r $req into $dir" >&2
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    echo "$want" > "$dir/.raygo-installed"
  fi
}
venv .venv-ray tests/compat/requirements-ray.txt
venv .venv-bench tests/compat/requirements-bench.txt

out=.cache/autoscaler-cost
mkdir -p "$out"
go build -o "$out/autoscaler_cost" ./tests/compat/bench/autoscaler_cost
"$out/autoscaler_cost" gen -sets "$SETS" -seed "$SEED" -out "$out/sets.json"
.venv-ray/bin/python tests/compat/bench/autoscaler_cost_ray.py "$out/sets.json" "$out/plans.json"
.venv-bench/bin/python tests/compat/bench/autoscaler_cost_mip.py "$out/sets.json" "$out/plans.json" \
  --first "$OPT_SETS" --time-limit "$OPT_TIME_LIMIT"
"$out/autoscaler_cost" eval -sets "$out/sets.json" -plans "$out/plans.json" "$@"
