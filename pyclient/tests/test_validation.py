"""Bad input: refused with ValueError before any RPC (client checks, Ray's messages), or with
the GCS's own message (server checks), and nothing created either way; arguments of the wrong
type raise TypeError where Ray does.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterator

import pytest

import raygo
from raygo.exceptions import PlacementGroupNameConflictError, RaySystemError
from raygo.util import placement_group, placement_group_table
from raygo.util.placement_group import PlacementGroup
from raygo.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from conftest import Cluster

BAD_ARGUMENTS = [
    pytest.param(dict(bundles={"CPU": 1}), "must be a list", id="bundles-not-a-list"),
    pytest.param(dict(bundles=[]), "non-empty list", id="no-bundles"),
    pytest.param(dict(bundles=[{}]), "empty dictionary", id="empty-bundle"),
    pytest.param(dict(bundles=[{"CPU": 0, "GPU": 0}]), "only 0 values", id="all-zero"),
    pytest.param(dict(bundles=[{"CPU": "1"}]), "resource dictionaries", id="string-amount"),
    pytest.param(dict(bundles=[{1: 1}]), "resource dictionaries", id="non-string-name"),
    pytest.param(dict(bundles=[["CPU", 1]]), "resource dictionaries", id="bundle-not-a-dict"),
    pytest.param(dict(bundles=[{"CPU": -1}]), "finite number >= 0", id="negative"),
    pytest.param(dict(bundles=[{"CPU": math.nan}]), "finite number >= 0", id="nan"),
    pytest.param(dict(bundles=[{"CPU": math.inf}]), "finite number >= 0", id="infinite"),
    pytest.param(dict(bundles=[{"": 1}]), "resource name", id="empty-resource-name"),
    pytest.param(dict(bundles=[{"x" * 257: 1}]), "resource name", id="long-resource-name"),
    pytest.param(dict(bundles=[{"CPU": 1}] * 10_001), "at most 10000", id="too-many-bundles"),
    pytest.param(dict(bundles=[{"CPU": 1}], strategy="PACKED"), "Invalid placement group strategy", id="strategy"),
    pytest.param(dict(bundles=[{"CPU": 1}], strategy="pack"), "Invalid placement group strategy", id="strategy-case"),
    pytest.param(dict(bundles=[{"CPU": 1}], lifetime="forever"), "lifetime", id="lifetime"),
    pytest.param(dict(bundles=[{"CPU": 1}], bundle_label_selector=[{}, {}]), "length", id="selector-count"),
    pytest.param(dict(bundles=[{"CPU": 1}], bundle_label_selector=[]), "length", id="selector-empty-list"),
    pytest.param(dict(bundles=[{"CPU": 1}], bundle_label_selector={"zone": "a"}), "must be a list", id="selector-type"),
    pytest.param(dict(bundles=[{"CPU": 1}], bundle_label_selector=[{"zone": 1}]), "string dictionary", id="selector-value"),
    pytest.param(dict(bundles=[{"CPU": 1}], topology="rack"), "topology", id="topology"),
    pytest.param(dict(bundles=[{"CPU": 1}], _soft_target_node_id="ab" * 28), "only works with STRICT_PACK",
                 id="soft-target-not-strict-pack"),
    pytest.param(dict(bundles=[{"CPU": 1}], strategy="STRICT_PACK", _soft_target_node_id="zz"),
                 "Invalid hex ID of _soft_target_node_id", id="soft-target-bad-hex"),
    pytest.param(dict(bundles=[{"CPU": 1}], strategy="PACK", topology_strategy={"ray.io/node-id": "PACK"}),
                 "cannot both be specified", id="strategy-and-topology-strategy"),
    pytest.param(dict(bundles=[{"CPU": 1}], topology_strategy=["PACK"]), "must be a dict", id="topology-strategy-type"),
    pytest.param(dict(bundles=[{"CPU": 1}], topology_strategy={"ray.io/node-id": "PACKED"}),
                 "Invalid topology strategy", id="topology-strategy-value"),
    pytest.param(dict(bundles=[{"CPU": 1}], topology_strategy={"ray.io/gpu-domain": "SPREAD"}),
                 "only 'STRICT_PACK' is supported", id="topology-label-not-strict-pack"),
    pytest.param(dict(bundles=[{"CPU": 1}], topology_strategy={"ray.io/gpu-domain": "STRICT_PACK"}),
                 "raygo does not support topology_strategy label 'ray.io/gpu-domain'", id="topology-label"),
]


@pytest.fixture
def no_rpc(driver: Cluster) -> Iterator[None]:
    """Makes any RPC of the client fail the test (until the driver's own clean-up)."""
    client = raygo._worker.global_client()

    def forbidden(*_: Any, **__: Any) -> None:
        pytest.fail("an RPC was made for bad input")

    client.call = forbidden  # type: ignore[method-assign]
    yield
    del client.call


@pytest.mark.parametrize("kwargs, message", BAD_ARGUMENTS)
def test_bad_arguments_raise_before_any_rpc(no_rpc: None, kwargs: Dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        placement_group(**kwargs)


def test_bad_input_creates_nothing(driver: Cluster) -> None:
    before = set(placement_group_table())
    for param in BAD_ARGUMENTS:
        with pytest.raises(ValueError):
            placement_group(**param.values[0])
    assert set(placement_group_table()) == before


def test_server_side_refusals_are_value_errors_with_the_servers_message(driver: Cluster) -> None:
    before = set(placement_group_table())
    # Label selector syntax and amount precision are checked by the GCS, naming the field.
    with pytest.raises(ValueError, match=r"bundle_label_selector\[0\]"):
        placement_group([{"CPU": 1}], bundle_label_selector=[{"zone": "in(a,"}])
    with pytest.raises(ValueError, match=r"bundles\[0\]"):
        placement_group([{"CPU": 0.00001}])
    assert set(placement_group_table()) == before


def test_taken_name_is_a_value_error_and_a_system_error(driver: Cluster) -> None:
    first = placement_group([{"CPU": 1}], name="only-one")
    with pytest.raises(ValueError, match="only-one.*already exists") as refused:
        placement_group([{"CPU": 1}], name="only-one")
    assert isinstance(refused.value, RaySystemError)  # what Ray raises for it
    assert isinstance(refused.value, PlacementGroupNameConflictError)
    assert raygo.util.get_placement_group("only-one") == first


def test_scheduling_strategy_checks_the_bundle_index(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1}, {"CPU": 1}])
    for index in (-1, 0, 1):
        strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=index)
        assert strategy.placement_group is pg and strategy.placement_group_bundle_index == index
    assert PlacementGroupSchedulingStrategy(pg).placement_group_capture_child_tasks is None
    for index in (2, -2):
        with pytest.raises(ValueError, match=f"bundle index {index} is invalid. Valid placement group indexes: 0 to 1"):
            PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=index)
    with pytest.raises(TypeError, match="must be an int"):
        PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index="0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be -1"):
        PlacementGroupSchedulingStrategy(None, placement_group_bundle_index=0)
    with pytest.raises(ValueError, match="must be -1"):
        PlacementGroupSchedulingStrategy(PlacementGroup.empty(), placement_group_bundle_index=0)


def test_wrong_types_are_type_errors_as_in_ray(no_rpc: None) -> None:
    with pytest.raises(TypeError, match="name"):
        placement_group([{"CPU": 1}], name=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fallback_strategy"):  # not a keyword of Ray 2.60's placement_group
        placement_group([{"CPU": 1}], fallback_strategy=[])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="placement_group_name"):
        raygo.util.get_placement_group(3)  # type: ignore[arg-type]
    pg = PlacementGroup(raygo.PlacementGroupID.from_random())
    with pytest.raises(TypeError, match="timeout_seconds"):
        pg.wait("soon")  # type: ignore[arg-type]
    ref = PlacementGroup.empty().ready()
    with pytest.raises(TypeError, match="num_returns"):
        raygo.wait([ref], num_returns="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timeout"):
        raygo.get(ref, timeout="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="address"):
        raygo._worker.resolve_address(3)  # type: ignore[arg-type]


def test_negative_timeouts_behave_as_in_ray(driver: Cluster) -> None:
    waiting = placement_group([{"CPU": 1000}])
    # pg.wait: a negative timeout waits no time.
    assert waiting.wait(-1) is False
    # get: a negative timeout waits as long as it takes (here: for a ready group).
    created = placement_group([{"CPU": 1}])
    assert raygo.get(created.ready(), timeout=-1) == created
    # wait: refused, as Ray refuses it.
    with pytest.raises(ValueError, match="nonnegative"):
        raygo.wait([waiting.ready()], timeout=-1)
