package autoscaler

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// How the planner picks node types, and what is and is not optimal.
//
// Demand is served one at a time in a fixed order (collectDemand: groups and task shapes
// in one queue, most GPUs first, so CPU-only work packs onto the spare CPUs of GPU nodes
// planned before it). Each demand first goes on nodes the cluster has or the plan
// already launches, running nodes first; only what does not fit there gets new nodes.
// For that, every type is priced alone: the fewest nodes of the type that hold the
// demand (a gang together with the free capacity already there, except STRICT_PACK,
// which one new node must hold), times the type's price; the cheapest wins (then the
// higher priority, fewer nodes, the name). Small gangs of unlike bundles are also priced
// on a mix of types, the remaining tasks of a shape are spread over types at the lowest
// total cost, and a gang no one type holds gets a mix (planMixed). Later demand is
// bin-packed onto the nodes planned for earlier demand.
//
// This greedy pass is not a global optimum: serving demand in another order, or a
// costlier type for one demand whose leftovers hold later demand, can be cheaper (bin
// packing with costs is NP-hard; Ray's and Karpenter's planners are greedy too). On
// small inputs a bounded local search over the greedy plan (improve.go) recovers much
// of that: on the cost benchmark's sets the plans cost 1.02 × the integer optimum on
// average.

// option is one way to hold a demand on new nodes of one type.
type option struct {
	t *NodeType
	// nodes is how many new nodes the demand needs of the type (for shapes, to hold all
	// of the remaining instances: the cost compared; fewer may be launched).
	nodes int
	// commit applies the option to the planner.
	commit func()
}

// typeCache holds, per demand key and type, how the demand fits on new nodes of the
// type alone. Demands with the same key share it: identical pending work is priced
// once per plan.
type typeCache struct {
	groups map[cacheKey]*freshGroup
	shapes map[cacheKey]*freshShape
	// rejects caches quickRejects.
	rejects map[cacheKey]bool
	// templateRows are templateNodes' rows per type.
	templateRows map[*NodeType][]placement.Node
	// holding caches cheapestHolding.
	holding map[bundleKey]*NodeType
	// passes counts the decision's greedy passes; the search stops trying plans at
	// limit (maxSearchPasses).
	passes, limit int
}

type cacheKey struct{ demand, typ string }

// bundleKey is one bundle of a demand, by the demand's key and the bundle's index.
type bundleKey struct {
	demand string
	bundle int
}

func newTypeCache() *typeCache {
	return &typeCache{groups: make(map[cacheKey]*freshGroup), shapes: make(map[cacheKey]*freshShape),
		rejects: make(map[cacheKey]bool), templateRows: make(map[*NodeType][]placement.Node),
		holding: make(map[bundleKey]*NodeType)}
}

// freshGroup is a gang on new nodes of one type alone.
type freshGroup struct {
	// nodes is the fewest nodes that hold it; 0 when no number of nodes of the type does.
	nodes int
	// rows are the nodes it uses, with what it leaves free, under template ids.
	rows []placement.Node
	// err is placement's answer on as many nodes as the gang has bundles, when it does
	// not fit; nil until groupErr asks when the quick check rejected the type.
	err error
}

// freshShape is instances of a shape on one new node of a type.
type freshShape struct {
	// fills[j] is the node holding j+1 instances; len(fills) is how many one node holds.
	fills []placement.Node
	// err is why none fits; nil until shapeErr asks when the quick check rejected the
	// type.
	err error
}

// maxInstancesPerNode bounds how many instances of one shape the planner packs onto one
// new node (a bound on work, not a rule: only tiny shapes reach it).
const maxInstancesPerNode = 1024

// templateNodes are n new nodes of type t under template ids ("template-0000", ...),
// built once per type and plan: callers only read them.
func (c *typeCache) templateNodes(t *NodeType, n int) []placement.Node {
	rows := c.templateRows[t]
	for len(rows) < n {
		rows = append(rows, NewNode(placement.NodeID(fmt.Sprintf("template-%04d", len(rows))), t))
	}
	c.templateRows[t] = rows
	return rows[:n:n]
}

// couldHoldEach is a quick necessary condition before asking placement: every bundle fits
// one empty node of the type by amounts, and the type's labels pass its selector.
func couldHoldEach(d *demand, t *NodeType, node placement.Node) bool {
	for index, bundle := range d.request.Bundles {
		if !bundle.IsSubsetOf(node.Total) {
			return false
		}
		if len(d.request.BundleLabelSelectors) > 0 && !d.request.BundleLabelSelectors[index].Matches(node.Labels) {
			return false
		}
	}
	return true
}

// scheduleOn places the demand on the rows and reserves it there. ok is false when
// placement says no (err says why).
func scheduleOn(rows []placement.Node, request placement.Request) (*placement.Snapshot, placement.Plan, error) {
	snapshot, err := placement.NewSnapshot(rows)
	if err != nil {
		return nil, placement.Plan{}, err
	}
	plan, err := placement.Schedule(snapshot, request)
	if err != nil {
		return snapshot, plan, err
	}
	if err := snapshot.Reserve(request.Bundles, plan); err != nil {
		return snapshot, plan, err
	}
	return snapshot, plan, nil
}

// group returns how the gang fits on new nodes of type t alone.
func (p *planner) freshGroup(d *demand, t *NodeType) *freshGroup {
	c := p.cache
	key := cacheKey{d.key, t.Name}
	if cached, ok := c.groups[key]; ok {
		return cached
	}
	result := &freshGroup{}
	c.groups[key] = result
	bundles := len(d.request.Bundles)
	if p.quickRejects(d, t) {
		return result // placement's words for it only when a reason is needed (groupErr)
	}
	if rows, ok := p.freshFromInstances(d, t); ok {
		result.rows, result.nodes = rows, len(rows)
		return result
	}
	try := func(n int) (*placement.Snapshot, placement.Plan, error) {
		return scheduleOn(p.cache.templateNodes(t, n), d.request)
	}
	// STRICT_PACK uses one node (its island); STRICT_SPREAD one per bundle; PACK and
	// SPREAD are bin-packed (Ray plans both as plain bundles): the fewest nodes that
	// hold them, found by bisection from a lower bound by amounts.
	low, high := 1, bundles
	switch d.request.Strategy {
	case placement.StrategyStrictPack:
		high = 1
	case placement.StrategyStrictSpread:
		low = bundles
	default:
		low = min(bundles, lowerBound(d.request.Bundles, countedMIG(t.Resources)))
	}
	// The bound by amounts is usually exact: try it first.
	snapshot, plan, err := try(low)
	switch {
	case err == nil:
		high = low
	case low == high:
		result.err = err
		return result
	default:
		if snapshot, plan, err = try(high); err != nil {
			result.err = err
			return result
		}
		low++
	}
	for low < high {
		middle := (low + high) / 2
		if s, p, err := try(middle); err == nil {
			snapshot, plan, high = s, p, middle
		} else {
			low = middle + 1
		}
	}
	result.rows = usedRows(snapshot, plan)
	result.nodes = len(result.rows)
	return result
}

// freshFromInstances is a gang of equal bundles on new nodes of type t alone, from how
// many of its bundle one new node holds (typeCache.shape, one placement call per
// bundle it holds, shared by every gang and task of that bundle): PACK and SPREAD fill
// each node in turn, STRICT_SPREAD puts one bundle on each. Each node's share was
// placed by placement on that node, so the gang fits the rows. ok is false for a
// STRICT_PACK (its island rule binds the bundles together), a gang of unlike bundles,
// and a bundle no node of the type holds: placement is asked about the whole gang then.
func (p *planner) freshFromInstances(d *demand, t *NodeType) (rows []placement.Node, ok bool) {
	if d.request.Strategy == placement.StrategyStrictPack || len(d.distinct) != 1 {
		return nil, false
	}
	fills := p.cache.shape(bundleDemand(d, p.classes), t).fills
	if len(fills) == 0 {
		return nil, false
	}
	perNode := len(fills)
	if d.request.Strategy == placement.StrategyStrictSpread {
		perNode = 1
	}
	for left := len(d.request.Bundles); left > 0; left -= perNode {
		rows = append(rows, fills[min(perNode, left)-1])
	}
	return rows, true
}

// quickRejects: a necessary condition shows no number of new nodes of type t holds the
// gang: some bundle fits no node of the type by amounts or labels, or a STRICT_PACK's
// sum exceeds one node's amounts.
func (p *planner) quickRejects(d *demand, t *NodeType) bool {
	key := cacheKey{d.key, t.Name}
	if rejects, ok := p.cache.rejects[key]; ok {
		return rejects
	}
	rejects := !couldHoldEach(d, t, p.template(t)) ||
		d.request.Strategy == placement.StrategyStrictPack && !covers(p.typeVector(t), p.pool.sumOf(d))
	p.cache.rejects[key] = rejects
	return rejects
}

// template is a new node of type t under the id "template".
func (p *planner) template(t *NodeType) placement.Node {
	row, ok := p.templates[t]
	if !ok {
		row = NewNode("template", t)
		p.templates[t] = row
	}
	return row
}

// groupErr is why the gang does not fit new nodes of type t alone (nil when it does).
func (p *planner) groupErr(d *demand, t *NodeType) error {
	result := p.freshGroup(d, t)
	if result.nodes == 0 && result.err == nil { // rejected by the quick check
		_, _, result.err = scheduleOn(p.cache.templateNodes(t, len(d.request.Bundles)), d.request)
		if result.err == nil { // the quick check is only ever stricter than placement
			result.err = fmt.Errorf("a bundle fits no node of type %s", t.Name)
		}
	}
	return result.err
}

// lowerBound is the fewest nodes of the given capacity whose summed amounts cover the
// bundles', at least 1.
func lowerBound(bundles []resources.Set, capacity resources.Set) int {
	sum := make(map[string]resources.Amount)
	for _, bundle := range bundles {
		for name, amount := range bundle {
			sum[name] += amount
		}
	}
	bound := 1
	for name, amount := range sum {
		if per := capacity[name]; per > 0 {
			bound = max(bound, int((amount+per-1)/per))
		}
	}
	return bound
}

// usedRows are the rows, after the plan, of the nodes the plan uses, in id order.
func usedRows(snapshot *placement.Snapshot, plan placement.Plan) []placement.Node {
	var ids []placement.NodeID
	for _, placed := range plan.Placements {
		if !slices.Contains(ids, placed.NodeID) {
			ids = append(ids, placed.NodeID)
		}
	}
	slices.Sort(ids)
	rows := make([]placement.Node, len(ids))
	for i, id := range ids {
		rows[i], _ = snapshot.Node(id)
	}
	return rows
}

// shape returns how many instances of the shape one new node of type t holds, with the
// node after each.
func (c *typeCache) shape(d *demand, t *NodeType) *freshShape {
	key := cacheKey{d.key, t.Name}
	if cached, ok := c.shapes[key]; ok {
		return cached
	}
	result := &freshShape{}
	c.shapes[key] = result
	node := NewNode("template", t)
	if !couldHoldEach(d, t, node) {
		return result // placement's words for it only when a reason is needed (shapeErr)
	}
	snapshot, err := placement.NewSnapshot([]placement.Node{node})
	if err != nil {
		result.err = err
		return result
	}
	for len(result.fills) < maxInstancesPerNode {
		plan, err := placement.Schedule(snapshot, d.request)
		if err == nil {
			err = snapshot.Reserve(d.request.Bundles, plan)
		}
		if err != nil {
			if len(result.fills) == 0 {
				result.err = err
			}
			break
		}
		row, _ := snapshot.Node(node.ID)
		result.fills = append(result.fills, row)
	}
	return result
}

// shapeErr is why no instance of the shape fits a new node of type t (nil when one does).
func (c *typeCache) shapeErr(d *demand, t *NodeType) error {
	result := c.shape(d, t)
	if len(result.fills) == 0 && result.err == nil { // rejected by the quick check
		_, _, result.err = scheduleOn([]placement.Node{NewNode("template", t)}, d.request)
		if result.err == nil {
			result.err = fmt.Errorf("the shape fits no node of type %s", t.Name)
		}
	}
	return result.err
}

// candidateTypes are the types demand may launch: every type, except that CPU-only
// demand never gets a GPU type while a type without GPUs could hold it (launchable now
// or not). Only when no such type exists may CPU-only work use a GPU type, rather than
// wait forever.
func (p *planner) candidateTypes(d *demand, fits func(*NodeType) bool) []*NodeType {
	if d.anyGPU {
		return p.sortedTypes
	}
	var cpuTypes []*NodeType
	holds := false
	for _, t := range p.sortedTypes {
		if !isGPUType(t) {
			cpuTypes = append(cpuTypes, t)
			holds = holds || fits(t)
		}
	}
	if holds {
		return cpuTypes
	}
	return p.sortedTypes
}

// limitTracker remembers why types that could hold a demand were not launched.
type limitTracker struct {
	feasible bool
	reason   string
}

func (l *limitTracker) note(reason string) {
	l.feasible = true
	if l.reason == "" {
		l.reason = reason
	}
}

func (p *planner) limitReason(t *NodeType) string {
	switch {
	case t.Unavailable:
		return fmt.Sprintf("node type %s could hold it but cannot be launched now (provider capacity)", t.Name)
	case p.count[t.Name] >= t.MaxWorkers:
		return fmt.Sprintf("node type %s could hold it but is at its max_workers (%d)", t.Name, t.MaxWorkers)
	default:
		return fmt.Sprintf("node type %s could hold it but the cluster is at max_workers (%d)", t.Name, p.in.MaxWorkers)
	}
}

// planGroup plans one placement group, all or nothing: on the free capacity of running
// nodes, then of launching and planned nodes, then on new nodes of the cheapest type.
func (p *planner) planGroup(d *demand) {
	if p.classes != nil {
		p.planGroupByClass(d)
		return
	}
	if p.placeOnPool(d) {
		p.served[d.name] = 1
		return
	}
	open, positions := p.pool.open(d, kindPlanned)
	openFree := p.pool.freeSum(positions)
	fits := func(t *NodeType) bool { return p.freshGroup(d, t).nodes > 0 }
	// Types are tried in the order of a lower bound of their cost, from amounts alone:
	// a type whose bound is not cheaper than the best option found is skipped without
	// asking placement, as its option could only cost more.
	candidates := slices.Clone(p.candidateTypes(d, fits))
	bounds := make(map[*NodeType]int, len(candidates))
	for _, t := range candidates {
		bounds[t] = p.newNodesBound(d, t, openFree, len(open))
	}
	boundCost := func(t *NodeType) float64 { return float64(bounds[t]) * price(t) }
	slices.SortStableFunc(candidates, func(a, b *NodeType) int { return cmp.Compare(boundCost(a), boundCost(b)) })
	var best *option
	var limits limitTracker
	for _, t := range candidates {
		if best != nil && !cheaper(option{t: t, nodes: bounds[t]}, *best) {
			continue
		}
		if p.quickRejects(d, t) {
			continue
		}
		// How the gang fits new nodes of the type alone takes placement calls: made here
		// when the option is that (no open node, STRICT_PACK) or the type's limit is to be
		// reported, else by groupOption only if the open nodes with the bound do not hold
		// it.
		var fresh *freshGroup
		if t.Unavailable || len(open) == 0 || d.request.Strategy == placement.StrategyStrictPack {
			if fresh = p.freshGroup(d, t); fresh.nodes == 0 {
				continue
			}
		}
		if t.Unavailable {
			limits.note(p.limitReason(t))
			continue
		}
		if best != nil && len(open) == 0 && !cheaper(option{t: t, nodes: fresh.nodes}, *best) {
			continue
		}
		opt, ok := p.groupOption(d, t, fresh, open, bounds[t])
		if !ok {
			continue
		}
		if opt.nodes > p.allowance(t) {
			limits.note(p.limitReason(t))
			continue
		}
		if best == nil || cheaper(opt, *best) {
			best = &opt
		}
	}
	// A mix of types (a GPU node per GPU bundle, a CPU node per CPU-only one) can cost
	// less than the best single type; it is priced for small gangs of unlike bundles
	// (a bound on work: each price takes a placement call per bundle), and for any gang
	// no single type holds.
	var mixed *mixedOption
	if best == nil && !limits.feasible || best != nil && len(d.request.Bundles) <= maxMixedBundles && len(d.distinct) > 1 {
		mixed = p.mixedOption(d, open)
	}
	if mixed != nil && (best == nil || mixed.cost < optionCost(*best)) {
		mixed.commit()
		p.served[d.name] = 1
		return
	}
	if best != nil {
		best.commit()
		p.served[d.name] = 1
		return
	}
	p.reportUnheld(d, limits, func(t *NodeType) error { return p.groupErr(d, t) })
}

// maxMixedBundles is the most bundles of a gang some single type holds for which a mix
// of types is priced too.
const maxMixedBundles = 8

// mixedOption is a gang on new nodes of several types.
type mixedOption struct {
	cost   float64
	commit func()
}

// mixedOption prices a gang on a mix of new node types (its bundles' label selectors or
// shapes may need several types: three bundles on hdd nodes and one on an ssd node; or
// a mix is cheaper: the GPU bundles on GPU nodes, a CPU-only bundle on a CPU node): one
// new node per bundle, of the cheapest type that holds that bundle alone, then, while
// placement still takes the whole gang (with the open nodes) without it, each new node
// is dropped in turn. STRICT_PACK is one node and never mixed. A greedy choice: cheap,
// not always the cheapest mix. nil when no mix holds the gang within the limits.
func (p *planner) mixedOption(d *demand, open []placement.Node) *mixedOption {
	if d.request.Strategy == placement.StrategyStrictPack {
		return nil
	}
	var added []*NodeType
	for b := range d.request.Bundles {
		t := p.cheapestHolding(d, b)
		if t == nil {
			return nil
		}
		added = append(added, t)
	}
	try := func(types []*NodeType) (*placement.Snapshot, placement.Plan, []placement.NodeID, error) {
		rows := slices.Clip(open)
		ids := make([]placement.NodeID, len(types))
		for i, t := range types {
			ids[i] = placement.NodeID(fmt.Sprintf("planned-%s-%d", t.Name, p.nextID+1+i))
			rows = append(rows, NewNode(ids[i], t))
		}
		snapshot, plan, err := scheduleOn(rows, d.request)
		return snapshot, plan, ids, err
	}
	snapshot, plan, ids, err := try(added)
	if err != nil {
		return nil
	}
	for i := len(added) - 1; i >= 0; i-- {
		fewer := slices.Delete(slices.Clone(added), i, i+1)
		if s, pl, id, err := try(fewer); err == nil {
			added, snapshot, plan, ids = fewer, s, pl, id
		}
	}
	counts := map[*NodeType]int{}
	cost := 0.0
	for _, t := range added {
		counts[t]++
		cost += price(t)
	}
	total := 0
	for t, n := range counts {
		if n > p.allowance(t) {
			return nil
		}
		total += n
	}
	if total > p.in.MaxWorkers-p.workers {
		return nil
	}
	return &mixedOption{cost: cost, commit: func() {
		p.pool.update(snapshot, plan, d)
		for i, id := range ids {
			row, _ := snapshot.Node(id)
			p.pool.add(row, kindPlanned, added[i].Name)
			p.launch(added[i], 1, d.name)
		}
		p.nextID += len(ids)
	}}
}

// cheapestHolding is the cheapest available type whose new node holds bundle b of the
// gang alone; nil when none does.
// A CPU-only bundle gets a type without GPUs when one holds it. The answer depends on
// the bundle and the types alone: it is worked out once per decision (typeCache).
func (p *planner) cheapestHolding(d *demand, b int) *NodeType {
	key := bundleKey{d.key, b}
	if t, ok := p.cache.holding[key]; ok {
		return t
	}
	t := p.findCheapestHolding(d, b)
	p.cache.holding[key] = t
	return t
}

// findCheapestHolding is cheapestHolding, worked out.
func (p *planner) findCheapestHolding(d *demand, b int) *NodeType {
	bundle := d.original.Bundles[b]
	cpuOnly := bundle[resources.GPU] == 0 && countedMIG(bundle).Equal(bundle)
	var best *NodeType
	for _, gpuTypes := range []bool{false, true} {
		for _, t := range p.sortedTypes {
			if t.Unavailable || cpuOnly && isGPUType(t) != gpuTypes ||
				(best != nil && !cheaper(option{t: t, nodes: 1}, option{t: best, nodes: 1})) {
				continue
			}
			if p.typeHoldsBundle(d, t, b) {
				best = t
			}
		}
		if best != nil || !cpuOnly {
			return best
		}
	}
	return best
}

// typeHoldsBundle reports whether a new node of type t holds bundle b of the gang, with
// its label selector, by placement.
func (p *planner) typeHoldsBundle(d *demand, t *NodeType, b int) bool {
	request := placement.Request{Bundles: []resources.Set{d.request.Bundles[b]}, Strategy: placement.StrategyPack}
	if len(d.request.BundleLabelSelectors) > 0 {
		request.BundleLabelSelectors = []nodelabel.Selector{d.request.BundleLabelSelectors[b]}
	}
	_, _, err := scheduleOn([]placement.Node{p.template(t)}, request)
	return err == nil
}

// unboundedNodes is newNodesBound's answer when no number of nodes of a type holds the
// gang by amounts.
const unboundedNodes = math.MaxInt32

// newNodesBound is the fewest new nodes of type t that could, with the free amounts of
// the open nodes (openFree, over the pool's columns; open of them), hold the gang by
// amounts: a necessary condition only, so placement is never asked about fewer, and
// every option of the type takes at least this many nodes. At least 1: demand that
// reaches the new-node stage did not fit the open nodes.
func (p *planner) newNodesBound(d *demand, t *NodeType, openFree []resources.Amount, open int) int {
	if d.request.Strategy == placement.StrategyStrictPack {
		return 1 // one node, whatever is open
	}
	capacity := p.typeVector(t)
	nodes := 1
	for _, need := range p.pool.sumOf(d) {
		deficit := need.amount
		if need.column < len(openFree) {
			deficit -= openFree[need.column]
		}
		if deficit <= 0 {
			continue
		}
		var per resources.Amount
		if need.column < len(capacity) {
			per = capacity[need.column]
		}
		if per <= 0 {
			return unboundedNodes
		}
		nodes = max(nodes, int((deficit+per-1)/per))
	}
	if d.request.Strategy == placement.StrategyStrictSpread {
		nodes = max(nodes, len(d.request.Bundles)-open)
	}
	return nodes
}

// typeVector is a new node of type t's capacity over the pool's columns.
func (p *planner) typeVector(t *NodeType) []resources.Amount {
	if vector, ok := p.typeVectors[t]; ok {
		return vector
	}
	vector := p.pool.vector(countedMIG(t.Resources))
	p.typeVectors[t] = vector
	return vector
}

// placeOnPool places a group on nodes the plan already has, running nodes first.
func (p *planner) placeOnPool(d *demand) bool {
	previous := -1
	for _, kind := range []nodeKind{kindRunning, kindPlanned} {
		rows, positions := p.pool.open(d, kind)
		if len(rows) == 0 || len(rows) == previous {
			continue
		}
		previous = len(rows)
		if !p.pool.couldHold(d, positions) {
			continue // placement would refuse: skip asking it
		}
		// Placement's work grows with the rows it is given: among many open nodes it is
		// first asked about the leading ones that could hold the gang by amounts (at
		// least minPlacementRows), then about twice as many, up to all of them; the
		// answer is placement's on all of them whenever the leading ones do not hold it.
		n := len(rows)
		if n > minPlacementRows {
			n = max(minPlacementRows, p.pool.holdingPrefix(d, positions))
		}
		for ; ; n = min(2*n, len(rows)) {
			snapshot, plan, err := scheduleOn(rows[:n], d.request)

			if err == nil {
				p.pool.update(snapshot, plan, d)
				return true
			}
			if n == len(rows) {
				break
			}
		}
	}
	return false
}

// minPlacementRows is the fewest open nodes placeOnPool asks placement about first
// (a bound on work, not a rule).
const minPlacementRows = 16

// groupOption prices a gang on new nodes of type t: with the free capacity of the
// nodes the plan has (open), the fewest new nodes that complete it, at least bound
// (newNodesBound); STRICT_PACK (one node or island) or no open node: the nodes it needs
// alone (fresh, computed here when nil). ok is false when no number of nodes of the type
// holds the gang.
func (p *planner) groupOption(d *demand, t *NodeType, fresh *freshGroup, open []placement.Node, bound int) (opt option, ok bool) {
	if d.request.Strategy != placement.StrategyStrictPack && len(open) > 0 {
		try := func(n int) (*placement.Snapshot, placement.Plan, []placement.NodeID, error) {
			rows := slices.Clip(open)
			ids := make([]placement.NodeID, n)
			for i := range ids {
				ids[i] = placement.NodeID(fmt.Sprintf("planned-%s-%d", t.Name, p.nextID+1+i))
				rows = append(rows, NewNode(ids[i], t))
			}
			snapshot, plan, err := scheduleOn(rows, d.request)
			return snapshot, plan, ids, err
		}
		// The bound is usually exact: try it first; else bisect between it and the nodes
		// the gang needs alone.
		snapshot, plan, ids, err := try(bound)
		if err != nil {
			if fresh = p.freshGroup(d, t); fresh.nodes == 0 {
				return option{}, false
			}
		}
		if err != nil && bound < fresh.nodes {
			if snapshot, plan, ids, err = try(fresh.nodes); err == nil {
				low, high := bound+1, fresh.nodes
				for low < high {
					middle := (low + high) / 2
					if s, pl, i, err := try(middle); err == nil {
						snapshot, plan, ids, high = s, pl, i, middle
					} else {
						low = middle + 1
					}
				}
			}
		}
		if err == nil {
			used := usedNew(plan, ids)
			return option{t: t, nodes: len(used), commit: func() {
				p.pool.update(snapshot, plan, d)
				for _, id := range used {
					row, _ := snapshot.Node(id)
					p.pool.add(row, kindPlanned, t.Name)
				}
				p.nextID += len(ids)
				p.launch(t, len(used), d.name)
			}}, true
		}
	}
	if fresh == nil {
		if fresh = p.freshGroup(d, t); fresh.nodes == 0 {
			return option{}, false
		}
	}
	return option{t: t, nodes: fresh.nodes, commit: func() {
		for _, row := range fresh.rows {
			p.nextID++
			p.pool.addPlanned(row, t.Name, p.nextID)
		}
		p.launch(t, fresh.nodes, d.name)
	}}, true
}

// usedNew are the ids among the new nodes that the plan uses.
func usedNew(plan placement.Plan, ids []placement.NodeID) []placement.NodeID {
	var used []placement.NodeID
	for _, id := range ids {
		for _, placed := range plan.Placements {
			if placed.NodeID == id {
				used = append(used, id)
				break
			}
		}
	}
	return used
}

// planShape plans the instances of one shape: as many as fit on the nodes the plan has
// (running first), the rest on new nodes of the cheapest type, within the plan's
// upscaling budget for tasks and actors.
func (p *planner) planShape(d *demand) {
	remaining := d.count
	defer func() { p.served[d.name] = d.count - remaining }()
	for _, kind := range []nodeKind{kindRunning, kindPlanned} {
		if remaining == 0 {
			return
		}
		remaining -= p.fillPool(d, kind, remaining)
	}
	fits := func(t *NodeType) bool { return len(p.cache.shape(d, t).fills) > 0 }
	for remaining > 0 && p.shapeBudget > 0 {
		var usable []*NodeType
		var limits limitTracker
		for _, t := range p.candidateTypes(d, fits) {
			if len(p.cache.shape(d, t).fills) == 0 {
				continue
			}
			if t.Unavailable || p.allowance(t) == 0 {
				limits.note(p.limitReason(t))
				continue
			}
			usable = append(usable, t)
		}
		if len(usable) == 0 {
			p.reportUnheld(d, limits, func(t *NodeType) error { return p.cache.shapeErr(d, t) })
			return
		}
		// The remaining instances may be cheapest on several types (five on a big node
		// and one on a small one rather than two big ones): cover[r] is the least cost
		// of r instances on new nodes of the usable types, limits aside. The type
		// launched first is the one that starts the cheapest cover, and as many of its
		// nodes as that cover takes; the rest is chosen again.
		cover := p.shapeCover(d, usable, remaining)
		perNodeOf := func(t *NodeType) int { return len(p.cache.shape(d, t).fills) }
		startCost := func(t *NodeType, r int) float64 { return price(t) + cover[max(0, r-perNodeOf(t))] }
		first := func(r int) *NodeType {
			var best *NodeType
			for _, t := range usable {
				if best == nil || startCost(t, r) < startCost(best, r) ||
					startCost(t, r) == startCost(best, r) && cheaper(option{t: t, nodes: 1}, option{t: best, nodes: 1}) {
					best = t
				}
			}
			return best
		}
		t := first(remaining)
		perNode := perNodeOf(t)
		need := (remaining + perNode - 1) / perNode
		if !math.IsInf(cover[remaining], 1) {
			need = 1
			for r := remaining - perNode; r > 0 && first(r) == t; r -= perNode {
				need++
			}
		} else { // unpriced types: the cheapest type for all of them, as cheaper orders
			best := option{t: t, nodes: need}
			for _, other := range usable {
				per := perNodeOf(other)
				if opt := (option{t: other, nodes: (remaining + per - 1) / per}); cheaper(opt, best) {
					best = opt
				}
			}
			t, perNode, need = best.t, perNodeOf(best.t), best.nodes
		}
		fresh := p.cache.shape(d, t)
		launch := min(need, p.allowance(t), p.shapeBudget)
		if p.classes != nil {
			full := min(launch, remaining/perNode)
			p.classes.addNew(p, t, d, perNode, full)
			if launch > full {
				p.classes.addNew(p, t, d, remaining-full*perNode, 1)
			}
		} else {
			for i := range launch {
				held := min(perNode, remaining-i*perNode)
				p.nextID++
				p.pool.addPlanned(fresh.fills[held-1], t.Name, p.nextID)
			}
		}
		remaining -= min(remaining, launch*perNode)
		p.shapeBudget -= launch
		p.launch(t, launch, d.name)
	}
}

// shapeCover is, for r up to n, the least cost of r instances of the shape on new nodes
// of the types (unbounded knapsack cover: each node of a type holds as many instances
// as c.shape says). +Inf when only unpriced types hold them.
func (p *planner) shapeCover(d *demand, types []*NodeType, n int) []float64 {
	cover := make([]float64, n+1)
	for r := 1; r <= n; r++ {
		cover[r] = math.Inf(1)
		for _, t := range types {
			cover[r] = min(cover[r], price(t)+cover[max(0, r-len(p.cache.shape(d, t).fills))])
		}
	}
	return cover
}

// fillPool places up to n instances of a shape on the pool's nodes of kind at most
// maxKind and returns how many it placed.
func (p *planner) fillPool(d *demand, maxKind nodeKind, n int) int {
	if p.classes != nil {
		return p.classes.fill(p, d, maxKind, false, n)
	}
	rows, _ := p.pool.open(d, maxKind)
	if len(rows) == 0 {
		return 0
	}
	snapshot, err := placement.NewSnapshot(rows)
	if err != nil {
		return 0
	}
	var placed placement.Plan
	count := 0
	for count < n {
		plan, err := placement.Schedule(snapshot, d.request)
		if err == nil {
			err = snapshot.Reserve(d.request.Bundles, plan)
		}
		if err != nil {
			break
		}
		placed.Placements = append(placed.Placements, plan.Placements...)
		count++
	}
	p.pool.update(snapshot, placed, d)
	return count
}

// reportUnheld reports demand no type holds now (unheldReason).
func (p *planner) reportUnheld(d *demand, limits limitTracker, typeErr func(*NodeType) error) {
	if reason := p.unheldReason(d, limits, typeErr); reason != nil {
		p.infeasible = append(p.infeasible, *reason)
	}
}

// unheldReason says why no type holds a demand now: Limited when a type could hold it
// but a limit stops it; infeasible when no type could ever hold it, unless a running
// node could once its work ends (then the demand just waits: nil).
func (p *planner) unheldReason(d *demand, limits limitTracker, typeErr func(*NodeType) error) *Infeasible {
	if limits.feasible {
		return &Infeasible{For: d.name, Reason: limits.reason, Limited: true}
	}
	if d.name != ForRequestResources && p.fitsExistingTotals(d) {
		return nil
	}
	return &Infeasible{For: d.name, Reason: p.infeasibleReason(d, typeErr)}
}

// runningTotalsCouldHold is a necessary condition for fitsExistingTotals, by amounts:
// a STRICT_PACK's sum is within one running node's totals, any other demand's each
// bundle within some running node's. Placement explains a refusal node by node, which
// is dear on a large cluster: demand this rules out is refused without asking it.
func (p *planner) runningTotalsCouldHold(d *demand) bool {
	needs := d.distinct
	if d.request.Strategy == placement.StrategyStrictPack {
		needs = []resources.Set{d.total()}
	}
	for _, need := range needs {
		held := false
		for _, position := range p.pool.running {
			if need.IsSubsetOf(p.pool.nodes[position].row.Total) {
				held = true
				break
			}
		}
		if !held {
			return false
		}
	}
	return true
}

// fitsExistingTotals: one instance of the demand fits on the running nodes as if they
// were idle.
func (p *planner) fitsExistingTotals(d *demand) bool {
	if !p.runningTotalsCouldHold(d) {
		return false
	}
	if p.idleRunning == nil {
		var rows []placement.Node
		for _, position := range p.pool.running {
			rows = append(rows, atTotal(p.pool.nodes[position].row))
		}
		if len(rows) == 0 {
			return false
		}
		snapshot, err := placement.NewSnapshot(rows)
		if err != nil {
			return false
		}
		p.idleRunning = snapshot // Schedule only reads it: built once per plan
	}
	_, err := placement.Schedule(p.idleRunning, d.request)
	return err == nil
}
