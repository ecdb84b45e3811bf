"""Objects the GCS holds: values too large to travel inline (``put``, a task's or an
actor call's result), as Ray keeps large objects out of its RPCs.

A pickled value larger than ``INLINE_MAX_BYTES`` (Ray's ``max_direct_call_object_size``,
100 KiB) is put into the GCS's internal KV in chunks of one KV value (1 MiB): namespace
``obj``, key ``Object:<job id>:<object id>:<chunk index>``, at most ``MAX_OBJECT_BYTES``
(100 MiB) an object: a larger one is refused naming the limit (here, and by the GCS for
a chunk past it). What travels instead is a ``GcsObject`` (job, object id, size): in a
result it resolves the ref, whose ``get`` reads the chunks back; among a task's arguments
it unpickles, in the worker, into the value read from the GCS.

Ownership is Ray's: the process that made the ref (the driver that called ``put`` or
submitted the task) owns the object, and deletes it when its last ``ObjectRef`` to it is
collected (``ObjectRef.__del__``; a task holds the refs among its arguments until it
ends). The GCS deletes every object of a job when the job ends.
"""

from __future__ import annotations

import math
import os
import queue
import threading
from typing import Any, Optional

import grpc

from raygo._proto import gcs_pb2, gcs_pb2_grpc

OBJECT_KV_NAMESPACE = "obj"
# Larger pickled values go through the GCS (Ray's max_direct_call_object_size).
INLINE_MAX_BYTES = 100 * 1024
# One KV value (the GCS's maxKVValueBytes).
CHUNK_BYTES = 1 << 20
# The GCS's maxObjectBytes.
MAX_OBJECT_BYTES = 100 << 20
# Bounds one chunk's put or get.
CHUNK_TIMEOUT_S = 60.0


class GcsObject:
    """Where the GCS holds a value: its job, its id, its pickled size."""

    __slots__ = ("job_id", "object_id", "size")

    def __init__(self, job_id: str, object_id: str, size: int) -> None:
        self.job_id = job_id
        self.object_id = object_id
        self.size = size

    @property
    def prefix(self) -> str:
        return f"Object:{self.job_id}:{self.object_id}:"

    @property
    def chunks(self) -> int:
        return max(1, math.ceil(self.size / CHUNK_BYTES))

    def __reduce__(self) -> Any:
        return (GcsObject, (self.job_id, self.object_id, self.size))

    def __repr__(self) -> str:
        return f"GcsObject({self.prefix} {self.size} bytes)"


class _GcsArgument:
    """A GcsObject among a task's arguments: unpickled (in the worker) it is the value."""

    __slots__ = ("held",)

    def __init__(self, held: GcsObject) -> None:
        self.held = held

    def __reduce__(self) -> Any:
        return (_read_argument, (self.held.job_id, self.held.object_id, self.held.size))


def _read_argument(job_id: str, object_id: str, size: int) -> Any:
    return fetch(GcsObject(job_id, object_id, size))


_worker_kv: Optional[gcs_pb2_grpc.InternalKVServiceStub] = None
_worker_kv_lock = threading.Lock()


def _kv() -> gcs_pb2_grpc.InternalKVServiceStub:
    """The GCS's KV: the driver's connection, or in a worker one to RAYGO_GCS_ADDRESS."""
    from raygo import _worker

    if _worker._worker_ctx is None:
        from raygo import _task_client

        return _task_client.submitter(_worker.global_client())._kv
    global _worker_kv
    with _worker_kv_lock:
        if _worker_kv is None:
            from raygo._auth import load_token
            from raygo._gcs import open_channel

            _worker_kv = gcs_pb2_grpc.InternalKVServiceStub(open_channel(os.environ["RAYGO_GCS_ADDRESS"], load_token())[1])
        return _worker_kv


def check_size(size: int) -> None:
    if size > MAX_OBJECT_BYTES:
        raise ValueError(
            f"An object of {size} bytes (pickled) is too large: objects held by the GCS are at most "
            f"{MAX_OBJECT_BYTES} bytes (100 MiB)."
        )


def store(pickled: bytes, job_id: str) -> GcsObject:
    """Puts a pickled value into the GCS under the job; returns where it is."""
    check_size(len(pickled))
    held = GcsObject(job_id, os.urandom(16).hex(), len(pickled))
    kv = _kv()
    view = memoryview(pickled)
    try:
        for index in range(held.chunks):
            chunk = bytes(view[index * CHUNK_BYTES:(index + 1) * CHUNK_BYTES])
            kv.KVPut(gcs_pb2.KVPutRequest(namespace=OBJECT_KV_NAMESPACE, key=(held.prefix + str(index)).encode(),
                                          value=chunk, overwrite=True), timeout=CHUNK_TIMEOUT_S, wait_for_ready=True)
    except grpc.RpcError as err:
        _delete(held)
        from raygo._gcs import rpc_status

        code, details = rpc_status(err)
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            raise ValueError(details) from None
        raise ConnectionError(f"could not put an object of {held.size} bytes into the GCS: {code}: {details}") from None
    return held


def fetch(held: GcsObject) -> Any:
    """Reads a value the GCS holds."""
    from raygo import _task_client
    from raygo.exceptions import ObjectFreedError

    kv = _kv()
    parts = []
    for index in range(held.chunks):
        reply = kv.KVGet(gcs_pb2.KVGetRequest(namespace=OBJECT_KV_NAMESPACE, key=(held.prefix + str(index)).encode()),
                         timeout=CHUNK_TIMEOUT_S, wait_for_ready=True)
        if not reply.found:
            raise ObjectFreedError(
                f"Object {held.object_id} of job {held.job_id} is no longer in the GCS: its owner's last ref to it "
                "was collected, or its job ended."
            )
        parts.append(reply.value)
    return _task_client._pickle().loads(b"".join(parts))


def pickled_value(pickled: bytes, job_id: str) -> bytes:
    """What to send for a pickled value: itself when small, else the pickle of the
    GcsObject it was put into the GCS as (a worker's results)."""
    if len(pickled) <= INLINE_MAX_BYTES:
        return pickled
    from raygo import _task_client

    return _task_client._pickle().dumps(store(pickled, job_id))


def value_of(result: Any) -> Any:
    """A ref's value from what resolved it: read from the GCS when it holds it."""
    return fetch(result) if isinstance(result, GcsObject) else result


def argument_of(result: Any) -> Any:
    """What a resolved ref becomes among a task's arguments: the value, or for a value
    the GCS holds, what reads it in the worker."""
    return _GcsArgument(result) if isinstance(result, GcsObject) else result


# Deletions run on one background thread: ObjectRef.__del__ may run in any thread, at
# any moment, and must not block on the GCS.
_deletions: "queue.SimpleQueue[GcsObject]" = queue.SimpleQueue()
_deleter: Optional[threading.Thread] = None
_deleter_lock = threading.Lock()


def release(result: Any) -> None:
    """The owner's last ref to result is gone: delete it from the GCS if it holds it."""
    global _deleter
    if not isinstance(result, GcsObject):
        return
    _deletions.put(result)
    with _deleter_lock:
        if _deleter is None:
            _deleter = threading.Thread(target=_delete_loop, name="raygo-object-free", daemon=True)
            _deleter.start()


def _delete_loop() -> None:
    while True:
        _delete(_deletions.get())


def _delete(held: GcsObject) -> None:
    try:
        _kv().KVDel(gcs_pb2.KVDelRequest(namespace=OBJECT_KV_NAMESPACE, key=held.prefix.encode(), del_by_prefix=True),
                    timeout=CHUNK_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - a disconnected driver: the job's end deletes it
        pass


__all__ = ["GcsObject", "store", "fetch", "pickled_value", "value_of", "argument_of", "release", "check_size",
           "INLINE_MAX_BYTES", "MAX_OBJECT_BYTES", "OBJECT_KV_NAMESPACE"]
