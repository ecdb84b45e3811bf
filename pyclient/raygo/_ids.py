"""Identifiers with Ray's shapes: ``PlacementGroupID`` (18 bytes, hex on the wire)."""

from __future__ import annotations

import os
from typing import Any


class PlacementGroupID:
    """The id of a placement group: 18 bytes, shown as 36 hex characters, as Ray's.

    The last 4 bytes are the id of the job that created the group (zero for a group
    created without a job). Ids compare and hash by value.
    """

    __slots__ = ("_bytes",)
    _SIZE = 18

    def __init__(self, id: bytes) -> None:  # noqa: A002 (Ray's parameter name)
        if not isinstance(id, (bytes, bytearray)):
            raise TypeError(f"PlacementGroupID needs bytes, got {type(id).__name__}")
        if len(id) != self._SIZE:
            raise ValueError(f"PlacementGroupID must be {self._SIZE} bytes, got {len(id)}")
        self._bytes = bytes(id)

    @classmethod
    def from_hex(cls, hex_id: str) -> "PlacementGroupID":
        """Parses the 36-character hex form."""
        try:
            raw = bytes.fromhex(hex_id)
        except (TypeError, ValueError):
            raise ValueError(f"PlacementGroupID: {hex_id!r} is not a hex string") from None
        return cls(raw)

    @classmethod
    def from_random(cls) -> "PlacementGroupID":
        """A random id (no group has it; useful in tests)."""
        return cls(os.urandom(cls._SIZE))

    @classmethod
    def nil(cls) -> "PlacementGroupID":
        """The all-ones id that Ray uses for "no placement group"."""
        return cls(b"\xff" * cls._SIZE)

    @classmethod
    def size(cls) -> int:
        """Length of an id in bytes (18)."""
        return cls._SIZE

    def binary(self) -> bytes:
        """The id's bytes."""
        return self._bytes

    def hex(self) -> str:
        """The id as 36 lowercase hex characters, as the GCS and ``raygo list`` show it."""
        return self._bytes.hex()

    def is_nil(self) -> bool:
        """Whether this is the nil id."""
        return self._bytes == b"\xff" * self._SIZE

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, PlacementGroupID) and other._bytes == self._bytes

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((PlacementGroupID, self._bytes))

    def __repr__(self) -> str:
        return f"PlacementGroupID({self.hex()})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        return (PlacementGroupID, (self._bytes,))
