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
    "RayTaskError",
    "WorkerCrashedError",
    "TaskUnschedulableError",
    "RayActorError",
    "ActorDiedError",
    "ObjectLostError",
    "ObjectFreedError",
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


class RayTaskError(RayError):
    """A task raised an exception (Ray's ``RayTaskError``): ``cause`` is the exception as
    the worker raised it, ``traceback_str`` its traceback there.

    ``raygo.get`` raises ``as_instanceof_cause()``: an instance of both this class and the
    cause's class, so ``except ValueError`` catches a task's ValueError, as in Ray.
    """

    def __init__(
        self,
        function_name: str,
        traceback_str: str,
        cause: "BaseException | None",
        pid: int = 0,
        ip: str = "",
        cause_class: str = "",
    ) -> None:
        self.function_name = function_name
        self.traceback_str = traceback_str
        self.cause = cause
        self.pid = pid
        self.ip = ip
        self.cause_class = cause_class or (type(cause).__name__ if cause is not None else "Exception")
        super().__init__(function_name, traceback_str, cause)

    def __str__(self) -> str:
        return f"ray::{self.function_name}() (pid={self.pid}, ip={self.ip})\n{self.traceback_str.rstrip()}"

    def as_instanceof_cause(self) -> "RayTaskError":
        """This error as an instance of ``RayTaskError`` and of the cause's class (Ray's
        ``RayTaskError.as_instanceof_cause``); itself when the cause is unknown or its class
        cannot be mixed in."""
        cause = self.cause
        if cause is None or isinstance(cause, RayTaskError):
            return self
        cause_cls = type(cause)
        if issubclass(RayTaskError, cause_cls):
            return self
        error = self
        try:
            dual = type(
                f"RayTaskError({cause_cls.__name__})",
                (RayTaskError, cause_cls),
                {
                    "__init__": lambda self_: None,
                    "__getattr__": lambda self_, name: getattr(cause, name),
                    "__str__": lambda self_: str(error),
                    "__reduce__": lambda self_: (RayTaskError, (
                        error.function_name, error.traceback_str, error.cause, error.pid, error.ip, error.cause_class)),
                },
            )
            dual.__module__ = cause_cls.__module__
            instance = dual()
        except TypeError:  # a layout conflict (two built-in bases): no class can be both
            return self
        instance.__dict__.update(self.__dict__)
        instance.args = (str(error),)
        return instance


class WorkerCrashedError(RayError):
    """The worker running a task died (killed, crashed) more often than the task's
    ``max_retries`` allows (Ray's ``WorkerCrashedError``)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        message = "The worker died unexpectedly while executing this task."
        return f"{message} {self.detail}" if self.detail else message


class TaskUnschedulableError(RayError):
    """A task can never run as asked: its hard node affinity names a node that is gone or
    too small (Ray's ``TaskUnschedulableError``)."""


class RayActorError(RayError):
    """An actor could not run a method call: it died, or its worker died during the call
    with no ``max_task_retries`` left (Ray's ``RayActorError``)."""

    def __init__(self, message: str = "The actor died unexpectedly before finishing this task.", actor_id: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.actor_id = actor_id

    def __str__(self) -> str:
        return self.message


class ActorDiedError(RayActorError):
    """The actor is DEAD (killed, out of restarts, its group removed, its job ended); the
    message has the GCS's death cause (Ray's ``ActorDiedError``)."""


class ObjectLostError(RayError):
    """An object the GCS held is gone (Ray's ``ObjectLostError``)."""


class ObjectFreedError(ObjectLostError):
    """An object was freed (its owner's last ref collected, or its job ended) before it
    was read (Ray's ``ObjectFreedError``)."""
