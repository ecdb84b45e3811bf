"""Python actors: ``@raygo.remote`` on a class, handles, method calls, ``kill`` and
``get_actor``, through the GCS's actor manager as Go actors go.

``ActorClass.remote(...)`` puts the class (pickled with cloudpickle, content-addressed) into
the GCS's KV as tasks' functions are, and asks the GCS to create the actor
(``ActorInfoService.CreateActor`` with ``python_worker`` and ``python_class_key``): the GCS
schedules it, leases a dedicated worker from a raylet (inside its bundle when asked), runs
the constructor there (``CoreWorkerService.CreateActor``) and restarts it, up to
``max_restarts``, when its worker dies. Method calls through one handle go to the actor's
worker one after the other, in the order made (``PushTask`` with the actor's id); a call
whose worker died is sent again to the restarted actor up to ``max_task_retries`` times. A
call refused before it reached any worker (the handle still knew an incarnation that had
died) loses no retry: it goes to the restarted actor.
A handle pickles as a reference (passed to tasks and actors); ``lifetime="detached"`` asks
the GCS to keep the actor after its job ends.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Deque, Dict, Optional, Tuple

import grpc

from raygo._capture import LEGACY_OPTIONS, check_legacy_options, scheduling_strategy
from raygo._gcs import rpc_status
from raygo._object_ref import ObjectRef
from raygo._objects import argument_of
from raygo._proto import actor_pb2, worker_pb2, worker_pb2_grpc
from raygo._remote import _check_fits_group, _check_resources, _strategy, check_option_names, requested_resources
from raygo._worker import global_client
from raygo.exceptions import ActorDiedError, RayActorError, RaySystemError

# Ray's actor options that raygo builds.
_BUILT_OPTIONS = frozenset({
    "num_cpus", "num_gpus", "resources", "memory", "max_restarts", "max_task_retries", "name", "namespace",
    "lifetime", "scheduling_strategy", "max_concurrency", "get_if_exists", "enable_task_events",
    "label_selector",
}) | LEGACY_OPTIONS
# Ray's actor options not built yet: refused, naming the option.
_NOT_BUILT_OPTIONS = frozenset({
    "runtime_env", "accelerator_type", "fallback_strategy",
    "_metadata", "concurrency_groups", "object_store_memory", "max_pending_calls",
    "allow_out_of_order_execution", "_labels",
})
# How long one wait for the actor to be ALIVE may block before it is asked again.
ALIVE_WAIT_S = 30.0


def _check_actor_options(options: Dict[str, Any]) -> Dict[str, Any]:
    check_option_names(options, _BUILT_OPTIONS, _NOT_BUILT_OPTIONS, "actors")
    _check_resources(options)
    for option in ("max_restarts", "max_task_retries"):
        value = options.get(option)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < -1):
            raise ValueError(f"The option '{option}' must be an integer >= -1, got {value!r}")
    lifetime = options.get("lifetime")
    if lifetime not in (None, "non_detached", "detached"):
        raise ValueError(f"actor `lifetime` argument must be one of 'detached', 'non_detached' and 'None', got {lifetime!r}")
    if options.get("max_concurrency", 1) != 1:
        raise ValueError("The option 'max_concurrency' is not supported by raygo's Python actors yet (only 1).")
    if options.get("get_if_exists", False):
        raise ValueError("The option 'get_if_exists' is not supported by raygo's Python actors yet.")
    for option in ("name", "namespace"):
        value = options.get(option)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"The option '{option}' must be a str, got {type(value).__name__}")
    if "scheduling_strategy" in options or "label_selector" in options:
        _strategy(options.get("scheduling_strategy"), options.get("label_selector"))
    check_legacy_options(options)
    return options


def _actor_resources(options: Dict[str, Any]) -> Dict[str, float]:
    """What the actor holds while it lives: nothing unless asked (the GCS's default)."""
    return requested_resources(options, 0.0)


def _resolve(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    """The arguments with top-level refs replaced by their values (waiting for them)."""
    def value(arg: Any) -> Any:
        return argument_of(arg._future.result()) if isinstance(arg, ObjectRef) else arg

    return tuple(value(a) for a in args), {k: value(v) for k, v in kwargs.items()}


class ActorClass:
    """What ``@raygo.remote`` makes of a class (Ray's ``ActorClass``): create an actor with
    ``.remote(...)``, change its options with ``.options(...)``."""

    def __init__(self, cls: type, options: Dict[str, Any]) -> None:
        self._cls = cls
        self._default_options = options
        self._pickled: Optional[bytes] = None
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__doc__ = cls.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"Actors cannot be instantiated directly. Instead of '{self._cls.__name__}()', "
            f"use '{self._cls.__name__}.remote()'."
        )

    def options(self, **options: Any) -> "_BoundActorOptions":
        """The class with these options over its defaults (Ray's ``ActorClass.options``)."""
        return _BoundActorOptions(self, {**self._default_options, **_check_actor_options(options)})

    def remote(self, *args: Any, **kwargs: Any) -> "ActorHandle":
        """Creates the actor; returns its handle at once (the constructor runs on the cluster)."""
        return self._remote(self._default_options, args, kwargs)

    def _remote(self, options: Dict[str, Any], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> "ActorHandle":
        from raygo import _task_client

        client = global_client()
        submitter = _task_client.submitter(client)
        pickle = _task_client._pickle()
        resources = _actor_resources(options)
        strategy = scheduling_strategy(options)
        if strategy.kind == actor_pb2.SCHEDULING_STRATEGY_PLACEMENT_GROUP:
            _check_fits_group(f"actor {self._cls.__name__}", resources, strategy, submitter.bundle_specs(strategy.placement_group_id))
        if self._pickled is None:
            self._pickled = pickle.dumps(self._cls)
        key = submitter.export_function(self._pickled)
        call_args, call_kwargs = _resolve(args, kwargs)
        max_task_retries = options.get("max_task_retries") or 0
        request = actor_pb2.CreateActorRequest(
            job_id=client.job_id, class_name=self._cls.__name__, name=options.get("name") or "",
            namespace=options.get("namespace") or "", required_resources=resources, scheduling_strategy=strategy,
            is_detached=options.get("lifetime") == "detached",
            max_restarts=options.get("max_restarts") or 0, max_task_retries=max_task_retries,
            python_worker=submitter.python_worker, python_class_key=key,
            constructor_args=[pickle.dumps((call_args, call_kwargs))],
        )
        reply = client.call(f"create actor {self._cls.__name__}", submitter.actors.CreateActor, request)
        return ActorHandle(reply.actor.actor_id, self._cls.__name__, max_task_retries, self._cls)


class _BoundActorOptions:
    def __init__(self, actor_class: ActorClass, options: Dict[str, Any]) -> None:
        self._actor_class = actor_class
        self._options = options

    def remote(self, *args: Any, **kwargs: Any) -> "ActorHandle":
        return self._actor_class._remote(self._options, args, kwargs)


class _Call:
    __slots__ = ("method", "args", "kwargs", "future")

    def __init__(self, method: str, args: Tuple[Any, ...], kwargs: Dict[str, Any], future: Any) -> None:
        self.method = method
        self.args = args
        self.kwargs = kwargs
        self.future = future


class ActorHandle:
    """A handle to an actor (Ray's ``ActorHandle``): ``handle.method.remote(...)`` returns
    the ref of the call's result. Calls through one handle run in the order made."""

    def __init__(self, actor_id: str, class_name: str, max_task_retries: int, cls: Optional[type] = None) -> None:
        self._actor_id = actor_id
        self._class_name = class_name
        self._max_task_retries = max_task_retries
        self._cls = cls
        # Calls not sent yet, and whether a sender thread runs: one at a time per handle,
        # started when a call comes and ending when none is left.
        self._calls: Deque[_Call] = collections.deque()
        self._sending = False
        self._lock = threading.Lock()
        self._address = ""
        self._num_restarts = 0

    def __getattr__(self, name: str) -> "ActorMethod":
        if name.startswith("__") or name.startswith("_"):
            raise AttributeError(name)
        if self._cls is not None and not callable(getattr(self._cls, name, None)):
            raise AttributeError(f"'ActorHandle' object for actor {self._class_name} has no method '{name}'")
        return ActorMethod(self, name)

    def __repr__(self) -> str:
        return f"Actor({self._class_name}, {self._actor_id})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ActorHandle) and other._actor_id == self._actor_id

    def __hash__(self) -> int:
        return hash(self._actor_id)

    def __reduce__(self) -> Any:
        """A handle pickles as a reference (passed to a task or an actor, or returned from
        one): the process that unpickles it calls the actor as any caller does, its calls
        in order among themselves."""
        return ActorHandle, (self._actor_id, self._class_name, self._max_task_retries)

    # --- calls ---------------------------------------------------------------------------

    def _submit(self, method: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> ObjectRef:
        import concurrent.futures

        future: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            self._calls.append(_Call(method, args, kwargs, future))
            if not self._sending:
                self._sending = True
                threading.Thread(target=self._send_loop, name=f"raygo-actor-{self._actor_id[:8]}", daemon=True).start()
        return ObjectRef(future)

    def _send_loop(self) -> None:
        """Sends the handle's calls one at a time, in order, until none is left."""
        while True:
            with self._lock:
                if not self._calls:
                    self._sending = False
                    return
                call = self._calls.popleft()
            from raygo._task_client import settle

            try:
                value = self._run(call)
            except BaseException as err:
                settle(call.future, error=err)
            else:
                settle(call.future, value=value)

    def _run(self, call: _Call) -> Any:
        from raygo import _task_client

        client = global_client()
        submitter = _task_client.submitter(client)
        pickle = _task_client._pickle()
        call_args, call_kwargs = _resolve(call.args, call.kwargs)
        blob = pickle.dumps((call_args, call_kwargs))
        attempt = 0
        while True:
            address = self._alive_address(client, submitter)
            stub = worker_pb2_grpc.CoreWorkerServiceStub(submitter.channels.get(address))
            request = worker_pb2.PushTaskRequest(task_id=_task_client.new_task_id(), function_name=call.method, actor_id=self._actor_id,
                                                 args=[blob], attempt=attempt)
            try:
                reply = stub.PushTask(request)
            except grpc.RpcError as err:
                code, details = rpc_status(err)
                if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.FAILED_PRECONDITION):
                    raise RaySystemError(f"actor {self._actor_id} method {call.method}: {code}: {details}") from None
                submitter.channels.forget(address)
                self._raise_if_dead(submitter)
                if _never_sent(code, details):
                    self._num_restarts += 1  # that worker is gone: wait for the next incarnation
                    self._address = ""
                    continue
                attempt += 1
                if 0 <= self._max_task_retries < attempt:
                    raise RayActorError(
                        f"The actor {self._class_name} ({self._actor_id}) died unexpectedly before finishing this task "
                        f"({call.method}; max_task_retries={self._max_task_retries}): {details}", self._actor_id) from None
                self._num_restarts += 1  # the next call waits for the restarted actor
                self._address = ""
                continue
            return _task_client.reply_value(f"{self._class_name}.{call.method}", reply, address)

    def _raise_if_dead(self, submitter: Any) -> None:
        """ActorDiedError, with the GCS's cause, when the actor is DEAD (its worker was
        killed with it: removed group, ray.kill, no restarts left)."""
        try:
            info = submitter.actors.GetActorInfo(actor_pb2.GetActorInfoRequest(actor_id=self._actor_id), timeout=10).actor
        except grpc.RpcError:
            return
        if info.state == actor_pb2.ACTOR_DEAD:
            raise ActorDiedError(
                f"The actor {self._class_name} ({self._actor_id}) is dead: {info.death_cause or 'unknown cause'}", self._actor_id)

    def _alive_address(self, client: Any, submitter: Any) -> str:
        """The actor's worker address once it is ALIVE (after at least the restarts this
        handle has seen); ActorDiedError once it is DEAD."""
        if self._address:
            return self._address
        while True:
            try:
                reply = submitter.actors.GetActorInfo(
                    actor_pb2.GetActorInfoRequest(actor_id=self._actor_id, wait_alive=True, min_num_restarts=self._num_restarts),
                    timeout=ALIVE_WAIT_S, wait_for_ready=True,
                )
            except grpc.RpcError as err:
                code, _ = rpc_status(err)
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    continue  # still starting: ask again
                raise client.translate(err, f"wait for actor {self._actor_id}") from None
            info = reply.actor
            if info.state == actor_pb2.ACTOR_DEAD:
                raise ActorDiedError(
                    f"The actor {self._class_name} ({self._actor_id}) is dead: {info.death_cause or 'unknown cause'}",
                    self._actor_id)
            if info.state == actor_pb2.ACTOR_ALIVE and info.address and info.num_restarts >= self._num_restarts:
                self._address, self._num_restarts = info.address, info.num_restarts
                return self._address


def _never_sent(code: Optional[grpc.StatusCode], details: str) -> bool:
    """Whether a failed call never had a connection to be sent on (grpc's message when
    no connection to the address could be made): nothing of it reached a worker."""
    return code == grpc.StatusCode.UNAVAILABLE and details.startswith("failed to connect to all addresses")


class ActorMethod:
    """``handle.method``: call it with ``.remote(...)``."""

    def __init__(self, handle: ActorHandle, name: str) -> None:
        self._handle = handle
        self._name = name

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        return self._handle._submit(self._name, args, kwargs)

    def options(self, **options: Any) -> "ActorMethod":
        unknown = sorted(set(options) - {"name", "num_returns"})
        if unknown or options.get("num_returns", 1) != 1:
            raise ValueError(f"The method options {unknown or ['num_returns']} are not supported by raygo's Python actors yet.")
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"Actor methods cannot be called directly. Instead of running 'object.{self._name}()', "
                        f"try 'object.{self._name}.remote()'.")


def kill(actor: Any, *, no_restart: bool = True) -> None:
    """Kills an actor's worker (Ray's ``ray.kill``); with ``no_restart=False`` the GCS
    restarts it if it has restarts left."""
    if not isinstance(actor, ActorHandle):
        raise ValueError(f"ray.kill() only supported for actors. For tasks, try ray.cancel(). Got: {type(actor)}.")
    from raygo import _task_client

    client = global_client()
    client.call(f"kill actor {actor._actor_id}", _task_client.submitter(client).actors.KillActor,
                actor_pb2.KillActorRequest(actor_id=actor._actor_id, no_restart=no_restart))


def get_actor(name: str, namespace: Optional[str] = None) -> ActorHandle:
    """The live actor with that name in the namespace (the job's by default), as Ray's
    ``ray.get_actor``; ValueError when there is none."""
    if not isinstance(name, str) or not name:
        raise ValueError("Please supply a non-empty value to get_actor")
    if namespace is not None and not isinstance(namespace, str):
        raise TypeError(f"namespace must be a str, got {type(namespace).__name__}")
    from raygo import _task_client

    client = global_client()
    namespace = namespace or client.namespace
    try:
        reply = _task_client.submitter(client).actors.GetNamedActorInfo(
            actor_pb2.GetNamedActorInfoRequest(name=name, namespace=namespace), timeout=30, wait_for_ready=True)
    except grpc.RpcError as err:
        code, _ = rpc_status(err)
        if code == grpc.StatusCode.NOT_FOUND:
            raise ValueError(f"Failed to look up actor with name '{name}'. This could because 1. You are trying to look up "
                             f"a named actor you didn't create. 2. The named actor died. 3. You did not use a namespace "
                             f"matching the namespace of the actor (namespace {namespace!r}).") from None
        raise client.translate(err, f"get actor {name!r}") from None
    info = reply.actor
    return ActorHandle(info.actor_id, info.class_name, int(info.max_task_retries))
