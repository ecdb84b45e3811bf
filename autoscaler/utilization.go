package autoscaler

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// The utilization start: one more starting point for the search (improve.go), the plan
// Ray's planners would make. They ignore prices and add one node at a time, of the
// type whose new node the remaining demand would use best: a type without GPUs for
// CPU-only demand first, then the type that offers the most of the resource kinds the
// demand asks for, then the highest least utilization over its resources, then the
// highest mean; the demand that node holds (first fit, by amounts) is taken off, and
// the next node is chosen for the rest. Choosing by use rather than by price packs
// large nodes full before small ones take the leftovers (two 32-CPU nodes full and four
// 4-CPU nodes for the rest, where the cheapest type for each demand in turn leaves a
// third 32-CPU node a quarter used); the search then refines the plan by price.
//
// The node list only seeds the greedy pass: placement still decides every fit, demand
// the seeds do not hold gets new nodes as usual, seeds nothing lands on are dropped,
// and the plan is kept only if placeable. Work: at most maxSearchNodes nodes, each
// choosing among the types by a first-fit pass over the demand's bundles; then
// 3 + utilPermutations greedy passes, within the decision's budget of passes.

// utilItem is some of the demand as the utilization start packs it: count bundles of
// need; spread > 0 marks a STRICT_SPREAD gang's bundles (at most one per node).
type utilItem struct {
	need   resources.Set
	count  int
	spread int
}

// utilScore is how well one new node of a type would be used; higher is better.
type utilScore struct {
	gpuOK    bool
	kinds    int
	min, avg float64
}

func (a utilScore) compare(b utilScore) int {
	boolInt := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	return cmp.Or(cmp.Compare(boolInt(a.gpuOK), boolInt(b.gpuOK)), cmp.Compare(a.kinds, b.kinds),
		cmp.Compare(a.min, b.min), cmp.Compare(a.avg, b.avg))
}

// utilizationSeeds is the node list of the utilization start (see above), for the
// input's demand within the types' and the cluster's limits; nil when no node is
// chosen.
func utilizationSeeds(in Input) []*NodeType {
	p := newPlanner(in)
	groups, shapes, _ := collectDemand(in)
	var items []utilItem
	for _, d := range servingOrder(groups, shapes) {
		switch {
		case d.shape:
			items = append(items, utilItem{need: d.request.Bundles[0], count: d.count})
		case d.request.Strategy == placement.StrategyStrictPack:
			items = append(items, utilItem{need: d.total(), count: 1})
		default:
			spread := 0
			if d.request.Strategy == placement.StrategyStrictSpread {
				spread = len(items) + 1
			}
			for _, bundle := range d.request.Bundles {
				items = append(items, utilItem{need: bundle, count: 1, spread: spread})
			}
		}
	}
	// First fit decreasing, as Ray packs: the bundles that ask for the most kinds of
	// resource first, then the heaviest (amounts summed; the sort is stable).
	weight := func(need resources.Set) (kinds int, sum resources.Amount) {
		for _, amount := range need {
			if amount > 0 {
				kinds++
				sum += amount
			}
		}
		return kinds, sum
	}
	slices.SortStableFunc(items, func(a, b utilItem) int {
		kindsA, sumA := weight(a.need)
		kindsB, sumB := weight(b.need)
		return cmp.Or(cmp.Compare(kindsB, kindsA), cmp.Compare(sumB, sumA))
	})
	chosen := make(map[*NodeType]int)
	var seeds []*NodeType
	for len(seeds) < maxSearchNodes && len(seeds) < p.in.MaxWorkers-p.workers {
		var best *NodeType
		var bestScore utilScore
		var bestTaken []int
		for _, t := range p.sortedTypes {
			if t.Unavailable || chosen[t] >= p.allowance(t) {
				continue
			}
			score, taken, ok := utilizationOf(countedMIG(t.Resources), isGPUType(t), items)
			if !ok {
				continue
			}
			if best == nil || cmp.Or(score.compare(bestScore), cmp.Compare(price(best), price(t)),
				strings.Compare(best.Name, t.Name)) > 0 {
				best, bestScore, bestTaken = t, score, taken
			}
		}
		if best == nil {
			break
		}
		chosen[best]++
		seeds = append(seeds, best)
		left := items[:0]
		for i, item := range items {
			if item.count -= bestTaken[i]; item.count > 0 {
				left = append(left, item)
			}
		}
		items = left
		if len(items) == 0 {
			break
		}
	}
	return seeds
}

// utilizationOf packs the items first fit, by amounts, onto one new node of the given
// capacity and scores how well it is used. taken is how many of each item it holds; ok
// is false when it holds none.
func utilizationOf(capacity resources.Set, gpuType bool, items []utilItem) (score utilScore, taken []int, ok bool) {
	free := capacity.Clone()
	taken = make([]int, len(items))
	spreads := make(map[int]bool)
	asked := make(map[string]bool)
	anyGPU := false
	for i, item := range items {
		for name, amount := range item.need {
			if amount > 0 {
				asked[name] = true
				anyGPU = anyGPU || isGPUResource(name)
			}
		}
		n := item.count
		if item.spread > 0 {
			if spreads[item.spread] {
				continue
			}
			n = 1
		}
		for name, amount := range item.need {
			if amount > 0 {
				n = min(n, int(free[name]/amount))
			}
		}
		if n <= 0 {
			continue
		}
		for name, amount := range item.need {
			free[name] -= amount * resources.Amount(n)
		}
		taken[i] = n
		ok = true
		if item.spread > 0 {
			spreads[item.spread] = true
		}
	}
	if !ok {
		return utilScore{}, nil, false
	}
	// Less than one unit of a resource: Ray's v1 planner leaves it out.
	score, ok = scoreUse(!gpuType || anyGPU, capacity, free, asked, resources.AmountScale)
	if !ok {
		return utilScore{}, nil, false
	}
	return score, taken, true
}

// scoreUse scores a node of the given capacity with free left and the asked resource
// kinds on it, over its resources of at least least: as Ray scores it, each resource
// weighs its capacity times the cube of the share used (a large resource well used
// counts more than a small one); min and avg are the least and the mean of those. ok
// is false when no resource counts (min and avg are then zero).
func scoreUse(gpuOK bool, capacity, free resources.Set, asked map[string]bool, least resources.Amount) (score utilScore, ok bool) {
	score = utilScore{gpuOK: gpuOK, min: math.Inf(1)}
	counted := 0
	// In name order: the mean is a float sum, and the same input must give the same plan.
	for _, name := range capacity.Names() {
		total := capacity[name]
		if total < least {
			continue
		}
		if asked[name] {
			score.kinds++
		}
		used := float64(total-free[name]) / float64(total)
		weighted := total.Float() * used * used * used
		score.min = min(score.min, weighted)
		score.avg += weighted
		counted++
	}
	if counted == 0 {
		return utilScore{gpuOK: gpuOK, kinds: score.kinds}, false
	}
	score.avg /= float64(counted)
	return score, true
}

// utilized is the utilization start's plan: the greedy pass on its nodes, serving the
// demand in the serving order, the tasks and actors first, the strict gangs first (a
// STRICT_PACK served after a SPREAD gang can find the seeds' room split between the
// gang's bundles), by CPUs asked, and in utilPermutations fixed permutations of the
// serving order (an exact packing the named orders miss: where each demand lands
// depends on what came before it), each with the nodes seeded in their order and
// reversed (placement breaks ties by node id, and seeded nodes are named by rank); the
// cheapest one that holds as much as base, or base. A plan made in a permuted order is
// refined in that order, and kept only if placeable (in it, among others).
func utilized(in Input, cache *typeCache, base *planner) *planner {
	return utilizedIn(in, cache, base, utilOrders())
}

// utilOrders are the orders the utilization starts serve their nodes in.
func utilOrders() []demandOrder {
	orders := []demandOrder{servingOrder, shapesFirst, strictFirst, cpusFirst}
	for seed := range utilPermutations {
		orders = append(orders, permutedOrder(uint64(seed)))
	}
	return orders
}

// utilizedIn is utilized, serving the demand in the given orders.
func utilizedIn(in Input, cache *typeCache, base *planner, orders []demandOrder) *planner {
	return utilizedFrom(in, cache, base, utilizationSeeds(in), orders)
}

// utilizedFrom is the greedy pass on the given nodes, in the given orders and the
// nodes in both directions: the cheapest plan that holds as much as base, or base.
func utilizedFrom(in Input, cache *typeCache, base *planner, seeds []*NodeType, orders []demandOrder) *planner {
	if len(seeds) == 0 {
		return base
	}
	var best *planner
	reversed := slices.Clone(seeds)
	slices.Reverse(reversed)
	for _, order := range orders {
		for _, list := range [][]*NodeType{seeds, reversed} {
			if cache.passes >= cache.limit {
				break
			}
			candidate := greedy(in, cache, list, order)
			if candidate != nil && candidate.servesAll(base) && (best == nil || candidate.cheaperThan(best)) {
				best = candidate
			}
		}
	}
	if best == nil {
		return base
	}
	return best
}

// utilPermutations is how many permuted demand orders (permutedOrder) the utilization start
// also serves its nodes in.
const utilPermutations = 32

// permutedOrder is the serving order permuted by a fixed rule, numbered seed: the
// demand at position i moves to position (a·i + b) mod n, with a the seed-th multiplier
// coprime with n among the odd primes and b = 7·seed + 1. No randomness: the same
// permutation on every call, so the plan it built can be placed again in it
// (placeable).
func permutedOrder(seed uint64) demandOrder {
	return func(groups, shapes []*demand) []*demand {
		in := servingOrder(groups, shapes)
		n := len(in)
		if n < 2 {
			return in
		}
		a := coprimeMultiplier(n, int(seed))
		b := (7*int(seed) + 1) % n
		out := make([]*demand, n)
		for i, d := range in {
			out[(a*i+b)%n] = d
		}
		return out
	}
}

// coprimeMultiplier is the k-th of oddPrimes (counted modulo how many qualify) that has
// no common factor with n, so i → a·i mod n is a permutation; 1 when none does.
func coprimeMultiplier(n, k int) int {
	var candidates []int
	for _, p := range oddPrimes {
		if n%p != 0 {
			candidates = append(candidates, p%n)
		}
	}
	if len(candidates) == 0 {
		return 1
	}
	return candidates[k%len(candidates)]
}

// oddPrimes are the odd primes below 200, the multipliers of permutedOrder.
var oddPrimes = []int{3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83,
	89, 97, 101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167, 173, 179, 181, 191, 193, 197, 199}
