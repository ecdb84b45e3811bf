package preemption

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// randomCase is a small cluster (2-3 DGX nodes) with up to 12 lower-priority gangs
// running and a high-priority preemptor; in half the cases the queue's GPU quota is
// below the cluster, so quota drives evictions too.
func randomCase(t testing.TB, seed uint64) (Input, *cluster) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var nodes []placement.Node
	for i := range 2 + rng.IntN(2) {
		nodes = append(nodes, dgx(fmt.Sprintf("n%d", i)))
	}
	c := newCluster(t, nodes...)
	for i := 0; i < 40 && len(c.running) < 12; i++ {
		size := []int{1, 1, 2, 4, 8}[rng.IntN(5)]
		r := Running{ID: fmt.Sprintf("w%02d", i), Queue: "q", Priority: []int64{100, 500, 1000}[rng.IntN(3)], AdmittedAt: rng.Int64N(1000)}
		strategy := []placement.Strategy{placement.StrategyStrictPack, placement.StrategyPack, placement.StrategySpread}[rng.IntN(3)]
		c.place(r, placement.Request{Strategy: strategy, Bundles: gpuBundles(size, 1)})
	}
	config := within
	if rng.IntN(2) == 0 {
		config = fmt.Sprintf("queues: [{name: q, resources: {GPU: {nominalQuota: %d}}, preemption: {withinClusterQueue: LowerPriority}}]", len(nodes)*8*3/4)
	}
	var request placement.Request
	switch rng.IntN(4) {
	case 0:
		request = strictPack(4)
	case 1:
		request = strictPack(8)
	case 2:
		request = placement.Request{Strategy: placement.StrategyPack, Bundles: gpuBundles(2+rng.IntN(10), 1)}
	default:
		request = placement.Request{Strategy: placement.StrategySpread, Bundles: gpuBundles(2, 1+int64(rng.IntN(3)))}
	}
	p := Preemptor{ID: "p", Queue: "q", Priority: 5000, Request: request}
	return c.input(mustLoad(t, config), p, 2000), c
}

// bruteFit is the test's own oracle: the quota with admission's rules and
// placement.Schedule on a fresh snapshot with the set's bundles released.
func bruteFit(t testing.TB, in Input, set []Running) bool {
	quota := admission.NewQuotaView(in.Config, in.Usage)
	snap, err := placement.NewSnapshot(in.Cluster.Nodes())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range set {
		sum, _ := resources.SumOf(r.Bundles)
		quota.Release(r.Queue, sum)
		if err := snap.Release(r.Bundles, placement.Plan{Placements: r.Placements}); err != nil {
			t.Fatal(err)
		}
	}
	charge, _ := resources.SumOf(in.Preemptor.Request.Bundles)
	if quota.Reason(in.Preemptor.Queue, charge) != "" {
		return false
	}
	_, err = placement.Schedule(snap, in.Preemptor.Request)
	return err == nil
}

// bruteKey is the order of the specification: highest victim priority, GPUs, count,
// most recently admitted first, then ids.
type bruteKey struct {
	prio     int64
	gpus     resources.Amount
	count    int
	admitted []int64
	ids      []string
}

func keyOfRuns(set []Running) bruteKey {
	k := bruteKey{prio: -1 << 62, count: len(set)}
	for _, r := range set {
		k.prio = max(k.prio, r.Priority)
		sum, _ := resources.SumOf(r.Bundles)
		k.gpus += sum[resources.GPU]
		k.admitted = append(k.admitted, r.AdmittedAt)
		k.ids = append(k.ids, r.ID)
	}
	slices.SortFunc(k.admitted, func(a, b int64) int { return cmp.Compare(b, a) })
	slices.Sort(k.ids)
	return k
}

func (k bruteKey) compare(o bruteKey) int {
	if c := cmp.Or(cmp.Compare(k.prio, o.prio), cmp.Compare(k.gpus, o.gpus), cmp.Compare(k.count, o.count)); c != 0 {
		return c
	}
	for i := range k.admitted {
		if c := cmp.Compare(o.admitted[i], k.admitted[i]); c != 0 {
			return c
		}
	}
	return slices.Compare(k.ids, o.ids)
}

// bruteForce returns the best fitting set within the blast radius: the first in key
// order (it is minimal: a subset of a set within the radius is within it).
func bruteForce(t testing.TB, in Input) ([]Running, bool) {
	var cands []Running
	for _, r := range in.Running {
		if r.Priority < in.Preemptor.Priority {
			cands = append(cands, r)
		}
	}
	_, free := in.Cluster.ResourceSummary()
	charge, _ := resources.SumOf(in.Preemptor.Request.Bundles)
	var sets [][]Running
	var keys []bruteKey
	for mask := 1; mask < 1<<len(cands); mask++ {
		var set []Running
		for b := range cands {
			if mask&(1<<b) != 0 {
				set = append(set, cands[b])
			}
		}
		key := keyOfRuns(set)
		if free[resources.GPU]+key.gpus < charge[resources.GPU] || !withinBound(set, charge[resources.GPU]) {
			continue // too few GPUs in total, or beyond the blast radius
		}
		sets, keys = append(sets, set), append(keys, key)
	}
	order := make([]int, len(sets))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return keys[a].compare(keys[b]) })
	for _, i := range order {
		if bruteFit(t, in, sets[i]) {
			return sets[i], true
		}
	}
	return nil, false
}

func runsOf(in Input, d Decision) []Running {
	var out []Running
	for _, v := range d.Victims {
		for _, r := range in.Running {
			if r.ID == v.ID {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestAgainstBruteForceBench: on seeded small cases the choice is a minimal fitting set,
// agrees with exhaustive search (the best set within the blast radius) in at least 99%
// of cases, never ranks after Kueue's remove-then-add-back, and evicts at most the GPUs
// needed plus its largest victim gang.
// RAYGO_BENCH=1 runs 10,000 cases and prints the agreement.
func TestAgainstBruteForceBench(t *testing.T) {
	cases := 1000
	if os.Getenv("RAYGO_BENCH") == "1" {
		cases = 10_000
	}
	var compared, agree, agreeHeuristic, beatsKueue int
	for seed := range uint64(cases) {
		in, _ := randomCase(t, seed)
		d := Decide(in)
		best, ok := bruteForce(t, in)
		if d.Cause == CauseBlastRadius {
			// Every set found passes the bound; it agrees when no set within it fits.
			compared++
			if !ok {
				agree++
				agreeHeuristic++
			}
			continue
		}
		if d.Outcome != Preempt {
			if ok && d.Outcome != Fits {
				t.Fatalf("seed %d: %v %s but brute force evicts %d", seed, d.Outcome, d.Cause, len(best))
			}
			continue
		}
		compared++
		mine := runsOf(in, d)
		if !bruteFit(t, in, mine) {
			t.Fatalf("seed %d: the chosen set does not fit", seed)
		}
		for i := range mine {
			if bruteFit(t, in, slices.Delete(slices.Clone(mine), i, i+1)) {
				t.Fatalf("seed %d: victim %s can be dropped", seed, mine[i].ID)
			}
		}
		var largest resources.Amount
		for _, v := range d.Victims {
			largest = max(largest, v.GPUs)
		}
		if d.GPUsEvicted > d.GPUsNeeded+largest {
			t.Fatalf("seed %d: evicted %s GPUs for %s needed", seed, d.GPUsEvicted, d.GPUsNeeded)
		}
		if ok && keyOfRuns(mine).compare(keyOfRuns(best)) == 0 {
			agree++
		}
		in.heuristicOnly = true
		if h := Decide(in); ok && h.Outcome == Preempt && keyOfRuns(runsOf(in, h)).compare(keyOfRuns(best)) == 0 {
			agreeHeuristic++
		}
		in.heuristicOnly = false
		in.Search = SearchKueue
		if k := Decide(in); k.Outcome == Preempt {
			switch c := keyOfRuns(mine).compare(keyOfRuns(runsOf(in, k))); {
			case c > 0:
				t.Fatalf("seed %d: Kueue's %v ranks before %v", seed, victimIDs(k), victimIDs(d))
			case c < 0:
				beatsKueue++
			}
		}
	}
	share := float64(agree) / float64(max(compared, 1))
	t.Logf("%d cases, %d with evictions: brute force agrees %.2f%% (heuristics alone %.2f%%), better than Kueue's in %d",
		cases, compared, 100*share, 100*float64(agreeHeuristic)/float64(max(compared, 1)), beatsKueue)
	if os.Getenv("RAYGO_BENCH") == "1" {
		fmt.Printf("BENCH preemption_bruteforce_agreement_pct %.2f %%\n", 100*share)
		fmt.Printf("BENCH preemption_bruteforce_agreement_heuristic_pct %.2f %%\n", 100*float64(agreeHeuristic)/float64(max(compared, 1)))
	}
	if compared < cases/4 || share < 0.99 {
		t.Fatalf("agreement %.4f over %d compared cases", share, compared)
	}
}

func withinBound(set []Running, needed resources.Amount) bool {
	var evicted, largest resources.Amount
	for _, r := range set {
		sum, _ := resources.SumOf(r.Bundles)
		evicted += sum[resources.GPU]
		largest = max(largest, sum[resources.GPU])
	}
	return evicted <= needed+largest
}

var _ = queues.Second
