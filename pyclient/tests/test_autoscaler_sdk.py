"""raygo.autoscaler.sdk.request_resources against a real cluster: the constraint the GCS
keeps (read back through AutoscalerStateService.GetClusterResourceState), replace and
clear, and Ray's argument checks."""

from __future__ import annotations

from typing import Dict, Iterator, List, Tuple

import grpc
import pytest

import raygo
from raygo._proto import autoscaler_pb2, autoscaler_pb2_grpc
from raygo._version import PROTOCOL_METADATA_KEY
from raygo.autoscaler.sdk import request_resources

from conftest import Cluster


def constraint(cluster: Cluster) -> List[Tuple[Dict[str, float], Dict[str, str], int]]:
    """The cluster's request_resources constraint as (bundle, selector, count) rows, read
    with a raw stub as an autoscaler reads it."""
    with grpc.insecure_channel(cluster.address) as channel:
        stub = autoscaler_pb2_grpc.AutoscalerStateServiceStub(channel)
        reply = stub.GetClusterResourceState(
            autoscaler_pb2.GetClusterResourceStateRequest(), metadata=[(PROTOCOL_METADATA_KEY, "1")], timeout=10
        )
    constraints = reply.cluster_resource_state.cluster_resource_constraints
    assert len(constraints) <= 1
    if not constraints:
        return []
    return [
        (dict(r.request.resources_bundle), dict(r.request.label_selector), r.count)
        for r in constraints[0].resource_requests
    ]


@pytest.fixture
def connected(driver: Cluster) -> Iterator[Cluster]:
    """A driver; the constraint is cleared afterwards so other tests see none."""
    yield driver
    request_resources()


def test_request_resources_is_visible_replaced_and_cleared(connected: Cluster) -> None:
    request_resources(num_cpus=3, bundles=[{"GPU": 1, "CPU": 4}, {"CPU": 1}])
    assert constraint(connected) == [({"CPU": 1.0}, {}, 4), ({"GPU": 1.0, "CPU": 4.0}, {}, 1)]

    # Each call replaces the last.
    request_resources(
        bundles=[{"CPU": 2}, {"CPU": 2}],
        bundle_label_selectors=[{"ray.io/accelerator-type": "in(A100,H100)"}, {"ray.io/accelerator-type": "in(A100,H100)"}],
    )
    assert constraint(connected) == [({"CPU": 2.0}, {"ray.io/accelerator-type": "in(A100,H100)"}, 2)]

    # An empty call clears it.
    request_resources()
    assert constraint(connected) == []


@pytest.mark.parametrize(
    "kwargs, error, named",
    [
        ({"num_cpus": 1.5}, TypeError, "num_cpus"),
        ({"num_cpus": True}, TypeError, "num_cpus"),
        ({"num_cpus": -1}, ValueError, "num_cpus"),
        ({"bundles": {"CPU": 1}}, TypeError, "bundles"),
        ({"bundles": [["CPU", 1]]}, TypeError, "bundles[0]"),
        ({"bundles": [{"CPU": "1"}]}, TypeError, "bundles[0]['CPU']"),
        ({"bundles": [{"CPU": True}]}, TypeError, "bundles[0]['CPU']"),
        ({"bundles": [{1: 1}]}, TypeError, "bundles[0]"),
        ({"bundle_label_selectors": [{}]}, ValueError, "bundle_label_selectors"),
        ({"bundles": [{"CPU": 1}], "bundle_label_selectors": [{}, {}]}, ValueError, "bundle_label_selectors"),
        ({"bundles": [{"CPU": 1}], "bundle_label_selectors": [{"zone": 1}]}, ValueError, "bundle_label_selectors[0]"),
        # Checked by the GCS, which names the field.
        ({"bundles": [{"CPU": -1}]}, ValueError, "resources_bundle"),
        ({"bundles": [{"CPU": 1}], "bundle_label_selectors": [{"bad key!": "x"}]}, ValueError, "label_selector"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(connected: Cluster, kwargs: dict, error: type, named: str) -> None:
    request_resources(num_cpus=2)
    with pytest.raises(error) as raised:
        request_resources(**kwargs)
    assert named in str(raised.value)
    # A refused call changes nothing.
    assert constraint(connected) == [({"CPU": 1.0}, {}, 2)]


def test_the_ray_import_path_works() -> None:
    import raygo.autoscaler.sdk as sdk

    assert sdk.request_resources is request_resources
    assert raygo.autoscaler.sdk.request_resources is request_resources
