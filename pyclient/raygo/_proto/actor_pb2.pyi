from . import raylet_pb2 as _raylet_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SchedulingStrategyKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEDULING_STRATEGY_DEFAULT: _ClassVar[SchedulingStrategyKind]
    SCHEDULING_STRATEGY_SPREAD: _ClassVar[SchedulingStrategyKind]
    SCHEDULING_STRATEGY_PLACEMENT_GROUP: _ClassVar[SchedulingStrategyKind]
    SCHEDULING_STRATEGY_NODE_AFFINITY: _ClassVar[SchedulingStrategyKind]

class ActorState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTOR_STATE_UNSPECIFIED: _ClassVar[ActorState]
    ACTOR_PENDING_CREATION: _ClassVar[ActorState]
    ACTOR_ALIVE: _ClassVar[ActorState]
    ACTOR_RESTARTING: _ClassVar[ActorState]
    ACTOR_DEAD: _ClassVar[ActorState]

class LeaseOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEASE_OUTCOME_UNSPECIFIED: _ClassVar[LeaseOutcome]
    LEASE_OUTCOME_PLACED: _ClassVar[LeaseOutcome]
    LEASE_OUTCOME_NOT_NOW: _ClassVar[LeaseOutcome]
    LEASE_OUTCOME_INFEASIBLE: _ClassVar[LeaseOutcome]
    LEASE_OUTCOME_UNSCHEDULABLE: _ClassVar[LeaseOutcome]
SCHEDULING_STRATEGY_DEFAULT: SchedulingStrategyKind
SCHEDULING_STRATEGY_SPREAD: SchedulingStrategyKind
SCHEDULING_STRATEGY_PLACEMENT_GROUP: SchedulingStrategyKind
SCHEDULING_STRATEGY_NODE_AFFINITY: SchedulingStrategyKind
ACTOR_STATE_UNSPECIFIED: ActorState
ACTOR_PENDING_CREATION: ActorState
ACTOR_ALIVE: ActorState
ACTOR_RESTARTING: ActorState
ACTOR_DEAD: ActorState
LEASE_OUTCOME_UNSPECIFIED: LeaseOutcome
LEASE_OUTCOME_PLACED: LeaseOutcome
LEASE_OUTCOME_NOT_NOW: LeaseOutcome
LEASE_OUTCOME_INFEASIBLE: LeaseOutcome
LEASE_OUTCOME_UNSCHEDULABLE: LeaseOutcome

class SchedulingStrategy(_message.Message):
    __slots__ = ("kind", "legacy_kind", "placement_group_id", "bundle_index", "node_id", "soft", "placement_group_capture_child_tasks", "label_selector", "soft_label_selector")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class SoftLabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    LEGACY_KIND_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    SOFT_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_CAPTURE_CHILD_TASKS_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SOFT_LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    kind: SchedulingStrategyKind
    legacy_kind: str
    placement_group_id: str
    bundle_index: int
    node_id: str
    soft: bool
    placement_group_capture_child_tasks: bool
    label_selector: _containers.ScalarMap[str, str]
    soft_label_selector: _containers.ScalarMap[str, str]
    def __init__(self, kind: _Optional[_Union[SchedulingStrategyKind, str]] = ..., legacy_kind: _Optional[str] = ..., placement_group_id: _Optional[str] = ..., bundle_index: _Optional[int] = ..., node_id: _Optional[str] = ..., soft: _Optional[bool] = ..., placement_group_capture_child_tasks: _Optional[bool] = ..., label_selector: _Optional[_Mapping[str, str]] = ..., soft_label_selector: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ActorInfo(_message.Message):
    __slots__ = ("actor_id", "job_id", "class_name", "name", "namespace", "state", "node_id", "pid", "worker_id", "address", "required_resources", "scheduling_strategy", "placement_group_id", "bundle_index", "is_detached", "max_restarts", "num_restarts", "max_task_retries", "death_cause", "pending_reason", "start_time_ms", "end_time_ms", "executable_sha256", "constructor_args", "gpu_ids", "cuda_visible_devices", "pending_reason_code", "queue", "python_worker", "python_class_key", "owner_token_sha256")
    class RequiredResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    IS_DETACHED_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    NUM_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    MAX_TASK_RETRIES_FIELD_NUMBER: _ClassVar[int]
    DEATH_CAUSE_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_FIELD_NUMBER: _ClassVar[int]
    START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_SHA256_FIELD_NUMBER: _ClassVar[int]
    CONSTRUCTOR_ARGS_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    CUDA_VISIBLE_DEVICES_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_CODE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PYTHON_WORKER_FIELD_NUMBER: _ClassVar[int]
    PYTHON_CLASS_KEY_FIELD_NUMBER: _ClassVar[int]
    OWNER_TOKEN_SHA256_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    job_id: str
    class_name: str
    name: str
    namespace: str
    state: ActorState
    node_id: str
    pid: int
    worker_id: str
    address: str
    required_resources: _containers.ScalarMap[str, float]
    scheduling_strategy: SchedulingStrategy
    placement_group_id: str
    bundle_index: int
    is_detached: bool
    max_restarts: int
    num_restarts: int
    max_task_retries: int
    death_cause: str
    pending_reason: str
    start_time_ms: int
    end_time_ms: int
    executable_sha256: str
    constructor_args: _containers.RepeatedScalarFieldContainer[bytes]
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    cuda_visible_devices: str
    pending_reason_code: str
    queue: str
    python_worker: _raylet_pb2.PythonWorker
    python_class_key: str
    owner_token_sha256: str
    def __init__(self, actor_id: _Optional[str] = ..., job_id: _Optional[str] = ..., class_name: _Optional[str] = ..., name: _Optional[str] = ..., namespace: _Optional[str] = ..., state: _Optional[_Union[ActorState, str]] = ..., node_id: _Optional[str] = ..., pid: _Optional[int] = ..., worker_id: _Optional[str] = ..., address: _Optional[str] = ..., required_resources: _Optional[_Mapping[str, float]] = ..., scheduling_strategy: _Optional[_Union[SchedulingStrategy, _Mapping]] = ..., placement_group_id: _Optional[str] = ..., bundle_index: _Optional[int] = ..., is_detached: _Optional[bool] = ..., max_restarts: _Optional[int] = ..., num_restarts: _Optional[int] = ..., max_task_retries: _Optional[int] = ..., death_cause: _Optional[str] = ..., pending_reason: _Optional[str] = ..., start_time_ms: _Optional[int] = ..., end_time_ms: _Optional[int] = ..., executable_sha256: _Optional[str] = ..., constructor_args: _Optional[_Iterable[bytes]] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., cuda_visible_devices: _Optional[str] = ..., pending_reason_code: _Optional[str] = ..., queue: _Optional[str] = ..., python_worker: _Optional[_Union[_raylet_pb2.PythonWorker, _Mapping]] = ..., python_class_key: _Optional[str] = ..., owner_token_sha256: _Optional[str] = ...) -> None: ...

class CreateActorRequest(_message.Message):
    __slots__ = ("job_id", "class_name", "name", "namespace", "required_resources", "scheduling_strategy", "is_detached", "max_restarts", "max_task_retries", "executable_sha256", "constructor_args", "python_worker", "python_class_key")
    class RequiredResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    IS_DETACHED_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    MAX_TASK_RETRIES_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_SHA256_FIELD_NUMBER: _ClassVar[int]
    CONSTRUCTOR_ARGS_FIELD_NUMBER: _ClassVar[int]
    PYTHON_WORKER_FIELD_NUMBER: _ClassVar[int]
    PYTHON_CLASS_KEY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    class_name: str
    name: str
    namespace: str
    required_resources: _containers.ScalarMap[str, float]
    scheduling_strategy: SchedulingStrategy
    is_detached: bool
    max_restarts: int
    max_task_retries: int
    executable_sha256: str
    constructor_args: _containers.RepeatedScalarFieldContainer[bytes]
    python_worker: _raylet_pb2.PythonWorker
    python_class_key: str
    def __init__(self, job_id: _Optional[str] = ..., class_name: _Optional[str] = ..., name: _Optional[str] = ..., namespace: _Optional[str] = ..., required_resources: _Optional[_Mapping[str, float]] = ..., scheduling_strategy: _Optional[_Union[SchedulingStrategy, _Mapping]] = ..., is_detached: _Optional[bool] = ..., max_restarts: _Optional[int] = ..., max_task_retries: _Optional[int] = ..., executable_sha256: _Optional[str] = ..., constructor_args: _Optional[_Iterable[bytes]] = ..., python_worker: _Optional[_Union[_raylet_pb2.PythonWorker, _Mapping]] = ..., python_class_key: _Optional[str] = ...) -> None: ...

class CreateActorReply(_message.Message):
    __slots__ = ("actor",)
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    actor: ActorInfo
    def __init__(self, actor: _Optional[_Union[ActorInfo, _Mapping]] = ...) -> None: ...

class GetActorInfoRequest(_message.Message):
    __slots__ = ("actor_id", "wait_alive", "min_num_restarts")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_ALIVE_FIELD_NUMBER: _ClassVar[int]
    MIN_NUM_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    wait_alive: bool
    min_num_restarts: int
    def __init__(self, actor_id: _Optional[str] = ..., wait_alive: _Optional[bool] = ..., min_num_restarts: _Optional[int] = ...) -> None: ...

class GetActorInfoReply(_message.Message):
    __slots__ = ("actor",)
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    actor: ActorInfo
    def __init__(self, actor: _Optional[_Union[ActorInfo, _Mapping]] = ...) -> None: ...

class GetNamedActorInfoRequest(_message.Message):
    __slots__ = ("name", "namespace")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace: str
    def __init__(self, name: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class GetNamedActorInfoReply(_message.Message):
    __slots__ = ("actor",)
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    actor: ActorInfo
    def __init__(self, actor: _Optional[_Union[ActorInfo, _Mapping]] = ...) -> None: ...

class GetAllActorInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllActorInfoReply(_message.Message):
    __slots__ = ("actors",)
    ACTORS_FIELD_NUMBER: _ClassVar[int]
    actors: _containers.RepeatedCompositeFieldContainer[ActorInfo]
    def __init__(self, actors: _Optional[_Iterable[_Union[ActorInfo, _Mapping]]] = ...) -> None: ...

class KillActorRequest(_message.Message):
    __slots__ = ("actor_id", "no_restart")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    NO_RESTART_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    no_restart: bool
    def __init__(self, actor_id: _Optional[str] = ..., no_restart: _Optional[bool] = ...) -> None: ...

class KillActorReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReportWorkerFailureRequest(_message.Message):
    __slots__ = ("node_id", "worker_id", "actor_id", "exit_detail", "intentional")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    EXIT_DETAIL_FIELD_NUMBER: _ClassVar[int]
    INTENTIONAL_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    worker_id: str
    actor_id: str
    exit_detail: str
    intentional: bool
    def __init__(self, node_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., actor_id: _Optional[str] = ..., exit_detail: _Optional[str] = ..., intentional: _Optional[bool] = ...) -> None: ...

class ReportWorkerFailureReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ChooseLeaseTargetsRequest(_message.Message):
    __slots__ = ("request_id", "resources", "scheduling_strategy", "backlog", "job_id", "charge_id")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    BACKLOG_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CHARGE_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    resources: _containers.ScalarMap[str, float]
    scheduling_strategy: SchedulingStrategy
    backlog: int
    job_id: str
    charge_id: str
    def __init__(self, request_id: _Optional[str] = ..., resources: _Optional[_Mapping[str, float]] = ..., scheduling_strategy: _Optional[_Union[SchedulingStrategy, _Mapping]] = ..., backlog: _Optional[int] = ..., job_id: _Optional[str] = ..., charge_id: _Optional[str] = ...) -> None: ...

class LeaseTarget(_message.Message):
    __slots__ = ("node_id", "raylet_address", "bundle_index", "available_now")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAYLET_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_NOW_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raylet_address: str
    bundle_index: int
    available_now: bool
    def __init__(self, node_id: _Optional[str] = ..., raylet_address: _Optional[str] = ..., bundle_index: _Optional[int] = ..., available_now: _Optional[bool] = ...) -> None: ...

class RejectedNode(_message.Message):
    __slots__ = ("node_id", "code", "message")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    code: str
    message: str
    def __init__(self, node_id: _Optional[str] = ..., code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ChooseLeaseTargetsReply(_message.Message):
    __slots__ = ("outcome", "targets", "reason", "reason_code", "rejected", "charged", "pending_reason_code")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REASON_CODE_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    CHARGED_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_CODE_FIELD_NUMBER: _ClassVar[int]
    outcome: LeaseOutcome
    targets: _containers.RepeatedCompositeFieldContainer[LeaseTarget]
    reason: str
    reason_code: str
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedNode]
    charged: bool
    pending_reason_code: str
    def __init__(self, outcome: _Optional[_Union[LeaseOutcome, str]] = ..., targets: _Optional[_Iterable[_Union[LeaseTarget, _Mapping]]] = ..., reason: _Optional[str] = ..., reason_code: _Optional[str] = ..., rejected: _Optional[_Iterable[_Union[RejectedNode, _Mapping]]] = ..., charged: _Optional[bool] = ..., pending_reason_code: _Optional[str] = ...) -> None: ...

class ReturnLeaseChargeRequest(_message.Message):
    __slots__ = ("job_id", "charge_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CHARGE_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    charge_id: str
    def __init__(self, job_id: _Optional[str] = ..., charge_id: _Optional[str] = ...) -> None: ...

class ReturnLeaseChargeReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
