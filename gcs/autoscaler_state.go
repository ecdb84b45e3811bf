package gcs

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The GCS side of the autoscaler (Ray's AutoscalerStateService): the cluster and its
// pending demand as the autoscaler plans on them, the request_resources constraint, the
// autoscaler's last report, and drains before termination.
//
// Idle tracking. A node is idle when nothing is allocated on it: no placement-group
// bundle (the GCS's bundle table, placed or being placed), no actor (the GCS's actor
// table) and nothing taken in its raylet's last resource report (worker leases of tasks
// and actors, bundles). The node manager keeps, per node, the last moment it saw work
// (lastWork): a report with something taken, the first report with nothing taken after
// one with something (the work ended then), or a bundle or actor this state sees on the
// node when it is read. idle_duration_ms is now − lastWork while the node is idle. A
// heartbeat that changes nothing (a keep-alive, or the same idle report again) never
// moves it (ray#60546). Work that takes no resources (a zero-CPU actor) is seen only
// when the state is read, so its end is known to within the autoscaler's polling period.

// constraintKey is the key of the request_resources constraint in store.TableAutoscaler.
const constraintKey = "cluster_resource_constraint"

// maxConstraintRequests bounds the shapes of one request_resources call.
const maxConstraintRequests = 10000

// autoscalerNodes is what the autoscaler state reads and asks of the node table.
type autoscalerNodes interface {
	// nodesWithWork returns copies of every node with its idle clock.
	nodesWithWork() []nodeWork
	// noteWork records work seen on the node now.
	noteWork(nodeID string)
	// drain marks the node draining; idle, when given, may reject it (see nodeManager.drain).
	drain(ctx context.Context, nodeID, reason string, idle func() string) (*pb.NodeInfo, string, error)
}

// autoscalerGroups is what it reads of the placement-group table.
type autoscalerGroups interface {
	pendingGangs() []*pb.GangResourceRequest
	heldOnNodes() map[string]*nodeHeld
	// evacuate moves the bundles of a node preempted while it runs, before deadline
	// (zero: unknown).
	evacuate(nodeID string, deadline time.Time)
	// newCapacityReported hands over the autoscaler's estimates of when the nodes it
	// launches for pending groups run, by group id, replacing the last ones.
	newCapacityReported(expected map[string]time.Time)
}

// autoscalerActors is what it reads of the actor table.
type autoscalerActors interface {
	pendingActorShapes() []*pb.ResourceRequestByCount
	// pendingTaskShapes is the SDK's tasks waiting for a worker, by shape.
	pendingTaskShapes() []*pb.ResourceRequestByCount
	actorsOnNodes() map[string]int
}

type autoscalerDeps struct {
	store  store.Store
	log    zerolog.Logger
	now    func() time.Time
	nodes  autoscalerNodes
	groups autoscalerGroups
	actors autoscalerActors
	// sessionName names this GCS incarnation in replies.
	sessionName string
}

// autoscalerState serves pb.AutoscalerStateServiceServer. Concurrency: the fields below
// mu are behind it; the directories are called without it.
type autoscalerState struct {
	pb.UnimplementedAutoscalerStateServiceServer
	autoscalerDeps

	mu      sync.Mutex
	version int64
	// constraint is the last request_resources call, nil when cleared.
	constraint *pb.ClusterResourceConstraint
	// reported is the autoscaler's last report, nil before the first.
	reported *pb.AutoscalingState
}

func newAutoscalerState(deps autoscalerDeps) *autoscalerState {
	return &autoscalerState{autoscalerDeps: deps}
}

// load reads the persisted request_resources constraint.
func (a *autoscalerState) load(ctx context.Context) error {
	raw, found, err := a.store.Get(ctx, store.TableAutoscaler, constraintKey)
	if err != nil {
		return fmt.Errorf("load the cluster resource constraint: %w", err)
	}
	if !found {
		return nil
	}
	constraint := &pb.ClusterResourceConstraint{}
	if err := proto.Unmarshal(raw, constraint); err != nil {
		return fmt.Errorf("load the cluster resource constraint: %w", err)
	}
	a.mu.Lock()
	a.constraint = constraint
	a.mu.Unlock()
	return nil
}

// GetClusterResourceState implements pb.AutoscalerStateServiceServer.
func (a *autoscalerState) GetClusterResourceState(ctx context.Context, _ *pb.GetClusterResourceStateRequest) (*pb.GetClusterResourceStateReply, error) {
	return &pb.GetClusterResourceStateReply{ClusterResourceState: a.clusterResourceState()}, nil
}

// GetClusterStatus implements pb.AutoscalerStateServiceServer.
func (a *autoscalerState) GetClusterStatus(ctx context.Context, _ *pb.GetClusterStatusRequest) (*pb.GetClusterStatusReply, error) {
	state := a.clusterResourceState()
	a.mu.Lock()
	var reported *pb.AutoscalingState
	if a.reported != nil {
		reported = proto.Clone(a.reported).(*pb.AutoscalingState)
	}
	a.mu.Unlock()
	return &pb.GetClusterStatusReply{ClusterResourceState: state, AutoscalingState: reported}, nil
}

// ReportAutoscalingState implements pb.AutoscalerStateServiceServer. A report older than
// the one held (a restarted or late autoscaler) is ignored.
func (a *autoscalerState) ReportAutoscalingState(ctx context.Context, req *pb.ReportAutoscalingStateRequest) (*pb.ReportAutoscalingStateReply, error) {
	state := req.GetAutoscalingState()
	if state == nil {
		return nil, errorf(fielderr.ErrInvalid, "%s", "autoscaling_state: required")
	}
	a.mu.Lock()
	accepted := a.reported == nil || state.AutoscalerStateVersion >= a.reported.AutoscalerStateVersion
	if accepted {
		a.reported = proto.Clone(state).(*pb.AutoscalingState)
	}
	a.mu.Unlock()
	if accepted {
		expected := make(map[string]time.Time, len(state.NewCapacityEstimates))
		for _, e := range state.NewCapacityEstimates {
			expected[e.PlacementGroupId] = time.UnixMilli(e.ExpectedRunningMs)
		}
		a.groups.newCapacityReported(expected)
	}
	return &pb.ReportAutoscalingStateReply{}, nil
}

// RequestClusterResourceConstraint implements pb.AutoscalerStateServiceServer: the call
// replaces the constraint (an empty one clears it) once the store has it.
func (a *autoscalerState) RequestClusterResourceConstraint(ctx context.Context, req *pb.RequestClusterResourceConstraintRequest) (*pb.RequestClusterResourceConstraintReply, error) {
	constraint := req.GetClusterResourceConstraint()
	if err := checkConstraint(constraint); err != nil {
		return nil, err
	}
	if len(constraint.GetResourceRequests()) == 0 {
		if _, err := a.store.Delete(ctx, store.TableAutoscaler, constraintKey); err != nil {
			return nil, errorf(errUnavailable, "clear the cluster resource constraint: %v", err)
		}
		constraint = nil
	} else {
		constraint = proto.Clone(constraint).(*pb.ClusterResourceConstraint)
		for _, r := range constraint.ResourceRequests {
			r.PendingReason = ""
		}
		if err := putRow(a.store, store.TableAutoscaler, constraintKey, "the cluster resource constraint", constraint); err != nil {
			return nil, errorf(errUnavailable, "%v", err)
		}
	}
	a.mu.Lock()
	a.constraint = constraint
	a.mu.Unlock()
	a.log.Info().Int("shapes", len(constraint.GetResourceRequests())).Msg("cluster resource constraint set")
	return &pb.RequestClusterResourceConstraintReply{}, nil
}

// checkConstraint checks every shape as a placement-group bundle, its count and its
// label selector; errors name the field.
func checkConstraint(constraint *pb.ClusterResourceConstraint) error {
	requests := constraint.GetResourceRequests()
	if len(requests) > maxConstraintRequests {
		return errorf(fielderr.ErrInvalid, "cluster_resource_constraint.resource_requests: at most %d shapes, got %d", maxConstraintRequests, len(requests))
	}
	for i, r := range requests {
		field := fmt.Sprintf("cluster_resource_constraint.resource_requests[%d]", i)
		if r.Count < 1 {
			return errorf(fielderr.ErrInvalid, "%s.count: must be at least 1, got %d", field, r.Count)
		}
		if _, err := resources.ParseBundle(r.GetRequest().GetResourcesBundle()); err != nil {
			return fielderr.WithPrefix(err, field+".request.resources_bundle")
		}
		if _, err := nodelabel.ParseSelector(r.GetRequest().GetLabelSelector()); err != nil {
			return fielderr.WithPrefix(err, field+".request.label_selector")
		}
	}
	return nil
}

// DrainNode implements pb.AutoscalerStateServiceServer.
func (a *autoscalerState) DrainNode(ctx context.Context, req *pb.AutoscalerDrainNodeRequest) (*pb.AutoscalerDrainNodeReply, error) {
	if req.NodeId == "" {
		return nil, errorf(fielderr.ErrInvalid, "%s", "node_id: required")
	}
	if req.Reason != pb.DrainNodeReason_DRAIN_NODE_REASON_IDLE_TERMINATION && req.Reason != pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION {
		return nil, errorf(fielderr.ErrInvalid, "reason: must be DRAIN_NODE_REASON_IDLE_TERMINATION or DRAIN_NODE_REASON_PREEMPTION, got %s", req.Reason)
	}
	var found *pb.NodeInfo
	for _, n := range a.nodes.nodesWithWork() {
		if n.node.NodeId == req.NodeId {
			found = n.node
		}
	}
	if found == nil {
		return nil, errorf(errNotFound, "node_id %s: no such node", req.NodeId)
	}
	if found.State == pb.NodeState_DEAD {
		// As Ray: a dead node has nothing left to drain.
		return &pb.AutoscalerDrainNodeReply{IsAccepted: true}, nil
	}
	reason := "autoscaler: " + strings.TrimPrefix(req.Reason.String(), "DRAIN_NODE_REASON_")
	if req.ReasonMessage != "" {
		reason += ": " + req.ReasonMessage
	}
	if req.DeadlineTimestampMs > 0 {
		reason += fmt.Sprintf(" (deadline %s)", time.UnixMilli(req.DeadlineTimestampMs).UTC().Format(time.RFC3339))
	}
	var idle func() string
	if req.Reason == pb.DrainNodeReason_DRAIN_NODE_REASON_IDLE_TERMINATION {
		idle = func() string {
			if work := a.workOn(req.NodeId); len(work) > 0 {
				return fmt.Sprintf("node %s is not idle: %s", req.NodeId, strings.Join(work, ", "))
			}
			return ""
		}
	}
	_, rejected, err := a.nodes.drain(ctx, req.NodeId, reason, idle)
	if err != nil {
		return nil, err
	}
	if rejected != "" {
		a.log.Info().Str("node_id", req.NodeId).Str("why", rejected).Msg("idle-termination drain rejected")
		return &pb.AutoscalerDrainNodeReply{RejectionReasonMessage: rejected}, nil
	}
	if req.Reason == pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION {
		var deadline time.Time
		if req.DeadlineTimestampMs > 0 {
			deadline = time.UnixMilli(req.DeadlineTimestampMs)
		}
		a.groups.evacuate(req.NodeId, deadline)
	}
	return &pb.AutoscalerDrainNodeReply{IsAccepted: true}, nil
}

// workOn lists the work on one node (empty: idle).
func (a *autoscalerState) workOn(nodeID string) []string {
	held := a.groups.heldOnNodes()[nodeID]
	actors := a.actors.actorsOnNodes()[nodeID]
	for _, n := range a.nodes.nodesWithWork() {
		if n.node.NodeId == nodeID {
			return nodeActivity(n, held, actors)
		}
	}
	return nil
}

// nodeActivity words what keeps a node busy; empty when it is idle.
func nodeActivity(n nodeWork, held *nodeHeld, actors int) []string {
	var out []string
	if held != nil && held.bundles > 0 {
		out = append(out, plural(held.bundles, "placement-group bundle"))
	}
	if actors > 0 {
		out = append(out, plural(actors, "actor"))
	}
	if n.reportBusy {
		var used []string
		for _, name := range sortedKeys(n.node.ResourcesTotal) {
			total, available := n.node.ResourcesTotal[name], n.node.ResourcesAvailable[name]
			if available < total {
				used = append(used, fmt.Sprintf("%s %s/%s", name, formatAmount(total-available), formatAmount(total)))
			}
		}
		out = append(out, "resources in use: "+strings.Join(used, ", "))
	}
	return out
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func formatAmount(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.4g", v), ".0") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// clusterResourceState reads the cluster: nodes, pending demand, the constraint.
func (a *autoscalerState) clusterResourceState() *pb.ClusterResourceState {
	nodes := a.nodes.nodesWithWork()
	held := a.groups.heldOnNodes()
	actors := a.actors.actorsOnNodes()
	gangs := a.groups.pendingGangs()
	shapes := append(a.actors.pendingActorShapes(), a.actors.pendingTaskShapes()...)
	now := a.now()

	sort.Slice(nodes, func(i, j int) bool {
		x, y := nodes[i].node, nodes[j].node
		if (x.State == pb.NodeState_ALIVE) != (y.State == pb.NodeState_ALIVE) {
			return x.State == pb.NodeState_ALIVE
		}
		if x.IsHeadNode != y.IsHeadNode {
			return x.IsHeadNode
		}
		if x.StartTimeMs != y.StartTimeMs {
			return x.StartTimeMs < y.StartTimeMs
		}
		return x.NodeId < y.NodeId
	})
	state := &pb.ClusterResourceState{TimestampMs: now.UnixMilli(), ClusterSessionName: a.sessionName}
	for _, n := range nodes {
		state.NodeStates = append(state.NodeStates, a.nodeState(n, held[n.node.NodeId], actors[n.node.NodeId], now))
	}
	for _, shape := range shapes {
		shape.PendingReason = string(shapeReason(shape.Request, nodes))
	}
	state.PendingResourceRequests = shapes
	state.PendingGangResourceRequests = gangs

	a.mu.Lock()
	a.version++
	state.ClusterResourceStateVersion = a.version
	if a.reported != nil {
		state.LastSeenAutoscalerStateVersion = a.reported.AutoscalerStateVersion
	}
	if a.constraint != nil {
		state.ClusterResourceConstraints = []*pb.ClusterResourceConstraint{proto.Clone(a.constraint).(*pb.ClusterResourceConstraint)}
	}
	a.mu.Unlock()
	return state
}

// nodeState is one node's row; a node found busy has its idle clock moved to now.
func (a *autoscalerState) nodeState(n nodeWork, held *nodeHeld, actors int, now time.Time) *pb.AutoscalerNodeState {
	node := n.node
	out := &pb.AutoscalerNodeState{
		NodeId: node.NodeId, InstanceId: node.Labels[nodelabel.InstanceID], RayNodeTypeName: node.Labels[nodelabel.NodeType],
		TotalResources: node.ResourcesTotal, NodeIpAddress: node.NodeIp, Labels: node.Labels, Gpus: node.Gpus,
		NvlinkDomain: node.NvlinkDomain, MigGpus: node.MigGpus, IsHeadNode: node.IsHeadNode, NodeName: node.NodeName,
	}
	if node.State == pb.NodeState_DEAD {
		out.Status, out.StatusMessage = pb.NodeStatus_NODE_STATUS_DEAD, node.DeathReason
		out.AvailableResources = map[string]float64{}
		return out
	}
	if held == nil {
		held = &nodeHeld{}
	}
	out.AvailableResources = availableForNewWork(node, held)
	if len(node.Gpus) > 0 {
		out.GpuAvailable = map[int32]int64{}
		for _, g := range node.Gpus {
			out.GpuAvailable[g.Index] = int64(max(resources.AmountScale-held.gpuUsed[int(g.Index)], 0))
		}
	}
	out.NodeActivity = nodeActivity(n, held, actors)
	if len(out.NodeActivity) > 0 {
		a.nodes.noteWork(node.NodeId)
		out.Status = pb.NodeStatus_NODE_STATUS_RUNNING
	} else {
		out.Status = pb.NodeStatus_NODE_STATUS_IDLE
		out.IdleDurationMs = max(now.Sub(n.lastWork).Milliseconds(), 0)
	}
	if node.IsDraining {
		out.Status, out.StatusMessage = pb.NodeStatus_NODE_STATUS_DRAINING, node.DrainReason
	}
	return out
}

// availableForNewWork is, per resource, the lower of what the raylet last reported and
// the total less the bundles the GCS placed (the view placement uses): a report may
// trail a bundle just placed, and the GCS does not see worker leases.
func availableForNewWork(node *pb.NodeInfo, held *nodeHeld) map[string]float64 {
	total, err := resources.SetFromFloat(node.ResourcesTotal)
	if err != nil {
		return map[string]float64{}
	}
	reported, err := resources.SetFromFloat(node.ResourcesAvailable)
	if err != nil {
		reported = resources.Set{}
	}
	out := map[string]float64{}
	for name, amount := range total {
		free := min(max(amount-held.reserved[name], 0), reported[name])
		out[name] = free.Float()
	}
	return out
}

// shapeReason says why actors of one shape wait: Infeasible when no ALIVE node could
// hold one even idle (by total, and label selector), NoResources otherwise.
func shapeReason(request *pb.ResourceRequest, nodes []nodeWork) pending.Reason {
	shape, err := resources.SetFromFloat(request.GetResourcesBundle())
	if err != nil {
		return pending.Infeasible
	}
	selector, err := nodelabel.ParseSelector(request.GetLabelSelector())
	if err != nil {
		return pending.Infeasible
	}
	for _, n := range nodes {
		if n.node.State != pb.NodeState_ALIVE || n.node.IsDraining {
			continue
		}
		total, err := resources.SetFromFloat(n.node.ResourcesTotal)
		if err != nil || !shape.IsSubsetOf(total) {
			continue
		}
		labels := map[string]string{nodelabel.NodeID: n.node.NodeId}
		for k, v := range n.node.Labels {
			labels[k] = v
		}
		if selector.Matches(labels) {
			return pending.NoResources
		}
	}
	return pending.Infeasible
}

var _ pb.AutoscalerStateServiceServer = (*autoscalerState)(nil)

// lastReport is a copy of the autoscaler's last report, nil before the first.
func (a *autoscalerState) lastReport() *pb.AutoscalingState {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reported == nil {
		return nil
	}
	return proto.Clone(a.reported).(*pb.AutoscalingState)
}
