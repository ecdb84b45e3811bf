from . import common_pb2 as _common_pb2
from . import placement_group_pb2 as _placement_group_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_STATUS_UNSPECIFIED: _ClassVar[NodeStatus]
    NODE_STATUS_RUNNING: _ClassVar[NodeStatus]
    NODE_STATUS_DEAD: _ClassVar[NodeStatus]
    NODE_STATUS_IDLE: _ClassVar[NodeStatus]
    NODE_STATUS_DRAINING: _ClassVar[NodeStatus]

class DrainNodeReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DRAIN_NODE_REASON_UNSPECIFIED: _ClassVar[DrainNodeReason]
    DRAIN_NODE_REASON_IDLE_TERMINATION: _ClassVar[DrainNodeReason]
    DRAIN_NODE_REASON_PREEMPTION: _ClassVar[DrainNodeReason]
NODE_STATUS_UNSPECIFIED: NodeStatus
NODE_STATUS_RUNNING: NodeStatus
NODE_STATUS_DEAD: NodeStatus
NODE_STATUS_IDLE: NodeStatus
NODE_STATUS_DRAINING: NodeStatus
DRAIN_NODE_REASON_UNSPECIFIED: DrainNodeReason
DRAIN_NODE_REASON_IDLE_TERMINATION: DrainNodeReason
DRAIN_NODE_REASON_PREEMPTION: DrainNodeReason

class ResourceRequest(_message.Message):
    __slots__ = ("resources_bundle", "label_selector")
    class ResourcesBundleEntry(_message.Message):
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
    RESOURCES_BUNDLE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    resources_bundle: _containers.ScalarMap[str, float]
    label_selector: _containers.ScalarMap[str, str]
    def __init__(self, resources_bundle: _Optional[_Mapping[str, float]] = ..., label_selector: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ResourceRequestByCount(_message.Message):
    __slots__ = ("request", "count", "pending_reason")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_FIELD_NUMBER: _ClassVar[int]
    request: ResourceRequest
    count: int
    pending_reason: str
    def __init__(self, request: _Optional[_Union[ResourceRequest, _Mapping]] = ..., count: _Optional[int] = ..., pending_reason: _Optional[str] = ...) -> None: ...

class GangResourceRequest(_message.Message):
    __slots__ = ("requests", "details", "placement_group_id", "strategy", "topology", "state", "bundles", "pending_reason", "pending_reason_message", "name", "namespace")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    BUNDLES_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_FIELD_NUMBER: _ClassVar[int]
    PENDING_REASON_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[ResourceRequest]
    details: str
    placement_group_id: str
    strategy: _placement_group_pb2.PlacementStrategy
    topology: str
    state: _placement_group_pb2.PlacementGroupState
    bundles: _containers.RepeatedCompositeFieldContainer[_placement_group_pb2.Bundle]
    pending_reason: str
    pending_reason_message: str
    name: str
    namespace: str
    def __init__(self, requests: _Optional[_Iterable[_Union[ResourceRequest, _Mapping]]] = ..., details: _Optional[str] = ..., placement_group_id: _Optional[str] = ..., strategy: _Optional[_Union[_placement_group_pb2.PlacementStrategy, str]] = ..., topology: _Optional[str] = ..., state: _Optional[_Union[_placement_group_pb2.PlacementGroupState, str]] = ..., bundles: _Optional[_Iterable[_Union[_placement_group_pb2.Bundle, _Mapping]]] = ..., pending_reason: _Optional[str] = ..., pending_reason_message: _Optional[str] = ..., name: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class ClusterResourceConstraint(_message.Message):
    __slots__ = ("resource_requests",)
    RESOURCE_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    resource_requests: _containers.RepeatedCompositeFieldContainer[ResourceRequestByCount]
    def __init__(self, resource_requests: _Optional[_Iterable[_Union[ResourceRequestByCount, _Mapping]]] = ...) -> None: ...

class AutoscalerNodeState(_message.Message):
    __slots__ = ("node_id", "instance_id", "ray_node_type_name", "available_resources", "total_resources", "status", "idle_duration_ms", "node_ip_address", "node_activity", "labels", "gpus", "gpu_available", "nvlink_domain", "mig_gpus", "is_head_node", "node_name", "status_message")
    class AvailableResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class TotalResourcesEntry(_message.Message):
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
    class GpuAvailableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RAY_NODE_TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    IDLE_DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    NODE_IP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NODE_ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    NVLINK_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    MIG_GPUS_FIELD_NUMBER: _ClassVar[int]
    IS_HEAD_NODE_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    instance_id: str
    ray_node_type_name: str
    available_resources: _containers.ScalarMap[str, float]
    total_resources: _containers.ScalarMap[str, float]
    status: NodeStatus
    idle_duration_ms: int
    node_ip_address: str
    node_activity: _containers.RepeatedScalarFieldContainer[str]
    labels: _containers.ScalarMap[str, str]
    gpus: _containers.RepeatedCompositeFieldContainer[_common_pb2.GPUInfo]
    gpu_available: _containers.ScalarMap[int, int]
    nvlink_domain: str
    mig_gpus: _containers.RepeatedCompositeFieldContainer[_common_pb2.MIGGPUInfo]
    is_head_node: bool
    node_name: str
    status_message: str
    def __init__(self, node_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., ray_node_type_name: _Optional[str] = ..., available_resources: _Optional[_Mapping[str, float]] = ..., total_resources: _Optional[_Mapping[str, float]] = ..., status: _Optional[_Union[NodeStatus, str]] = ..., idle_duration_ms: _Optional[int] = ..., node_ip_address: _Optional[str] = ..., node_activity: _Optional[_Iterable[str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., gpus: _Optional[_Iterable[_Union[_common_pb2.GPUInfo, _Mapping]]] = ..., gpu_available: _Optional[_Mapping[int, int]] = ..., nvlink_domain: _Optional[str] = ..., mig_gpus: _Optional[_Iterable[_Union[_common_pb2.MIGGPUInfo, _Mapping]]] = ..., is_head_node: _Optional[bool] = ..., node_name: _Optional[str] = ..., status_message: _Optional[str] = ...) -> None: ...

class GetClusterResourceStateRequest(_message.Message):
    __slots__ = ("last_seen_cluster_resource_state_version",)
    LAST_SEEN_CLUSTER_RESOURCE_STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    last_seen_cluster_resource_state_version: int
    def __init__(self, last_seen_cluster_resource_state_version: _Optional[int] = ...) -> None: ...

class ClusterResourceState(_message.Message):
    __slots__ = ("cluster_resource_state_version", "last_seen_autoscaler_state_version", "node_states", "pending_resource_requests", "pending_gang_resource_requests", "cluster_resource_constraints", "cluster_session_name", "timestamp_ms")
    CLUSTER_RESOURCE_STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_AUTOSCALER_STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    NODE_STATES_FIELD_NUMBER: _ClassVar[int]
    PENDING_RESOURCE_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_GANG_RESOURCE_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_RESOURCE_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_SESSION_NAME_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    cluster_resource_state_version: int
    last_seen_autoscaler_state_version: int
    node_states: _containers.RepeatedCompositeFieldContainer[AutoscalerNodeState]
    pending_resource_requests: _containers.RepeatedCompositeFieldContainer[ResourceRequestByCount]
    pending_gang_resource_requests: _containers.RepeatedCompositeFieldContainer[GangResourceRequest]
    cluster_resource_constraints: _containers.RepeatedCompositeFieldContainer[ClusterResourceConstraint]
    cluster_session_name: str
    timestamp_ms: int
    def __init__(self, cluster_resource_state_version: _Optional[int] = ..., last_seen_autoscaler_state_version: _Optional[int] = ..., node_states: _Optional[_Iterable[_Union[AutoscalerNodeState, _Mapping]]] = ..., pending_resource_requests: _Optional[_Iterable[_Union[ResourceRequestByCount, _Mapping]]] = ..., pending_gang_resource_requests: _Optional[_Iterable[_Union[GangResourceRequest, _Mapping]]] = ..., cluster_resource_constraints: _Optional[_Iterable[_Union[ClusterResourceConstraint, _Mapping]]] = ..., cluster_session_name: _Optional[str] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class GetClusterResourceStateReply(_message.Message):
    __slots__ = ("cluster_resource_state",)
    CLUSTER_RESOURCE_STATE_FIELD_NUMBER: _ClassVar[int]
    cluster_resource_state: ClusterResourceState
    def __init__(self, cluster_resource_state: _Optional[_Union[ClusterResourceState, _Mapping]] = ...) -> None: ...

class PendingInstanceRequest(_message.Message):
    __slots__ = ("instance_type_name", "ray_node_type_name", "count", "request_ts")
    INSTANCE_TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    RAY_NODE_TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TS_FIELD_NUMBER: _ClassVar[int]
    instance_type_name: str
    ray_node_type_name: str
    count: int
    request_ts: int
    def __init__(self, instance_type_name: _Optional[str] = ..., ray_node_type_name: _Optional[str] = ..., count: _Optional[int] = ..., request_ts: _Optional[int] = ...) -> None: ...

class FailedInstanceRequest(_message.Message):
    __slots__ = ("instance_type_name", "ray_node_type_name", "count", "reason", "start_ts", "failed_ts")
    INSTANCE_TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    RAY_NODE_TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    START_TS_FIELD_NUMBER: _ClassVar[int]
    FAILED_TS_FIELD_NUMBER: _ClassVar[int]
    instance_type_name: str
    ray_node_type_name: str
    count: int
    reason: str
    start_ts: int
    failed_ts: int
    def __init__(self, instance_type_name: _Optional[str] = ..., ray_node_type_name: _Optional[str] = ..., count: _Optional[int] = ..., reason: _Optional[str] = ..., start_ts: _Optional[int] = ..., failed_ts: _Optional[int] = ...) -> None: ...

class PendingInstance(_message.Message):
    __slots__ = ("instance_type_name", "ray_node_type_name", "instance_id", "ip_address", "details")
    INSTANCE_TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    RAY_NODE_TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    IP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    instance_type_name: str
    ray_node_type_name: str
    instance_id: str
    ip_address: str
    details: str
    def __init__(self, instance_type_name: _Optional[str] = ..., ray_node_type_name: _Optional[str] = ..., instance_id: _Optional[str] = ..., ip_address: _Optional[str] = ..., details: _Optional[str] = ...) -> None: ...

class AutoscalingState(_message.Message):
    __slots__ = ("last_seen_cluster_resource_state_version", "autoscaler_state_version", "pending_instance_requests", "infeasible_resource_requests", "infeasible_gang_resource_requests", "infeasible_cluster_resource_constraints", "pending_instances", "failed_instance_requests", "infeasible_reasons", "launched_instances", "new_capacity_estimates")
    class LaunchedInstancesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    LAST_SEEN_CLUSTER_RESOURCE_STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTOSCALER_STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    PENDING_INSTANCE_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    INFEASIBLE_RESOURCE_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    INFEASIBLE_GANG_RESOURCE_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    INFEASIBLE_CLUSTER_RESOURCE_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_INSTANCES_FIELD_NUMBER: _ClassVar[int]
    FAILED_INSTANCE_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    INFEASIBLE_REASONS_FIELD_NUMBER: _ClassVar[int]
    LAUNCHED_INSTANCES_FIELD_NUMBER: _ClassVar[int]
    NEW_CAPACITY_ESTIMATES_FIELD_NUMBER: _ClassVar[int]
    last_seen_cluster_resource_state_version: int
    autoscaler_state_version: int
    pending_instance_requests: _containers.RepeatedCompositeFieldContainer[PendingInstanceRequest]
    infeasible_resource_requests: _containers.RepeatedCompositeFieldContainer[ResourceRequest]
    infeasible_gang_resource_requests: _containers.RepeatedCompositeFieldContainer[GangResourceRequest]
    infeasible_cluster_resource_constraints: _containers.RepeatedCompositeFieldContainer[ClusterResourceConstraint]
    pending_instances: _containers.RepeatedCompositeFieldContainer[PendingInstance]
    failed_instance_requests: _containers.RepeatedCompositeFieldContainer[FailedInstanceRequest]
    infeasible_reasons: _containers.RepeatedScalarFieldContainer[str]
    launched_instances: _containers.ScalarMap[str, int]
    new_capacity_estimates: _containers.RepeatedCompositeFieldContainer[NewCapacityEstimate]
    def __init__(self, last_seen_cluster_resource_state_version: _Optional[int] = ..., autoscaler_state_version: _Optional[int] = ..., pending_instance_requests: _Optional[_Iterable[_Union[PendingInstanceRequest, _Mapping]]] = ..., infeasible_resource_requests: _Optional[_Iterable[_Union[ResourceRequest, _Mapping]]] = ..., infeasible_gang_resource_requests: _Optional[_Iterable[_Union[GangResourceRequest, _Mapping]]] = ..., infeasible_cluster_resource_constraints: _Optional[_Iterable[_Union[ClusterResourceConstraint, _Mapping]]] = ..., pending_instances: _Optional[_Iterable[_Union[PendingInstance, _Mapping]]] = ..., failed_instance_requests: _Optional[_Iterable[_Union[FailedInstanceRequest, _Mapping]]] = ..., infeasible_reasons: _Optional[_Iterable[str]] = ..., launched_instances: _Optional[_Mapping[str, int]] = ..., new_capacity_estimates: _Optional[_Iterable[_Union[NewCapacityEstimate, _Mapping]]] = ...) -> None: ...

class NewCapacityEstimate(_message.Message):
    __slots__ = ("placement_group_id", "ray_node_type_name", "expected_running_ms", "launch_latency_ms")
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    RAY_NODE_TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_RUNNING_MS_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    placement_group_id: str
    ray_node_type_name: str
    expected_running_ms: int
    launch_latency_ms: int
    def __init__(self, placement_group_id: _Optional[str] = ..., ray_node_type_name: _Optional[str] = ..., expected_running_ms: _Optional[int] = ..., launch_latency_ms: _Optional[int] = ...) -> None: ...

class ReportAutoscalingStateRequest(_message.Message):
    __slots__ = ("autoscaling_state",)
    AUTOSCALING_STATE_FIELD_NUMBER: _ClassVar[int]
    autoscaling_state: AutoscalingState
    def __init__(self, autoscaling_state: _Optional[_Union[AutoscalingState, _Mapping]] = ...) -> None: ...

class ReportAutoscalingStateReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RequestClusterResourceConstraintRequest(_message.Message):
    __slots__ = ("cluster_resource_constraint",)
    CLUSTER_RESOURCE_CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    cluster_resource_constraint: ClusterResourceConstraint
    def __init__(self, cluster_resource_constraint: _Optional[_Union[ClusterResourceConstraint, _Mapping]] = ...) -> None: ...

class RequestClusterResourceConstraintReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetClusterStatusReply(_message.Message):
    __slots__ = ("autoscaling_state", "cluster_resource_state")
    AUTOSCALING_STATE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_RESOURCE_STATE_FIELD_NUMBER: _ClassVar[int]
    autoscaling_state: AutoscalingState
    cluster_resource_state: ClusterResourceState
    def __init__(self, autoscaling_state: _Optional[_Union[AutoscalingState, _Mapping]] = ..., cluster_resource_state: _Optional[_Union[ClusterResourceState, _Mapping]] = ...) -> None: ...

class AutoscalerDrainNodeRequest(_message.Message):
    __slots__ = ("node_id", "reason", "reason_message", "deadline_timestamp_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REASON_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    reason: DrainNodeReason
    reason_message: str
    deadline_timestamp_ms: int
    def __init__(self, node_id: _Optional[str] = ..., reason: _Optional[_Union[DrainNodeReason, str]] = ..., reason_message: _Optional[str] = ..., deadline_timestamp_ms: _Optional[int] = ...) -> None: ...

class AutoscalerDrainNodeReply(_message.Message):
    __slots__ = ("is_accepted", "rejection_reason_message")
    IS_ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REJECTION_REASON_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    is_accepted: bool
    rejection_reason_message: str
    def __init__(self, is_accepted: _Optional[bool] = ..., rejection_reason_message: _Optional[str] = ...) -> None: ...
