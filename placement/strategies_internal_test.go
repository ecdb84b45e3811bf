package placement

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// placeSpread picks a run of identical bundles in one pass over the nodes; it must
// choose exactly what placing them one at a time would, with and without GPU topology
// (listed GPUs with islands and rails, scalable units).
func TestSpreadRunPassMatchesOneAtATime(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 600 {
		withTopology := trial%2 == 1
		nodes := make([]Node, 1+rng.IntN(20))
		for i := range nodes {
			total := resources.Set{"GPU": resources.Amount(8 * resources.AmountScale), "CPU": resources.Amount(64 * resources.AmountScale)}
			available := resources.Set{"GPU": resources.Amount(rng.IntN(9) * resources.AmountScale), "CPU": resources.Amount(rng.IntN(65) * resources.AmountScale)}
			id := NodeID(rune('a'+i%26)) + NodeID(rune('a'+i/26))
			nodes[i] = Node{ID: id, Total: total, Available: available, Alive: rng.IntN(10) > 0}
			if withTopology {
				nodes[i].Labels = map[string]string{nodelabel.ScalableUnit: []string{"su-0", "su-1", "su-2"}[rng.IntN(3)]}
				pairs := rng.IntN(2) == 0
				for g := range 8 {
					island := 0
					if pairs {
						island = g / 2
					}
					nodes[i].GPUs = append(nodes[i].GPUs, GPU{Index: g, NVLinkIsland: island, Rail: g})
				}
				// As many GPUs free as the node has available, chosen at random.
				for _, g := range rng.Perm(8)[:available["GPU"]/resources.AmountScale] {
					nodes[i].GPUs[g].Available = resources.AmountScale
				}
			}
		}
		snapshot, err := NewSnapshot(nodes)
		if err != nil {
			t.Fatal(err)
		}
		strategy := []Strategy{StrategySpread, StrategyStrictSpread}[rng.IntN(2)]
		request := Request{Strategy: strategy}
		for range 1 + rng.IntN(12) {
			request.Bundles = append(request.Bundles, resources.Set{"GPU": resources.Amount((1 + rng.IntN(2)) * resources.AmountScale), "CPU": resources.Amount(8 * resources.AmountScale)})
		}
		d, err := newDecision(snapshot, &request)
		if err != nil {
			t.Fatal(err)
		}
		batched := d.newAttempt(viewAvailable)
		batchedFailure := d.placeSpread(batched, strategy == StrategyStrictSpread)

		oneByOne := d.newAttempt(viewAvailable)
		var oneByOneFailure *failure
		if strategy == StrategyStrictSpread && countUnused(d, oneByOne) < len(d.bundles) {
			oneByOneFailure = &failure{}
		}
		rank, row, freeAfter := d.newRanking(), make([]resources.Amount, len(d.resources)), make([]resources.Amount, len(d.resources))
		for position := range d.bundles {
			if oneByOneFailure != nil {
				break
			}
			oneByOneFailure = d.placeOneSpread(oneByOne, position, strategy == StrategyStrictSpread, rank, row, freeAfter)
		}
		if (batchedFailure == nil) != (oneByOneFailure == nil) {
			t.Fatalf("trial %d: failures differ: %v vs %v", trial, batchedFailure, oneByOneFailure)
		}
		if batchedFailure == nil && !reflect.DeepEqual(batched.nodeOf, oneByOne.nodeOf) {
			t.Fatalf("trial %d (%s): one pass chose %v, one at a time %v", trial, strategy, batched.nodeOf, oneByOne.nodeOf)
		}
	}
}

func countUnused(d *decision, a *attempt) int {
	count := 0
	for node := range d.snapshot.nodes {
		if d.eligible[node] && a.bundlesOn(node) == 0 {
			count++
		}
	}
	return count
}
