package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/raygo-dev/raygo/placement"
)

// The JSON the three steps exchange. Amounts are plain numbers: CPU in cores, GPU in
// whole GPUs, memory in GiB (Ray's planners read the same numbers; bytes would not fit
// raygo's fixed-point amounts and change nothing for a planner).

// SetFile is what gen writes: the demand sets, each with raygo's plan.
type SetFile struct {
	Seed int64       `json:"seed"`
	Sets []DemandSet `json:"sets"`
}

// DemandSet is one planning problem: an empty cluster, node types with prices, and
// pending demand.
type DemandSet struct {
	ID     int         `json:"id"`
	Types  []TypeSpec  `json:"types"`
	Tasks  []TaskSpec  `json:"tasks"`
	Groups []GroupSpec `json:"groups"`
	// Raygo is raygo's plan (node counts per type) and RaygoFits whether all the
	// set's demand fits on it: the MIP uses a fitting plan's cost to bound node counts.
	Raygo     map[string]int `json:"raygo"`
	RaygoFits bool           `json:"raygo_fits"`
}

// TypeSpec is one node type.
type TypeSpec struct {
	Name       string             `json:"name"`
	Resources  map[string]float64 `json:"resources"`
	GPUIslands []int              `json:"gpu_islands,omitempty"`
	// Price is dollars per node-hour.
	Price      float64 `json:"price"`
	MaxWorkers int     `json:"max_workers"`
}

// TaskSpec is Count pending tasks of one shape.
type TaskSpec struct {
	Shape map[string]float64 `json:"shape"`
	Count int                `json:"count"`
}

// GroupSpec is one pending placement group.
type GroupSpec struct {
	ID       string               `json:"id"`
	Strategy placement.Strategy   `json:"strategy"`
	Bundles  []map[string]float64 `json:"bundles"`
}

// Plans is what the Python steps write: per set, the node counts each planner chose.
type Plans struct {
	RayV1   []PlanEntry `json:"ray_v1"`
	RayV2   []PlanEntry `json:"ray_v2"`
	Optimum []PlanEntry `json:"optimum"`
}

// PlanEntry is one planner's answer for one set. Error is set when the planner raised
// (the set then counts as a shortfall). For the optimum, Status is HiGHS's model status
// ("Optimal", "Time limit reached", ...), Objective the incumbent's cost and Bound the
// best dual bound.
type PlanEntry struct {
	Set       int            `json:"set"`
	Counts    map[string]int `json:"counts"`
	Error     string         `json:"error,omitempty"`
	Status    string         `json:"status,omitempty"`
	Objective float64        `json:"objective,omitempty"`
	Bound     float64        `json:"bound,omitempty"`
}

// Set sizes: 2-20 node types; 1-4 task shapes of 1-8 tasks each; 0-4 groups of 2-6
// bundles. Small enough that HiGHS proves most optima in well under a second.
const (
	minTypes, maxTypes   = 2, 20
	maxTaskShapes        = 4
	maxTasksPerShape     = 8
	maxGroups            = 4
	minBundles, maxBund  = 2, 6
	minMaxWorkers        = 4
	maxMaxWorkers        = 24
	cpuDollarsPerCoreHr  = 0.045
	gpuDollarsPerGPUHrLo = 0.6
	gpuDollarsPerGPUHrHi = 4.0
)

var strategies = []placement.Strategy{placement.StrategyPack, placement.StrategySpread,
	placement.StrategyStrictPack, placement.StrategyStrictSpread}

// generate builds count demand sets from seed. Each demand is cut from one node type
// (its host), so every demand fits some type on its own: a set nobody can satisfy
// measures nothing.
func generate(count int, seed int64) []DemandSet {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	sets := make([]DemandSet, count)
	for i := range sets {
		sets[i] = generateSet(rng, i)
	}
	return sets
}

func generateSet(rng *rand.Rand, id int) DemandSet {
	set := DemandSet{ID: id}
	typeCount := minTypes + rng.IntN(maxTypes-minTypes+1)
	// At least one CPU type and one GPU type, the rest either.
	for t := range typeCount {
		gpu := t == 1 || (t > 1 && rng.IntN(2) == 0)
		set.Types = append(set.Types, randomType(rng, fmt.Sprintf("t%02d", t), gpu))
	}
	for range 1 + rng.IntN(maxTaskShapes) {
		host := set.Types[rng.IntN(len(set.Types))]
		set.Tasks = append(set.Tasks, TaskSpec{Shape: randomShape(rng, host, 1, largestIsland(host)), Count: 1 + rng.IntN(maxTasksPerShape)})
	}
	for g := range rng.IntN(maxGroups + 1) {
		host := set.Types[rng.IntN(len(set.Types))]
		strategy := strategies[rng.IntN(len(strategies))]
		bundles := minBundles + rng.IntN(maxBund-minBundles+1)
		group := GroupSpec{ID: fmt.Sprintf("pg%d", g), Strategy: strategy}
		share, gpuShare := 1, largestIsland(host)
		switch strategy {
		case placement.StrategyStrictPack:
			// All bundles on one host node, its GPUs in one NVLink island.
			bundles = min(bundles, int(host.Resources["CPU"]))
			share, gpuShare = bundles, largestIsland(host)/bundles
		case placement.StrategyStrictSpread:
			bundles = min(bundles, host.MaxWorkers)
		}
		for range bundles {
			group.Bundles = append(group.Bundles, randomShape(rng, host, share, gpuShare))
		}
		set.Groups = append(set.Groups, group)
	}
	return set
}

func randomType(rng *rand.Rand, name string, gpu bool) TypeSpec {
	jitter := func() float64 { return 0.8 + 0.45*rng.Float64() }
	t := TypeSpec{Name: name, MaxWorkers: minMaxWorkers + rng.IntN(maxMaxWorkers-minMaxWorkers+1)}
	if !gpu {
		cpus := []int{2, 4, 8, 16, 32, 48, 64, 96}[rng.IntN(8)]
		memPerCPU := []int{2, 4, 8}[rng.IntN(3)]
		t.Resources = map[string]float64{"CPU": float64(cpus), "memory": float64(cpus * memPerCPU)}
		t.Price = round4(float64(cpus) * cpuDollarsPerCoreHr * (0.75 + 0.125*float64(memPerCPU)) * jitter())
		return t
	}
	islands := [][]int{{1}, {2}, {4}, {8}, {2, 2}, {4, 4}, {2, 2, 2, 2}, {1, 1, 1, 1}}[rng.IntN(8)]
	gpus := 0
	for _, size := range islands {
		gpus += size
	}
	cpusPerGPU := []int{4, 8, 12, 16}[rng.IntN(4)]
	perGPU := gpuDollarsPerGPUHrLo + (gpuDollarsPerGPUHrHi-gpuDollarsPerGPUHrLo)*rng.Float64()
	if slices.Max(islands) >= 4 {
		perGPU *= 1.15 // NVLink across 4 or 8 GPUs costs more
	}
	t.Resources = map[string]float64{"CPU": float64(gpus * cpusPerGPU), "GPU": float64(gpus), "memory": float64(gpus * cpusPerGPU * 4)}
	t.GPUIslands = islands
	t.Price = round4((float64(gpus)*perGPU + float64(gpus*cpusPerGPU)*cpuDollarsPerCoreHr*0.6) * jitter())
	return t
}

// randomShape is a bundle one host node holds `share` of (STRICT_PACK: the group's
// bundles together), with at most gpuMax GPUs.
func randomShape(rng *rand.Rand, host TypeSpec, share, gpuMax int) map[string]float64 {
	fraction := []float64{0.125, 0.25, 0.5, 1}[rng.IntN(4)]
	cpus := math.Max(1, math.Floor(host.Resources["CPU"]*fraction/float64(share)))
	shape := map[string]float64{"CPU": cpus}
	if rng.IntN(3) == 0 {
		shape["memory"] = math.Max(1, math.Floor(host.Resources["memory"]*fraction/float64(share)))
	}
	if gpuMax >= 1 && host.Resources["GPU"] > 0 && rng.IntN(4) != 0 {
		gpus := []int{1, 1, 2, 4, 8}[rng.IntN(5)]
		shape["GPU"] = float64(min(gpus, gpuMax))
	}
	return shape
}

func largestIsland(t TypeSpec) int {
	if len(t.GPUIslands) == 0 {
		return 0
	}
	return slices.Max(t.GPUIslands)
}

func round4(x float64) float64 { return math.Round(x*10000) / 10000 }

// cost is the hourly price of a plan's nodes.
func cost(set DemandSet, counts map[string]int) float64 {
	total := 0.0
	for _, t := range set.Types {
		total += float64(counts[t.Name]) * t.Price
	}
	return total
}
