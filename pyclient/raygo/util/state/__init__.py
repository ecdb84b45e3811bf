"""Ray's state API (``ray.util.state``) for what raygo's GCS keeps: nodes, placement
groups, actors and jobs, read over gRPC from the GCS.

``list_*`` take Ray's arguments (``address``, ``filters`` as ``[(key, "=" or "!=", value)]``
with string values compared case-insensitively, ``limit``, ``timeout``, ``detail``,
``raise_on_missing_output``) and return state objects with Ray's fields, read as attributes
or items (``node.node_id``, ``node["node_id"]``, ``node.asdict()``); every field is filled
whatever ``detail`` says. ``get_*`` return one object or None. Tasks, objects, workers,
runtime envs, logs and cluster events are not kept by raygo's GCS: their functions raise
``RayStateApiException`` saying so.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from raygo import _worker
from raygo._proto import actor_pb2, common_pb2
from raygo._proto import placement_group_pb2 as pg_pb2

__all__ = [
    "ActorState",
    "JobState",
    "NodeState",
    "PlacementGroupState",
    "RayStateApiException",
    "get_actor",
    "get_job",
    "get_log",
    "get_node",
    "get_objects",
    "get_placement_group",
    "get_task",
    "get_worker",
    "list_actors",
    "list_cluster_events",
    "list_jobs",
    "list_logs",
    "list_nodes",
    "list_objects",
    "list_placement_groups",
    "list_runtime_envs",
    "list_tasks",
    "list_workers",
    "summarize_actors",
    "summarize_objects",
    "summarize_tasks",
]

DEFAULT_LIMIT = 100
DEFAULT_RPC_TIMEOUT = 30

SupportedFilterType = Union[str, bool, int, float]
Filters = Optional[List[Tuple[str, str, SupportedFilterType]]]


class RayStateApiException(Exception):
    """A state query failed or asked for what raygo does not keep (Ray's exception of the same name)."""


class _State:
    """One row of a state listing: Ray's fields as attributes and items."""

    _FIELDS: Tuple[str, ...] = ()

    def __init__(self, **fields: Any) -> None:
        unknown = set(fields) - set(self._FIELDS)
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown fields {sorted(unknown)}")
        self.__dict__.update({name: fields.get(name) for name in self._FIELDS})

    def asdict(self) -> Dict[str, Any]:
        """The fields as a dict."""
        return {name: getattr(self, name) for name in self._FIELDS}

    def __getitem__(self, key: str) -> Any:
        if key not in self._FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and other.asdict() == self.asdict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.asdict().items())})"


class NodeState(_State):
    """A node (Ray's ``NodeState``), plus raygo's ``raylet_address``, ``is_draining`` and ``gpus``."""

    _FIELDS = ("node_id", "node_ip", "is_head_node", "state", "state_message", "node_name", "resources_total",
               "labels", "start_time_ms", "end_time_ms", "raylet_address", "is_draining", "gpus")


class PlacementGroupState(_State):
    """A placement group (Ray's ``PlacementGroupState``), plus raygo's ``namespace``,
    ``strategy`` and ``pending_reason``. Each of ``bundles`` has ``bundle_id`` (with
    ``placement_group_id`` and ``bundle_index``), ``unit_resources``, ``node_id`` (None
    while unplaced) and ``label_selector``.
    """

    _FIELDS = ("placement_group_id", "name", "creator_job_id", "state", "bundles", "is_detached", "stats",
               "topology_strategy", "topology_assignments", "namespace", "strategy", "pending_reason")


class ActorState(_State):
    """An actor (Ray's ``ActorState``), plus raygo's ``pending_reason``, ``gpu_ids`` and
    ``cuda_visible_devices``.
    """

    _FIELDS = ("actor_id", "class_name", "state", "job_id", "name", "node_id", "pid", "ray_namespace",
               "serialized_runtime_env", "required_resources", "death_cause", "is_detached",
               "placement_group_id", "repr_name", "num_restarts", "num_restarts_due_to_lineage_reconstruction",
               "num_restarts_due_to_node_preemption", "call_site", "label_selector", "fallback_strategy",
               "pending_reason", "gpu_ids", "cuda_visible_devices")


class JobState(_State):
    """A driver's job (the fields of Ray's ``JobState`` that a driver job has)."""

    _FIELDS = ("job_id", "submission_id", "type", "status", "entrypoint", "message", "error_type",
               "start_time", "end_time", "metadata", "runtime_env", "driver_info", "driver_agent_http_address",
               "driver_node_id", "driver_exit_code", "namespace")


# --- conversion from the GCS's rows --------------------------------------------------


def _node(n: Any) -> NodeState:
    return NodeState(
        node_id=n.node_id, node_ip=n.node_ip, is_head_node=n.is_head_node,
        state="ALIVE" if n.state == common_pb2.ALIVE else "DEAD",
        state_message=n.state_message or n.death_reason or None, node_name=n.node_name or n.node_ip,
        resources_total={k: v for k, v in n.resources_total.items() if v != 0}, labels=dict(n.labels),
        start_time_ms=n.start_time_ms, end_time_ms=n.end_time_ms or None, raylet_address=n.raylet_address,
        is_draining=n.is_draining, gpus=[_worker._gpu_dict(g) for g in n.gpus],
    )


def _placement_group(g: Any) -> PlacementGroupState:
    stats = g.stats
    return PlacementGroupState(
        placement_group_id=g.placement_group_id, name=g.name, creator_job_id=g.creator_job_id,
        state=pg_pb2.PlacementGroupState.Name(g.state),
        bundles=[
            {
                "bundle_id": {"placement_group_id": g.placement_group_id, "bundle_index": b.bundle_index},
                "unit_resources": {k: v for k, v in b.unit_resources.items() if v != 0},
                "node_id": b.node_id or None,
                "label_selector": dict(b.label_selector),
            }
            for b in sorted(g.bundles, key=lambda b: b.bundle_index)
        ],
        is_detached=g.is_detached,
        stats={
            "end_to_end_creation_latency_ms": stats.end_to_end_creation_latency_ms,
            "scheduling_latency_ms": stats.scheduling_latency_ms,
            "scheduling_attempt": stats.scheduling_attempt,
            "highest_retry_delay_ms": stats.highest_retry_delay_ms,
            "scheduling_state": _scheduling_state(stats.scheduling_state),
        },
        topology_strategy={}, topology_assignments={}, namespace=g.namespace,
        strategy=pg_pb2.PlacementStrategy.Name(g.strategy), pending_reason=g.pending_reason or None,
    )


def _scheduling_state(value: int) -> str:
    from raygo.util.placement_group import _SCHEDULING_STATE_NAMES

    return _SCHEDULING_STATE_NAMES.get(value, pg_pb2.SchedulingState.Name(value))


def _actor(a: Any) -> ActorState:
    return ActorState(
        actor_id=a.actor_id, class_name=a.class_name, state=actor_pb2.ActorState.Name(a.state).removeprefix("ACTOR_"),
        job_id=a.job_id, name=a.name, node_id=a.node_id or None, pid=a.pid or None, ray_namespace=a.namespace,
        serialized_runtime_env="{}", required_resources=dict(a.required_resources),
        death_cause={"error_message": a.death_cause} if a.death_cause else None, is_detached=a.is_detached,
        placement_group_id=a.placement_group_id or None, repr_name="", num_restarts=a.num_restarts,
        num_restarts_due_to_lineage_reconstruction=0, num_restarts_due_to_node_preemption=0, call_site=None,
        label_selector={}, fallback_strategy=None, pending_reason=a.pending_reason or None,
        gpu_ids=list(a.gpu_ids), cuda_visible_devices=a.cuda_visible_devices,
    )


def _job(j: Any) -> JobState:
    return JobState(
        job_id=j.job_id, submission_id=None, type="DRIVER", status="SUCCEEDED" if j.is_dead else "RUNNING",
        entrypoint=j.entrypoint, message=None, error_type=None, start_time=j.start_time_ms,
        end_time=j.end_time_ms or None, metadata={}, runtime_env={},
        driver_info={"id": j.job_id, "node_ip_address": j.driver_ip, "pid": str(j.driver_pid)},
        driver_agent_http_address=None, driver_node_id=None, driver_exit_code=None, namespace=j.namespace,
    )


def _jobs() -> Sequence[Any]:
    from raygo._proto import gcs_pb2

    client = _worker.global_client()
    return client.call("list jobs", client._jobs.GetAllJobInfo, gcs_pb2.GetAllJobInfoRequest()).jobs


_SOURCES: Dict[str, Tuple[Callable[[], Iterable[Any]], Callable[[Any], _State]]] = {
    "nodes": (lambda: _worker.global_client().all_nodes(), _node),
    "placement_groups": (lambda: _worker.global_client().all_placement_groups(), _placement_group),
    "actors": (lambda: _worker.global_client().all_actors(), _actor),
    "jobs": (_jobs, _job),
}


# --- listing -------------------------------------------------------------------------


def _check_filters(filters: Filters, fields: Tuple[str, ...]) -> List[Tuple[str, str, Any]]:
    out = []
    for item in filters or []:
        if not isinstance(item, (tuple, list)) or len(item) != 3:
            raise ValueError(f"A filter is (key, predicate, value), got {item!r}")
        key, predicate, value = item
        if key not in fields:
            raise ValueError(f"Given filter column {key} is not supported. Supported filter columns: {list(fields)}")
        if predicate not in ("=", "!="):
            raise ValueError(f"Unsupported filter predicate {predicate!r}: use '=' or '!='")
        out.append((key, predicate, value))
    return out


def _matches(row: _State, filters: List[Tuple[str, str, Any]]) -> bool:
    for key, predicate, want in filters:
        got = getattr(row, key)
        if isinstance(want, str) and isinstance(got, str):
            equal = got.lower() == want.lower()
        elif isinstance(got, bool) and isinstance(want, str):
            equal = str(got).lower() == want.lower()
        else:
            equal = got == want
        if equal != (predicate == "="):
            return False
    return True


def _list(resource: str, address: Optional[str], filters: Filters, limit: int, fields: Tuple[str, ...]) -> List[Any]:
    _check_address(address)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be an int >= 0, got {limit!r}")
    checked = _check_filters(filters, fields)
    fetch, convert = _SOURCES[resource]
    rows = [row for row in map(convert, fetch()) if _matches(row, checked)]
    return rows[:limit]


def _check_address(address: Optional[str]) -> None:
    """The state API reads the cluster the driver is connected to (connecting if needed);
    another address is refused rather than silently ignored.
    """
    if address in (None, "auto"):
        return
    client = _worker.global_client()
    if _worker.resolve_address(address) != client.address:
        raise RayStateApiException(
            f"address {address!r}: raygo's state API reads the cluster this driver is connected to ({client.address})"
        )


def _get(resource: str, id: str, address: Optional[str], key: str) -> Optional[Any]:  # noqa: A002
    _check_address(address)
    fetch, convert = _SOURCES[resource]
    for row in fetch():
        state = convert(row)
        if getattr(state, key) == id:
            return state
    return None


def list_nodes(address: Optional[str] = None, filters: Filters = None, limit: int = DEFAULT_LIMIT,
               timeout: int = DEFAULT_RPC_TIMEOUT, detail: bool = False, raise_on_missing_output: bool = True,
               _explain: bool = False) -> List[NodeState]:
    """Every node the GCS knows, alive or dead (Ray's ``list_nodes``)."""
    return _list("nodes", address, filters, limit, NodeState._FIELDS)


def list_placement_groups(address: Optional[str] = None, filters: Filters = None, limit: int = DEFAULT_LIMIT,
                          timeout: int = DEFAULT_RPC_TIMEOUT, detail: bool = False,
                          raise_on_missing_output: bool = True, _explain: bool = False) -> List[PlacementGroupState]:
    """Every placement group, REMOVED ones included for an hour (Ray's ``list_placement_groups``)."""
    return _list("placement_groups", address, filters, limit, PlacementGroupState._FIELDS)


def list_actors(address: Optional[str] = None, filters: Filters = None, limit: int = DEFAULT_LIMIT,
                timeout: int = DEFAULT_RPC_TIMEOUT, detail: bool = False, raise_on_missing_output: bool = True,
                _explain: bool = False) -> List[ActorState]:
    """Every actor of the Go SDK's actor table (Ray's ``list_actors``)."""
    return _list("actors", address, filters, limit, ActorState._FIELDS)


def list_jobs(address: Optional[str] = None, filters: Filters = None, limit: int = DEFAULT_LIMIT,
              timeout: int = DEFAULT_RPC_TIMEOUT, detail: bool = False, raise_on_missing_output: bool = True,
              _explain: bool = False) -> List[JobState]:
    """Every driver's job (Ray's ``list_jobs``; raygo has no submitted jobs)."""
    return _list("jobs", address, filters, limit, JobState._FIELDS)


def get_node(id: str, address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,  # noqa: A002
             _explain: bool = False) -> Optional[NodeState]:
    """The node with this hex id, or None."""
    return _get("nodes", id, address, "node_id")


def get_placement_group(id: str, address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,  # noqa: A002
                        _explain: bool = False) -> Optional[PlacementGroupState]:
    """The placement group with this hex id, or None."""
    return _get("placement_groups", id, address, "placement_group_id")


def get_actor(id: str, address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,  # noqa: A002
              _explain: bool = False) -> Optional[ActorState]:
    """The actor with this hex id, or None."""
    return _get("actors", id, address, "actor_id")


def get_job(id: str, address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,  # noqa: A002
            _explain: bool = False) -> Optional[JobState]:
    """The job with this hex id, or None."""
    return _get("jobs", id, address, "job_id")


def summarize_actors(address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,
                     raise_on_missing_output: bool = True, _explain: bool = False) -> Dict[str, Any]:
    """Actors counted per class and state, in Ray's shape:
    ``{"cluster": {"summary": {class: {"class_name", "state_counts"}}, "total_actors", "summary_by": "class"}}``.
    """
    actors = _list("actors", address, None, 2**62, ActorState._FIELDS)
    summary: Dict[str, Dict[str, Any]] = {}
    for actor in actors:
        row = summary.setdefault(actor.class_name, {"class_name": actor.class_name, "state_counts": {}})
        row["state_counts"][actor.state] = row["state_counts"].get(actor.state, 0) + 1
    return {"cluster": {"summary": summary, "total_actors": len(actors), "summary_by": "class"}}


def _not_kept(what: str) -> Callable[..., Any]:
    def refuse(*_: Any, **__: Any) -> Any:
        raise RayStateApiException(
            f"raygo's GCS keeps no {what}: the state API covers nodes, placement groups, actors and jobs"
        )

    refuse.__doc__ = f"Raises RayStateApiException: raygo's GCS keeps no {what}."
    return refuse


list_tasks = get_task = summarize_tasks = _not_kept("task table")
list_objects = get_objects = summarize_objects = _not_kept("object table")
list_workers = get_worker = _not_kept("worker table")
list_runtime_envs = _not_kept("runtime environments")
list_logs = get_log = _not_kept("logs (they are in the session's logs/ on each node)")
list_cluster_events = _not_kept("cluster events")
