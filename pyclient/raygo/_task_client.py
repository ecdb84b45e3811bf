"""The driver's half of Python tasks: the worker-lease design of the Go SDK
(sdk/tasks.go), for Python workers.

Tasks of one resource shape and strategy (a "scheduling key") wait in one queue. For a
queue with waiting tasks the driver asks the GCS where it may lease a worker
(``ActorInfoService.ChooseLeaseTargets``: the node choice the GCS makes for actors and Go
tasks, with the job and a charge id for queue quotas), leases one from those raylets in
turn (``RequestWorkerLease`` with ``python_worker``: the raylet starts
``<this interpreter> -m raygo._worker_main`` in this working directory with this sys.path,
inside the bundle when the strategy names one), pushes the queue's tasks to it one at a
time (``CoreWorkerService.PushTask``) and returns it when none waits. At most eight lease
requests per key are in flight. A task whose worker dies goes back to the queue's front
until it has died ``max_retries`` times (-1: no limit), then fails with
``WorkerCrashedError``; an exception the task raised is never retried.

Functions travel as Ray ships them: pickled with cloudpickle, content-addressed (SHA-256
of the pickle) under ``RemoteFunction:<job>:<sha256>`` in the GCS's internal KV (namespace
``fun``, at most 1 MiB a value), put once per function and fetched once per worker.
Arguments travel inline in the push; a result inline in its reply, or through the GCS when
it is larger than 100 KiB pickled (raygo._objects).
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import itertools
import logging
import os
import sys
import threading
import weakref
from typing import Any, Deque, Dict, List, Optional, Tuple

import grpc

from raygo._auth import load_token
from raygo._gcs import DEFAULT_RPC_TIMEOUT_S, GcsClient, open_channel, rpc_status
from raygo import _objects
from raygo._object_ref import ObjectRef
from raygo._proto import (
    actor_pb2,
    actor_pb2_grpc,
    gcs_pb2,
    gcs_pb2_grpc,
    placement_group_pb2,
    raylet_pb2,
    raylet_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)
from raygo.exceptions import (
    RaySystemError,
    RayTaskError,
    TaskPlacementGroupRemoved,
    TaskUnschedulableError,
    WorkerCrashedError,
)

logger = logging.getLogger("raygo")

FUNCTION_KV_NAMESPACE = "fun"
# Bounds the lease requests in flight for one scheduling key (sdk/tasks.go's value).
MAX_LEASE_REQUESTS_PER_KEY = 8
# Bounds one lease request: a first worker on a node has to start its interpreter.
LEASE_TIMEOUT_S = 120.0
# The GCS's reason codes (placement.ReasonCode) the submitter acts on.
REASON_GROUP_NOT_READY = "group_not_ready"
REASON_GROUP_REMOVED = "group_removed"


def _pickle() -> Any:
    try:
        import cloudpickle
    except ImportError:  # pragma: no cover - a dependency of the package
        raise ImportError("raygo tasks need cloudpickle: pip install cloudpickle") from None
    return cloudpickle


class _Channels:
    """One gRPC channel per address (GCS, raylets, workers), carrying the protocol version
    and the cluster token, over TLS when the cluster uses it."""

    def __init__(self) -> None:
        self._token = load_token()
        self._lock = threading.Lock()
        self.channels: Dict[str, Tuple[grpc.Channel, grpc.Channel]] = {}

    def get(self, address: str) -> grpc.Channel:
        with self._lock:
            pair = self.channels.get(address)
            if pair is None:
                pair = open_channel(address, self._token)
                self.channels[address] = pair
            return pair[1]

    def forget(self, address: str) -> None:
        with self._lock:
            pair = self.channels.pop(address, None)
        if pair is not None:
            pair[0].close()

    def close(self) -> None:
        with self._lock:
            pairs, self.channels = list(self.channels.values()), {}
        for raw, _ in pairs:
            raw.close()


class _Task:
    __slots__ = ("task_id", "function_key", "name", "args", "future", "attempt", "max_retries")

    def __init__(self, function_key: str, name: str, args: bytes, future: "concurrent.futures.Future[Any]", max_retries: int) -> None:
        self.task_id = new_task_id()
        self.function_key = function_key
        self.name = name
        self.args = args
        self.future = future
        self.attempt = 0
        self.max_retries = max_retries


class _Queue:
    """The tasks of one scheduling key. Guarded by the submitter's lock."""

    def __init__(self, key: str, resources: Dict[str, float], strategy: Any) -> None:
        self.key = key
        self.resources = resources
        self.strategy = strategy
        self.pending: Deque[_Task] = collections.deque()
        self.leases = 0
        self.requesting = 0


def settle(future: "concurrent.futures.Future[Any]", value: Any = None, error: Optional[BaseException] = None) -> None:
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except concurrent.futures.InvalidStateError:
        pass


def _scheduling_key(resources: Dict[str, float], strategy: Any) -> str:
    shape = ";".join(f"{name}={amount:g}" for name, amount in sorted(resources.items()))
    selectors = "|".join(";".join(f"{k}={v}" for k, v in sorted(s.items())) for s in (strategy.label_selector, strategy.soft_label_selector))
    return (f"{shape}|{strategy.kind}|{strategy.placement_group_id}|{strategy.bundle_index}|{strategy.node_id}|{strategy.soft}"
            f"|{strategy.placement_group_capture_child_tasks}|{selectors}")


def _python_worker() -> Any:
    """How raylets start this driver's workers: this interpreter, directory and sys.path;
    in a worker, the ones it was started with, so its nested tasks reuse workers alike."""
    from raygo import _worker

    if _worker.is_worker():
        return _worker.worker_context().python_worker()
    cwd = os.getcwd()
    path = []
    for entry in sys.path:
        entry = os.path.abspath(entry or cwd)
        if entry not in path:
            path.append(entry)
    return raylet_pb2.PythonWorker(interpreter=os.path.abspath(sys.executable), working_dir=cwd, sys_path=path)


class _Lease:
    """One lease attempt's quota charge at the GCS (queues on)."""

    def __init__(self, charge_id: str) -> None:
        self.charge_id = charge_id
        self.charged = False


class _Retry(Exception):
    """A lease attempt that may succeed later (no room, no node yet, a raylet away)."""


class TaskSubmitter:
    """Submits one driver's Python tasks. Thread-safe; one per connection."""

    def __init__(self, client: GcsClient) -> None:
        self._client = client
        self.channels = _Channels()
        gcs = self.channels.get(client.address)
        self.actors = actor_pb2_grpc.ActorInfoServiceStub(gcs)
        self._kv = gcs_pb2_grpc.InternalKVServiceStub(gcs)
        self.python_worker = _python_worker()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._queues: Dict[str, _Queue] = {}
        self._exported: Dict[str, bool] = {}
        self._charge_prefix = os.urandom(4).hex()
        self._charges = itertools.count(1)
        self._bundles: Dict[str, List[Dict[str, float]]] = {}

    # --- functions and bundles -----------------------------------------------------------

    def export_function(self, pickled: bytes) -> str:
        """Puts a pickled function into the GCS's KV (once) and returns its key."""
        key = f"RemoteFunction:{self._client.job_id}:{hashlib.sha256(pickled).hexdigest()}"
        if key not in self._exported:
            self._client.call(
                "export a remote function",
                self._kv.KVPut,
                gcs_pb2.KVPutRequest(namespace=FUNCTION_KV_NAMESPACE, key=key.encode(), value=pickled, overwrite=False),
            )
            self._exported[key] = True
        return key

    def bundle_specs(self, pg_id: str) -> List[Dict[str, float]]:
        """A group's bundle shapes, read once (they never change)."""
        specs = self._bundles.get(pg_id)
        if specs is None:
            info = self._client.get_placement_group(pg_id)
            if info is None:
                raise ValueError(f"placement group {pg_id}: no such group")
            if info.state == placement_group_pb2.REMOVED:
                raise TaskPlacementGroupRemoved(f"placement group {pg_id} was removed")
            specs = [{k: v for k, v in b.unit_resources.items() if v} for b in info.bundles]
            self._bundles[pg_id] = specs
        return specs

    # --- submission ---------------------------------------------------------------------

    def submit(
        self,
        function_key: str,
        name: str,
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
        resources: Dict[str, float],
        strategy: Any,
        max_retries: int,
    ) -> ObjectRef:
        """Queues a task and returns the ref of its result. Refs among the top-level
        arguments are resolved (in the driver) before the task is queued."""
        future: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        future.set_running_or_notify_cancel()  # a dropped ref never cancels a task
        ref = ObjectRef(future)
        future.raygo_ref = weakref.ref(ref)  # type: ignore[attr-defined]
        deps = [a for a in itertools.chain(args, kwargs.values()) if isinstance(a, ObjectRef)]
        if deps:  # the task holds its argument refs (and what the GCS holds for them) until it ends
            future.add_done_callback(lambda _, held=deps: None)
        key = _scheduling_key(resources, strategy)

        def pickled(call_args: Tuple[Any, ...], call_kwargs: Dict[str, Any]) -> bytes:
            try:
                return bytes(_pickle().dumps((call_args, call_kwargs)))
            except Exception as err:
                raise TypeError(f"Could not serialize the arguments of {name}: {err!r}") from err

        def enqueue(blob: bytes) -> None:
            task = _Task(function_key, name, blob, future, max_retries)
            with self._lock:
                if self._closed.is_set():
                    settle(future, error=RaySystemError(f"task {name}: raygo.shutdown() was called"))
                    return
                queue = self._queues.get(key)
                if queue is None:
                    queue = self._queues[key] = _Queue(key, resources, strategy)
                queue.pending.append(task)
                self._request_leases_locked(queue)

        if not deps:
            enqueue(pickled(args, kwargs))  # arguments that do not pickle raise here, as in Ray
            return ref

        def resolve() -> None:
            def value(arg: Any) -> Any:
                return _objects.argument_of(arg._future.result()) if isinstance(arg, ObjectRef) else arg

            try:
                blob = pickled(tuple(value(a) for a in args), {k: value(v) for k, v in kwargs.items()})
            except BaseException as err:  # a failed argument fails the task with its error
                settle(future, error=err)
                return
            enqueue(blob)

        threading.Thread(target=resolve, name=f"raygo-task-{name}-args", daemon=True).start()
        return ref

    def _request_leases_locked(self, queue: _Queue) -> None:
        while queue.requesting < len(queue.pending) and queue.requesting < MAX_LEASE_REQUESTS_PER_KEY:
            queue.requesting += 1
            threading.Thread(target=self._lease_thread, args=(queue,), name="raygo-lease", daemon=True).start()

    def close(self) -> None:
        """Stops the lease threads and fails the tasks still waiting for a worker."""
        self._closed.set()
        with self._lock:
            waiting = [t for q in self._queues.values() for t in q.pending]
            for q in self._queues.values():
                q.pending.clear()
        for task in waiting:
            settle(task.future, error=RaySystemError(f"task {task.name}: raygo.shutdown() was called"))
        self.channels.close()

    # --- leases -------------------------------------------------------------------------

    def _lease_thread(self, queue: _Queue) -> None:
        """Runs one lease; after shutdown (channels closed under it) it just ends. An
        unexpected error fails the queue's waiting tasks rather than leaving them waiting."""
        try:
            self._lease(queue)
        except Exception as err:
            if self._closed.is_set():
                return
            logger.exception("raygo: task lease failed")
            with self._lock:
                failed = list(queue.pending)
                queue.pending.clear()
            for task in failed:
                settle(task.future, error=RaySystemError(f"task {task.name}: the driver's lease of a worker failed: {err!r}"))

    def _lease(self, queue: _Queue) -> None:
        """Gets one worker for the queue and runs its tasks on it; the quota charge the
        GCS may take for the lease is returned when it ends."""
        lease = _Lease(f"{self._charge_prefix}-{next(self._charges)}")
        delay = 0.01
        try:
            while True:
                with self._lock:
                    if not queue.pending or self._closed.is_set():
                        queue.requesting -= 1
                        return
                    wait_for_room = queue.leases == 0
                try:
                    worker, raylet = self._request_worker(queue, wait_for_room, lease)
                except _Retry:
                    if not wait_for_room:
                        with self._lock:
                            if queue.leases > 0:  # the leased workers run what waits
                                queue.requesting -= 1
                                return
                    if self._closed.wait(delay):
                        continue
                    delay = min(delay * 2, 1.0)
                    continue
                except Exception as err:  # it can never run as asked: fail what waits
                    with self._lock:
                        queue.requesting -= 1
                        failed = list(queue.pending)
                        queue.pending.clear()
                    for task in failed:
                        settle(task.future, error=err)
                    return
                with self._lock:
                    queue.requesting -= 1
                    queue.leases += 1
                self._run_lease(queue, worker, raylet)
                return
        finally:
            self._return_charge(lease)

    def _return_charge(self, lease: _Lease) -> None:
        if not lease.charged:
            return
        try:
            self.actors.ReturnLeaseCharge(
                actor_pb2.ReturnLeaseChargeRequest(job_id=self._client.job_id, charge_id=lease.charge_id), timeout=5.0
            )
        except (grpc.RpcError, ValueError):
            pass  # the job's end returns what is left

    def _lease_targets(self, queue: _Queue, lease: _Lease) -> List[str]:
        """The raylets to ask, best first (ChooseLeaseTargets); waits for an unplaced group."""
        with self._lock:
            backlog = len(queue.pending)
        request = actor_pb2.ChooseLeaseTargetsRequest(
            request_id=queue.key, resources=queue.resources, scheduling_strategy=queue.strategy,
            backlog=backlog, job_id=self._client.job_id, charge_id=lease.charge_id,
        )
        while True:
            try:
                reply = self.actors.ChooseLeaseTargets(request, timeout=DEFAULT_RPC_TIMEOUT_S, wait_for_ready=True)
            except grpc.RpcError as err:
                code, _ = rpc_status(err)
                if code == grpc.StatusCode.INVALID_ARGUMENT:
                    raise self._client.translate(err, "choose lease targets") from None
                raise _Retry() from None
            lease.charged = lease.charged or reply.charged
            if reply.pending_reason_code:  # its queue's quota holds it back
                raise _Retry()
            if reply.outcome in (actor_pb2.LEASE_OUTCOME_PLACED, actor_pb2.LEASE_OUTCOME_NOT_NOW):
                if reply.reason_code == REASON_GROUP_NOT_READY:
                    pg_id = queue.strategy.placement_group_id
                    outcome, _ = self._client.wait_placement_group(pg_id, LEASE_TIMEOUT_S)
                    if outcome in ("removed", "unknown"):
                        raise TaskPlacementGroupRemoved(f"placement group {pg_id} was removed")
                    if self._closed.is_set():
                        raise _Retry()
                    continue
                return [t.raylet_address for t in reply.targets]
            if reply.outcome == actor_pb2.LEASE_OUTCOME_UNSCHEDULABLE:
                if reply.reason_code == REASON_GROUP_REMOVED:
                    raise TaskPlacementGroupRemoved(f"placement group {queue.strategy.placement_group_id} was removed")
                raise TaskUnschedulableError(reply.reason)
            # Infeasible: wait for a node that can hold it; a get that times out says why.
            with self._lock:
                for task in queue.pending:
                    task.future.raygo_wait_reason = reply.reason  # type: ignore[attr-defined]
            raise _Retry()

    def _request_worker(self, queue: _Queue, wait_for_room: bool, lease: _Lease) -> Tuple[Any, Any]:
        """Asks the candidate raylets for a worker in turn; with wait_for_room the last one
        queues the request until room frees up."""
        raylets = self._lease_targets(queue, lease)
        if not raylets:
            raise _Retry()
        strategy = queue.strategy
        in_group = strategy.kind == actor_pb2.SCHEDULING_STRATEGY_PLACEMENT_GROUP
        request = raylet_pb2.RequestWorkerLeaseRequest(
            job_id=self._client.job_id, resources=queue.resources, python_worker=self.python_worker,
            placement_group_id=strategy.placement_group_id if in_group else "",
            bundle_index=strategy.bundle_index if in_group else -1,
        )
        for i, address in enumerate(raylets):
            raylet = raylet_pb2_grpc.NodeManagerServiceStub(self.channels.get(address))
            request.queue = wait_for_room and i == len(raylets) - 1
            try:
                reply = raylet.RequestWorkerLease(request, timeout=LEASE_TIMEOUT_S)
                return reply.worker, raylet
            except grpc.RpcError as err:
                code, details = rpc_status(err)
                if code == grpc.StatusCode.INVALID_ARGUMENT:
                    raise ValueError(f"Cannot schedule a task of shape {dict(queue.resources)}: raylet {address}: {details}") from None
                if code == grpc.StatusCode.INTERNAL:
                    # The worker could not start, or exited before it registered: most
                    # likely this interpreter or sys.path cannot run raygo._worker_main
                    # there (the message quotes its stderr). Starting more would fail alike.
                    raise RaySystemError(f"raylet {address} could not start a Python worker: {details}") from None
                if self._closed.is_set():
                    raise _Retry() from None
        raise _Retry()

    def _run_lease(self, queue: _Queue, worker: Any, raylet: Any) -> None:
        """Pushes the queue's tasks to one leased worker until none waits, then returns it."""
        disconnect = False
        try:
            stub = worker_pb2_grpc.CoreWorkerServiceStub(self.channels.get(worker.address))
            while True:
                with self._lock:
                    task = queue.pending.popleft() if queue.pending and not self._closed.is_set() else None
                if task is None:
                    return
                try:
                    reply = stub.PushTask(worker_pb2.PushTaskRequest(
                        task_id=task.task_id, function_name=task.function_key, args=[task.args], attempt=task.attempt,
                        placement_group_capture_child_tasks=queue.strategy.placement_group_capture_child_tasks,
                    ))
                except grpc.RpcError as err:
                    disconnect = True  # the worker is gone or in an unknown state: never reuse it
                    self._push_failed(queue, task, worker, err)
                    return
                self._complete(task, reply, worker)
        finally:
            try:
                raylet.ReturnWorker(raylet_pb2.ReturnWorkerRequest(worker_id=worker.worker_id, disconnect=disconnect), timeout=5.0)
            except (grpc.RpcError, ValueError):
                pass  # a raylet that is gone took the worker with it (ValueError: shut down)
            if disconnect:
                self.channels.forget(worker.address)
            with self._lock:
                queue.leases -= 1
                if not self._closed.is_set():
                    self._request_leases_locked(queue)  # tasks queued meanwhile, or put back

    def _push_failed(self, queue: _Queue, task: _Task, worker: Any, err: grpc.RpcError) -> None:
        code, details = rpc_status(err)
        where = f"worker {worker.worker_id} (pid {worker.pid} on node {worker.node_id})"
        if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED) or self._closed.is_set():
            # Not a dead worker (e.g. a result over the message size limit): running the
            # task again would fail the same way.
            settle(task.future, error=RaySystemError(f"task {task.name} on {where}: {code}: {details}"))
            return
        task.attempt += 1
        if 0 <= task.max_retries < task.attempt:
            settle(task.future, error=WorkerCrashedError(
                f"Task {task.name}: its {where} died {task.attempt} time(s) (max_retries={task.max_retries}): {details}"))
            return
        with self._lock:
            queue.pending.appendleft(task)

    def _complete(self, task: _Task, reply: Any, worker: Any) -> None:
        try:
            value = reply_value(task.name, reply, worker.address)
        except Exception as err:
            settle(task.future, error=err)
            return
        settle(task.future, value=value)
        owner = getattr(task.future, "raygo_ref", None)
        if owner is not None and owner() is None:
            _objects.release(value)  # its ref was collected before the result came


def reply_value(name: str, reply: Any, address: str) -> Any:
    """The result a PushTaskReply carries, or raises what the call raised: the task's
    exception as a RayTaskError that is also an instance of its class."""
    pickle = _pickle()
    if reply.HasField("error"):
        cause: Optional[BaseException] = None
        if reply.error.python_exception:
            try:
                cause = pickle.loads(reply.error.python_exception)
            except Exception:  # its class does not import here: the traceback still tells
                cause = None
        ip = address.rsplit(":", 1)[0].strip("[]")
        raise RayTaskError(name, reply.error.message, cause, int(reply.pid), ip,
                           cause_class=reply.error.type).as_instanceof_cause()
    try:
        return pickle.loads(reply.returns[0]) if reply.returns else None
    except Exception as err:
        raise RaySystemError(f"{name}: could not unpickle its result: {err!r}") from None


def new_task_id() -> str:
    """A task's (or an actor call's) id: 16 random bytes in hex."""
    return os.urandom(16).hex()


_submitters: Dict[int, TaskSubmitter] = {}
_submitters_lock = threading.Lock()


def submitter(client: GcsClient) -> TaskSubmitter:
    """The submitter of a connection, made on first use."""
    with _submitters_lock:
        found = _submitters.get(id(client))
        if found is None or found._client is not client:
            found = _submitters[id(client)] = TaskSubmitter(client)
        return found


def close_submitter(client: GcsClient) -> None:
    """Closes a connection's submitter (raygo.shutdown), if it has one."""
    with _submitters_lock:
        found = _submitters.pop(id(client), None)
    if found is not None and found._client is client:
        found.close()


__all__: List[str] = ["TaskSubmitter", "submitter", "close_submitter", "settle", "reply_value", "new_task_id", "FUNCTION_KV_NAMESPACE"]
