package placementsim

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

func TestFleetIsSeededAndRayShaped(t *testing.T) {
	config := DefaultFleetConfig()
	config.Nodes = 100
	first, second := NewFleet(config), NewFleet(config)
	if !reflect.DeepEqual(first, second) {
		t.Fatal("the same seed gave two fleets")
	}
	partlyUsed := 0
	for _, node := range first {
		if len(node.ID) != 56 || node.Labels[nodelabel.NodeID] != string(node.ID) {
			t.Fatalf("node %q: want a 56-hex-digit id and its node-id label, labels %v", node.ID, node.Labels)
		}
		if !node.Available.Equal(node.Total) {
			partlyUsed++
		}
	}
	if partlyUsed == 0 || partlyUsed == len(first) {
		t.Errorf("%d of %d nodes partly used, want some", partlyUsed, len(first))
	}
	if _, err := placement.NewSnapshot(first); err != nil {
		t.Fatal(err)
	}
}

// The latency run is deterministic apart from the clock: with a fake clock that
// advances 3µs per reading, every decision measures 3µs.
func TestRunDecisionLatencyWithFakeClock(t *testing.T) {
	config := DefaultLatencyConfig()
	config.Fleet.Nodes = 60
	config.Requests = 300
	var ticks time.Duration
	fakeNow := func() time.Time {
		ticks += 3 * time.Microsecond
		return time.Unix(0, 0).Add(ticks)
	}
	result, err := RunDecisionLatency(config, fakeNow)
	if err != nil {
		t.Fatal(err)
	}
	if result.Decisions != 300 || result.Placed+result.NotNow+result.Infeasible != 300 {
		t.Errorf("counts do not add up: %+v", result)
	}
	if result.P50 != 3*time.Microsecond || result.P99 != 3*time.Microsecond || result.P99Microseconds() != 3 {
		t.Errorf("latencies = %v / %v, want 3µs", result.P50, result.P99)
	}
	if result.Placed == 0 || result.FinalBusyGPUFraction > config.BusyGPUFraction+0.2 {
		t.Errorf("unexpected run: %+v", result)
	}
	again, err := RunDecisionLatency(config, fakeNow)
	if err != nil || again.Placed != result.Placed || again.NotNow != result.NotNow || again.Infeasible != result.Infeasible {
		t.Errorf("a second run differs: %+v vs %+v (%v)", again, result, err)
	}
}

func TestModelsDescribeTheirIslandsAndRails(t *testing.T) {
	cases := []struct {
		model   NodeModel
		islands []int // NVLinkIsland per GPU
		domain  string
	}{
		{ModelDGXH100, []int{0, 0, 0, 0, 0, 0, 0, 0}, ""},
		{ModelPCIe8GPUNVLinkPairs, []int{0, 0, 1, 1, 2, 2, 3, 3}, ""},
		{ModelGB200NVL72, []int{0, 0, 0, 0}, "nvl72-rack-0"},
	}
	for _, c := range cases {
		node := withModel(newNode(rand.New(rand.NewPCG(1, 2)), resources.Set{}, resources.Set{}, "zone-a", ""), c.model, "nvl72-rack-0", 1)
		var islands []int
		for i, gpu := range node.GPUs {
			islands = append(islands, gpu.NVLinkIsland)
			if gpu.Index != i || gpu.Rail != i || gpu.UUID == "" {
				t.Errorf("%s GPU %d: %+v, want index and rail %d", c.model, i, gpu, i)
			}
		}
		if !reflect.DeepEqual(islands, c.islands) || node.NVLinkDomain != c.domain {
			t.Errorf("%s: islands %v domain %q, want %v %q", c.model, islands, node.NVLinkDomain, c.islands, c.domain)
		}
		if node.GPUs[0].Available != 0 || node.Available["GPU"] != node.Total["GPU"]-resources.AmountScale {
			t.Errorf("%s: one GPU in use should show in GPU 0 and the GPU resource: %+v", c.model, node)
		}
		if _, err := placement.NewSnapshot([]placement.Node{node}); err != nil {
			t.Errorf("%s: %v", c.model, err)
		}
	}
}

func TestTopologyFleetAndItsBlindView(t *testing.T) {
	fleet := NewTopologyFleet(DefaultTopologyFleetConfig())
	counts := map[string]int{}
	for _, node := range fleet {
		pairs := node.GPUs[0].NVLinkIsland != node.GPUs[2].NVLinkIsland
		counts[fmt.Sprint(node.Labels[nodelabel.ScalableUnit], " pairs=", pairs)]++
	}
	want := map[string]int{"su-0 pairs=false": 32, "su-0 pairs=true": 8, "su-1 pairs=false": 32, "su-1 pairs=true": 8}
	if !reflect.DeepEqual(counts, want) {
		t.Fatalf("fleet = %v, want %v", counts, want)
	}
	for _, node := range WithoutTopology(fleet) {
		if len(node.GPUs) != 0 || node.Labels[nodelabel.ScalableUnit] != "" || node.Labels[nodelabel.Rack] != "" || node.Total["GPU"] != 8*resources.AmountScale {
			t.Fatalf("blind view keeps topology: %+v", node)
		}
	}
	if fleet[0].Labels[nodelabel.ScalableUnit] == "" {
		t.Fatal("WithoutTopology changed the fleet it was given")
	}
}

// A short run of the topology benchmark: deterministic, counts that add up, and the
// topology-aware placements estimated faster than the blind ones.
func TestRunTopologyBench(t *testing.T) {
	config := DefaultTopologyBenchConfig()
	config.Streams, config.Requests = 2, 400
	first, err := RunTopologyBench(config)
	if err != nil {
		t.Fatal(err)
	}
	again, err := RunTopologyBench(config)
	if err != nil || !reflect.DeepEqual(first, again) {
		t.Fatalf("a second run differs: %+v vs %+v (%v)", again, first, err)
	}
	for name, r := range map[string]TopologyRunResult{"aware": first.Aware, "blind": first.Blind} {
		if total := r.Placed + r.GaveUp + r.Infeasible + r.PendingAtEnd; total != config.Streams*config.Requests {
			t.Errorf("%s: %d placed + %d gave up + %d infeasible + %d pending != %d requests", name, r.Placed, r.GaveUp, r.Infeasible, r.PendingAtEnd, config.Streams*config.Requests)
		}
		if r.Measured == 0 || r.FreeGPUs > r.FreeGPUsAllIslands || r.UnusableGPUs > r.FreeGPUs {
			t.Errorf("%s: implausible %+v", name, r)
		}
		perSize, sizes := 0, map[int]bool{}
		for key, count := range r.DataParallelBottlenecks {
			perSize += count
			sizes[key.BundleGPUs] = true
		}
		if perSize != r.MeasuredDataParallel || !sizes[1] || !sizes[8] {
			t.Errorf("%s: data-parallel groups by bundle size %v, %d measured", name, r.DataParallelBottlenecks, r.MeasuredDataParallel)
		}
		if r.sampledFree == 0 || r.sampledUnusable > r.sampledFree || r.MeanFragmentationPct != 100*float64(r.sampledUnusable)/float64(r.sampledFree) {
			t.Errorf("%s: samples: %d of %d free GPUs unusable, mean %.1f%%", name, r.sampledUnusable, r.sampledFree, r.MeanFragmentationPct)
		}
	}
	if first.AllReduceRatio <= 1 || len(first.ProbeGPUs) != config.Streams {
		t.Errorf("ratio %.2f, probes %v: want the aware placements faster, one probe per stream", first.AllReduceRatio, first.ProbeGPUs)
	}
}

// The blind run's raylet-style assignment takes the lowest free GPUs and gives them back.
func TestLowestFreeGPUs(t *testing.T) {
	fleet := []placement.Node{withModel(newNode(rand.New(rand.NewPCG(1, 2)), resources.Set{}, resources.Set{}, "zone-a", ""), ModelDGXH100, "", 1)}
	gpus := newLowestFreeGPUs(fleet)
	request := placement.Request{Bundles: []resources.Set{{"GPU": 2 * resources.AmountScale}, {"GPU": resources.AmountScale / 2}, {"GPU": resources.AmountScale / 2}}}
	plan := placement.Plan{Placements: []placement.BundlePlacement{{BundleIndex: 0, NodeID: fleet[0].ID}, {BundleIndex: 1, NodeID: fleet[0].ID}, {BundleIndex: 2, NodeID: fleet[0].ID}}}
	gpus.assign(request, plan)
	var got [][]int
	for _, p := range plan.Placements {
		got = append(got, p.GPUIndices)
	}
	if want := [][]int{{1, 2}, {3}, {3}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lowest free GPUs = %v, want %v", got, want)
	}
	gpus.release(request, plan)
	if free := gpus.nodes(fleet)[0].GPUs; free[1].Available != resources.AmountScale || free[3].Available != resources.AmountScale || free[0].Available != 0 {
		t.Fatalf("after release: %+v", free)
	}
}
