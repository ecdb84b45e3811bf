"""Scheduling strategies with Ray's names (``ray.util.scheduling_strategies``).

raygo's Python client runs no tasks or actors, so a strategy is a description that a
program passes on (for example to the Go SDK's actors, or to its own launcher that reads
``placement_group_table`` for where each bundle lives). Unlike Ray, which checks the bundle
index when a task is submitted, raygo checks it here, when the strategy is made.
"""

from __future__ import annotations

from typing import Optional

from raygo.util.placement_group import PlacementGroup

__all__ = ["PlacementGroupSchedulingStrategy"]


class PlacementGroupSchedulingStrategy:
    """Run inside a placement group: in one bundle, or in any (index -1).

    Args:
        placement_group: the group; None (or the empty group) means no group.
        placement_group_bundle_index: the bundle, 0 to bundle_count - 1, or -1 for any.
        placement_group_capture_child_tasks: whether child tasks inherit the group.

    Raises:
        ValueError: the index is not an int in -1 .. bundle_count - 1, or is set without a
            group.
    """

    def __init__(
        self,
        placement_group: Optional[PlacementGroup],
        placement_group_bundle_index: int = -1,
        placement_group_capture_child_tasks: Optional[bool] = None,
    ) -> None:
        index = placement_group_bundle_index
        if isinstance(index, bool) or not isinstance(index, int):
            raise ValueError(f"placement_group_bundle_index must be an int, got {index!r}")
        if placement_group is None or placement_group.is_empty:
            if index != -1:
                raise ValueError("If placement group is not set, the value of bundle index must be -1.")
        else:
            count = placement_group.bundle_count
            if index >= count or index < -1:
                raise ValueError(
                    f"placement group bundle index {index} is invalid. "
                    f"Valid placement group indexes: 0 to {count - 1}."
                )
        self.placement_group = placement_group
        self.placement_group_bundle_index = index
        self.placement_group_capture_child_tasks = placement_group_capture_child_tasks

    def __repr__(self) -> str:
        return (
            f"PlacementGroupSchedulingStrategy(placement_group={self.placement_group!r}, "
            f"placement_group_bundle_index={self.placement_group_bundle_index}, "
            f"placement_group_capture_child_tasks={self.placement_group_capture_child_tasks})"
        )
