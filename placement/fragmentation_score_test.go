package placement_test

import (
	"reflect"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// islandNode is a node with gpus GPUs in one NVLink island, the first used of them taken.
func islandNode(id string, gpus, used int) placement.Node {
	total := resources.Set{"CPU": 32 * gpu, "GPU": resources.Amount(gpus) * gpu}
	available := resources.Set{"CPU": 32 * gpu, "GPU": resources.Amount(gpus-used) * gpu}
	node := placement.Node{ID: placement.NodeID(id), Total: total, Available: available, Alive: true}
	for g := range gpus {
		free := resources.Amount(gpu)
		if g < used {
			free = 0
		}
		node.GPUs = append(node.GPUs, placement.GPU{Index: g, NVLinkIsland: 0, Rail: -1, Available: free})
	}
	return node
}

func TestFragmentationStageChoosesTheLeastGrowth(t *testing.T) {
	// Node a has 2 of 4 GPUs free, b all 4. Best fit puts one GPU on a; for a workload
	// of 2-GPU tasks that strands a's last GPU, while on b three GPUs stay, two of them
	// usable together.
	snapshot, err := placement.NewSnapshot([]placement.Node{islandNode("a", 4, 2), islandNode("b", 4, 0)})
	if err != nil {
		t.Fatal(err)
	}
	twoGPUs := placement.WorkloadDistribution{Shapes: []placement.WorkloadShape{{CPU: gpu, GPUs: 2, Weight: 1}}}
	cases := []struct {
		name     string
		strategy placement.Strategy
		topology placement.Topology
		workload *placement.WorkloadDistribution
		want     placement.NodeID
	}{
		{"no workload: best fit", placement.StrategyPack, "", nil, "a"},
		{"empty workload: best fit", placement.StrategyPack, "", &placement.WorkloadDistribution{}, "a"},
		{"PACK with a workload: least fragmentation", placement.StrategyPack, "", &twoGPUs, "b"},
		// STRICT_PACK asks for an NVLink island, SPREAD of whole GPUs for the fabric: the
		// island best fit stays first. With topology "node" they ask for neither.
		{"STRICT_PACK with a workload: the island first", placement.StrategyStrictPack, "", &twoGPUs, "a"},
		{"SPREAD with a workload: the island first", placement.StrategySpread, "", &twoGPUs, "a"},
		{"STRICT_PACK by nodes alone with a workload: least fragmentation", placement.StrategyStrictPack, placement.TopologyNode, &twoGPUs, "b"},
		{"SPREAD by nodes alone with a workload: least fragmentation", placement.StrategySpread, placement.TopologyNode, &twoGPUs, "b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			request := placement.Request{Bundles: []resources.Set{parseResources("CPU=1 GPU=1")}, Strategy: c.strategy, Topology: c.topology, Workload: c.workload}
			plan, err := placement.Schedule(snapshot, request)
			if err != nil {
				t.Fatal(err)
			}
			if got := plan.Placements[0].NodeID; got != c.want {
				t.Fatalf("placed on %s, want %s", got, c.want)
			}
		})
	}
}

// A share of a GPU goes where it strands least: on the node whose free GPUs the
// workload's whole-GPU tasks cannot use anyway.
func TestFragmentationStagePacksShares(t *testing.T) {
	half := islandNode("a", 2, 0)
	half.GPUs[0].Available = gpu / 2
	half.Available["GPU"] = 3 * gpu / 2
	snapshot, err := placement.NewSnapshot([]placement.Node{islandNode("0-idle", 2, 0), half})
	if err != nil {
		t.Fatal(err)
	}
	whole := placement.WorkloadDistribution{Shapes: []placement.WorkloadShape{{GPUs: 1, Weight: 3}, {GPUFraction: gpu / 2, Weight: 1}}}
	request := placement.Request{Bundles: []resources.Set{parseResources("CPU=1 GPU=0.5")}, Workload: &whole}
	plan, err := placement.Schedule(snapshot, request)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Placements[0]; got.NodeID != "a" || !reflect.DeepEqual(got.GPUIndices, []int{0}) {
		t.Fatalf("placed %+v, want GPU 0 of node a", got)
	}
}

// Each shape is measured with its own selector, including shapes that share one (the
// stage evaluates each distinct selector once per node). Two shapes of 2-GPU tasks ask
// for zone a, one for zone b: one GPU more taken on a strands the last one for them,
// on b it strands one only for the zone-b shape.
func TestFragmentationStageReadsEachShapesSelector(t *testing.T) {
	a, b := islandNode("a", 4, 2), islandNode("b", 4, 2)
	a.Labels, b.Labels = map[string]string{"zone": "a"}, map[string]string{"zone": "b"}
	snapshot, err := placement.NewSnapshot([]placement.Node{a, b})
	if err != nil {
		t.Fatal(err)
	}
	zone := func(value string) nodelabel.Selector {
		return nodelabel.Selector{{Key: "zone", Values: []string{value}}}
	}
	workload := placement.WorkloadDistribution{Shapes: []placement.WorkloadShape{
		{GPUs: 2, Selector: zone("b"), Weight: 1},
		{GPUs: 2, Selector: zone("a"), Weight: 1},
		{GPUs: 2, Selector: zone("a"), Weight: 1},
	}}
	request := placement.Request{Bundles: []resources.Set{parseResources("CPU=1 GPU=1")}, Strategy: placement.StrategyPack, Workload: &workload}
	plan, err := placement.Schedule(snapshot, request)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Placements[0].NodeID; got != "b" {
		t.Fatalf("placed on %s, want b (growth 1/3 on a, -1/3 on b)", got)
	}
}
