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
    """Recurses levels deep; returns the job id each level sees."""
    job = raygo.get_runtime_context().get_job_id()
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
    assert jobs == [raygo.get_runtime_context().get_job_id()] * 4


def test_task_creates_an_actor_and_calls_it(driver: Cluster) -> None:
    assert raygo.get(make_and_call_actor.remote(), timeout=120) == [11, 13]


def test_task_puts_and_passes_the_ref_to_a_child(driver: Cluster) -> None:
    assert raygo.get(put_then_pass.remote(), timeout=120) == 49


def test_actor_method_submits_tasks(driver: Cluster) -> None:
    spawner = Spawner.remote()
    assert raygo.get(spawner.fan_out.remote(5), timeout=120) == sum(i * i for i in range(5))


def test_nested_task_in_a_group_with_room_runs(driver: Cluster) -> None:
    """A parent blocked in get holds its CPU of the bundle (see README: a blocked worker
    keeps its resources); the children run in the room the bundle has left."""
    pg = placement_group([{"CPU": 3}])
    raygo.get(pg.ready(), timeout=20)
    row = placement_group_table(pg)
    strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
    seen = raygo.get(parent_in_group.options(scheduling_strategy=strategy).remote(pg), timeout=120)
    assert [child["pg"] for child in seen] == [pg.id.hex()] * 2
    assert {child["node"] for child in seen} == {row["bundles_to_node_id"][0]}
