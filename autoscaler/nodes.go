package autoscaler

import (
	"maps"
	"slices"
	"strconv"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// NewNode builds the placement row of a node of type t that does not run yet (a
// launching node, or one the plan would launch): all of the type's resources free, the
// type's labels plus nodelabel.NodeID, and, when the type lists its NVLink islands, its
// GPUs (index i, the island GPUIslands gives it, rail i, wholly free), so STRICT_PACK's
// island rule applies to it as to a running node. MIG profiles in the type's resources
// become counted resources (see countedMIG).
func NewNode(id placement.NodeID, t *NodeType) placement.Node {
	labels := make(map[string]string, len(t.Labels)+1)
	maps.Copy(labels, t.Labels)
	labels[nodelabel.NodeID] = string(id)
	total := countedMIG(t.Resources)
	node := placement.Node{ID: id, Total: total, Available: total, Labels: labels, Alive: true}
	if len(t.GPUIslands) > 0 {
		node.GPUs = typeGPUs(t.GPUIslands)
	}
	return node
}

func typeGPUs(islands []int) []placement.GPU {
	var gpus []placement.GPU
	for island, size := range islands {
		for range size {
			index := len(gpus)
			gpus = append(gpus, placement.GPU{Index: index, NVLinkIsland: island, Rail: index, Available: resources.AmountScale})
		}
	}
	return gpus
}

// withID is a copy of a hypothetical node's row under another id: the rows the planner
// caches for a type are templates, instantiated once per node it plans. Maps are
// shared except the labels (they carry the id); nothing changes a row's maps in place.
func withID(row placement.Node, id placement.NodeID) placement.Node {
	labels := make(map[string]string, len(row.Labels))
	maps.Copy(labels, row.Labels)
	labels[nodelabel.NodeID] = string(id)
	row.ID = id
	row.Labels = labels
	return row
}

// atTotal is a running node's row as if nothing ran on it: request_resources is sized
// against totals. MIG slot maps are dropped: MIG profiles are counted (countedMIG), from
// the node's totals when the GCS lists them there.
func atTotal(row placement.Node) placement.Node {
	row.Total = countedMIG(row.Total)
	row.Available = row.Total
	row.MIGGPUs = nil
	if len(row.GPUs) > 0 {
		gpus := make([]placement.GPU, len(row.GPUs))
		for i, gpu := range row.GPUs {
			gpu.Available = resources.AmountScale
			gpus[i] = gpu
		}
		row.GPUs = gpus
	}
	row.Draining = false
	row.Alive = true
	return row
}

// nodeKind orders the nodes demand is placed on: existing free capacity first, then
// nodes already launching, then nodes this plan launches.
type nodeKind int

const (
	kindRunning nodeKind = iota
	kindLaunching
	kindPlanned
)

// poolNode is one node demand may be placed on, with what earlier demand of the plan
// left free on it (row.Available).
type poolNode struct {
	// row is the node's placement row; for a planned node added by addPlanned, the
	// template it is built from while unnamed (rowAt builds the row).
	row  placement.Node
	kind nodeKind
	// typ is the node's type name; "" for a node of unknown type.
	typ string
	// free is row.Available over the pool's columns, for the amount checks of open.
	free []resources.Amount
	// closed: nothing the remaining demand asks fits on it any more (an optimisation;
	// placement would reject the node anyway).
	closed bool
	// unnamed: row is still the template of a planned node numbered number of type typ
	// (addPlanned).
	unnamed bool
	number  int
}

// pool is every node demand may be placed on.
type pool struct {
	nodes []poolNode
	index map[placement.NodeID]int
	// pinned are running nodes the plan places demand on: idle scale-down spares them.
	pinned map[placement.NodeID]bool
	// columns number the resource names the pool has seen, for dense amount vectors.
	columns map[string]int
	// running and others are the positions in nodes of the running nodes, in pool
	// order, and of the launching and planned ones, in the order they were added.
	running, others []int
	// classes are the distinct bundles (by amounts) demand has asked open about, each
	// with what it knows of the nodes they do not fit; classByText finds them.
	classes     []*fitClass
	classByText map[string]int
	// holders are, per node, the demand placed on it through update, in placement
	// order: the improvement search attributes the nodes it seeds by them.
	holders map[placement.NodeID][]*demand
	// openRows, openPositions and openHeads are open's buffers.
	openRows      []placement.Node
	openPositions []int
	openHeads     []int
}

func newPool() *pool {
	return &pool{index: make(map[placement.NodeID]int), pinned: make(map[placement.NodeID]bool),
		columns: make(map[string]int), classByText: make(map[string]int), holders: make(map[placement.NodeID][]*demand)}
}

// vector is set over the pool's columns (names it has not seen get one).
func (p *pool) vector(set resources.Set) []resources.Amount {
	return p.vectorInto(nil, set)
}

// vectorInto is vector, reusing out's array when it is long enough. Columns are numbered
// in the order names are first seen (map order): nothing depends on the numbering.
func (p *pool) vectorInto(out []resources.Amount, set resources.Set) []resources.Amount {
	for name := range set {
		if _, ok := p.columns[name]; !ok {
			p.columns[name] = len(p.columns)
		}
	}
	if cap(out) >= len(p.columns) {
		out = out[:len(p.columns)]
		clear(out)
	} else {
		out = make([]resources.Amount, len(p.columns))
	}
	for name, amount := range set {
		out[p.columns[name]] = amount
	}
	return out
}

func (p *pool) add(row placement.Node, kind nodeKind, typ string) {
	p.index[row.ID] = len(p.nodes)
	p.appendNode(row, kind, typ)
}

// addPlanned adds a planned node of type typ numbered number, whose row is template
// under the id plannedID(typ, number). The row is built only when demand may be placed
// on the node (rowAt): two thirds of the benchmark's 47,000 planned nodes never are.
func (p *pool) addPlanned(template placement.Node, typ string, number int) {
	p.appendNode(template, kindPlanned, typ)
	node := &p.nodes[len(p.nodes)-1]
	node.unnamed, node.number = true, number
}

// plannedID names the planned node numbered number of type typ.
func plannedID(typ string, number int) placement.NodeID {
	return placement.NodeID("planned-" + typ + "-" + strconv.Itoa(number))
}

// rowAt is the row of the node at position, built first for a planned node still
// unnamed.
func (p *pool) rowAt(position int) placement.Node {
	node := &p.nodes[position]
	if node.unnamed {
		node.row = withID(node.row, plannedID(node.typ, node.number))
		node.unnamed = false
		p.index[node.row.ID] = position
	}
	return node.row
}

func (p *pool) appendNode(row placement.Node, kind nodeKind, typ string) {
	if kind == kindRunning {
		p.running = append(p.running, len(p.nodes))
	} else {
		p.others = append(p.others, len(p.nodes))
	}
	p.nodes = append(p.nodes, poolNode{row: row, kind: kind, typ: typ, free: p.vector(row.Available), closed: row.Available.IsZero()})
}

// maxOpenNodes bounds how many nodes with room one demand is tried on (a bound on work,
// not a rule): running nodes first, then launching and planned ones, the most recently
// planned first (older planned nodes are the fullest).
const maxOpenNodes = 64

// fitClass is one distinct bundle, by amounts, and the nodes it is known not to fit.
// Free capacity only shrinks during a plan, so a node a bundle does not fit never takes
// it again: open skips such nodes for good, with path-compressed links over the
// running positions (forward) and the other positions (backward), so a demand does
// not rescan the thousands of full nodes a large plan builds.
type fitClass struct {
	// need are the bundle's positive amounts by column.
	need []columnAmount
	// nextRunning[i] is i, or a later index in pool.running at or before the next node
	// the bundle may fit; prevOther[i] the same backward over pool.others (-1: none).
	nextRunning, prevOther []int
}

type columnAmount struct {
	column int
	amount resources.Amount
}

// classesOf returns the fit classes of the demand's distinct bundles.
func (p *pool) classesOf(d *demand) []int {
	if d.classes != nil {
		return d.classes
	}
	for _, bundle := range d.distinct {
		text := bundle.String()
		class, ok := p.classByText[text]
		if !ok {
			class = len(p.classes)
			p.classByText[text] = class
			p.classes = append(p.classes, &fitClass{need: p.amountsOf(bundle)})
		}
		if !slices.Contains(d.classes, class) {
			d.classes = append(d.classes, class)
		}
	}
	return d.classes
}

// fits: the node is open and has the class's amounts free (IsSubsetOf on vectors).
func (p *pool) fits(fc *fitClass, position int) bool {
	node := &p.nodes[position]
	return !node.closed && covers(node.free, fc.need)
}

// nextRunningFit is the first index >= i of pool.running whose node the class fits,
// or len(pool.running).
func (p *pool) nextRunningFit(fc *fitClass, i int) int {
	for len(fc.nextRunning) < len(p.running) {
		fc.nextRunning = append(fc.nextRunning, len(fc.nextRunning))
	}
	for {
		root := i
		for root < len(p.running) && fc.nextRunning[root] != root {
			root = fc.nextRunning[root]
		}
		for i < root { // compress
			i, fc.nextRunning[i] = fc.nextRunning[i], root
		}
		if root == len(p.running) || p.fits(fc, p.running[root]) {
			return root
		}
		fc.nextRunning[root] = root + 1
		i = root + 1
	}
}

// prevOtherFit is the last index <= i of pool.others whose node the class fits, or -1.
func (p *pool) prevOtherFit(fc *fitClass, i int) int {
	for len(fc.prevOther) < len(p.others) {
		fc.prevOther = append(fc.prevOther, len(fc.prevOther))
	}
	for {
		root := i
		for root >= 0 && fc.prevOther[root] != root {
			root = fc.prevOther[root]
		}
		for i > root { // compress
			i, fc.prevOther[i] = fc.prevOther[i], root
		}
		if root < 0 || p.fits(fc, p.others[root]) {
			return root
		}
		fc.prevOther[root] = root - 1
		i = root - 1
	}
}

// open returns the rows of nodes of kind at most maxKind on which at least one of the
// demand's bundles fits by resource amounts, the only nodes placement could use for it;
// at most maxOpenNodes of them: running nodes in pool order, then launching and planned
// ones, newest first. positions are the rows' positions in nodes. Both slices are the
// pool's buffers: valid until the next call.
func (p *pool) open(d *demand, maxKind nodeKind) (rows []placement.Node, positions []int) {
	classes := p.classesOf(d)
	heads := slices.Grow(p.openHeads[:0], len(classes))[:len(classes)]
	rows, positions = p.openRows[:0], p.openPositions[:0]
	defer func() { p.openRows, p.openPositions, p.openHeads = rows, positions, heads }()
	for k, class := range classes {
		heads[k] = p.nextRunningFit(p.classes[class], 0)
	}
	for len(rows) < maxOpenNodes {
		first := len(p.running)
		for _, head := range heads {
			first = min(first, head)
		}
		if first == len(p.running) {
			break
		}
		rows = append(rows, p.rowAt(p.running[first]))
		positions = append(positions, p.running[first])
		for k, class := range classes {
			if heads[k] == first {
				heads[k] = p.nextRunningFit(p.classes[class], first+1)
			}
		}
	}
	if maxKind == kindRunning {
		return rows, positions
	}
	for k, class := range classes {
		heads[k] = p.prevOtherFit(p.classes[class], len(p.others)-1)
	}
	for len(rows) < maxOpenNodes {
		last := -1
		for _, head := range heads {
			last = max(last, head)
		}
		if last < 0 {
			break
		}
		rows = append(rows, p.rowAt(p.others[last]))
		positions = append(positions, p.others[last])
		for k, class := range classes {
			if heads[k] == last {
				heads[k] = p.prevOtherFit(p.classes[class], last-1)
			}
		}
	}
	return rows, positions
}

// freeSum is the free amounts of the nodes at positions, summed over the pool's columns.
func (p *pool) freeSum(positions []int) []resources.Amount {
	sum := make([]resources.Amount, len(p.columns))
	for _, position := range positions {
		for column, amount := range p.nodes[position].free {
			sum[column] += amount
		}
	}
	return sum
}

// amountsOf is set as (column, amount) pairs of its positive amounts, giving new names
// columns.
func (p *pool) amountsOf(set resources.Set) []columnAmount {
	p.vector(set)
	var out []columnAmount
	for _, name := range set.Names() {
		if amount := set[name]; amount > 0 {
			out = append(out, columnAmount{p.columns[name], amount})
		}
	}
	return out
}

// covers: vector has every amount of need (columns past its end count as zero).
func covers(vector []resources.Amount, need []columnAmount) bool {
	for _, n := range need {
		if n.column >= len(vector) || n.amount > vector[n.column] {
			return false
		}
	}
	return true
}

// update copies back the rows of the snapshot's nodes a plan of demand d used, pins the
// running ones and records d among the nodes' holders.
// Each node is read back once, however many bundles the plan put on it.
func (p *pool) update(snapshot *placement.Snapshot, plan placement.Plan, d *demand) {
	var seen map[placement.NodeID]bool // for long plans (a shape's many instances)
	if len(plan.Placements) > 16 {
		seen = make(map[placement.NodeID]bool)
	}
	for i, placed := range plan.Placements {
		position, ok := p.index[placed.NodeID]
		if !ok {
			continue
		}
		if seen != nil {
			if seen[placed.NodeID] {
				continue
			}
			seen[placed.NodeID] = true
		} else if placedBefore(plan.Placements[:i], placed.NodeID) {
			continue
		}
		if holders := p.holders[placed.NodeID]; !slices.Contains(holders, d) {
			p.holders[placed.NodeID] = append(holders, d)
		}
		row, _ := snapshot.Node(placed.NodeID)
		node := &p.nodes[position]
		node.row = row
		node.free = p.vectorInto(node.free, row.Available)
		if node.kind == kindRunning {
			p.pinned[placed.NodeID] = true
		}
		if row.Available.IsZero() {
			node.closed = true
		}
	}
}

// placedBefore: one of the placements is on the node.
func placedBefore(placements []placement.BundlePlacement, id placement.NodeID) bool {
	for i := len(placements) - 1; i >= 0; i-- {
		if placements[i].NodeID == id {
			return true
		}
	}
	return false
}

// sumOf is the demand's bundles summed, as (column, amount) pairs.
func (p *pool) sumOf(d *demand) []columnAmount {
	if d.sum == nil {
		sum := make(resources.Set)
		for _, bundle := range d.request.Bundles {
			for name, amount := range bundle {
				sum[name] += amount
			}
		}
		d.sum = p.amountsOf(sum)
		if d.sum == nil {
			d.sum = []columnAmount{}
		}
	}
	return d.sum
}

// couldHold is a necessary condition, by amounts, for placement to hold the gang on the
// nodes at positions: their free amounts summed cover the bundles', one of them covers
// them all for STRICT_PACK, and there are as many nodes as bundles for STRICT_SPREAD.
// False: placement would refuse, so it need not be asked.
func (p *pool) couldHold(d *demand, positions []int) bool {
	sum := p.sumOf(d)
	switch d.request.Strategy {
	case placement.StrategyStrictSpread:
		if len(positions) < len(d.request.Bundles) {
			return false
		}
	case placement.StrategyStrictPack:
		for _, position := range positions {
			if covers(p.nodes[position].free, sum) {
				return true
			}
		}
		return false
	}
	return covers(p.freeSum(positions), sum)
}

// holdingPrefix is how many of the nodes at positions, from the first, it takes for
// couldHold to pass on them: the fewest leading rows placement could place the gang
// on. len(positions) when only all of them could.
func (p *pool) holdingPrefix(d *demand, positions []int) int {
	sum := p.sumOf(d)
	free := make([]resources.Amount, len(p.columns))
	for n, position := range positions {
		node := &p.nodes[position]
		if d.request.Strategy == placement.StrategyStrictPack {
			if covers(node.free, sum) {
				return n + 1
			}
			continue
		}
		for column, amount := range node.free {
			free[column] += amount
		}
		if covers(free, sum) && (d.request.Strategy != placement.StrategyStrictSpread || n+1 >= len(d.request.Bundles)) {
			return n + 1
		}
	}
	return len(positions)
}
