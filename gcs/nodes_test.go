package gcs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/gcs/store"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func TestAKeepAliveChangesNothingAndAnUnknownVersionAsksForAFullReport(t *testing.T) {
	m := newNodeManager(nodeDeps{store: store.NewMemory(), log: zerolog.Nop(), now: time.Now, gossipAddress: func() string { return "" }})
	ctx := context.Background()
	node := &pb.NodeInfo{NodeId: "a", RayletAddress: "127.0.0.1:1", ResourcesTotal: map[string]float64{"CPU": 4}, ResourcesAvailable: map[string]float64{"CPU": 4}}
	registered, err := m.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	available := func() float64 { return m.aliveNodes()[0].ResourcesAvailable["CPU"] }
	secret := registered.NodeSecret

	full := &pb.ReportHeartbeatRequest{NodeId: "a", ResourcesAvailable: map[string]float64{"CPU": 1}, ResourcesVersion: 3, NodeSecret: secret}
	if reply, err := m.ReportHeartbeat(ctx, full); err != nil || reply.SendFullReport {
		t.Fatalf("full report: %v %v", reply, err)
	}
	keepAlive := &pb.ReportHeartbeatRequest{NodeId: "a", ResourcesVersion: 3, Unchanged: true, NodeSecret: secret}
	if reply, err := m.ReportHeartbeat(ctx, keepAlive); err != nil || reply.SendFullReport {
		t.Fatalf("keep-alive at the known version: %v %v", reply, err)
	}
	if got := available(); got != 1 {
		t.Fatalf("after a keep-alive the GCS says %v CPU available, want the last report's 1", got)
	}
	stale := &pb.ReportHeartbeatRequest{NodeId: "a", ResourcesVersion: 7, Unchanged: true, NodeSecret: secret}
	if reply, err := m.ReportHeartbeat(ctx, stale); err != nil || !reply.SendFullReport {
		t.Fatalf("keep-alive naming a version the GCS never saw: %v %v, want send_full_report", reply, err)
	}
	if got := available(); got != 1 {
		t.Fatalf("a keep-alive changed the resources: %v", got)
	}
}

func TestANodeWithABadLabelIsRefusedAtRegistration(t *testing.T) {
	m := newNodeManager(nodeDeps{store: store.NewMemory(), log: zerolog.Nop(), now: time.Now, gossipAddress: func() string { return "" }})
	node := &pb.NodeInfo{NodeId: "a", RayletAddress: "127.0.0.1:1", ResourcesTotal: map[string]float64{"CPU": 4},
		Labels: map[string]string{"zone": "us east"}}
	_, err := m.RegisterNode(context.Background(), &pb.RegisterNodeRequest{Node: node})
	if status.Code(statusOf(err)) != codes.InvalidArgument || !strings.Contains(err.Error(), `node.labels["zone"]`) {
		t.Fatalf("%v, want InvalidArgument naming node.labels[\"zone\"]", err)
	}
	if len(m.aliveNodes()) != 0 {
		t.Fatal("the node was registered")
	}
}
