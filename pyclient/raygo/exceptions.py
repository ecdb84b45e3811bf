"""Exceptions raised by raygo, named and shaped as Ray's ``ray.exceptions``.

Bad input is a plain ``ValueError`` (as in Ray); an unreachable GCS is a ``ConnectionError``
naming the address. The classes here cover what Ray raises through its own hierarchy.
"""

from __future__ import annotations

__all__ = [
    "RayError",
    "RaySystemError",
    "GetTimeoutError",
    "TaskPlacementGroupRemoved",
    "PlacementGroupNameConflictError",
    "AuthenticationError",
]


class RayError(Exception):
    """Base class of the errors raygo raises on its own account (Ray's ``RayError``)."""


class RaySystemError(RayError):
    """The cluster could not do what was asked (Ray's ``RaySystemError``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"System error: {self.message}"


class GetTimeoutError(RayError, TimeoutError):
    """``raygo.get`` timed out before every reference resolved (Ray's ``GetTimeoutError``)."""


class TaskPlacementGroupRemoved(RayError):
    """The placement group a reference waits for was removed before it became ready.

    Ray raises this from ``ray.get(pg.ready())`` on a removed group.
    """

    def __str__(self) -> str:
        detail = f" ({self.args[0]})" if self.args else ""
        return "The placement group corresponding to this task has been removed." + detail


class PlacementGroupNameConflictError(RaySystemError, ValueError):
    """A live placement group already has this name in the namespace.

    Ray reports this as a ``RaySystemError``; raygo's GCS refuses it as bad input, so the
    error is both, and ``except ValueError`` and ``except RaySystemError`` both catch it.
    """

    def __str__(self) -> str:
        return self.message


class AuthenticationError(RayError):
    """The cluster refused this client's token, or it sent none (Ray's
    ``AuthenticationError``): the message says which variable to set."""
