package autoscaler

import (
	"time"

	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// NodeType is one kind of node the cluster may launch (available_node_types.<name> of
// the cluster YAML, with raygo's settings under provider.raygo.node_types.<name>).
type NodeType struct {
	// Name is the key under available_node_types.
	Name string
	// Resources is what one node of the type offers (CPU, GPU, memory, custom, MIG
	// profiles). Resources["GPU"] equals the sum of GPUIslands when GPUIslands is set.
	Resources resources.Set
	// Labels are the labels a node of the type registers with.
	Labels map[string]string
	// GPUModel is the simulated or real machine model ("dgx-h100", "dgx-a100-40gb");
	// "" when the type has no GPUs or only a GPU count.
	GPUModel string
	// GPUIslands are the sizes of the node's NVLink islands, in GPU index order:
	// [8] for a DGX, [2 2 2 2] for PCIe cards bridged in pairs. Empty: the type's GPUs
	// are known by count only (one island for placement, as an unlisted node's).
	GPUIslands []int
	// PricePerHour is the cost of one node per hour in the provider's currency; 0 when
	// not given (the type is then the most expensive, so that priced types win).
	PricePerHour float64
	// Priority is Ray's available_node_types.<t>.priority: among types of equal price,
	// the higher priority is launched.
	Priority int
	// MinWorkers nodes of the type are always kept; MaxWorkers is the most the cluster
	// runs of it (launching ones included).
	MinWorkers, MaxWorkers int
	// IdleTimeout is how long a node of the type may stay idle before it is terminated.
	IdleTimeout time.Duration
	// Unavailable marks a type the provider cannot launch now (a capacity error): the
	// planner plans as if it did not exist, without reporting demand infeasible for it.
	Unavailable bool
}

// NodeState is where an existing node is in its life, as the planner needs to know it.
type NodeState int

const (
	// NodeRunning: the node's raylet has registered with the GCS.
	NodeRunning NodeState = iota
	// NodeLaunching: requested from the provider, not registered yet. Its capacity is
	// the type's, all free.
	NodeLaunching
)

// Node is one node the cluster has or is launching.
type Node struct {
	// ID is the GCS node id for a running node, the provider's instance id for a
	// launching one.
	ID string
	// Type is the node's NodeType.Name; "" for a node the autoscaler did not launch (it
	// is used for demand, never terminated).
	Type  string
	State NodeState
	// Head is the head node: never terminated.
	Head bool
	// Placement is the running node's row as placement sees it (totals, available,
	// labels, GPUs). Ignored for a launching node.
	Placement placement.Node
	// IdleFor is how long the running node has had no work (no bundle, lease or actor):
	// 0 while it has some. The GCS restarts the clock only when work lands on the node.
	IdleFor time.Duration
}

// GroupDemand is one pending placement group.
type GroupDemand struct {
	// ID is the placement group id (hex), used in the plan and its reasons.
	ID      string
	Request placement.Request
	// Reason is why the group waits. Work held by admission
	// (pending.Reason.HeldByAdmission: quota, cohort, reservation) is not demand.
	Reason pending.Reason
}

// ShapeDemand is pending work of one shape that is not a placement group: actors and
// tasks waiting for a node (by scheduling key).
type ShapeDemand struct {
	Shape resources.Set
	// LabelSelector is the work's label selector; empty matches every node.
	LabelSelector map[string]string
	Count         int
	Reason        pending.Reason
}

// Input is everything one planning decision reads. It is a value: the planner keeps no
// state between calls, and the same input gives the same plan.
type Input struct {
	Types []NodeType
	Nodes []Node
	// Groups and Shapes are the pending work.
	Groups []GroupDemand
	Shapes []ShapeDemand
	// Constraint is the last request_resources call: bundles the cluster must be able
	// to hold at once, running work counting toward them. Empty: none.
	Constraint []resources.Set
	// MaxWorkers is the cluster-wide bound (max_workers) on worker nodes, the head not
	// counted; launching nodes count.
	MaxWorkers int
	// MaxUnavailable is how many nodes voluntary scale-down may take at once
	// (provider.raygo.disruption.max_unavailable resolved against the node count), >= 1.
	MaxUnavailable int
	// UpscalingSpeed is Ray's upscaling_speed: at most max(5, speed × running nodes) nodes
	// are launched in one plan for tasks and actors; placement groups are not throttled.
	UpscalingSpeed float64
}
