from . import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetClusterInfoReply(_message.Message):
    __slots__ = ("gcs_epoch", "gossip_address", "protocol_version", "store", "start_time_ms", "dashboard_address")
    GCS_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GOSSIP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DASHBOARD_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    gcs_epoch: int
    gossip_address: str
    protocol_version: int
    store: str
    start_time_ms: int
    dashboard_address: str
    def __init__(self, gcs_epoch: _Optional[int] = ..., gossip_address: _Optional[str] = ..., protocol_version: _Optional[int] = ..., store: _Optional[str] = ..., start_time_ms: _Optional[int] = ..., dashboard_address: _Optional[str] = ...) -> None: ...

class RegisterNodeRequest(_message.Message):
    __slots__ = ("node", "node_secret")
    NODE_FIELD_NUMBER: _ClassVar[int]
    NODE_SECRET_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.NodeInfo
    node_secret: str
    def __init__(self, node: _Optional[_Union[_common_pb2.NodeInfo, _Mapping]] = ..., node_secret: _Optional[str] = ...) -> None: ...

class RegisterNodeReply(_message.Message):
    __slots__ = ("gcs_epoch", "gossip_seeds", "node_secret", "gossip_key", "cluster_token_sha256", "gcs_credential_sha256")
    GCS_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GOSSIP_SEEDS_FIELD_NUMBER: _ClassVar[int]
    NODE_SECRET_FIELD_NUMBER: _ClassVar[int]
    GOSSIP_KEY_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_TOKEN_SHA256_FIELD_NUMBER: _ClassVar[int]
    GCS_CREDENTIAL_SHA256_FIELD_NUMBER: _ClassVar[int]
    gcs_epoch: int
    gossip_seeds: _containers.RepeatedScalarFieldContainer[str]
    node_secret: str
    gossip_key: bytes
    cluster_token_sha256: str
    gcs_credential_sha256: str
    def __init__(self, gcs_epoch: _Optional[int] = ..., gossip_seeds: _Optional[_Iterable[str]] = ..., node_secret: _Optional[str] = ..., gossip_key: _Optional[bytes] = ..., cluster_token_sha256: _Optional[str] = ..., gcs_credential_sha256: _Optional[str] = ...) -> None: ...

class ReportHeartbeatRequest(_message.Message):
    __slots__ = ("node_id", "resources_available", "gossip_address", "resources_version", "mig_gpus", "unchanged", "node_secret", "idle_gpus", "gpu_activity")
    class ResourcesAvailableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class IdleGpusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    GOSSIP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_VERSION_FIELD_NUMBER: _ClassVar[int]
    MIG_GPUS_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    NODE_SECRET_FIELD_NUMBER: _ClassVar[int]
    IDLE_GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    resources_available: _containers.ScalarMap[str, float]
    gossip_address: str
    resources_version: int
    mig_gpus: _containers.RepeatedCompositeFieldContainer[_common_pb2.MIGGPUInfo]
    unchanged: bool
    node_secret: str
    idle_gpus: _containers.ScalarMap[str, int]
    gpu_activity: _containers.RepeatedCompositeFieldContainer[_common_pb2.GPUActivity]
    def __init__(self, node_id: _Optional[str] = ..., resources_available: _Optional[_Mapping[str, float]] = ..., gossip_address: _Optional[str] = ..., resources_version: _Optional[int] = ..., mig_gpus: _Optional[_Iterable[_Union[_common_pb2.MIGGPUInfo, _Mapping]]] = ..., unchanged: _Optional[bool] = ..., node_secret: _Optional[str] = ..., idle_gpus: _Optional[_Mapping[str, int]] = ..., gpu_activity: _Optional[_Iterable[_Union[_common_pb2.GPUActivity, _Mapping]]] = ...) -> None: ...

class ReportHeartbeatReply(_message.Message):
    __slots__ = ("gcs_epoch", "gcs_gossip_address", "send_full_report")
    GCS_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GCS_GOSSIP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SEND_FULL_REPORT_FIELD_NUMBER: _ClassVar[int]
    gcs_epoch: int
    gcs_gossip_address: str
    send_full_report: bool
    def __init__(self, gcs_epoch: _Optional[int] = ..., gcs_gossip_address: _Optional[str] = ..., send_full_report: _Optional[bool] = ...) -> None: ...

class GetAllNodeInfoRequest(_message.Message):
    __slots__ = ("alive_only",)
    ALIVE_ONLY_FIELD_NUMBER: _ClassVar[int]
    alive_only: bool
    def __init__(self, alive_only: _Optional[bool] = ...) -> None: ...

class GetAllNodeInfoReply(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[_common_pb2.NodeInfo, _Mapping]]] = ...) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ("node_id", "reason")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    reason: str
    def __init__(self, node_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DrainNodeReply(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.NodeInfo
    def __init__(self, node: _Optional[_Union[_common_pb2.NodeInfo, _Mapping]] = ...) -> None: ...

class UnregisterNodeRequest(_message.Message):
    __slots__ = ("node_id", "reason", "node_secret")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NODE_SECRET_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    reason: str
    node_secret: str
    def __init__(self, node_id: _Optional[str] = ..., reason: _Optional[str] = ..., node_secret: _Optional[str] = ...) -> None: ...

class UnregisterNodeReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class KVGetRequest(_message.Message):
    __slots__ = ("namespace", "key")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: bytes
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[bytes] = ...) -> None: ...

class KVGetReply(_message.Message):
    __slots__ = ("found", "value")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    found: bool
    value: bytes
    def __init__(self, found: _Optional[bool] = ..., value: _Optional[bytes] = ...) -> None: ...

class KVPutRequest(_message.Message):
    __slots__ = ("namespace", "key", "value", "overwrite")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    OVERWRITE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: bytes
    value: bytes
    overwrite: bool
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., overwrite: _Optional[bool] = ...) -> None: ...

class KVPutReply(_message.Message):
    __slots__ = ("added",)
    ADDED_FIELD_NUMBER: _ClassVar[int]
    added: bool
    def __init__(self, added: _Optional[bool] = ...) -> None: ...

class KVDelRequest(_message.Message):
    __slots__ = ("namespace", "key", "del_by_prefix")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    DEL_BY_PREFIX_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: bytes
    del_by_prefix: bool
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[bytes] = ..., del_by_prefix: _Optional[bool] = ...) -> None: ...

class KVDelReply(_message.Message):
    __slots__ = ("deleted_num",)
    DELETED_NUM_FIELD_NUMBER: _ClassVar[int]
    deleted_num: int
    def __init__(self, deleted_num: _Optional[int] = ...) -> None: ...

class KVKeysRequest(_message.Message):
    __slots__ = ("namespace", "prefix")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    prefix: bytes
    def __init__(self, namespace: _Optional[str] = ..., prefix: _Optional[bytes] = ...) -> None: ...

class KVKeysReply(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, keys: _Optional[_Iterable[bytes]] = ...) -> None: ...

class KVExistsRequest(_message.Message):
    __slots__ = ("namespace", "key")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: bytes
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[bytes] = ...) -> None: ...

class KVExistsReply(_message.Message):
    __slots__ = ("exists",)
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    exists: bool
    def __init__(self, exists: _Optional[bool] = ...) -> None: ...

class AddJobRequest(_message.Message):
    __slots__ = ("namespace", "driver_ip", "driver_pid", "entrypoint", "executable_sha256")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    DRIVER_IP_FIELD_NUMBER: _ClassVar[int]
    DRIVER_PID_FIELD_NUMBER: _ClassVar[int]
    ENTRYPOINT_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_SHA256_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    driver_ip: str
    driver_pid: int
    entrypoint: str
    executable_sha256: str
    def __init__(self, namespace: _Optional[str] = ..., driver_ip: _Optional[str] = ..., driver_pid: _Optional[int] = ..., entrypoint: _Optional[str] = ..., executable_sha256: _Optional[str] = ...) -> None: ...

class AddJobReply(_message.Message):
    __slots__ = ("job", "lease_timeout_ms")
    JOB_FIELD_NUMBER: _ClassVar[int]
    LEASE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobInfo
    lease_timeout_ms: int
    def __init__(self, job: _Optional[_Union[_common_pb2.JobInfo, _Mapping]] = ..., lease_timeout_ms: _Optional[int] = ...) -> None: ...

class RenewJobLeaseRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class RenewJobLeaseReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MarkJobFinishedRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class MarkJobFinishedReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllJobInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllJobInfoReply(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.JobInfo]
    def __init__(self, jobs: _Optional[_Iterable[_Union[_common_pb2.JobInfo, _Mapping]]] = ...) -> None: ...

class HasExecutableRequest(_message.Message):
    __slots__ = ("sha256",)
    SHA256_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    def __init__(self, sha256: _Optional[str] = ...) -> None: ...

class HasExecutableReply(_message.Message):
    __slots__ = ("found",)
    FOUND_FIELD_NUMBER: _ClassVar[int]
    found: bool
    def __init__(self, found: _Optional[bool] = ...) -> None: ...

class ExecutableChunk(_message.Message):
    __slots__ = ("sha256", "size", "data")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    size: int
    data: bytes
    def __init__(self, sha256: _Optional[str] = ..., size: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadExecutableReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DownloadExecutableRequest(_message.Message):
    __slots__ = ("sha256",)
    SHA256_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    def __init__(self, sha256: _Optional[str] = ...) -> None: ...
