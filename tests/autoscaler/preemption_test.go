package autoscaler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Wait or preempt on real processes: a head with 4 plain GPUs runs a low-priority group
// of 4; a training-high group of 4 in the same queue (withinClusterQueue:
// LowerPriority) could evict it, but the autoscaler can launch a 4-GPU node.

// waitOrPreemptYAML is a cluster whose gpu4 type launches in expected_launch_s (before a
// launch of it has been measured), at most gpuMax of them.
func waitOrPreemptYAML(name string, expectedLaunchS, gpuMax int) string {
	return fmt.Sprintf(`cluster_name: %s
max_workers: 2
provider:
  type: fake_multinode
  raygo:
    node_types:
      gpu4: {price_per_hour: 12.0, expected_launch_s: %d}
head_node_type: head
available_node_types:
  head:
    node_config: {}
    resources: {CPU: 1}
  gpu4:
    node_config: {}
    resources: {CPU: 4, GPU: 4}
    max_workers: %d
    idle_timeout_s: 600
`, name, expectedLaunchS, gpuMax)
}

// teamQueueYAML is one queue whose quota (16 GPUs) exceeds the head's 4: what holds its
// work back is capacity. scratch work has 1 s to checkpoint.
func teamQueueYAML(preemptionDelay string) string {
	return `queues:
  - name: team
    namespaces: ["team"]
    resources:
      GPU: {nominalQuota: 16}
    preemption:
      withinClusterQueue: LowerPriority
      preemptionDelay: ` + preemptionDelay + `
priorityClasses:
  - {name: scratch, value: 50, gracePeriod: 1s}
`
}

// startWaitOrPreempt starts the head (4 GPUs, the team queue, /metrics on the
// dashboard port it returns) with the autoscaler.
func startWaitOrPreempt(t *testing.T, name string, expectedLaunchS, gpuMax int, preemptionDelay string) (*autoscaled, string) {
	t.Helper()
	queues := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(queues, []byte(teamQueueYAML(preemptionDelay)), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAutoscaled(t, waitOrPreemptYAML(name, expectedLaunchS, gpuMax), "--num-gpus", "4", "--queues", queues,
		"--dashboard-port", "0")
	return a, a.DashboardAddress(t, "")
}

// decisions is the head's raygo_preemption_decisions_total of the cause (0 when absent).
func decisions(t *testing.T, dashboard, cause string) float64 {
	t.Helper()
	families, err := harness.Scrape(t, dashboard)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := harness.MetricValue(families, "raygo_preemption_decisions_total", "cause", cause)
	return n
}

// createTeam makes a detached PACK group of n GPUs in the team queue at the priority.
func (a *autoscaled) createTeam(t *testing.T, priority string, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: "detached", Namespace: "team", Priority: priority}
	for _, b := range gpuBundles(n) {
		req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: b})
	}
	reply, err := a.pgs.CreatePlacementGroup(ctx, req)
	if err != nil {
		t.Fatalf("create placement group: %v", err)
	}
	return reply.PlacementGroup.PlacementGroupId
}

// watchUntilCreated polls the group until it is CREATED and returns every pending
// reason code it showed meanwhile.
func (a *autoscaled) watchUntilCreated(t *testing.T, id string) (*pb.PlacementGroupInfo, map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	var row *pb.PlacementGroupInfo
	poll.Until(t, 90*time.Second, 20*time.Millisecond, "group "+id+" CREATED", func() error {
		row = a.group(t, id)
		if row.State == pb.PlacementGroupState_CREATED {
			return nil
		}
		seen[row.PendingReasonCode] = true
		return fmt.Errorf("state %s (%s)", row.State, row.PendingReason)
	})
	return row, seen
}

// nodeTypeOf is the autoscaler node type of the node ("" for the head).
func (a *autoscaled) nodeTypeOf(t *testing.T, nodeID string) string {
	t.Helper()
	nodes, err := a.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.NodeId == nodeID {
			return n.Labels[nodelabel.NodeType]
		}
	}
	t.Fatalf("node %s is not in the node table", nodeID)
	return ""
}

// The done-when: a preemptor that the autoscaler can serve within its delay
// waits for the new node and evicts nothing. gpu4 launches in 30 s by its
// expected_launch_s, the queue's preemptionDelay is 10 minutes.
func TestAPreemptorTheAutoscalerServesWithinItsDelayWaitsForTheNewNode(t *testing.T) {
	a, dashboard := startWaitOrPreempt(t, "wait-for-node", 30, 1, "10m")
	low := a.createTeam(t, "development", 4)
	a.waitCreated(t, low)
	a.CheckInvariants("the low-priority group runs")

	high := a.createTeam(t, "training-high", 4)
	row, seen := a.watchUntilCreated(t, high)
	// The decision to wait set WaitingForNewNode (the GCS's tests show the code); the
	// node may join within a poll of the row, so the decision is read from the counter.
	if n := decisions(t, dashboard, "new_capacity_sooner"); n < 1 {
		t.Fatalf("no preemption decision waited for the new node (raygo_preemption_decisions_total{cause=new_capacity_sooner} = %g); pending reasons seen: %v", n, seen)
	}
	if seen[string(pending.PreemptionDelay)] {
		t.Fatalf("the preemptor showed PreemptionDelay (it chose victims): %v", seen)
	}
	for i, b := range row.Bundles {
		if got := a.nodeTypeOf(t, b.NodeId); got != "gpu4" {
			t.Fatalf("preemptor bundle %d is on node %s of type %q, want the new gpu4 node", i, b.NodeId, got)
		}
	}
	lowRow := a.group(t, low)
	if lowRow.State != pb.PlacementGroupState_CREATED || lowRow.Preemptions != 0 || lowRow.LastPreemption != nil {
		t.Fatalf("the low-priority group: %s with %d notices (%v), want CREATED and never noticed", lowRow.State, lowRow.Preemptions, lowRow.LastPreemption)
	}
	a.CheckInvariants("the preemptor runs on the new node")
}

// The converse: when the autoscaler cannot bring a node (gpu4's max_workers is 0), the
// preemptor evicts the low-priority group once its 2 s preemptionDelay has passed, without
// ever saying WaitingForNewNode; the victim is queued again with Preempted, and runs again
// once the preemptor is removed.
func TestAPreemptorTheAutoscalerCannotServePreemptsAfterItsDelay(t *testing.T) {
	a, dashboard := startWaitOrPreempt(t, "no-node", 30, 0, "2s")
	low := a.createTeam(t, "scratch", 4)
	a.waitCreated(t, low)
	a.CheckInvariants("the low-priority group runs")

	high := a.createTeam(t, "training-high", 4)
	row, seen := a.watchUntilCreated(t, high)
	if seen[string(pending.WaitingForNewNode)] || !seen[string(pending.PreemptionDelay)] {
		t.Fatalf("the preemptor's pending reasons were %v: want PreemptionDelay, never WaitingForNewNode", seen)
	}
	if n := decisions(t, dashboard, "new_capacity_sooner"); n != 0 {
		t.Fatalf("%g preemption decisions waited for a new node, want none", n)
	}
	if got := a.nodeTypeOf(t, row.Bundles[0].NodeId); got != "" {
		t.Fatalf("the preemptor is on a %q node, want the head", got)
	}
	lowRow := a.group(t, low)
	if lowRow.State != pb.PlacementGroupState_PENDING || lowRow.PendingReasonCode != string(pending.Preempted) ||
		lowRow.Preemptions != 1 || lowRow.LastPreemption.GetReason() != "InClusterQueue" || lowRow.LastPreemption.GetPreemptorId() != high {
		t.Fatalf("the victim: %s %q with %d notices (%v); want PENDING Preempted, one InClusterQueue notice from %s",
			lowRow.State, lowRow.PendingReasonCode, lowRow.Preemptions, lowRow.LastPreemption, high)
	}
	if launched := a.launched(t); len(launched) != 0 {
		t.Fatalf("nodes launched: %v, want none (max_workers 0)", launched)
	}
	a.CheckInvariants("the preemptor runs, the victim is queued")

	a.remove(t, high)
	a.waitCreated(t, low)
	a.CheckInvariants("the victim runs again")
}
