package autoscaler

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// The improvement search. The greedy pass (greedy) chooses a type for one demand at a
// time; a type that costs more for one demand can be cheaper for the plan, when later
// demand packs onto its leftovers (a 4-GPU node for a GPU task whose spare CPUs hold a
// CPU-only gang, instead of a GPU node and a CPU node). After the greedy pass, a bounded
// local search tries plans near the best one found: the greedy pass again, with the
// best plan's demand nodes planned first (seeded) minus one node, minus one node plus
// one node of another type, or minus every node of a type. Seeded nodes no demand lands
// on are dropped, so a move can also empty other nodes. A move is kept when the plan
// costs less and holds at least as much of every demand; every fit is still
// placement's (the seeded pass places all demand through the same stages). The search
// runs only on small inputs (a bound on work: each move is a whole greedy pass), so
// large plans are the greedy pass's.

// Bounds on the search's work.
const (
	// maxSearchDemands is the most groups and shapes a plan may serve for the search
	// to run; maxSearchNodes the most nodes the greedy plan may launch for them, and
	// maxSearchTypes the most node types.
	maxSearchDemands = 16
	maxSearchNodes   = 24
	maxSearchTypes   = 32
	// maxSearchRounds is how many times the search may move to a cheaper plan.
	maxSearchRounds = 4
	// maxSearchPasses bounds the greedy passes of one decision: the search, the fills
	// and the pilot stop trying plans once the decision has made that many. Each
	// starting point may use passes up to its own mark (counted from the decision's
	// start), so the first ones cannot leave nothing for the others: the search from the
	// greedy plan up to 60, from the gangs-first plan up to 100, the fills up to 150,
	// the utilization start up to 235, the pilots up to 335, the v2 utilization start
	// (utilization_v2.go) up to maxSearchPasses.
	maxSearchPasses = 405
)

// seededNode is a node the search planned before demand was served.
type seededNode struct {
	id placement.NodeID
	t  *NodeType
}

// seed plans a node of each of the types before demand is served; false when a type
// cannot be launched now or its limits leave no room.
func (p *planner) seed(types []*NodeType) bool {
	for i, t := range types {
		if t.Unavailable || p.allowance(t) < 1 {
			return false
		}
		// Named by rank: placement breaks ties by node id, so the seeds' order decides
		// them (the utilization starts seed their nodes in both directions). The count
		// of planned nodes still moves on, so later planned nodes keep their numbers.
		p.nextID++
		id := placement.NodeID(fmt.Sprintf("seed-%04d-%s", i, t.Name))
		p.pool.add(NewNode(id, t), kindPlanned, t.Name)
		p.count[t.Name]++
		p.workers++
		p.seeded = append(p.seeded, seededNode{id: id, t: t})
	}
	return true
}

// settleSeeds launches the seeded nodes demand landed on, for that demand, and drops
// the others. False when the seeds broke a rule the greedy pass keeps: a GPU node that
// holds only CPU-only work, all of which a type without GPUs could hold (CPU-only work
// gets a GPU type only when no other type holds it: candidateTypes), or more nodes for
// tasks and actors alone than upscaling_speed allows. A GPU node holding only CPU-only
// work is allowed beside seeded nodes of its type that hold GPU work, when that GPU work
// comes in at least as many pieces (instances, GPU bundles) as the type's seeded nodes
// holding work: placed another way, every one of them could hold GPU work, so the type
// is launched for GPU work (as Ray's planners choose a GPU type only for GPU work, and
// then pack CPU work on it); one GPU task does not justify two GPU nodes.
func (p *planner) settleSeeds() bool {
	// Per GPU type, the seeded nodes that hold work, and the pieces of GPU demand placed
	// on them (gpuInstances, each demand counted once per type).
	busy, gpuUnits := make(map[*NodeType]int), make(map[*NodeType]int)
	counted := make(map[*NodeType]map[*demand]bool)
	for _, node := range p.seeded {
		holders := p.pool.holders[node.id]
		if len(holders) == 0 || !isGPUType(node.t) {
			continue
		}
		busy[node.t]++
		if counted[node.t] == nil {
			counted[node.t] = make(map[*demand]bool)
		}
		for _, d := range holders {
			if d.anyGPU && !counted[node.t][d] {
				counted[node.t][d] = true
				gpuUnits[node.t] += gpuInstances(d)
			}
		}
	}
	for _, node := range p.seeded {
		holders := p.pool.holders[node.id]
		p.count[node.t.Name]--
		p.workers--
		if len(holders) == 0 {
			continue
		}
		gpuWork, groups := false, false
		for _, d := range holders {
			gpuWork = gpuWork || d.anyGPU
			groups = groups || !d.shape
		}
		if isGPUType(node.t) && !gpuWork && gpuUnits[node.t] < busy[node.t] && !p.mayLaunchFor(node.t, holders) {
			return false
		}
		if !groups {
			if p.shapeBudget < 1 {
				return false
			}
			p.shapeBudget--
		}
		p.launch(node.t, 1, holders[0].name)
		entry := p.launches[node.t.Name]
		for _, d := range holders[1:] {
			if !slices.Contains(entry.For, d.name) {
				entry.For = append(entry.For, d.name)
			}
		}
	}
	return true
}

// gpuInstances is how many pieces of GPU work a demand is that could each sit on a node
// of their own: a shape's instances, a gang's bundles that ask for GPUs (a STRICT_PACK:
// one).
func gpuInstances(d *demand) int {
	if d.shape {
		return d.count
	}
	if d.request.Strategy == placement.StrategyStrictPack {
		return 1
	}
	n := 0
	for _, bundle := range d.request.Bundles {
		for name, amount := range bundle {
			if amount > 0 && isGPUResource(name) {
				n++
				break
			}
		}
	}
	return n
}

// mayLaunchFor: the greedy pass could launch type t for one of the demands (for
// CPU-only work, a GPU type only when no type without GPUs holds it: candidateTypes);
// the others may then share the node, as they share nodes planned before them.
func (p *planner) mayLaunchFor(t *NodeType, demands []*demand) bool {
	for _, d := range demands {
		fits := func(t *NodeType) bool { return p.freshGroup(d, t).nodes > 0 }
		if d.shape {
			fits = func(t *NodeType) bool { return len(p.cache.shape(d, t).fills) > 0 }
		}
		if slices.Contains(p.candidateTypes(d, fits), t) {
			return true
		}
	}
	return false
}

// improve is the bounded local search over the greedy plan p (see above); it returns
// the cheapest plan found.
func improve(in Input, cache *typeCache, best *planner) *planner {
	if best.demands == 0 || best.demands > maxSearchDemands || len(best.sortedTypes) > maxSearchTypes {
		return best
	}
	for range maxSearchRounds {
		nodes := best.demandNodes()
		if len(nodes) == 0 || len(nodes) > maxSearchNodes {
			return best
		}
		var found *planner
		for _, seeds := range best.moves(nodes) {
			if cache.passes >= cache.limit {
				break
			}
			candidate := greedy(in, cache, seeds, best.order)
			if found == nil && candidate.improves(best, best) || found != nil && candidate.improves(found, best) {
				found = candidate
			}
		}
		if found == nil {
			return best
		}
		best = found
	}
	return best
}

// demandNodes are the types of the nodes the plan launches for demand, one entry per
// node, in type-name order.
func (p *planner) demandNodes() []*NodeType {
	var nodes []*NodeType
	for _, name := range slices.Sorted(maps.Keys(p.demandLaunches)) {
		for range p.demandLaunches[name] {
			nodes = append(nodes, p.types[name])
		}
	}
	return nodes
}

// moves are the seed sets the search tries around a plan with the given demand nodes:
// without one node of a type, then without it and with a node of each other type; last,
// without all the nodes of each type that has two or more.
func (p *planner) moves(nodes []*NodeType) [][]*NodeType {
	var out [][]*NodeType
	for i, removed := range nodes {
		if i > 0 && nodes[i-1] == removed {
			continue // the same move as the node before
		}
		rest := slices.Delete(slices.Clone(nodes), i, i+1)
		out = append(out, rest)
		for _, added := range p.sortedTypes {
			if added == removed || added.Unavailable {
				continue
			}
			out = append(out, append(slices.Clip(rest), added))
		}
	}
	// Without all the nodes of a type: the demand they held is planned again on the
	// rest and on new nodes, as a whole, where one node less at a time finds each
	// removal dearer (six small nodes that one large one replaces).
	for i, removed := range nodes {
		if i > 0 && nodes[i-1] == removed || i+1 == len(nodes) || nodes[i+1] != removed {
			continue // not the first of two or more nodes of the type
		}
		out = append(out, slices.DeleteFunc(slices.Clone(nodes), func(t *NodeType) bool { return t == removed }))
	}
	return out
}

// servesAll: the plan holds at least as many instances of every demand as other.
func (p *planner) servesAll(other *planner) bool {
	for name, served := range other.served {
		if p.served[name] < served {
			return false
		}
	}
	return true
}

// cheaperThan: the plan's launches cost less than other's (fewer unpriced nodes first:
// an unpriced type counts as the dearest).
func (p *planner) cheaperThan(other *planner) bool {
	unpricedA, costA := p.launchCost()
	unpricedB, costB := other.launchCost()
	if unpricedA != unpricedB {
		return unpricedA < unpricedB
	}
	return costA < costB-1e-9
}

// launchCost is the plan's launches' price per hour, and how many unpriced nodes it
// launches.
func (p *planner) launchCost() (unpriced int, cost float64) {
	for _, name := range slices.Sorted(maps.Keys(p.launches)) { // sorted: float sums depend on order
		launch, t := p.launches[name], p.types[name]
		if t.PricePerHour <= 0 {
			unpriced += launch.Count
			continue
		}
		cost += float64(launch.Count) * t.PricePerHour
	}
	return unpriced, cost
}

// pilot builds a plan node by node from the greedy plan base (the pilot method): at each
// step every type is tried as the next node planned before demand (seeded), the greedy
// pass in base's order completes the plan, and the type whose completed plan costs least
// is kept, provided demand lands on it. It returns the cheapest completed plan that
// holds as much as base, or base. Like improve, it runs on small inputs only: each step
// is a greedy pass per type.
//
// The greedy pass prices each demand alone; pilot prices a node by the whole plan it
// leads to, so one large node whose spare capacity holds later demand (one 128-CPU
// node for a gang and the tasks beside it, where the greedy pass takes two smaller
// ones) is found even when no single move of the search reaches it.
func pilot(in Input, cache *typeCache, base *planner) *planner {
	best := base
	var seeds []*NodeType
	for range maxSearchNodes {
		var step *planner
		var stepType *NodeType
		for _, t := range base.sortedTypes {
			if t.Unavailable || cache.passes >= cache.limit {
				continue
			}
			candidate := greedy(in, cache, append(slices.Clip(seeds), t), base.order)
			if candidate == nil || !candidate.servesAll(base) || !candidate.holdsSeed(len(seeds)) {
				continue
			}
			if step == nil || candidate.cheaperThan(step) {
				step, stepType = candidate, t
			}
		}
		if step == nil {
			break
		}
		seeds = append(seeds, stepType)
		if step.improves(best, base) {
			best = step
		}
		if len(step.demandNodes()) == len(seeds) {
			break // all demand sits on the seeds: another one could only take some over
		}
	}
	return best
}

// holdsSeed: demand landed on the i-th seeded node.
func (p *planner) holdsSeed(i int) bool {
	return len(p.pool.holders[p.seeded[i].id]) > 0
}

// cheapestServing is other when it improves on p, else p.
func cheapestServing(p, other *planner) *planner {
	if other.improves(p, p) {
		return other
	}
	return p
}

// improves: the plan (nil: a move that broke a rule) holds at least as much of every
// demand as base, is placeable, and costs less than best, or best is not placeable (the
// greedy pass's own plan can hold demand only as it placed it, node by node: a plan the
// placement core cannot place leaves demand pending once its nodes are up, so any
// placeable plan is better). Placeable is checked last: it places all the demand again.
func (p *planner) improves(best, base *planner) bool {
	if p == nil || p == best || !p.servesAll(base) {
		return false
	}
	if best.placeable() {
		return p.cheaperThan(best) && p.placeable()
	}
	return p.placeable()
}

// placeable: the demand the plan holds fits on the nodes it leaves (running nodes'
// free capacity, launching nodes, and its launches, new) when the placement core
// places each demand in turn on all of them, as the cluster places work as it arrives,
// in one of a few orders: demand in either serving order (servingOrder, groupsFirst),
// every task and actor before the groups (shapesFirst), the strict gangs first
// (strictFirst), by CPUs asked (cpusFirst), the gangs least free first (byFreedom), or
// the order the plan was made in (p.order: a permuted order of a utilization start)
// when the gangs alone also fit in the order they came; new nodes in type-name order or
// its reverse (placement breaks ties by node id). The GCS tries pending groups in the
// order they came, but which of them are pending when each new node joins varies, so
// these orders are the ones a rule names, not a promise of the one the cluster will
// take; a permuted order names none, so its plan must also hold the gangs as they came.
// The search seeds nodes in some order and can find a packing that holds only when
// nodes are tried in that order; such a plan is not kept.
func (p *planner) placeable() bool {
	if p.placeableKnown == 0 {
		p.placeableKnown = 2
		if p.placeableNow() {
			p.placeableKnown = 1
		}
	}
	return p.placeableKnown == 1
}

// placeableNow is placeable, worked out.
func (p *planner) placeableNow() bool {
	var existing, launched []placement.Node
	p.existingRows(func(row placement.Node, _ nodeKind, _ string) { existing = append(existing, row) })
	for _, name := range slices.Sorted(maps.Keys(p.launches)) {
		for range p.launches[name].Count {
			launched = append(launched, NewNode("", p.types[name]))
		}
	}
	groups, shapes, _ := collectDemand(p.in)
	var directions [][]placement.Node
	for _, reverse := range []bool{false, true} {
		rows := slices.Clone(existing)
		for i, row := range launched {
			rank := i
			if reverse {
				rank = len(launched) - 1 - i
			}
			rows = append(rows, withID(row, placement.NodeID(fmt.Sprintf("launch-%04d", rank))))
		}
		directions = append(directions, rows)
	}
	for _, rows := range directions {
		for _, order := range []demandOrder{servingOrder, groupsFirst, shapesFirst, strictFirst, cpusFirst, byFreedom} {
			if p.placesAll(rows, order(groups, shapes)) {
				return true
			}
		}
	}
	// Only in the order the plan was made in (a permuted one): then its gangs must also
	// fit alone in the order they came, as the cluster retries pending groups.
	madeIn, gangsAlone := false, false
	arrived := arrivalOrder(p.in, groups)
	for _, rows := range directions {
		madeIn = madeIn || p.placesAll(rows, p.order(groups, shapes))
		gangsAlone = gangsAlone || p.placesAll(rows, arrived)
	}
	return madeIn && gangsAlone
}

// arrivalOrder is the groups (collectDemand's, which sorts them) in the order the input
// lists them: the order the GCS reports pending groups in, and retries them.
func arrivalOrder(in Input, groups []*demand) []*demand {
	position := make(map[string]int, len(in.Groups))
	for i, g := range in.Groups {
		position[g.ID] = i
	}
	out := slices.Clone(groups)
	slices.SortStableFunc(out, func(a, b *demand) int { return cmp.Compare(position[a.name], position[b.name]) })
	return out
}

// strictFirst serves the STRICT_PACK and STRICT_SPREAD groups first, the gangs with
// the least freedom, then the rest in the serving order: a STRICT_PACK placed after a
// SPREAD gang can find every node's room split between the gang's bundles.
func strictFirst(groups, shapes []*demand) []*demand {
	var strict, loose []*demand
	for _, d := range groups {
		if d.request.Strategy == placement.StrategyStrictPack || d.request.Strategy == placement.StrategyStrictSpread {
			strict = append(strict, d)
		} else {
			loose = append(loose, d)
		}
	}
	return append(strict, servingOrder(loose, shapes)...)
}

// leastFreeFirst is the strategies, the least free first.
var leastFreeFirst = []placement.Strategy{placement.StrategyStrictPack, placement.StrategyStrictSpread,
	placement.StrategyPack, placement.StrategySpread}

// byFreedom serves the groups by strategy, the least free first (STRICT_PACK,
// STRICT_SPREAD, PACK, SPREAD; within one, in collectDemand's order), then the shapes:
// as strictFirst, for a PACK gang that needs most of a node, which a SPREAD gang placed
// before it leaves split between its bundles on every node.
func byFreedom(groups, shapes []*demand) []*demand {
	out := slices.Clone(groups)
	slices.SortStableFunc(out, func(a, b *demand) int {
		return cmp.Compare(slices.Index(leastFreeFirst, a.request.Strategy), slices.Index(leastFreeFirst, b.request.Strategy))
	})
	return append(out, shapes...)
}

// placesAll: the instances of each demand the plan holds, in the given order, fit on
// new copies of the rows, placed and reserved one after the other.
func (p *planner) placesAll(rows []placement.Node, demands []*demand) bool {
	snapshot, err := placement.NewSnapshot(rows)
	if err != nil {
		return false
	}
	for _, d := range demands {
		for range p.served[d.name] {
			plan, err := placement.Schedule(snapshot, d.request)
			if err != nil || snapshot.Reserve(d.request.Bundles, plan) != nil {
				return false
			}
		}
	}
	return true
}

// fills are seed sets that hold the demand on nodes of few types: for each type, as
// many of its nodes as the demand it could hold needs by its scarcest resource (GPU
// demand for a GPU type, the CPU-only demand for another), and for each GPU type with
// each other type, both. The greedy pass places the demand on the seeds (and new nodes
// for what they do not hold) and drops the seeds nothing lands on. They reach plans of
// a few large nodes (one 96-CPU, 8-GPU node holding GPU tasks and the CPU tasks beside
// them) that a plan built a demand at a time, and moves of one node, do not.
func (p *planner) fills(in Input) [][]*NodeType {
	groups, shapes, _ := collectDemand(in)
	gpuWork, cpuWork := resources.Set{}, resources.Set{}
	for _, d := range append(groups, shapes...) {
		total := cpuWork
		if d.anyGPU {
			total = gpuWork
		}
		for _, bundle := range d.request.Bundles {
			for name, amount := range bundle {
				total[name] += amount * resources.Amount(d.count)
			}
		}
	}
	var gpuFills, cpuFills [][]*NodeType
	for _, t := range p.sortedTypes {
		if t.Unavailable {
			continue
		}
		work := cpuWork
		if isGPUType(t) {
			work = gpuWork
		}
		n := 0
		for name, amount := range work {
			if have := t.Resources[name]; have > 0 {
				n = max(n, int((amount+have-1)/have))
			}
		}
		n = min(n, p.allowance(t), maxSearchNodes)
		if n == 0 {
			continue
		}
		if isGPUType(t) {
			gpuFills = append(gpuFills, slices.Repeat([]*NodeType{t}, n))
		} else {
			cpuFills = append(cpuFills, slices.Repeat([]*NodeType{t}, n))
		}
	}
	out := slices.Concat(gpuFills, cpuFills)
	for _, f := range out[:len(out):len(out)] {
		if len(f) < min(p.allowance(f[0]), maxSearchNodes) {
			out = append(out, append(slices.Clip(f), f[0]))
		}
	}
	for _, g := range gpuFills {
		for _, c := range cpuFills {
			out = append(out, slices.Concat(g, c))
		}
	}
	return out
}

// fill is the cheapest plan the fills lead to that holds as much as base, or base.
func fill(in Input, cache *typeCache, base *planner) *planner {
	best := base
	for _, seeds := range base.fills(in) {
		if cache.passes >= cache.limit {
			break
		}
		if candidate := greedy(in, cache, seeds, base.order); candidate.improves(best, base) {
			best = candidate
		}
	}
	return best
}
