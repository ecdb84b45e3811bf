"""``ObjectRef`` and the ``get`` / ``wait`` calls that resolve it, with Ray's semantics.

Each reference is backed by a future: ``PlacementGroup.ready()``'s is settled by a long-poll
on the GCS, a task's or an actor call's by the reply of the worker that ran it
(raygo._task_client, raygo._actor), ``put``'s at once. A value too large to travel inline
resolves its future as a ``raygo._objects.GcsObject``: ``get`` reads it from the GCS, and
the ref, its owner's, deletes it there when collected.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from typing import Any, Generator, List, Optional, Sequence, Tuple, Union

from raygo._blocking import wait_futures
from raygo import _objects
from raygo._gcs import nonnegative_timeout
from raygo.exceptions import GetTimeoutError


class ObjectRef:
    """A reference to a value the cluster produces, resolved by ``raygo.get``,
    ``raygo.wait`` or ``await``.

    Refs compare and hash by their id. Dropping the last reference to an unresolved ref
    stops its wait on the GCS.
    """

    __slots__ = ("_id", "_future", "_shared", "__weakref__")

    def __init__(self, future: "concurrent.futures.Future[Any]") -> None:
        self._id = os.urandom(28)
        self._future = future
        # Once the future is handed out (future(), await), dropping the ref must not cancel it.
        self._shared = False

    @classmethod
    def _resolved(cls, value: Any) -> "ObjectRef":
        future: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        future.set_result(value)
        return cls(future)

    def hex(self) -> str:
        """The ref's id as hex."""
        return self._id.hex()

    def binary(self) -> bytes:
        """The ref's id."""
        return self._id

    def future(self) -> "concurrent.futures.Future[Any]":
        """A ``concurrent.futures.Future`` of the value (as Ray's ``ObjectRef.future()``)."""
        self._shared = True
        out: "concurrent.futures.Future[Any]" = concurrent.futures.Future()

        def resolved(done: "concurrent.futures.Future[Any]") -> None:
            try:
                out.set_result(_objects.value_of(done.result()))
            except BaseException as err:  # noqa: BLE001 - the ref's error is the future's
                out.set_exception(err)

        self._future.add_done_callback(resolved)
        return out

    def __await__(self) -> Generator[Any, None, Any]:
        self._shared = True

        async def value() -> Any:
            return _objects.value_of(await asyncio.wrap_future(self._future))

        return value().__await__()

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ObjectRef) and other._id == self._id

    def __hash__(self) -> int:
        return hash(self._id)

    def __repr__(self) -> str:
        return f"ObjectRef({self.hex()})"

    def __del__(self) -> None:
        future = getattr(self, "_future", None)
        if future is None:
            return
        if not future.done():
            if not getattr(self, "_shared", True):
                future.cancel()
            return
        try:
            if not future.cancelled() and future.exception() is None:
                _objects.release(future.result())  # the owner's last ref: free what the GCS holds
        except Exception:  # noqa: BLE001 - at interpreter exit; the job's end frees it
            pass


def get(object_refs: Union[ObjectRef, Sequence[ObjectRef]], *, timeout: Optional[float] = None) -> Any:
    """Returns the value of a ref, or the list of values of a list of refs.

    Args:
        object_refs: an ``ObjectRef`` or a list of them.
        timeout: seconds to wait for all of them; None (or, as in Ray, a negative number)
            waits as long as it takes.

    Raises:
        GetTimeoutError: the timeout passed before every ref resolved.
        TaskPlacementGroupRemoved: (from ``pg.ready()``) the group was removed first.
        ValueError / TypeError: not a ref or a list of refs, or a timeout that is no number.
    """
    single = isinstance(object_refs, ObjectRef)
    if single:
        refs: List[ObjectRef] = [object_refs]  # type: ignore[list-item]
    elif isinstance(object_refs, list):
        refs = object_refs
        for ref in refs:
            if not isinstance(ref, ObjectRef):
                raise TypeError(f"Attempting to call `get` on the value {ref!r}, which is not a raygo.ObjectRef.")
    else:
        raise ValueError(
            f"Invalid type of object refs, {type(object_refs)}, is given. "
            "'object_refs' must either be an ObjectRef or a list of ObjectRefs."
        )
    if timeout is not None and not isinstance(timeout, bool) and isinstance(timeout, (int, float)) and timeout < 0:
        timeout = None  # as Ray's get: a negative timeout waits as long as it takes
    timeout = nonnegative_timeout(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    values = []
    for ref in refs:
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        done, _ = wait_futures([ref._future], timeout=remaining)
        if not done:
            # A task no node can hold says why it waits (raygo._task_client sets it).
            reason = getattr(ref._future, "raygo_wait_reason", "")
            raise GetTimeoutError("Get timed out: some object(s) not ready." + (f" A task waits: {reason}" if reason else ""))
        values.append(_objects.value_of(ref._future.result()))
    return values[0] if single else values


def wait(
    object_refs: Sequence[ObjectRef],
    *,
    num_returns: int = 1,
    timeout: Optional[float] = None,
    fetch_local: bool = True,
) -> Tuple[List[ObjectRef], List[ObjectRef]]:
    """Waits until ``num_returns`` of the refs are resolved (a failed ref counts), or the
    timeout passes.

    Returns ``(ready, not_ready)``: at most ``num_returns`` resolved refs, and the rest, each
    in the order given. ``fetch_local`` is accepted for Ray compatibility (there is nothing
    to fetch).
    """
    del fetch_local
    if isinstance(object_refs, ObjectRef) or not isinstance(object_refs, list):
        raise TypeError(f"wait() expected a list of raygo.ObjectRef, got {type(object_refs)}: {object_refs!r}")
    for ref in object_refs:
        if not isinstance(ref, ObjectRef):
            raise TypeError(f"wait() expected a list of raygo.ObjectRef, got list containing {type(ref)}")
    if len(set(object_refs)) != len(object_refs):
        raise ValueError("Wait requires a list of unique object refs.")
    if isinstance(num_returns, bool) or not isinstance(num_returns, int):
        raise TypeError(f"num_returns must be an int, got {num_returns!r}")
    if num_returns <= 0:
        raise ValueError(f"Invalid number of objects to return {num_returns}.")
    if num_returns > len(object_refs) and object_refs:
        raise ValueError("num_returns cannot be greater than the number of objects provided to raygo.wait.")
    timeout = nonnegative_timeout(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while object_refs:
        pending = [ref._future for ref in object_refs if not ref._future.done()]
        if len(object_refs) - len(pending) >= num_returns:
            break
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            break
        wait_futures(pending, timeout=remaining, return_when=concurrent.futures.FIRST_COMPLETED)
    ready: List[ObjectRef] = []
    not_ready: List[ObjectRef] = []
    for ref in object_refs:
        (ready if ref._future.done() and len(ready) < num_returns else not_ready).append(ref)
    return ready, not_ready
