"""The example cluster YAMLs (examples/autoscaler) pass Ray 2.60's schema check, the one
`ray up` runs (tests/compat/testdata/ray-schema.json, Ray's file unmodified), so one file
serves both Ray and raygo. raygo's own check of the same files is Go's
(autoscaler/clusterconfig)."""

from __future__ import annotations

import json
import pathlib

import jsonschema
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "tests/compat/testdata/ray-schema.json").read_text())
EXAMPLES = sorted((ROOT / "examples/autoscaler").glob("*.yaml"))

MINIMAL = {
    "cluster_name": "c",
    "provider": {"type": "fake_multinode"},
    "head_node_type": "head",
    "available_node_types": {"head": {"node_config": {}, "resources": {"CPU": 1}}},
}


def test_examples_found() -> None:
    assert len(EXAMPLES) >= 3, EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_passes_ray_schema(path: pathlib.Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text()), SCHEMA)


def test_minimal_passes_ray_schema() -> None:
    jsonschema.validate(MINIMAL, SCHEMA)


@pytest.mark.parametrize(
    "change",
    [
        {"colour": "blue"},  # unknown top-level key
        {"available_node_types": {"head": {"node_config": {}, "resources": {}, "min_worker": 1}}},
        {"available_node_types": {"head": {"node_config": {}, "resources": {"GPU": -1}}}},
        {"available_node_types": {"head": {"node_config": {}, "resources": {"CPU": 0.5}}}},
        {"provider": {"region": "us-west-2"}},  # provider.type is required
    ],
    ids=["unknown-top-level-key", "unknown-node-type-key", "negative-resource", "fractional-resource", "no-provider-type"],
)
def test_bad_config_fails_ray_schema(change: dict) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**MINIMAL, **change}, SCHEMA)
