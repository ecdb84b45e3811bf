"""make compat: runs every placement-group script of tests/compat under Ray and under raygo
and compares their normalized outcomes.

Both clusters have one shape: a head and three nodes on this machine, 4 CPUs and 100 MiB of
object store each, labelled zone=a, b, c, c. Ray's comes from `ray start --block` in
.venv-ray/, raygo's from `bin/raygo start --block`; both are stopped at the end (their
process groups, which this script started, get SIGTERM, then SIGKILL). Each script runs as
a Ray user runs it: RAY_ADDRESS names the cluster.

It runs only inside a network namespace whose one interface is loopback (scripts/compat.sh
creates one): otherwise it stops before starting anything.

Scripts in RAY_CLIENT_SCRIPTS are no comparison: they run once, with Ray's Python, as Ray's
own clients (the `ray` CLI, ray.util.state) of the raygo cluster's head, and check their
expectations themselves (they print `COMPAT-OK`). When only such scripts are asked for, no
Ray cluster is started.

Prints one `PASS <script>` or `FAIL <script>` line per script (a failure lists the outcomes
that differ), then `compat: N passed, M failed`. Exit status 1 if any failed.

    python tests/compat/run.py [--ray-python .venv-ray/bin/python] [--raygo-python .venv/bin/python] [script ...]

COMPAT_DEBUG=1 also prints each script's stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# Every script of tests/compat but the harness and status_golden.py (it writes the `raygo
# status` golden files from Ray's formatter; it is run by hand, not compared).
SCRIPTS = sorted(p.stem for p in HERE.glob("*.py") if p.stem not in ("compat_lib", "run", "bench", "status_golden"))
# Ray's own clients against the raygo head (not compared with a Ray cluster).
RAY_CLIENT_SCRIPTS = {"ray_state_cli"}
NODES = [("a", True), ("b", False), ("c", False), ("c", False)]  # (zone, is head)
CPUS_PER_NODE = 4
OBJECT_STORE_BYTES = 100 * 1024 * 1024
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Processes:
    """Foreground node processes, each in a session of its own so its daemons stop with it."""

    def __init__(self) -> None:
        self.procs: List[subprocess.Popen] = []

    def start(self, cmd: List[str], log: Path, env: Dict[str, str]) -> subprocess.Popen:
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        # Ray's workers run in sessions of their own: note every descendant first, so the
        # ones left once their raylet is gone can still be found by pid.
        descendants = _descendants({proc.pid for proc in self.procs})
        for proc in reversed(self.procs):
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)  # whatever of its group is left
            proc.wait()
        for pid in descendants:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.procs.clear()


def _descendants(roots: "set[int]") -> List[int]:
    """Pids of every live process below roots (from /proc)."""
    children: Dict[int, List[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: List[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # its own session: pgid == pid
    except ProcessLookupError:
        pass


def start_ray(processes: Processes, ray_python: str, tmp: Path) -> str:
    ray_cli = str(Path(ray_python).parent / "ray")
    port = free_port()
    address = f"127.0.0.1:{port}"
    env = dict(os.environ, **RAY_ENV)
    common = ["--block", "--num-cpus", str(CPUS_PER_NODE), "--object-store-memory", str(OBJECT_STORE_BYTES),
              "--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--temp-dir", str(tmp / "ray")]
    probe = ("import ray, sys\nray.init(address=sys.argv[1], _node_ip_address='127.0.0.1', logging_level='ERROR')\n"
             "print(sum(1 for n in ray.nodes() if n['Alive']))\n")

    def wait_for_nodes(count: int) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            out = subprocess.run([ray_python, "-c", probe, address], capture_output=True, text=True, env=env,
                                 check=False)
            if out.stdout.strip().splitlines()[-1:] == [str(count)]:
                return
            time.sleep(1)
        logs = "\n".join(f"--- {log.name}\n{log.read_text()[-1500:]}" for log in sorted(tmp.glob("ray-*.log")))
        raise RuntimeError(f"the Ray cluster at {address} did not reach {count} nodes:\n{logs}")

    for i, (zone, head) in enumerate(NODES):
        where = ["--head", "--port", str(port), "--include-dashboard", "false"] if head else ["--address", address]
        processes.start([ray_cli, "start", *where, *common, "--labels", f"zone={zone}"], tmp / f"ray-{i}.log", env)
        # One at a time: Ray nodes starting together on two cores time out.
        wait_for_nodes(i + 1)
    return address


def start_raygo(processes: Processes, tmp: Path) -> Tuple[str, str]:
    """Starts the raygo cluster; returns its GCS address and its head's dashboard URL."""
    raygo = ROOT / "bin" / "raygo"
    if not raygo.exists():
        raise RuntimeError(f"{raygo} not found: run `make build`")
    port, dashboard_port = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    for i, (zone, head) in enumerate(NODES):
        ready = tmp / f"raygo-{i}.json"
        where = ["--head", "--port", str(port), "--dashboard-port", str(dashboard_port)] if head else ["--address", address]
        processes.start([str(raygo), "start", "--block", *where, "--temp-dir", str(tmp / "raygo"),
                         "--ready-file", str(ready), "--num-cpus", str(CPUS_PER_NODE), "--labels", f"zone={zone}",
                         "--object-store-memory", str(OBJECT_STORE_BYTES)],
                        tmp / f"raygo-{i}.log", dict(os.environ))
        deadline = time.monotonic() + 60
        while not ready.exists() or not ready.read_text().strip().endswith("}"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"raygo node {i} did not come up; see {tmp}/raygo-{i}.log")
            time.sleep(0.05)
    return address, f"http://127.0.0.1:{dashboard_port}"


def run_ray_client_script(name: str, ray_python: str, raygo_python: str, address: str, dashboard: str) -> str:
    """Runs one of RAY_CLIENT_SCRIPTS; returns "" when it passed, else why not."""
    env = dict(os.environ, COMPAT_ADDRESS=address, COMPAT_DASHBOARD=dashboard, COMPAT_RAYGO_PYTHON=raygo_python,
               PYTHONUNBUFFERED="1", **RAY_ENV)
    env.pop("RAYGO_ADDRESS", None)
    env.pop("RAY_ADDRESS", None)
    try:
        out = subprocess.run([ray_python, str(HERE / f"{name}.py")], capture_output=True, text=True, env=env,
                             cwd=HERE, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return "timed out after 300 s"
    if os.environ.get("COMPAT_DEBUG"):
        print(f"--- {name}, stderr:\n{out.stderr[-6000:]}")
    last = out.stdout.strip().splitlines()[-1:]
    if out.returncode == 0 and last and last[0].startswith("COMPAT-OK "):
        return ""
    return f"exit status {out.returncode}\n{out.stdout[-1000:]}{out.stderr[-3000:]}"


def use_tree_client(env: Dict[str, str]) -> None:
    """Makes raygo's side import this tree's Python client, not whichever one the venv has
    installed (an editable install may point at another checkout)."""
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "pyclient"), env.get("PYTHONPATH")]))


def run_script(name: str, python: str, backend: str, address: str) -> Tuple[Optional[Dict[str, Any]], str]:
    env = dict(os.environ, COMPAT_BACKEND=backend, COMPAT_ADDRESS=address, PYTHONUNBUFFERED="1", RAY_ADDRESS=address)
    env.pop("RAYGO_ADDRESS", None)
    if backend == "ray":
        env.update(RAY_ENV)
    else:
        use_tree_client(env)
    try:
        out = subprocess.run([python, str(HERE / f"{name}.py")], capture_output=True, text=True, env=env,
                             cwd=HERE, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return None, f"{backend}: timed out after 300 s"
    if os.environ.get("COMPAT_DEBUG"):  # show what the script printed on stderr
        print(f"--- {name} under {backend}, stderr:\n{out.stderr[-6000:]}")
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("COMPAT-RESULT "):
            return json.loads(line[len("COMPAT-RESULT "):]), ""
    return None, f"{backend}: exit status {out.returncode}, no result\n{out.stderr[-2000:]}"


def compare(ray_result: Dict[str, Any], raygo_result: Dict[str, Any]) -> List[str]:
    """The outcomes that differ. An error matches when raygo's is an instance of every
    class Ray's is (a Ray script's `except` catches it); anything else must be equal.
    """
    diffs = []
    for key in sorted(set(ray_result) | set(raygo_result)):
        want, got = ray_result.get(key, "<missing>"), raygo_result.get(key, "<missing>")
        if isinstance(want, dict) and isinstance(got, dict) and "raises" in want and "raises" in got:
            if set(want["raises"]) <= set(got["raises"]):
                continue
        elif want == got:
            continue
        diffs.append(f"  {key}: ray={json.dumps(want)} raygo={json.dumps(got)}")
    return diffs


def in_isolated_network(what: str, target: str) -> bool:
    """Whether this process runs in a network namespace of loopback only; says why not."""
    interfaces = sorted(name for _, name in socket.if_nameindex())  # this namespace's (not /sys's)
    if interfaces != ["lo"]:
        print(f"{what}: not in a network namespace of loopback only (interfaces: {', '.join(interfaces)}); "
              f"run it through scripts/compat.sh ({target})", file=sys.stderr)
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ray-python", default=str(ROOT / ".venv-ray" / "bin" / "python"))
    parser.add_argument("--raygo-python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("scripts", nargs="*", default=SCRIPTS)
    args = parser.parse_args()
    unknown = sorted(set(args.scripts) - set(SCRIPTS))
    if unknown:
        parser.error(f"no such script in {HERE}: {', '.join(unknown)}")
    if not in_isolated_network("compat", "make compat"):
        return 1

    processes = Processes()
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="raygo-compat-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            compared = [name for name in args.scripts if name not in RAY_CLIENT_SCRIPTS]
            ray_address = start_ray(processes, args.ray_python, tmp) if compared else ""
            raygo_address, raygo_dashboard = start_raygo(processes, tmp)
            for name in args.scripts:
                if name in RAY_CLIENT_SCRIPTS:
                    error = run_ray_client_script(name, args.ray_python, args.raygo_python, raygo_address, raygo_dashboard)
                    if error:
                        print(f"FAIL {name}\n  {error}", flush=True)
                        failed += 1
                    else:
                        print(f"PASS {name} (Ray's clients against raygo)", flush=True)
                        passed += 1
                    continue
                ray_result, ray_error = run_script(name, args.ray_python, "ray", ray_address)
                raygo_result, raygo_error = run_script(name, args.raygo_python, "raygo", raygo_address)
                if ray_result is None or raygo_result is None:
                    print(f"FAIL {name}\n  {ray_error or raygo_error}", flush=True)
                    failed += 1
                    continue
                diffs = compare(ray_result, raygo_result)
                if diffs:
                    print(f"FAIL {name} ({len(diffs)} of {len(ray_result)} outcomes differ)", flush=True)
                    print("\n".join(diffs), flush=True)
                    failed += 1
                else:
                    print(f"PASS {name} ({len(ray_result)} outcomes)", flush=True)
                    passed += 1
        finally:
            processes.stop()
    print(f"compat: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
