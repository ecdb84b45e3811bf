"""The driver's global connection: ``init``, ``shutdown``, ``is_initialized``, cluster state
(``nodes``, ``cluster_resources``, ``available_resources``) and the runtime context.

As in Ray, the first call that needs the cluster connects on its own (``init()`` with the
defaults) unless ``RAYGO_ENABLE_AUTO_CONNECT=0``.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import uuid
from typing import Any, Dict, List, Optional

from raygo._gcs import GcsClient, parse_address
from raygo.exceptions import RaySystemError

logger = logging.getLogger("raygo")

DEFAULT_ADDRESS = "127.0.0.1:6380"
DEFAULT_CONNECT_TIMEOUT_S = 10.0

# ray.init options that only matter when Ray starts a local cluster itself, or that need a
# part raygo does not have; raygo connects to a running cluster, so they are refused.
_LOCAL_CLUSTER_OPTIONS = frozenset({
    "num_cpus", "num_gpus", "resources", "labels", "object_store_memory", "local_mode",
    "_system_config", "_temp_dir", "_memory", "_redis_password",
    "_plasma_directory", "_node_ip_address", "_driver_object_store_memory", "storage",
})
# ray.init options about tasks (raygo's Python client runs none); accepted with a warning.
_TASK_OPTIONS = frozenset({"runtime_env", "job_config"})
# ray.init options that change only logging or the dashboard; accepted and ignored.
_IGNORED_OPTIONS = frozenset({
    "include_dashboard", "dashboard_host", "dashboard_port", "log_to_driver", "logging_level",
    "logging_format", "logging_config", "configure_logging", "_metrics_export_port",
    "_enable_object_reconstruction", "_tracing_startup_hook", "enable_resource_isolation",
})

_lock = threading.RLock()
_client: Optional[GcsClient] = None


class RaygoContext:
    """What ``raygo.init`` returns (Ray's ``RayContext``): the connection's address info.

    Use it as a context manager to shut down on exit: ``with raygo.init(): ...``.
    """

    def __init__(self, client: GcsClient) -> None:
        self.address_info: Dict[str, Any] = {
            "address": client.address,
            "gcs_address": client.address,
            "job_id": client.job_id,
            "namespace": client.namespace,
        }
        self.dashboard_url: Optional[str] = None

    def __getitem__(self, key: str) -> Any:
        return self.address_info[key]

    def __enter__(self) -> "RaygoContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        shutdown()

    def __repr__(self) -> str:
        return f"RaygoContext({self.address_info!r})"


def init(
    address: Optional[str] = None,
    *,
    namespace: Optional[str] = None,
    ignore_reinit_error: bool = False,
    _connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    **ray_options: Any,
) -> RaygoContext:
    """Connects this program to a raygo cluster as a driver (a job), as ``ray.init`` does.

    Args:
        address: the GCS as ``HOST:PORT``. ``None`` or ``"auto"`` reads ``RAYGO_ADDRESS``,
            then falls back to ``127.0.0.1:6380``.
        namespace: namespace of the job's named placement groups. ``None`` gives the job an
            anonymous namespace of its own, as Ray does: pass the same namespace in every
            driver that looks groups up by name.
        ignore_reinit_error: when already connected, return instead of raising.
        _connect_timeout_s: how long to wait for the GCS to answer before ConnectionError.
        **ray_options: other ``ray.init`` keywords. Logging and dashboard options are
            ignored, task options (``runtime_env``, ``job_config``) too, with a warning;
            options that would start a local Ray cluster (``num_cpus``, ...) raise
            ValueError, since raygo connects to a running cluster (``raygo start --head``).

    The job's lease is renewed by a daemon thread; ``shutdown()`` (called at interpreter
    exit too) ends the job, which removes its non-detached placement groups. A driver that
    dies without it is ended by the GCS once its lease (30 s by default) runs out.

    Raises:
        ConnectionError: no GCS answers at the address (the message names it).
        ValueError: a malformed address or an unsupported option.
        RuntimeError: already connected and ``ignore_reinit_error`` is False.
    """
    global _client
    local = sorted(set(ray_options) & _LOCAL_CLUSTER_OPTIONS)
    if local:
        raise ValueError(
            f"raygo.init connects to a running cluster and cannot take {', '.join(local)}: "
            "give nodes their resources with `raygo start` instead"
        )
    unknown = sorted(set(ray_options) - _IGNORED_OPTIONS - _TASK_OPTIONS)
    if unknown:
        raise TypeError(f"raygo.init() got unexpected keyword arguments: {', '.join(unknown)}")
    for option in sorted(set(ray_options) & _TASK_OPTIONS):
        logger.warning("raygo.init: ignoring %s: raygo's Python client runs no tasks", option)
    if namespace is not None and (not isinstance(namespace, str) or not namespace):
        raise ValueError(f"namespace must be a non-empty string, got {namespace!r}")
    with _lock:
        if _client is not None:
            if ignore_reinit_error:
                logger.info("raygo.init: already connected to %s; ignoring", _client.address)
                return RaygoContext(_client)
            raise RuntimeError(
                "Maybe you called raygo.init twice by accident? This error can be suppressed by "
                "passing in 'ignore_reinit_error=True' or by calling 'raygo.shutdown()' prior to 'raygo.init()'."
            )
        resolved = address
        if resolved is None or resolved == "auto":
            resolved = os.environ.get("RAYGO_ADDRESS") or DEFAULT_ADDRESS
        if resolved.startswith("raygo://"):
            resolved = resolved[len("raygo://"):]
        parse_address(resolved)
        _client = GcsClient(resolved, namespace or str(uuid.uuid4()), _connect_timeout_s)
        logger.info("raygo: connected to %s as job %s (namespace %s)", _client.address, _client.job_id, _client.namespace)
        return RaygoContext(_client)


def shutdown(_exiting_interpreter: bool = False) -> None:
    """Ends the job (its non-detached placement groups are removed) and disconnects.

    Harmless when not connected. Called at interpreter exit.
    """
    global _client
    del _exiting_interpreter
    with _lock:
        client, _client = _client, None
    if client is not None:
        client.close()


def is_initialized() -> bool:
    """Whether ``init`` connected this program to a cluster (and ``shutdown`` has not run)."""
    return _client is not None


def global_client() -> GcsClient:
    """The connection, made with ``init()``'s defaults if there is none (Ray's auto-init)."""
    client = _client
    if client is not None:
        return client
    if os.environ.get("RAYGO_ENABLE_AUTO_CONNECT", "1").lower() in ("0", "false", "no"):
        raise RaySystemError("raygo has not been started yet. You can start it with 'raygo.init()'.")
    with _lock:
        if _client is None:
            init()
        assert _client is not None
        return _client


atexit.register(shutdown, True)


# --- cluster state ---------------------------------------------------------------------


def _gpu_dict(gpu: Any) -> Dict[str, Any]:
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "model": gpu.model,
        "memory_bytes": gpu.memory_bytes,
        "pci_bus_id": gpu.pci_bus_id,
        "nvlink_island": gpu.nvlink_island,
        "rail": gpu.rail,
        "nic": gpu.nic,
    }


def nodes() -> List[Dict[str, Any]]:
    """Every node the GCS knows, alive or dead, with Ray's keys (``NodeID``, ``Alive``,
    ``NodeManagerAddress``, ``NodeManagerHostname``, ``NodeManagerPort``, ``NodeName``,
    ``Resources``, ``Labels``, ``DeathReasonMessage``, ``alive``) plus raygo's
    (``RayletAddress``, ``IsHeadNode``, ``IsDraining``, ``DrainReason``, ``GPUs``,
    ``NVLinkDomain``, ``StartTimeMs``, ``EndTimeMs``).
    """
    from raygo._proto import common_pb2

    out = []
    for node in global_client().all_nodes():
        alive = node.state == common_pb2.ALIVE
        port = node.raylet_address.rsplit(":", 1)[-1]
        out.append({
            "NodeID": node.node_id,
            "Alive": alive,
            "NodeManagerAddress": node.node_ip,
            "NodeManagerHostname": node.node_name or node.node_ip,
            "NodeManagerPort": int(port) if port.isdigit() else 0,
            "NodeName": node.node_name or node.node_ip,
            "DeathReasonMessage": node.death_reason,
            "alive": alive,
            "Resources": {name: amount for name, amount in node.resources_total.items() if amount != 0},
            "Labels": dict(node.labels),
            "RayletAddress": node.raylet_address,
            "IsHeadNode": node.is_head_node,
            "IsDraining": node.is_draining,
            "DrainReason": node.drain_reason,
            "GPUs": [_gpu_dict(gpu) for gpu in node.gpus],
            "NVLinkDomain": node.nvlink_domain,
            "StartTimeMs": node.start_time_ms,
            "EndTimeMs": node.end_time_ms,
        })
    return out


def _sum_alive(field: str) -> Dict[str, float]:
    from raygo._proto import common_pb2

    total: Dict[str, float] = {}
    for node in global_client().all_nodes():
        if node.state != common_pb2.ALIVE:
            continue
        for name, amount in getattr(node, field).items():
            total[name] = total.get(name, 0.0) + amount
    # Amounts are multiples of 1/10000; keep sums exact to that precision, as Ray does.
    # Resources nobody has (a GPU count of 0) or nothing free of are left out, as in Ray.
    return {name: round(amount, 4) for name, amount in total.items() if round(amount, 4) > 0}


def cluster_resources() -> Dict[str, float]:
    """Total resources of the alive nodes: name -> amount (Ray's ``ray.cluster_resources()``);
    resources no node has are left out.
    """
    return _sum_alive("resources_total")


def available_resources() -> Dict[str, float]:
    """Resources free on the alive nodes right now; names with nothing free are left out,
    as in Ray's ``ray.available_resources()``.
    """
    return _sum_alive("resources_available")


class RuntimeContext:
    """What ``raygo.get_runtime_context()`` returns: the driver's job and namespace."""

    def __init__(self, client: GcsClient) -> None:
        self._client = client

    @property
    def namespace(self) -> str:
        """The job's namespace (named placement groups are looked up in it)."""
        return self._client.namespace

    @property
    def gcs_address(self) -> str:
        """The GCS's ``HOST:PORT``."""
        return self._client.address

    def get_job_id(self) -> str:
        """The job's id, in hex."""
        return self._client.job_id

    def get_placement_group_id(self) -> Optional[str]:
        """Always None: a driver belongs to no placement group."""
        return None


def get_runtime_context() -> RuntimeContext:
    """The driver's runtime context (Ray's ``ray.get_runtime_context()``), connecting if needed."""
    return RuntimeContext(global_client())
