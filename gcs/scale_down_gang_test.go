package gcs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/gcs/store"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Voluntary scale-down never interrupts a running gang that has no checkpoint hook: a
// node holding one of its bundles is never idle (idle_duration_ms stays 0 however long
// nothing runs in the bundle, so the planner never picks it) and the GCS refuses its
// IDLE_TERMINATION drain. That holds while the gang runs and while it waits for a
// replacement of a node a spot interruption took (RESCHEDULING): its surviving bundles
// stay where they are.
func TestAnIdleDrainNeverTakesANodeOfAGangWithoutAHook(t *testing.T) {
	f := newAutoscalerFixture(t, store.NewMemory())
	ctx := context.Background()
	nodes := []string{"aaaa", "bbbb", "cccc"}
	for _, id := range nodes {
		f.register(&pb.NodeInfo{NodeId: id, ResourcesTotal: map[string]float64{"CPU": 4}})
	}
	cpu4 := map[string]float64{"CPU": 4}
	gang := f.createGroup("STRICT_SPREAD", bundle(cpu4, nil), bundle(cpu4, nil), bundle(cpu4, nil))
	f.waitGroup(gang, pb.PlacementGroupState_CREATED, "")

	refused := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if n := f.node(id); n.Status != pb.NodeStatus_NODE_STATUS_RUNNING || n.IdleDurationMs != 0 {
				t.Fatalf("node %s holding a bundle of the gang: %s, idle %d ms; want RUNNING, idle 0", id, n.Status, n.IdleDurationMs)
			}
			reply, err := f.state.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{NodeId: id,
				Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_IDLE_TERMINATION, ReasonMessage: "idle for longer than its node type's idle timeout"})
			if err != nil {
				t.Fatal(err)
			}
			if reply.IsAccepted || !strings.Contains(reply.RejectionReasonMessage, "1 placement-group bundle") {
				t.Fatalf("idle drain of %s, which holds a bundle of the gang: %v", id, reply)
			}
		}
	}
	// An hour with nothing running in the bundles: still not idle.
	f.clock.Advance(time.Hour)
	refused(nodes...)
	if f.raylet.calls() != 0 {
		t.Fatalf("DrainRaylet called %d times for refused drains", f.raylet.calls())
	}

	// A spot interruption takes aaaa; no node is free, so the gang waits for a
	// replacement with its other two bundles in place.
	if reply, err := f.state.DrainNode(ctx, &pb.AutoscalerDrainNodeRequest{NodeId: "aaaa", Reason: pb.DrainNodeReason_DRAIN_NODE_REASON_PREEMPTION,
		DeadlineTimestampMs: f.clock.Now().Add(2 * time.Minute).UnixMilli()}); err != nil || !reply.IsAccepted {
		t.Fatalf("preemption drain: %v, %v", reply, err)
	}
	var row *pb.PlacementGroupInfo
	eventually(t, 10*time.Second, "the gang rescheduling its lost bundle", func() error {
		reply, err := f.c.pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: gang})
		if err != nil {
			return err
		}
		row = reply.PlacementGroup
		if row.State != pb.PlacementGroupState_RESCHEDULING {
			return fmt.Errorf("state %s", row.State)
		}
		return nil
	})
	kept := map[string]bool{}
	for _, b := range row.Bundles {
		kept[b.NodeId] = true
	}
	if kept["aaaa"] || !kept["bbbb"] || !kept["cccc"] {
		t.Fatalf("bundles on %v while rescheduling, want bbbb and cccc kept, aaaa's lost", kept)
	}
	f.clock.Advance(time.Hour)
	refused("bbbb", "cccc")
	if f.raylet.calls() != 1 {
		t.Fatalf("DrainRaylet called %d times, want once (the preemption)", f.raylet.calls())
	}
}
