package placement_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	"github.com/raygo-dev/raygo/placement/placementsim"
)

// Random clusters and random sequences of create / remove / node death / drain / join,
// applied through the in-memory cluster of placementsim, with the invariants checked
// after every step:
//   - no partial gang: a plan places every requested bundle, or Schedule fails;
//   - no double allocation: per node, reserved <= total and ledger == snapshot; per GPU,
//     no more than a whole GPU reserved, a whole-GPU bundle's GPUs held by it alone,
//     and GPU indices as each bundle's amount says;
//   - STRICT_SPREAD on distinct nodes; STRICT_PACK on one node, or kept in NVLink
//     islands, every whole GPU in one island (node-local or one multi-node domain);
//     selectors honoured;
//   - no leak: after removing every group, available == total, every GPU wholly free;
//   - decisions are deterministic, and NotNow / Infeasible agree with the same request
//     on the cluster with every node idle.
//
// The clusters mix nodes without GPU info, DGX H100 (one island of 8), PCIe NVLink
// pairs and GB200 trays of two NVL72 domains, over two scalable units.
//
// Seeded and bounded: a failure prints the seed and step to replay.
func TestInvariantsUnderRandomOperations(t *testing.T) {
	const (
		seeds = 60
		steps = 200
	)
	outcomes := map[string]int{} // how often each path ran, so a weakened generator shows
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		cluster := placementsim.NewCluster(mustSnapshot(t, placementsim.RandomSmallCluster(rng)))
		for step := range steps {
			operation := runRandomOperation(t, rng, cluster, outcomes)
			fail := func(err error) { t.Fatalf("seed %d, step %d (%s):\n%v", seed, step, operation, err) }
			incomplete := countIncomplete(cluster)
			waiting, err := cluster.Reschedule()
			if err != nil {
				fail(err)
			}
			outcomes["rescheduled"] += incomplete - len(waiting)
			if err := cluster.CheckInvariants(); err != nil {
				fail(err)
			}
		}
		outcomes["groups removed at the end"] += len(cluster.Groups())
		for _, group := range cluster.Groups() {
			if err := cluster.Remove(group.ID); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if err := cluster.CheckNoLeaks(); err != nil {
			t.Fatalf("seed %d: after removing every group: %v", seed, err)
		}
		for _, node := range cluster.Snapshot().Nodes() {
			if node.Alive && !node.Available.Equal(node.Total) {
				t.Fatalf("seed %d: node %s available %s != total %s", seed, node.ID, node.Available, node.Total)
			}
			for _, gpu := range node.GPUs {
				if node.Alive && gpu.Available != resources.AmountScale {
					t.Fatalf("seed %d: node %s GPU %d available %s after removing every group", seed, node.ID, gpu.Index, gpu.Available)
				}
			}
		}
	}
	t.Logf("outcomes: %v", outcomes)
	for _, path := range []string{"placed", "not now", "infeasible", "rescheduled", "kill",
		"GPU indices", "fractional GPU shared", "STRICT_PACK across an NVLink domain", "STRICT_PACK in an island of a node with several"} {
		if outcomes[path] == 0 {
			t.Errorf("no %q in %d seeds: the generators no longer exercise it", path, seeds)
		}
	}
}

func countIncomplete(cluster *placementsim.Cluster) int {
	count := 0
	for _, group := range cluster.Groups() {
		if !group.Complete() {
			count++
		}
	}
	return count
}

// runRandomOperation applies one random operation and returns its description.
func runRandomOperation(t *testing.T, rng *rand.Rand, cluster *placementsim.Cluster, outcomes map[string]int) string {
	t.Helper()
	aliveNodes := func() []placement.NodeID {
		var ids []placement.NodeID
		for _, node := range cluster.Snapshot().Nodes() {
			if node.Alive {
				ids = append(ids, node.ID)
			}
		}
		return ids
	}
	switch roll := rng.IntN(100); {
	case roll < 55:
		request := placementsim.RandomRequest(rng)
		if len(request.Bundles)%2 == 0 {
			// Half the groups (chosen without drawing from rng, so the sequences stay
			// as they were) run the fragmentation scoring stage too.
			request.Workload = &propertyWorkload
		}
		outcomes[createChecked(t, cluster, request, outcomes)]++
		return fmt.Sprintf("create %s %v selectors=%v", request.Strategy, request.Bundles, request.BundleLabelSelectors)
	case roll < 80:
		groups := cluster.Groups()
		if len(groups) == 0 {
			return "remove (no groups)"
		}
		group := groups[rng.IntN(len(groups))]
		if err := cluster.Remove(group.ID); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("remove group %d", group.ID)
	case roll < 88:
		ids := aliveNodes()
		if len(ids) <= 1 {
			return "kill (too few nodes)"
		}
		id := ids[rng.IntN(len(ids))]
		if err := cluster.KillNode(id); err != nil {
			t.Fatal(err)
		}
		outcomes["kill"]++
		return "kill node " + string(id)
	case roll < 92:
		ids := aliveNodes()
		id := ids[rng.IntN(len(ids))]
		if err := cluster.DrainNode(id); err != nil {
			t.Fatal(err)
		}
		return "drain node " + string(id)
	default:
		node := placementsim.RandomNode(rng)
		if err := cluster.AddNode(node); err != nil {
			t.Fatal(err)
		}
		return "add node " + string(node.ID)
	}
}

// createChecked schedules a new group, checks the decision, and places it. It returns
// the outcome: "placed", "not now" or "infeasible".
func createChecked(t *testing.T, cluster *placementsim.Cluster, request placement.Request, outcomes map[string]int) string {
	t.Helper()
	snapshot := cluster.Snapshot()
	plan, err := placement.Schedule(snapshot, request)
	again, againErr := placement.Schedule(snapshot, request)
	if !reflect.DeepEqual(plan, again) || fmt.Sprint(err) != fmt.Sprint(againErr) {
		t.Fatalf("the same decision came out twice differently: %+v %v / %+v %v", plan, err, again, againErr)
	}
	var unschedulable *placement.UnschedulableError
	switch {
	case err == nil:
		if _, err := cluster.Place(request, plan); err != nil {
			t.Fatalf("placing %+v: %v", plan, err)
		}
		countTopologyPaths(snapshot, request, plan, outcomes)
		return "placed"
	case errors.As(err, &unschedulable):
		if len(plan.Placements) != 0 {
			t.Fatalf("a failed decision returned placements: %+v", plan)
		}
		checkKindOnIdleCluster(t, snapshot, request, unschedulable)
		return unschedulable.Kind.String()
	default:
		t.Fatalf("Schedule of a valid request: %v", err)
		return ""
	}
}

// checkKindOnIdleCluster: NotNow means the same request succeeds once every node is
// idle; Infeasible means it still fails, as Infeasible.
func checkKindOnIdleCluster(t *testing.T, snapshot *placement.Snapshot, request placement.Request, failure *placement.UnschedulableError) {
	t.Helper()
	nodes := snapshot.Nodes()
	for i := range nodes {
		nodes[i].Available = nodes[i].Total.Clone()
		for g := range nodes[i].GPUs {
			nodes[i].GPUs[g].Available = resources.AmountScale
		}
	}
	_, err := placement.Schedule(mustSnapshot(t, nodes), request)
	var idleFailure *placement.UnschedulableError
	switch failure.Kind {
	case placement.NotNow:
		if err != nil {
			t.Fatalf("NotNow (%v) but on the idle cluster: %v", failure, err)
		}
	case placement.Infeasible:
		if !errors.As(err, &idleFailure) || idleFailure.Kind != placement.Infeasible {
			t.Fatalf("Infeasible (%v) but on the idle cluster: %v", failure, err)
		}
	}
	tooFewNodes := failure.Strategy == placement.StrategyStrictSpread && failure.BundleIndex < 0
	if len(failure.NodeReasons) == 0 && snapshot.NumNodes() > 0 && !tooFewNodes {
		t.Fatalf("a failure without node reasons: %v", failure)
	}
}

// countTopologyPaths notes which GPU-topology paths a placed plan took, so a generator
// that stops reaching them shows.
func countTopologyPaths(snapshot *placement.Snapshot, request placement.Request, plan placement.Plan, outcomes map[string]int) {
	nodes := map[placement.NodeID]bool{}
	shared := map[string]bool{}
	for _, p := range plan.Placements {
		nodes[p.NodeID] = true
		if len(p.GPUIndices) > 0 {
			outcomes["GPU indices"]++
		}
		if request.Bundles[p.BundleIndex]["GPU"] < resources.AmountScale && len(p.GPUIndices) == 1 {
			key := fmt.Sprint(p.NodeID, p.GPUIndices[0])
			if shared[key] {
				outcomes["fractional GPU shared"]++
			}
			shared[key] = true
		}
	}
	if request.Strategy != placement.StrategyStrictPack || len(plan.Placements) == 0 {
		return
	}
	if len(nodes) > 1 {
		outcomes["STRICT_PACK across an NVLink domain"]++
		return
	}
	node, _ := snapshot.Node(plan.Placements[0].NodeID)
	islands := map[int]bool{}
	for _, gpu := range node.GPUs {
		islands[gpu.NVLinkIsland] = true
	}
	if len(islands) > 1 && request.Topology != placement.TopologyNode {
		outcomes["STRICT_PACK in an island of a node with several"]++
	}
}

func mustSnapshot(t *testing.T, nodes []placement.Node) *placement.Snapshot {
	t.Helper()
	snapshot, err := placement.NewSnapshot(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot
}

// propertyWorkload is a mixed workload for the fragmentation scoring stage: whole GPUs
// (one, and eight in one NVLink island), a GPU share, CPU only.
var propertyWorkload = placement.WorkloadDistribution{Shapes: []placement.WorkloadShape{
	{CPU: 8 * resources.AmountScale, GPUs: 1, Weight: 4},
	{CPU: 8 * resources.AmountScale, GPUs: 8, OneIsland: true, Weight: 1},
	{CPU: 2 * resources.AmountScale, GPUFraction: resources.AmountScale / 2, Weight: 2},
	{CPU: 4 * resources.AmountScale, Weight: 1},
}}
