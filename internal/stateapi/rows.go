package stateapi

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Float is a float64 in JSON output: NaN and ±Inf, which JSON cannot hold, are written
// as null instead of failing the whole listing. The GCS refuses them, but a row written
// by an older version, or by a bug, must not make a listing unreadable.
type Float float64

// MarshalJSON writes null for NaN and ±Inf.
func (f Float) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// Floats converts a resource map for JSON output (never nil: Ray's state API writes {}).
func Floats(in map[string]float64) map[string]Float {
	out := make(map[string]Float, len(in))
	for k, v := range in {
		out[k] = Float(v)
	}
	return out
}

// Node is a node in the shape of Ray's state API (`ray list nodes --format json`).
type Node struct {
	NodeID             string            `json:"node_id"`
	NodeIP             string            `json:"node_ip"`
	NodeName           string            `json:"node_name"`
	IsHeadNode         bool              `json:"is_head_node"`
	State              string            `json:"state"`
	StateMessage       string            `json:"state_message,omitempty"`
	IsDraining         bool              `json:"is_draining"`
	ResourcesTotal     map[string]Float  `json:"resources_total"`
	ResourcesAvailable map[string]Float  `json:"resources_available"`
	Labels             map[string]string `json:"labels"`
	RayletAddress      string            `json:"raylet_address"`
	// Beyond Ray: the node's whole GPUs (index, uuid, model, nvlink_island, rail, nic),
	// its GPUs in MIG mode with their carved instances, and its multi-node NVLink domain.
	GPUs         []GPU    `json:"gpus"`
	MIGGPUs      []MIGGPU `json:"mig_gpus"`
	NVLinkDomain string   `json:"nvlink_domain,omitempty"`
	StartTimeMs  int64    `json:"start_time_ms"`
	EndTimeMs    int64    `json:"end_time_ms,omitempty"`
}

// GPU is one whole GPU of a node.
type GPU struct {
	Index        int32  `json:"index"`
	UUID         string `json:"uuid"`
	Model        string `json:"model"`
	MemoryBytes  uint64 `json:"memory_bytes"`
	PCIBusID     string `json:"pci_bus_id,omitempty"`
	NVLinkIsland int32  `json:"nvlink_island"`
	Rail         int32  `json:"rail"`
	NIC          string `json:"nic,omitempty"`
	Used
}

// Used is what a GPU or MIG instance measurably does, from its raylet's last activity
// sample: the share of SMs busy (0 to 1) and the memory in use; null when not measured
// (no sample yet, no NVML, or a reading the device does not give).
type Used struct {
	SMActive    *Float  `json:"sm_active"`
	FBUsedBytes *uint64 `json:"fb_used_bytes"`
}

func usedOf(a *pb.GPUActivity) Used {
	var used Used
	if a == nil {
		return used
	}
	if a.HasSmActive {
		busy := Float(a.SmActive)
		used.SMActive = &busy
	}
	if a.HasMemory {
		bytes := a.FbUsedBytes
		used.FBUsedBytes = &bytes
	}
	return used
}

// MIGGPU is one GPU in MIG mode and the instances carved on it.
type MIGGPU struct {
	Index     int32         `json:"index"`
	UUID      string        `json:"uuid"`
	Model     string        `json:"model"`
	Instances []MIGInstance `json:"instances"`
}

// MIGInstance is one carved MIG instance: its NVML profile id, first memory slice,
// whether a bundle holds it, and its device UUID (the holder's CUDA_VISIBLE_DEVICES).
type MIGInstance struct {
	ProfileID  int32  `json:"profile_id"`
	Start      int32  `json:"start"`
	Held       bool   `json:"held"`
	DeviceUUID string `json:"device_uuid,omitempty"`
	Used
}

// FromNode is a node table row as a state-API row.
func FromNode(n *pb.NodeInfo) Node {
	s := Node{
		NodeID: n.NodeId, NodeIP: n.NodeIp, NodeName: n.NodeName, IsHeadNode: n.IsHeadNode,
		State: n.State.String(), StateMessage: n.DeathReason + n.StateMessage, IsDraining: n.IsDraining,
		ResourcesTotal: Floats(n.ResourcesTotal), ResourcesAvailable: Floats(n.ResourcesAvailable), Labels: n.Labels,
		RayletAddress: n.RayletAddress, StartTimeMs: n.StartTimeMs, EndTimeMs: n.EndTimeMs,
		NVLinkDomain: n.NvlinkDomain, GPUs: []GPU{}, MIGGPUs: []MIGGPU{},
	}
	byGPU, byDevice := map[int32]*pb.GPUActivity{}, map[string]*pb.GPUActivity{}
	for _, a := range n.GpuActivity {
		if a.MigDeviceUuid != "" {
			byDevice[a.MigDeviceUuid] = a
		} else {
			byGPU[a.GpuIndex] = a
		}
	}
	for _, g := range n.Gpus {
		s.GPUs = append(s.GPUs, GPU{Index: g.Index, UUID: g.Uuid, Model: g.Model, MemoryBytes: g.MemoryBytes,
			PCIBusID: g.PciBusId, NVLinkIsland: g.NvlinkIsland, Rail: g.Rail, NIC: g.Nic, Used: usedOf(byGPU[g.Index])})
	}
	for _, g := range n.MigGpus {
		m := MIGGPU{Index: g.Index, UUID: g.Uuid, Model: g.Model, Instances: []MIGInstance{}}
		for _, i := range g.Instances {
			var used Used
			if i.DeviceUuid != "" {
				used = usedOf(byDevice[i.DeviceUuid])
			}
			m.Instances = append(m.Instances, MIGInstance{ProfileID: i.ProfileId, Start: i.Start, Held: i.Held, DeviceUUID: i.DeviceUuid, Used: used})
		}
		s.MIGGPUs = append(s.MIGGPUs, m)
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	return s
}

// Bundle is a placement group's bundle in the shape of Ray's state API.
type Bundle struct {
	BundleIndex   int32             `json:"bundle_index"`
	UnitResources map[string]Float  `json:"unit_resources"`
	NodeID        *string           `json:"node_id"`
	LabelSelector map[string]string `json:"label_selector,omitempty"`
	// Beyond Ray: where the bundle lives on the hardware.
	NodeAddress        string   `json:"node_address,omitempty"`
	GPUIDs             []int32  `json:"gpu_ids"`
	DeviceUUIDs        []string `json:"device_uuids"`
	CUDAVisibleDevices string   `json:"cuda_visible_devices"`
}

// PlacementGroup is a group in the shape of Ray's state API
// (`ray list placement-groups --format json`), plus namespace and why it waits.
type PlacementGroup struct {
	PlacementGroupID string              `json:"placement_group_id"`
	Name             string              `json:"name"`
	Namespace        string              `json:"namespace"`
	CreatorJobID     string              `json:"creator_job_id"`
	State            string              `json:"state"`
	Strategy         string              `json:"strategy"`
	IsDetached       bool                `json:"is_detached"`
	Bundles          []Bundle            `json:"bundles"`
	Stats            PlacementGroupStats `json:"stats"`
	PendingReason    string              `json:"pending_reason,omitempty"`
	// Queue is the queue the group is charged to when the head runs with queues ("" without).
	Queue string `json:"queue,omitempty"`
	// PendingReasonCode and Rejections: why it waits, as a code of internal/pending and
	// the nodes counted per reason.
	PendingReasonCode string             `json:"pending_reason_code,omitempty"`
	Rejections        []RejectionSummary `json:"rejection_summaries,omitempty"`
	// Preemptions counts the preemption notices the group got; LastPreemption is the last.
	Preemptions    int32       `json:"preemptions,omitempty"`
	LastPreemption *Preemption `json:"last_preemption,omitempty"`
}

// Preemption is a group's last preemption notice.
type Preemption struct {
	Reason       string `json:"reason"`
	PreemptorID  string `json:"preemptor_id"`
	TimeMs       int64  `json:"time_ms"`
	DeadlineMs   int64  `json:"deadline_ms"`
	Acknowledged bool   `json:"acknowledged"`
}

// RejectionSummary counts the nodes the scheduler rejected for one reason.
type RejectionSummary struct {
	Code           string   `json:"code"`
	Example        string   `json:"example"`
	Nodes          int32    `json:"nodes"`
	ExampleNodeIDs []string `json:"example_node_ids"`
}

// PlacementGroupStats are Ray's placement-group stats.
type PlacementGroupStats struct {
	EndToEndCreationLatencyMs Float  `json:"end_to_end_creation_latency_ms"`
	SchedulingLatencyMs       Float  `json:"scheduling_latency_ms"`
	SchedulingAttempt         int32  `json:"scheduling_attempt"`
	HighestRetryDelayMs       Float  `json:"highest_retry_delay_ms"`
	SchedulingState           string `json:"scheduling_state"`
}

// SchedulingStateName spells a scheduling state as Ray's state API does.
func SchedulingStateName(s pb.SchedulingState) string {
	if s == pb.SchedulingState_SCHEDULING_REMOVED {
		return "REMOVED"
	}
	return s.String()
}

// FromPlacementGroup is a placement-group table row as a state-API row.
func FromPlacementGroup(g *pb.PlacementGroupInfo) PlacementGroup {
	s := PlacementGroup{
		PlacementGroupID: g.PlacementGroupId, Name: g.Name, Namespace: g.Namespace, CreatorJobID: g.CreatorJobId,
		State: g.State.String(), Strategy: g.Strategy.String(), IsDetached: g.IsDetached, PendingReason: g.PendingReason,
		Bundles: []Bundle{}, PendingReasonCode: g.PendingReasonCode, Preemptions: g.Preemptions, Queue: g.Queue,
	}
	if n := g.LastPreemption; n != nil {
		s.LastPreemption = &Preemption{Reason: n.Reason, PreemptorID: n.PreemptorId, TimeMs: n.TimeMs, DeadlineMs: n.DeadlineMs, Acknowledged: n.Acknowledged}
	}
	for _, r := range g.RejectionSummaries {
		s.Rejections = append(s.Rejections, RejectionSummary{Code: r.Code, Example: r.Example, Nodes: r.Nodes, ExampleNodeIDs: r.ExampleNodeIds})
	}
	if st := g.Stats; st != nil {
		s.Stats = PlacementGroupStats{
			EndToEndCreationLatencyMs: Float(st.EndToEndCreationLatencyMs), SchedulingLatencyMs: Float(st.SchedulingLatencyMs),
			SchedulingAttempt: st.SchedulingAttempt, HighestRetryDelayMs: Float(st.HighestRetryDelayMs),
			SchedulingState: SchedulingStateName(st.SchedulingState),
		}
	}
	for _, b := range g.Bundles {
		bs := Bundle{BundleIndex: b.BundleIndex, UnitResources: Floats(b.UnitResources), LabelSelector: b.LabelSelector,
			NodeAddress: b.NodeAddress, GPUIDs: b.GpuIds, DeviceUUIDs: b.DeviceUuids, CUDAVisibleDevices: b.CudaVisibleDevices}
		if bs.GPUIDs == nil {
			bs.GPUIDs = []int32{}
		}
		if bs.DeviceUUIDs == nil {
			bs.DeviceUUIDs = []string{}
		}
		if b.NodeId != "" {
			node := b.NodeId
			bs.NodeID = &node
		}
		s.Bundles = append(s.Bundles, bs)
	}
	return s
}

// Actor is an actor in the shape of Ray's state API (`ray list actors --format json`),
// plus the GPUs of its worker.
type Actor struct {
	ActorID           string           `json:"actor_id"`
	ClassName         string           `json:"class_name"`
	State             string           `json:"state"`
	Name              string           `json:"name"`
	RayNamespace      string           `json:"ray_namespace"`
	JobID             string           `json:"job_id"`
	NodeID            string           `json:"node_id"`
	PID               int64            `json:"pid"`
	PlacementGroupID  string           `json:"placement_group_id"`
	RequiredResources map[string]Float `json:"required_resources"`
	IsDetached        bool             `json:"is_detached"`
	NumRestarts       int64            `json:"num_restarts"`
	MaxRestarts       int64            `json:"max_restarts"`
	DeathCause        string           `json:"death_cause,omitempty"`
	PendingReason     string           `json:"pending_reason,omitempty"`
	// Beyond Ray: why admission holds it back, as a code of internal/pending, and the
	// queue its lease is charged to (with queues, outside placement groups).
	PendingReasonCode string `json:"pending_reason_code,omitempty"`
	Queue             string `json:"queue,omitempty"`
	// Beyond Ray: the GPUs of the actor's worker (NVML indices) and its
	// CUDA_VISIBLE_DEVICES.
	GPUIDs             []int32 `json:"gpu_ids"`
	CUDAVisibleDevices string  `json:"cuda_visible_devices"`
}

// ActorStateName is Ray's name of an actor state: the proto's without "ACTOR_".
func ActorStateName(s pb.ActorState) string { return strings.TrimPrefix(s.String(), "ACTOR_") }

// FromActor is an actor table row as a state-API row.
func FromActor(a *pb.ActorInfo) Actor {
	s := Actor{
		ActorID: a.ActorId, ClassName: a.ClassName, State: ActorStateName(a.State), Name: a.Name, RayNamespace: a.Namespace,
		JobID: a.JobId, NodeID: a.NodeId, PID: a.Pid, PlacementGroupID: a.PlacementGroupId, RequiredResources: Floats(a.RequiredResources),
		IsDetached: a.IsDetached, NumRestarts: a.NumRestarts, MaxRestarts: a.MaxRestarts, DeathCause: a.DeathCause,
		PendingReason: a.PendingReason, PendingReasonCode: a.PendingReasonCode, Queue: a.Queue, GPUIDs: a.GpuIds, CUDAVisibleDevices: a.CudaVisibleDevices,
	}
	if s.GPUIDs == nil {
		s.GPUIDs = []int32{}
	}
	return s
}

// Queue is a queue against its quotas, as `raygo queues list --format json` prints it
// (not a Ray resource: raygo's queues are Kueue's ClusterQueues).
type Queue struct {
	Queue         string          `json:"queue"`
	Cohort        string          `json:"cohort"`
	Pending       int32           `json:"pending"`
	DominantShare Float           `json:"dominant_share"`
	Resources     []QueueResource `json:"resources"`
}

// QueueResource is one resource of a queue: its nominal quota, how far it may borrow
// (null: unlimited), what its admitted work holds, and what it borrows and lends.
type QueueResource struct {
	Resource       string   `json:"resource"`
	Limited        bool     `json:"limited"`
	NominalQuota   Float    `json:"nominal_quota"`
	BorrowingLimit *float64 `json:"borrowing_limit"`
	Usage          Float    `json:"usage"`
	Borrowed       Float    `json:"borrowed"`
	Lent           Float    `json:"lent"`
}

// FromQueue is a queue's status as a row.
func FromQueue(q *pb.QueueStatus) Queue {
	row := Queue{Queue: q.Queue, Cohort: q.Cohort, Pending: q.Pending, DominantShare: Float(q.DominantShare), Resources: []QueueResource{}}
	for _, r := range q.Resources {
		var limit *float64
		if r.BorrowingLimit >= 0 {
			limit = &r.BorrowingLimit
		}
		row.Resources = append(row.Resources, QueueResource{Resource: r.Resource, Limited: r.Limited, NominalQuota: Float(r.NominalQuota),
			BorrowingLimit: limit, Usage: Float(r.Usage), Borrowed: Float(r.Borrowed), Lent: Float(r.Lent)})
	}
	return row
}

// Job is a driver's job in the shape of Ray's state API (`ray list jobs --format json`,
// the fields of Ray's JobState a driver job has), plus its namespace. raygo has no
// submitted jobs: every job is type DRIVER, RUNNING until its driver finishes.
type Job struct {
	JobID                  string            `json:"job_id"`
	SubmissionID           *string           `json:"submission_id"`
	Type                   string            `json:"type"`
	Status                 string            `json:"status"`
	Entrypoint             string            `json:"entrypoint"`
	Message                *string           `json:"message"`
	ErrorType              *string           `json:"error_type"`
	StartTime              int64             `json:"start_time"`
	EndTime                *int64            `json:"end_time"`
	Metadata               map[string]string `json:"metadata"`
	RuntimeEnv             map[string]any    `json:"runtime_env"`
	DriverInfo             JobDriverInfo     `json:"driver_info"`
	DriverAgentHTTPAddress *string           `json:"driver_agent_http_address"`
	DriverNodeID           *string           `json:"driver_node_id"`
	DriverExitCode         *int              `json:"driver_exit_code"`
	Namespace              string            `json:"namespace"`
}

// JobDriverInfo is Ray's DriverInfo of a job: its id, the driver's address and pid.
type JobDriverInfo struct {
	ID            string `json:"id"`
	NodeIPAddress string `json:"node_ip_address"`
	PID           string `json:"pid"`
}

// FromJob is a job table row as a state-API row.
func FromJob(j *pb.JobInfo) Job {
	s := Job{JobID: j.JobId, Type: "DRIVER", Status: "RUNNING", Entrypoint: j.Entrypoint, StartTime: j.StartTimeMs,
		Metadata: map[string]string{}, RuntimeEnv: map[string]any{}, Namespace: j.Namespace,
		DriverInfo: JobDriverInfo{ID: j.JobId, NodeIPAddress: j.DriverIp, PID: strconv.FormatInt(j.DriverPid, 10)}}
	if j.IsDead {
		s.Status = "SUCCEEDED"
	}
	if j.EndTimeMs != 0 {
		end := j.EndTimeMs
		s.EndTime = &end
	}
	return s
}
