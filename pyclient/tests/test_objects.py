"""Objects the GCS holds (raygo._objects) on the session cluster: values larger than the
inline limit through ``put`` and task and actor results, their 100 MiB limit, and their
freeing by the owner's refs and by the job's end.
"""

from __future__ import annotations

import gc
import os

import pytest

import raygo
from raygo import _objects, _task_client
from raygo._proto import gcs_pb2
from raygo.exceptions import RayTaskError

from conftest import Cluster, poll, run_driver

MiB = 1 << 20


def held_keys(job_id: str = "") -> list:
    """The object chunks the GCS holds, of one job (the connected driver's by default)."""
    client = raygo._worker.global_client()
    job = job_id or client.job_id
    kv = _task_client.submitter(client)._kv
    reply = kv.KVKeys(gcs_pb2.KVKeysRequest(namespace=_objects.OBJECT_KV_NAMESPACE, prefix=f"Object:{job}:".encode()), timeout=10)
    return sorted(k.decode() for k in reply.keys)


@raygo.remote
def length(data: bytes) -> int:
    return len(data)


@raygo.remote
def make(size: int) -> bytes:
    return os.urandom(16) + b"x" * (size - 16)


@raygo.remote
class Store:
    def make(self, size: int) -> bytes:
        return b"y" * size


def test_put_of_20_mib_goes_through_the_gcs(driver: Cluster) -> None:
    data = os.urandom(20 * MiB)
    ref = raygo.put(data)
    assert len(held_keys()) == 21  # 20 MiB and the pickle's header: 21 chunks of 1 MiB
    assert raygo.get(ref) == data
    # A ref passed to a task is read from the GCS by the worker.
    assert raygo.get(length.remote(ref), timeout=120) == 20 * MiB
    del ref
    gc.collect()
    poll("the object freed once its ref is gone", lambda: held_keys() == [], timeout=30)


def test_task_result_of_20_mib_round_trips(driver: Cluster) -> None:
    ref = make.remote(20 * MiB)
    value = raygo.get(ref, timeout=120)
    assert len(value) == 20 * MiB and value.endswith(b"x" * 100)
    assert held_keys() != []  # the GCS holds it while the ref lives
    assert raygo.get(length.remote(ref), timeout=120) == 20 * MiB  # and it passes on to another task
    actor = Store.remote()
    from_actor = actor.make.remote(5 * MiB)
    assert raygo.get(from_actor, timeout=120) == b"y" * (5 * MiB)
    del ref, from_actor, value
    gc.collect()
    poll("the results freed once their refs are gone", lambda: held_keys() == [], timeout=30)
    raygo.kill(actor)


def test_small_values_stay_inline(driver: Cluster) -> None:
    ref = raygo.put(b"z" * 1000)
    assert raygo.get([ref, make.remote(50_000)], timeout=60)[0] == b"z" * 1000
    assert held_keys() == []


def test_objects_over_100_mib_fail_naming_the_limit(driver: Cluster) -> None:
    with pytest.raises(ValueError, match=r"at most 104857600 bytes \(100 MiB\)"):
        raygo.put(b"a" * (100 * MiB + 1))
    with pytest.raises(ValueError, match=r"at most 104857600 bytes \(100 MiB\)") as raised:
        raygo.get(make.remote(100 * MiB + 1), timeout=180)
    assert isinstance(raised.value, RayTaskError)
    assert held_keys() == []


def test_the_jobs_objects_are_freed_when_its_driver_exits(driver: Cluster) -> None:
    # The driver exits without collecting its ref (os._exit): the job's end frees it.
    result = run_driver(driver, """
        import os, raygo
        raygo.init()
        ref = raygo.put(b"q" * (3 << 20))
        print(raygo.get_runtime_context().get_job_id(), flush=True)
        os._exit(0)
    """)
    assert result.returncode == 0, result.stderr
    job = result.stdout.strip().splitlines()[-1]
    poll("the exited driver's objects freed", lambda: held_keys(job) == [], timeout=60)


def test_a_freed_object_is_an_object_freed_error(driver: Cluster) -> None:
    held = _objects.store(_task_client._pickle().dumps(b"w" * (2 * MiB)), raygo._worker.global_client().job_id)
    assert _objects.fetch(held) == b"w" * (2 * MiB)
    _objects.release(held)
    poll("the released object gone", lambda: held_keys() == [], timeout=30)
    with pytest.raises(raygo.exceptions.ObjectFreedError):
        _objects.fetch(held)


def test_await_and_future_give_the_value(driver: Cluster) -> None:
    import asyncio

    ref = raygo.put(b"f" * (MiB + 5))
    assert ref.future().result(timeout=60) == b"f" * (MiB + 5)

    async def awaited() -> bytes:
        return await ref

    assert asyncio.run(awaited()) == b"f" * (MiB + 5)
