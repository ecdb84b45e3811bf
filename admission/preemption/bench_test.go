package preemption

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/placement"
)

// TestPreemptionBench is the benchmark of `make bench`: 10,000 GPUs (1,250 DGX nodes of
// 8), 1,000 running gangs of lower priority filling them, and 1,000 pending high-priority
// gangs decided one by one against that state. It prints
// "BENCH preemption_decision_p99_ms", and GPUs evicted over GPUs needed, mean and max,
// for the choice and for Kueue's remove-then-add-back on the same stream
// ("..._kueue_mean", "..._kueue_max"). Skipped unless RAYGO_BENCH=1.
func TestPreemptionBench(t *testing.T) {
	benchgate.Require(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var nodes []placement.Node
	for i := range 1250 {
		nodes = append(nodes, dgx(fmt.Sprintf("n%04d", i)))
	}
	c := newCluster(t, nodes...)
	for i := 0; len(c.running) < 1000 && i < 5000; i++ {
		size := []int{1, 2, 4, 8, 8, 16, 32}[rng.IntN(7)]
		strategy := placement.StrategyStrictPack
		if size > 8 {
			strategy = placement.StrategyPack
		}
		r := Running{ID: fmt.Sprintf("r%04d", i), Queue: "q", Priority: []int64{100, 500, 1000}[rng.IntN(3)], AdmittedAt: rng.Int64N(1_000_000)}
		c.place(r, placement.Request{Strategy: strategy, Bundles: gpuBundles(size, 1)})
	}
	config := mustLoad(t, within)
	_, free := c.snap.ResourceSummary()
	t.Logf("running %d, free GPUs %s", len(c.running), free["GPU"])
	var latencies []time.Duration
	var ratios, kueueRatios []float64
	outcomes := map[Outcome]int{}
	for i := range 1000 {
		var request placement.Request
		switch rng.IntN(3) {
		case 0:
			request = strictPack(8)
		case 1:
			request = strictPack(4)
		default:
			request = placement.Request{Strategy: placement.StrategyPack, Bundles: gpuBundles(16, 1)}
		}
		p := Preemptor{ID: fmt.Sprintf("p%04d", i), Queue: "q", Priority: 10_000, Request: request}
		in := c.input(config, p, 2_000_000)
		start := time.Now()
		d := Decide(in)
		latencies = append(latencies, time.Since(start))
		outcomes[d.Outcome]++
		in.Search = SearchKueue
		k := Decide(in)
		if d.Outcome == Preempt && k.Outcome == Preempt {
			ratios = append(ratios, float64(d.GPUsEvicted)/float64(d.GPUsNeeded))
			kueueRatios = append(kueueRatios, float64(k.GPUsEvicted)/float64(k.GPUsNeeded))
		}
	}
	slices.Sort(latencies)
	p99 := latencies[len(latencies)*99/100]
	t.Logf("outcomes %v, p50 %v p99 %v max %v, %d compared", outcomes, latencies[len(latencies)/2], p99, latencies[len(latencies)-1], len(ratios))
	fmt.Printf("BENCH preemption_decision_p99_ms %.2f ms\n", float64(p99.Microseconds())/1000)
	mean, most := meanMax(ratios)
	fmt.Printf("BENCH preemption_evicted_over_needed_mean %.3f ratio\n", mean)
	fmt.Printf("BENCH preemption_evicted_over_needed_max %.3f ratio\n", most)
	mean, most = meanMax(kueueRatios)
	fmt.Printf("BENCH preemption_evicted_over_needed_kueue_mean %.3f ratio\n", mean)
	fmt.Printf("BENCH preemption_evicted_over_needed_kueue_max %.3f ratio\n", most)
}

func meanMax(values []float64) (mean, most float64) {
	for _, v := range values {
		mean += v
		most = max(most, v)
	}
	return mean / float64(max(len(values), 1)), most
}
