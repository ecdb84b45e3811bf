"""Ray's own state CLI and SDK against a raygo head: `ray list placement-groups|nodes|actors`,
`ray get placement-groups`, and ray.util.state's list_*/get_* with `--address
http://127.0.0.1:<dashboard port>`, from Ray's package (.venv-ray/), reading raygo's /api/v0.

Not a comparison (a Ray cluster has other ids and no raygo head): run.py runs it with Ray's
Python against the raygo cluster only (RAY_CLIENT_SCRIPTS), with COMPAT_DASHBOARD (the raygo
head's dashboard URL), COMPAT_ADDRESS (its GCS) and COMPAT_RAYGO_PYTHON (a Python with the
raygo client, which creates and removes the groups listed). It checks its expectations
itself: it prints `COMPAT-OK <n> checks`, or fails naming the first one unmet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

DASHBOARD = os.environ["COMPAT_DASHBOARD"]
ADDRESS = os.environ["COMPAT_ADDRESS"]
RAYGO_PYTHON = os.environ["COMPAT_RAYGO_PYTHON"]
RAY_CLI = str(Path(sys.executable).parent / "ray")

# Ray 2.60's columns (ray/util/state/common.py): without --detail, and with it.
NODE_BASE = {"node_id", "node_ip", "is_head_node", "state", "state_message", "node_name", "resources_total", "labels"}
GROUP_BASE = {"placement_group_id", "name", "creator_job_id", "state"}
GROUP_DETAIL = GROUP_BASE | {"bundles", "is_detached", "stats", "topology_strategy", "topology_assignments"}

checks = 0


def check(what: str, ok: bool, detail: Any = "") -> None:
    global checks
    if not ok:
        raise AssertionError(f"{what}: {detail}")
    checks += 1


def raygo(code: str) -> Any:
    """Runs code with the raygo client connected to the cluster; returns what it prints as JSON."""
    prelude = "import json, raygo\nfrom raygo.util.placement_group import placement_group, remove_placement_group\n"
    prelude += f"raygo.init(address={ADDRESS!r}, namespace='ray-state-cli', logging_level='ERROR')\n"
    out = subprocess.run([RAYGO_PYTHON, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=120, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"raygo client: exit {out.returncode}\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def ray_cli(*args: str) -> str:
    """Ray's CLI with the raygo head's dashboard as its address; fails on a non-zero exit."""
    out = subprocess.run([RAY_CLI, *args, "--address", DASHBOARD], capture_output=True, text=True, timeout=120,
                         check=False, env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"))
    if out.returncode != 0:
        raise AssertionError(f"ray {' '.join(args)}: exit {out.returncode}\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out.stdout


def ray_json(*args: str) -> List[Dict[str, Any]]:
    return json.loads(ray_cli(*args, "--format", "json"))


def api_rows(resource: str, query: str) -> List[Dict[str, Any]]:
    """The rows of /api/v0/<resource>?<query> as the head sends them (before Ray's client
    fills the columns a row lacks)."""
    with urllib.request.urlopen(f"{DASHBOARD}/api/v0/{resource}?{query}", timeout=30) as response:
        return json.load(response)["data"]["result"]["result"]


# A group that is placed and one that waits (more CPUs than the cluster has).
ids = raygo("""
    ready = placement_group([{"CPU": 0.5}, {"CPU": 0.5}], strategy="PACK", name="state-cli-ready", lifetime="detached")
    raygo.get(ready.ready(), timeout=60)
    waiting = placement_group([{"CPU": 1000}], name="state-cli-waiting", lifetime="detached")
    print(json.dumps([ready.id.hex(), waiting.id.hex()]))
""")
try:
    ready, waiting = ids

    nodes = ray_json("list", "nodes")
    check("ray list nodes: every node ALIVE", nodes and all(n["state"] == "ALIVE" for n in nodes), nodes)
    check("ray list nodes: one head", sum(1 for n in nodes if n["is_head_node"]) == 1, nodes)
    check("ray list nodes: no detail", all(n["start_time_ms"] is None for n in nodes), nodes[0])
    check("ray list nodes --detail", all(n["start_time_ms"] for n in ray_json("list", "nodes", "--detail")))
    check("/api/v0/nodes: Ray's base columns", all(set(n) == NODE_BASE for n in api_rows("nodes", "")), api_rows("nodes", ""))
    table = ray_cli("list", "nodes")
    check("ray list nodes (table): every node id", all(n["node_id"] in table for n in nodes), table)

    groups = {g["placement_group_id"]: g for g in ray_json("list", "placement-groups")}
    check("ray list placement-groups: both groups", ready in groups and waiting in groups, groups)
    check("ray list placement-groups: states", (groups[ready]["state"], groups[waiting]["state"]) == ("CREATED", "PENDING"),
          groups)
    check("ray list placement-groups: no detail", groups[ready]["bundles"] is None, groups[ready])
    check("/api/v0/placement_groups: Ray's base columns", all(set(g) == GROUP_BASE for g in api_rows("placement_groups", "")),
          api_rows("placement_groups", ""))
    check("/api/v0/placement_groups?detail=true: Ray's columns",
          all(set(g) == GROUP_DETAIL for g in api_rows("placement_groups", "detail=true")), api_rows("placement_groups", "detail=true"))
    pending = ray_json("list", "placement-groups", "--filter", "state=PENDING")
    check("ray list placement-groups --filter state=PENDING", [g["placement_group_id"] for g in pending] == [waiting],
          pending)
    named = ray_json("list", "placement-groups", "--filter", "name!=state-cli-waiting", "--filter", "state=created")
    check("ray list placement-groups with two filters", ready in [g["placement_group_id"] for g in named]
          and waiting not in [g["placement_group_id"] for g in named], named)
    check("ray list placement-groups --limit 1", len(ray_json("list", "placement-groups", "--limit", "1")) == 1)
    detailed = {g["placement_group_id"]: g for g in ray_json("list", "placement-groups", "--detail")}
    check("ray list placement-groups --detail: two bundles placed",
          len(detailed[ready]["bundles"]) == 2 and all(b["node_id"] for b in detailed[ready]["bundles"]), detailed[ready])
    table = ray_cli("list", "placement-groups")
    check("ray list placement-groups (table)", ready in table and waiting in table and "PENDING" in table, table)
    got = ray_cli("get", "placement-groups", ready)
    check("ray get placement-groups", ready in got and "CREATED" in got and "state-cli-ready" in got, got)
    # Other compat scripts leave DEAD actors listed on this cluster; none is alive, which
    # Ray's CLI says so.
    actors = ray_cli("list", "actors", "--filter", "state=ALIVE", "--format", "json")
    check("ray list actors --filter state=ALIVE: none", actors.strip() == "No resource in the cluster", actors)

    # The SDK: the same paths through StateApiClient, into Ray's dataclasses.
    from ray.util.state import get_placement_group, list_actors, list_nodes, list_placement_groups

    listed = list_placement_groups(address=DASHBOARD, filters=[("name", "=", "state-cli-ready"), ("state", "!=", "removed")])
    check("list_placement_groups", [(g.placement_group_id, g.state) for g in listed] == [(ready, "CREATED")], listed)
    row = get_placement_group(waiting, address=DASHBOARD)
    check("get_placement_group", row is not None and row.state == "PENDING" and row.name == "state-cli-waiting", row)
    check("get_placement_group of no group", get_placement_group("ff" * 18, address=DASHBOARD) is None)
    check("list_nodes(detail=True)", all(n.start_time_ms for n in list_nodes(address=DASHBOARD, detail=True)))
    check("list_actors", list_actors(address=DASHBOARD, filters=[("state", "=", "ALIVE")]) == [])
finally:
    raygo(f"""
        from raygo.util.placement_group import get_placement_group
        for name in ("state-cli-ready", "state-cli-waiting"):
            remove_placement_group(get_placement_group(name))
        print("[]")
    """)
print(f"COMPAT-OK {checks} checks")
