package autoscaler

import (
	"maps"

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
	row  placement.Node
	kind nodeKind
	// typ is the node's type name; "" for a node of unknown type.
	typ string
	// closed: nothing the remaining demand asks fits on it any more (an optimisation;
	// placement would reject the node anyway).
	closed bool
}

// pool is every node demand may be placed on.
type pool struct {
	nodes []poolNode
	index map[placement.NodeID]int
	// pinned are running nodes the plan places demand on: idle scale-down spares them.
	pinned map[placement.NodeID]bool
}

func newPool() *pool {
	return &pool{index: make(map[placement.NodeID]int), pinned: make(map[placement.NodeID]bool)}
}

func (p *pool) add(row placement.Node, kind nodeKind, typ string) {
	p.index[row.ID] = len(p.nodes)
	p.nodes = append(p.nodes, poolNode{row: row, kind: kind, typ: typ, closed: row.Available.IsZero()})
}

// maxOpenNodes bounds how many nodes with room one demand is tried on (a bound on work,
// not a rule): running nodes first, then launching and planned ones, the most recently
// planned first (older planned nodes are the fullest).
const maxOpenNodes = 64

// open returns the rows of nodes of kind at most maxKind on which at least one of the
// demand's bundles fits by resource amounts, the only nodes placement could use for it;
// at most maxOpenNodes of them.
func (p *pool) open(d *demand, maxKind nodeKind) []placement.Node {
	var rows []placement.Node
	consider := func(node *poolNode) bool {
		if node.closed {
			return true
		}
		for _, bundle := range d.distinct {
			if bundle.IsSubsetOf(node.row.Available) {
				rows = append(rows, node.row)
				break
			}
		}
		return len(rows) < maxOpenNodes
	}
	for i := range p.nodes {
		if node := &p.nodes[i]; node.kind == kindRunning && !consider(node) {
			return rows
		}
	}
	if maxKind == kindRunning {
		return rows
	}
	for i := len(p.nodes) - 1; i >= 0; i-- {
		node := &p.nodes[i]
		if node.kind == kindRunning || node.kind > maxKind {
			continue
		}
		if !consider(node) {
			return rows
		}
	}
	return rows
}

// update copies back the rows of the snapshot's nodes a plan used, and pins the running
// ones.
func (p *pool) update(snapshot *placement.Snapshot, plan placement.Plan) {
	for _, placed := range plan.Placements {
		position, ok := p.index[placed.NodeID]
		if !ok {
			continue
		}
		row, _ := snapshot.Node(placed.NodeID)
		p.nodes[position].row = row
		if p.nodes[position].kind == kindRunning {
			p.pinned[placed.NodeID] = true
		}
		if row.Available.IsZero() {
			p.nodes[position].closed = true
		}
	}
}
