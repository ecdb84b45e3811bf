package autoscaler

import (
	"maps"
	"slices"

	"github.com/raygo-dev/raygo/placement"
)

// The improvement search. The greedy pass (greedy) chooses a type for one demand at a
// time; a type that costs more for one demand can be cheaper for the plan, when later
// demand packs onto its leftovers (a 4-GPU node for a GPU task whose spare CPUs hold a
// CPU-only gang, instead of a GPU node and a CPU node). After the greedy pass, a bounded
// local search tries plans near the best one found: the greedy pass again, with the
// best plan's demand nodes planned first (seeded) minus one node, or minus one node
// plus one node of another type. Seeded nodes no demand lands on are dropped, so a move
// can also empty other nodes. A move is kept when the plan costs less and holds at
// least as much of every demand; every fit is still placement's (the seeded pass places
// all demand through the same stages). The search runs only on small inputs (a bound on
// work: each move is a whole greedy pass), so large plans are the greedy pass's.

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
)

// seededNode is a node the search planned before demand was served.
type seededNode struct {
	id placement.NodeID
	t  *NodeType
}

// seed plans a node of each of the types before demand is served; false when a type
// cannot be launched now or its limits leave no room.
func (p *planner) seed(types []*NodeType) bool {
	for _, t := range types {
		if t.Unavailable || p.allowance(t) < 1 {
			return false
		}
		id := p.newID(t)
		p.pool.add(NewNode(id, t), kindPlanned, t.Name)
		p.count[t.Name]++
		p.workers++
		p.seeded = append(p.seeded, seededNode{id: id, t: t})
	}
	return true
}

// settleSeeds launches the seeded nodes demand landed on, for that demand, and drops
// the others. False when the seeds broke a rule the greedy pass keeps: a GPU node that
// holds only CPU-only work (CPU-only work never gets a GPU type launched for it), or
// more nodes for tasks and actors alone than upscaling_speed allows.
func (p *planner) settleSeeds() bool {
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
		if isGPUType(node.t) && !gpuWork {
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
			candidate := greedy(in, cache, seeds, best.order)
			if candidate == nil || !candidate.servesAll(best) {
				continue
			}
			if found == nil && candidate.cheaperThan(best) || found != nil && candidate.cheaperThan(found) {
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
// without one node of a type, then without it and with a node of each other type.
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
