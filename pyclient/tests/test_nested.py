"""Nested tasks: tasks and actor methods that submit tasks, create actors and call
``get`` / ``put`` themselves, as drivers of their job, on the session cluster.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

import raygo
from raygo.util import placement_group, placement_group_table
from raygo.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from conftest import Cluster


@raygo.remote
def square(x: int) -> int:
    return x * x


@raygo.remote
def sum_of_squares(n: int) -> int:
    """Fans out n child tasks and waits for them."""
    return sum(raygo.get([square.remote(i) for i in range(n)], timeout=60))


@raygo.remote
def depth(levels: int) -> List[str]:
    """Recurses levels deep; returns the job id and namespace each level sees."""
    context = raygo.get_runtime_context()
    job = f"{context.get_job_id()}/{context.namespace}"
    if levels == 0:
        return [job]
    return [job] + raygo.get(depth.remote(levels - 1), timeout=60)


@raygo.remote
class Counter:
    def __init__(self, start: int) -> None:
        self.n = start

    def add(self, k: int) -> int:
        self.n += k
        return self.n


@raygo.remote
def make_and_call_actor() -> List[int]:
    counter = Counter.remote(10)
    first = counter.add.remote(1)
    second = counter.add.remote(2)
    return raygo.get([first, second], timeout=60)


@raygo.remote
def put_then_pass() -> int:
    ref = raygo.put(7)
    return raygo.get(square.remote(ref), timeout=60)


@raygo.remote
class Spawner:
    def fan_out(self, n: int) -> int:
        return sum(raygo.get([square.remote(i) for i in range(n)], timeout=60))


@raygo.remote
def child_where() -> Dict[str, Any]:
    context = raygo.get_runtime_context()
    return {"pg": context.get_placement_group_id(), "node": context.get_node_id(), "pid": os.getpid()}


@raygo.remote
def parent_in_group(pg: Any) -> List[Dict[str, Any]]:
    """Runs two children in bundle 0 of the group, named explicitly."""
    strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
    return raygo.get([child_where.options(scheduling_strategy=strategy).remote() for _ in range(2)], timeout=60)


def test_task_submits_tasks_and_gets_their_results(driver: Cluster) -> None:
    assert raygo.get(sum_of_squares.remote(10), timeout=120) == sum(i * i for i in range(10))


def test_nested_tasks_belong_to_the_drivers_job(driver: Cluster) -> None:
    jobs = raygo.get(depth.remote(3), timeout=120)
    context = raygo.get_runtime_context()
    assert jobs == [f"{context.get_job_id()}/{context.namespace}"] * 4


def test_task_creates_an_actor_and_calls_it(driver: Cluster) -> None:
    assert raygo.get(make_and_call_actor.remote(), timeout=120) == [11, 13]


def test_task_puts_and_passes_the_ref_to_a_child(driver: Cluster) -> None:
    assert raygo.get(put_then_pass.remote(), timeout=120) == 49


def test_actor_method_submits_tasks(driver: Cluster) -> None:
    spawner = Spawner.remote()
    assert raygo.get(spawner.fan_out.remote(5), timeout=120) == sum(i * i for i in range(5))


def test_parent_blocked_in_get_lends_the_bundles_only_cpu(driver: Cluster) -> None:
    """The parent holds the bundle's one CPU; blocked in get, it lends it to its children
    (NotifyWorkerBlocked), which run there one after the other."""
    pg = placement_group([{"CPU": 1}])
    raygo.get(pg.ready(), timeout=20)
    row = placement_group_table(pg)
    strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
    seen = raygo.get(parent_in_group.options(scheduling_strategy=strategy).remote(pg), timeout=120)
    assert [child["pg"] for child in seen] == [pg.id.hex()] * 2
    assert {child["node"] for child in seen} == {row["bundles_to_node_id"][0]}


# --- placement_group_capture_child_tasks ----------------------------------------------


@raygo.remote(num_cpus=1)
def captured_child(levels: int) -> List[Dict[str, Any]]:
    """Where it ran, and where its own child (levels deep) ran."""
    from raygo.util import get_current_placement_group

    context = raygo.get_runtime_context()
    current = get_current_placement_group()
    here = {"pg": context.get_placement_group_id(), "node": context.get_node_id(),
            "current": current.id.hex() if current is not None else None,
            "captures": context.should_capture_child_tasks_in_placement_group}
    if levels == 0:
        return [here]
    return [here] + raygo.get(captured_child.remote(levels - 1), timeout=60)


@raygo.remote(num_cpus=1)
def parent_of(kind: str) -> List[Dict[str, Any]]:
    """Runs children with no strategy, "DEFAULT", and PlacementGroupSchedulingStrategy(None)."""
    if kind == "none":
        return raygo.get(captured_child.remote(1), timeout=60)
    if kind == "DEFAULT":
        return raygo.get(captured_child.options(scheduling_strategy="DEFAULT").remote(0), timeout=60)
    return raygo.get(captured_child.options(
        scheduling_strategy=PlacementGroupSchedulingStrategy(None)).remote(0), timeout=60)


@raygo.remote
class Launcher:
    def launch(self) -> List[Dict[str, Any]]:
        return raygo.get(captured_child.remote(0), timeout=60)


@raygo.remote(num_cpus=1)
def make_launcher_and_launch() -> List[Dict[str, Any]]:
    """An actor created without a strategy inside a capturing task: captured too."""
    launcher = Launcher.remote()
    return raygo.get(launcher.launch.remote(), timeout=60)


def _group(bundles: List[Dict[str, float]], strategy: str) -> Any:
    pg = placement_group(bundles, strategy=strategy)
    raygo.get(pg.ready(), timeout=20)
    return pg, placement_group_table(pg)["bundles_to_node_id"]


def test_capture_child_tasks_keeps_nested_tasks_in_the_group(driver: Cluster) -> None:
    """Ray's documentation example, with a grandchild: a {"CPU": 2} bundle holds the
    parent and each child in turn; every level runs in the group and captures."""
    pg, nodes = _group([{"CPU": 2}], "PACK")
    capture = PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)
    seen = raygo.get(parent_of.options(scheduling_strategy=capture).remote("none"), timeout=120)
    assert len(seen) == 2
    for level in seen:
        assert level == {"pg": pg.id.hex(), "node": nodes[0], "current": pg.id.hex(), "captures": True}


def test_capture_across_a_groups_bundles(driver: Cluster) -> None:
    pg, nodes = _group([{"CPU": 2}, {"CPU": 2}], "STRICT_SPREAD")
    capture = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=1, placement_group_capture_child_tasks=True)
    seen = raygo.get(captured_child.options(scheduling_strategy=capture).remote(3), timeout=120)
    assert seen[0]["node"] == nodes[1]
    for level in seen:
        assert level["pg"] == pg.id.hex() and level["node"] in nodes.values() and level["captures"] is True


def test_default_strategy_and_no_group_are_not_captured(driver: Cluster) -> None:
    pg, _ = _group([{"CPU": 2}], "PACK")
    capture = PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)
    for kind in ("DEFAULT", "pg-none"):
        [child] = raygo.get(parent_of.options(scheduling_strategy=capture).remote(kind), timeout=120)
        assert child["pg"] is None and child["current"] is None and child["captures"] is False


def test_without_capture_children_leave_the_group(driver: Cluster) -> None:
    pg, _ = _group([{"CPU": 2}], "PACK")
    in_group = PlacementGroupSchedulingStrategy(pg)
    seen = raygo.get(parent_of.options(scheduling_strategy=in_group).remote("none"), timeout=120)
    assert [level["pg"] for level in seen] == [None, None]


def test_legacy_options_capture_and_actors_capture(driver: Cluster) -> None:
    pg, nodes = _group([{"CPU": 2}], "PACK")
    seen = raygo.get(parent_of.options(placement_group=pg, placement_group_capture_child_tasks=True).remote("none"),
                     timeout=120)
    assert [level["pg"] for level in seen] == [pg.id.hex()] * 2
    # An actor created with capture: what its methods submit runs in the group.
    launcher = Launcher.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        pg, placement_group_capture_child_tasks=True)).remote()
    [child] = raygo.get(launcher.launch.remote(), timeout=120)
    assert child["pg"] == pg.id.hex() and child["node"] == nodes[0]
    raygo.kill(launcher)
    # An actor created (with no strategy) by a capturing task is in the group too.
    [child] = raygo.get(make_launcher_and_launch.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        pg, placement_group_capture_child_tasks=True)).remote(), timeout=120)
    assert child["pg"] == pg.id.hex()


def test_legacy_placement_group_with_a_strategy_is_refused(driver: Cluster) -> None:
    pg, _ = _group([{"CPU": 1}], "PACK")
    import pytest

    with pytest.raises(ValueError, match="deprecated"):
        captured_child.options(placement_group=pg, scheduling_strategy="SPREAD")
    with pytest.raises(TypeError, match="placement_group_capture_child_tasks"):
        captured_child.options(placement_group_capture_child_tasks="yes")
    with pytest.raises(ValueError, match="bundle index must be -1"):
        captured_child.options(placement_group_bundle_index=0).remote(0)
    from raygo.util import get_current_placement_group

    assert get_current_placement_group() is None  # a driver is in no group
