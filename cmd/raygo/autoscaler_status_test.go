package main

import (
	"bytes"
	"strings"
	"testing"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func TestStatusPrintsRaysAutoscalerSections(t *testing.T) {
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
	printStatus(&out, "127.0.0.1:6380", &pb.GetClusterInfoReply{GcsEpoch: 1, Store: "redis"}, nodes, reply)
	text := out.String()
	want := []string{
		"Node status\n", "Active: 2\n",
		"Idle: 1\n node_aaaaaaaaaaaa  10.0.0.1  head  (idle 1m30s)\n",
		"Pending:\n gpu8, 2 launching\n 10.0.0.9: gpu8, ray_installing\n",
		"Recent failures:\n gpu8: InsufficientInstanceCapacity (latest_attempt: ",
		"Draining: 0\nDead: 0\n",
		"Resources\n", "Usage:\n", " 4.0/12.0 CPU\n",
		"From request_resources:\n {'CPU': 1.0}: 100 from request_resources()\n",
		"Pending Demands:\n {'CPU': 64.0}: 2+ pending tasks/actors (Infeasible)\n" +
			" {'CPU': 4.0, 'GPU': 1.0} * 2 (STRICT_PACK): 1+ pending placement groups\n" +
			" Infeasible: {'CPU': 64.0}: no node type has 64 CPUs\n",
	}
	at := 0
	for _, w := range want {
		i := strings.Index(text[at:], w)
		if i < 0 {
			t.Fatalf("status lacks %q after offset %d:\n%s", w, at, text)
		}
		at += i + len(w)
	}

	out.Reset()
	printStatus(&out, "127.0.0.1:6380", &pb.GetClusterInfoReply{GcsEpoch: 1, Store: "redis"}, nodes, &pb.GetClusterStatusReply{ClusterResourceState: &pb.ClusterResourceState{}})
	for _, w := range []string{"Idle: 0\n", "Pending:\n (no pending nodes)\n", "Recent failures:\n (no failures)\n",
		"From request_resources:\n (none)\n", "Pending Demands:\n (no resource demands)\n"} {
		if !strings.Contains(out.String(), w) {
			t.Fatalf("status of a cluster without demand lacks %q:\n%s", w, out.String())
		}
	}
}
