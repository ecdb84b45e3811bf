"""make bench-ray: the same Ray-API benchmark scripts (tests/compat/bench/pg_rate.py,
py_tasks.py and py_actor_calls.py) on a Ray cluster and on a raygo cluster of one shape (run.py's: a head and
three nodes on this machine, memory store on both sides), one after the other in one run,
inside a network namespace (scripts/compat.sh creates it). Prints each side's figures and
the ratios:

    BENCH pg_rate_ray <n> groups/s
    BENCH pg_rate_raygo <n> groups/s
    BENCH pg_rate_vs_ray <raygo ÷ Ray> x
    BENCH pg_1000_concurrent_ready_s_ray <s> s
    BENCH pg_1000_concurrent_ready_s_raygo <s> s
    BENCH pg_1000_concurrent_ready_vs_ray <raygo ÷ Ray> x
    BENCH py_tasks_sync_per_s_ray|_raygo <n> tasks/s, py_tasks_sync_vs_ray <raygo ÷ Ray> x
    BENCH py_tasks_async_per_s_ray|_raygo <n> tasks/s, py_tasks_async_vs_ray <raygo ÷ Ray> x
    BENCH py_actor_calls_sync_per_s_ray|_raygo <n> calls/s, py_actor_calls_sync_vs_ray <raygo ÷ Ray> x
    BENCH py_actor_calls_async_per_s_ray|_raygo <n> calls/s, py_actor_calls_async_vs_ray <raygo ÷ Ray> x

    python tests/compat/bench.py [--ray-python .venv-ray/bin/python] [--raygo-python .venv/bin/python] [SCRIPT ...]

SCRIPT names some of the scripts (e.g. `py_actor_calls`) to run and print only those
(`scripts/compat.sh --bench py_actor_calls`); all of them by default.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run  # noqa: E402  the compat harness: clusters, processes, the namespace check

SCRIPTS = (HERE / "bench" / "pg_rate.py", HERE / "bench" / "py_tasks.py", HERE / "bench" / "py_actor_calls.py")


def measure(python: str, backend: str, address: str, script: Path) -> Dict[str, Any]:
    env = dict(os.environ, COMPAT_BACKEND=backend, PYTHONUNBUFFERED="1", RAY_ADDRESS=address)
    env.pop("RAYGO_ADDRESS", None)
    if backend == "ray":
        env.update(run.RAY_ENV)
    else:
        run.use_tree_client(env)
    out = subprocess.run([python, str(script)], capture_output=True, text=True, env=env, timeout=1800, check=False)
    sys.stderr.write(out.stderr[-3000:] if out.returncode else "".join(
        line + "\n" for line in out.stderr.splitlines() if line.startswith(backend + ":")))
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("BENCH-RESULT "):
            return json.loads(line[len("BENCH-RESULT "):])
    raise RuntimeError(f"{backend}: the benchmark script printed no result (exit status {out.returncode})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ray-python", default=str(run.ROOT / ".venv-ray" / "bin" / "python"))
    parser.add_argument("--raygo-python", default=str(run.ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("scripts", nargs="*", metavar="SCRIPT", help="script names to run (default: all)")
    args = parser.parse_args()
    names = {script.stem for script in SCRIPTS}
    unknown = sorted(set(args.scripts) - names)
    if unknown:
        parser.error(f"unknown benchmark script {', '.join(unknown)} (known: {', '.join(sorted(names))})")
    scripts = [script for script in SCRIPTS if not args.scripts or script.stem in args.scripts]
    if not run.in_isolated_network("bench-ray", "make bench-ray"):
        return 1
    results = {}
    with tempfile.TemporaryDirectory(prefix="raygo-bench-ray-") as tmp_name:
        tmp = Path(tmp_name)
        for backend, python in (("ray", args.ray_python), ("raygo", args.raygo_python)):
            processes = run.Processes()
            try:
                # start_raygo also returns the dashboard's URL.
                address = run.start_ray(processes, python, tmp) if backend == "ray" else run.start_raygo(processes, tmp)[0]
                results[backend] = {}
                for script in scripts:
                    results[backend].update(measure(python, backend, address, script))
            finally:
                processes.stop()
    ray, raygo = results["ray"], results["raygo"]
    if "rate_per_s" in raygo:
        print(f"BENCH pg_rate_ray {ray['rate_per_s']:.0f} groups/s")
        print(f"BENCH pg_rate_raygo {raygo['rate_per_s']:.0f} groups/s")
        print(f"BENCH pg_rate_vs_ray {raygo['rate_per_s'] / ray['rate_per_s']:.2f} x")
        print(f"BENCH pg_1000_concurrent_ready_s_ray {ray['concurrent_ready_s']:.2f} s")
        print(f"BENCH pg_1000_concurrent_ready_s_raygo {raygo['concurrent_ready_s']:.2f} s")
        print(f"BENCH pg_1000_concurrent_ready_vs_ray {raygo['concurrent_ready_s'] / ray['concurrent_ready_s']:.2f} x")
    for mode in ("sync", "async"):
        if mode + "_per_s" in raygo:
            print(f"BENCH py_tasks_{mode}_per_s_ray {ray[mode + '_per_s']:.0f} tasks/s")
            print(f"BENCH py_tasks_{mode}_per_s_raygo {raygo[mode + '_per_s']:.0f} tasks/s")
            print(f"BENCH py_tasks_{mode}_vs_ray {raygo[mode + '_per_s'] / ray[mode + '_per_s']:.2f} x")
    for mode in ("sync", "async"):
        key = "actor_" + mode + "_per_s"
        if key in raygo:
            print(f"BENCH py_actor_calls_{mode}_per_s_ray {ray[key]:.0f} calls/s")
            print(f"BENCH py_actor_calls_{mode}_per_s_raygo {raygo[key]:.0f} calls/s")
            print(f"BENCH py_actor_calls_{mode}_vs_ray {raygo[key] / ray[key]:.2f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
