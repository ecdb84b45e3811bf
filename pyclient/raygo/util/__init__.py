"""Ray's ``ray.util`` for placement groups: ``placement_group``, ``remove_placement_group``,
``get_placement_group``, ``get_current_placement_group``, ``placement_group_table``, ``get_node_ip_address``,
``get_node_instance_id``, and the ``scheduling_strategies`` and ``state`` modules.

As in Ray, ``raygo.util.placement_group`` is the function, and the module of the same name
is imported with ``from raygo.util.placement_group import PlacementGroup``.
"""

import os

from raygo._ids import PlacementGroupID
from raygo._worker import get_node_ip_address
from raygo.util import scheduling_strategies, state
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
    "get_node_instance_id",
    "get_node_ip_address",
    "get_placement_group",
    "placement_group",
    "placement_group_table",
    "remove_placement_group",
    "scheduling_strategies",
    "state",
]


def get_node_instance_id() -> str:
    """The cloud instance id of this machine from ``RAY_CLOUD_INSTANCE_ID`` ("" unset), as Ray's."""
    return os.getenv("RAY_CLOUD_INSTANCE_ID", "")
