package placement

import (
	"math"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// The fragmentation scoring stage. With Request.Workload set, every candidate a
// strategy ranks also gets the growth of the node's expected fragmentation
// (NodeFragmentation, fragmentation.go) if the group's bundles went there: what the
// node's fragmentation would be after, minus what it is. Lower is better: FGD's rule
// ("Beware of Fragmentation", Weng et al., USENIX ATC 2023), which leaves the fewest
// free GPUs that the workload's tasks could not use.
//
// Where it sits in the ranking key (scoring.go):
//   - groups that ask for GPU topology (STRICT_PACK kept in one NVLink island; SPREAD
//     and STRICT_SPREAD with whole GPUs on rails) keep the strategy's preferences
//     first (the island, the scalable units, the rails): the fragmentation growth comes
//     after them, before best fit;
//   - other groups (PACK, and groups on clusters without GPU topology) rank by it
//     first, then by the strategy's preferences, then best fit.
//
// It runs in both attempts, the one that places the group (the nodes' free resources
// now) and the one that tells Infeasible from NotNow (every node idle), so that a group
// is NotNow exactly when it would be placed on the idle cluster. PACK's fill of a group
// over several nodes (fillNodes) does not use it.

// Key slots of the stage (scoring.go): fragmentationFirst before the strategy's
// preferences, fragmentationAfter between them and best fit.
const (
	fragmentationFirst = 0
	fragmentationAfter = preferenceSlots - 1
)

// fragmentationScratch is what the stage reuses between candidates of one decision.
type fragmentationScratch struct {
	node    FragmentationNode
	after   []resources.Amount
	islands []int32
	picked  []int
	// before caches, per node the group has not touched, its fragmentation now, for the
	// view it was measured in (a SPREAD group measures every node once per bundle).
	before     []float64
	beforeView []viewKind
	// The shapes' selectors, each distinct one evaluated once per node and decision
	// (labels do not change within one): shapeSelector maps a shape to its distinct
	// selector (nil until measure first runs), selectors lists them, and selects holds,
	// per node and distinct selector (node*len(selectors)+i), whether it matches
	// (selectorMatches, selectorMisses, or 0: not asked yet).
	shapeSelector []int
	selectors     []nodelabel.Selector
	selects       []int8
}

const (
	selectorMatches int8 = 1
	selectorMisses  int8 = 2
)

// measure is NodeFragmentation of scratch.node, which is node, with the selectors'
// answers cached for the decision.
func (d *decision) measure(node int) float64 {
	scratch := &d.fragmentation
	if scratch.shapeSelector == nil {
		d.compileShapeSelectors()
	}
	return nodeFragmentation(&scratch.node, d.request.Workload, nil, func(shape int) bool {
		id := scratch.shapeSelector[shape]
		at := node*len(scratch.selectors) + id
		if scratch.selects[at] == 0 {
			scratch.selects[at] = selectorMisses
			if scratch.selectors[id].Matches(d.snapshot.nodes[node].labels) {
				scratch.selects[at] = selectorMatches
			}
		}
		return scratch.selects[at] == selectorMatches
	})
}

// compileShapeSelectors fills the scratch's distinct shape selectors.
func (d *decision) compileShapeSelectors() {
	scratch := &d.fragmentation
	shapes := d.request.Workload.Shapes
	scratch.shapeSelector = make([]int, len(shapes))
	ids := make(map[string]int)
	for i := range shapes {
		if len(shapes[i].Selector) == 0 {
			continue
		}
		key := shapes[i].Selector.String()
		id, ok := ids[key]
		if !ok {
			id = len(scratch.selectors)
			ids[key] = id
			scratch.selectors = append(scratch.selectors, shapes[i].Selector)
		}
		scratch.shapeSelector[i] = id
	}
	scratch.selects = make([]int8, len(d.snapshot.nodes)*len(scratch.selectors))
}

// asksForTopology reports whether the group's GPU topology preferences rank before
// its fragmentation.
func (d *decision) asksForTopology() bool {
	switch {
	case !d.snapshot.hasTopology():
		return false
	case d.strategy == StrategyStrictPack:
		return d.islandMode
	case d.strategy == StrategySpread || d.strategy == StrategyStrictSpread:
		return d.groupWholeGPUs > 0 && d.request.Topology != TopologyNode
	default:
		return false
	}
}

// setFragmentation fills the stage's slot of key with the growth of node's expected
// fragmentation if bundles (positions in d.bundles; nil: every bundle) went there, with
// whole GPUs confined to island when it is >= 0. It does nothing without a workload.
//
// bar is the key the candidate must beat to be kept (nil: none yet). A candidate whose
// key before the stage's slot is already worse than bar's loses whatever its growth,
// so the growth is not computed (the slot is left 0): the choice is the same, and most
// candidates of a group that asks for topology lose on its preferences.
func (d *decision) setFragmentation(key, bar []float64, a *attempt, node int, island int32, bundles []int) {
	if d.request.Workload == nil || len(d.request.Workload.Shapes) == 0 {
		return
	}
	slot := fragmentationFirst
	if d.asksForTopology() {
		slot = fragmentationAfter
	}
	if bar != nil && keyLess(bar[:slot], key[:slot]) {
		return
	}
	key[slot] = math.Round(d.fragmentationGrowth(a, node, island, bundles) / fragmentationResolution)
}

// fragmentationResolution is the growth, in GPUs, within which two candidates count as
// equally fragmenting (the key holds the growth in these units, rounded). FGD's
// integer scores round alike (one point is about 0.04 GPU near no growth). 0.2 GPU is
// what the Alibaba trace replay measured best over its default and gpuspec33 lists
// together, of 0.05, 0.1, 0.2 and 0.5 GPU (seed 42); without
// rounding, differences of a hundredth of a GPU (a little CPU taken) would decide
// between nodes the workload sees as equal, and spread tasks over idle nodes.
const fragmentationResolution = 0.2

// fragmentationReplacesBestFit reports whether the stage ranks the group's candidates
// instead of best fit (the island best fit among the strategy's preferences, and the
// resource best fit): for groups that do not ask for GPU topology, with a workload. Best fit is a stand-in for what the stage
// measures; after the stage it only scatters ties, which go instead to the lower node
// id, a fixed order that fills nodes early in it and leaves those late in it idle for
// large tasks. On the Alibaba trace (tracereplay, gpuspec33, seed 42) best fit after
// the stage left about 13 % of the GPUs unallocated, the lower id about 8 %.
func (d *decision) fragmentationReplacesBestFit() bool {
	return d.request.Workload != nil && len(d.request.Workload.Shapes) > 0 && !d.asksForTopology()
}

// islandBestFit is the island best-fit preference (the island's free GPUs left after
// the group), or 0 when the fragmentation stage replaces best fit.
func (d *decision) islandBestFit(left int) float64 {
	if d.fragmentationReplacesBestFit() {
		return 0
	}
	return float64(left)
}

// fragmentationGrowth is NodeFragmentation after the bundles minus before.
func (d *decision) fragmentationGrowth(a *attempt, node int, island int32, bundles []int) float64 {
	scratch := &d.fragmentation
	gpus, _ := d.snapshot.nodeGPUs(node)
	if cap(scratch.after) < len(gpus) {
		scratch.after = make([]resources.Amount, len(gpus))
		scratch.islands = make([]int32, len(gpus))
	}
	n := &scratch.node
	n.GPUFree = a.loadGPUs(node, d.gpuScratch)
	n.GPUIslands = scratch.islands[:len(gpus)]
	for g := range gpus {
		n.GPUIslands[g] = gpus[g].island
	}
	n.Labels = d.snapshot.nodes[node].labels
	n.FreeCPU, n.FreeMemory = d.freeOf(a, node, "CPU"), d.freeOf(a, node, "memory")
	before := d.fragmentationNow(a, node)

	after := scratch.after[:len(gpus)]
	copy(after, n.GPUFree)
	pref := gpuPreference{island: island}
	cpu, memory := d.resourceIndex("CPU"), d.resourceIndex("memory")
	take := func(position int) {
		bundle := &d.bundles[position]
		if bundle.gpu.any() && len(gpus) > 0 {
			scratch.picked, _ = d.picker.pick(node, after, bundle.gpu, &pref, scratch.picked[:0])
		}
		if cpu >= 0 {
			n.FreeCPU -= bundle.amounts[cpu]
		}
		if memory >= 0 {
			n.FreeMemory -= bundle.amounts[memory]
		}
	}
	if bundles == nil {
		for position := range d.bundles {
			take(position)
		}
	} else {
		for _, position := range bundles {
			take(position)
		}
	}
	n.GPUFree = after
	return d.measure(node) - before
}

// fragmentationNow is the fragmentation of scratch.node (node as the attempt sees it),
// cached for nodes without the group's bundles.
func (d *decision) fragmentationNow(a *attempt, node int) float64 {
	scratch := &d.fragmentation
	if a.groupNode(node) != nil {
		return d.measure(node)
	}
	if scratch.before == nil {
		scratch.before = make([]float64, len(d.snapshot.nodes))
		scratch.beforeView = make([]viewKind, len(d.snapshot.nodes))
	}
	if scratch.beforeView[node] != a.view {
		scratch.before[node] = d.measure(node)
		scratch.beforeView[node] = a.view
	}
	return scratch.before[node]
}

// freeOf is what node has left of the named resource for the group in the attempt.
func (d *decision) freeOf(a *attempt, node int, name string) resources.Amount {
	column, ok := d.snapshot.columnByName[name]
	if !ok {
		return 0
	}
	free := a.base[node*a.stride+column]
	if r := d.resourceIndex(name); r >= 0 {
		if held := a.groupNode(node); held != nil {
			free -= held.taken[r]
		}
	}
	return max(free, 0)
}
