package gcs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/reservertest"
	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// drainRecorder is a raylet that answers DrainRaylet and records it.
type drainRecorder struct {
	pb.UnimplementedNodeManagerServiceServer
	mu      sync.Mutex
	drained []string
}

func (r *drainRecorder) DrainRaylet(ctx context.Context, req *pb.DrainRayletRequest) (*pb.DrainRayletReply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drained = append(r.drained, req.Reason)
	return &pb.DrainRayletReply{}, nil
}

func (r *drainRecorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.drained)
}

// reportless is the in-memory raylets without their resource reports (which are empty):
// in these tests resources are reported by heartbeats only.
type reportless struct{ *reservertest.Fake }

func (r reportless) Prepare(ctx context.Context, nodeID string, bundles []*pb.BundleReservation) ([]*pb.BundleReservation, *pb.ResourceReport, error) {
	made, _, err := r.Fake.Prepare(ctx, nodeID, bundles)
	return made, nil, err
}

func (r reportless) Commit(ctx context.Context, nodeID string, keys []*pb.BundleKey) (*pb.ResourceReport, error) {
	_, err := r.Fake.Commit(ctx, nodeID, keys)
	return nil, err
}

func (r reportless) Cancel(ctx context.Context, nodeID string, keys []*pb.BundleKey) (*pb.ResourceReport, error) {
	_, err := r.Fake.Cancel(ctx, nodeID, keys)
	return nil, err
}

func (r reportless) ReleaseUnused(ctx context.Context, nodeID string, inUse []*pb.BundleKey) (*pb.ReleaseUnusedBundlesReply, error) {
	reply, err := r.Fake.ReleaseUnused(ctx, nodeID, inUse)
	if reply != nil {
		reply.Resources = nil
	}
	return reply, err
}

// autoscalerFixture is a GCS on a settable clock whose bundles go to in-memory raylets,
// with nodes whose raylet address answers DrainRaylet.
type autoscalerFixture struct {
	t       *testing.T
	s       *Server
	clock   *fakeClock
	raylet  *drainRecorder
	address string
	c       actorTestClients
	state   pb.AutoscalerStateServiceClient
	secrets map[string]string
	// raylets hold the bundles the GCS reserves.
	raylets reportless
}

func newAutoscalerFixture(t *testing.T, st store.Store) *autoscalerFixture {
	t.Helper()
	f := &autoscalerFixture{t: t, clock: &fakeClock{now: time.Unix(1_800_000_000, 0)}, raylet: &drainRecorder{}, secrets: map[string]string{}}
	f.address = serveFake(t, func(srv *grpc.Server) { pb.RegisterNodeManagerServiceServer(srv, f.raylet) })
	raylets := reportless{reservertest.New()}
	f.raylets = raylets
	f.s = startGCS(t, st, func(c *Config) {
		c.Now = f.clock.Now
		c.NodeTimeout = 0 // the clock jumps; nodes here send no heartbeats of their own
		c.WrapReserver = func(BundleReserver) BundleReserver { return raylets }
	})
	f.c = dialActors(t, f.s.Address())
	conn, err := rpcutil.Dial(f.s.Address(), rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.state = pb.NewAutoscalerStateServiceClient(conn)
	return f
}

// register adds a node; available nil: all of total is free.
func (f *autoscalerFixture) register(node *pb.NodeInfo) {
	f.t.Helper()
	node.RayletAddress = f.address
	if node.ResourcesAvailable == nil {
		node.ResourcesAvailable = node.ResourcesTotal
	}
	reply, err := f.c.nodes.RegisterNode(context.Background(), &pb.RegisterNodeRequest{Node: node})
	if err != nil {
		f.t.Fatalf("register %s: %v", node.NodeId, err)
	}
	f.secrets[node.NodeId] = reply.NodeSecret
}

func (f *autoscalerFixture) heartbeat(nodeID string, version int64, available map[string]float64) {
	f.t.Helper()
	if _, err := f.c.nodes.ReportHeartbeat(context.Background(), &pb.ReportHeartbeatRequest{NodeId: nodeID,
		ResourcesAvailable: available, ResourcesVersion: version, NodeSecret: f.secrets[nodeID]}); err != nil {
		f.t.Fatalf("heartbeat %s: %v", nodeID, err)
	}
}

func (f *autoscalerFixture) read() *pb.ClusterResourceState {
	f.t.Helper()
	reply, err := f.state.GetClusterResourceState(context.Background(), &pb.GetClusterResourceStateRequest{})
	if err != nil {
		f.t.Fatalf("GetClusterResourceState: %v", err)
	}
	return reply.ClusterResourceState
}

func (f *autoscalerFixture) node(id string) *pb.AutoscalerNodeState {
	f.t.Helper()
	for _, n := range f.read().NodeStates {
		if n.NodeId == id {
			return n
		}
	}
	f.t.Fatalf("node %s not in the cluster resource state", id)
	return nil
}

// createGroup makes a detached group and returns its id.
func (f *autoscalerFixture) createGroup(strategy string, bundles ...*pb.CreatePlacementGroupRequest_BundleSpec) string {
	f.t.Helper()
	reply, err := f.c.pgs.CreatePlacementGroup(context.Background(), &pb.CreatePlacementGroupRequest{Strategy: strategy, Lifetime: lifetimeDetached, Bundles: bundles})
	if err != nil {
		f.t.Fatal(err)
	}
	return reply.PlacementGroup.PlacementGroupId
}

func (f *autoscalerFixture) waitGroup(id string, want pb.PlacementGroupState, reason pending.Reason) *pb.PlacementGroupInfo {
	f.t.Helper()
	var got *pb.PlacementGroupInfo
	eventually(f.t, 10*time.Second, fmt.Sprintf("group %s %s", id, want), func() error {
		reply, err := f.c.pgs.GetPlacementGroup(context.Background(), &pb.GetPlacementGroupRequest{PlacementGroupId: id})
		if err != nil {
			return err
		}
		got = reply.PlacementGroup
		if got.State != want || got.PendingReasonCode != string(reason) {
			return fmt.Errorf("state %s reason %q", got.State, got.PendingReasonCode)
		}
		return nil
	})
	return got
}

func bundle(amounts map[string]float64, selector map[string]string) *pb.CreatePlacementGroupRequest_BundleSpec {
	return &pb.CreatePlacementGroupRequest_BundleSpec{Resources: amounts, LabelSelector: selector}
}

func twoGPUNode(id string) *pb.NodeInfo {
	return &pb.NodeInfo{NodeId: id, NodeIp: "10.0.0.1", IsHeadNode: true,
		ResourcesTotal: map[string]float64{"CPU": 4, "GPU": 2},
		Labels:         map[string]string{nodelabel.InstanceID: "i-0a1", nodelabel.NodeType: "gpu2"},
		Gpus: []*pb.GPUInfo{{Index: 0, Uuid: "GPU-a0", NvlinkIsland: 0, Rail: 0},
			{Index: 1, Uuid: "GPU-a1", NvlinkIsland: 0, Rail: 1}}}
}

func TestClusterResourceStateListsNodesGroupsAndActors(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	f.register(twoGPUNode("aaaa"))
	// bbbb's raylet reports half its CPUs taken (a worker lease).
	f.register(&pb.NodeInfo{NodeId: "bbbb", ResourcesTotal: map[string]float64{"CPU": 4}, ResourcesAvailable: map[string]float64{"CPU": 2}})

	placed := f.createGroup("STRICT_PACK", bundle(map[string]float64{"GPU": 1}, nil))
	f.waitGroup(placed, pb.PlacementGroupState_CREATED, "")
	waiting := f.createGroup("STRICT_SPREAD", bundle(map[string]float64{"CPU": 1}, map[string]string{"zone": "us-east-1a"}),
		bundle(map[string]float64{"CPU": 1}, nil))
	f.waitGroup(waiting, pb.PlacementGroupState_PENDING, pending.Infeasible)

	job, err := f.c.jobs.AddJob(context.Background(), &pb.AddJobRequest{Namespace: "team", DriverPid: 1})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("#!/bin/true\n")
	if err := uploadChunks(context.Background(), f.c.exes, sha256Hex(data), int64(len(data)), [][]byte{data}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := f.c.actors.CreateActor(context.Background(), &pb.CreateActorRequest{JobId: job.Job.JobId, ClassName: "Big",
			ExecutableSha256: sha256Hex(data), RequiredResources: map[string]float64{"CPU": 64}}); err != nil {
			t.Fatal(err)
		}
	}

	var state *pb.ClusterResourceState
	eventually(t, 10*time.Second, "two pending actors", func() error {
		state = f.read()
		if len(state.PendingResourceRequests) != 1 || state.PendingResourceRequests[0].Count != 2 {
			return fmt.Errorf("pending shapes %v", state.PendingResourceRequests)
		}
		return nil
	})
	shape := state.PendingResourceRequests[0]
	if shape.Request.ResourcesBundle["CPU"] != 64 || shape.PendingReason != string(pending.Infeasible) {
		t.Fatalf("actor shape %v", shape)
	}

	if len(state.NodeStates) != 2 || state.NodeStates[0].NodeId != "aaaa" {
		t.Fatalf("node states %v: want the head aaaa first, then bbbb", state.NodeStates)
	}
	a, b := state.NodeStates[0], state.NodeStates[1]
	if a.InstanceId != "i-0a1" || a.RayNodeTypeName != "gpu2" || a.NodeIpAddress != "10.0.0.1" || !a.IsHeadNode {
		t.Fatalf("node aaaa identity: %v", a)
	}
	if a.Status != pb.NodeStatus_NODE_STATUS_RUNNING || a.IdleDurationMs != 0 || !strings.Contains(strings.Join(a.NodeActivity, ";"), "1 placement-group bundle") {
		t.Fatalf("node aaaa holds a bundle: %v %d %v", a.Status, a.IdleDurationMs, a.NodeActivity)
	}
	if a.AvailableResources["GPU"] != 1 || a.TotalResources["GPU"] != 2 || len(a.Gpus) != 2 || a.Gpus[1].Rail != 1 {
		t.Fatalf("node aaaa resources: available %v total %v gpus %v", a.AvailableResources, a.TotalResources, a.Gpus)
	}
	if free := a.GpuAvailable[0] + a.GpuAvailable[1]; free != 10000 || len(a.GpuAvailable) != 2 {
		t.Fatalf("node aaaa GPU availability %v: one of two GPUs held", a.GpuAvailable)
	}
	if b.Status != pb.NodeStatus_NODE_STATUS_RUNNING || b.AvailableResources["CPU"] != 2 || !strings.Contains(strings.Join(b.NodeActivity, ";"), "CPU 2/4") {
		t.Fatalf("node bbbb has a lease: %v", b)
	}

	if len(state.PendingGangResourceRequests) != 1 {
		t.Fatalf("pending gangs %v: want the STRICT_SPREAD group only", state.PendingGangResourceRequests)
	}
	gang := state.PendingGangResourceRequests[0]
	if gang.PlacementGroupId != waiting || gang.Strategy != pb.PlacementStrategy_STRICT_SPREAD || gang.State != pb.PlacementGroupState_PENDING ||
		gang.PendingReason != string(pending.Infeasible) || gang.PendingReasonMessage == "" || len(gang.Requests) != 2 || len(gang.Bundles) != 2 {
		t.Fatalf("pending gang %v", gang)
	}
	if gang.Requests[0].LabelSelector["zone"] != "us-east-1a" || gang.Bundles[0].LabelSelector["zone"] != "us-east-1a" {
		t.Fatalf("pending gang lost its bundle label selector: %v", gang.Requests)
	}
	if want := waiting + ":STRICT_SPREAD|PENDING"; gang.Details != want {
		t.Fatalf("details %q, want %q", gang.Details, want)
	}
	if next := f.read().ClusterResourceStateVersion; next <= state.ClusterResourceStateVersion {
		t.Fatalf("version %d after %d: must grow", next, state.ClusterResourceStateVersion)
	}
}

func TestIdleDurationRestartsOnlyWhenWorkLands(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	f.register(&pb.NodeInfo{NodeId: "cccc", ResourcesTotal: map[string]float64{"CPU": 4}})
	if n := f.node("cccc"); n.Status != pb.NodeStatus_NODE_STATUS_IDLE || n.IdleDurationMs != 0 {
		t.Fatalf("new node: %v idle %d", n.Status, n.IdleDurationMs)
	}
	f.clock.Advance(30 * time.Second)
	// Heartbeats that change nothing do not restart the clock: a keep-alive and a full
	// report of the same idle resources.
	f.heartbeat("cccc", 0, map[string]float64{"CPU": 4})
	if _, err := f.c.nodes.ReportHeartbeat(context.Background(), &pb.ReportHeartbeatRequest{NodeId: "cccc", Unchanged: true, NodeSecret: f.secrets["cccc"]}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(10 * time.Second)
	if got := f.node("cccc").IdleDurationMs; got != 40_000 {
		t.Fatalf("idle %d ms after 40 s of heartbeats only, want 40000", got)
	}

	// A bundle lands: busy while it is there, and the clock restarts when it leaves.
	id := f.createGroup("PACK", bundle(map[string]float64{"CPU": 1}, nil))
	f.waitGroup(id, pb.PlacementGroupState_CREATED, "")
	if n := f.node("cccc"); n.Status != pb.NodeStatus_NODE_STATUS_RUNNING || n.IdleDurationMs != 0 {
		t.Fatalf("node with a bundle: %v idle %d", n.Status, n.IdleDurationMs)
	}
	f.clock.Advance(5 * time.Second)
	if _, err := f.c.pgs.RemovePlacementGroup(context.Background(), &pb.RemovePlacementGroupRequest{PlacementGroupId: id}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the bundle released", func() error {
		if n := f.node("cccc"); n.Status != pb.NodeStatus_NODE_STATUS_IDLE {
			return fmt.Errorf("%v %v", n.Status, n.NodeActivity)
		}
		return nil
	})
	f.clock.Advance(20 * time.Second)
	if got := f.node("cccc").IdleDurationMs; got != 20_000 {
		t.Fatalf("idle %d ms 20 s after the bundle left, want 20000", got)
	}

	// A lease the raylet reports: the clock restarts at the report that shows it gone.
	f.heartbeat("cccc", 1, map[string]float64{"CPU": 3})
	if n := f.node("cccc"); n.Status != pb.NodeStatus_NODE_STATUS_RUNNING {
		t.Fatalf("node with a lease: %v", n.Status)
	}
	f.clock.Advance(3 * time.Second)
	f.heartbeat("cccc", 2, map[string]float64{"CPU": 4})
	f.clock.Advance(7 * time.Second)
	if got := f.node("cccc").IdleDurationMs; got != 7_000 {
		t.Fatalf("idle %d ms 7 s after the lease ended, want 7000", got)
	}
}

func TestIdleTerminationDrainIsRejectedForABusyNode(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	f.register(&pb.NodeInfo{NodeId: "dddd", ResourcesTotal: map[string]float64{"CPU": 4}})
	f.register(&pb.NodeInfo{NodeId: "eeee", ResourcesTotal: map[string]float64{"CPU": 4}})
	busy := f.createGroup("STRICT_PACK", bundle(map[string]float64{"CPU": 1}, map[string]string{nodelabel.NodeID: "dddd"}))
	f.waitGroup(busy, pb.PlacementGroupState_CREATED, "")
	ctx := context.Background()

	reply, err := f.state.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{NodeId: "dddd", Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_IDLE_TERMINATION})
	if err != nil {
		t.Fatal(err)
	}
	if reply.IsAccepted || !strings.Contains(reply.RejectionReasonMessage, "placement-group bundle") {
		t.Fatalf("drain of a node holding a bundle: %v", reply)
	}
	if n := f.node("dddd"); n.Status != pb.NodeStatus_NODE_STATUS_RUNNING {
		t.Fatalf("a rejected drain left the node %v", n.Status)
	}

	reply, err = f.state.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{NodeId: "eeee", Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_IDLE_TERMINATION, ReasonMessage: "idle for 10m"})
	if err != nil || !reply.IsAccepted {
		t.Fatalf("drain of an idle node: %v, %v", reply, err)
	}
	if n := f.node("eeee"); n.Status != pb.NodeStatus_NODE_STATUS_DRAINING || !strings.Contains(n.StatusMessage, "idle for 10m") {
		t.Fatalf("drained node: %v %q", n.Status, n.StatusMessage)
	}
	if f.raylet.calls() != 1 {
		t.Fatalf("DrainRaylet called %d times, want once (the accepted drain)", f.raylet.calls())
	}
	// eeee is the only node with 4 CPUs free: the group waits rather than go there.
	whole := f.createGroup("PACK", bundle(map[string]float64{"CPU": 4}, nil))
	eventually(t, 10*time.Second, "the group waits", func() error {
		reply, err := f.c.pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: whole})
		if err != nil {
			return err
		}
		if g := reply.PlacementGroup; g.State != pb.PlacementGroupState_PENDING || g.PendingReasonCode == "" {
			return fmt.Errorf("%s %q", g.State, g.PendingReasonCode)
		}
		return nil
	})
	if n := f.node("eeee"); n.Status != pb.NodeStatus_NODE_STATUS_DRAINING || len(n.NodeActivity) != 0 {
		t.Fatalf("the draining node took work: %v %v", n.Status, n.NodeActivity)
	}

	// A preemption drains a busy node.
	reply, err = f.state.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{NodeId: "dddd", Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION})
	if err != nil || !reply.IsAccepted {
		t.Fatalf("preemption drain: %v, %v", reply, err)
	}
	for _, bad := range []*pb.AutoscalerDrainNodeRequest{{NodeId: "dddd"}, {Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION}} {
		_, err := f.state.DrainNode(ctx, bad)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("drain %v: %v, want InvalidArgument", bad, err)
		}
	}
	if _, err := f.state.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{NodeId: "ffff", Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION}); status.Code(err) != codes.NotFound {
		t.Fatalf("drain of an unknown node: %v, want NotFound", err)
	}
}

func constraintOf(counts ...*pb.ResourceRequestByCount) *pb.RequestClusterResourceConstraintRequest {
	return &pb.RequestClusterResourceConstraintRequest{ClusterResourceConstraint: &pb.ClusterResourceConstraint{ResourceRequests: counts}}
}

func shapeOf(count int64, amounts map[string]float64, selector map[string]string) *pb.ResourceRequestByCount {
	return &pb.ResourceRequestByCount{Request: &pb.ResourceRequest{ResourcesBundle: amounts, LabelSelector: selector}, Count: count}
}

func TestResourceConstraintIsReplacedClearedAndSurvivesARestart(t *testing.T) {
	st := redisStore(t, "constraint")
	f := newAutoscalerFixture(t, st)
	ctx := context.Background()
	constraint := func(f *autoscalerFixture) []*pb.ResourceRequestByCount {
		t.Helper()
		cs := f.read().ClusterResourceConstraints
		if len(cs) == 0 {
			return nil
		}
		if len(cs) != 1 {
			t.Fatalf("%d constraints, want at most one", len(cs))
		}
		return cs[0].ResourceRequests
	}
	if _, err := f.state.RequestClusterResourceConstraint(ctx, constraintOf(shapeOf(3, map[string]float64{"CPU": 1}, nil))); err != nil {
		t.Fatal(err)
	}
	if got := constraint(f); len(got) != 1 || got[0].Count != 3 {
		t.Fatalf("constraint %v", got)
	}
	if _, err := f.state.RequestClusterResourceConstraint(ctx, constraintOf(shapeOf(1, map[string]float64{"GPU": 8}, map[string]string{"zone": "in(a,b)"}))); err != nil {
		t.Fatal(err)
	}
	got := constraint(f)
	if len(got) != 1 || got[0].Request.ResourcesBundle["GPU"] != 8 || got[0].Request.ResourcesBundle["CPU"] != 0 || got[0].Request.LabelSelector["zone"] != "in(a,b)" {
		t.Fatalf("the second call must replace the first: %v", got)
	}
	for field, bad := range map[string]*pb.RequestClusterResourceConstraintRequest{
		"resource_requests[0].count":                              constraintOf(shapeOf(0, map[string]float64{"CPU": 1}, nil)),
		"resource_requests[1].request.resources_bundle":           constraintOf(shapeOf(1, map[string]float64{"CPU": 1}, nil), shapeOf(1, map[string]float64{"CPU": -1}, nil)),
		`resource_requests[0].request.label_selector["bad key!"]`: constraintOf(shapeOf(1, map[string]float64{"CPU": 1}, map[string]string{"bad key!": "x"})),
	} {
		_, err := f.state.RequestClusterResourceConstraint(ctx, bad)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), field) {
			t.Fatalf("bad %s: %v, want InvalidArgument naming it", field, err)
		}
	}
	if got := constraint(f); len(got) != 1 || got[0].Request.ResourcesBundle["GPU"] != 8 {
		t.Fatalf("a refused call changed the constraint: %v", got)
	}

	f.s.Stop()
	f = newAutoscalerFixture(t, st)
	if got := constraint(f); len(got) != 1 || got[0].Request.ResourcesBundle["GPU"] != 8 {
		t.Fatalf("after a GCS restart on Redis: %v", got)
	}
	if _, err := f.state.RequestClusterResourceConstraint(ctx, constraintOf()); err != nil {
		t.Fatal(err)
	}
	if got := constraint(f); got != nil {
		t.Fatalf("an empty call must clear the constraint: %v", got)
	}
	f.s.Stop()
	f = newAutoscalerFixture(t, st)
	if got := constraint(f); got != nil {
		t.Fatalf("the cleared constraint came back after a restart: %v", got)
	}
}

// The autoscaler's new_capacity_estimates reach the placement-group manager, by group id;
// a late report's do not replace them.
func TestNewCapacityEstimatesReachPreemptionUnlessTheReportIsOlder(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	ctx := context.Background()
	report := func(version, expectedMs int64) {
		t.Helper()
		state := &pb.AutoscalingState{AutoscalerStateVersion: version, NewCapacityEstimates: []*pb.NewCapacityEstimate{
			{PlacementGroupId: "pg1", RayNodeTypeName: "gpu8", ExpectedRunningMs: expectedMs, LaunchLatencyMs: 30_000}}}
		if _, err := f.state.ReportAutoscalingState(ctx, &pb.ReportAutoscalingStateRequest{AutoscalingState: state}); err != nil {
			t.Fatal(err)
		}
	}
	expected := func() map[string]time.Time {
		f.s.pgs.mu.Lock()
		defer f.s.pgs.mu.Unlock()
		return f.s.pgs.newCapacity.expected
	}
	report(2, 1_800_000_030_000)
	report(1, 1_800_000_999_000)
	if got := expected(); len(got) != 1 || !got["pg1"].Equal(time.UnixMilli(1_800_000_030_000)) {
		t.Fatalf("estimates %v, want pg1 at the version 2 report's time", got)
	}
}

func TestClusterStatusCarriesTheLatestAutoscalingState(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	ctx := context.Background()
	status0, err := f.state.GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	if err != nil || status0.AutoscalingState != nil || status0.ClusterResourceState == nil {
		t.Fatalf("before any report: %v, %v", status0, err)
	}
	report := func(version int64, failure string) {
		t.Helper()
		state := &pb.AutoscalingState{AutoscalerStateVersion: version,
			PendingInstances:        []*pb.PendingInstance{{RayNodeTypeName: "gpu8", InstanceId: "i-1", Details: "ALLOCATED"}},
			FailedInstanceRequests:  []*pb.FailedInstanceRequest{{RayNodeTypeName: "gpu8", Count: 1, Reason: failure, FailedTs: 1_800_000_000}},
			PendingInstanceRequests: []*pb.PendingInstanceRequest{{RayNodeTypeName: "cpu", Count: 2}},
			LaunchedInstances:       map[string]int64{"gpu8": 3}}
		if _, err := f.state.ReportAutoscalingState(ctx, &pb.ReportAutoscalingStateRequest{AutoscalingState: state}); err != nil {
			t.Fatal(err)
		}
	}
	report(2, "InsufficientInstanceCapacity")
	report(1, "a late report")
	got, err := f.state.GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.AutoscalingState; s.GetAutoscalerStateVersion() != 2 || s.FailedInstanceRequests[0].Reason != "InsufficientInstanceCapacity" {
		t.Fatalf("status keeps the newest report: %v", s)
	}
	if got.ClusterResourceState.LastSeenAutoscalerStateVersion != 2 {
		t.Fatalf("last seen autoscaler version %d, want 2", got.ClusterResourceState.LastSeenAutoscalerStateVersion)
	}
	if _, err := f.state.ReportAutoscalingState(ctx, &pb.ReportAutoscalingStateRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an empty report: %v, want InvalidArgument", err)
	}

	// The head's /metrics shows the report.
	registry := prometheus.NewRegistry()
	registry.MustRegister(newTableCollector(f.s))
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, family := range families {
		for _, m := range family.Metric {
			key := family.GetName()
			for _, l := range m.Label {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			seen[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"raygo_autoscaler_pending_instances,node_type=cpu,state=REQUESTED":                   2,
		"raygo_autoscaler_pending_instances,node_type=gpu8,state=ALLOCATED":                  1,
		"raygo_autoscaler_recent_failures,cause=InsufficientInstanceCapacity,node_type=gpu8": 1,
		"raygo_autoscaler_launched_instances_total,node_type=gpu8":                           3,
		"raygo_autoscaler_infeasible_demands":                                                0,
	} {
		if got, ok := seen[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
}

// The SDK's tasks that wait for a worker are demand: ChooseLeaseTargets carries the
// scheduling key's backlog; a key placed with room now counts one fewer, and a key that
// stops asking is forgotten after taskBacklogTTL.
func TestWaitingTasksAreDemandUntilTheirKeyStopsAsking(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	f.register(&pb.NodeInfo{NodeId: "aaaa", ResourcesTotal: map[string]float64{"CPU": 4}})
	choose := func(key string, cpus float64, backlog int32) pb.LeaseOutcome {
		t.Helper()
		reply, err := f.c.actors.ChooseLeaseTargets(context.Background(), &pb.ChooseLeaseTargetsRequest{RequestId: key,
			Resources: map[string]float64{"CPU": cpus}, Backlog: backlog,
			SchedulingStrategy: &pb.SchedulingStrategy{Kind: pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_DEFAULT}})
		if err != nil {
			t.Fatal(err)
		}
		return reply.Outcome
	}
	if got := choose("big", 16, 5); got != pb.LeaseOutcome_LEASE_OUTCOME_INFEASIBLE {
		t.Fatalf("16 CPUs on a 4-CPU cluster: %s", got)
	}
	if got := choose("small", 1, 3); got != pb.LeaseOutcome_LEASE_OUTCOME_PLACED {
		t.Fatalf("1 CPU: %s", got)
	}
	shapes := map[float64]*pb.ResourceRequestByCount{}
	for _, s := range f.read().PendingResourceRequests {
		shapes[s.Request.ResourcesBundle["CPU"]] = s
	}
	if s := shapes[16]; s == nil || s.Count != 5 || s.PendingReason != string(pending.Infeasible) {
		t.Fatalf("16-CPU tasks: %v, want 5 Infeasible", s)
	}
	if s := shapes[1]; s == nil || s.Count != 2 || s.PendingReason != string(pending.NoResources) {
		t.Fatalf("1-CPU tasks: %v, want 2 (3 waiting, one about to run) NoResources", s)
	}
	choose("small", 1, 1) // the last one runs now: nothing of that key waits
	f.clock.Advance(taskBacklogTTL + time.Second)
	if got := f.read().PendingResourceRequests; len(got) != 0 {
		t.Fatalf("pending requests %v after the keys stopped asking, want none", got)
	}
}

// A spot interruption (a PREEMPTION drain of a running node) moves the node's bundles
// now, as its death would: the group reschedules them on another node and the preempted
// raylet releases them, while the node stays alive, draining, until its deadline.
func TestAPreemptionDrainMovesTheNodesBundlesNow(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	f.register(&pb.NodeInfo{NodeId: "aaaa", ResourcesTotal: map[string]float64{"CPU": 4}})
	id := f.createGroup("PACK", bundle(map[string]float64{"CPU": 2}, nil), bundle(map[string]float64{"CPU": 1}, nil))
	f.waitGroup(id, pb.PlacementGroupState_CREATED, "")
	f.register(&pb.NodeInfo{NodeId: "bbbb", ResourcesTotal: map[string]float64{"CPU": 4}})

	deadline := f.clock.Now().Add(2 * time.Minute)
	reply, err := f.state.DrainNode(context.Background(), &pb.AutoscalerDrainNodeRequest{NodeId: "aaaa",
		Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION, ReasonMessage: "spot interruption: terminate", DeadlineTimestampMs: deadline.UnixMilli()})
	if err != nil || !reply.IsAccepted {
		t.Fatalf("preemption drain: %v, %v", reply, err)
	}
	row := f.waitGroup(id, pb.PlacementGroupState_CREATED, "")
	for _, b := range row.Bundles {
		if b.NodeId != "bbbb" {
			t.Fatalf("bundle %d on %s after the preemption, want bbbb", b.BundleIndex, b.NodeId)
		}
	}
	eventually(t, 10*time.Second, "aaaa's raylet released the bundles", func() error {
		if held := f.raylets.Held("aaaa"); len(held) != 0 {
			return fmt.Errorf("aaaa still holds %v", held)
		}
		return nil
	})
	if n := f.node("aaaa"); n.Status != pb.NodeStatus_NODE_STATUS_DRAINING {
		t.Fatalf("the preempted node is %s, want DRAINING until its deadline", n.Status)
	}
}

// The preempted raylet's release of the moved bundles is sent again until it confirms
// (more than the five attempts it once got), while the group runs on elsewhere.
func TestAPreemptedRayletsReleaseIsSentAgainUntilConfirmed(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	f.register(&pb.NodeInfo{NodeId: "aaaa", ResourcesTotal: map[string]float64{"CPU": 4}})
	id := f.createGroup("PACK", bundle(map[string]float64{"CPU": 2}, nil))
	f.waitGroup(id, pb.PlacementGroupState_CREATED, "")
	f.register(&pb.NodeInfo{NodeId: "bbbb", ResourcesTotal: map[string]float64{"CPU": 4}})
	f.raylets.FailOn(reservertest.Cancel, "aaaa", errors.New("connection timed out"))
	reply, err := f.state.DrainNode(context.Background(), &pb.AutoscalerDrainNodeRequest{NodeId: "aaaa",
		Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION, DeadlineTimestampMs: f.clock.Now().Add(2 * time.Minute).UnixMilli()})
	if err != nil || !reply.IsAccepted {
		t.Fatalf("preemption drain: %v, %v", reply, err)
	}
	if row := f.waitGroup(id, pb.PlacementGroupState_CREATED, ""); row.Bundles[0].NodeId != "bbbb" {
		t.Fatalf("the group is on %s, want moved to bbbb", row.Bundles[0].NodeId)
	}
	eventually(t, 20*time.Second, "six cancels sent to aaaa", func() error {
		if n := cancelsTo(f.raylets.Fake, "aaaa"); n < 6 {
			return fmt.Errorf("%d cancel calls", n)
		}
		return nil
	})
	f.raylets.FailOn(reservertest.Cancel, "aaaa", nil)
	eventually(t, 10*time.Second, "aaaa's raylet released the bundle", func() error {
		if held := f.raylets.Held("aaaa"); len(held) != 0 {
			return fmt.Errorf("aaaa still holds %v", held)
		}
		return nil
	})
}

// On a spot interruption a group whose owner has a preemption hook is noticed first
// (reason SpotInterruption, deadline before the node's) and moves when the hook
// acknowledges; a group without one moves at once.
func TestASpotInterruptionNoticesHookedGroupsBeforeMovingThem(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	ctx := context.Background()
	f.register(&pb.NodeInfo{NodeId: "aaaa", ResourcesTotal: map[string]float64{"CPU": 4}})
	hooked := f.createGroup("PACK", bundle(map[string]float64{"CPU": 2}, nil))
	plain := f.createGroup("PACK", bundle(map[string]float64{"CPU": 2}, nil))
	f.waitGroup(hooked, pb.PlacementGroupState_CREATED, "")
	f.waitGroup(plain, pb.PlacementGroupState_CREATED, "")
	f.register(&pb.NodeInfo{NodeId: "bbbb", ResourcesTotal: map[string]float64{"CPU": 4}})

	notices := make(chan *pb.PreemptionNotice, 1)
	polling := make(chan struct{})
	go func() {
		close(polling)
		reply, err := f.c.pgs.WaitPreemptionNotice(ctx, &pb.WaitPreemptionNoticeRequest{PlacementGroupId: hooked, WaitMs: 20_000})
		if err != nil {
			t.Error(err)
		}
		notices <- reply.GetNotice()
	}()
	<-polling
	eventually(t, 5*time.Second, "the hook's poll is seen", func() error {
		f.s.pgs.mu.Lock()
		defer f.s.pgs.mu.Unlock()
		if f.s.pgs.groups[hooked].lastNoticePoll.IsZero() {
			return fmt.Errorf("no poll yet")
		}
		return nil
	})
	deadline := f.clock.Now().Add(2 * time.Minute)
	if reply, err := f.state.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{NodeId: "aaaa", Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION,
		DeadlineTimestampMs: deadline.UnixMilli()}); err != nil || !reply.IsAccepted {
		t.Fatalf("preemption drain: %v, %v", reply, err)
	}
	notice := <-notices
	if notice == nil || notice.Reason != string(reasonSpotInterruption) || notice.DeadlineMs > deadline.Add(-spotNoticeMargin).UnixMilli() {
		t.Fatalf("notice %v, want SpotInterruption ending %s before the node's deadline", notice, spotNoticeMargin)
	}
	if row := f.waitGroup(plain, pb.PlacementGroupState_CREATED, ""); row.Bundles[0].NodeId != "bbbb" {
		t.Fatalf("the group without a hook is on %s, want moved to bbbb at once", row.Bundles[0].NodeId)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(newTableCollector(f.s))
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := false
	for _, family := range families {
		for _, m := range family.Metric {
			if family.GetName() == "raygo_queue_preemptions_total" && m.GetCounter().GetValue() == 1 &&
				m.Label[0].GetValue() == "" && m.Label[1].GetValue() == string(reasonSpotInterruption) {
				counted = true
			}
		}
	}
	if !counted {
		t.Fatalf("no raygo_queue_preemptions_total{queue=\"\", reason=\"SpotInterruption\"} = 1 in %v", families)
	}
	reply, err := f.c.pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: hooked})
	if err != nil || reply.PlacementGroup.Bundles[0].NodeId != "aaaa" {
		t.Fatalf("the hooked group moved before its hook answered: %v, %v", reply, err)
	}
	if _, err := f.c.pgs.AckPreemptionNotice(ctx, &pb.AckPreemptionNoticeRequest{PlacementGroupId: hooked, TimeMs: notice.TimeMs}); err != nil {
		t.Fatal(err)
	}
	if row := f.waitGroup(hooked, pb.PlacementGroupState_CREATED, ""); row.Bundles[0].NodeId != "bbbb" {
		t.Fatalf("after the ack the hooked group is on %s, want bbbb", row.Bundles[0].NodeId)
	}
	eventually(t, 10*time.Second, "aaaa's raylet released both groups", func() error {
		if held := f.raylets.Held("aaaa"); len(held) != 0 {
			return fmt.Errorf("aaaa still holds %v", held)
		}
		return nil
	})
}

// The raylets' count of allocated GPUs idle for 10 minutes, by group, is the head's
// raygo_gpus_allocated_idle by the groups' queue.
func TestAllocatedIdleGPUsAreCountedByQueue(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	f.register(twoGPUNode("aaaa"))
	id := f.createGroup("PACK", bundle(map[string]float64{"GPU": 2}, nil))
	f.waitGroup(id, pb.PlacementGroupState_CREATED, "")
	if _, err := f.c.nodes.ReportHeartbeat(context.Background(), &pb.ReportHeartbeatRequest{NodeId: "aaaa", Unchanged: true,
		NodeSecret: f.secrets["aaaa"], IdleGpus: map[string]int32{id: 2}}); err != nil {
		t.Fatal(err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(newTableCollector(f.s))
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range families {
		if family.GetName() == "raygo_gpus_allocated_idle" {
			if m := family.Metric; len(m) != 1 || m[0].GetGauge().GetValue() != 2 || m[0].Label[0].GetValue() != "" {
				t.Fatalf("raygo_gpus_allocated_idle = %v, want 2 for queue \"\"", m)
			}
			return
		}
	}
	t.Fatal("no raygo_gpus_allocated_idle")
}

// The raylets' last GPU activity sample, sent with every report, is in GetAllNodeInfo's
// rows of ALIVE nodes (the state API and the dashboard read it there); a report without
// one clears it, and it is never stored.
func TestGPUActivityFromHeartbeatsIsListedWithTheNode(t *testing.T) {
	memory := store.NewMemory()
	f := newAutoscalerFixture(t, memory)
	f.register(twoGPUNode("aaaa"))
	activityOf := func() []*pb.GPUActivity {
		reply, err := f.c.nodes.GetAllNodeInfo(context.Background(), &pb.GetAllNodeInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range reply.Nodes {
			if n.NodeId == "aaaa" {
				return n.GpuActivity
			}
		}
		t.Fatal("aaaa not listed")
		return nil
	}
	report := func(activity ...*pb.GPUActivity) {
		t.Helper()
		if _, err := f.c.nodes.ReportHeartbeat(context.Background(), &pb.ReportHeartbeatRequest{NodeId: "aaaa", Unchanged: true,
			NodeSecret: f.secrets["aaaa"], GpuActivity: activity}); err != nil {
			t.Fatal(err)
		}
	}
	if got := activityOf(); len(got) != 0 {
		t.Fatalf("activity before any report: %v", got)
	}
	sample := []*pb.GPUActivity{{GpuIndex: 0, HasSmActive: true, SmActive: 0.25, HasMemory: true, FbUsedBytes: 1 << 30}, {GpuIndex: 1, HasMemory: true}}
	report(sample...)
	if got := activityOf(); len(got) != 2 || !proto.Equal(got[0], sample[0]) || !proto.Equal(got[1], sample[1]) {
		t.Fatalf("activity %v, want %v", got, sample)
	}
	rows, err := memory.GetAll(context.Background(), store.TableNodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range rows {
		stored := &pb.NodeInfo{}
		if err := proto.Unmarshal(raw, stored); err != nil || len(stored.GpuActivity) != 0 {
			t.Fatalf("a stored node row holds activity (%v): %v", err, stored.GpuActivity)
		}
	}
	report()
	if got := activityOf(); len(got) != 0 {
		t.Fatalf("activity after a report without it: %v", got)
	}
}
