"""Who a Python worker process is, read from the environment its raylet set
(protos/worker.proto): node, job, placement group and bundle, the lease's resources and
GPUs, and the task it runs. ``raygo.get_runtime_context()`` and ``raygo.get_gpu_ids()``
answer from it inside a task.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

from raygo._ids import JobID, NodeID, PlacementGroupID


class WorkerContext:
    """The worker's identity (fixed at start) and its current task (one at a time)."""

    def __init__(self) -> None:
        env = os.environ
        self.worker_id = env.get("RAYGO_WORKER_ID", "")
        self.node_id = env.get("RAYGO_NODE_ID", "")
        self.job_id = env.get("RAYGO_JOB_ID", "")
        self.gcs_address = env.get("RAYGO_GCS_ADDRESS", "")
        self.placement_group_id: Optional[str] = env.get("RAYGO_PLACEMENT_GROUP_ID") or None
        self.bundle_index = int(env.get("RAYGO_BUNDLE_INDEX", "-1") or -1)
        try:
            self.resources: Dict[str, float] = dict(json.loads(env.get("RAYGO_RESOURCES", "{}") or "{}"))
        except ValueError:
            self.resources = {}
        self.cuda_visible_devices = env.get("CUDA_VISIBLE_DEVICES", "")
        # How the raylet started this worker: its directory and PYTHONPATH are the driver's.
        self.working_dir = os.getcwd()
        self.sys_path = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
        self._lock = threading.Lock()
        self.task_id: Optional[str] = None
        self.task_name: Optional[str] = None
        # Whether what the current task (or the hosted actor) submits without a strategy
        # of its own runs in its placement group (raygo._capture).
        self.capture_child_tasks = False
        # Threads waiting in get/wait, and how to tell the raylet (set by _worker_main).
        self._blocked_lock = threading.Lock()
        self._blocked_waits = 0
        self.notify_blocked: Optional[Callable[[bool], None]] = None
        # Set when the worker hosts an actor.
        self.actor_id: Optional[str] = None
        self.num_restarts = 0

    def begin_task(self, task_id: str, name: str, capture_child_tasks: Optional[bool] = None) -> None:
        """A task (capture_child_tasks: its flag) or an actor call (None: the actor's) begins."""
        with self._lock:
            self.task_id, self.task_name = task_id, name
            if capture_child_tasks is not None:
                self.capture_child_tasks = capture_child_tasks

    def end_task(self) -> None:
        with self._lock:
            self.task_id, self.task_name = None, None

    @contextlib.contextmanager
    def blocked(self) -> Iterator[None]:
        """Marks the worker blocked at its raylet while any of its threads waits (raygo._blocking)."""
        self._set_blocked(+1)
        try:
            yield
        finally:
            self._set_blocked(-1)

    def _set_blocked(self, change: int) -> None:
        with self._blocked_lock:
            self._blocked_waits += change
            if self.notify_blocked is not None and self._blocked_waits == (1 if change > 0 else 0):
                self.notify_blocked(change > 0)

    def python_worker(self) -> Any:
        """The raylet's PythonWorker for this worker's nested tasks and actors: the
        interpreter, directory and sys.path this worker was started with."""
        from raygo._proto import raylet_pb2

        return raylet_pb2.PythonWorker(interpreter=os.path.abspath(sys.executable), working_dir=self.working_dir,
                                       sys_path=self.sys_path)

    def gpu_ids(self) -> List[Union[int, str]]:
        """The lease's GPUs as in ``CUDA_VISIBLE_DEVICES``: NVML indices as ints, MIG device
        UUIDs as strings (Ray's ``get_gpu_ids()``)."""
        ids: List[Union[int, str]] = []
        for item in self.cuda_visible_devices.split(","):
            item = item.strip()
            if item:
                ids.append(int(item) if item.isdigit() else item)
        return ids


class WorkerRuntimeContext:
    """``raygo.get_runtime_context()`` inside a task: Ray's methods, answered from the
    worker's lease."""

    def __init__(self, context: WorkerContext) -> None:
        self._context = context

    def get_job_id(self) -> str:
        return self._context.job_id

    @property
    def job_id(self) -> JobID:
        return JobID.from_hex(self._context.job_id)

    def get_node_id(self) -> str:
        return self._context.node_id

    @property
    def node_id(self) -> NodeID:
        return NodeID.from_hex(self._context.node_id)

    def get_worker_id(self) -> str:
        return self._context.worker_id

    def get_task_id(self) -> Optional[str]:
        return self._context.task_id

    def get_task_name(self) -> Optional[str]:
        return self._context.task_name

    def get_task_function_name(self) -> Optional[str]:
        return self._context.task_name

    def get_actor_id(self) -> Optional[str]:
        return self._context.actor_id

    @property
    def was_current_actor_reconstructed(self) -> bool:
        return self._context.num_restarts > 0

    def get_actor_name(self) -> Optional[str]:
        return None

    def get_placement_group_id(self) -> Optional[str]:
        """The group whose bundle the task's worker was leased from, or None."""
        return self._context.placement_group_id

    @property
    def current_placement_group_id(self) -> PlacementGroupID:
        pg = self._context.placement_group_id
        return PlacementGroupID.from_hex(pg) if pg else PlacementGroupID.nil()

    @property
    def should_capture_child_tasks_in_placement_group(self) -> bool:
        """Whether the current task (or actor) was submitted with
        ``placement_group_capture_child_tasks``."""
        return self._context.capture_child_tasks

    def get_assigned_resources(self) -> Dict[str, float]:
        """The resources the task's lease holds (``RAYGO_RESOURCES``)."""
        return dict(self._context.resources)

    def get_accelerator_ids(self) -> Dict[str, List[str]]:
        return {"GPU": [str(gpu) for gpu in self._context.gpu_ids()]}

    @property
    def gcs_address(self) -> str:
        return self._context.gcs_address

    @property
    def namespace(self) -> str:
        """The job's namespace (read from the GCS when the worker joins its job)."""
        from raygo import _worker

        return _worker.global_client().namespace

    def get_runtime_env_string(self) -> str:
        return "{}"

    def get(self) -> Dict[str, Any]:
        return {"job_id": self.job_id, "node_id": self.node_id, "task_id": self._context.task_id}
