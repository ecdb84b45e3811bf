"""raygo's Python client: Ray's placement-group API on a raygo cluster.

A script written against ``ray`` / ``ray.util`` for placement groups runs by changing its
import to ``import raygo as ray``::

    import raygo as ray
    from raygo.util.placement_group import placement_group

    ray.init(address="127.0.0.1:6380")          # or RAYGO_ADDRESS / RAY_ADDRESS
    pg = placement_group([{"GPU": 1, "CPU": 4}] * 8, strategy="STRICT_PACK")
    ray.get(pg.ready())
    row = ray.util.placement_group_table(pg)
    row["bundles_to_node_id"], row["bundles_to_cuda_visible_devices"]

``@raygo.remote`` functions run as tasks in Python workers that raylets start (inside
placement-group bundles with ``PlacementGroupSchedulingStrategy``), and on classes as actors.
"""

from raygo import exceptions, util
from raygo._ids import ActorID, JobID, NodeID, PlacementGroupID, WorkerID
from raygo._object_ref import ObjectRef, get, wait
from raygo._actor import ActorClass, ActorHandle, get_actor, kill
from raygo._remote import put, remote
from raygo._version import __version__
from raygo._worker import (
    RaygoContext,
    RuntimeContext,
    available_resources,
    cluster_resources,
    get_gpu_ids,
    get_runtime_context,
    init,
    is_initialized,
    nodes,
    shutdown,
)

__all__ = [
    "ActorClass",
    "ActorHandle",
    "ActorID",
    "JobID",
    "NodeID",
    "ObjectRef",
    "PlacementGroupID",
    "WorkerID",
    "RaygoContext",
    "RuntimeContext",
    "__version__",
    "available_resources",
    "cluster_resources",
    "exceptions",
    "get",
    "get_actor",
    "get_gpu_ids",
    "get_runtime_context",
    "init",
    "is_initialized",
    "kill",
    "nodes",
    "put",
    "remote",
    "shutdown",
    "util",
    "wait",
]
