from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PlacementStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PACK: _ClassVar[PlacementStrategy]
    SPREAD: _ClassVar[PlacementStrategy]
    STRICT_PACK: _ClassVar[PlacementStrategy]
    STRICT_SPREAD: _ClassVar[PlacementStrategy]

class PlacementGroupState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PENDING: _ClassVar[PlacementGroupState]
    PREPARED: _ClassVar[PlacementGroupState]
    CREATED: _ClassVar[PlacementGroupState]
    REMOVED: _ClassVar[PlacementGroupState]
    RESCHEDULING: _ClassVar[PlacementGroupState]

class SchedulingState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUEUED: _ClassVar[SchedulingState]
    SCHEDULING_REMOVED: _ClassVar[SchedulingState]
    SCHEDULING_STARTED: _ClassVar[SchedulingState]
    NO_RESOURCES: _ClassVar[SchedulingState]
    INFEASIBLE: _ClassVar[SchedulingState]
    FAILED_TO_COMMIT_RESOURCES: _ClassVar[SchedulingState]
    FINISHED: _ClassVar[SchedulingState]
PACK: PlacementStrategy
SPREAD: PlacementStrategy
STRICT_PACK: PlacementStrategy
STRICT_SPREAD: PlacementStrategy
PENDING: PlacementGroupState
PREPARED: PlacementGroupState
CREATED: PlacementGroupState
REMOVED: PlacementGroupState
RESCHEDULING: PlacementGroupState
QUEUED: SchedulingState
SCHEDULING_REMOVED: SchedulingState
SCHEDULING_STARTED: SchedulingState
NO_RESOURCES: SchedulingState
INFEASIBLE: SchedulingState
FAILED_TO_COMMIT_RESOURCES: SchedulingState
FINISHED: SchedulingState

class Bundle(_message.Message):
    __slots__ = ("bundle_index", "unit_resources", "node_id", "label_selector", "generation", "node_address", "gpu_ids", "device_uuids", "cuda_visible_devices")
    class UnitResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BUNDLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    UNIT_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NODE_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_UUIDS_FIELD_NUMBER: _ClassVar[int]
    CUDA_VISIBLE_DEVICES_FIELD_NUMBER: _ClassVar[int]
    bundle_index: int
    unit_resources: _containers.ScalarMap[str, float]
    node_id: str
    label_selector: _containers.ScalarMap[str, str]
    generation: int
    node_address: str
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    device_uuids: _containers.RepeatedScalarFieldContainer[str]
    cuda_visible_devices: str
    def __init__(self, bundle_index: _Optional[int] = ..., unit_resources: _Optional[_Mapping[str, float]] = ..., node_id: _Optional[str] = ..., label_selector: _Optional[_Mapping[str, str]] = ..., generation: _Optional[int] = ..., node_address: _Optional[str] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., device_uuids: _Optional[_Iterable[str]] = ..., cuda_visible_devices: _Optional[str] = ...) -> None: ...

class PlacementGroupStats(_message.Message):
    __slots__ = ("end_to_end_creation_latency_ms", "scheduling_latency_ms", "scheduling_attempt", "highest_retry_delay_ms", "scheduling_state", "creation_request_received_ms", "scheduling_started_time_ms")
    END_TO_END_CREATION_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_RETRY_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_STATE_FIELD_NUMBER: _ClassVar[int]
    CREATION_REQUEST_RECEIVED_MS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_STARTED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    end_to_end_creation_latency_ms: float
    scheduling_latency_ms: float
    scheduling_attempt: int
    highest_retry_delay_ms: float
    scheduling_state: SchedulingState
    creation_request_received_ms: int
    scheduling_started_time_ms: int
    def __init__(self, end_to_end_creation_latency_ms: _Optional[float] = ..., scheduling_latency_ms: _Optional[float] = ..., scheduling_attempt: _Optional[int] = ..., highest_retry_delay_ms: _Optional[float] = ..., scheduling_state: _Optional[_Union[SchedulingState, str]] = ..., creation_request_received_ms: _Optional[int] = ..., scheduling_started_time_ms: _Optional[int] = ...) -> None: ...

class RejectionSummary(_message.Message):
    __slots__ = ("code", "example", "nodes", "example_node_ids")
    CODE_FIELD_NUMBER: _ClassVar[int]
    EXAMPLE_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    EXAMPLE_NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    code: str
    example: str
    nodes: int
    example_node_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, code: _Optional[str] = ..., example: _Optional[str] = ..., nodes: _Optional[int] = ..., example_node_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class PlacementGroupInfo(_message.Message):
    __slots__ = ("placement_group_id", "name", "namespace", "strategy", "state", "bundles", "creator_job_id", "is_detached", "stats", "pending_reason", "removed_time_ms", "topology", "rejection_summaries", "pending_reason_code", "queue", "priority_class", "priority", "max_runtime_s", "running_since_ms", "removal_reason", "preemptions", "last_preemption")
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    BUNDLES_FIELD_NUMBER: _ClassVar[int]
    CREATOR_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    IS_DETACHED_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_FIELD_NUMBER: _ClassVar[int]
    REMOVED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    REJECTION_SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_CODE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_CLASS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNTIME_S_FIELD_NUMBER: _ClassVar[int]
    RUNNING_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    REMOVAL_REASON_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    LAST_PREEMPTION_FIELD_NUMBER: _ClassVar[int]
    placement_group_id: str
    name: str
    namespace: str
    strategy: PlacementStrategy
    state: PlacementGroupState
    bundles: _containers.RepeatedCompositeFieldContainer[Bundle]
    creator_job_id: str
    is_detached: bool
    stats: PlacementGroupStats
    pending_reason: str
    removed_time_ms: int
    topology: str
    rejection_summaries: _containers.RepeatedCompositeFieldContainer[RejectionSummary]
    pending_reason_code: str
    queue: str
    priority_class: str
    priority: int
    max_runtime_s: int
    running_since_ms: int
    removal_reason: str
    preemptions: int
    last_preemption: PreemptionNotice
    def __init__(self, placement_group_id: _Optional[str] = ..., name: _Optional[str] = ..., namespace: _Optional[str] = ..., strategy: _Optional[_Union[PlacementStrategy, str]] = ..., state: _Optional[_Union[PlacementGroupState, str]] = ..., bundles: _Optional[_Iterable[_Union[Bundle, _Mapping]]] = ..., creator_job_id: _Optional[str] = ..., is_detached: _Optional[bool] = ..., stats: _Optional[_Union[PlacementGroupStats, _Mapping]] = ..., pending_reason: _Optional[str] = ..., removed_time_ms: _Optional[int] = ..., topology: _Optional[str] = ..., rejection_summaries: _Optional[_Iterable[_Union[RejectionSummary, _Mapping]]] = ..., pending_reason_code: _Optional[str] = ..., queue: _Optional[str] = ..., priority_class: _Optional[str] = ..., priority: _Optional[int] = ..., max_runtime_s: _Optional[int] = ..., running_since_ms: _Optional[int] = ..., removal_reason: _Optional[str] = ..., preemptions: _Optional[int] = ..., last_preemption: _Optional[_Union[PreemptionNotice, _Mapping]] = ...) -> None: ...

class PreemptionNotice(_message.Message):
    __slots__ = ("reason", "preemptor_id", "time_ms", "deadline_ms", "acknowledged")
    REASON_FIELD_NUMBER: _ClassVar[int]
    PREEMPTOR_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    reason: str
    preemptor_id: str
    time_ms: int
    deadline_ms: int
    acknowledged: bool
    def __init__(self, reason: _Optional[str] = ..., preemptor_id: _Optional[str] = ..., time_ms: _Optional[int] = ..., deadline_ms: _Optional[int] = ..., acknowledged: _Optional[bool] = ...) -> None: ...

class CreatePlacementGroupRequest(_message.Message):
    __slots__ = ("bundles", "strategy", "name", "namespace", "lifetime", "creator_job_id", "topology", "wait_first_attempt_ms", "queue", "priority", "max_runtime_s", "placement_group_id", "client_seq", "remove_placement_group_ids")
    class BundleSpec(_message.Message):
        __slots__ = ("resources", "label_selector")
        class ResourcesEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: float
            def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
        class LabelSelectorEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        RESOURCES_FIELD_NUMBER: _ClassVar[int]
        LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
        resources: _containers.ScalarMap[str, float]
        label_selector: _containers.ScalarMap[str, str]
        def __init__(self, resources: _Optional[_Mapping[str, float]] = ..., label_selector: _Optional[_Mapping[str, str]] = ...) -> None: ...
    BUNDLES_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LIFETIME_FIELD_NUMBER: _ClassVar[int]
    CREATOR_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIRST_ATTEMPT_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNTIME_S_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    REMOVE_PLACEMENT_GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    bundles: _containers.RepeatedCompositeFieldContainer[CreatePlacementGroupRequest.BundleSpec]
    strategy: str
    name: str
    namespace: str
    lifetime: str
    creator_job_id: str
    topology: str
    wait_first_attempt_ms: int
    queue: str
    priority: str
    max_runtime_s: int
    placement_group_id: str
    client_seq: int
    remove_placement_group_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, bundles: _Optional[_Iterable[_Union[CreatePlacementGroupRequest.BundleSpec, _Mapping]]] = ..., strategy: _Optional[str] = ..., name: _Optional[str] = ..., namespace: _Optional[str] = ..., lifetime: _Optional[str] = ..., creator_job_id: _Optional[str] = ..., topology: _Optional[str] = ..., wait_first_attempt_ms: _Optional[int] = ..., queue: _Optional[str] = ..., priority: _Optional[str] = ..., max_runtime_s: _Optional[int] = ..., placement_group_id: _Optional[str] = ..., client_seq: _Optional[int] = ..., remove_placement_group_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CreatePlacementGroupReply(_message.Message):
    __slots__ = ("placement_group",)
    PLACEMENT_GROUP_FIELD_NUMBER: _ClassVar[int]
    placement_group: PlacementGroupInfo
    def __init__(self, placement_group: _Optional[_Union[PlacementGroupInfo, _Mapping]] = ...) -> None: ...

class RemovePlacementGroupRequest(_message.Message):
    __slots__ = ("placement_group_id",)
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    placement_group_id: str
    def __init__(self, placement_group_id: _Optional[str] = ...) -> None: ...

class RemovePlacementGroupReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPlacementGroupRequest(_message.Message):
    __slots__ = ("placement_group_id",)
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    placement_group_id: str
    def __init__(self, placement_group_id: _Optional[str] = ...) -> None: ...

class GetPlacementGroupReply(_message.Message):
    __slots__ = ("placement_group",)
    PLACEMENT_GROUP_FIELD_NUMBER: _ClassVar[int]
    placement_group: PlacementGroupInfo
    def __init__(self, placement_group: _Optional[_Union[PlacementGroupInfo, _Mapping]] = ...) -> None: ...

class GetNamedPlacementGroupRequest(_message.Message):
    __slots__ = ("name", "namespace")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace: str
    def __init__(self, name: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class GetNamedPlacementGroupReply(_message.Message):
    __slots__ = ("placement_group",)
    PLACEMENT_GROUP_FIELD_NUMBER: _ClassVar[int]
    placement_group: PlacementGroupInfo
    def __init__(self, placement_group: _Optional[_Union[PlacementGroupInfo, _Mapping]] = ...) -> None: ...

class GetAllPlacementGroupRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllPlacementGroupReply(_message.Message):
    __slots__ = ("placement_groups",)
    PLACEMENT_GROUPS_FIELD_NUMBER: _ClassVar[int]
    placement_groups: _containers.RepeatedCompositeFieldContainer[PlacementGroupInfo]
    def __init__(self, placement_groups: _Optional[_Iterable[_Union[PlacementGroupInfo, _Mapping]]] = ...) -> None: ...

class WaitPlacementGroupUntilReadyRequest(_message.Message):
    __slots__ = ("placement_group_id",)
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    placement_group_id: str
    def __init__(self, placement_group_id: _Optional[str] = ...) -> None: ...

class WaitPlacementGroupUntilReadyReply(_message.Message):
    __slots__ = ("placement_group",)
    PLACEMENT_GROUP_FIELD_NUMBER: _ClassVar[int]
    placement_group: PlacementGroupInfo
    def __init__(self, placement_group: _Optional[_Union[PlacementGroupInfo, _Mapping]] = ...) -> None: ...

class WaitPreemptionNoticeRequest(_message.Message):
    __slots__ = ("placement_group_id", "wait_ms", "listener_id")
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    LISTENER_ID_FIELD_NUMBER: _ClassVar[int]
    placement_group_id: str
    wait_ms: int
    listener_id: str
    def __init__(self, placement_group_id: _Optional[str] = ..., wait_ms: _Optional[int] = ..., listener_id: _Optional[str] = ...) -> None: ...

class WaitPreemptionNoticeReply(_message.Message):
    __slots__ = ("notice",)
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    notice: PreemptionNotice
    def __init__(self, notice: _Optional[_Union[PreemptionNotice, _Mapping]] = ...) -> None: ...

class AckPreemptionNoticeRequest(_message.Message):
    __slots__ = ("placement_group_id", "time_ms", "listener_id")
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    LISTENER_ID_FIELD_NUMBER: _ClassVar[int]
    placement_group_id: str
    time_ms: int
    listener_id: str
    def __init__(self, placement_group_id: _Optional[str] = ..., time_ms: _Optional[int] = ..., listener_id: _Optional[str] = ...) -> None: ...

class AckPreemptionNoticeReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ApplyQueuesRequest(_message.Message):
    __slots__ = ("config_yaml",)
    CONFIG_YAML_FIELD_NUMBER: _ClassVar[int]
    config_yaml: bytes
    def __init__(self, config_yaml: _Optional[bytes] = ...) -> None: ...

class ApplyQueuesReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueueResourceStatus(_message.Message):
    __slots__ = ("resource", "limited", "nominal_quota", "borrowing_limit", "usage", "borrowed", "lent")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    LIMITED_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_QUOTA_FIELD_NUMBER: _ClassVar[int]
    BORROWING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    BORROWED_FIELD_NUMBER: _ClassVar[int]
    LENT_FIELD_NUMBER: _ClassVar[int]
    resource: str
    limited: bool
    nominal_quota: float
    borrowing_limit: float
    usage: float
    borrowed: float
    lent: float
    def __init__(self, resource: _Optional[str] = ..., limited: _Optional[bool] = ..., nominal_quota: _Optional[float] = ..., borrowing_limit: _Optional[float] = ..., usage: _Optional[float] = ..., borrowed: _Optional[float] = ..., lent: _Optional[float] = ...) -> None: ...

class QueueStatus(_message.Message):
    __slots__ = ("queue", "cohort", "pending", "dominant_share", "resources")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    COHORT_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    DOMINANT_SHARE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    queue: str
    cohort: str
    pending: int
    dominant_share: float
    resources: _containers.RepeatedCompositeFieldContainer[QueueResourceStatus]
    def __init__(self, queue: _Optional[str] = ..., cohort: _Optional[str] = ..., pending: _Optional[int] = ..., dominant_share: _Optional[float] = ..., resources: _Optional[_Iterable[_Union[QueueResourceStatus, _Mapping]]] = ...) -> None: ...

class ListQueuesReply(_message.Message):
    __slots__ = ("enabled", "queues")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    queues: _containers.RepeatedCompositeFieldContainer[QueueStatus]
    def __init__(self, enabled: _Optional[bool] = ..., queues: _Optional[_Iterable[_Union[QueueStatus, _Mapping]]] = ...) -> None: ...
