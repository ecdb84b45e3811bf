package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// TestCopiesThatFitAgreesWithSchedule: on random nodes (with or without GPUs, dead,
// draining, labeled) and bundles without GPUs (with or without a selector),
// CopiesThatFit says n exactly when Schedule places n copies as a PACK group on that
// node alone and not n+1; it declines bundles with GPUs or MIG profiles.
func TestCopiesThatFitAgreesWithSchedule(t *testing.T) {
	totals := []string{"CPU=8 memory=32", "CPU=96 memory=384", "CPU=16 GPU=2 memory=64", "CPU=4 disk=10", "CPU=64 GPU=8 memory=256"}
	bundleSpecs := []string{"CPU=1", "CPU=2", "CPU=4", "CPU=8 memory=16", "CPU=0.5", "disk=3", "memory=7"}
	zoneA := nodelabel.Selector{{Key: "zone", Values: []string{"a"}}}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 3))
		total := parseResources(totals[rng.IntN(len(totals))])
		available := make(resources.Set)
		for name, amount := range total {
			available[name] = amount * resources.Amount(rng.IntN(5)) / 4
		}
		n := placement.Node{ID: "n", Total: total, Available: available, Alive: rng.IntN(8) != 0, Draining: rng.IntN(8) == 0,
			Labels: map[string]string{nodelabel.NodeID: "n", "zone": []string{"a", "b"}[rng.IntN(2)]}}
		if gpus := total[resources.GPU] / resources.AmountScale; gpus > 0 {
			for i := range int(gpus) {
				n.GPUs = append(n.GPUs, placement.GPU{Index: i, NVLinkIsland: 0, Rail: i, Available: resources.AmountScale})
			}
			if available[resources.GPU] < total[resources.GPU] {
				available[resources.GPU] = total[resources.GPU] // GPUs stay free: the bundles ask none
			}
		}
		bundle := parseResources(bundleSpecs[rng.IntN(len(bundleSpecs))])
		var selectors []nodelabel.Selector
		if rng.IntN(3) == 0 {
			selectors = []nodelabel.Selector{zoneA}
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			copies, ok := placement.CopiesThatFit(n, bundle, selectors...)
			if !ok {
				t.Fatalf("declined %v", bundle)
			}
			if copies > 0 && !schedulesCopies(t, n, bundle, selectors, copies) {
				t.Fatalf("%d copies of %v on %+v: Schedule refuses", copies, bundle, n)
			}
			if copies < placement.MaxBundles && schedulesCopies(t, n, bundle, selectors, copies+1) {
				t.Fatalf("%d copies of %v on %+v: Schedule places %d", copies, bundle, n, copies+1)
			}
		})
	}
	for _, spec := range []string{"GPU=1", "CPU=1 GPU=0.5", "nvidia.com/mig-1g.10gb=1"} {
		if _, ok := placement.CopiesThatFit(node("g", "CPU=8 GPU=1", ""), parseResources(spec)); ok {
			t.Fatalf("answered for %s", spec)
		}
	}
}

// schedulesCopies: Schedule places copies of the bundle as a PACK group on the node.
func schedulesCopies(t *testing.T, n placement.Node, bundle resources.Set, selectors []nodelabel.Selector, copies int) bool {
	t.Helper()
	snapshot, err := placement.NewSnapshot([]placement.Node{n})
	if err != nil {
		t.Fatal(err)
	}
	request := placement.Request{Strategy: placement.StrategyPack}
	for range copies {
		request.Bundles = append(request.Bundles, bundle)
		if len(selectors) > 0 {
			request.BundleLabelSelectors = append(request.BundleLabelSelectors, selectors[0])
		}
	}
	_, err = placement.Schedule(snapshot, request)
	return err == nil
}
