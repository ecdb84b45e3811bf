"""The names a Ray script imports and the parameters it passes: placement-group functions,
strategies, runtime context, ray.util and ray.util.state (only what Ray 2.60 has; raygo's
own extensions, placement_group's keyword-only `topology`, `queue`, `priority` and
`max_runtime_s`, are left out)."""

import importlib
import inspect

from compat_lib import BACKEND, connect, finish, record, ray

connect("compat-api-surface")
pg_module = importlib.import_module(f"{BACKEND}.util.placement_group")
strategies = importlib.import_module(f"{BACKEND}.util.scheduling_strategies")
state = importlib.import_module(f"{BACKEND}.util.state")
RAYGO_ONLY = {"topology", "queue", "priority", "max_runtime_s"}


def params(fn):
    return [name for name, p in inspect.signature(fn).parameters.items() if name not in RAYGO_ONLY]


for name in ("placement_group", "remove_placement_group", "get_placement_group", "placement_group_table",
             "get_current_placement_group"):
    record(f"params.{name}", params(getattr(pg_module, name)))
record("params.PlacementGroup.wait", params(pg_module.PlacementGroup.wait))
for name in ("PlacementGroupSchedulingStrategy", "NodeAffinitySchedulingStrategy", "NodeLabelSchedulingStrategy"):
    record(f"params.{name}", params(getattr(strategies, name).__init__))
for name in ("In", "NotIn", "Exists", "DoesNotExist"):
    record(f"has.strategies.{name}", hasattr(strategies, name))
for name in ("list_placement_groups", "list_nodes", "list_actors", "list_jobs", "get_placement_group", "get_node",
             "get_actor", "summarize_actors"):
    record(f"params.state.{name}", params(getattr(state, name)))
for name in ("summarize_tasks", "summarize_objects", "list_tasks", "list_objects", "list_workers", "get_log"):
    record(f"has.state.{name}", callable(getattr(state, name, None)))
for name in ("get_node_ip_address", "get_node_instance_id", "placement_group", "remove_placement_group",
             "get_placement_group", "get_current_placement_group", "placement_group_table"):
    record(f"has.util.{name}", callable(getattr(ray.util, name, None)))
for name in ("NodeID", "JobID", "WorkerID", "ActorID", "PlacementGroupID", "ObjectRef", "get_runtime_context",
             "nodes", "cluster_resources", "available_resources", "is_initialized", "shutdown", "init", "get", "wait",
             "get_gpu_ids", "remote", "put", "kill", "get_actor"):
    record(f"has.ray.{name}", hasattr(ray, name))
for name in ("kill", "get_actor"):
    record(f"params.ray.{name}", params(getattr(ray, name)))
context = ray.get_runtime_context()
for name in ("get_job_id", "get_node_id", "get_worker_id", "get_node_labels", "get", "get_placement_group_id",
             "get_task_id", "get_actor_id", "get_accelerator_ids"):
    record(f"has.context.{name}", callable(getattr(context, name, None)))
for name in ("job_id", "node_id", "namespace", "gcs_address", "current_placement_group_id",
             "should_capture_child_tasks_in_placement_group"):
    record(f"has.context.{name}", hasattr(type(context), name))
record("util.get_node_instance_id", ray.util.get_node_instance_id())
record("empty_group", [pg_module.PlacementGroup.empty().is_empty, pg_module.PlacementGroup.empty().id.is_nil()])
finish()
