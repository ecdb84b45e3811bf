package gcs

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/gcs/store"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// ChooseLeaseTargets answers with the actor scheduler's choice over the registered
// nodes, their raylet addresses, and a reason when no node has room.
func TestChooseLeaseTargets(t *testing.T) {
	f := newActorFixture(t, store.NewMemory())
	ctx := context.Background()
	register := func(id, address string, total, available float64) {
		t.Helper()
		node := &pb.NodeInfo{NodeId: id, RayletAddress: address,
			ResourcesTotal: map[string]float64{"CPU": total}, ResourcesAvailable: map[string]float64{"CPU": available}}
		if _, err := f.c.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node}); err != nil {
			t.Fatal(err)
		}
	}
	// n1 is 75% used, n2 25% (under the spread threshold), n3 small.
	register("n1", "127.0.0.1:11", 8, 2)
	register("n2", "127.0.0.1:12", 8, 6)
	register("n3", "127.0.0.1:13", 1, 1)
	choose := func(cpus float64, strategy *pb.SchedulingStrategy) *pb.ChooseLeaseTargetsReply {
		t.Helper()
		reply, err := f.c.actors.ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{RequestId: "key-1",
			Resources: map[string]float64{"CPU": cpus}, SchedulingStrategy: strategy})
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	addresses := func(reply *pb.ChooseLeaseTargetsReply) []string {
		var out []string
		for _, target := range reply.Targets {
			out = append(out, target.RayletAddress)
		}
		return out
	}

	if got := choose(2, nil); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_PLACED ||
		!slices.Equal(addresses(got), []string{"127.0.0.1:12", "127.0.0.1:11"}) || !got.Targets[0].AvailableNow {
		t.Errorf("DEFAULT: %v", got)
	} else if len(got.Rejected) != 1 || got.Rejected[0].NodeId != "n3" || got.Rejected[0].Code != "insufficient_total" {
		t.Errorf("DEFAULT rejections: %v", got.Rejected)
	}
	if got := choose(7, nil); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_NOT_NOW || len(got.Targets) != 2 ||
		got.Targets[0].AvailableNow || !strings.Contains(got.Reason, "available now") {
		t.Errorf("DEFAULT without room: %v", got)
	}
	if got := choose(64, nil); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_INFEASIBLE || len(got.Targets) != 0 || !strings.Contains(got.Reason, "infeasible") {
		t.Errorf("DEFAULT, too large: %v", got)
	}
	spread := &pb.SchedulingStrategy{Kind: strategySpread}
	first, second := choose(1, spread), choose(1, spread)
	if first.Targets[0].NodeId == second.Targets[0].NodeId {
		t.Errorf("SPREAD led twice with %s", first.Targets[0].NodeId)
	}
	if got := choose(1, &pb.SchedulingStrategy{Kind: strategyNodeAffinity, NodeId: "gone"}); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_UNSCHEDULABLE ||
		got.ReasonCode != "dead" || !strings.Contains(got.Reason, "node gone is not ALIVE") {
		t.Errorf("hard affinity to a missing node: %v", got)
	}
	if got := choose(1, &pb.SchedulingStrategy{Kind: strategyPlacementGroup, PlacementGroupId: "ab", BundleIndex: -1}); got.Outcome != pb.LeaseOutcome_LEASE_OUTCOME_UNSCHEDULABLE ||
		got.ReasonCode != "group_removed" {
		t.Errorf("unknown placement group: %v", got)
	}
	_, err := f.c.actors.ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{Resources: map[string]float64{"CPU": -1}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `resources["CPU"]`) {
		t.Errorf("negative CPU: %v", err)
	}
	_, err = f.c.actors.ChooseLeaseTargets(ctx, &pb.ChooseLeaseTargetsRequest{SchedulingStrategy: &pb.SchedulingStrategy{Kind: strategyNodeAffinity}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "scheduling_strategy.node_id") {
		t.Errorf("affinity without a node: %v", err)
	}
}
