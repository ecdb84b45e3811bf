from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PushTaskRequest(_message.Message):
    __slots__ = ("task_id", "function_name", "actor_id", "args", "attempt", "placement_group_capture_child_tasks")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_NAME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_CAPTURE_CHILD_TASKS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    function_name: str
    actor_id: str
    args: _containers.RepeatedScalarFieldContainer[bytes]
    attempt: int
    placement_group_capture_child_tasks: bool
    def __init__(self, task_id: _Optional[str] = ..., function_name: _Optional[str] = ..., actor_id: _Optional[str] = ..., args: _Optional[_Iterable[bytes]] = ..., attempt: _Optional[int] = ..., placement_group_capture_child_tasks: _Optional[bool] = ...) -> None: ...

class TaskError(_message.Message):
    __slots__ = ("type", "message", "python_exception")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PYTHON_EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    python_exception: bytes
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ..., python_exception: _Optional[bytes] = ...) -> None: ...

class PushTaskReply(_message.Message):
    __slots__ = ("returns", "error", "worker_id", "pid")
    RETURNS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    returns: _containers.RepeatedScalarFieldContainer[bytes]
    error: TaskError
    worker_id: str
    pid: int
    def __init__(self, returns: _Optional[_Iterable[bytes]] = ..., error: _Optional[_Union[TaskError, _Mapping]] = ..., worker_id: _Optional[str] = ..., pid: _Optional[int] = ...) -> None: ...

class CreateActorOnWorkerRequest(_message.Message):
    __slots__ = ("actor_id", "class_name", "constructor_args", "num_restarts", "python_class_key", "placement_group_capture_child_tasks", "python_class")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSTRUCTOR_ARGS_FIELD_NUMBER: _ClassVar[int]
    NUM_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    PYTHON_CLASS_KEY_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_CAPTURE_CHILD_TASKS_FIELD_NUMBER: _ClassVar[int]
    PYTHON_CLASS_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    class_name: str
    constructor_args: _containers.RepeatedScalarFieldContainer[bytes]
    num_restarts: int
    python_class_key: str
    placement_group_capture_child_tasks: bool
    python_class: bytes
    def __init__(self, actor_id: _Optional[str] = ..., class_name: _Optional[str] = ..., constructor_args: _Optional[_Iterable[bytes]] = ..., num_restarts: _Optional[int] = ..., python_class_key: _Optional[str] = ..., placement_group_capture_child_tasks: _Optional[bool] = ..., python_class: _Optional[bytes] = ...) -> None: ...

class CreateActorOnWorkerReply(_message.Message):
    __slots__ = ("error", "pid")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    error: TaskError
    pid: int
    def __init__(self, error: _Optional[_Union[TaskError, _Mapping]] = ..., pid: _Optional[int] = ...) -> None: ...
