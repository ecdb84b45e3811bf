"""Which placement group a task or actor runs in when its options name none: Ray's
``placement_group_capture_child_tasks`` rules (``ray.util.placement_group.
_configure_placement_group_based_on_context`` and the ``_remote`` of Ray's remote functions
and actor classes), shared by tasks (raygo._remote) and actors (raygo._actor).

- ``scheduling_strategy`` other than ``None`` or a ``PlacementGroupSchedulingStrategy``
  (``"DEFAULT"``, ``"SPREAD"``, node affinity) is used as given: nothing is captured.
- Otherwise the group, bundle index and capture flag come from the strategy, or from the
  legacy options ``placement_group`` (default ``"default"``), ``placement_group_bundle_index``
  (default -1) and ``placement_group_capture_child_tasks``. An unset capture flag is the
  caller's: a task or actor that captures passes it on to what it submits.
- ``placement_group="default"`` with capture on is the caller's group (none in a driver,
  or in a task outside any group); without capture, or an explicit ``None``, is no group.
- No group: ``DEFAULT`` (a bundle index other than -1 is then a ValueError, as in Ray).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from raygo._proto import actor_pb2

# Ray's legacy placement options, built for tasks and actors alike.
LEGACY_OPTIONS = frozenset({"placement_group", "placement_group_bundle_index", "placement_group_capture_child_tasks"})


def check_legacy_options(options: Dict[str, Any]) -> None:
    """Checks the legacy options' types, and that ``placement_group`` does not come with
    ``scheduling_strategy`` (Ray refuses the two together)."""
    from raygo.util.placement_group import PlacementGroup

    group = options.get("placement_group", "default")
    if not (group is None or group == "default" or isinstance(group, PlacementGroup)):
        raise TypeError(f"The option 'placement_group' must be a PlacementGroup, None or 'default', got {group!r}")
    index = options.get("placement_group_bundle_index", -1)
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"The option 'placement_group_bundle_index' must be an int, got {index!r}")
    capture = options.get("placement_group_capture_child_tasks")
    if capture is not None and not isinstance(capture, bool):
        raise TypeError(f"The option 'placement_group_capture_child_tasks' must be a bool or None, got {capture!r}")
    if group not in ("default", None) and options.get("scheduling_strategy") is not None:
        raise ValueError("Placement groups should be specified via the scheduling_strategy option. "
                         "The placement_group option is deprecated.")


def _caller() -> "tuple[Optional[str], bool]":
    """The calling worker's placement group (hex) and capture flag; (None, False) in a driver."""
    from raygo import _worker

    if not _worker.is_worker():
        return None, False
    context = _worker.worker_context()
    return context.placement_group_id, context.capture_child_tasks


def scheduling_strategy(options: Dict[str, Any]) -> Any:
    """The wire SchedulingStrategy of a task or actor with these (checked) options, as
    submitted from this process, with its ``label_selector`` option."""
    from raygo._labels import add_label_selector, check_label_selector

    return add_label_selector(_placement(options), check_label_selector(options.get("label_selector")))


def _placement(options: Dict[str, Any]) -> Any:
    from raygo._remote import _wire_strategy
    from raygo.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    strategy = options.get("scheduling_strategy")
    if strategy is not None and not isinstance(strategy, PlacementGroupSchedulingStrategy):
        return _wire_strategy(strategy)
    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        group: Any = strategy.placement_group
        index = strategy.placement_group_bundle_index
        capture = strategy.placement_group_capture_child_tasks
    else:
        group = options.get("placement_group", "default")
        index = options.get("placement_group_bundle_index", -1)
        capture = options.get("placement_group_capture_child_tasks")
    caller_group, caller_captures = _caller()
    if capture is None:
        capture = caller_captures
    if group == "default":
        group_id = caller_group if capture else None
    else:
        group_id = None if group is None or group.is_empty else group.id.hex()
    if group_id is None:
        if index != -1:
            raise ValueError("If placement group is not set, the value of bundle index must be -1.")
        return actor_pb2.SchedulingStrategy(kind=actor_pb2.SCHEDULING_STRATEGY_DEFAULT)
    return actor_pb2.SchedulingStrategy(
        kind=actor_pb2.SCHEDULING_STRATEGY_PLACEMENT_GROUP, placement_group_id=group_id, bundle_index=index,
        placement_group_capture_child_tasks=bool(capture),
    )
