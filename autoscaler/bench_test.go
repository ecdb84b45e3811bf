package autoscaler

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Sizes of the planning benchmark.
const (
	benchDemands = 10000
	benchTypes   = 20
	benchRunning = 200
	benchPlans   = 100
)

// benchTypeCatalog is 20 node types: CPU machines of several sizes and GPU machines of
// several island layouts, priced roughly as clouds price them.
func benchTypeCatalog() []NodeType {
	var types []NodeType
	for i, cpus := range []int{2, 4, 8, 16, 32, 48, 64, 96} {
		t := cpuType(fmt.Sprintf("cpu-%02d", i), cpus, 0.05*float64(cpus))
		t.MaxWorkers = 100000
		types = append(types, t)
	}
	layouts := [][]int{{1}, {2}, {1, 1, 1, 1}, {4}, {2, 2, 2, 2}, {8}, {4, 4}, {8}, {1}, {2, 2}, {8}, {4}}
	for i, layout := range layouts {
		t := gpuType(fmt.Sprintf("gpu-%02d", i), 0, layout...)
		gpus := 0
		for _, size := range layout {
			gpus += size
		}
		t.PricePerHour = float64(gpus) * (2 + 0.25*float64(i%4))
		t.MaxWorkers = 100000
		if i%3 == 0 {
			t.Labels = map[string]string{"zone": "a"}
		}
		types = append(types, t)
	}
	return types
}

var benchShapes = []resources.Set{
	set("CPU", 1), set("CPU", 2), set("CPU", 4), set("CPU", 8, "memory", 16), set("GPU", 1, "CPU", 4),
	set("GPU", 0.5, "CPU", 1), set("GPU", 2, "CPU", 8), set("GPU", 4, "CPU", 16), set("GPU", 8, "CPU", 32),
}

var benchBundles = []resources.Set{
	set("GPU", 1), set("GPU", 1, "CPU", 4), set("GPU", 2, "CPU", 8), set("CPU", 2), set("CPU", 4), set("GPU", 0.5),
}

// benchInput is a seeded planning input: 200 running nodes (half busy), 10,000 pending
// demands: 60% tasks of 1–4 instances each (counted by shape and selector, as the GCS
// reports them), 40% placement groups of 2–64 bundles over the four strategies.
func benchInput(seed uint64) Input {
	return sizedBenchInput(seed, benchDemands, benchRunning)
}

// sizedBenchInput is benchInput with the given numbers of demands and running nodes.
func sizedBenchInput(seed uint64, demands, runningNodes int) Input {
	rng := rand.New(rand.NewPCG(seed, 42))
	types := benchTypeCatalog()
	in := Input{Types: types, MaxWorkers: 1000000, MaxUnavailable: 10, UpscalingSpeed: 1}
	for i := range runningNodes {
		t := types[rng.IntN(len(types))]
		id := fmt.Sprintf("node-%04d", i)
		if rng.IntN(2) == 0 {
			in.Nodes = append(in.Nodes, busy(id, t))
		} else {
			in.Nodes = append(in.Nodes, running(id, t, time.Duration(rng.IntN(30))*time.Minute))
		}
	}
	// Tasks and actors come counted by shape and selector, as the GCS reports them
	// (ResourceRequestByCount): the index of each one's entry in in.Shapes.
	shapeEntries := map[string]int{}
	for i := range demands {
		if rng.IntN(10) < 6 {
			// Every demand has maps of its own, as the GCS's report decodes them.
			s := shape(benchShapes[rng.IntN(len(benchShapes))].Clone(), 1+rng.IntN(4))
			if rng.IntN(10) == 0 {
				s.LabelSelector = map[string]string{"zone": "a"}
			}
			key := s.Shape.String() + fmt.Sprint(s.LabelSelector)
			if entry, ok := shapeEntries[key]; ok {
				in.Shapes[entry].Count += s.Count
				continue
			}
			shapeEntries[key] = len(in.Shapes)
			in.Shapes = append(in.Shapes, s)
			continue
		}
		strategy := strategies[rng.IntN(len(strategies))]
		count := 2 + rng.IntN(63)
		bundle := benchBundles[rng.IntN(len(benchBundles))]
		if strategy == placement.StrategyStrictPack {
			count = 2 + rng.IntN(7) // a STRICT_PACK must fit one node
		}
		bundles := make([]resources.Set, count)
		for b := range bundles {
			bundles[b] = bundle.Clone()
		}
		g := group(fmt.Sprintf("pg-%05d", i), strategy, bundles...)
		g.Reason = pending.NoResources
		in.Groups = append(in.Groups, g)
	}
	return in
}

// TestPlanLatencyBench is the planner's benchmark of `make bench`: 100 plans, each for
// 10,000 pending demands on 20 node types and 200 running nodes (different seeds). It
// prints "BENCH autoscaler_plan_p99_ms <value> ms", the 99th percentile of the 100
// decision times (with 20, it was their maximum), the median and the maximum beside it,
// and the memory one decision allocates on average
// (autoscaler_plan_alloc_mb, autoscaler_plan_allocs): unlike times, these do not depend
// on the machine's load. The same figures with _trainers after "plan" are for the same
// inputs with a third of the gangs other than STRICT_PACK led by a trainer's bundle
// (withTrainerBundles): gangs of unlike bundles. It is not a test and is skipped unless
// RAYGO_BENCH=1.
func TestPlanLatencyBench(t *testing.T) {
	benchgate.Require(t)
	// One decision on an input of its own first, untimed: the autoscaler decides every
	// tick, so the figure is of a process that has planned before (its heap grown).
	Decide(benchInput(benchPlans))
	benchPlanLatency(t, "autoscaler_plan", benchInput)
	benchPlanLatency(t, "autoscaler_plan_trainers", func(seed uint64) Input { return withTrainerBundles(benchInput(seed)) })
}

// benchPlanLatency times one decision on each of benchPlans seeded inputs and prints the
// figures named prefix_p99_ms and so on.
func benchPlanLatency(t *testing.T, prefix string, input func(seed uint64) Input) {
	var durations []time.Duration
	totalLaunches, totalCost := 0, 0.0
	var allocBytes, allocs uint64
	var before, after runtime.MemStats
	for seed := range uint64(benchPlans) {
		in := input(seed)
		// The input's garbage is collected before the clock starts (as testing.B does
		// before a benchmark): a decision pays for its own allocation only.
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		plan := Decide(in)
		durations = append(durations, time.Since(start))
		runtime.ReadMemStats(&after)
		allocBytes += after.TotalAlloc - before.TotalAlloc
		allocs += after.Mallocs - before.Mallocs
		launches, cost := launchTotals(in, plan)
		totalLaunches += launches
		totalCost += cost
		t.Logf("%s seed %d: %v, %d nodes launched over %d types costing %.2f/h, %d terminated, %d infeasible",
			prefix, seed, durations[len(durations)-1], launches, len(plan.Launches), cost, len(plan.Terminations), len(plan.Infeasible))
	}
	t.Logf("%s all seeds: %d nodes launched costing %.2f/h", prefix, totalLaunches, totalCost)
	slices.Sort(durations)
	p99 := durations[min(len(durations)-1, (len(durations)*99+99)/100-1)]
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Printf("BENCH %s_p99_ms %.1f ms\n", prefix, ms(p99))
	fmt.Printf("BENCH %s_p50_ms %.1f ms\n", prefix, ms(durations[len(durations)/2]))
	fmt.Printf("BENCH %s_max_ms %.1f ms\n", prefix, ms(durations[len(durations)-1]))
	fmt.Printf("BENCH %s_alloc_mb %.1f MB\n", prefix, float64(allocBytes)/benchPlans/1e6)
	fmt.Printf("BENCH %s_allocs %d allocs\n", prefix, allocs/benchPlans)
}

// withTrainerBundles gives every third gang other than a STRICT_PACK (by position) a
// first bundle of its own, {CPU: 1}, as Ray Train's trainer bundle before its workers'
// bundles.
func withTrainerBundles(in Input) Input {
	for i := range in.Groups {
		request := &in.Groups[i].Request
		if request.Strategy != placement.StrategyStrictPack && i%3 == 0 {
			request.Bundles[0] = set("CPU", 1)
		}
	}
	return in
}

// launchTotals is how many nodes a plan launches and what they cost per hour.
func launchTotals(in Input, plan Plan) (nodes int, costPerHour float64) {
	prices := make(map[string]float64, len(in.Types))
	for _, t := range in.Types {
		prices[t.Name] = t.PricePerHour
	}
	for _, launch := range plan.Launches {
		nodes += launch.Count
		costPerHour += float64(launch.Count) * prices[launch.Type]
	}
	return nodes, costPerHour
}
