"""``raygo.remote`` on functions, ``raygo.put``: Ray's task API over raygo's worker leases
(see raygo._task_client for how tasks run).

Options are checked when given (``@remote(...)``, ``.options(...)``), as Ray checks them,
and every option Ray has that raygo does not build yet is refused with a ValueError naming
it, so a script never runs with an option silently dropped.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Dict, Optional

from raygo._capture import LEGACY_OPTIONS, check_legacy_options, scheduling_strategy
from raygo._object_ref import ObjectRef
from raygo._proto import actor_pb2
from raygo._worker import global_client

# Ray's task options that raygo builds.
_BUILT_OPTIONS = frozenset({
    "num_cpus", "num_gpus", "resources", "memory", "max_retries", "scheduling_strategy", "name",
    "num_returns", "retry_exceptions", "enable_task_events", "label_selector",
}) | LEGACY_OPTIONS
# Ray's task options not built yet: refused, naming the option.
_NOT_BUILT_OPTIONS = frozenset({
    "runtime_env", "accelerator_type", "fallback_strategy",
    "max_calls", "_metadata", "concurrency_groups",
    "object_store_memory", "_labels", "_generator_backpressure_num_objects",
})
# Ray's actor-only options: refused on a function, as Ray refuses them.
_ACTOR_OPTIONS = frozenset({
    "max_restarts", "max_task_retries", "max_concurrency", "lifetime", "namespace",
    "get_if_exists", "max_pending_calls", "allow_out_of_order_execution",
})

DEFAULT_TASK_CPUS = 1.0
# Ray's default max_retries for tasks.
DEFAULT_MAX_RETRIES = 3


def _number(option: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"The option '{option}' must be a number, got {value!r}")
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise ValueError(f"The option '{option}' must be a non-negative finite number, got {value!r}")
    return float(value)


def check_option_names(options: Dict[str, Any], built: frozenset, not_built: frozenset, what: str) -> None:
    """Refuses an option raygo has not built (naming it) or that Ray does not have for
    what ("tasks", "actors"); an empty runtime_env is no runtime environment."""
    for option, value in options.items():
        if option in not_built:
            if option == "runtime_env" and not value:
                continue
            raise ValueError(f"The option '{option}' is not supported by raygo's Python {what} yet.")
        if option not in built:
            raise ValueError(f"Invalid option keyword {option} for {'remote functions' if what == 'tasks' else what}.")


def _check_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """Checks task options as Ray does; returns them."""
    for option in options:
        if option in _ACTOR_OPTIONS:
            raise ValueError(f"The option '{option}' applies to actors only, not to remote functions.")
    check_option_names(options, _BUILT_OPTIONS, _NOT_BUILT_OPTIONS, "tasks")
    _check_resources(options)
    retries = options.get("max_retries")
    if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int) or retries < -1):
        raise ValueError(f"The option 'max_retries' must be an integer >= -1, got {retries!r}")
    if options.get("num_returns", 1) != 1:
        raise ValueError(f"The option 'num_returns' is not supported by raygo's Python tasks yet (only 1), got {options['num_returns']!r}")
    if options.get("retry_exceptions", False) not in (False, None):
        raise ValueError("The option 'retry_exceptions' is not supported by raygo's Python tasks yet (only False).")
    if "scheduling_strategy" in options or "label_selector" in options:
        _strategy(options.get("scheduling_strategy"), options.get("label_selector"))  # refuses what it cannot express
    check_legacy_options(options)
    return options


def _check_resources(options: Dict[str, Any]) -> None:
    """Checks num_cpus, num_gpus, memory and resources, as Ray does for tasks and actors."""
    for option in ("num_cpus", "num_gpus", "memory"):
        if options.get(option) is not None:
            _number(option, options[option])
    resources = options.get("resources")
    if resources is not None:
        if not isinstance(resources, dict):
            raise TypeError(f"The option 'resources' must be a dict, got {type(resources).__name__}")
        for name, amount in resources.items():
            if name in ("CPU", "GPU"):
                raise ValueError("Use the 'num_cpus' and 'num_gpus' keyword instead of 'CPU' and 'GPU' in 'resources' keyword")
            if not isinstance(name, str) or not name:
                raise ValueError(f"The option 'resources': resource names must be non-empty strings, got {name!r}")
            _number(f"resources[{name!r}]", amount)


def _strategy(strategy: Any, label_selector: Any = None) -> Any:
    """The wire form of a scheduling_strategy option, with the label_selector option."""
    from raygo._labels import add_label_selector, check_label_selector

    return add_label_selector(_wire_strategy(strategy), check_label_selector(label_selector))


def _wire_strategy(strategy: Any) -> Any:
    from raygo.util.scheduling_strategies import (
        NodeAffinitySchedulingStrategy,
        NodeLabelSchedulingStrategy,
        PlacementGroupSchedulingStrategy,
    )

    if strategy is None or strategy == "DEFAULT":
        return actor_pb2.SchedulingStrategy(kind=actor_pb2.SCHEDULING_STRATEGY_DEFAULT)
    if strategy == "SPREAD":
        return actor_pb2.SchedulingStrategy(kind=actor_pb2.SCHEDULING_STRATEGY_SPREAD)
    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        pg = strategy.placement_group
        if pg is None or pg.is_empty:
            return actor_pb2.SchedulingStrategy(kind=actor_pb2.SCHEDULING_STRATEGY_DEFAULT)
        return actor_pb2.SchedulingStrategy(
            kind=actor_pb2.SCHEDULING_STRATEGY_PLACEMENT_GROUP,
            placement_group_id=pg.id.hex(), bundle_index=strategy.placement_group_bundle_index,
        )
    if isinstance(strategy, NodeAffinitySchedulingStrategy):
        node_id = strategy.node_id
        if not isinstance(node_id, str):
            node_id = node_id.hex()
        return actor_pb2.SchedulingStrategy(kind=actor_pb2.SCHEDULING_STRATEGY_NODE_AFFINITY, node_id=node_id, soft=bool(strategy.soft))
    if isinstance(strategy, NodeLabelSchedulingStrategy):
        from raygo._labels import node_label_selectors

        hard, soft = node_label_selectors(strategy)
        return actor_pb2.SchedulingStrategy(kind=actor_pb2.SCHEDULING_STRATEGY_DEFAULT, label_selector=hard, soft_label_selector=soft)
    raise ValueError(f"Invalid scheduling_strategy {strategy!r}: want 'DEFAULT', 'SPREAD' or a *SchedulingStrategy")


def requested_resources(options: Dict[str, Any], default_cpus: float) -> Dict[str, float]:
    """The resource request of checked task or actor options, as Ray's
    resources_from_ray_options: num_cpus (default_cpus when not given), num_gpus,
    resources, and memory as the "memory" resource in whole bytes; zero amounts dropped.
    Like Ray's, it (so .remote(), not .options()) refuses resources naming memory."""
    if any(name in ("memory", "object_store_memory") for name in options.get("resources") or {}):
        raise ValueError("The resources dictionary must not contain the key 'memory' or 'object_store_memory'")
    cpus = options.get("num_cpus")
    wanted = {"CPU": default_cpus if cpus is None else float(cpus), "GPU": float(options.get("num_gpus") or 0)}
    wanted.update({name: float(amount) for name, amount in (options.get("resources") or {}).items()})
    if options.get("memory") is not None:
        wanted["memory"] = float(int(options["memory"]))
    return {name: amount for name, amount in wanted.items() if amount > 0}


def _task_resources(options: Dict[str, Any]) -> Dict[str, float]:
    return requested_resources(options, DEFAULT_TASK_CPUS)


def _check_fits_group(name: str, resources: Dict[str, float], strategy: Any, bundles: list) -> None:
    """Refuses a task that fits no bundle it may use, naming the bundle (Ray checks this
    at submission too)."""
    def fits(bundle: Dict[str, float]) -> bool:
        return all(bundle.get(resource, 0.0) >= amount for resource, amount in resources.items())

    pg = strategy.placement_group_id
    index = strategy.bundle_index
    if index >= 0:
        if index >= len(bundles):
            raise ValueError(f"placement group bundle index {index} is invalid. Valid placement group indexes: 0 to {len(bundles) - 1}.")
        if not fits(bundles[index]):
            raise ValueError(
                f"Cannot schedule {name} with the placement group because the resource request {resources} "
                f"cannot fit into bundle {index} of placement group {pg}, which has {bundles[index]}."
            )
    elif not any(fits(bundle) for bundle in bundles):
        raise ValueError(
            f"Cannot schedule {name} with the placement group because the resource request {resources} "
            f"cannot fit into any bundles for the placement group {pg}, {bundles}."
        )


class RemoteFunction:
    """What ``@raygo.remote`` makes of a function (Ray's ``RemoteFunction``): call it with
    ``.remote(...)``, change its options with ``.options(...)``."""

    def __init__(self, function: Callable[..., Any], options: Dict[str, Any]) -> None:
        self._function = function
        self._default_options = options
        self._pickled: Optional[bytes] = None
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "Remote functions cannot be called directly. Instead of running "
            f"'{self._function.__module__}.{self._function.__name__}()', try "
            f"'{self._function.__module__}.{self._function.__name__}.remote()'."
        )

    def options(self, **options: Any) -> "_BoundOptions":
        """The function with these options over its defaults (Ray's ``f.options``)."""
        return _BoundOptions(self, {**self._default_options, **_check_options(options)})

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        """Runs the function as a task; returns the ref of its result."""
        return self._remote(self._default_options, args, kwargs)

    def _remote(self, options: Dict[str, Any], args: Any, kwargs: Any) -> ObjectRef:
        from raygo import _task_client

        submitter = _task_client.submitter(global_client())
        name = options.get("name") or self._function.__qualname__
        resources = _task_resources(options)
        strategy = scheduling_strategy(options)
        if strategy.kind == actor_pb2.SCHEDULING_STRATEGY_PLACEMENT_GROUP:
            _check_fits_group(name, resources, strategy, submitter.bundle_specs(strategy.placement_group_id))
        if self._pickled is None:
            self._pickled = _task_client._pickle().dumps(self._function)
        key = submitter.export_function(self._pickled)
        retries = options.get("max_retries")
        return submitter.submit(
            key, name, tuple(args), dict(kwargs), resources, strategy,
            DEFAULT_MAX_RETRIES if retries is None else retries,
        )


class _BoundOptions:
    """A remote function with options set by ``.options(...)``."""

    def __init__(self, function: RemoteFunction, options: Dict[str, Any]) -> None:
        self._remote_function = function
        self._options = options

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        return self._remote_function._remote(self._options, args, kwargs)


def remote(*args: Any, **options: Any) -> Any:
    """Ray's ``@ray.remote``: ``@remote`` or ``@remote(num_cpus=..., ...)`` on a function
    (a task) or a class (an actor, see raygo._actor).

    Task options: ``num_cpus`` (default 1), ``num_gpus``, ``resources``, ``memory`` (bytes of
    the logical ``memory`` resource, as Ray's), ``max_retries``
    (default 3; -1 without limit), ``scheduling_strategy`` (``"DEFAULT"``, ``"SPREAD"``,
    ``PlacementGroupSchedulingStrategy``, ``NodeAffinitySchedulingStrategy``,
    ``NodeLabelSchedulingStrategy``), ``label_selector`` (see raygo._labels), ``name``, the
    legacy ``placement_group`` / ``placement_group_bundle_index`` /
    ``placement_group_capture_child_tasks`` (see raygo._capture); ``num_returns`` only 1,
    ``retry_exceptions`` only False. Other Ray options are refused
    with a ValueError naming them.
    """
    if len(args) == 1 and not options and callable(args[0]):
        return _make(args[0], {})
    if args:
        raise TypeError(
            "The @raygo.remote decorator must be applied either with no arguments and no parentheses, "
            "for example '@raygo.remote', or it must be applied using some of the arguments in the list "
            "['num_cpus', 'num_gpus', 'resources', 'max_retries', 'scheduling_strategy', 'name'], "
            "for example '@raygo.remote(num_gpus=1)'."
        )
    return lambda target: _make(target, options)


def _make(target: Any, options: Dict[str, Any]) -> Any:
    if isinstance(target, type):
        from raygo._actor import ActorClass, _check_actor_options

        return ActorClass(target, _check_actor_options(options))
    if not callable(target):
        raise TypeError("The @raygo.remote decorator must be applied to either a function or a class.")
    return RemoteFunction(target, _check_options(options))


def put(value: Any, *, _owner: Any = None) -> ObjectRef:
    """Stores a value for tasks to take as an argument (Ray's ``ray.put``): the ref
    resolves to a copy taken now. A value of at most 100 KiB pickled stays in the driver
    and travels inline with the tasks that take it; a larger one (at most 100 MiB) is put
    into the GCS under the job until the ref is collected (raygo._objects)."""
    if isinstance(value, ObjectRef):
        raise TypeError("Calling 'put' on an ObjectRef is not allowed. If you really want to do this, you can wrap the ObjectRef in a list and call 'put' on it.")
    from raygo import _task_client

    global_client()
    from raygo import _objects

    client = global_client()
    pickle = _task_client._pickle()
    pickled = pickle.dumps(value)
    if len(pickled) > _objects.INLINE_MAX_BYTES:
        return ObjectRef._resolved(_objects.store(pickled, client.job_id))
    return ObjectRef._resolved(pickle.loads(pickled))
