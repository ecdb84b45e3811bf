"""The rules of one placement-group bundle, as the GCS applies them (Go: internal/resources).

The client checks them before any RPC so that a bad bundle fails where it was written; the
GCS checks them again. Both sides run the cases of internal/resources/testdata/bundle_rules.json
in their tests (pyclient/tests/test_resource_rules.py), which keeps the two in step.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Tuple

MAX_RESOURCE_NAME_BYTES = 256
# Names, namespaces and KV keys the GCS stores are at most this long, without NUL bytes
# (README, "Limits"; Go: gcs/limits.go; both tests read bundle_rules.json).
MAX_NAME_BYTES = 1024
# The largest amount: amounts are exact multiples of 1/10000 in a signed 64-bit integer.
MAX_AMOUNT = float((2**63 - 1) // 10_000 - 1)
# Amounts are kept in units of 1/10000 (Ray's FixedPoint), rounded to the nearest unit.
AMOUNT_SCALE = 10_000
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
# Every profile name of the GPU models raygo carves (A100-40GB, A100-80GB, H100-80GB,
# H200-141GB), from NVIDIA's MIG User Guide.
MIG_PROFILE_NAMES = frozenset(
    {
        "1g.5gb", "1g.5gb+me", "1g.10gb", "1g.10gb+me", "1g.18gb", "1g.18gb+me", "1g.20gb",
        "1g.35gb", "2g.10gb", "2g.20gb", "2g.35gb", "3g.20gb", "3g.40gb", "3g.71gb",
        "4g.20gb", "4g.40gb", "4g.71gb", "7g.40gb", "7g.80gb", "7g.141gb",
    }
)  # fmt: skip


def resource_field(name: str) -> str:
    """The field path of one resource in a bundle, as the GCS prints it: ``["GPU"]``."""
    shown = name if len(name) <= 40 else name[:40] + "…"
    return '["' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"]'


def _units(value: float) -> int:
    """A valid (finite, >= 0, at most MAX_AMOUNT) amount in units of 1/AMOUNT_SCALE,
    rounded half away from zero as the GCS rounds."""
    return int(math.floor(value * AMOUNT_SCALE + 0.5))


def _mig_profile_name(resource: str) -> str:
    name = resource[len(MIG_RESOURCE_PREFIX):]
    return name[: -len(".me")] + "+me" if name.endswith(".me") else name


def check_bundle(bundle: Mapping[str, float]) -> Optional[Tuple[str, str]]:
    """Returns ``None`` for a valid bundle, else ``(field, problem)``: the field under the
    bundle (``'["GPU"]'``, or ``""`` for the bundle as a whole) and what is wrong with it.

    ``bundle`` maps names (str) to amounts (int or float); types are the caller's to check.
    """
    mig_devices = 0
    for name in sorted(bundle):
        value = bundle[name]
        if not name:
            return resource_field(name), "resource name must not be empty"
        if len(name.encode()) > MAX_RESOURCE_NAME_BYTES:
            return resource_field(name), (
                f"resource name must be at most {MAX_RESOURCE_NAME_BYTES} bytes, got {len(name.encode())}"
            )
        if not math.isfinite(value) or value < 0:
            return resource_field(name), f"amount must be a finite number >= 0, got {value!r}"
        if value > MAX_AMOUNT:
            return resource_field(name), f"amount must be at most {MAX_AMOUNT:.0f}, got {value!r}"
    units = {name: _units(value) for name, value in bundle.items()}
    gpus = bundle.get("GPU", 0)
    if units.get("GPU", 0) > AMOUNT_SCALE and units["GPU"] % AMOUNT_SCALE != 0:
        return resource_field("GPU"), (
            f"GPU amounts above 1 must be whole numbers (a fraction of one GPU, or whole GPUs), got {gpus!r}"
        )
    for name in sorted(bundle):
        if not name.startswith(MIG_RESOURCE_PREFIX):
            continue
        profile, value = _mig_profile_name(name), bundle[name]
        if profile not in MIG_PROFILE_NAMES:
            return resource_field(name), "no supported GPU model has this MIG profile"
        if units[name] not in (0, AMOUNT_SCALE):
            return resource_field(name), (
                "a bundle gets at most one MIG device (CUDA uses only the first): "
                f"amount must be 1, got {value!r} (MIG profile {profile})"
            )
        if units[name] > 0:
            mig_devices += 1
    if mig_devices > 1:
        return "", (
            f"a bundle gets at most one MIG device (CUDA uses only the first), got {mig_devices} MIG profiles"
        )
    if all(unit == 0 for unit in units.values()):
        return "", "a bundle must request at least one resource with a positive amount"
    return None


def check_name(value: str) -> Optional[str]:
    """Returns ``None`` for a name, namespace or key the GCS accepts, else the problem."""
    size = len(value.encode())
    if size > MAX_NAME_BYTES:
        return f"must be at most {MAX_NAME_BYTES} bytes, got {size}"
    if "\x00" in value:
        return "must not contain a NUL byte"
    return None
