"""What every compatibility script shares: the backend under test imported as `ray`, the
cluster address, and the recording of normalized outcomes.

A script runs twice, with COMPAT_BACKEND=ray (Ray from PyPI, on a local Ray cluster) and
with COMPAT_BACKEND=raygo (on a raygo cluster of the same shape), and prints one line
`COMPAT-RESULT {json}`. run.py compares the two: values must be equal, and an error raygo
raises must be an instance of every class Ray's error is an instance of (so the `except`
clause of a Ray script catches it).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any, Callable, Dict, List

BACKEND = os.environ.get("COMPAT_BACKEND", "raygo")
ADDRESS = os.environ.get("COMPAT_ADDRESS", "")

ray: Any = importlib.import_module(BACKEND)
_pg = importlib.import_module(f"{BACKEND}.util.placement_group")
_strategies = importlib.import_module(f"{BACKEND}.util.scheduling_strategies")
placement_group = _pg.placement_group
remove_placement_group = _pg.remove_placement_group
get_placement_group = _pg.get_placement_group
get_current_placement_group = _pg.get_current_placement_group
placement_group_table = _pg.placement_group_table
PlacementGroup = _pg.PlacementGroup
PlacementGroupSchedulingStrategy = _strategies.PlacementGroupSchedulingStrategy

# The keys of Ray's placement_group_table rows and ray.nodes() entries that raygo promises.
RAY_TABLE_KEYS = {"placement_group_id", "name", "bundles", "bundles_to_node_id", "strategy", "state", "stats"}
RAY_STATS_KEYS = {"end_to_end_creation_latency_ms", "scheduling_latency_ms", "scheduling_attempt",
                  "highest_retry_delay_ms", "scheduling_state"}
RAY_NODE_KEYS = {"NodeID", "Alive", "alive", "NodeManagerAddress", "NodeManagerHostname", "NodeManagerPort",
                 "NodeName", "Resources", "Labels", "DeathReasonMessage"}

_results: Dict[str, Any] = {}


def connect(namespace: str) -> Any:
    """ray.init on the cluster under test, the same call for both backends: RAY_ADDRESS names
    the cluster, and its nodes listen on loopback only. Returns init's context.
    """
    context = ray.init(namespace=namespace, _node_ip_address="127.0.0.1", logging_level="ERROR")
    # Ray may hold an earlier script's CPUs for a while after their group is removed: start
    # every script on a cluster with every CPU free (or after a minute, as it is). A second
    # driver (run_driver) starts while its script holds groups, so it does not wait.
    if not os.environ.get("COMPAT_SECOND_DRIVER"):
        wait_until("every CPU free",
                   lambda: ray.available_resources().get("CPU") == ray.cluster_resources().get("CPU"), timeout=60)
    if os.environ.get("COMPAT_DEBUG"):
        live = {k: (v["name"], v["state"], v["bundles"]) for k, v in placement_group_table().items()
                if v["state"] != "REMOVED"}
        print(f"{BACKEND} at start: available {ray.available_resources()}, live groups {live}", file=sys.stderr)
    return context


def record(key: str, value: Any) -> None:
    """Records a normalized outcome (JSON-serializable; dict keys become strings)."""
    if key in _results:
        raise KeyError(f"outcome {key} recorded twice")
    _results[key] = json.loads(json.dumps(value, sort_keys=True, default=repr))


def error_classes(err: BaseException) -> List[str]:
    """The names of the classes, of those a Ray script catches, that err is an instance of."""
    exc = ray.exceptions
    candidates = [
        ("GetTimeoutError", exc.GetTimeoutError), ("TaskPlacementGroupRemoved", exc.TaskPlacementGroupRemoved),
        ("RaySystemError", exc.RaySystemError), ("RayError", exc.RayError), ("ValueError", ValueError),
        ("TypeError", TypeError), ("AssertionError", AssertionError), ("TimeoutError", TimeoutError),
        ("RuntimeError", RuntimeError), ("ConnectionError", ConnectionError), ("Exception", Exception),
    ]
    return sorted(name for name, cls in candidates if isinstance(err, cls))


def outcome(key: str, fn: Callable[[], Any], normalize: Callable[[Any], Any] = lambda value: "returned") -> Any:
    """Calls fn and records what happened: the normalized value, or the error's classes."""
    try:
        value = fn()
    except Exception as err:  # noqa: BLE001 (recording any error is the point)
        record(key, {"raises": error_classes(err)})
        return None
    record(key, normalize(value))
    return value


def node_pattern(pg: Any) -> List[int]:
    """Which bundles share a node: node ids renamed 0, 1, ... by first appearance."""
    row = placement_group_table(pg)
    seen: Dict[str, int] = {}
    pattern = []
    for index in sorted(row["bundles_to_node_id"]):
        node = row["bundles_to_node_id"][index]
        pattern.append(-1 if not node else seen.setdefault(node, len(seen)))
    return pattern


def wait_until(what: str, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            if not value:
                print(f"{BACKEND}: gave up waiting for {what}", file=sys.stderr)
            return value
        time.sleep(0.1)


def run_driver(code: str) -> str:
    """Runs code as another driver process of the same backend; returns its stdout."""
    preamble = "import sys; sys.path.insert(0, %r)\n" % os.path.dirname(os.path.abspath(__file__))
    result = subprocess.run([sys.executable, "-c", preamble + textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=120, env=dict(os.environ, COMPAT_SECOND_DRIVER="1"), check=False)
    if result.returncode != 0:
        print(result.stderr[-3000:], file=sys.stderr)
    return result.stdout


def finish() -> None:
    print("COMPAT-RESULT " + json.dumps(_results, sort_keys=True))
    ray.shutdown()
