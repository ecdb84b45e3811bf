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

func TestUnitAffinityRanksWherePartlyUsedNodesGather(t *testing.T) {
	for _, c := range []struct {
		name       string
		partlyUsed []int
		small      bool
		want       []int
	}{
		{"no partly used node: no preference", []int{0, 0, 0}, true, nil},
		{"small bundles go where the most are", []int{1, 3, 2}, true, []int{1, 0, 1}},
		{"whole-island bundles go elsewhere", []int{1, 3, 2}, false, []int{0, 1, 0}},
		{"a tie goes to the first unit", []int{2, 2}, true, []int{0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := unitAffinity(c.partlyUsed, c.small); !reflect.DeepEqual(got, c.want) {
				t.Errorf("unitAffinity(%v, %v) = %v, want %v", c.partlyUsed, c.small, got, c.want)
			}
		})
	}
}

func TestChooseScalableUnits(t *testing.T) {
	for _, c := range []struct {
		name             string
		capacity, intact []int
		holds            []bool
		need             int
		affinity         []int
		want             []bool
	}{
		{"the smallest unit that covers", []int{6, 4, 9}, []int{6, 4, 9}, nil, 3, nil, []bool{false, true, false}},
		{"fewest whole islands broken before size", []int{6, 4}, []int{3, 1}, nil, 3, nil, []bool{true, false}},
		{"affinity before size", []int{4, 6}, []int{4, 6}, nil, 3, []int{1, 0}, []bool{false, true}},
		{"whole islands broken before affinity", []int{4, 6}, []int{3, 1}, nil, 3, []int{1, 0}, []bool{true, false}},
		{"the largest while one is not enough, then affinity", []int{3, 5, 4}, []int{3, 5, 4}, nil, 8, []int{1, 1, 0}, []bool{false, true, true}},
		{"the units holding the group first", []int{2, 9}, []int{2, 9}, []bool{true, false}, 2, []int{1, 0}, []bool{true, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			holds := c.holds
			if holds == nil {
				holds = make([]bool, len(c.capacity))
			}
			if got := chooseScalableUnits(c.capacity, c.intact, holds, c.need, c.affinity); !reflect.DeepEqual(got, c.want) {
				t.Errorf("chooseScalableUnits = %v, want %v", got, c.want)
			}
		})
	}
}
