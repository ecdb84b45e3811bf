"""Ray's ``ray.util`` for placement groups: ``placement_group``, ``remove_placement_group``,
``get_placement_group``, ``get_current_placement_group``, ``placement_group_table``, and the
``scheduling_strategies`` module.

As in Ray, ``raygo.util.placement_group`` is the function, and the module of the same name
is imported with ``from raygo.util.placement_group import PlacementGroup``.
"""

from raygo._ids import PlacementGroupID
from raygo.util import scheduling_strategies
from raygo.util.placement_group import (
    PlacementGroup,
    get_current_placement_group,
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)

__all__ = [
    "PlacementGroup",
    "PlacementGroupID",
    "get_current_placement_group",
    "get_placement_group",
    "placement_group",
    "placement_group_table",
    "remove_placement_group",
    "scheduling_strategies",
]
