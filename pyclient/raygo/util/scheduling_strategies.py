"""Scheduling strategies with Ray's names (``ray.util.scheduling_strategies``).

``@raygo.remote`` tasks take ``PlacementGroupSchedulingStrategy`` and
``NodeAffinitySchedulingStrategy`` (``scheduling_strategy=``) and refuse
``NodeLabelSchedulingStrategy``; a program may also pass a strategy on to its own launcher
that reads ``placement_group_table`` for where each bundle lives. Unlike Ray, which checks
the bundle index when a task is submitted, raygo checks it here, when the strategy is made.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from raygo.util.placement_group import PlacementGroup

__all__ = [
    "DoesNotExist",
    "Exists",
    "In",
    "NodeAffinitySchedulingStrategy",
    "NodeLabelSchedulingStrategy",
    "NotIn",
    "PlacementGroupSchedulingStrategy",
]


class PlacementGroupSchedulingStrategy:
    """Run inside a placement group: in one bundle, or in any (index -1).

    Args:
        placement_group: the group; None (or the empty group) means no group.
        placement_group_bundle_index: the bundle, 0 to bundle_count - 1, or -1 for any.
        placement_group_capture_child_tasks: whether child tasks inherit the group.

    Raises:
        TypeError: the index is not an int.
        ValueError: the index is not in -1 .. bundle_count - 1, or is set without a group.
    """

    def __init__(
        self,
        placement_group: Optional[PlacementGroup],
        placement_group_bundle_index: int = -1,
        placement_group_capture_child_tasks: Optional[bool] = None,
    ) -> None:
        index = placement_group_bundle_index
        if isinstance(index, bool) or not isinstance(index, int):
            # Ray fails comparing it with the bundle count: a TypeError.
            raise TypeError(f"placement_group_bundle_index must be an int, got {index!r}")
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


class NodeAffinitySchedulingStrategy:
    """Run on one node (Ray's): its hex id, and whether another node may do when it cannot.

    Tasks run on that node; with ``soft`` another node may do when it is gone or full.
    """

    def __init__(
        self,
        node_id: str,
        soft: bool,
        _spill_on_unavailable: bool = False,
        _fail_on_unavailable: bool = False,
    ) -> None:
        self.node_id = node_id
        self.soft = soft
        self._spill_on_unavailable = _spill_on_unavailable
        self._fail_on_unavailable = _fail_on_unavailable

    def __repr__(self) -> str:
        return f"NodeAffinitySchedulingStrategy(node_id={self.node_id!r}, soft={self.soft})"


class In:
    """The label's value is one of these (Ray's label match operator)."""

    def __init__(self, *values: str) -> None:
        _check_operator_values(values, "In")
        self.values = list(values)


class NotIn:
    """The label's value is none of these (Ray's label match operator)."""

    def __init__(self, *values: str) -> None:
        _check_operator_values(values, "NotIn")
        self.values = list(values)


class Exists:
    """The node has the label (Ray's label match operator)."""


class DoesNotExist:
    """The node does not have the label (Ray's label match operator)."""


LabelMatchExpressionsT = Dict[str, Union[In, NotIn, Exists, DoesNotExist]]


class NodeLabelSchedulingStrategy:
    """Run on nodes whose labels match (Ray's): ``hard`` must match, ``soft`` is preferred.

    ``NodeLabelSchedulingStrategy({"zone": In("a", "b"), "gpu": Exists()})``.
    """

    def __init__(self, hard: LabelMatchExpressionsT, *, soft: Optional[LabelMatchExpressionsT] = None) -> None:
        self.hard = _expressions(hard, "hard")
        self.soft = _expressions(soft, "soft")
        if not (self.hard or self.soft):
            raise ValueError("The `hard` and `soft` parameter of NodeLabelSchedulingStrategy cannot both be empty.")


def _check_operator_values(values: Any, name: str) -> None:
    if not values:
        raise ValueError(f"The variadic parameter of the {name} operator must be a non-empty tuple: e.g. {name}(\"value1\").")
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"Type of value in position {values.index(value)} for the {name} operator must be str "
                             f"(e.g. {name}(\"value1\")) but got {value!r} of type {type(value)}.")


def _expressions(expressions: Optional[LabelMatchExpressionsT], param: str) -> List[Any]:
    if expressions is None:
        return []
    if not isinstance(expressions, dict):
        raise ValueError(f'The {param} parameter must be a map (e.g. {{"key1": In("value1")}}) but got type {type(expressions)}.')
    out = []
    for key, operator in expressions.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"Key {key!r} of the {param} parameter must be a non-empty str.")
        if not isinstance(operator, (In, NotIn, Exists, DoesNotExist)):
            raise ValueError(f"The value of key {key!r} in the {param} parameter must be In, NotIn, Exists or DoesNotExist, got {operator!r}.")
        out.append((key, operator))
    return out
