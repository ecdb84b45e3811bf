"""Python actors (``@raygo.remote`` on a class) on the session cluster: created by the
GCS's actor manager in Python workers, inside placement-group bundles when asked.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, Dict, List

import pytest

import raygo
from raygo.exceptions import ActorDiedError, RayActorError, RayTaskError
from raygo.util import placement_group, placement_group_table, remove_placement_group, state
from raygo.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from conftest import Cluster, Node, poll
from test_gpu import _gpu_sim_supported, gpu_node  # noqa: F401 (a fixture)


@raygo.remote
class Counter:
    def __init__(self, start: int = 0) -> None:
        self.value = start
        self.seen: List[int] = []

    def add(self, delta: int) -> int:
        self.value += delta
        self.seen.append(delta)
        return self.value

    def history(self) -> List[int]:
        return self.seen

    def where(self) -> Dict[str, Any]:
        context = raygo.get_runtime_context()
        return {
            "node_id": context.get_node_id(),
            "placement_group_id": context.get_placement_group_id(),
            "actor_id": context.get_actor_id(),
            "gpu_ids": raygo.get_gpu_ids(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pid": os.getpid(),
            "reconstructed": context.was_current_actor_reconstructed,
        }

    def fail(self) -> None:
        raise KeyError("no such key")


@raygo.remote
class Broken:
    def __init__(self) -> None:
        raise RuntimeError("constructor refuses")

    def ping(self) -> str:
        return "pong"


def test_actor_in_a_bundle_runs_calls_in_order(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
    raygo.get(pg.ready(), timeout=20)
    row = placement_group_table(pg)
    counter = Counter.options(num_cpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 1)).remote(10)
    refs = [counter.add.remote(i) for i in range(20)]
    assert raygo.get(refs, timeout=60) == [10 + sum(range(i + 1)) for i in range(20)]
    assert raygo.get(counter.history.remote(), timeout=60) == list(range(20))
    ran = raygo.get(counter.where.remote(), timeout=60)
    assert ran["node_id"] == row["bundles_to_node_id"][1]
    assert ran["placement_group_id"] == pg.id.hex()
    assert ran["actor_id"] == counter._actor_id and not ran["reconstructed"]
    # A method's exception is a RayTaskError and an instance of its class; the actor lives on.
    with pytest.raises(KeyError) as caught:
        raygo.get(counter.fail.remote(), timeout=60)
    assert isinstance(caught.value, RayTaskError)
    assert raygo.get(counter.add.remote(1), timeout=60) == 10 + sum(range(20)) + 1
    remove_placement_group(pg)

    # Removing the group kills the actor in it. The removal is asynchronous, as Ray's: a call
    # made before the kill reaches the actor may still be answered.
    def died() -> Any:
        try:
            raygo.get(counter.add.remote(1), timeout=60)
        except ActorDiedError as err:
            return err
        return None

    assert "placement group removed" in str(poll("the actor of the removed group to die", died))


def test_killed_actor_worker_restarts_up_to_max_restarts(driver: Cluster) -> None:
    counter = Counter.options(max_restarts=1, max_task_retries=1).remote(5)
    first = raygo.get(counter.where.remote(), timeout=60)
    os.kill(first["pid"], signal.SIGKILL)
    # The call after the death waits for the restarted actor, built anew by its constructor.
    assert raygo.get(counter.add.remote(1), timeout=60) == 6
    second = raygo.get(counter.where.remote(), timeout=60)
    assert second["pid"] != first["pid"] and second["reconstructed"]
    os.kill(second["pid"], signal.SIGKILL)
    with pytest.raises(RayActorError):  # no restarts left: DEAD
        raygo.get(counter.add.remote(1), timeout=60)


def test_a_call_through_a_handle_that_knew_the_dead_worker_goes_to_the_restarted_actor(driver: Cluster) -> None:
    # max_task_retries is 0 (the default): the call below never reaches the dead worker,
    # so it loses no retry and goes to the restarted actor.
    counter = Counter.options(max_restarts=1).remote(5)
    first = raygo.get(counter.where.remote(), timeout=60)
    os.kill(first["pid"], signal.SIGKILL)
    poll("the GCS to show the actor restarted", lambda: _restarted(first["actor_id"]), timeout=60)
    # The handle still holds the dead worker's address: the call is refused there first.
    assert raygo.get(counter.add.remote(1), timeout=60) == 6
    assert raygo.get(counter.where.remote(), timeout=60)["reconstructed"]


def _restarted(actor_id: str) -> bool:
    actor = state.get_actor(actor_id)
    return actor is not None and actor.state == "ALIVE" and actor.num_restarts >= 1


def test_kill_get_actor_and_constructor_failure(driver: Cluster) -> None:
    named = Counter.options(name="the-counter").remote()
    assert raygo.get(named.add.remote(2), timeout=60) == 2
    found = raygo.get_actor("the-counter")
    assert found == named and raygo.get(found.add.remote(3), timeout=60) == 5
    with pytest.raises(ValueError, match="Failed to look up actor"):
        raygo.get_actor("the-counter", namespace="another")
    raygo.kill(named)
    with pytest.raises(ActorDiedError, match="KillActor"):
        raygo.get(named.add.remote(1), timeout=60)
    poll("the name to be free", lambda: _lookup_fails("the-counter"))

    broken = Broken.remote()
    with pytest.raises(ActorDiedError, match="constructor refuses"):
        raygo.get(broken.ping.remote(), timeout=60)


def _lookup_fails(name: str) -> bool:
    try:
        raygo.get_actor(name)
    except ValueError:
        return True
    return False


def test_actor_options_not_built_are_refused_naming_them(driver: Cluster) -> None:
    for options, named in (
        ({"lifetime": "forever"}, "lifetime"),
        ({"max_concurrency": 4}, "max_concurrency"),
        ({"runtime_env": {"pip": ["x"]}}, "runtime_env"),
        ({"max_retries": 1}, "max_retries"),
    ):
        with pytest.raises(ValueError, match=named):
            Counter.options(**options)
    with pytest.raises(TypeError, match="cannot be instantiated directly"):
        Counter()
    pg = placement_group([{"CPU": 1}], strategy="PACK")
    raygo.get(pg.ready(), timeout=20)
    with pytest.raises(ValueError, match=f"bundle 0 of placement group {pg.id.hex()}"):
        Counter.options(num_cpus=2, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)).remote()


@pytest.mark.skipif(not _gpu_sim_supported(), reason="bin/raygo has no --gpu-sim dgx-h100")
def test_actor_in_gpu_bundle_sees_the_bundles_gpus(gpu_node: Node, tmp_path: Path) -> None:  # noqa: F811
    pg = placement_group([{"GPU": 2, "CPU": 1}], strategy="STRICT_PACK")
    raygo.get(pg.ready(), timeout=20)
    row = placement_group_table(pg)
    counter = Counter.options(num_gpus=2, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)).remote()
    ran = raygo.get(counter.where.remote(), timeout=60)
    assert ran["node_id"] == gpu_node.node_id
    assert ran["cuda_visible_devices"] == row["bundles_to_cuda_visible_devices"][0]
    assert ran["gpu_ids"] == row["bundles_to_gpu_ids"][0]
