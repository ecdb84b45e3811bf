package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/raygo-dev/raygo/autoscaler"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pbplacement"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// GCS is the Cluster of a real GCS, over its AutoscalerStateService.
type GCS struct {
	client pb.AutoscalerStateServiceClient
	mu     sync.Mutex
	// last is the state Observe last read: Report names demand by what it held.
	last    *pb.ClusterResourceState
	version int64
}

var _ Cluster = (*GCS)(nil)

// NewGCS returns the Cluster of the GCS behind conn.
func NewGCS(conn grpc.ClientConnInterface) *GCS {
	return &GCS{client: pb.NewAutoscalerStateServiceClient(conn)}
}

// Observe reads the cluster resource state and turns it into the planner's terms.
func (g *GCS) Observe(ctx context.Context) (Observation, error) {
	reply, err := g.client.GetClusterResourceState(ctx, &pb.GetClusterResourceStateRequest{})
	if err != nil {
		return Observation{}, err
	}
	state := reply.GetClusterResourceState()
	g.mu.Lock()
	g.last = state
	g.mu.Unlock()
	return observationOf(state)
}

// observationOf converts a cluster resource state. A row the planner cannot read (a
// request the GCS accepted is always readable) is an error: planning on part of the
// demand would launch the wrong nodes.
func observationOf(state *pb.ClusterResourceState) (Observation, error) {
	var obs Observation
	for _, ns := range state.GetNodeStates() {
		if ns.Status == pb.NodeStatus_NODE_STATUS_DEAD {
			if ns.InstanceId != "" {
				obs.DeadInstances = append(obs.DeadInstances, ns.InstanceId)
			}
			continue
		}
		node, err := nodeOf(ns)
		if err != nil {
			return Observation{}, err
		}
		obs.Nodes = append(obs.Nodes, node)
	}
	for _, gang := range state.GetPendingGangResourceRequests() {
		group, err := groupOf(gang)
		if err != nil {
			return Observation{}, err
		}
		obs.Groups = append(obs.Groups, group)
	}
	for _, req := range state.GetPendingResourceRequests() {
		shape, err := resources.ParseTaskResources(req.GetRequest().GetResourcesBundle())
		if err != nil {
			return Observation{}, fmt.Errorf("pending request %v: %w", req.GetRequest().GetResourcesBundle(), err)
		}
		obs.Shapes = append(obs.Shapes, autoscaler.ShapeDemand{
			Shape: shape, LabelSelector: req.GetRequest().GetLabelSelector(), Count: int(req.Count),
			Reason: pending.Reason(req.PendingReason),
		})
	}
	for _, constraint := range state.GetClusterResourceConstraints() {
		for _, req := range constraint.GetResourceRequests() {
			bundle, err := resources.ParseBundle(req.GetRequest().GetResourcesBundle())
			if err != nil {
				return Observation{}, fmt.Errorf("request_resources bundle %v: %w", req.GetRequest().GetResourcesBundle(), err)
			}
			for range max(req.Count, 1) {
				obs.Constraint = append(obs.Constraint, bundle)
			}
		}
	}
	return obs, nil
}

func nodeOf(ns *pb.AutoscalerNodeState) (autoscaler.Node, error) {
	total, err := resources.ParseNodeResources(ns.TotalResources)
	if err != nil {
		return autoscaler.Node{}, fmt.Errorf("node %s total: %w", ns.NodeId, err)
	}
	available, err := resources.ParseNodeResources(ns.AvailableResources)
	if err != nil {
		return autoscaler.Node{}, fmt.Errorf("node %s available: %w", ns.NodeId, err)
	}
	labels := maps.Clone(ns.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[nodelabel.NodeID] = ns.NodeId
	used := map[int]resources.Amount{}
	for index, free := range ns.GpuAvailable {
		used[int(index)] = resources.AmountScale - resources.Amount(free)
	}
	return autoscaler.Node{
		ID: ns.NodeId, Type: ns.RayNodeTypeName, State: autoscaler.NodeRunning, Head: ns.IsHeadNode,
		IdleFor: time.Duration(ns.IdleDurationMs) * time.Millisecond,
		Placement: placement.Node{
			ID: placement.NodeID(ns.NodeId), Total: total, Available: available, Labels: labels, Alive: true,
			Draining:     ns.Status == pb.NodeStatus_NODE_STATUS_DRAINING,
			GPUs:         pbplacement.GPUs(ns.Gpus, ns.TotalResources[resources.GPU], used),
			NVLinkDomain: ns.NvlinkDomain, MIGGPUs: pbplacement.MIGGPUs(ns.MigGpus),
		},
	}, nil
}

func groupOf(gang *pb.GangResourceRequest) (autoscaler.GroupDemand, error) {
	spec := placement.RequestSpec{Strategy: gang.Strategy.String(), Topology: gang.Topology}
	placed := map[int]placement.NodeID{}
	selectors := false
	for _, b := range gang.Bundles {
		spec.Bundles = append(spec.Bundles, b.UnitResources)
		spec.BundleLabelSelector = append(spec.BundleLabelSelector, b.LabelSelector)
		selectors = selectors || len(b.LabelSelector) > 0
		if b.NodeId != "" {
			placed[int(b.BundleIndex)] = placement.NodeID(b.NodeId)
		}
	}
	if !selectors {
		spec.BundleLabelSelector = nil
	}
	request, err := placement.ParseRequest(spec)
	if err != nil {
		return autoscaler.GroupDemand{}, fmt.Errorf("placement group %s: %w", gang.PlacementGroupId, err)
	}
	if len(placed) > 0 {
		request.PlacedBundles = placed
	}
	return autoscaler.GroupDemand{ID: gang.PlacementGroupId, Request: request, Reason: pending.Reason(gang.PendingReason)}, nil
}

// DrainNode asks the GCS to drain the node.
func (g *GCS) DrainNode(ctx context.Context, nodeID string, reason DrainReason, message string, deadline time.Time) (bool, string, error) {
	wire := pb.DrainNodeReason_DRAIN_NODE_REASON_IDLE_TERMINATION
	if reason == DrainPreemption {
		wire = pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION
	}
	reply, err := g.client.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{
		NodeId: nodeID, Reason: wire, ReasonMessage: message, DeadlineTimestampMs: deadline.UnixMilli(),
	})
	if err != nil {
		return false, "", err
	}
	return reply.IsAccepted, reply.RejectionReasonMessage, nil
}

// Report publishes the status as Ray's AutoscalingState.
func (g *GCS) Report(ctx context.Context, status Status) error {
	g.mu.Lock()
	g.version++
	state := autoscalingStateOf(status, g.last, g.version)
	g.mu.Unlock()
	_, err := g.client.ReportAutoscalingState(ctx, &pb.ReportAutoscalingStateRequest{AutoscalingState: state})
	return err
}

// autoscalingStateOf builds the report. Infeasible demand is named by the rows of last
// (the state the plan was made on).
func autoscalingStateOf(status Status, last *pb.ClusterResourceState, version int64) *pb.AutoscalingState {
	state := &pb.AutoscalingState{AutoscalerStateVersion: version, LastSeenClusterResourceStateVersion: last.GetClusterResourceStateVersion(),
		LaunchedInstances: status.Launched}
	requested := map[string]int32{}
	for _, inst := range status.Instances {
		switch inst.State {
		case Queued, Requested:
			requested[inst.NodeType]++
		case Allocated, RayInstalling:
			state.PendingInstances = append(state.PendingInstances, &pb.PendingInstance{
				InstanceTypeName: inst.NodeType, RayNodeTypeName: inst.NodeType, InstanceId: inst.ID, Details: string(inst.State),
			})
		}
	}
	for _, nodeType := range slices.Sorted(maps.Keys(requested)) {
		state.PendingInstanceRequests = append(state.PendingInstanceRequests, &pb.PendingInstanceRequest{
			InstanceTypeName: nodeType, RayNodeTypeName: nodeType, Count: requested[nodeType], RequestTs: status.Time.Unix(),
		})
	}
	for _, f := range status.Failures {
		state.FailedInstanceRequests = append(state.FailedInstanceRequests, &pb.FailedInstanceRequest{
			InstanceTypeName: f.NodeType, RayNodeTypeName: f.NodeType, Count: 1,
			Reason: strings.TrimSpace(string(f.State) + ": " + f.Detail), StartTs: f.Time.Unix(), FailedTs: f.Time.Unix(),
		})
	}
	// Infeasible demand by the rows of the state the plan was made on, and the reasons in
	// the proto's order: resource requests, then gangs, then constraints.
	gangs := map[string]*pb.GangResourceRequest{}
	for _, gang := range last.GetPendingGangResourceRequests() {
		gangs[gang.PlacementGroupId] = gang
	}
	shapes := map[string]*pb.ResourceRequest{}
	for _, req := range last.GetPendingResourceRequests() {
		shape, err := resources.ParseTaskResources(req.GetRequest().GetResourcesBundle())
		selector, selErr := nodelabel.ParseSelector(req.GetRequest().GetLabelSelector())
		if err == nil && selErr == nil {
			shapes[autoscaler.ShapeName(shape, selector)] = req.GetRequest()
		}
	}
	var shapeReasons, gangReasons, constraintReasons []string
	for _, inf := range status.Infeasible {
		line := inf.For + ": " + inf.Reason
		switch {
		case gangs[inf.For] != nil:
			state.InfeasibleGangResourceRequests = append(state.InfeasibleGangResourceRequests, gangs[inf.For])
			gangReasons = append(gangReasons, line)
		case shapes[inf.For] != nil:
			state.InfeasibleResourceRequests = append(state.InfeasibleResourceRequests, shapes[inf.For])
			shapeReasons = append(shapeReasons, line)
		case inf.For == autoscaler.ForRequestResources && len(last.GetClusterResourceConstraints()) > 0:
			state.InfeasibleClusterResourceConstraints = append(state.InfeasibleClusterResourceConstraints, last.GetClusterResourceConstraints()[0])
			constraintReasons = append(constraintReasons, line)
		}
	}
	state.InfeasibleReasons = slices.Concat(shapeReasons, gangReasons, constraintReasons)
	for _, e := range status.NewCapacity {
		state.NewCapacityEstimates = append(state.NewCapacityEstimates, &pb.NewCapacityEstimate{PlacementGroupId: e.GroupID,
			RayNodeTypeName: e.NodeType, ExpectedRunningMs: e.ExpectedAt.UnixMilli(), LaunchLatencyMs: e.Latency.Milliseconds()})
	}
	return state
}
