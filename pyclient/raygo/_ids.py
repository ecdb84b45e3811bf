"""Identifiers with Ray's shapes: ``PlacementGroupID`` (18 bytes), ``NodeID`` and
``WorkerID`` (28), ``ActorID`` (16) and ``JobID`` (4), shown as hex as Ray's.
"""

from __future__ import annotations

import logging
import os
from typing import Any, TypeVar

logger = logging.getLogger("raygo")

_ID = TypeVar("_ID", bound="_BaseID")


class _BaseID:
    """An id of a fixed size in bytes; ids compare and hash by type and value."""

    __slots__ = ("_bytes",)
    _SIZE = 0

    def __init__(self, id: bytes) -> None:  # noqa: A002 (Ray's parameter name)
        if not isinstance(id, (bytes, bytearray)):
            raise TypeError(f"{type(self).__name__} needs bytes, got {type(id).__name__}")
        if len(id) != self._SIZE:
            raise ValueError(f"{type(self).__name__} must be {self._SIZE} bytes, got {len(id)}")
        self._bytes = bytes(id)

    @classmethod
    def from_hex(cls: "type[_ID]", hex_id: Any) -> _ID:
        """Parses the hex form (2 characters per byte). As Ray's, a string that is not the
        hex of an id of this size gives the nil id (and a logged error), which callers
        check with ``is_nil()``.
        """
        if isinstance(hex_id, bytes):
            hex_id = hex_id.decode()
        if not isinstance(hex_id, str):
            raise TypeError(f"{cls.__name__}.from_hex needs a str, got {type(hex_id).__name__}")
        try:
            raw = bytes.fromhex(hex_id)
        except ValueError:
            raw = b""
        if len(raw) != cls._SIZE:
            logger.error("%s.from_hex: %r is not %d hex characters; using the nil id", cls.__name__, hex_id, 2 * cls._SIZE)
            return cls.nil()
        return cls(raw)

    @classmethod
    def from_random(cls: "type[_ID]") -> _ID:
        """A random id (nothing has it; useful in tests)."""
        return cls(os.urandom(cls._SIZE))

    @classmethod
    def nil(cls: "type[_ID]") -> _ID:
        """The all-ones id that Ray uses for "none"."""
        return cls(b"\xff" * cls._SIZE)

    @classmethod
    def size(cls) -> int:
        """Length of an id in bytes."""
        return cls._SIZE

    def binary(self) -> bytes:
        """The id's bytes."""
        return self._bytes

    def hex(self) -> str:
        """The id as lowercase hex, as the GCS and ``raygo list`` show it."""
        return self._bytes.hex()

    def is_nil(self) -> bool:
        """Whether this is the nil id."""
        return self._bytes == b"\xff" * self._SIZE

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and other._bytes == self._bytes

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self), self._bytes))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.hex()})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        return (type(self), (self._bytes,))


class PlacementGroupID(_BaseID):
    """The id of a placement group: 18 bytes, 36 hex characters, as Ray's. The last 4
    bytes are the id of the job that created the group (zero for a group created
    without a job).
    """

    __slots__ = ()
    _SIZE = 18


class NodeID(_BaseID):
    """The id of a node: 28 bytes, 56 hex characters, as Ray's."""

    __slots__ = ()
    _SIZE = 28


class WorkerID(_BaseID):
    """The id of a worker or driver: 28 bytes, as Ray's."""

    __slots__ = ()
    _SIZE = 28


class ActorID(_BaseID):
    """The id of an actor: 16 bytes, 32 hex characters, as Ray's."""

    __slots__ = ()
    _SIZE = 16


class JobID(_BaseID):
    """The id of a job (a driver): 4 bytes, 8 hex characters, as Ray's."""

    __slots__ = ()
    _SIZE = 4
