package autoscaler

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// The v2 utilization start: the node list Ray's v2 planner would choose, a second
// starting point beside the utilization start (utilization.go), refined and kept the
// same way. The v2 planner differs from the v1 one in how it walks the demand:
//   - gangs first, one at a time in the order they came (Ray sorts them by a field the
//     GCS leaves empty, which keeps that order), each all or nothing: a gang the nodes
//     cannot hold is skipped and leaves them as they were; then every task and actor,
//     one instance at a time;
//   - each batch goes first onto the nodes already chosen, the best used of them
//     taking what it holds, then the next best, and only the rest onto new nodes, one
//     at a time, each of the type whose new node would be used best;
//   - a node's use is scored over everything it holds, not only the batch;
//   - ties go to the node met first: the chosen nodes in Ray's order (after each
//     batch, those that took some of it, in the order they did, then the others), new
//     nodes in type-name order, a type just chosen moving behind the others.
//
// A STRICT_PACK gang is one request (its bundles summed), a STRICT_SPREAD gang's
// bundles at most one per node. Within a batch the requests are packed first fit in
// Ray's order: most placement constraints, then most kinds of resource, then the
// heaviest, then by their amounts. Like the utilization start, it plans new nodes only
// (running and launching nodes are left to the greedy pass). Work: at most
// maxSearchNodes nodes; each step scores every chosen node or every type by a
// first-fit pass over the batch's requests. The plan is made as utilized makes the
// utilization start's and refined the same way.

// v2Item is some of a batch as the v2 start packs it: count requests of need;
// spread > 0 marks a STRICT_SPREAD gang's bundles (at most one per node), pack a
// STRICT_PACK gang's summed bundles.
type v2Item struct {
	need   resources.Set
	count  int
	spread int
	pack   bool
}

// v2Node is a node the v2 start has chosen: its type, what is free on it, the spread
// gangs it holds a bundle of, and the resource kinds the requests on it ask for.
type v2Node struct {
	t      *NodeType
	total  resources.Set
	free   resources.Set
	spread map[int]bool
	asked  map[string]bool
	anyGPU bool
}

func newV2Node(t *NodeType) *v2Node {
	total := countedMIG(t.Resources)
	return &v2Node{t: t, total: total, free: total.Clone(), spread: map[int]bool{}, asked: map[string]bool{}}
}

func (n *v2Node) clone() *v2Node {
	return &v2Node{t: n.t, total: n.total, free: n.free.Clone(), spread: maps.Clone(n.spread),
		asked: maps.Clone(n.asked), anyGPU: n.anyGPU}
}

// take packs the items first fit onto the node, in order; taken is how many of each
// it holds, ok false when none.
func (n *v2Node) take(items []v2Item) (taken []int, ok bool) {
	taken = make([]int, len(items))
	for i, item := range items {
		count := item.count
		if item.spread > 0 {
			if n.spread[item.spread] {
				continue
			}
			count = min(count, 1)
		}
		for name, amount := range item.need {
			if amount > 0 {
				count = min(count, int(n.free[name]/amount))
			}
		}
		if count <= 0 {
			continue
		}
		for name, amount := range item.need {
			n.free[name] -= amount * resources.Amount(count)
			if amount > 0 {
				n.asked[name] = true
				n.anyGPU = n.anyGPU || isGPUResource(name)
			}
		}
		if item.spread > 0 {
			n.spread[item.spread] = true
		}
		taken[i], ok = count, true
	}
	return taken, ok
}

// score is how well the node is used by all it holds, as Ray's v2 planner scores it.
func (n *v2Node) score() utilScore {
	// Every resource the node has counts (Ray's v2 planner skips only zeros).
	score, _ := scoreUse(!isGPUType(n.t) || n.anyGPU, n.total, n.free, n.asked, 1)
	return score
}

// v2Batch is one batch of the demand: a gang's requests (all or nothing) or the tasks'.
type v2Batch struct {
	items []v2Item
	gang  bool
}

// v2Batches is the demand as Ray's v2 planner walks it: one batch per gang, in the
// given order, then one of every task and actor.
func v2Batches(groups, shapes []*demand) []v2Batch {
	var batches []v2Batch
	for i, d := range groups {
		var items []v2Item
		switch d.request.Strategy {
		case placement.StrategyStrictPack:
			items = []v2Item{{need: d.total(), count: 1, pack: true}}
		case placement.StrategyStrictSpread:
			for _, bundle := range d.request.Bundles {
				items = append(items, v2Item{need: bundle, count: 1, spread: i + 1})
			}
		default:
			for _, bundle := range d.request.Bundles {
				items = append(items, v2Item{need: bundle, count: 1})
			}
		}
		batches = append(batches, v2Batch{items: sortV2Items(items), gang: true})
	}
	var tasks []v2Item
	for _, d := range shapes {
		tasks = append(tasks, v2Item{need: d.request.Bundles[0], count: d.count})
	}
	if len(tasks) > 0 {
		batches = append(batches, v2Batch{items: sortV2Items(tasks)})
	}
	return batches
}

// sortV2Items orders a batch as Ray packs it: placement constraints, then kinds of
// resource, then the amounts summed, then the amounts by resource name, all
// descending.
func sortV2Items(items []v2Item) []v2Item {
	type keyed struct {
		item        v2Item
		constrained int
		kinds       int
		sum         resources.Amount
		names       []string
	}
	keys := make([]keyed, len(items))
	for i, item := range items {
		k := keyed{item: item}
		if item.spread > 0 || item.pack {
			k.constrained = 1
		}
		for name, amount := range item.need {
			if amount > 0 {
				k.kinds++
				k.sum += amount
				k.names = append(k.names, name)
			}
		}
		slices.Sort(k.names)
		keys[i] = k
	}
	lexical := func(a, b keyed) int {
		for i := 0; i < len(a.names) && i < len(b.names); i++ {
			if c := cmp.Or(strings.Compare(a.names[i], b.names[i]),
				cmp.Compare(a.item.need[a.names[i]], b.item.need[b.names[i]])); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(a.names), len(b.names))
	}
	slices.SortStableFunc(keys, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(b.constrained, a.constrained), cmp.Compare(b.kinds, a.kinds),
			cmp.Compare(b.sum, a.sum), lexical(b, a))
	})
	out := make([]v2Item, len(keys))
	for i, k := range keys {
		out[i] = k.item
	}
	return out
}

// utilizationV2Seeds is the node list of the v2 utilization start (see above), for the
// input's demand within the types' and the cluster's limits; nil when no node is
// chosen.
func utilizationV2Seeds(in Input) []*NodeType {
	p := newPlanner(in)
	groups, shapes, _ := collectDemand(in)
	// The gangs in the order they came (arrivalOrder): Ray 2.60 sorts gangs by the
	// placement constraints and requests of a field the GCS leaves empty
	// (GangResourceRequest.requests; it fills bundle_selectors), so it keeps that order.
	groups = arrivalOrder(in, groups)
	room := min(maxSearchNodes, p.in.MaxWorkers-p.workers)
	chosen := make(map[*NodeType]int)
	var nodes []*v2Node
	for _, batch := range v2Batches(groups, shapes) {
		if planned, ok := v2Schedule(p, nodes, batch.items, batch.gang, chosen, room); ok {
			nodes = planned // else a gang the nodes cannot hold: skipped, as Ray does
		}
	}
	seeds := make([]*NodeType, len(nodes))
	for i, n := range nodes {
		seeds[i] = n.t
	}
	return seeds
}

// v2Schedule packs one batch onto the chosen nodes, then onto new ones, as Ray's v2
// planner does: the nodes afterwards (in Ray's order: those that took some of the
// batch, in the order they did, then the others, then the new ones) and whether the
// batch is kept (a gang only when all of it is held). chosen counts the nodes of each
// type and is updated only when the batch is kept; room bounds the nodes.
func v2Schedule(p *planner, nodes []*v2Node, items []v2Item, gang bool, chosen map[*NodeType]int, room int) ([]*v2Node, bool) {
	items = slices.Clone(items)
	remove := func(taken []int) {
		left := items[:0]
		for i, item := range items {
			if item.count -= taken[i]; item.count > 0 {
				left = append(left, item)
			}
		}
		items = left
	}
	// pick moves the best used of the nodes, with what it takes of the batch, to the
	// targets; nil when none takes any.
	var targets []*v2Node
	pick := func(from *[]*v2Node) *v2Node {
		best, bestIdx, bestTaken := v2Best(*from, items)
		if best != nil {
			targets = append(targets, best)
			*from = slices.Delete(*from, bestIdx, bestIdx+1)
			remove(bestTaken)
		}
		return best
	}
	// The chosen nodes first, best used first.
	existing := slices.Clone(nodes)
	for len(items) > 0 && len(existing) > 0 && pick(&existing) != nil {
	}
	targets = append(targets, existing...)
	// Then new nodes, one at a time.
	counts := make(map[*NodeType]int, len(chosen))
	for t, n := range chosen {
		counts[t] = n
	}
	var pool []*v2Node
	for _, t := range p.sortedTypes {
		if !t.Unavailable && counts[t] < p.allowance(t) {
			pool = append(pool, newV2Node(t))
		}
	}
	for len(items) > 0 && len(pool) > 0 && len(targets) < room {
		best := pick(&pool)
		if best == nil {
			break
		}
		if counts[best.t]++; counts[best.t] < p.allowance(best.t) {
			pool = append(pool, newV2Node(best.t))
		}
	}
	if len(items) > 0 && gang {
		return nodes, false
	}
	for t, n := range counts {
		chosen[t] = n
	}
	return targets, true
}

// v2Best tries the items on a copy of each node and returns the best used copy, its
// index and what it took; nil when none holds any. Ties go to the node met first.
func v2Best(nodes []*v2Node, items []v2Item) (*v2Node, int, []int) {
	var best *v2Node
	var bestScore utilScore
	var bestTaken []int
	bestIdx := -1
	for i, n := range nodes {
		trial := n.clone()
		taken, ok := trial.take(items)
		if !ok {
			continue
		}
		score := trial.score()
		if best == nil || score.compare(bestScore) > 0 {
			best, bestScore, bestTaken, bestIdx = trial, score, taken, i
		}
	}
	return best, bestIdx, bestTaken
}

// utilizedV2 is the v2 utilization start's plan, made as utilized makes the
// utilization start's; base when its nodes are the utilization start's (nothing new
// to try) or none.
func utilizedV2(in Input, cache *typeCache, base *planner) *planner {
	seeds := utilizationV2Seeds(in)
	if slices.Equal(seeds, utilizationSeeds(in)) {
		return base
	}
	return utilizedFrom(in, cache, base, seeds, utilOrders())
}
