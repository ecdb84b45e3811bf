package autoscaler

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Planning by node classes: how large plans stay fast.
//
// A plan for thousands of demands launches tens of thousands of nodes, and placing each
// gang on them row by row (pool, placeOnPool) costs a placement snapshot per try. Most of
// those nodes are interchangeable: two planned nodes of one type with the same free
// capacity (amounts and GPUs) hold the same work. Above minClassDemands, the planner
// keeps the launching and planned nodes as classes (a node state and how many nodes are
// in it) and running nodes one by one, and serves demand by counting:
//   - how many instances of a bundle a class holds, and the state after some of them,
//     are asked of the placement core once per class and kept, on that class's row
//     alone: placement.CopiesThatFit for a bundle without GPUs, Schedule of the copies
//     together for one with GPUs (holds, together), Schedule of the STRICT_PACK for a
//     STRICT_PACK (packMost, after);
//   - a gang of equal bundles fits the open nodes when their counts add up to its
//     bundles (one per node for STRICT_SPREAD; a node's share was placed there by
//     placement, as freshFromInstances does for new nodes), running nodes first, then
//     the newest classes; else it takes the fewest new nodes of the cheapest type that
//     complete it, as planGroup prices them;
//   - a STRICT_PACK goes on the first open node that holds it whole, else on one new
//     node of the cheapest type;
//   - shapes fill the open nodes the same way, then new nodes as planShape chooses them.
//
// Plans that have a gang of unlike bundles (other than a STRICT_PACK), or a label
// selector on the node id (which tells nodes of a class apart), are planned node by
// node. Small plans always are (the cost search in improve.go works on the rows), so
// the plans of the cost benchmark do not depend on this file; on large ones the class
// plan costs about what the row plan costs (TestClassPlanAgreesWithRows).

// minClassDemands: plans serving more groups and shapes than this are planned by node
// classes. A variable so tests can plan medium inputs both ways.
var minClassDemands = 256

// classPool is the nodes demand may use, with launching and planned nodes kept as
// classes.
type classPool struct {
	classes []*nodeClass
	byState map[string]int
	// count is, per class, how many launching or planned nodes are in it (running
	// nodes' classes count 0: running holds them).
	count []int
	// revivals counts the times a class went from no nodes to some (fitList.pending).
	revivals int
	// live are the classes that have had nodes, in the order they first had them: only
	// they are looked at for open nodes (a node passes through many states, one
	// instance at a time, that no node stays in).
	live   []int
	isLive []bool
	// running are the running nodes, in pool order: their class and pool position.
	running []runningNode
	// packTypes are, per STRICT_PACK key, the types whose new node holds it (of those
	// it may launch: candidateTypes).
	packTypes map[string][]*NodeType
	// keyBuffer is internState's.
	keyBuffer []byte
	// freshTypesOf caches freshTypes.
	freshTypesOf map[freshTypesKey][]freshType
	// freshOf is the class of a new node of each type.
	freshOf map[*NodeType]int
	// unheld are the reasons (nil: it waits) given for demand no type could hold, by
	// demand key (prefixed for shapes: reportUnheld).
	unheld map[string]*Infeasible
	// bundles are the bundle demands of gangs of equal bundles, by the bundle's text
	// (bundleDemand).
	bundles map[string]*demand
	// keyIDs number the demand keys (keyID).
	keyIDs map[string]int
	// lists are, per demand key, the nodes that may hold an instance (fitList).
	lists map[int]*fitList
}

type runningNode struct {
	class    int
	position int
}

// nodeClass is one node state.
type nodeClass struct {
	// row is a node in the state (its id and id label are one such node's).
	row placement.Node
	typ string
	// static is the key of the row's fixed part (internState).
	static string
	// snapshot is the row alone, for place.
	snapshot *placement.Snapshot
	// after is, per demand key, the class after one instance of the demand (the whole
	// request) is placed on the row; -1 when placement refuses.
	after map[int]int
	// holds is, per demand key, how many instances in a row the class holds.
	holds map[int]int
	// many is, per demand key and number of instances, the class after that many
	// (minus, together).
	many map[manyKey]int
}

// fitList is, for one demand key, the nodes that held an instance when last looked at:
// running nodes (indices in classPool.running; their room only shrinks, so those that
// stop holding one are dropped) and live classes of other nodes (a class never changes,
// but its count can go to zero and back); seen is how many live classes were looked at.
type fitList struct {
	running []int
	others  []int
	seen    int
	// pending are live classes not yet asked about (they had no nodes when looked at);
	// revivals is classPool.revivals when they were.
	pending  []int
	revivals int
}

// classesApply: the demand may be planned by classes.
func classesApply(groups, shapes []*demand) bool {
	if len(groups)+len(shapes) <= minClassDemands {
		return false
	}
	for _, d := range slices.Concat(groups, shapes) {
		for _, selector := range d.request.BundleLabelSelectors {
			for _, constraint := range selector {
				if constraint.Key == nodelabel.NodeID {
					return false
				}
			}
		}
	}
	return true
}

// classesHold: the pool's nodes may be planned by classes: none is in a multi-node
// NVLink domain (placement on one node alone would not be placement on the cluster).
func classesHold(pl *pool) bool {
	for i := range pl.nodes {
		if pl.nodes[i].row.NVLinkDomain != "" {
			return false
		}
	}
	return true
}

// newClassPool takes over the pool's nodes: running nodes one by one, launching and
// planned ones by class.
func newClassPool(pl *pool) *classPool {
	cp := &classPool{byState: make(map[string]int), lists: make(map[int]*fitList), keyIDs: make(map[string]int),
		freshOf: make(map[*NodeType]int), freshTypesOf: make(map[freshTypesKey][]freshType),
		unheld: make(map[string]*Infeasible), bundles: make(map[string]*demand), packTypes: make(map[string][]*NodeType)}
	for position := range pl.nodes {
		node := &pl.nodes[position]
		row := pl.rowAt(position)
		if node.kind == kindRunning {
			cp.running = append(cp.running, runningNode{cp.intern(row, node.typ), position})
			continue
		}
		class := cp.intern(row, node.typ)
		cp.add(class, 1)
	}
	return cp
}

// intern is the class of the row of a node of type typ. Nodes in one state share a
// class (their id aside); a node with MIG slot maps (which the key leaves out) has
// classes of its own.
func (cp *classPool) intern(row placement.Node, typ string) int {
	var key strings.Builder
	if len(row.MIGGPUs) > 0 {
		key.WriteString(string(row.ID))
	}
	key.WriteString("|" + typ + "|" + row.Total.String())
	for _, name := range slices.Sorted(maps.Keys(row.Labels)) {
		if name != nodelabel.NodeID {
			key.WriteString(name + "=" + row.Labels[name] + ",")
		}
	}
	key.WriteString("|" + strconv.FormatBool(row.Alive) + "|" + strconv.FormatBool(row.Draining) + "|")
	for _, gpu := range row.GPUs {
		key.WriteString(strconv.Itoa(gpu.Index) + ":" + strconv.Itoa(gpu.NVLinkIsland) + ":" + strconv.Itoa(gpu.Rail) + ",")
	}
	return cp.internState(key.String(), row, typ)
}

// internState is the class of the row whose fixed part (what placement never changes:
// type, totals, labels, status, GPU layout) has the key static.
func (cp *classPool) internState(static string, row placement.Node, typ string) int {
	key := append(cp.keyBuffer[:0], static...)
	key = appendAmounts(key, row.Available)
	for _, gpu := range row.GPUs {
		key = append(strconv.AppendInt(key, int64(gpu.Available), 10), ',')
	}
	cp.keyBuffer = key
	if class, ok := cp.byState[string(key)]; ok {
		return class
	}
	class := len(cp.classes)
	cp.byState[string(key)] = class
	cp.classes = append(cp.classes, &nodeClass{row: row, typ: typ, static: static,
		after: make(map[int]int), holds: make(map[int]int)})
	cp.count = append(cp.count, 0)
	cp.isLive = append(cp.isLive, false)
	return class
}

// add puts n more launching or planned nodes in class c.
func (cp *classPool) add(c, n int) {
	if cp.count[c] == 0 && n > 0 {
		cp.revivals++
	}
	cp.count[c] += n
	if !cp.isLive[c] && n > 0 {
		cp.isLive[c] = true
		cp.live = append(cp.live, c)
	}
}

// after is the class after one instance of d on a node of class c; -1 when it does not
// fit.
func (cp *classPool) after(c int, d *demand) int {
	if !d.anyGPU || len(d.request.Bundles) == 1 {
		if cp.holds(c, d) == 0 {
			return -1
		}
		return cp.then(c, d, 1)
	}
	class := cp.classes[c]
	id := cp.keyID(d)
	if next, ok := class.after[id]; ok {
		return next
	}
	next := -1
	if d.total().IsSubsetOf(class.row.Available) {
		if row, ok := class.place(d.request); ok {
			next = cp.internState(class.static, row, class.typ)
		}
	}
	class.after[id] = next
	return next
}

// fits: placement places the request on a node of the class alone.
func (class *nodeClass) fits(request placement.Request) bool {
	return class.scheduleErr(request) == nil
}

// scheduleErr is placement's answer for the request on a node of the class alone: nil
// when it places it.
func (class *nodeClass) scheduleErr(request placement.Request) error {
	if class.snapshot == nil {
		snapshot, err := placement.NewSnapshot([]placement.Node{class.row})
		if err != nil {
			return err
		}
		class.snapshot = snapshot
	}
	_, err := placement.Schedule(class.snapshot, request)
	return err
}

// place is the row after the request is placed on a node of the class alone; ok is
// false when placement refuses. The class's one-node snapshot is built once and left
// as it was.
func (class *nodeClass) place(request placement.Request) (row placement.Node, ok bool) {
	if class.snapshot == nil {
		snapshot, err := placement.NewSnapshot([]placement.Node{class.row})
		if err != nil {
			return row, false
		}
		class.snapshot = snapshot
	}
	plan, err := placement.Schedule(class.snapshot, request)
	if err != nil || len(plan.Placements) == 0 || class.snapshot.Reserve(request.Bundles, plan) != nil {
		return row, false
	}
	row, _ = class.snapshot.Node(class.row.ID)
	if err := class.snapshot.Release(request.Bundles, plan); err != nil {
		class.snapshot = nil // rebuilt on next use
	}
	return row, true
}

// holds is how many instances of d in a row a node of class c takes (at most
// maxInstancesPerNode). For demand without GPUs or MIG profiles the placement core says
// at once (placement.CopiesThatFit); for one bundle with GPUs, placement of copies
// together (copiesTogether); for a gang with GPUs (a STRICT_PACK of unlike bundles),
// placement's answers one instance at a time.
func (cp *classPool) holds(c int, d *demand) int {
	id := cp.keyID(d)
	if n, ok := cp.classes[c].holds[id]; ok {
		return n
	}
	if !d.anyGPU || len(d.request.Bundles) == 1 {
		var n int
		if copies, ok := placement.CopiesThatFit(cp.classes[c].row, d.total(), d.request.BundleLabelSelectors...); ok {
			n = copies
		} else {
			n = cp.copiesTogether(c, d)
		}
		n = min(n, maxInstancesPerNode)
		cp.classes[c].holds[id] = n
		return n
	}
	// Walk the steps to a class whose count is known or that holds none, then fill in
	// the counts backwards.
	var chain []int
	base := -1 // what the class after the chain's last holds; -1: the last holds none
	for next := c; next >= 0 && len(chain) < maxInstancesPerNode; next = cp.after(next, d) {
		if n, ok := cp.classes[next].holds[id]; ok {
			base = n
			break
		}
		chain = append(chain, next)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		base++
		cp.classes[chain[i]].holds[id] = base
	}
	return cp.classes[c].holds[id]
}

// holdsOne: a node of class c holds one instance of d.
func (cp *classPool) holdsOne(c int, d *demand) bool {
	switch {
	case len(d.request.Bundles) == 1:
		return cp.holds(c, d) > 0
	case d.request.Strategy == placement.StrategyStrictPack && len(d.distinct) == 1 && d.anyGPU:
		return len(d.request.Bundles) <= cp.packMost(c, d)
	default:
		return cp.after(c, d) >= 0
	}
}

// packMost is the most copies of the bundle of d, a STRICT_PACK of equal bundles with
// GPUs, that one STRICT_PACK (with d's topology) places on a node of class c: the bound
// by amounts is tried first, else the most is bisected below it. Fewer copies fit too,
// so every such STRICT_PACK of the bundle is answered from one search per class.
func (cp *classPool) packMost(c int, d *demand) int {
	if d.packID == 0 {
		d.packID = cp.keyIDOf("STRICT_PACK of|" + string(d.request.Topology) + "|" + bundleDemand(d, cp).key)
	}
	class := cp.classes[c]
	if n, ok := class.holds[d.packID]; ok {
		return n
	}
	most := mostCopies(class.row.Available, d.request.Bundles[0], func(n int) bool {
		request := copiesOf(d, n, placement.StrategyStrictPack)
		request.Topology = d.request.Topology
		return class.fits(request)
	})
	class.holds[d.packID] = most
	return most
}

// minus is the class after n instances of d (without GPUs or MIG profiles) on a node
// of class c: its free amounts less theirs, as placement reserves them (holds asked
// placement.CopiesThatFit that they fit).
func (cp *classPool) minus(c int, d *demand, n int) int {
	return cp.afterMany(c, d, n, func(class *nodeClass) int {
		row := class.row
		available := row.Available.Clone()
		for name, amount := range d.total() {
			available[name] -= resources.Amount(n) * amount
			if available[name] == 0 {
				delete(available, name)
			}
		}
		row.Available = available
		return cp.internState(class.static, row, class.typ)
	})
}

// afterMany is the class after n instances of d on a node of class c, worked out by
// next once per class, demand key and n (minus, together).
func (cp *classPool) afterMany(c int, d *demand, n int, next func(*nodeClass) int) int {
	class := cp.classes[c]
	key := manyKey{cp.keyID(d), n}
	if after, ok := class.many[key]; ok {
		return after
	}
	after := next(class)
	if class.many == nil {
		class.many = make(map[manyKey]int)
	}
	class.many[key] = after
	return after
}

// copiesOf is n copies of d's first bundle, with its selector, as one request.
func copiesOf(d *demand, n int, strategy placement.Strategy) placement.Request {
	request := placement.Request{Bundles: make([]resources.Set, n), Strategy: strategy}
	for i := range request.Bundles {
		request.Bundles[i] = d.request.Bundles[0]
	}
	if len(d.request.BundleLabelSelectors) > 0 {
		request.BundleLabelSelectors = make([]nodelabel.Selector, n)
		for i := range request.BundleLabelSelectors {
			request.BundleLabelSelectors[i] = d.request.BundleLabelSelectors[0]
		}
	}
	return request
}

// copiesTogether is how many copies of d's one bundle (with GPUs or a MIG profile)
// placement places together on a node of class c: the bound by amounts is tried first
// (usually exact), else the most is bisected below it.
func (cp *classPool) copiesTogether(c int, d *demand) int {
	return mostCopies(cp.classes[c].row.Available, d.total(), func(n int) bool { return cp.together(c, d, n) >= 0 })
}

// mostCopies is the most copies of bundle, at most maxInstancesPerNode, that a node with
// the free amounts available takes, as fits (placement) says: the bound by amounts is
// tried first (usually exact), else the most is bisected below it (fits holds for
// fewer copies whenever it holds for more).
func mostCopies(available, bundle resources.Set, fits func(n int) bool) int {
	high := maxInstancesPerNode
	for name, need := range bundle {
		if need > 0 {
			high = min(high, int(available[name]/need))
		}
	}
	if high == 0 || fits(high) {
		return high
	}
	low := 0 // fits; high does not
	for high-low > 1 {
		if middle := (low + high) / 2; fits(middle) {
			low = middle
		} else {
			high = middle
		}
	}
	return low
}

// together is the class after n copies of d's one bundle placed together (a PACK group
// of them) on a node of class c; -1 when placement refuses.
func (cp *classPool) together(c int, d *demand, n int) int {
	return cp.afterMany(c, d, n, func(class *nodeClass) int {
		if row, ok := class.place(copiesOf(d, n, placement.StrategyPack)); ok {
			return cp.internState(class.static, row, class.typ)
		}
		return -1
	})
}

type manyKey struct{ demand, n int }

// keyID numbers d's key (from 1), for the classes' tables: maps keyed by small
// integers, not by keys as long as a gang.
func (cp *classPool) keyID(d *demand) int {
	if d.keyID == 0 {
		d.keyID = cp.keyIDOf(d.key)
	}
	return d.keyID
}

// keyIDOf numbers a key.
func (cp *classPool) keyIDOf(key string) int {
	id, ok := cp.keyIDs[key]
	if !ok {
		id = len(cp.keyIDs) + 1
		cp.keyIDs[key] = id
	}
	return id
}

// then is the class after n instances of d on a node of class c (n <= holds).
func (cp *classPool) then(c int, d *demand, n int) int {
	if n == 0 {
		return c
	}
	if !d.anyGPU {
		return cp.minus(c, d, n)
	}
	if len(d.request.Bundles) == 1 {
		if next := cp.together(c, d, n); next >= 0 {
			return next
		}
		return c
	}
	for range n {
		if next := cp.after(c, d); next >= 0 {
			c = next
		}
	}
	return c
}

// list is d's fitList, brought up to date with the classes made since it was last
// looked at.
func (cp *classPool) list(d *demand) *fitList {
	l, ok := cp.lists[cp.keyID(d)]
	if !ok {
		l = &fitList{}
		for i, node := range cp.running {
			if cp.holdsOne(node.class, d) {
				l.running = append(l.running, i)
			}
		}
		cp.lists[cp.keyID(d)] = l
	}
	// A class is asked about d only once it has nodes: many states are passed through
	// and emptied before any demand of a key comes by. The pending ones are looked at
	// again only when some class has had nodes again.
	if l.seen == len(cp.live) && l.revivals == cp.revivals {
		return l
	}
	l.pending = append(l.pending, cp.live[l.seen:]...)
	l.seen, l.revivals = len(cp.live), cp.revivals
	kept := l.pending[:0]
	for _, c := range l.pending {
		switch {
		case cp.count[c] == 0:
			kept = append(kept, c)
		case cp.holdsOne(c, d):
			l.others = append(l.others, c)
		}
	}
	l.pending = kept
	return l
}

// take is how many instances of d one node of class c takes for a gang: all it holds,
// or one for STRICT_SPREAD.
func (cp *classPool) take(c int, d *demand, spread bool) int {
	if spread {
		return min(1, cp.holds(c, d))
	}
	return cp.holds(c, d)
}

// capacity is how many instances of d the open nodes take: the running ones, and all
// (running, launching and planned), the latter counted up to limit.
func (cp *classPool) capacity(d *demand, spread bool, limit int) (running, all int) {
	l := cp.list(d)
	kept := l.running[:0]
	for _, i := range l.running {
		if n := cp.take(cp.running[i].class, d, spread); n > 0 {
			kept = append(kept, i)
			running += n
		}
	}
	l.running = kept
	all = running
	for k := len(l.others) - 1; k >= 0 && all < limit; k-- {
		if c := l.others[k]; cp.count[c] > 0 {
			per := cp.take(c, d, spread)
			all += cp.count[c] * per
		}
	}
	return running, min(all, limit)
}

// fill places up to n instances of d on the open nodes of kind at most maxKind, running
// nodes in pool order first, then the newest classes, and returns how many it placed.
// Running nodes used are pinned.
func (cp *classPool) fill(p *planner, d *demand, maxKind nodeKind, spread bool, n int) int {
	l := cp.list(d)
	placed := 0
	for _, i := range l.running {
		if placed == n {
			return placed
		}
		node := &cp.running[i]
		if k := min(n-placed, cp.take(node.class, d, spread)); k > 0 {
			node.class = cp.then(node.class, d, k)
			placed += k
			p.pool.pinned[p.pool.nodes[node.position].row.ID] = true
		}
	}
	if maxKind == kindRunning {
		return placed
	}
	for k := len(l.others) - 1; k >= 0 && placed < n; k-- {
		c := l.others[k]
		per := cp.take(c, d, spread)
		if cp.count[c] == 0 || per == 0 {
			continue
		}
		nodes := min(cp.count[c], (n-placed)/per)
		if nodes > 0 {
			next := cp.then(c, d, per)
			cp.count[c] -= nodes
			cp.add(next, nodes)
			placed += nodes * per
		}
		if rest := n - placed; rest > 0 && rest < per && cp.count[c] > 0 {
			next := cp.then(c, d, rest)
			cp.count[c]--
			cp.add(next, 1)
			placed += rest
		}
	}
	return placed
}

// freshType is a type whose new node takes per instances of a demand.
type freshType struct {
	t   *NodeType
	per int
}

type freshTypesKey struct {
	demand int
	spread bool
}

// freshTypes are the types d may launch (candidateTypes) whose new node takes some of
// it, with how many (placement's answer for the bundle alone, as freshFromInstances
// prices it): a gang of n needs ceil((n - open) / per) of them.
func (cp *classPool) freshTypes(p *planner, d *demand, spread bool) []freshType {
	key := freshTypesKey{cp.keyID(d), spread}
	types, ok := cp.freshTypesOf[key]
	if !ok {
		perNode := func(t *NodeType) int { return cp.take(cp.fresh(p, t), d, spread) }
		for _, t := range p.candidateTypes(d, func(t *NodeType) bool { return perNode(t) > 0 }) {
			if per := perNode(t); per > 0 {
				types = append(types, freshType{t, per})
			}
		}
		cp.freshTypesOf[key] = types
	}
	return types
}

// fresh is the class of a new node of type t.
func (cp *classPool) fresh(p *planner, t *NodeType) int {
	class, ok := cp.freshOf[t]
	if !ok {
		class = cp.intern(p.template(t), t.Name)
		cp.freshOf[t] = class
	}
	return class
}

// addNew adds nodes new nodes of type t, each holding per instances of d.
func (cp *classPool) addNew(p *planner, t *NodeType, d *demand, per, nodes int) {
	if nodes > 0 {
		class := cp.then(cp.fresh(p, t), d, per)
		cp.add(class, nodes)
	}
}

// bundleDemand is a gang of equal bundles' bundle as a demand of its own (a shape of
// one). Gangs alike share it (cp may be nil).
func bundleDemand(d *demand, cp *classPool) *demand {
	if d.bundle == nil {
		d.bundle = runDemand(d, cp, d.runs[0])
	}
	return d.bundle
}

// runDemand is the bundle of one of d's runs as a demand of its own (a shape of one),
// shared by all runs of the same bundle and selector (cp may be nil).
func runDemand(d *demand, cp *classPool, run bundleRun) *demand {
	if cp != nil {
		if shared, ok := cp.bundles[run.text]; ok {
			return shared
		}
	}
	single := placement.Request{Bundles: d.original.Bundles[run.start : run.start+1 : run.start+1], Strategy: placement.StrategyPack}
	if len(d.original.BundleLabelSelectors) > 0 {
		single.BundleLabelSelectors = d.original.BundleLabelSelectors[run.start : run.start+1 : run.start+1]
	}
	out := newDemand(d.name, single, 1, true)
	if cp != nil {
		cp.bundles[run.text] = out
	}
	return out
}

// planGroupByClass is planGroup on the class pool: a STRICT_PACK on one node, any other
// gang counted onto open nodes, then the cheapest new nodes, one run of equal bundles
// after the other. PACK and SPREAD put no bundle's node in relation to another's; a
// STRICT_SPREAD puts each bundle on a node of its own, and a counted class does not say
// which of its nodes a run used, so only a STRICT_SPREAD's first run may use open nodes
// and the others get new nodes.
func (p *planner) planGroupByClass(d *demand) {
	cp := p.classes
	if d.request.Strategy == placement.StrategyStrictPack {
		p.planStrictPackByClass(d)
		return
	}
	spread := d.request.Strategy == placement.StrategyStrictSpread
	runs := d.runs
	if len(runs) > 1 {
		if runs = p.runsInOrder(d); runs == nil {
			return
		}
	}
	for i, run := range runs {
		bundle := bundleDemand(d, cp) // the first run's, kept on d
		if run.start > 0 {
			bundle = runDemand(d, cp, run)
		}
		if !p.planRunByClass(d, bundle, run.end-run.start, spread, spread && i > 0) {
			return
		}
	}
	p.served[d.name] = 1
}

// runsInOrder is the order in which a gang of unlike bundles is planned run by run, the
// largest bundles first, all or nothing without undoing a run once planned; nil, with
// the gang reported unheld, when that cannot be made sure of. A run whose bundle some
// type holds with room for the whole gang can always be planned, whatever the runs
// before it took. At most one other run may remain, planned first and only if the open
// nodes hold it now. (A gang that fits only under tighter limits, or only on the open
// nodes with two or more such runs, is reported unheld, where the node-by-node plan
// might place it.)
func (p *planner) runsInOrder(d *demand) []bundleRun {
	cp := p.classes
	spread := d.request.Strategy == placement.StrategyStrictSpread
	var limits limitTracker
	var held, unsure []bundleRun
	for _, run := range d.runs {
		room := false
		for _, fresh := range cp.freshTypes(p, runDemand(d, cp, run), spread) {
			if fresh.t.Unavailable || p.allowance(fresh.t) < len(d.request.Bundles) {
				limits.note(p.limitReason(fresh.t))
				continue
			}
			room = true
			break
		}
		if room {
			held = append(held, run)
		} else {
			unsure = append(unsure, run)
		}
	}
	// The largest bundles first, as placement packs a gang: the smaller ones then fit in
	// what the nodes launched for the larger ones leave (a trainer's CPU bundle beside
	// its workers' GPUs).
	slices.SortStableFunc(held, func(a, b bundleRun) int {
		x, y := runDemand(d, cp, a), runDemand(d, cp, b)
		return cmp.Or(cmp.Compare(y.gpus, x.gpus), cmp.Compare(y.cpus, x.cpus))
	})
	if len(unsure) == 0 {
		return held
	}
	if len(unsure) == 1 {
		run := unsure[0]
		if _, open := cp.capacity(runDemand(d, cp, run), spread, run.end-run.start); open >= run.end-run.start {
			return append(unsure, held...)
		}
	}
	cp.reportUnheld(p, d, limits)
	return nil
}

// planRunByClass plans n bundles of a gang, each the demand bundle, onto open nodes
// (unless freshOnly), then onto the fewest new nodes of the cheapest type; false
// (reported unheld) when no type can take them.
func (p *planner) planRunByClass(d, bundle *demand, n int, spread, freshOnly bool) bool {
	cp := p.classes
	running, open := 0, 0
	if !freshOnly {
		running, open = cp.capacity(bundle, spread, n)
	}
	if open >= n {
		kind := kindPlanned
		if running >= n {
			kind = kindRunning
		}
		cp.fill(p, bundle, kind, spread, n)
		return true
	}
	var best option // best.t nil: none yet
	var bestPer int
	var limits limitTracker
	for _, fresh := range cp.freshTypes(p, bundle, spread) {
		t, per := fresh.t, fresh.per
		if t.Unavailable {
			limits.note(p.limitReason(t))
			continue
		}
		opt := option{t: t, nodes: (n - open + per - 1) / per}
		if opt.nodes > p.allowance(t) {
			limits.note(p.limitReason(t))
			continue
		}
		if best.t == nil || cheaper(opt, best) {
			best, bestPer = opt, per
		}
	}
	if best.t == nil {
		cp.reportUnheld(p, d, limits)
		return false
	}
	cp.fill(p, bundle, kindPlanned, spread, open)
	rest := n - open
	full := rest / bestPer
	cp.addNew(p, best.t, bundle, bestPer, full)
	cp.addNew(p, best.t, bundle, rest-full*bestPer, min(1, rest-full*bestPer))
	p.launch(best.t, best.nodes, d.name)
	return true
}

// planStrictPackByClass places a STRICT_PACK on the first open node that holds it whole
// (running nodes first, then the newest classes), else on a new node of the cheapest
// type that holds it.
func (p *planner) planStrictPackByClass(d *demand) {
	cp := p.classes
	l := cp.list(d)
	kept := l.running[:0]
	placed := false
	for _, i := range l.running {
		node := &cp.running[i]
		if !cp.holdsOne(node.class, d) {
			continue
		}
		if next := cp.after(node.class, d); !placed && next >= 0 {
			node.class, placed = next, true
			p.pool.pinned[p.pool.nodes[node.position].row.ID] = true
			if !cp.holdsOne(next, d) {
				continue
			}
		}
		kept = append(kept, i)
	}
	l.running = kept
	for k := len(l.others) - 1; k >= 0 && !placed; k-- {
		if c := l.others[k]; cp.count[c] > 0 {
			if next := cp.after(c, d); next >= 0 {
				cp.count[c]--
				cp.add(next, 1)
				placed = true
			}
		}
	}
	if placed {
		p.served[d.name] = 1
		return
	}
	holding, ok := cp.packTypes[d.key]
	if !ok {
		fits := func(t *NodeType) bool { return cp.holdsOne(cp.fresh(p, t), d) }
		for _, t := range p.candidateTypes(d, fits) {
			if fits(t) {
				holding = append(holding, t)
			}
		}
		cp.packTypes[d.key] = holding
	}
	var best *NodeType
	var limits limitTracker
	for _, t := range holding {
		if t.Unavailable || p.allowance(t) < 1 {
			limits.note(p.limitReason(t))
			continue
		}
		if best == nil || cheaper(option{t: t, nodes: 1}, option{t: best, nodes: 1}) {
			best = t
		}
	}
	if best == nil {
		cp.reportUnheld(p, d, limits)
		return
	}
	cp.add(cp.after(cp.fresh(p, best), d), 1)
	p.launch(best, 1, d.name)
	p.served[d.name] = 1
}

// reportUnheld is planner.reportUnheld for a group, with the reason for demand no type
// could hold worked out once per demand key: on large inputs many gangs are alike.
func (cp *classPool) reportUnheld(p *planner, d *demand, limits limitTracker) {
	typeErr := func(t *NodeType) error { return p.groupErr(d, t) }
	if d.request.Strategy == placement.StrategyStrictPack {
		// One node is all a STRICT_PACK can use: placement's reasons on one, not on a
		// node per bundle.
		typeErr = func(t *NodeType) error {
			if p.freshGroup(d, t).nodes > 0 {
				return nil
			}
			if err := cp.classes[cp.fresh(p, t)].scheduleErr(d.request); err != nil {
				return err
			}
			return p.groupErr(d, t)
		}
	}
	if limits.feasible {
		p.reportUnheld(d, limits, typeErr)
		return
	}
	key := d.key
	if d.shape {
		key = shapePrefix + key
	}
	reason, ok := cp.unheld[key]
	if !ok {
		reason = p.unheldReason(d, limits, typeErr)
		cp.unheld[key] = reason
	}
	if reason != nil {
		p.infeasible = append(p.infeasible, Infeasible{For: d.name, Reason: reason.Reason, Limited: reason.Limited})
	}
}
