"""Ray's state API (``ray.util.state``) for what raygo's GCS keeps: nodes, placement
groups, actors and jobs, read from the head's state API (``/api/v0/...`` on its dashboard
port, as Ray's client reads Ray's), so filters, limit and the rows themselves are the ones
``raygo list`` and the dashboard show: one implementation, in the head.

``list_*`` take Ray's arguments (``address``, ``filters`` as ``[(key, "=" or "!=", value)]``
with string values compared case-insensitively, ``limit`` up to 10000, ``timeout``,
``detail``, ``raise_on_missing_output``) and return state objects with Ray's fields, read as
attributes or items (``node.node_id``, ``node["node_id"]``, ``node.asdict()``); every field
is filled whatever ``detail`` says. A filter may name any field of the head's rows (e.g.
``pending_reason_code``). ``get_*`` return one object or None. A bad filter or limit is a
ValueError with the head's reason; a head that serves no dashboard port (``raygo start --head
--dashboard-port -1``) is a RayStateApiException. Tasks, objects, workers, runtime envs, logs
and cluster events are not kept by raygo's GCS: their functions raise
``RayStateApiException`` saying so.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from raygo import _worker
from raygo._auth import load_token, tls_ssl_context

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


# --- the head's state API ------------------------------------------------------------

# What the head returns at most per listing (stateapi.MaxLimit, Ray's RAY_MAX_LIMIT_FROM_API_SERVER).
MAX_LIMIT = 10000


def _dashboard() -> str:
    """host:port of the head's dashboard port, where its state API is."""
    client = _worker.global_client()
    address = client.cluster_info.dashboard_address
    if not address:
        raise RayStateApiException(
            f"the head at {client.address} serves no dashboard port, where the state API is "
            "(raygo start --head --dashboard-port PORT; -1 turns it off)"
        )
    host, port = address.rsplit(":", 1)
    if host.strip("[]") in ("", "0.0.0.0", "::"):  # bound to every address: reach it where the GCS is
        host = client.address.rsplit(":", 1)[0]
    return f"{host}:{port}"


def _query_value(value: SupportedFilterType) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _rows(resource: str, filters: Filters, limit: int, timeout: float) -> List[Dict[str, Any]]:
    """The head's rows of resource (raygo's whole rows: detail=all), filtered and limited
    by the head."""
    query: List[Tuple[str, str]] = [("limit", str(limit)), ("detail", "all")]
    for item in filters or []:
        if not isinstance(item, (tuple, list)) or len(item) != 3:
            raise ValueError(f"A filter is (key, predicate, value), got {item!r}")
        key, predicate, value = item
        query += [("filter_keys", str(key)), ("filter_predicates", str(predicate)),
                  ("filter_values", _query_value(value))]
    # With RAYGO_USE_TLS=1 the dashboard port speaks HTTPS, as every endpoint TLS.
    context = tls_ssl_context()
    scheme = "https" if context else "http"
    url = f"{scheme}://{_dashboard()}/api/v0/{resource}?{urllib.parse.urlencode(query)}"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    token = load_token()
    if token:
        request.add_header("Authorization", "Bearer " + token)
    # The cluster is reached directly, never through a proxy of the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(request, timeout=timeout) as response:
            body = json.load(response)
    except urllib.error.HTTPError as err:
        try:
            message = json.load(err).get("msg") or err.reason
        except ValueError:
            message = err.reason
        if err.code == 400:
            raise ValueError(message) from None
        raise RayStateApiException(f"{url}: HTTP {err.code}: {message}") from None
    except (urllib.error.URLError, OSError) as err:
        raise RayStateApiException(f"the head's state API at {url} did not answer: {err}") from None
    if not body.get("result"):
        raise RayStateApiException(f"{url}: {body.get('msg')}")
    return body["data"]["result"]["result"]


# --- the head's rows as Ray's state objects --------------------------------------------


def _nonzero(amounts: Dict[str, float]) -> Dict[str, float]:
    """Resource amounts without the zero ones, as Ray's state API lists them."""
    return {k: v for k, v in amounts.items() if v != 0}


def _node(n: Dict[str, Any]) -> NodeState:
    return NodeState(
        node_id=n["node_id"], node_ip=n["node_ip"], is_head_node=n["is_head_node"], state=n["state"],
        state_message=n.get("state_message") or None, node_name=n["node_name"] or n["node_ip"],
        resources_total=_nonzero(n["resources_total"]), labels=n["labels"], start_time_ms=n["start_time_ms"],
        end_time_ms=n.get("end_time_ms") or None, raylet_address=n["raylet_address"], is_draining=n["is_draining"],
        gpus=n["gpus"],
    )


def _placement_group(g: Dict[str, Any]) -> PlacementGroupState:
    return PlacementGroupState(
        placement_group_id=g["placement_group_id"], name=g["name"], creator_job_id=g["creator_job_id"],
        state=g["state"],
        bundles=[
            {
                "bundle_id": {"placement_group_id": g["placement_group_id"], "bundle_index": b["bundle_index"]},
                "unit_resources": _nonzero(b["unit_resources"]),
                "node_id": b["node_id"] or None,
                "label_selector": b.get("label_selector") or {},
            }
            for b in sorted(g["bundles"], key=lambda b: b["bundle_index"])
        ],
        is_detached=g["is_detached"], stats=g["stats"], topology_strategy={}, topology_assignments={},
        namespace=g["namespace"], strategy=g["strategy"], pending_reason=g.get("pending_reason") or None,
    )


def _actor(a: Dict[str, Any]) -> ActorState:
    return ActorState(
        actor_id=a["actor_id"], class_name=a["class_name"], state=a["state"], job_id=a["job_id"], name=a["name"],
        node_id=a["node_id"] or None, pid=a["pid"] or None, ray_namespace=a["ray_namespace"],
        serialized_runtime_env="{}", required_resources=a["required_resources"],
        death_cause={"error_message": a["death_cause"]} if a.get("death_cause") else None,
        is_detached=a["is_detached"], placement_group_id=a["placement_group_id"] or None, repr_name="",
        num_restarts=a["num_restarts"], num_restarts_due_to_lineage_reconstruction=0,
        num_restarts_due_to_node_preemption=0, call_site=None, label_selector={}, fallback_strategy=None,
        pending_reason=a.get("pending_reason") or None, gpu_ids=a["gpu_ids"],
        cuda_visible_devices=a["cuda_visible_devices"],
    )


def _job(j: Dict[str, Any]) -> JobState:
    return JobState(**{name: j.get(name) for name in JobState._FIELDS})


_RESOURCES: Dict[str, Tuple[Callable[[Dict[str, Any]], _State], str]] = {
    "nodes": (_node, "node_id"),
    "placement_groups": (_placement_group, "placement_group_id"),
    "actors": (_actor, "actor_id"),
    "jobs": (_job, "job_id"),
}


# --- listing -------------------------------------------------------------------------


def _list(resource: str, address: Optional[str], filters: Filters, limit: int, timeout: float) -> List[Any]:
    _check_address(address)
    convert, _ = _RESOURCES[resource]
    return [convert(row) for row in _rows(resource, filters, limit, timeout)]


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


def _get(resource: str, id: str, address: Optional[str], timeout: float) -> Optional[Any]:  # noqa: A002
    _, key = _RESOURCES[resource]
    rows = _list(resource, address, [(key, "=", id)], 1, timeout)
    return rows[0] if rows else None


def list_nodes(address: Optional[str] = None, filters: Filters = None, limit: int = DEFAULT_LIMIT,
               timeout: int = DEFAULT_RPC_TIMEOUT, detail: bool = False, raise_on_missing_output: bool = True,
               _explain: bool = False) -> List[NodeState]:
    """Every node the GCS knows, alive or dead (Ray's ``list_nodes``)."""
    return _list("nodes", address, filters, limit, timeout)


def list_placement_groups(address: Optional[str] = None, filters: Filters = None, limit: int = DEFAULT_LIMIT,
                          timeout: int = DEFAULT_RPC_TIMEOUT, detail: bool = False,
                          raise_on_missing_output: bool = True, _explain: bool = False) -> List[PlacementGroupState]:
    """Every placement group, REMOVED ones included for an hour (Ray's ``list_placement_groups``)."""
    return _list("placement_groups", address, filters, limit, timeout)


def list_actors(address: Optional[str] = None, filters: Filters = None, limit: int = DEFAULT_LIMIT,
                timeout: int = DEFAULT_RPC_TIMEOUT, detail: bool = False, raise_on_missing_output: bool = True,
                _explain: bool = False) -> List[ActorState]:
    """Every actor of the Go SDK's actor table (Ray's ``list_actors``)."""
    return _list("actors", address, filters, limit, timeout)


def list_jobs(address: Optional[str] = None, filters: Filters = None, limit: int = DEFAULT_LIMIT,
              timeout: int = DEFAULT_RPC_TIMEOUT, detail: bool = False, raise_on_missing_output: bool = True,
              _explain: bool = False) -> List[JobState]:
    """Every driver's job (Ray's ``list_jobs``; raygo has no submitted jobs)."""
    return _list("jobs", address, filters, limit, timeout)


def get_node(id: str, address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,  # noqa: A002
             _explain: bool = False) -> Optional[NodeState]:
    """The node with this hex id, or None."""
    return _get("nodes", id, address, timeout)


def get_placement_group(id: str, address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,  # noqa: A002
                        _explain: bool = False) -> Optional[PlacementGroupState]:
    """The placement group with this hex id, or None."""
    return _get("placement_groups", id, address, timeout)


def get_actor(id: str, address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,  # noqa: A002
              _explain: bool = False) -> Optional[ActorState]:
    """The actor with this hex id, or None."""
    return _get("actors", id, address, timeout)


def get_job(id: str, address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,  # noqa: A002
            _explain: bool = False) -> Optional[JobState]:
    """The job with this hex id, or None."""
    return _get("jobs", id, address, timeout)


def summarize_actors(address: Optional[str] = None, timeout: int = DEFAULT_RPC_TIMEOUT,
                     raise_on_missing_output: bool = True, _explain: bool = False) -> Dict[str, Any]:
    """Actors counted per class and state, in Ray's shape:
    ``{"cluster": {"summary": {class: {"class_name", "state_counts"}}, "total_actors", "summary_by": "class"}}``.
    """
    actors = _list("actors", address, None, MAX_LIMIT, timeout)
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
