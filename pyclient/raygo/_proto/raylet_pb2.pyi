from . import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BundleReservationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BUNDLE_RESERVATION_UNSPECIFIED: _ClassVar[BundleReservationState]
    BUNDLE_PREPARED: _ClassVar[BundleReservationState]
    BUNDLE_COMMITTED: _ClassVar[BundleReservationState]
BUNDLE_RESERVATION_UNSPECIFIED: BundleReservationState
BUNDLE_PREPARED: BundleReservationState
BUNDLE_COMMITTED: BundleReservationState

class BundleKey(_message.Message):
    __slots__ = ("placement_group_id", "bundle_index", "generation")
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    placement_group_id: str
    bundle_index: int
    generation: int
    def __init__(self, placement_group_id: _Optional[str] = ..., bundle_index: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...

class BundleReservation(_message.Message):
    __slots__ = ("key", "resources", "state", "gcs_epoch", "gpu_ids", "device_uuids", "mig")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    KEY_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    GCS_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_UUIDS_FIELD_NUMBER: _ClassVar[int]
    MIG_FIELD_NUMBER: _ClassVar[int]
    key: BundleKey
    resources: _containers.ScalarMap[str, float]
    state: BundleReservationState
    gcs_epoch: int
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    device_uuids: _containers.RepeatedScalarFieldContainer[str]
    mig: MIGStep
    def __init__(self, key: _Optional[_Union[BundleKey, _Mapping]] = ..., resources: _Optional[_Mapping[str, float]] = ..., state: _Optional[_Union[BundleReservationState, str]] = ..., gcs_epoch: _Optional[int] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., device_uuids: _Optional[_Iterable[str]] = ..., mig: _Optional[_Union[MIGStep, _Mapping]] = ...) -> None: ...

class MIGStep(_message.Message):
    __slots__ = ("gpu", "profile_id", "start", "reuse_idle", "destroy_starts")
    GPU_FIELD_NUMBER: _ClassVar[int]
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    REUSE_IDLE_FIELD_NUMBER: _ClassVar[int]
    DESTROY_STARTS_FIELD_NUMBER: _ClassVar[int]
    gpu: int
    profile_id: int
    start: int
    reuse_idle: bool
    destroy_starts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, gpu: _Optional[int] = ..., profile_id: _Optional[int] = ..., start: _Optional[int] = ..., reuse_idle: _Optional[bool] = ..., destroy_starts: _Optional[_Iterable[int]] = ...) -> None: ...

class PrepareBundleResourcesRequest(_message.Message):
    __slots__ = ("bundles", "commit", "cancel")
    BUNDLES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    bundles: _containers.RepeatedCompositeFieldContainer[BundleReservation]
    commit: bool
    cancel: _containers.RepeatedCompositeFieldContainer[BundleKey]
    def __init__(self, bundles: _Optional[_Iterable[_Union[BundleReservation, _Mapping]]] = ..., commit: _Optional[bool] = ..., cancel: _Optional[_Iterable[_Union[BundleKey, _Mapping]]] = ...) -> None: ...

class ResourceReport(_message.Message):
    __slots__ = ("resources_available", "version", "mig_gpus")
    class ResourcesAvailableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    RESOURCES_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MIG_GPUS_FIELD_NUMBER: _ClassVar[int]
    resources_available: _containers.ScalarMap[str, float]
    version: int
    mig_gpus: _containers.RepeatedCompositeFieldContainer[_common_pb2.MIGGPUInfo]
    def __init__(self, resources_available: _Optional[_Mapping[str, float]] = ..., version: _Optional[int] = ..., mig_gpus: _Optional[_Iterable[_Union[_common_pb2.MIGGPUInfo, _Mapping]]] = ...) -> None: ...

class PrepareBundleResourcesReply(_message.Message):
    __slots__ = ("resources", "bundles")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    BUNDLES_FIELD_NUMBER: _ClassVar[int]
    resources: ResourceReport
    bundles: _containers.RepeatedCompositeFieldContainer[BundleReservation]
    def __init__(self, resources: _Optional[_Union[ResourceReport, _Mapping]] = ..., bundles: _Optional[_Iterable[_Union[BundleReservation, _Mapping]]] = ...) -> None: ...

class CommitBundleResourcesRequest(_message.Message):
    __slots__ = ("bundles",)
    BUNDLES_FIELD_NUMBER: _ClassVar[int]
    bundles: _containers.RepeatedCompositeFieldContainer[BundleKey]
    def __init__(self, bundles: _Optional[_Iterable[_Union[BundleKey, _Mapping]]] = ...) -> None: ...

class CommitBundleResourcesReply(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: ResourceReport
    def __init__(self, resources: _Optional[_Union[ResourceReport, _Mapping]] = ...) -> None: ...

class CancelResourceReserveRequest(_message.Message):
    __slots__ = ("bundles",)
    BUNDLES_FIELD_NUMBER: _ClassVar[int]
    bundles: _containers.RepeatedCompositeFieldContainer[BundleKey]
    def __init__(self, bundles: _Optional[_Iterable[_Union[BundleKey, _Mapping]]] = ...) -> None: ...

class CancelResourceReserveReply(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: ResourceReport
    def __init__(self, resources: _Optional[_Union[ResourceReport, _Mapping]] = ...) -> None: ...

class ReleaseUnusedBundlesRequest(_message.Message):
    __slots__ = ("in_use",)
    IN_USE_FIELD_NUMBER: _ClassVar[int]
    in_use: _containers.RepeatedCompositeFieldContainer[BundleKey]
    def __init__(self, in_use: _Optional[_Iterable[_Union[BundleKey, _Mapping]]] = ...) -> None: ...

class ReleaseUnusedBundlesReply(_message.Message):
    __slots__ = ("released", "held", "resources")
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    released: _containers.RepeatedCompositeFieldContainer[BundleReservation]
    held: _containers.RepeatedCompositeFieldContainer[BundleReservation]
    resources: ResourceReport
    def __init__(self, released: _Optional[_Iterable[_Union[BundleReservation, _Mapping]]] = ..., held: _Optional[_Iterable[_Union[BundleReservation, _Mapping]]] = ..., resources: _Optional[_Union[ResourceReport, _Mapping]] = ...) -> None: ...

class GetNodeStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetNodeStatsReply(_message.Message):
    __slots__ = ("node", "gcs_epoch", "bundles")
    NODE_FIELD_NUMBER: _ClassVar[int]
    GCS_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BUNDLES_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.NodeInfo
    gcs_epoch: int
    bundles: _containers.RepeatedCompositeFieldContainer[BundleReservation]
    def __init__(self, node: _Optional[_Union[_common_pb2.NodeInfo, _Mapping]] = ..., gcs_epoch: _Optional[int] = ..., bundles: _Optional[_Iterable[_Union[BundleReservation, _Mapping]]] = ...) -> None: ...

class DrainRayletRequest(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class DrainRayletReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RequestWorkerLeaseRequest(_message.Message):
    __slots__ = ("job_id", "executable_sha256", "resources", "placement_group_id", "bundle_index", "actor_id", "detached", "queue", "python_worker", "lessee_token_sha256")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_SHA256_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    DETACHED_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PYTHON_WORKER_FIELD_NUMBER: _ClassVar[int]
    LESSEE_TOKEN_SHA256_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    executable_sha256: str
    resources: _containers.ScalarMap[str, float]
    placement_group_id: str
    bundle_index: int
    actor_id: str
    detached: bool
    queue: bool
    python_worker: PythonWorker
    lessee_token_sha256: str
    def __init__(self, job_id: _Optional[str] = ..., executable_sha256: _Optional[str] = ..., resources: _Optional[_Mapping[str, float]] = ..., placement_group_id: _Optional[str] = ..., bundle_index: _Optional[int] = ..., actor_id: _Optional[str] = ..., detached: _Optional[bool] = ..., queue: _Optional[bool] = ..., python_worker: _Optional[_Union[PythonWorker, _Mapping]] = ..., lessee_token_sha256: _Optional[str] = ...) -> None: ...

class PythonWorker(_message.Message):
    __slots__ = ("interpreter", "working_dir", "sys_path")
    INTERPRETER_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIR_FIELD_NUMBER: _ClassVar[int]
    SYS_PATH_FIELD_NUMBER: _ClassVar[int]
    interpreter: str
    working_dir: str
    sys_path: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, interpreter: _Optional[str] = ..., working_dir: _Optional[str] = ..., sys_path: _Optional[_Iterable[str]] = ...) -> None: ...

class RequestWorkerLeaseReply(_message.Message):
    __slots__ = ("worker", "resources")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    worker: WorkerInfo
    resources: ResourceReport
    def __init__(self, worker: _Optional[_Union[WorkerInfo, _Mapping]] = ..., resources: _Optional[_Union[ResourceReport, _Mapping]] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "address", "pid", "node_id", "job_id", "executable_sha256", "actor_id", "leased", "resources", "placement_group_id", "bundle_index", "gpu_ids", "cuda_visible_devices")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_SHA256_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    LEASED_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    CUDA_VISIBLE_DEVICES_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    address: str
    pid: int
    node_id: str
    job_id: str
    executable_sha256: str
    actor_id: str
    leased: bool
    resources: _containers.ScalarMap[str, float]
    placement_group_id: str
    bundle_index: int
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    cuda_visible_devices: str
    def __init__(self, worker_id: _Optional[str] = ..., address: _Optional[str] = ..., pid: _Optional[int] = ..., node_id: _Optional[str] = ..., job_id: _Optional[str] = ..., executable_sha256: _Optional[str] = ..., actor_id: _Optional[str] = ..., leased: _Optional[bool] = ..., resources: _Optional[_Mapping[str, float]] = ..., placement_group_id: _Optional[str] = ..., bundle_index: _Optional[int] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., cuda_visible_devices: _Optional[str] = ...) -> None: ...

class NotifyWorkerBlockedRequest(_message.Message):
    __slots__ = ("worker_id", "blocked")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    blocked: bool
    def __init__(self, worker_id: _Optional[str] = ..., blocked: _Optional[bool] = ...) -> None: ...

class NotifyWorkerBlockedReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReturnWorkerRequest(_message.Message):
    __slots__ = ("worker_id", "disconnect")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    DISCONNECT_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    disconnect: bool
    def __init__(self, worker_id: _Optional[str] = ..., disconnect: _Optional[bool] = ...) -> None: ...

class ReturnWorkerReply(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: ResourceReport
    def __init__(self, resources: _Optional[_Union[ResourceReport, _Mapping]] = ...) -> None: ...

class KillWorkerRequest(_message.Message):
    __slots__ = ("worker_id", "reason")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    reason: str
    def __init__(self, worker_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class KillWorkerReply(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: ResourceReport
    def __init__(self, resources: _Optional[_Union[ResourceReport, _Mapping]] = ...) -> None: ...

class KillJobWorkersRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class KillJobWorkersReply(_message.Message):
    __slots__ = ("killed",)
    KILLED_FIELD_NUMBER: _ClassVar[int]
    killed: int
    def __init__(self, killed: _Optional[int] = ...) -> None: ...

class RegisterWorkerRequest(_message.Message):
    __slots__ = ("worker_id", "address", "pid")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    address: str
    pid: int
    def __init__(self, worker_id: _Optional[str] = ..., address: _Optional[str] = ..., pid: _Optional[int] = ...) -> None: ...

class RegisterWorkerReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWorkersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWorkersReply(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...
