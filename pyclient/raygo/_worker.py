"""The driver's global connection: ``init``, ``shutdown``, ``is_initialized``, cluster state
(``nodes``, ``cluster_resources``, ``available_resources``) and the runtime context.

As in Ray, the first call that needs the cluster connects on its own (``init()`` with the
defaults) unless ``RAYGO_ENABLE_AUTO_CONNECT=0``.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import sys
import threading
import uuid
from typing import Any, Dict, Iterator, List, Optional

from raygo._gcs import GcsClient, parse_address
from raygo._ids import JobID, NodeID
from raygo._version import __version__
from raygo._worker_context import WorkerContext, WorkerRuntimeContext
from raygo.exceptions import RaySystemError

logger = logging.getLogger("raygo")

DEFAULT_ADDRESS = "127.0.0.1:6380"
DEFAULT_CONNECT_TIMEOUT_S = 10.0

# ray.init options that Ray itself refuses when connecting to a running cluster (ValueError
# "When connecting to an existing cluster, ... must not be provided"), or that need a part
# raygo does not have; raygo always connects to a running cluster, so they are refused.
_LOCAL_CLUSTER_OPTIONS = frozenset({
    "num_cpus", "num_gpus", "resources", "labels", "object_store_memory", "local_mode",
    "_system_config", "_memory", "_redis_password", "_plasma_directory",
    "_driver_object_store_memory", "storage", "_enable_object_reconstruction",
})
# ray.init options about tasks' environment (raygo has none); accepted with a warning.
_TASK_OPTIONS = frozenset({"runtime_env", "job_config"})
# ray.init options that change only logging, the dashboard or a local cluster's set-up;
# accepted and ignored.
_IGNORED_OPTIONS = frozenset({
    "include_dashboard", "dashboard_host", "dashboard_port", "log_to_driver", "logging_level",
    "logging_format", "logging_config", "configure_logging", "_metrics_export_port",
    "_tracing_startup_hook", "enable_resource_isolation", "cgroup_path",
    "system_reserved_cpu", "system_reserved_memory", "_temp_dir", "_skip_env_hook",
})

_lock = threading.RLock()
_client: Optional[GcsClient] = None
# Set in a worker process (raygo._worker_main): the process runs tasks and is no driver.
_worker_ctx: Optional[WorkerContext] = None


def enter_worker_mode() -> WorkerContext:
    """Marks this process as a Python worker (called by raygo._worker_main)."""
    global _worker_ctx
    _worker_ctx = WorkerContext()
    return _worker_ctx


def is_worker() -> bool:
    """Whether this process is a Python worker (raygo._worker_main)."""
    return _worker_ctx is not None


def worker_context() -> WorkerContext:
    """The worker's context; RuntimeError outside a worker."""
    if _worker_ctx is None:
        raise RuntimeError("not a raygo worker process")
    return _worker_ctx


class RaygoContext:
    """What ``raygo.init`` returns (Ray's ``RayContext``): the connection's address info.

    ``address_info`` has Ray's keys: ``address`` and ``gcs_address`` (the GCS),
    ``node_ip_address`` and ``node_id`` (the node the driver runs on, as Ray picks it: an
    ALIVE node with the driver's IP, the head first; ``None`` for both when no node runs on
    this machine), ``webui_url`` (the head's dashboard port: the web page, ``/api/v0`` and ``/metrics``; ``None``
    when it serves none), and ``session_dir``, ``redis_address``,
    ``object_store_address``, ``raylet_socket_name``, ``metrics_export_port`` and
    ``dashboard_agent_listen_port``, which are ``None`` (raygo has no such parts, or, for
    the session directory, keeps it on the head machine only); plus raygo's ``job_id`` and
    ``namespace``. Use it as a context manager to shut down on exit:
    ``with raygo.init(): ...``.
    """

    def __init__(self, client: GcsClient) -> None:
        node = client.driver_node()
        self.address_info: Dict[str, Any] = {
            "node_ip_address": client.driver_ip,
            "redis_address": None,
            "object_store_address": None,
            "raylet_socket_name": None,
            "webui_url": client.cluster_info.dashboard_address or None,
            "session_dir": None,
            "metrics_export_port": None,
            "gcs_address": client.address,
            "address": client.address,
            "dashboard_agent_listen_port": None,
            "node_id": node.node_id if node is not None else None,
            "job_id": client.job_id,
            "namespace": client.namespace,
        }
        self.dashboard_url: Optional[str] = client.cluster_info.dashboard_address or None
        self.python_version = "{}.{}.{}".format(*sys.version_info[:3])
        self.ray_version = __version__
        self.ray_commit = ""

    def __getitem__(self, key: str) -> Any:
        return self.address_info[key]

    def __len__(self) -> int:
        return len(self.address_info)

    def __iter__(self) -> Iterator[str]:
        return iter(self.address_info)

    def __enter__(self) -> "RaygoContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        shutdown()

    def disconnect(self) -> None:
        """Shuts down, as Ray's ``RayContext.disconnect``."""
        shutdown()

    def __repr__(self) -> str:
        return f"RaygoContext({self.address_info!r})"


def init(
    address: Optional[str] = None,
    *,
    namespace: Optional[str] = None,
    ignore_reinit_error: bool = False,
    _node_ip_address: Optional[str] = None,
    _connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    **ray_options: Any,
) -> RaygoContext:
    """Connects this program to a raygo cluster as a driver (a job), as ``ray.init`` does.

    Args:
        address: the GCS as ``HOST:PORT`` (or ``raygo://HOST:PORT``). ``None`` or ``"auto"``
            reads ``RAYGO_ADDRESS``, then Ray's ``RAY_ADDRESS``, then falls back to
            ``127.0.0.1:6380``. Ray Client addresses (``ray://...``) and ``"local"`` (start
            a cluster) are refused: raygo connects to the GCS of a running cluster.
        namespace: namespace of the job's named placement groups. ``None`` gives the job an
            anonymous namespace of its own, as Ray does: pass the same namespace in every
            driver that looks groups up by name.
        ignore_reinit_error: when already connected, return instead of raising.
        _node_ip_address: this machine's IP as the cluster sees it (default: the address
            it reaches the GCS from), as in Ray; it picks the driver's node.
        _connect_timeout_s: how long to wait for the GCS to answer before ConnectionError.
        **ray_options: other ``ray.init`` keywords. Logging, dashboard and local set-up
            options are ignored, task options (``runtime_env``, ``job_config``) too, with a
            warning; options that Ray refuses when connecting to a running cluster
            (``num_cpus``, ``resources``, ...) raise ValueError, as in Ray.

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
            f"When connecting to an existing cluster, {', '.join(local)} must not be provided: "
            "raygo.init connects to a running cluster; give nodes their resources with `raygo start`"
        )
    unknown = sorted(set(ray_options) - _IGNORED_OPTIONS - _TASK_OPTIONS)
    if unknown:
        raise TypeError(f"raygo.init() got unexpected keyword arguments: {', '.join(unknown)}")
    for option in sorted(set(ray_options) & _TASK_OPTIONS):
        logger.warning("raygo.init: ignoring %s: raygo's Python tasks run without a runtime environment", option)
    if namespace is not None and not isinstance(namespace, str):
        raise TypeError(f"namespace must be a str, got {type(namespace).__name__}")
    if namespace is not None and not namespace:
        raise ValueError("namespace must be a non-empty string")
    resolved = resolve_address(address)  # before the reinit check, as Ray checks the address first
    if _worker_ctx is not None:
        _join_job(_worker_ctx)  # a worker is connected already, as in Ray
    with _lock:
        if _client is not None:
            if ignore_reinit_error:
                logger.info("raygo.init: already connected to %s; ignoring", _client.address)
                return RaygoContext(_client)
            raise RuntimeError(
                "Maybe you called raygo.init twice by accident? This error can be suppressed by "
                "passing in 'ignore_reinit_error=True' or by calling 'raygo.shutdown()' prior to 'raygo.init()'."
            )
        _client = GcsClient(resolved, namespace or str(uuid.uuid4()), _connect_timeout_s)
        if _node_ip_address:
            _client.driver_ip = _node_ip_address
        logger.info("raygo: connected to %s as job %s (namespace %s)", _client.address, _client.job_id, _client.namespace)
        return RaygoContext(_client)


def resolve_address(address: Optional[str]) -> str:
    """The GCS's HOST:PORT for ``init(address)``: an explicit address, else (for None and
    ``"auto"``) RAYGO_ADDRESS, RAY_ADDRESS, then the default. Raises ValueError for an
    address raygo cannot connect to, naming where it came from.
    """
    if address is not None and not isinstance(address, str):
        raise TypeError(f"address must be a str, got {type(address).__name__}")
    source, resolved = "address", address
    if resolved is None or resolved == "auto":
        for variable in ("RAYGO_ADDRESS", "RAY_ADDRESS"):
            if os.environ.get(variable):
                source, resolved = variable, os.environ[variable]
                break
        else:
            return DEFAULT_ADDRESS
    if resolved.startswith("raygo://"):
        resolved = resolved[len("raygo://"):]
    if resolved == "local" or "://" in resolved:
        raise ValueError(
            f"{source} {resolved!r}: raygo connects to the GCS of a running cluster as HOST:PORT "
            "(e.g. 127.0.0.1:6380); it has no Ray Client (ray://) and starts no local cluster"
        )
    try:
        return parse_address(resolved)
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None


def shutdown(_exiting_interpreter: bool = False) -> None:
    """Ends the job (its non-detached placement groups are removed) and disconnects.

    Harmless when not connected. Called at interpreter exit.
    """
    global _client
    del _exiting_interpreter
    with _lock:
        client, _client = _client, None
    if client is not None:
        from raygo._task_client import close_submitter

        close_submitter(client)
        client.close()


def is_initialized() -> bool:
    """Whether ``init`` connected this program to a cluster (and ``shutdown`` has not run);
    always True in a worker, as in Ray."""
    return _client is not None or _worker_ctx is not None


def global_client() -> GcsClient:
    """The connection, made with ``init()``'s defaults if there is none (Ray's auto-init)."""
    client = _client
    if client is not None:
        return client
    if _worker_ctx is not None:
        return _join_job(_worker_ctx)
    if os.environ.get("RAYGO_ENABLE_AUTO_CONNECT", "1").lower() in ("0", "false", "no"):
        raise RaySystemError("raygo has not been started yet. You can start it with 'raygo.init()'.")
    with _lock:
        if _client is None:
            init()
        assert _client is not None
        return _client


def _join_job(context: WorkerContext) -> GcsClient:
    """A worker's connection, made on first use: it joins its job at the GCS its raylet
    named, so tasks and actors submit tasks, create actors and groups and read cluster
    state as the job's driver does (Ray's workers are drivers of their job too)."""
    global _client
    with _lock:
        if _client is None:
            _client = GcsClient(context.gcs_address, "", DEFAULT_CONNECT_TIMEOUT_S, job_id=context.job_id)
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
            "NodeManagerHostname": node.node_manager_hostname or node.node_ip,
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
    """What ``raygo.get_runtime_context()`` returns: the driver's job, node and namespace,
    with Ray's methods. A driver runs no task or actor and belongs to no placement group,
    so those ids are None, as in a Ray driver.
    """

    def __init__(self) -> None:
        self._worker_id = os.urandom(28).hex()

    @staticmethod
    def _connected(what: str) -> GcsClient:
        client = _client
        if client is None:
            raise RuntimeError(f"{what} is not available because raygo has not been initialized.")
        return client

    @property
    def namespace(self) -> str:
        """The job's namespace (named placement groups are looked up in it)."""
        return global_client().namespace

    @property
    def gcs_address(self) -> str:
        """The GCS's ``HOST:PORT``."""
        return global_client().address

    def get_job_id(self) -> str:
        """The job's id, in hex (8 characters, as Ray's)."""
        return self._connected("Job ID").job_id

    @property
    def job_id(self) -> JobID:
        """The job's id (Ray's deprecated form; use ``get_job_id()``)."""
        return JobID.from_hex(global_client().job_id)

    def get_node_id(self) -> str:
        """The id, in hex, of the node the driver runs on: an ALIVE node with the driver's
        IP, the head first. Raises RuntimeError when not connected, or when no node runs
        on this machine (a Ray driver always runs on a node).
        """
        node = self._connected("Node ID").driver_node()
        if node is None:
            raise RuntimeError(
                f"Node ID is not available: no raygo node runs at this driver's IP {global_client().driver_ip}"
            )
        return str(node.node_id)

    @property
    def node_id(self) -> NodeID:
        """The driver's node id (Ray's deprecated form; use ``get_node_id()``)."""
        return NodeID.from_hex(self.get_node_id())

    def get_worker_id(self) -> str:
        """The driver's worker id, in hex (56 characters, as Ray's): one per process."""
        self._connected("Worker ID")
        return self._worker_id

    def get_node_labels(self) -> Dict[str, str]:
        """The labels of the driver's node ({} when no node runs on this machine)."""
        node = global_client().driver_node()
        return dict(node.labels) if node is not None else {}

    def get(self) -> Dict[str, Any]:
        """``{"job_id", "node_id", "namespace"}`` (Ray's deprecated form; ids as objects)."""
        return {"job_id": self.job_id, "node_id": self.node_id, "namespace": self.namespace}

    def get_placement_group_id(self) -> Optional[str]:
        """Always None: a driver belongs to no placement group."""
        return None

    @property
    def current_placement_group_id(self) -> Any:
        """The nil placement group id: a driver belongs to no placement group."""
        from raygo._ids import PlacementGroupID

        return PlacementGroupID.nil()

    @property
    def should_capture_child_tasks_in_placement_group(self) -> bool:
        """False: a driver captures nothing, as in Ray."""
        return False

    def get_task_id(self) -> Optional[str]:
        """Always None: a driver runs no task."""
        return None

    def get_task_name(self) -> Optional[str]:
        """Always None: a driver runs no task."""
        return None

    def get_task_function_name(self) -> Optional[str]:
        """Always None: a driver runs no task."""
        return None

    def get_actor_id(self) -> Optional[str]:
        """Always None: a driver is no actor."""
        return None

    def get_actor_name(self) -> Optional[str]:
        """Always None: a driver is no actor."""
        return None

    @property
    def was_current_actor_reconstructed(self) -> bool:
        """False: a driver is no actor."""
        return False

    def get_accelerator_ids(self) -> Dict[str, List[str]]:
        """``{"GPU": []}``: a driver holds no accelerators."""
        global_client()
        return {"GPU": []}

    def get_runtime_env_string(self) -> str:
        """``"{}"``: raygo has no runtime environments."""
        return "{}"


_runtime_context: Optional[RuntimeContext] = None


def get_runtime_context() -> Any:
    """The runtime context (Ray's ``ray.get_runtime_context()``): inside a task the
    worker's (its node, placement group, GPUs), else the driver's, connecting if needed."""
    global _runtime_context
    if _worker_ctx is not None:
        return WorkerRuntimeContext(_worker_ctx)
    global_client()
    with _lock:
        if _runtime_context is None:
            _runtime_context = RuntimeContext()
        return _runtime_context


def get_gpu_ids() -> List[Any]:
    """The GPUs this process holds (Ray's ``ray.get_gpu_ids()``): inside a task its lease's
    (``CUDA_VISIBLE_DEVICES``: indices as ints, MIG UUIDs as strings); none for a driver."""
    if _worker_ctx is not None:
        return _worker_ctx.gpu_ids()
    global_client()
    return []


def get_node_ip_address(address: str = "8.8.8.8:53") -> str:
    """This machine's IP as the cluster sees it (Ray's ``ray.util.get_node_ip_address``):
    when connected, the driver's IP (the address the GCS is reached from, or
    ``init(_node_ip_address=...)``); otherwise the address that would reach ``address``
    (no packet is sent), or ``127.0.0.1`` when there is no route.
    """
    client = _client
    if client is not None:
        return client.driver_ip
    host, _, port = address.rpartition(":")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, int(port)))
            return str(probe.getsockname()[0])
    except (OSError, ValueError):
        return "127.0.0.1"
