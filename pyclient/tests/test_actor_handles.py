"""Actor handles passed to tasks and actors, and detached named actors outliving their
driver, on the session cluster."""

from __future__ import annotations

import os
import pickle
import signal
import uuid
from typing import Any, List

import pytest

import raygo
from raygo.exceptions import ActorDiedError

from conftest import Cluster, poll, run_driver


@raygo.remote
class Counter:
    def __init__(self) -> None:
        self.n = 0

    def add(self, k: int) -> int:
        self.n += k
        return self.n

    def value(self) -> int:
        return self.n


@raygo.remote
def add_through(counter: Any, times: int) -> List[int]:
    """Calls the actor whose handle it was given, in order."""
    return raygo.get([counter.add.remote(1) for _ in range(times)], timeout=60)


@raygo.remote
class Relay:
    def __init__(self, counter: Any) -> None:
        self.counter = counter  # a handle kept by an actor

    def bump(self) -> int:
        return raygo.get(self.counter.add.remote(10), timeout=60)


@raygo.remote
def make_counter() -> Any:
    counter = Counter.remote()
    raygo.get(counter.add.remote(5), timeout=60)
    return counter


def test_handle_passed_to_a_task_is_called_from_the_task(driver: Cluster) -> None:
    counter = Counter.remote()
    assert raygo.get(counter.add.remote(100), timeout=60) == 100
    assert raygo.get(add_through.remote(counter, 3), timeout=120) == [101, 102, 103]
    # In a list, as a keyword: the same actor.
    assert raygo.get(add_through.remote(times=2, counter=counter), timeout=120) == [104, 105]
    assert raygo.get(counter.value.remote(), timeout=60) == 105


def test_handle_kept_by_an_actor_and_returned_from_a_task(driver: Cluster) -> None:
    counter = Counter.remote()
    relay = Relay.remote(counter)
    assert raygo.get(relay.bump.remote(), timeout=120) == 10
    assert raygo.get(counter.value.remote(), timeout=60) == 10
    made = raygo.get(make_counter.remote(), timeout=120)  # a handle made in a task
    assert raygo.get(made.add.remote(1), timeout=60) == 6


def test_handle_pickles_as_a_reference(driver: Cluster) -> None:
    counter = Counter.remote()
    copy = pickle.loads(pickle.dumps(counter))
    assert copy == counter and copy is not counter
    assert raygo.get(copy.add.remote(2), timeout=60) == 2


_FIRST_DRIVER = """
import os
import raygo

@raygo.remote
class Keeper:
    def __init__(self):
        self.items = []

    def keep(self, item):
        self.items.append(item)
        return list(self.items)

    def pid(self):
        return os.getpid()

raygo.init(namespace="{namespace}")
kept = Keeper.options(name="{name}", lifetime="{lifetime}", max_restarts=1, max_task_retries=1).remote()
print("KEPT", raygo.get(kept.keep.remote("first"), timeout=60))
print("JOB", raygo.get_runtime_context().get_job_id())
"""


def _job_functions(job_id: str) -> List[str]:
    """The keys of the job's functions in the GCS's KV."""
    from raygo import _task_client
    from raygo._proto import gcs_pb2

    kv = _task_client.submitter(raygo._worker.global_client())._kv
    reply = kv.KVKeys(gcs_pb2.KVKeysRequest(namespace="fun", prefix=f"RemoteFunction:{job_id}:".encode()), timeout=10)
    return [key.decode() for key in reply.keys]


def test_detached_named_actor_outlives_its_driver(driver: Cluster) -> None:
    namespace, name = f"detached-{uuid.uuid4().hex[:8]}", "keeper"
    first = run_driver(driver, _FIRST_DRIVER.format(namespace=namespace, name=name, lifetime="detached"), timeout=120)
    assert first.returncode == 0, first.stderr
    assert "KEPT ['first']" in first.stdout
    # The first driver exited (its job ended); another driver finds the actor and calls it.
    keeper = raygo.get_actor(name, namespace=namespace)
    assert raygo.get(keeper.keep.remote("second"), timeout=60) == ["first", "second"]
    # Its job ended, but its class stays in the KV: its worker killed, it restarts (the
    # constructor runs again) and the call is retried there.
    job_id = first.stdout.split("JOB ", 1)[1].split()[0]
    assert len(_job_functions(job_id)) == 1
    os.kill(raygo.get(keeper.pid.remote(), timeout=60), signal.SIGKILL)
    assert raygo.get(keeper.keep.remote("after restart"), timeout=120) == ["after restart"]
    raygo.kill(keeper)
    with pytest.raises(ActorDiedError):
        raygo.get(keeper.keep.remote("third"), timeout=60)
    poll("the killed actor's name released",
         lambda: _lookup_fails(name, namespace), timeout=20)
    poll("the dead detached actor's class deleted with its job's", lambda: _job_functions(job_id) == [], timeout=20)


def test_non_detached_named_actor_ends_with_its_driver(driver: Cluster) -> None:
    namespace, name = f"attached-{uuid.uuid4().hex[:8]}", "keeper"
    first = run_driver(driver, _FIRST_DRIVER.format(namespace=namespace, name=name, lifetime="non_detached"), timeout=120)
    assert first.returncode == 0, first.stderr
    poll("the job's actor gone with it", lambda: _lookup_fails(name, namespace), timeout=20)


def _lookup_fails(name: str, namespace: str) -> bool:
    try:
        raygo.get_actor(name, namespace=namespace)
    except ValueError:
        return True
    return False
