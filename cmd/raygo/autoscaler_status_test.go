package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// raygo status prints Ray's text (checked against Ray's own formatter in ray_status_test.go),
// then raygo's own sections.
func TestStatusPrintsRaysTextThenRaygos(t *testing.T) {
	nodes := []*pb.NodeInfo{
		{NodeId: "aaaaaaaaaaaaaaaa", NodeIp: "10.0.0.1", IsHeadNode: true, State: pb.NodeState_ALIVE,
			ResourcesTotal: map[string]float64{"CPU": 4}, ResourcesAvailable: map[string]float64{"CPU": 4}},
		{NodeId: "bbbbbbbbbbbbbbbb", NodeIp: "10.0.0.2", State: pb.NodeState_ALIVE,
			ResourcesTotal: map[string]float64{"CPU": 8, "GPU": 8}, ResourcesAvailable: map[string]float64{"CPU": 4, "GPU": 0}},
	}
	reply := &pb.GetClusterStatusReply{
		ClusterResourceState: &pb.ClusterResourceState{
			NodeStates: []*pb.AutoscalerNodeState{
				{NodeId: "aaaaaaaaaaaaaaaa", NodeIpAddress: "10.0.0.1", Status: pb.NodeStatus_NODE_STATUS_IDLE, IdleDurationMs: 90_000, RayNodeTypeName: "head"},
				{NodeId: "bbbbbbbbbbbbbbbb", NodeIpAddress: "10.0.0.2", Status: pb.NodeStatus_NODE_STATUS_RUNNING},
			},
			ClusterResourceConstraints: []*pb.ClusterResourceConstraint{{ResourceRequests: []*pb.ResourceRequestByCount{
				{Request: &pb.ResourceRequest{ResourcesBundle: map[string]float64{"CPU": 1}}, Count: 100}}}},
			PendingResourceRequests: []*pb.ResourceRequestByCount{
				{Request: &pb.ResourceRequest{ResourcesBundle: map[string]float64{"CPU": 64}}, Count: 2, PendingReason: "Infeasible"}},
			PendingGangResourceRequests: []*pb.GangResourceRequest{
				{Strategy: pb.PlacementStrategy_STRICT_PACK, PendingReason: "NoResources", Requests: []*pb.ResourceRequest{
					{ResourcesBundle: map[string]float64{"GPU": 1, "CPU": 4}}, {ResourcesBundle: map[string]float64{"GPU": 1, "CPU": 4}}}},
			},
		},
		AutoscalingState: &pb.AutoscalingState{
			PendingInstanceRequests:    []*pb.PendingInstanceRequest{{RayNodeTypeName: "gpu8", Count: 2}},
			PendingInstances:           []*pb.PendingInstance{{RayNodeTypeName: "gpu8", IpAddress: "10.0.0.9", Details: "RAY_INSTALLING"}},
			FailedInstanceRequests:     []*pb.FailedInstanceRequest{{RayNodeTypeName: "gpu8", Count: 1, Reason: "InsufficientInstanceCapacity", FailedTs: 1_800_000_000}},
			InfeasibleResourceRequests: []*pb.ResourceRequest{{ResourcesBundle: map[string]float64{"CPU": 64}}},
			InfeasibleReasons:          []string{"no node type has 64 CPUs"},
		},
	}
	var out bytes.Buffer
	now := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	nodes = append(nodes, &pb.NodeInfo{NodeId: "cccccccccccccccc", NodeIp: "10.0.0.3", State: pb.NodeState_ALIVE, IsDraining: true, DrainReason: "spot"},
		&pb.NodeInfo{NodeId: "dddddddddddddddd", NodeIp: "10.0.0.4", State: pb.NodeState_DEAD, DeathReason: "heartbeats stopped"})
	printStatus(&out, "127.0.0.1:6380", &pb.GetClusterInfoReply{GcsEpoch: 1, Store: "redis"}, nodes, reply, now, false)
	text := out.String()
	// Ray's text first, then raygo's own sections.
	if !strings.HasPrefix(text, formatRayStatus(reply, now, false)+"\n") {
		t.Fatalf("status does not start with Ray's text:\n%s", text)
	}
	want := []string{
		"======== raygo: 127.0.0.1:6380 (GCS epoch 1, redis store) ========\n",
		"Alive: 2\n node_aaaaaaaaaaaa  10.0.0.1  (head)\n node_bbbbbbbbbbbb  10.0.0.2\n",
		"Draining: 1\n node_cccccccccccc  10.0.0.3",
		"Dead: 1\n node_dddddddddddd  10.0.0.4  -- heartbeats stopped\n",
		"Recent failures (why):\n gpu8: InsufficientInstanceCapacity (",
		"Infeasible (autoscaler):\n Infeasible: {'CPU': 64.0}: no node type has 64 CPUs\n",
	}
	at := 0
	for _, w := range want {
		i := strings.Index(text[at:], w)
		if i < 0 {
			t.Fatalf("status lacks %q after offset %d:\n%s", w, at, text)
		}
		at += i + len(w)
	}
}
