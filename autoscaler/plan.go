package autoscaler

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// minLaunchBurst is the fewest nodes one plan may launch for tasks and actors, whatever
// the upscaling speed and however few nodes run (Ray's floor of 5).
const minLaunchBurst = 5

// Decide is the planner: from the pending demand, the nodes and the node types it
// returns what to launch and what to terminate. It is pure and deterministic: no I/O,
// no clock, no goroutines, and the same input gives the same plan.
//
// The stages, in order (each sees what the earlier ones decided):
//  1. max_workers: nodes above a type's or the cluster's max_workers are terminated,
//     idle ones first, and take no demand;
//  2. min_workers: every type is brought up to its min_workers;
//  3. request_resources: the constraint's bundles are scheduled against node totals
//     (running work counts toward them); nodes are launched for what totals lack;
//  4. placement groups, whole or not at all, and tasks and actors by shape, GPU demand
//     first (servingOrder): on running nodes' free capacity, then on launching and
//     planned nodes, then on the cheapest new nodes; groups are not throttled, tasks and
//     actors launch at most max(5, upscaling_speed × running nodes) nodes; on inputs
//     small enough for the local search (improve.go), that search refines the plan,
//     and plans from other starting points (groups first, nodes of one or two types,
//     the nodes the demand would use best, built node by node, the nodes Ray's v2
//     planner would choose) are made and refined too: the cheapest placeable one is
//     kept;
//  5. scale-down: nodes of a type no longer configured, and nodes idle past their type's
//     timeout, at most max_unavailable of them, never the head, a node of unknown type,
//     a node below its type's min_workers, or a node this plan placed demand on.
//
// Demand no node type could ever hold is reported in Plan.Infeasible and never launched
// for; demand a type could hold but a limit stops is reported with Limited.
func Decide(in Input) Plan {
	plan, _ := decide(in)
	return plan
}

// decide is Decide, with the planner's final state for tests (the nodes demand was
// placed on).
func decide(in Input) (Plan, *planner) {
	cache := newTypeCache()
	cache.limit = 60
	first := greedy(in, cache, nil, servingOrder)
	p := improve(in, cache, first)
	if p.demands == 0 || p.demands > maxSearchDemands {
		return p.plan(), p
	}
	// On inputs small enough for the search, more starting points are planned and
	// searched (improve.go), and the cheapest placeable plan that holds as much as the
	// first is kept:
	//   - serving the gangs before any task (a STRICT_SPREAD whose bundles then hold the
	//     tasks between them, where tasks served first fill one node and leave the gang
	//     to new ones);
	//   - the demand on nodes of one or two types (fill);
	//   - the nodes Ray's planners would choose, each the type the remaining demand
	//     uses best (utilized);
	//   - in both orders, the plan built node by node (pilot);
	//   - the nodes Ray's v2 planner would choose, gang by gang (utilizedV2), last, so
	//     the others keep the passes they had before it.
	// All of it shares one budget of greedy passes (maxSearchPasses), in stages.
	cache.limit = 100
	starts := []*planner{first, greedy(in, cache, nil, groupsFirst)}
	p = cheapestServing(p, improve(in, cache, starts[1]))
	cache.limit = 150
	p = cheapestServing(p, improve(in, cache, fill(in, cache, first)))
	cache.limit = 235
	p = cheapestServing(p, improve(in, cache, utilized(in, cache, first)))
	cache.limit = 335
	for _, start := range starts {
		p = cheapestServing(p, improve(in, cache, pilot(in, cache, start)))
	}
	cache.limit = maxSearchPasses
	p = cheapestServing(p, improve(in, cache, utilizedV2(in, cache, first)))
	return p.plan(), p
}

// greedy runs the stages once: each demand served in turn, in the given order, on nodes the plan has, then
// on the cheapest new ones. seeds are nodes to plan before any demand is served (the
// improvement search's moves, improve.go); those no demand lands on are not launched.
// nil when the seeds break a rule (settleSeeds).
func greedy(in Input, cache *typeCache, seeds []*NodeType, order demandOrder) *planner {
	cache.passes++
	p := newPlanner(in)
	p.cache = cache
	p.order = order
	p.enforceMaxWorkers()
	p.pool = p.buildPool()
	p.launchMinWorkers()
	p.planConstraint()
	if !p.seed(seeds) {
		return nil
	}
	groups, shapes, bad := collectDemand(in)
	p.infeasible = append(p.infeasible, bad...)
	p.demands = len(groups) + len(shapes)
	if seeds == nil && classesApply(groups, shapes) && classesHold(p.pool) {
		p.classes = newClassPool(p.pool)
	}
	for _, d := range order(groups, shapes) {
		if d.shape {
			p.planShape(d)
		} else {
			p.planGroup(d)
		}
	}
	if !p.settleSeeds() {
		return nil
	}
	p.scaleDown()
	return p
}

// planner holds one decision's working state; Decide builds it and throws it away.
type planner struct {
	in    Input
	types map[string]*NodeType
	// sortedTypes are the configured types in name order, for deterministic choices.
	sortedTypes []*NodeType
	// count is, per type, the worker nodes running or launching and not terminated,
	// plus those the plan launches; workers is the same over the cluster (nodes of
	// unknown type included, the head not).
	count   map[string]int
	workers int
	// terminated are the nodes the plan terminates.
	terminated   map[string]bool
	terminations []Termination
	pool         *pool
	// launches are the plan's launches by type; launchOrder the types in first-launch
	// order (sorted at the end).
	launches map[string]*Launch
	// launchedFor indexes the launches' For lists.
	launchedFor forIndex
	infeasible  []Infeasible
	// shapeBudget is how many more nodes tasks and actors may launch in this plan.
	shapeBudget int
	// nextID numbers the planned nodes.
	nextID int
	cache  *typeCache
	// typeVectors are the types' capacities over the pool's columns (typeVector).
	typeVectors map[*NodeType][]resources.Amount
	// idleRunning is the running nodes as if idle, for fitsExistingTotals; built on
	// first use.
	idleRunning *placement.Snapshot
	// templates are a new node of each type (template).
	templates map[*NodeType]placement.Node
	// served is, per demand name, how many of its instances the plan holds (a group: 0
	// or 1).
	served map[string]int
	// demands is how many groups and shapes are served; demandLaunches the nodes
	// launched for them by type (min_workers and request_resources not counted).
	demands        int
	demandLaunches map[string]int
	// seeded are the nodes the improvement search planned before demand (seed).
	seeded []seededNode
	// order is the order demand is served in (servingOrder or groupsFirst).
	order demandOrder
	// classes, on large inputs, holds the nodes demand may use instead of pool
	// (classes.go).
	classes *classPool
	// placeableKnown is placeable's answer once worked out: 1 yes, 2 no, 0 not yet.
	placeableKnown int8
}

func newPlanner(in Input) *planner {
	p := &planner{
		in:          in,
		types:       make(map[string]*NodeType, len(in.Types)),
		count:       make(map[string]int),
		terminated:  make(map[string]bool),
		launches:    make(map[string]*Launch),
		launchedFor: make(forIndex),
		cache:       newTypeCache(),
		typeVectors: make(map[*NodeType][]resources.Amount),
		templates:   make(map[*NodeType]placement.Node),
		served:      make(map[string]int, len(in.Groups)+len(in.Shapes)),

		demandLaunches: make(map[string]int),
	}
	for i := range in.Types {
		t := &in.Types[i]
		if _, dup := p.types[t.Name]; dup {
			continue // the first wins; the config loader refuses duplicates
		}
		p.types[t.Name] = t
		p.sortedTypes = append(p.sortedTypes, t)
	}
	slices.SortFunc(p.sortedTypes, func(a, b *NodeType) int { return strings.Compare(a.Name, b.Name) })
	running := 0
	for _, node := range in.Nodes {
		if node.State == NodeRunning {
			running++
		}
		if node.Head {
			continue
		}
		p.workers++
		p.count[node.Type]++
	}
	p.shapeBudget = max(minLaunchBurst, int(math.Floor(in.UpscalingSpeed*float64(running))))
	return p
}

// buildPool is the nodes demand may use: running nodes with their free capacity, and
// launching nodes of a known type, all free. Nodes the plan terminates are left out.
func (p *planner) buildPool() *pool {
	pl := newPool()
	p.existingRows(pl.add)
	return pl
}

// existingRows calls add with the row of each node demand may use, in input order:
// running nodes with their free capacity, launching nodes of a known type, all free,
// and not the nodes the plan terminates.
func (p *planner) existingRows(add func(row placement.Node, kind nodeKind, typ string)) {
	for _, node := range p.in.Nodes {
		if p.terminated[node.ID] {
			continue
		}
		switch node.State {
		case NodeRunning:
			row := node.Placement
			row.Total = countedMIG(row.Total)
			row.Available = countedMIG(row.Available)
			add(row, kindRunning, node.Type)
		case NodeLaunching:
			if t, ok := p.types[node.Type]; ok {
				add(NewNode(placement.NodeID(node.ID), t), kindLaunching, node.Type)
			}
		}
	}
}

// allowance is how many more nodes of type t the limits let the plan launch.
func (p *planner) allowance(t *NodeType) int {
	return max(0, min(t.MaxWorkers-p.count[t.Name], p.in.MaxWorkers-p.workers))
}

// launch records n new nodes of type t for the named demand and returns their ids.
func (p *planner) launch(t *NodeType, n int, forName string) {
	if n <= 0 {
		return
	}
	p.count[t.Name] += n
	p.workers += n
	entry, ok := p.launches[t.Name]
	if !ok {
		entry = &Launch{Type: t.Name}
		p.launches[t.Name] = entry
	}
	entry.Count += n
	if !p.launchedFor.lists(entry, forName) {
		entry.For = append(entry.For, forName)
	}
	if forName != ForMinWorkers && forName != ForRequestResources {
		p.demandLaunches[t.Name] += n
	}
}

// forIndex is, per type, the names in its Launch.For, and how many of the list's
// entries it holds (entries appended elsewhere are added on the next look): large plans
// launch for thousands of demands.
type forIndex map[string]*forNames

type forNames struct {
	names   map[string]bool
	indexed int
}

// lists: the launch's For lists the name.
func (index forIndex) lists(entry *Launch, name string) bool {
	known, ok := index[entry.Type]
	if !ok {
		known = &forNames{names: make(map[string]bool)}
		index[entry.Type] = known
	}
	for ; known.indexed < len(entry.For); known.indexed++ {
		known.names[entry.For[known.indexed]] = true
	}
	return known.names[name]
}

// newID names the next planned node.
func (p *planner) newID(t *NodeType) placement.NodeID {
	p.nextID++
	return plannedID(t.Name, p.nextID)
}

// launchMinWorkers brings every type up to its min_workers (within max_workers).
func (p *planner) launchMinWorkers() {
	for _, t := range p.sortedTypes {
		if t.Unavailable {
			continue
		}
		n := min(t.MinWorkers-p.count[t.Name], p.allowance(t))
		for range max(0, n) {
			p.pool.add(NewNode(p.newID(t), t), kindPlanned, t.Name)
		}
		p.launch(t, n, ForMinWorkers)
	}
}

// plan assembles the answer: launches merged per type and sorted by type name.
func (p *planner) plan() Plan {
	var out Plan
	for _, name := range slices.Sorted(maps.Keys(p.launches)) {
		out.Launches = append(out.Launches, *p.launches[name])
	}
	out.Terminations = p.terminations
	out.Infeasible = p.infeasible
	return out
}

// price is a type's price for comparisons: an unpriced type is the most expensive, so
// priced types win.
func price(t *NodeType) float64 {
	if t.PricePerHour <= 0 {
		return math.Inf(1)
	}
	return t.PricePerHour
}

// isGPUType: the type offers GPUs or MIG profiles.
func isGPUType(t *NodeType) bool {
	if t.Resources[resources.GPU] > 0 {
		return true
	}
	return !countedMIG(t.Resources).Equal(t.Resources)
}

// optionCost is an option's nodes times its type's price.
func optionCost(o option) float64 {
	if o.nodes == 0 {
		return 0
	}
	return float64(o.nodes) * price(o.t)
}

// cheaper orders two candidate launches: lower cost (nodes × price), then the higher
// priority, then fewer nodes, then the type name.
func cheaper(a, b option) bool {
	costA, costB := float64(a.nodes)*price(a.t), float64(b.nodes)*price(b.t)
	if a.nodes == 0 {
		costA = 0
	}
	if b.nodes == 0 {
		costB = 0
	}
	return cmp.Or(cmp.Compare(costA, costB), cmp.Compare(b.t.Priority, a.t.Priority),
		cmp.Compare(a.nodes, b.nodes), strings.Compare(a.t.Name, b.t.Name)) < 0
}
