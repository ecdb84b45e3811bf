from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_STATE_UNSPECIFIED: _ClassVar[NodeState]
    ALIVE: _ClassVar[NodeState]
    DEAD: _ClassVar[NodeState]
NODE_STATE_UNSPECIFIED: NodeState
ALIVE: NodeState
DEAD: NodeState

class NodeInfo(_message.Message):
    __slots__ = ("node_id", "node_ip", "node_name", "is_head_node", "state", "resources_total", "resources_available", "labels", "raylet_address", "gossip_address", "is_draining", "drain_reason", "start_time_ms", "end_time_ms", "death_reason", "state_message", "gpus", "nvlink_domain", "mig_gpus", "node_manager_hostname", "gpu_activity")
    class ResourcesTotalEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ResourcesAvailableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_IP_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    IS_HEAD_NODE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    RAYLET_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GOSSIP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    IS_DRAINING_FIELD_NUMBER: _ClassVar[int]
    DRAIN_REASON_FIELD_NUMBER: _ClassVar[int]
    START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DEATH_REASON_FIELD_NUMBER: _ClassVar[int]
    STATE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    NVLINK_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    MIG_GPUS_FIELD_NUMBER: _ClassVar[int]
    NODE_MANAGER_HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    GPU_ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    node_ip: str
    node_name: str
    is_head_node: bool
    state: NodeState
    resources_total: _containers.ScalarMap[str, float]
    resources_available: _containers.ScalarMap[str, float]
    labels: _containers.ScalarMap[str, str]
    raylet_address: str
    gossip_address: str
    is_draining: bool
    drain_reason: str
    start_time_ms: int
    end_time_ms: int
    death_reason: str
    state_message: str
    gpus: _containers.RepeatedCompositeFieldContainer[GPUInfo]
    nvlink_domain: str
    mig_gpus: _containers.RepeatedCompositeFieldContainer[MIGGPUInfo]
    node_manager_hostname: str
    gpu_activity: _containers.RepeatedCompositeFieldContainer[GPUActivity]
    def __init__(self, node_id: _Optional[str] = ..., node_ip: _Optional[str] = ..., node_name: _Optional[str] = ..., is_head_node: _Optional[bool] = ..., state: _Optional[_Union[NodeState, str]] = ..., resources_total: _Optional[_Mapping[str, float]] = ..., resources_available: _Optional[_Mapping[str, float]] = ..., labels: _Optional[_Mapping[str, str]] = ..., raylet_address: _Optional[str] = ..., gossip_address: _Optional[str] = ..., is_draining: _Optional[bool] = ..., drain_reason: _Optional[str] = ..., start_time_ms: _Optional[int] = ..., end_time_ms: _Optional[int] = ..., death_reason: _Optional[str] = ..., state_message: _Optional[str] = ..., gpus: _Optional[_Iterable[_Union[GPUInfo, _Mapping]]] = ..., nvlink_domain: _Optional[str] = ..., mig_gpus: _Optional[_Iterable[_Union[MIGGPUInfo, _Mapping]]] = ..., node_manager_hostname: _Optional[str] = ..., gpu_activity: _Optional[_Iterable[_Union[GPUActivity, _Mapping]]] = ...) -> None: ...

class GPUActivity(_message.Message):
    __slots__ = ("gpu_index", "mig_device_uuid", "has_sm_active", "sm_active", "has_memory", "fb_used_bytes")
    GPU_INDEX_FIELD_NUMBER: _ClassVar[int]
    MIG_DEVICE_UUID_FIELD_NUMBER: _ClassVar[int]
    HAS_SM_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    SM_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    HAS_MEMORY_FIELD_NUMBER: _ClassVar[int]
    FB_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    gpu_index: int
    mig_device_uuid: str
    has_sm_active: bool
    sm_active: float
    has_memory: bool
    fb_used_bytes: int
    def __init__(self, gpu_index: _Optional[int] = ..., mig_device_uuid: _Optional[str] = ..., has_sm_active: _Optional[bool] = ..., sm_active: _Optional[float] = ..., has_memory: _Optional[bool] = ..., fb_used_bytes: _Optional[int] = ...) -> None: ...

class MIGGPUInfo(_message.Message):
    __slots__ = ("index", "uuid", "model", "instances")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    index: int
    uuid: str
    model: str
    instances: _containers.RepeatedCompositeFieldContainer[MIGInstanceInfo]
    def __init__(self, index: _Optional[int] = ..., uuid: _Optional[str] = ..., model: _Optional[str] = ..., instances: _Optional[_Iterable[_Union[MIGInstanceInfo, _Mapping]]] = ...) -> None: ...

class MIGInstanceInfo(_message.Message):
    __slots__ = ("profile_id", "start", "held", "device_uuid")
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    DEVICE_UUID_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    start: int
    held: bool
    device_uuid: str
    def __init__(self, profile_id: _Optional[int] = ..., start: _Optional[int] = ..., held: _Optional[bool] = ..., device_uuid: _Optional[str] = ...) -> None: ...

class GPUInfo(_message.Message):
    __slots__ = ("index", "uuid", "model", "memory_bytes", "pci_bus_id", "nvlink_island", "rail", "nic")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    PCI_BUS_ID_FIELD_NUMBER: _ClassVar[int]
    NVLINK_ISLAND_FIELD_NUMBER: _ClassVar[int]
    RAIL_FIELD_NUMBER: _ClassVar[int]
    NIC_FIELD_NUMBER: _ClassVar[int]
    index: int
    uuid: str
    model: str
    memory_bytes: int
    pci_bus_id: str
    nvlink_island: int
    rail: int
    nic: str
    def __init__(self, index: _Optional[int] = ..., uuid: _Optional[str] = ..., model: _Optional[str] = ..., memory_bytes: _Optional[int] = ..., pci_bus_id: _Optional[str] = ..., nvlink_island: _Optional[int] = ..., rail: _Optional[int] = ..., nic: _Optional[str] = ...) -> None: ...

class JobInfo(_message.Message):
    __slots__ = ("job_id", "namespace", "driver_ip", "driver_pid", "is_dead", "start_time_ms", "end_time_ms", "last_renewal_ms", "entrypoint", "executable_sha256")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    DRIVER_IP_FIELD_NUMBER: _ClassVar[int]
    DRIVER_PID_FIELD_NUMBER: _ClassVar[int]
    IS_DEAD_FIELD_NUMBER: _ClassVar[int]
    START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_RENEWAL_MS_FIELD_NUMBER: _ClassVar[int]
    ENTRYPOINT_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_SHA256_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    namespace: str
    driver_ip: str
    driver_pid: int
    is_dead: bool
    start_time_ms: int
    end_time_ms: int
    last_renewal_ms: int
    entrypoint: str
    executable_sha256: str
    def __init__(self, job_id: _Optional[str] = ..., namespace: _Optional[str] = ..., driver_ip: _Optional[str] = ..., driver_pid: _Optional[int] = ..., is_dead: _Optional[bool] = ..., start_time_ms: _Optional[int] = ..., end_time_ms: _Optional[int] = ..., last_renewal_ms: _Optional[int] = ..., entrypoint: _Optional[str] = ..., executable_sha256: _Optional[str] = ...) -> None: ...
