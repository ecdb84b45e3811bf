package placement_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

const gpu = resources.AmountScale

func gpuShares(shares ...float64) []resources.Amount {
	out := make([]resources.Amount, len(shares))
	for i, share := range shares {
		out[i] = resources.Amount(math.Round(share * gpu))
	}
	return out
}

func TestNodeFragmentationPerShape(t *testing.T) {
	h100 := nodelabel.Selector{{Key: placement.LabelAcceleratorType, Values: []string{"H100"}}}
	cpus := func(n int) resources.Amount { return resources.Amount(n * gpu) }
	cases := []struct {
		name  string
		node  placement.FragmentationNode
		shape placement.WorkloadShape
		want  float64 // unusable GPUs
	}{
		{"idle node, one whole GPU", placement.FragmentationNode{FreeCPU: cpus(8), GPUFree: gpuShares(1, 1, 1, 1)},
			placement.WorkloadShape{CPU: cpus(1), GPUs: 1}, 0},
		{"partly used GPUs strand whole-GPU tasks", placement.FragmentationNode{FreeCPU: cpus(8), GPUFree: gpuShares(0.5, 0.25, 1, 1)},
			placement.WorkloadShape{CPU: cpus(1), GPUs: 2}, 0.75},
		{"too few whole GPUs: all free is unusable", placement.FragmentationNode{FreeCPU: cpus(8), GPUFree: gpuShares(0.5, 1, 1, 0)},
			placement.WorkloadShape{CPU: cpus(1), GPUs: 4}, 2.5},
		{"fraction: GPUs with less free are unusable", placement.FragmentationNode{FreeCPU: cpus(8), GPUFree: gpuShares(0.25, 0.5, 1)},
			placement.WorkloadShape{CPU: cpus(1), GPUFraction: gpu / 2}, 0.25},
		{"fraction fits no GPU", placement.FragmentationNode{FreeCPU: cpus(8), GPUFree: gpuShares(0.25, 0.3)},
			placement.WorkloadShape{CPU: cpus(1), GPUFraction: gpu / 2}, 0.55},
		{"CPU short", placement.FragmentationNode{FreeCPU: cpus(1), GPUFree: gpuShares(1, 1)},
			placement.WorkloadShape{CPU: cpus(2), GPUs: 1}, 2},
		{"memory short", placement.FragmentationNode{FreeCPU: cpus(4), FreeMemory: 10, GPUFree: gpuShares(1, 1)},
			placement.WorkloadShape{CPU: cpus(2), Memory: 11, GPUs: 1}, 2},
		{"CPU-only task uses no GPU", placement.FragmentationNode{FreeCPU: cpus(4), GPUFree: gpuShares(1, 0.5)},
			placement.WorkloadShape{CPU: cpus(2)}, 1.5},
		{"MIG slice uses no whole GPU", placement.FragmentationNode{FreeCPU: cpus(4), GPUFree: gpuShares(1)},
			placement.WorkloadShape{MIGProfile: "nvidia.com/mig-1g.10gb", GPUFraction: 0}, 1},
		{"wrong GPU model", placement.FragmentationNode{FreeCPU: cpus(4), GPUFree: gpuShares(1, 1), Labels: map[string]string{placement.LabelAcceleratorType: "A100"}},
			placement.WorkloadShape{CPU: cpus(1), GPUs: 1, Selector: h100}, 2},
		{"right GPU model", placement.FragmentationNode{FreeCPU: cpus(4), GPUFree: gpuShares(1, 1), Labels: map[string]string{placement.LabelAcceleratorType: "H100"}},
			placement.WorkloadShape{CPU: cpus(1), GPUs: 1, Selector: h100}, 0},
		{"one island: small islands strand their free GPUs", placement.FragmentationNode{FreeCPU: cpus(8), GPUFree: gpuShares(1, 1, 1, 0, 1, 1, 1, 1), GPUIslands: []int32{0, 0, 0, 0, 1, 1, 1, 1}},
			placement.WorkloadShape{CPU: cpus(1), GPUs: 4, OneIsland: true}, 3},
		{"one island: none large enough", placement.FragmentationNode{FreeCPU: cpus(8), GPUFree: gpuShares(1, 1, 1, 0, 1, 1, 1, 0), GPUIslands: []int32{0, 0, 0, 0, 1, 1, 1, 1}},
			placement.WorkloadShape{CPU: cpus(1), GPUs: 4, OneIsland: true}, 6},
		{"no free GPU: nothing to strand", placement.FragmentationNode{FreeCPU: cpus(8), GPUFree: gpuShares(0, 0)},
			placement.WorkloadShape{CPU: cpus(1)}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.shape.Weight = 1
			workload := placement.WorkloadDistribution{Shapes: []placement.WorkloadShape{c.shape}}
			perShape := make([]float64, 1)
			expected := placement.NodeFragmentation(&c.node, &workload, perShape)
			if math.Abs(perShape[0]-c.want) > 1e-9 || math.Abs(expected-c.want) > 1e-9 {
				t.Fatalf("unusable = %v, expected = %v, want %v", perShape[0], expected, c.want)
			}
		})
	}
}

// The expectation weighs each shape's unusable GPUs by its share of the weights.
func TestNodeFragmentationExpectation(t *testing.T) {
	node := placement.FragmentationNode{FreeCPU: 8 * gpu, GPUFree: gpuShares(0.5, 1, 1, 1)}
	workload := placement.WorkloadDistribution{Shapes: []placement.WorkloadShape{
		{CPU: gpu, GPUs: 1, Weight: 3},              // 0.5 unusable
		{CPU: gpu, GPUFraction: gpu / 4, Weight: 1}, // 0 unusable
	}}
	got := placement.NodeFragmentation(&node, &workload, nil)
	if want := 0.75 * 0.5; math.Abs(got-want) > 1e-9 {
		t.Fatalf("expected fragmentation %v, want %v", got, want)
	}
	if got := placement.NodeFragmentation(&node, &placement.WorkloadDistribution{}, nil); got != 0 {
		t.Fatalf("empty workload: fragmentation %v, want 0", got)
	}
}

// Property: on random nodes and workloads, the expectation is never negative, never
// above the node's free GPUs, each per-shape count lies in [0, free], and a workload
// whose shapes all fit and can use every free GPU gives 0.
func TestNodeFragmentationProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 17))
	fractions := []resources.Amount{gpu / 10, gpu / 4, gpu / 2, 3 * gpu / 4}
	for iteration := range 2000 {
		node := placement.FragmentationNode{FreeCPU: resources.Amount(rng.IntN(64)) * gpu, FreeMemory: resources.Amount(rng.IntN(100))}
		gpus := 1 + rng.IntN(8)
		free := 0.0
		for g := range gpus {
			share := resources.Amount(0)
			switch rng.IntN(3) {
			case 0:
				share = gpu
			case 1:
				share = resources.Amount(rng.IntN(gpu))
			}
			node.GPUFree = append(node.GPUFree, share)
			node.GPUIslands = append(node.GPUIslands, int32(g/4))
			free += float64(share) / gpu
		}
		var workload placement.WorkloadDistribution
		for range 1 + rng.IntN(6) {
			shape := placement.WorkloadShape{CPU: resources.Amount(rng.IntN(16)) * gpu, Memory: resources.Amount(rng.IntN(50)), Weight: rng.Float64()}
			switch rng.IntN(3) {
			case 0:
				shape.GPUs = 1 + rng.IntN(8)
				shape.OneIsland = rng.IntN(2) == 0
			case 1:
				shape.GPUFraction = fractions[rng.IntN(len(fractions))]
			}
			workload.Shapes = append(workload.Shapes, shape)
		}
		perShape := make([]float64, len(workload.Shapes))
		expected := placement.NodeFragmentation(&node, &workload, perShape)
		if expected < 0 || expected > free+1e-9 {
			t.Fatalf("iteration %d: expected fragmentation %v outside [0, %v]", iteration, expected, free)
		}
		for i, unusable := range perShape {
			if unusable < 0 || unusable > free+1e-9 {
				t.Fatalf("iteration %d: shape %d unusable %v outside [0, %v]", iteration, i, unusable, free)
			}
		}
		// A fractional shape that any free share can take and the node's CPU and memory
		// allow strands nothing.
		smallest := resources.Amount(gpu)
		for _, share := range node.GPUFree {
			if share > 0 {
				smallest = min(smallest, share)
			}
		}
		if free > 0 && smallest < gpu {
			fitting := placement.WorkloadDistribution{Shapes: []placement.WorkloadShape{{GPUFraction: smallest, Weight: 1}}}
			if got := placement.NodeFragmentation(&node, &fitting, nil); got != 0 {
				t.Fatalf("iteration %d: a shape every free GPU can serve leaves %v unusable, want 0", iteration, got)
			}
		}
	}
}

func TestWorkloadHistogramDecays(t *testing.T) {
	histogram := placement.NewWorkloadHistogram()
	histogram.Decay = 0.5
	old := placement.WorkloadShape{CPU: gpu, GPUs: 8}
	recent := placement.WorkloadShape{CPU: gpu, GPUFraction: gpu / 2}
	histogram.Observe(old)
	histogram.Observe(recent)
	histogram.Observe(recent)
	// Weights: old 1, recent 2 + 4 = 6 (each observation weighs twice the one before).
	distribution := histogram.Distribution()
	if len(distribution.Shapes) != 2 {
		t.Fatalf("shapes = %d, want 2", len(distribution.Shapes))
	}
	if first := distribution.Shapes[0]; first.GPUFraction != gpu/2 || math.Abs(first.Weight-6.0/7) > 1e-9 {
		t.Fatalf("heaviest shape %+v, want the fractional one with weight 6/7", first)
	}
	if got := placement.NewWorkloadHistogram().Distribution(); len(got.Shapes) != 0 {
		t.Fatalf("empty histogram has %d shapes", len(got.Shapes))
	}
}

func TestShapeOfBundle(t *testing.T) {
	shape := placement.ShapeOfBundle(parseResources("CPU=4 GPU=0.5 memory=100"), nil, true)
	if shape.CPU != 4*gpu || shape.GPUFraction != gpu/2 || shape.GPUs != 0 || shape.OneIsland || shape.Memory != 0 {
		t.Fatalf("shape %+v", shape)
	}
	if shape := placement.ShapeOfBundle(parseResources("GPU=2"), nil, true); shape.GPUs != 2 || !shape.OneIsland {
		t.Fatalf("shape %+v", shape)
	}
}

func TestObserveRequestCountsAStrictPackGroupAsOneTask(t *testing.T) {
	h100, err := nodelabel.ParseSelector(map[string]string{placement.LabelAcceleratorType: "H100"})
	if err != nil {
		t.Fatal(err)
	}
	a100, err := nodelabel.ParseSelector(map[string]string{placement.LabelAcceleratorType: "A100"})
	if err != nil {
		t.Fatal(err)
	}
	two := parseResources("CPU=8 GPU=2")
	cases := []struct {
		name    string
		request placement.Request
		want    []placement.WorkloadShape // weights left out
	}{
		{"strict pack: one shape, summed, one island",
			placement.Request{Strategy: placement.StrategyStrictPack, Bundles: []resources.Set{two, two, parseResources("CPU=4")}},
			[]placement.WorkloadShape{{CPU: 20 * gpu, GPUs: 4, OneIsland: true}}},
		{"strict pack with one selector keeps it",
			placement.Request{Strategy: placement.StrategyStrictPack, Bundles: []resources.Set{two, two}, BundleLabelSelectors: []nodelabel.Selector{h100, h100}},
			[]placement.WorkloadShape{{CPU: 16 * gpu, GPUs: 4, OneIsland: true, Selector: h100}}},
		{"strict pack with different selectors: per bundle",
			placement.Request{Strategy: placement.StrategyStrictPack, Bundles: []resources.Set{two, two}, BundleLabelSelectors: []nodelabel.Selector{h100, a100}},
			[]placement.WorkloadShape{{CPU: 8 * gpu, GPUs: 2, OneIsland: true, Selector: h100}, {CPU: 8 * gpu, GPUs: 2, OneIsland: true, Selector: a100}}},
		{"strict pack of MIG slices: per bundle",
			placement.Request{Strategy: placement.StrategyStrictPack, Bundles: []resources.Set{{"nvidia.com/mig-1g.10gb": gpu}, {"nvidia.com/mig-1g.10gb": gpu}}},
			[]placement.WorkloadShape{{MIGProfile: "nvidia.com/mig-1g.10gb"}}},
		{"spread: per bundle",
			placement.Request{Strategy: placement.StrategySpread, Bundles: []resources.Set{two, parseResources("GPU=0.5")}},
			[]placement.WorkloadShape{{CPU: 8 * gpu, GPUs: 2}, {GPUFraction: gpu / 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := placement.NewWorkloadHistogram()
			h.ObserveRequest(&c.request)
			got := h.Distribution().Shapes
			if len(got) != len(c.want) {
				t.Fatalf("shapes %+v, want %+v", got, c.want)
			}
			for _, want := range c.want {
				found := false
				for _, shape := range got {
					shape.Weight = 0
					found = found || shape.CPU == want.CPU && shape.GPUs == want.GPUs && shape.GPUFraction == want.GPUFraction &&
						shape.OneIsland == want.OneIsland && shape.MIGProfile == want.MIGProfile && shape.Selector.String() == want.Selector.String()
				}
				if !found {
					t.Fatalf("shapes %+v, want %+v among them", got, want)
				}
			}
		})
	}
}

// raygo_gpus_free_unschedulable's formula: for a gang of k whole GPUs in one NVLink
// island, Σ over the islands of (wholly free GPUs mod k). 100 nodes of 8 GPUs (one
// island) with one free GPU each leave 100 free GPUs no 2-, 4- or 8-GPU gang can use and
// none for one GPU; one island with 7 free leaves 3 to a 4-GPU gang (FGD's measure says
// 0 there: the gang can run on the node).
func TestClusterFragmentationCountsFreeGPUsModShapePerIsland(t *testing.T) {
	sizes := []int{1, 2, 4, 8}
	// dgx is an 8-GPU node whose GPUs g have island islandOf(g); free lists the free ones.
	dgx := func(id string, islandOf func(g int) int, free ...int) placement.Node {
		n := placement.Node{ID: placement.NodeID(id), Alive: true, Total: resources.Set{resources.GPU: 8 * resources.AmountScale},
			Available: resources.Set{resources.GPU: resources.Amount(len(free)) * resources.AmountScale}}
		for g := range 8 {
			n.GPUs = append(n.GPUs, placement.GPU{Index: g, NVLinkIsland: islandOf(g), Rail: g})
		}
		for _, g := range free {
			n.GPUs[g].Available = resources.AmountScale
		}
		return n
	}
	oneIsland := func(int) int { return 0 }
	halves := func(g int) int { return g / 4 }
	counted := func(id string, free resources.Amount) placement.Node {
		return placement.Node{ID: placement.NodeID(id), Alive: true, Available: resources.Set{resources.GPU: free}}
	}
	hundred := make([]placement.Node, 100)
	for i := range hundred {
		hundred[i] = dgx(fmt.Sprintf("n%03d", i), oneIsland, 7)
	}
	partly := dgx("partly", oneIsland, 0, 1, 2)
	partly.GPUs[3].Available = resources.AmountScale / 2 // half free: not a whole GPU
	lonely := dgx("lonely", func(int) int { return -1 }, 0, 1, 2, 3)
	rack := func(id string, free ...int) placement.Node {
		n := dgx(id, oneIsland, free...)
		n.NVLinkDomain = "nvl72-a"
		return n
	}
	for _, tc := range []struct {
		name  string
		nodes []placement.Node
		want  []int
	}{
		{"nothing free", []placement.Node{dgx("a", oneIsland)}, []int{0, 0, 0, 0}},
		{"the issue's 100 nodes with one free GPU each", hundred, []int{0, 100, 100, 100}},
		{"7 free in one island", []placement.Node{dgx("a", oneIsland, 0, 1, 2, 3, 4, 5, 6)}, []int{0, 1, 3, 7}},
		{"8 free in one island", []placement.Node{dgx("a", oneIsland, 0, 1, 2, 3, 4, 5, 6, 7)}, []int{0, 0, 0, 0}},
		{"4 free in each of two islands of a node", []placement.Node{dgx("a", halves, 0, 1, 2, 3, 4, 5, 6, 7)}, []int{0, 0, 0, 8}},
		{"3 and 2 free in two islands", []placement.Node{dgx("a", halves, 0, 1, 2, 4, 5)}, []int{0, 1, 5, 5}},
		{"a partly used GPU is not free", []placement.Node{partly}, []int{0, 1, 3, 3}},
		{"GPUs without an NVLink peer are islands of one", []placement.Node{lonely}, []int{0, 4, 4, 4}},
		{"GPUs known by count are one island", []placement.Node{counted("c", 3*resources.AmountScale+resources.AmountScale/2)}, []int{0, 1, 3, 3}},
		{"a dead node is not counted", []placement.Node{{ID: "dead", Available: resources.Set{resources.GPU: 3 * resources.AmountScale}}}, []int{0, 0, 0, 0}},
		{"a multi-node NVLink domain is one island", []placement.Node{rack("r1", 0, 1, 2), rack("r2", 0, 1, 2, 3, 4)}, []int{0, 0, 0, 0}},
		{"two nodes of no domain are two islands", []placement.Node{dgx("a", oneIsland, 0, 1, 2), dgx("b", oneIsland, 0, 1, 2, 3, 4)}, []int{0, 2, 4, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, expected := placement.ClusterFragmentation(tc.nodes, sizes, nil)
			if !slices.Equal(got, tc.want) || expected != 0 {
				t.Fatalf("unschedulable %v, expected %v; want %v and 0", got, expected, tc.want)
			}
		})
	}
}

// ClusterFragmentation's expectation is FGD's (NodeFragmentation summed): for a workload
// of 8-GPU gangs in one island, every free GPU of a node that cannot hold one.
func TestClusterFragmentationExpectationIsFGDs(t *testing.T) {
	var nodes []placement.Node
	for i := range 100 {
		n := placement.Node{ID: placement.NodeID(fmt.Sprintf("n%03d", i)), Alive: true, Total: resources.Set{resources.GPU: 8 * resources.AmountScale},
			Available: resources.Set{resources.GPU: resources.AmountScale}}
		for g := range 8 {
			free := resources.Amount(0)
			if g == 7 {
				free = resources.AmountScale
			}
			n.GPUs = append(n.GPUs, placement.GPU{Index: g, NVLinkIsland: 0, Rail: g, Available: free})
		}
		nodes = append(nodes, n)
	}
	nodes = append(nodes, placement.Node{ID: "counted", Alive: true, Available: resources.Set{resources.GPU: 7 * resources.AmountScale}})
	gangs := &placement.WorkloadDistribution{Shapes: []placement.WorkloadShape{{GPUs: 8, OneIsland: true, Weight: 1}}}
	if _, expected := placement.ClusterFragmentation(nodes, []int{8}, gangs); expected != 107 {
		t.Fatalf("expected fragmentation for a workload of 8-GPU gangs: %v, want 107", expected)
	}
	fours := &placement.WorkloadDistribution{Shapes: []placement.WorkloadShape{{GPUs: 4, OneIsland: true, Weight: 1}}}
	unschedulable, expected := placement.ClusterFragmentation(nodes, []int{4}, fours)
	if expected != 100 || unschedulable[0] != 103 {
		t.Fatalf("4-GPU gangs: expected %v, unschedulable %v; want 100 (FGD: the 7 free can take one) and 103 (7 mod 4 = 3 more)", expected, unschedulable)
	}
}

// A GPU holding a 4g instance has 3 free compute slices: a 7g request cannot use them,
// a 3g or 1g one can; an idle 7g instance elsewhere serves a 7g request.
func TestMIGUnschedulableCountsFreeComputeAProfileCannotUse(t *testing.T) {
	h100 := mig.Model("H100-80GB")
	four, ok := h100.Profile("4g.40gb")
	seven, ok7 := h100.Profile("7g.80gb")
	if !ok || !ok7 {
		t.Fatal("H100 profiles missing")
	}
	nodes := []placement.Node{{ID: "a", Alive: true, MIGGPUs: []placement.MIGGPU{
		{Index: 0, Model: h100, Instances: []placement.MIGInstance{{ProfileID: four.ID, Start: 0, State: placement.MIGHeld}}},
	}}}
	got := placement.MIGUnschedulable(nodes)
	if got["7g.80gb"] != 3 || got["3g.40gb"] != 0 || got["1g.10gb"] != 0 {
		t.Fatalf("unschedulable %v, want 7g.80gb 3 and 0 for 3g.40gb and 1g.10gb", got)
	}
	nodes = append(nodes, placement.Node{ID: "b", Alive: true, MIGGPUs: []placement.MIGGPU{
		{Index: 0, Model: h100, Instances: []placement.MIGInstance{{ProfileID: seven.ID, Start: 0, State: placement.MIGIdle}}},
	}})
	if got := placement.MIGUnschedulable(nodes); got["7g.80gb"] != 3 || got["1g.10gb"] != 0 {
		t.Fatalf("with an idle 7g elsewhere: %v, want 7g.80gb still 3 (node a) and b's idle 7g reusable", got)
	}
	nodes[0].Alive = false
	if got := placement.MIGUnschedulable(nodes); got["7g.80gb"] != 0 {
		t.Fatalf("a dead node counts: %v", got)
	}
}
