"""The client's bundle rules are the GCS's: both run internal/resources/testdata/bundle_rules.json."""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any, Dict

import pytest

from raygo import _resources
from raygo.util.placement_group import validate_placement_group

RULES = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "internal/resources/testdata/bundle_rules.json").read_text()
)
WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _bundle(case: Dict[str, Any]) -> Dict[str, float]:
    return {name: WORDS[value] if isinstance(value, str) else value for name, value in case["bundle"].items()}


def test_limits_and_mig_profiles_match_the_gcs() -> None:
    assert _resources.MAX_RESOURCE_NAME_BYTES == RULES["max_name_bytes"]
    assert _resources.MAX_AMOUNT == RULES["max_amount"]
    assert _resources.MIG_PROFILE_NAMES == set(RULES["mig_profiles"])
    assert _resources.MAX_NAME_BYTES == RULES["max_name_bytes_gcs"]


@pytest.mark.parametrize("case", RULES["cases"], ids=[c["name"] for c in RULES["cases"]])
def test_bundle_rule(case: Dict[str, Any]) -> None:
    bundle = _bundle(case)
    problem = _resources.check_bundle(bundle)
    if case["error"] is None:
        assert problem is None
        validate_placement_group([bundle])
        return
    assert problem is not None, "accepted, the GCS refuses it"
    field, message = problem
    assert field == case["error"]["field"]
    for words in case["error"]["contains"]:
        assert words in message
    with pytest.raises(ValueError) as refused:
        validate_placement_group([{"CPU": 1}, bundle])
    # Ray's own words come first for the bundles Ray itself refuses (only zeros).
    if "at least one resource" not in case["error"]["contains"]:
        assert str(refused.value).startswith("bundles[1]" + field + ": ")


def test_names_are_bounded_as_the_gcs_bounds_them() -> None:
    assert _resources.check_name("n" * _resources.MAX_NAME_BYTES) is None
    assert _resources.check_name("n" * (_resources.MAX_NAME_BYTES + 1)) == "must be at most 1024 bytes, got 1025"
    assert _resources.check_name("a\x00b") == "must not contain a NUL byte"
    with pytest.raises(ValueError, match="name: must be at most 1024 bytes"):
        validate_placement_group([{"CPU": 1}], name="n" * 1025)
