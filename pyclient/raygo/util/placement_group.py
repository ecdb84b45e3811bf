"""Placement groups with Ray's API (``ray.util.placement_group``), served by raygo's GCS.

A placement group reserves a gang of resource bundles, all or nothing. As Ray's,
``placement_group`` returns the handle of a group whose id the driver chose, and the group
is placed asynchronously: wait with ``raygo.get(pg.ready())`` or ``pg.wait(seconds)``.
Without a name, queue, priority or label selector a refusal by the GCS is raised by
``ready()`` / ``wait()``, and the create is sent in the background, or, when the driver
waited for its previous group and has nothing in flight, on its own thread (answered once
the group is placed or its first attempt failed, at most 200 ms); with one,
``placement_group`` waits for the GCS to accept it, so a name already taken raises at once.

Beyond Ray, ``placement_group_table`` says where each bundle lives on the hardware:
``bundles_to_node_address`` (the raylet's ``host:port``), ``bundles_to_gpu_ids`` (GPU
indices on that node; a MIG slice's parent GPU), ``bundles_to_device_uuids`` (GPU or MIG
device UUIDs) and ``bundles_to_cuda_visible_devices`` (the exact ``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Union

from raygo import _resources, _worker
from raygo._ids import NodeID, PlacementGroupID
from raygo._object_ref import ObjectRef
from raygo._proto import placement_group_pb2 as pg_pb2
from raygo.exceptions import RaySystemError

__all__ = [
    "PlacementGroup",
    "placement_group",
    "remove_placement_group",
    "get_placement_group",
    "get_current_placement_group",
    "placement_group_table",
    "validate_placement_group",
    "VALID_PLACEMENT_GROUP_STRATEGIES",
]

VALID_PLACEMENT_GROUP_STRATEGIES = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"}
# The label every node has with its own id; as a topology_strategy key it stands for the
# node-level strategy.
NODE_ID_LABEL_KEY = "ray.io/node-id"
# raygo's limits, checked by the GCS too (README, "Validation").
MAX_BUNDLES = 10_000
MAX_RESOURCE_NAME_BYTES = _resources.MAX_RESOURCE_NAME_BYTES
VALID_TOPOLOGIES = {None, "", "node"}

Bundle = Dict[str, float]


logger = logging.getLogger(__name__)

# How long one long poll for a preemption notice waits at the GCS.
_NOTICE_POLL_S = 30.0


@dataclass(frozen=True)
class PreemptionNotice:
    """A running group is being preempted (evicted to make room for other work).

    ``reason`` is Kueue's eviction reason (``InClusterQueue``, ``InCohortReclamation``,
    ``InCohortReclaimWhileBorrowing``), ``preemptor_id`` the pending group it makes room
    for, ``time`` and ``deadline`` Unix seconds: the group's bundles are released when the
    hook returns, or at ``deadline`` at the latest.
    """

    reason: str
    preemptor_id: str
    time: float
    deadline: float
    acknowledged: bool = False

    @staticmethod
    def _from_proto(notice: Any) -> "PreemptionNotice":
        return PreemptionNotice(
            reason=notice.reason, preemptor_id=notice.preemptor_id, time=notice.time_ms / 1000.0,
            deadline=notice.deadline_ms / 1000.0, acknowledged=notice.acknowledged,
        )


class PlacementGroup:
    """A handle to a placement group (Ray's ``PlacementGroup``).

    Handles compare and hash by id, and pickle (id and bundles only).
    """

    def __init__(self, id: PlacementGroupID, bundle_cache: Optional[List[Bundle]] = None) -> None:  # noqa: A002
        self.id = id
        self.bundle_cache = bundle_cache
        # True when the GCS answered the create with the group already CREATED: ready()
        # and wait() then need no call. Removing the group through this handle clears it.
        self._created = False
        # The create, while this handle's placement_group() sent it without waiting: a
        # future of the row the GCS answered. Cleared with _created.
        self._create: "Optional[concurrent.futures.Future[Any]]" = None
        # The connection whose placement_group() returned this handle: the GCS, which took
        # the group from it, takes its removal through it too (remove needs no answer).
        self._owner: Any = None

    @staticmethod
    def empty() -> "PlacementGroup":
        """The handle that stands for "no placement group"."""
        return PlacementGroup(PlacementGroupID.nil())

    @property
    def is_empty(self) -> bool:
        """Whether this is the empty handle."""
        return self.id.is_nil()

    def ready(self) -> ObjectRef:
        """A ref that ``raygo.get`` / ``raygo.wait`` / ``await`` resolve to this handle once
        the group is CREATED (every bundle reserved).

        ``raygo.get`` on it raises ``raygo.exceptions.TaskPlacementGroupRemoved`` if the
        group is removed first, and ``GetTimeoutError`` when its timeout passes.
        """
        if self._owner is not None:
            self._owner.note_waited(self._create)
        if self.is_empty or self._created_now():
            return ObjectRef._resolved(self)
        return ObjectRef(_worker.global_client().ready_future(self.id.hex(), self, created=self._create))

    def _created_now(self) -> bool:
        """Whether the create's answer already said CREATED (no call needed)."""
        create = self._create
        if not self._created and create is not None and create.done() and create.exception() is None:
            self._created = create.result().state == pg_pb2.PlacementGroupState.CREATED
        return self._created

    def _forget_created(self) -> None:
        self._created = False
        self._create = None

    def wait(self, timeout_seconds: Union[float, int] = 30) -> bool:
        """Waits up to ``timeout_seconds`` for the group to be CREATED.

        Returns True once it is, False if the time ran out (or no group has this id, as
        in Ray). Raises (as Ray does) if the group was removed.
        """
        if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, (int, float)):
            raise TypeError(f"timeout_seconds must be a number of seconds, got {timeout_seconds!r}")
        if self._owner is not None:
            self._owner.note_waited(self._create)
        if self._created_now():
            return True
        client = _worker.global_client()
        timeout_s = float(timeout_seconds)
        create = self._create
        if create is not None:
            # The create in flight answers first (raising the GCS's refusal, as Ray's
            # placement_group() would); a group it found CREATED needs no other call.
            start = time.monotonic()
            try:
                info = create.result(timeout=max(timeout_s, 0.0))
            except concurrent.futures.TimeoutError:
                return False
            if info.state == pg_pb2.PlacementGroupState.CREATED:
                return self._created_now()
            timeout_s = max(timeout_s - (time.monotonic() - start), 0.0)
        outcome, _ = client.wait_placement_group(self.id.hex(), timeout_s)
        if outcome == "removed":
            raise RaySystemError(f"Placement group {self.id!r} does not exist.")
        if outcome == "unknown":
            # As in Ray an unknown id is False, unless the GCS forgot it by restarting empty.
            emptied = client.store_emptied_note()
            if emptied:
                raise RaySystemError(emptied)
        return outcome == "created"

    def on_preemption(self, fn: Callable[[PreemptionNotice], Any]) -> threading.Event:
        """raygo only: calls ``fn(notice)`` each time the group is told it is being
        preempted, then tells the GCS, which releases the group's bundles at once (else at
        ``notice.deadline``). Checkpoint in ``fn``; an exception it raises is logged and
        changes nothing. The group then waits in its queue (``pending_reason`` Preempted)
        and runs again once admitted.

        A daemon thread long-polls the GCS until the group is removed, the driver shuts
        down, or the returned event is set.
        """
        stop = threading.Event()
        client = _worker.global_client()
        pg_id = self.id.hex()

        def watch() -> None:
            while not stop.is_set() and not client.closed:
                try:
                    outcome, notice = client.wait_preemption_notice(pg_id, _NOTICE_POLL_S)
                except Exception as err:  # the GCS restarts or is unreachable: ask again
                    if client.closed:
                        return
                    logger.debug("raygo: preemption long poll of %s: %s", pg_id, err)
                    stop.wait(1.0)
                    continue
                if outcome == "gone":
                    return
                if notice is None:
                    continue
                self._forget_created()
                try:
                    fn(PreemptionNotice._from_proto(notice))
                except Exception:
                    logger.exception("raygo: the preemption hook of placement group %s raised", pg_id)
                try:
                    client.ack_preemption_notice(pg_id, notice.time_ms)
                except Exception as err:
                    logger.warning("raygo: could not acknowledge the preemption of %s: %s", pg_id, err)

        threading.Thread(target=watch, name=f"raygo-preemption-{pg_id[:8]}", daemon=True).start()
        return stop

    @property
    def bundle_specs(self) -> List[Bundle]:
        """The bundles as requested: one ``{resource: amount}`` dict per bundle."""
        self._fill_bundle_cache_if_needed()
        return self.bundle_cache or []

    @property
    def bundle_count(self) -> int:
        """The number of bundles."""
        return len(self.bundle_specs)

    def _fill_bundle_cache_if_needed(self) -> None:
        # As Ray's: a handle made without bundles (by name, or from an id) reads them from
        # the table, where zero amounts are left out.
        if not self.bundle_cache and not self.is_empty:
            info = _worker.global_client().get_placement_group(self.id.hex())
            if info is not None:
                self.bundle_cache = [_nonzero(b.unit_resources) for b in sorted(info.bundles, key=lambda b: b.bundle_index)]

    def __getstate__(self) -> Dict[str, Any]:
        return {"id": self.id, "bundle_cache": self.bundle_cache}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["id"], state.get("bundle_cache"))  # type: ignore[misc]

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, PlacementGroup) and self.id == other.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"PlacementGroup({self.id.hex()})"


def validate_placement_group(
    bundles: Any,
    strategy: Any = None,
    lifetime: Any = None,
    _soft_target_node_id: Any = None,
    bundle_label_selector: Any = None,
    topology_strategy: Any = None,
    *,
    name: Any = "",
    topology: Any = None,
) -> None:
    """Checks ``placement_group``'s arguments with Ray's rules plus raygo's limits.

    Raises ValueError (TypeError for a name that is no str, as Ray) naming the problem;
    makes no RPC.
    """
    if topology_strategy is not None and strategy is not None:
        raise ValueError(
            "`strategy` and `topology_strategy` cannot both be specified. "
            f"Pass node-level packing via `topology_strategy['{NODE_ID_LABEL_KEY}']`."
        )
    if strategy is not None and strategy not in VALID_PLACEMENT_GROUP_STRATEGIES:
        raise ValueError(
            f"Invalid placement group strategy {strategy}. "
            f"Supported strategies are: {VALID_PLACEMENT_GROUP_STRATEGIES}."
        )
    if topology_strategy is not None:
        _validate_topology_strategy(topology_strategy)
    node_level_strategy = _node_level_strategy(strategy, topology_strategy)
    if _soft_target_node_id and node_level_strategy != "STRICT_PACK":
        raise ValueError(
            f"_soft_target_node_id currently only works with STRICT_PACK but got {node_level_strategy}"
        )
    if _soft_target_node_id and NodeID.from_hex(_soft_target_node_id).is_nil():
        raise ValueError(f"Invalid hex ID of _soft_target_node_id, got {_soft_target_node_id}")
    _validate_bundles(bundles)
    if bundle_label_selector is not None:
        if not isinstance(bundle_label_selector, list):
            raise ValueError(
                f"Placement group bundle_label_selector must be a list, got {type(bundle_label_selector)}."
            )
        if len(bundles) != len(bundle_label_selector):
            raise ValueError(
                f"Invalid bundle label selector {bundle_label_selector}. "
                "The length of `bundle_label_selector` should equal the length of `bundles`."
            )
        for selector in bundle_label_selector:
            if not isinstance(selector, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in selector.items()
            ):
                raise ValueError(
                    "Bundle label selector must be a list of string dictionary label selectors. "
                    'For example: `[{"market": "spot"}, {"ray.io/accelerator-type": "A100"}]`.'
                )
    if lifetime not in (None, "detached"):
        raise ValueError(f"Placement group `lifetime` argument must be either `None` or 'detached'. Got {lifetime}.")
    if not isinstance(name, str):
        raise TypeError(f"Placement group `name` must be a str, got {type(name).__name__}.")
    problem = _resources.check_name(name)
    if problem is not None:
        raise ValueError(f"name: {problem}")
    if topology not in VALID_TOPOLOGIES:
        raise ValueError(f"Placement group `topology` must be None or 'node', got {topology!r}.")


def _validate_topology_strategy(topology_strategy: Any) -> None:
    """Ray's shape checks of ``topology_strategy``, then raygo's limit: only the
    node-level entry (``ray.io/node-id``), which is the same as ``strategy``.
    """
    if not isinstance(topology_strategy, dict):
        raise ValueError(f"`topology_strategy` must be a dict, got {type(topology_strategy).__name__}.")
    if len(topology_strategy) > 2:
        raise ValueError(
            f"`topology_strategy` must contain 0, 1, or 2 entries: `{NODE_ID_LABEL_KEY}` plus an optional "
            f"topology label. Got {len(topology_strategy)} entries."
        )
    for key, value in topology_strategy.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"`topology_strategy` keys must be non-empty strings, got {key!r}.")
        if value not in VALID_PLACEMENT_GROUP_STRATEGIES:
            raise ValueError(
                f"Invalid topology strategy {value!r} for label {key!r}. "
                f"Supported strategies are: {VALID_PLACEMENT_GROUP_STRATEGIES}."
            )
        if key != NODE_ID_LABEL_KEY and value != "STRICT_PACK":
            raise ValueError(
                f"Topology strategy {value!r} for label {key!r} is not supported yet; only 'STRICT_PACK' is "
                f"supported for topology labels other than `{NODE_ID_LABEL_KEY}` for now."
            )
    labels = sorted(key for key in topology_strategy if key != NODE_ID_LABEL_KEY)
    if labels:
        # Ray keeps such a group in one value of the label (e.g. one GB200 NVLink domain);
        # raygo's STRICT_PACK already keeps a group's GPUs in one NVLink island, which
        # spans a multi-node NVLink domain.
        raise ValueError(
            f"raygo does not support topology_strategy label {labels[0]!r}: use strategy='STRICT_PACK', "
            "which keeps a group's whole GPUs in one NVLink island (one multi-node NVLink domain on GB200)"
        )


def _node_level_strategy(strategy: Optional[str], topology_strategy: Optional[Dict[str, str]]) -> str:
    """The strategy the group is placed with: Ray's default, PACK, unless one is given."""
    if topology_strategy is not None:
        return topology_strategy.get(NODE_ID_LABEL_KEY, "PACK")
    return strategy if strategy is not None else "PACK"


def _validate_bundles(bundles: Any) -> None:
    if not isinstance(bundles, list):
        raise ValueError(f"Placement group bundles must be a list, got {type(bundles)}.")
    if len(bundles) == 0:
        raise ValueError(
            "Bundles must be a non-empty list of resource dictionaries. "
            'For example: `[{"CPU": 1.0}, {"GPU": 1.0}]`. Got empty list instead.'
        )
    if len(bundles) > MAX_BUNDLES:
        raise ValueError(f"A placement group may have at most {MAX_BUNDLES} bundles, got {len(bundles)}.")
    for index, bundle in enumerate(bundles):
        if (
            not isinstance(bundle, dict)
            or not all(isinstance(k, str) for k in bundle)
            or not all(isinstance(v, (int, float)) for v in bundle.values())
        ):
            raise ValueError(
                "Bundles must be a non-empty list of resource dictionaries. "
                'For example: `[{"CPU": 1.0}, {"GPU": 1.0}]`.'
            )
        if len(bundle) == 0 or all(value == 0 for value in bundle.values()):
            raise ValueError(
                f"Bundles cannot be an empty dictionary or resources with only 0 values. Bundles: {bundles}"
            )
        # Ray passes the rest to its raylets unchecked (and may crash on it); raygo refuses
        # it here with the GCS's own rules and words.
        problem = _resources.check_bundle(bundle)
        if problem is not None:
            field, message = problem
            raise ValueError(f"bundles[{index}]{field}: {message}")


def placement_group(
    bundles: List[Bundle],
    strategy: Optional[str] = None,
    name: str = "",
    lifetime: Optional[str] = None,
    _soft_target_node_id: Optional[str] = None,
    bundle_label_selector: Optional[List[Dict[str, str]]] = None,
    topology_strategy: Optional[Dict[str, str]] = None,
    *,
    topology: Optional[str] = None,
    queue: Optional[str] = None,
    priority: Optional[str] = None,
    max_runtime_s: Optional[int] = None,
) -> PlacementGroup:
    """Asks the GCS for a placement group and returns its handle.

    As Ray's, the driver picks the group's id and the group is placed asynchronously.
    Without ``name``, ``queue``, ``priority`` or ``bundle_label_selector`` a refusal by the
    GCS (a finished job, the store down) is raised by ``ready()`` / ``wait()``: the create
    goes in the background, or, when the driver waited for its previous group and has
    nothing in flight, on the caller's thread (the GCS answers once the group is placed or
    its first attempt failed, at most 200 ms later; a group not placed by then is waited
    for by ``ready()``). With one of them it returns once the GCS accepted
    the group, so that a name already taken, an unknown queue or a selector the GCS cannot
    parse raises here.

    Args:
        bundles: one ``{resource: amount}`` dict per bundle, e.g. ``[{"GPU": 1, "CPU": 4}] * 8``.
            Besides the nodes' resources, Ray's implicit ones pin a bundle:
            ``{"node:<ip>": 0.001}`` to a node with that IP, ``{"node:__internal_head__": 0.001}``
            to the head node.
        strategy: ``"PACK"`` (the default: as few nodes as possible, best effort),
            ``"SPREAD"`` (distinct nodes while they last), ``"STRICT_PACK"`` (one node; with
            whole GPUs, one NVLink island), ``"STRICT_SPREAD"`` (distinct nodes, or wait).
        name: unique among the live groups of the job's namespace; ``""`` for none.
        lifetime: ``None`` (the group dies with this driver's job) or ``"detached"``.
        _soft_target_node_id: Ray's hint (STRICT_PACK only) of a node to prefer; checked as
            Ray checks it, and not used: a hint lets the group go anywhere, so raygo places
            it as any STRICT_PACK group.
        bundle_label_selector: one ``{label: selector}`` dict per bundle, selectors being
            ``"value"``, ``"in(a,b)"``, ``"!value"`` or ``"!in(a,b)"``.
        topology_strategy: Ray's ``{"ray.io/node-id": strategy}``, instead of ``strategy``;
            other topology labels are refused (use ``STRICT_PACK``).
        topology: raygo only: ``"node"`` gives the strategy Ray's plain meaning, by nodes
            alone: ``STRICT_PACK`` one node instead of one NVLink island, ``PACK`` no
            filling of islands first, ``SPREAD`` and ``STRICT_SPREAD`` no preference for
            one scalable unit and the same rails; the group then goes where the fleet's
            fragmentation grows least. For groups that gain nothing from the fabric.
        queue: raygo only, with queues configured on the cluster (``raygo start --head
            --queues``): the queue whose quota the group is charged to (default: the one the
            job's namespace maps to).
        priority: raygo only: the priority class (``"training-high"``, ...; default: the
            queue's).
        max_runtime_s: raygo only: remove the group once it has run (been ``CREATED``) this
            many seconds (Kueue's ``maximumExecutionTimeSeconds``); ``None`` for no limit,
            at most a year. The table row says why it was removed (``removal_reason``).

    Raises:
        ValueError: bad bundles, strategy, lifetime, selector or topology strategy, before
            any RPC; or (with a name, queue, priority or selector) the GCS's refusal (its message names
            the field). A name already taken raises ``PlacementGroupNameConflictError``, both
            a ValueError and a RaySystemError.
        TypeError: a name that is no str.
        ConnectionError: (with a name, queue, priority or selector) the GCS did not answer.
    """
    validate_placement_group(
        bundles, strategy, lifetime, _soft_target_node_id, bundle_label_selector, topology_strategy,
        name=name, topology=topology,
    )
    client = _worker.global_client()
    for field, value in (("queue", queue), ("priority", priority)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{field} must be a str or None, got {type(value).__name__}")
    if max_runtime_s is not None and (isinstance(max_runtime_s, bool) or not isinstance(max_runtime_s, int)):
        raise TypeError(f"max_runtime_s must be an int or None, got {type(max_runtime_s).__name__}")
    if max_runtime_s is not None and max_runtime_s <= 0:
        raise ValueError(f"max_runtime_s must be a positive number of seconds or None, got {max_runtime_s}")
    selectors = bundle_label_selector or [{} for _ in bundles]
    request = pg_pb2.CreatePlacementGroupRequest(
        bundles=[
            pg_pb2.CreatePlacementGroupRequest.BundleSpec(
                resources={k: float(v) for k, v in bundle.items()}, label_selector=selector
            )
            for bundle, selector in zip(bundles, selectors)
        ],
        strategy=_node_level_strategy(strategy, topology_strategy),
        name=name,
        lifetime=lifetime or "",
        topology=topology or "",
        queue=queue or "",
        priority=priority or "",
        max_runtime_s=max_runtime_s or 0,
        # The GCS answers once the group is CREATED or its first attempt failed (in
        # milliseconds): a group that fits needs no second call to be ready.
        wait_first_attempt_ms=_WAIT_FIRST_ATTEMPT_MS,
    )
    bundle_cache = [{k: float(v) for k, v in bundle.items()} for bundle in bundles]
    job_id = bytes.fromhex(client.job_id)
    if len(job_id) != 4:  # pragma: no cover (a GCS that hands out other job ids picks the id)
        info = client.create_placement_group(request)
        pg = PlacementGroup(PlacementGroupID.from_hex(info.placement_group_id), bundle_cache=bundle_cache)
        pg._created = info.state == pg_pb2.PlacementGroupState.CREATED
        return pg
    # As a Ray driver, this one makes the id: 14 random bytes and the job's id.
    pg = PlacementGroup(PlacementGroupID(os.urandom(PlacementGroupID.size() - 4) + job_id), bundle_cache=bundle_cache)
    pg._owner = client
    request.placement_group_id = pg.id.hex()
    if name or queue or priority or bundle_label_selector:
        # The GCS may refuse these (a name taken, an unknown queue, a selector's syntax):
        # raise here, as Ray.
        info = client.create_placement_group(request)
        pg._created = info.state == pg_pb2.PlacementGroupState.CREATED
    else:
        pg._create = client.create_placement_group_async(request)
    return pg


# How long placement_group() lets the GCS wait for a new group's first attempt.
_WAIT_FIRST_ATTEMPT_MS = 1000


def remove_placement_group(placement_group: PlacementGroup) -> None:
    """Removes the group and releases its bundles. Removing an unknown or already removed
    group does nothing.

    The handle ``placement_group()`` returned to this driver is removed without waiting for
    the GCS, which took the group from this driver and takes its removal too: the removal
    rides on the driver's next create, or is sent on its own within 5 ms (after the group's
    create, if that is still in flight), and a failure (the GCS unreachable for 30 s) is
    logged. Every later call of this driver
    (``placement_group_table``, ``get_placement_group``, ``wait``, ``ready``, a new group
    with the same name, ``shutdown``) waits for it first. Any other handle (from
    ``get_placement_group``, unpickled, made from an id) waits for the GCS's answer and
    raises its refusal (another tenant's group).
    """
    if placement_group is None:
        # Ray asserts here; raise the same type without depending on `python -O`.
        raise AssertionError("remove_placement_group needs a PlacementGroup, got None")
    create = placement_group._create
    placement_group._forget_created()
    client = _worker.global_client()
    if placement_group._owner is client and (create is None or create.done()):
        client.remove_placement_group_later(placement_group.id.hex())
    elif placement_group._owner is client:
        client.remove_placement_group_async(placement_group.id.hex(), after=create)
    else:
        client.remove_placement_group(placement_group.id.hex())


def get_placement_group(placement_group_name: str) -> PlacementGroup:
    """Returns the live group with this name in the driver's namespace.

    Raises:
        ValueError: empty name, or no live group has it.
    """
    if not placement_group_name:
        raise ValueError("Please supply a non-empty value to get_placement_group")
    if not isinstance(placement_group_name, str):
        raise TypeError(f"placement_group_name must be a str, got {type(placement_group_name).__name__}")
    info = _worker.global_client().get_named_placement_group(placement_group_name)
    if info is None:
        raise ValueError(f"Failed to look up placement group with name: {placement_group_name}")
    # As Ray's: the bundles are read from the table when needed, zero amounts left out.
    return PlacementGroup(PlacementGroupID.from_hex(info.placement_group_id))


def get_current_placement_group() -> Optional[PlacementGroup]:
    """The group the calling task or actor runs in (the one whose bundle its worker was
    leased from, captured or not), as Ray's; None outside a group and in a driver."""
    if _worker.is_worker():
        pg = _worker.worker_context().placement_group_id
        return PlacementGroup(PlacementGroupID.from_hex(pg)) if pg else None
    return None


def _nonzero(resources: Any) -> Bundle:
    return {name: amount for name, amount in resources.items() if amount != 0}


_SCHEDULING_STATE_NAMES = {
    pg_pb2.SCHEDULING_REMOVED: "REMOVED",
}


def _table_row(info: Any) -> Dict[str, Any]:
    """One group's row, with Ray's keys and raygo's hardware keys."""
    stats = info.stats
    bundles = sorted(info.bundles, key=lambda b: b.bundle_index)
    return {
        "placement_group_id": info.placement_group_id,
        "name": info.name,
        # As Ray's table, zero amounts are left out (bundle_specs keep them as requested).
        "bundles": {b.bundle_index: _nonzero(b.unit_resources) for b in bundles},
        "bundles_to_node_id": {b.bundle_index: b.node_id for b in bundles},
        "strategy": pg_pb2.PlacementStrategy.Name(info.strategy),
        # raygo reports PREPARED (reserved, not yet committed) under its own name.
        "state": pg_pb2.PlacementGroupState.Name(info.state),
        "stats": {
            "end_to_end_creation_latency_ms": stats.end_to_end_creation_latency_ms,
            "scheduling_latency_ms": stats.scheduling_latency_ms,
            "scheduling_attempt": stats.scheduling_attempt,
            "highest_retry_delay_ms": stats.highest_retry_delay_ms,
            "scheduling_state": _SCHEDULING_STATE_NAMES.get(
                stats.scheduling_state, pg_pb2.SchedulingState.Name(stats.scheduling_state)
            ),
        },
        "bundles_to_node_address": {b.bundle_index: b.node_address for b in bundles},
        "bundles_to_gpu_ids": {b.bundle_index: list(b.gpu_ids) for b in bundles},
        "bundles_to_device_uuids": {b.bundle_index: list(b.device_uuids) for b in bundles},
        "bundles_to_cuda_visible_devices": {b.bundle_index: b.cuda_visible_devices for b in bundles},
        "namespace": info.namespace,
        "is_detached": info.is_detached,
        "pending_reason": info.pending_reason,
        "max_runtime_s": info.max_runtime_s,
        "removal_reason": info.removal_reason,
        "pending_reason_code": info.pending_reason_code,
        "preemptions": info.preemptions,
        "last_preemption": (
            PreemptionNotice._from_proto(info.last_preemption) if info.HasField("last_preemption") else None
        ),
    }


def placement_group_table(placement_group: Optional[PlacementGroup] = None) -> Dict[Any, Any]:
    """The placement-group table from the GCS, with Ray's keys.

    With a handle: that group's row, or ``{}`` if the GCS does not know it. Without: every
    group (REMOVED ones included, for an hour) as ``{placement_group_id_hex: row}``.

    A row has Ray's ``placement_group_id``, ``name``, ``bundles`` (index -> resources),
    ``bundles_to_node_id``, ``strategy``, ``state`` (``PENDING``, ``PREPARED``, ``CREATED``,
    ``RESCHEDULING``, ``REMOVED``) and ``stats``; raygo adds, per bundle index,
    ``bundles_to_node_address``, ``bundles_to_gpu_ids``, ``bundles_to_device_uuids`` and
    ``bundles_to_cuda_visible_devices`` (empty for CPU-only bundles and unplaced ones), and
    ``namespace``, ``is_detached``, ``pending_reason`` (why a PENDING group waits),
    ``max_runtime_s`` (0: none), ``removal_reason`` (why a REMOVED group was removed),
    ``pending_reason_code``, ``preemptions`` (how many times it was preempted) and
    ``last_preemption`` (the last ``PreemptionNotice``, or None).
    """
    client = _worker.global_client()
    if placement_group is not None:
        info = client.get_placement_group(placement_group.id.hex())
        return {} if info is None else _table_row(info)
    return {info.placement_group_id: _table_row(info) for info in client.all_placement_groups()}
