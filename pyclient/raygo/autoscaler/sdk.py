"""Ray's ``ray.autoscaler.sdk.request_resources`` on a raygo cluster.

``from raygo.autoscaler.sdk import request_resources`` replaces
``from ray.autoscaler.sdk import request_resources``. The request goes to the GCS
(AutoscalerStateService.RequestClusterResourceConstraint), which keeps it until the next
call; the autoscaler reads it from there.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from raygo._proto import autoscaler_pb2
from raygo._worker import global_client

__all__ = ["request_resources"]


def request_resources(
    num_cpus: Optional[int] = None,
    bundles: Optional[List[Dict[str, float]]] = None,
    bundle_label_selectors: Optional[List[Dict[str, str]]] = None,
) -> None:
    """Asks the autoscaler to scale the cluster so that it can hold these resources at
    once, bypassing its upscaling speed; running work counts toward them.

    Each call replaces the previous one; a call without arguments (or with
    ``num_cpus=0`` and no bundles) clears it.

    Args:
        num_cpus: adds this many ``{"CPU": 1}`` bundles.
        bundles: resource shapes that must fit at once, e.g. ``[{"GPU": 1, "CPU": 4}]``.
        bundle_label_selectors: one label selector per bundle (Ray's syntax: ``"value"``,
            ``"in(a,b)"``, ``"!value"``, ``"!in(a,b)"``); ``{}`` for a bundle without one.

    Raises:
        TypeError: ``num_cpus`` is not an int, or ``bundles`` is not a list of dicts of
            str to numbers.
        ValueError: ``bundle_label_selectors`` without ``bundles``, of another length, or
            not string dicts; or the GCS refused a bundle (the message names it).
    """
    if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int)):
        raise TypeError(f"num_cpus should be of type int, got {type(num_cpus).__name__}")
    if num_cpus is not None and num_cpus < 0:
        raise ValueError(f"num_cpus should be >= 0, got {num_cpus}")
    if bundles is not None:
        if not isinstance(bundles, list):
            raise TypeError(f"bundles should be of type List, got {type(bundles).__name__}")
        for i, bundle in enumerate(bundles):
            if not isinstance(bundle, dict):
                raise TypeError(f"bundles[{i}]: each bundle should be a Dict, got {type(bundle).__name__}")
            for key, value in bundle.items():
                if not isinstance(key, str):
                    raise TypeError(f"bundles[{i}]: each bundle key should be str, got {key!r}")
                # bool is an int: {"CPU": True} must not mean {"CPU": 1}.
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise TypeError(
                        f"bundles[{i}][{key!r}]: each bundle value should be a number (int or float), got {value!r}"
                    )
    if bundle_label_selectors is not None:
        if bundles is None:
            raise ValueError("bundle_label_selectors: `bundles` must be provided when `bundle_label_selectors` is specified")
        if not isinstance(bundle_label_selectors, list) or len(bundle_label_selectors) != len(bundles):
            raise ValueError(
                "bundle_label_selectors: must be a list with one label selector per bundle "
                f"({len(bundles)} bundles)"
            )
        for i, selector in enumerate(bundle_label_selectors):
            if not isinstance(selector, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in selector.items()
            ):
                raise ValueError(
                    f"bundle_label_selectors[{i}]: a label selector is a dict of str to str, "
                    'e.g. {"ray.io/accelerator-type": "in(A100,H100)"}'
                )

    client = global_client()
    client.request_cluster_resource_constraint(_constraint(num_cpus or 0, bundles or [], bundle_label_selectors))


def _constraint(
    num_cpus: int, bundles: List[Dict[str, float]], selectors: Optional[List[Dict[str, str]]]
) -> "autoscaler_pb2.ClusterResourceConstraint":
    """The wire constraint: identical bundles (same resources and selector) counted once,
    in the order they first appear."""
    shapes: Dict[Tuple[Any, ...], "autoscaler_pb2.ResourceRequestByCount"] = {}
    constraint = autoscaler_pb2.ClusterResourceConstraint()

    def add(bundle: Dict[str, float], selector: Dict[str, str], count: int) -> None:
        key = (tuple(sorted((k, float(v)) for k, v in bundle.items())), tuple(sorted(selector.items())))
        shape = shapes.get(key)
        if shape is not None:
            shape.count += count
            return
        shape = constraint.resource_requests.add(count=count)
        shape.request.resources_bundle.update({k: float(v) for k, v in bundle.items()})
        shape.request.label_selector.update(selector)
        shapes[key] = shape

    if num_cpus > 0:
        add({"CPU": 1}, {}, num_cpus)
    for i, bundle in enumerate(bundles):
        add(bundle, selectors[i] if selectors else {}, 1)
    return constraint
