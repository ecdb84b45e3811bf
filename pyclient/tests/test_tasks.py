"""Python tasks (``@raygo.remote``) on the session cluster: Python workers that raylets
start with this interpreter, leased from placement-group bundles as the Go SDK's are.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Dict

import pytest

import raygo
from raygo.exceptions import RayTaskError, TaskPlacementGroupRemoved, WorkerCrashedError
from raygo.util import placement_group, placement_group_table, remove_placement_group
from raygo.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

from conftest import Cluster, Node, nodes_by_id, poll
from test_gpu import _gpu_sim_supported, gpu_node  # noqa: F401 (a fixture)


@raygo.remote
def where() -> Dict[str, Any]:
    """Where the task ran, as the task sees it."""
    context = raygo.get_runtime_context()
    return {
        "node_id": context.get_node_id(),
        "placement_group_id": context.get_placement_group_id(),
        "gpu_ids": raygo.get_gpu_ids(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "resources": context.get_assigned_resources(),
        "pid": os.getpid(),
    }


@raygo.remote
def add(a: int, b: int = 0) -> int:
    return a + b


class CustomError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message, code)  # both in args: the exception pickles
        self.code = code


@raygo.remote(max_retries=3)
def fail(kind: str) -> None:
    if kind == "value":
        raise ValueError("bad value")
    raise CustomError("custom failure", 42)


@raygo.remote
def crash_first_attempt(marker: str) -> str:
    """Writes its pid to marker and waits to be killed; a later attempt finds the marker."""
    path = Path(marker)
    if path.exists():
        return f"attempt after pid {path.read_text()}"
    path.write_text(str(os.getpid()))
    for _ in range(600):  # bounded: the test kills it long before
        time.sleep(0.1)
    return "not killed"


def test_tasks_in_each_bundle_run_on_its_node(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
    raygo.get(pg.ready(), timeout=20)
    row = placement_group_table(pg)
    refs = [
        where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)).remote()
        for i in range(3)
    ]
    seen = raygo.get(refs, timeout=60)
    for i, ran in enumerate(seen):
        assert ran["node_id"] == row["bundles_to_node_id"][i]
        assert ran["placement_group_id"] == pg.id.hex()
        assert ran["gpu_ids"] == [] and ran["cuda_visible_devices"] == ""
        assert ran["resources"] == {"CPU": 1.0}
    assert len({ran["node_id"] for ran in seen}) == 3


def test_fan_out_with_get_wait_put_and_ref_arguments(driver: Cluster) -> None:
    base = raygo.put(100)
    refs = [add.remote(i, b=base) for i in range(20)]
    ready, not_ready = raygo.wait(refs, num_returns=5, timeout=60)
    assert len(ready) == 5 and len(not_ready) == 15
    assert raygo.get(refs, timeout=60) == [100 + i for i in range(20)]
    chained = add.remote(add.remote(1, 2), b=add.remote(3))
    assert raygo.get(chained, timeout=60) == 6
    ready, not_ready = raygo.wait(refs, num_returns=20, timeout=0)
    assert ready == refs and not_ready == []


def test_task_exception_is_ray_task_error_and_its_class(driver: Cluster) -> None:
    with pytest.raises(ValueError) as caught:
        raygo.get(fail.remote("value"), timeout=60)
    assert isinstance(caught.value, RayTaskError)
    assert "bad value" in str(caught.value) and "Traceback" in str(caught.value)
    with pytest.raises(CustomError) as custom:
        raygo.get(fail.remote("custom"), timeout=60)
    assert isinstance(custom.value, RayTaskError)
    assert custom.value.code == 42 and custom.value.cause.code == 42
    # An argument that failed fails the task that takes it, with its error.
    with pytest.raises(RayTaskError):
        raygo.get(add.remote(fail.remote("value")), timeout=60)


@raygo.remote
def meet(directory: str, count: int) -> str:
    """Returns its node once count tasks have reached the meeting point: they ran at once."""
    Path(directory, str(os.getpid())).touch()
    for _ in range(1200):  # bounded: the others arrive long before
        if len(os.listdir(directory)) >= count:
            break
        time.sleep(0.05)
    return raygo.get_runtime_context().get_node_id()


def _kill_when_started(marker: Path) -> int:
    pid = int(poll("the task to write its pid", lambda: marker.exists() and marker.read_text(), timeout=60))
    os.kill(pid, signal.SIGKILL)
    return pid


def test_task_whose_worker_dies_is_retried(driver: Cluster, tmp_path: Path) -> None:
    marker = tmp_path / "retried"
    ref = crash_first_attempt.options(max_retries=1).remote(str(marker))
    pid = _kill_when_started(marker)
    assert raygo.get(ref, timeout=60) == f"attempt after pid {pid}"

    marker = tmp_path / "not-retried"
    ref = crash_first_attempt.options(max_retries=0).remote(str(marker))
    _kill_when_started(marker)
    with pytest.raises(WorkerCrashedError, match="max_retries=0"):
        raygo.get(ref, timeout=60)


def test_removing_the_group_kills_its_running_task(driver: Cluster, tmp_path: Path) -> None:
    pg = placement_group([{"CPU": 1}], strategy="PACK")
    raygo.get(pg.ready(), timeout=20)
    marker = tmp_path / "in-group"
    ref = crash_first_attempt.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)).remote(str(marker))
    pid = int(poll("the task to write its pid", lambda: marker.exists() and marker.read_text(), timeout=60))
    remove_placement_group(pg)
    # Its worker is killed with the bundle; the retry finds the group gone.
    with pytest.raises(TaskPlacementGroupRemoved):
        raygo.get(ref, timeout=60)
    poll(f"worker pid {pid} to be gone", lambda: not Path(f"/proc/{pid}").exists() or
         Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z")


def test_task_larger_than_its_bundle_is_refused_naming_it(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1}, {"CPU": 2}], strategy="PACK")
    raygo.get(pg.ready(), timeout=20)
    with pytest.raises(ValueError, match=f"bundle 0 of placement group {pg.id.hex()}"):
        add.options(num_cpus=2, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)).remote(1)
    with pytest.raises(ValueError, match="cannot fit into any bundles"):
        add.options(num_cpus=3, scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote(1)
    # Bundle 1 holds two CPUs: a two-CPU task fits there, and with "any bundle" too.
    assert raygo.get(add.options(num_cpus=2, scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote(1), timeout=60) == 1


def test_strategies_spread_and_node_affinity(driver: Cluster, tmp_path: Path) -> None:
    target = sorted(nodes_by_id())[-1]
    ran = raygo.get(where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(target, soft=False)).remote(), timeout=60)
    assert ran["node_id"] == target and ran["placement_group_id"] is None
    # Four tasks that run at once, each on its own lease: SPREAD puts them on distinct nodes.
    spread = raygo.get([meet.options(scheduling_strategy="SPREAD").remote(str(tmp_path), 4) for _ in range(4)], timeout=90)
    assert len(set(spread)) == 4


def test_options_not_built_are_refused_naming_them(driver: Cluster) -> None:
    for options, named in (
        ({"runtime_env": {"pip": ["x"]}}, "runtime_env"),
        ({"num_returns": 2}, "num_returns"),
        ({"memory": -1}, "memory"),
        ({"max_restarts": 1}, "max_restarts"),
        ({"bogus": 1}, "bogus"),
        ({"resources": {"GPU": 1}}, "num_gpus"),
    ):
        with pytest.raises(ValueError, match=named):
            add.options(**options)
    with pytest.raises(ValueError, match="must not contain the key 'memory'"):
        add.options(resources={"memory": 1}).remote(1)  # as Ray's: refused at .remote()
    with pytest.raises(TypeError, match="cannot be called directly"):
        add(1)
    with pytest.raises(TypeError, match="Could not serialize the arguments of add"):
        add.remote(threading.Lock())


def test_memory_option_requests_the_memory_resource(driver: Cluster) -> None:
    """memory= is Ray's logical "memory" resource in bytes: a task holds it while it runs, a
    request larger than every node's waits, and one larger than its bundle is refused naming it."""
    most = max(node["Resources"].get("memory", 0) for node in raygo.nodes() if node["Alive"])
    assert most > 0  # every raylet offers its memory
    ran = raygo.get(where.options(memory=2**20).remote(), timeout=60)
    assert ran["resources"] == {"CPU": 1.0, "memory": float(2**20)}
    too_big = where.options(num_cpus=0, memory=int(most) + 2**30).remote()
    ready, _ = raygo.wait([too_big], timeout=3)
    assert ready == []
    with pytest.raises(raygo.exceptions.GetTimeoutError):
        raygo.get(too_big, timeout=1)
    pg = placement_group([{"CPU": 1, "memory": 2**20}])
    raygo.get(pg.ready(), timeout=20)
    strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
    ran = raygo.get(where.options(memory=2**20, scheduling_strategy=strategy).remote(), timeout=60)
    assert ran["placement_group_id"] == pg.id.hex() and ran["resources"]["memory"] == float(2**20)
    with pytest.raises(ValueError, match=f"bundle 0 of placement group {pg.id.hex()}"):
        where.options(memory=2**21, scheduling_strategy=strategy).remote()
    remove_placement_group(pg)
    # An actor holds its memory= for its life, as Ray's.
    holder = MemoryHolder.remote()
    assert raygo.get(holder.resources.remote(), timeout=60).get("memory") == float(2**20)
    raygo.kill(holder)


@raygo.remote(memory=2**20)
class MemoryHolder:
    def resources(self) -> Dict[str, float]:
        return raygo.get_runtime_context().get_assigned_resources()


@pytest.mark.skipif(not _gpu_sim_supported(), reason="bin/raygo has no --gpu-sim dgx-h100")
def test_task_in_gpu_bundle_sees_the_bundles_gpus(gpu_node: Node) -> None:
    pg = placement_group([{"GPU": 2, "CPU": 1}, {"GPU": 1, "CPU": 1}], strategy="STRICT_PACK")
    raygo.get(pg.ready(), timeout=20)
    row = placement_group_table(pg)
    assert set(row["bundles_to_node_id"].values()) == {gpu_node.node_id}
    for index, gpus in ((0, 2), (1, 1)):
        strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=index)
        ran = raygo.get(where.options(num_gpus=gpus, scheduling_strategy=strategy).remote(), timeout=60)
        assert ran["node_id"] == gpu_node.node_id
        assert ran["cuda_visible_devices"] == row["bundles_to_cuda_visible_devices"][index]
        assert ran["gpu_ids"] == row["bundles_to_gpu_ids"][index]
        assert ran["resources"]["GPU"] == gpus
    # One GPU of bundle 0's two: one of the bundle's GPUs, nothing else.
    ran = raygo.get(where.options(num_gpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)).remote(), timeout=60)
    assert len(ran["gpu_ids"]) == 1 and ran["gpu_ids"][0] in row["bundles_to_gpu_ids"][0]
    remove_placement_group(pg)
    # Every strategy's bundles: a task in each sees that bundle's GPU.
    for strategy in ("PACK", "SPREAD", "STRICT_PACK"):
        pg = placement_group([{"GPU": 1, "CPU": 1}] * 2, strategy=strategy)
        raygo.get(pg.ready(), timeout=20)
        row = placement_group_table(pg)
        refs = [where.options(num_gpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i)).remote() for i in range(2)]
        for index, ran in enumerate(raygo.get(refs, timeout=60)):
            assert ran["cuda_visible_devices"] == row["bundles_to_cuda_visible_devices"][index], strategy
            assert ran["node_id"] == row["bundles_to_node_id"][index], strategy
        remove_placement_group(pg)


@raygo.remote
class WhereActor:
    def where(self) -> Dict[str, Any]:
        return {
            "node_id": raygo.get_runtime_context().get_node_id(),
            "gpu_ids": raygo.get_gpu_ids(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }


@pytest.mark.skipif(not _gpu_sim_supported(), reason="bin/raygo has no --gpu-sim dgx-h100")
def test_task_and_actor_in_mig_bundle_see_its_mig_uuid(driver: Cluster) -> None:
    """As Ray's with MIG devices: CUDA_VISIBLE_DEVICES names the bundle's MIG device UUID and
    get_gpu_ids() returns it as a string."""
    node = driver.add_node("--num-cpus", "4", "--gpu-sim", "dgx-h100", "--mig", "0:on", "--node-name", "mig-1")
    try:
        poll("the MIG node in the node table", lambda: node.node_id in nodes_by_id())
        slice_ = "nvidia.com/mig-1g.10gb"
        pg = placement_group([{slice_: 1, "CPU": 1}] * 2, strategy="STRICT_PACK")
        raygo.get(pg.ready(), timeout=30)
        row = placement_group_table(pg)
        uuids = [row["bundles_to_cuda_visible_devices"][i] for i in range(2)]
        assert all(uuid.startswith("MIG-") for uuid in uuids) and uuids[0] != uuids[1]
        for index in range(2):
            strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=index)
            ran = raygo.get(where.options(num_cpus=0, resources={slice_: 1}, scheduling_strategy=strategy).remote(), timeout=60)
            assert ran["node_id"] == node.node_id
            assert ran["cuda_visible_devices"] == uuids[index]
            assert ran["gpu_ids"] == [uuids[index]]
        actor = WhereActor.options(num_cpus=0, resources={slice_: 1},
                                   scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 1)).remote()
        seen = raygo.get(actor.where.remote(), timeout=60)
        assert seen == {"node_id": node.node_id, "gpu_ids": [uuids[1]], "cuda_visible_devices": uuids[1]}
        raygo.kill(actor)
        remove_placement_group(pg)
    finally:
        driver.remove_node(node)
        poll("the MIG node to be dead", lambda: node.node_id not in nodes_by_id())


def test_worker_that_cannot_start_fails_the_task_with_its_stderr(driver: Cluster, tmp_path: Path) -> None:
    """A driver whose working directory shadows the raygo package: its workers (started
    there) exit before registering, and the task fails with their stderr, not silently
    waiting for a worker that will never come."""
    shadow = tmp_path / "cwd" / "raygo"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise SystemExit('no raygo in this directory')\n")
    script = tmp_path / "scripts" / "driver.py"
    script.parent.mkdir()
    script.write_text(textwrap.dedent('''
        import os, sys
        import raygo
        from raygo.exceptions import RaySystemError

        @raygo.remote
        def one():
            return 1

        raygo.init()
        try:
            raygo.get(one.remote(), timeout=60)
        except RaySystemError as err:
            print("FAILED:", err)
        raygo.shutdown()
    '''))
    env = dict(os.environ, RAYGO_ADDRESS=driver.address)
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path / "cwd", env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert "FAILED:" in out.stdout and "could not start a Python worker" in out.stdout, out.stdout + out.stderr
    assert "no raygo in this directory" in out.stdout
