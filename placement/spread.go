package placement

import (
	"math/bits"
	"sort"

	"github.com/raygo-dev/raygo/internal/resources"
)

// SPREAD and STRICT_SPREAD on the fabric. Distinct nodes come first (Ray's meaning);
// among the ways to get them:
//
//  1. the fewest scalable units (nodelabel.ScalableUnit): before placing, count per unit the
//     unused eligible nodes that could take the group's first (largest) bundle, and
//     choose units until they cover every bundle: the units already holding the
//     group's placed bundles, then the largest units while more than one is needed,
//     and last, of the units that cover the rest, the one where the group would break
//     the fewest wholly free NVLink islands, then by where partly used GPU nodes
//     gather (below), then the smallest (best fit, so large free units stay whole).
//     Nodes in chosen units rank first. Traffic inside a unit stays under its leaf
//     switches; between units it crosses the spine.
//     Partly used GPU nodes gather in one unit: the unit with the most of them (ties
//     to the first) is where a group of bundles smaller than an island goes, and
//     where a group of whole-island bundles does not, among units equal on the
//     islands broken. A large group of one-GPU bundles can stay on one rail in one
//     unit without breaking whole nodes only where many partly used nodes are; sent
//     where they gather, it also fills the nodes the last such group broke, and
//     whole-node groups keep to the units where whole nodes are.
//  2. rail alignment: for each run of identical GPU bundles, the target rails are the
//     rails with the most free GPUs on the candidate nodes (unused, eligible, in the
//     chosen units) where the bundle would not break into a wholly free NVLink island
//     (islandTaken below the island's size, or a partly used GPU for a fraction), then
//     on all candidate nodes, most first. The k-th bundle of the group on a node
//     (round k, k = 0 for distinct nodes) targets the k-th slice of them, one rail per
//     whole GPU (one for a fraction), so every node of a round uses the same rails and
//     a ring all-reduce across nodes stays on one rail; bundles sharing a node get
//     distinct rails. Nodes where the round's rails are free, and where a multi-GPU
//     bundle fits inside one NVLink island, rank before those where not.
//  3. fragmentation: the node whose island the bundle's GPUs come from has the fewest
//     free GPUs (island-level best fit), so the largest free islands stay whole for
//     STRICT_PACK groups: a DP bundle of one GPU fills a half-used NVLink pair before a
//     half-used 8-GPU island, and that before a whole one. Counting the rails on nodes
//     that keep whole islands whole first (2) is what lets 2 and 3 hold together.
//  4. best fit, as everywhere.
//
// All are preferences: a node outside the chosen units or off the target rails is
// still used when the preferred ones are full. Without the label every node is in the
// one unit ""; without rails (or GPUs listed) there are no target rails: the strategies
// then behave as before topology. A group with Request.Topology "node" has neither
// chosen units nor target rails, and its fragmentation ranks before its preferences
// (asksForTopology).

// spreadChoices are the scalable units and target rails chosen for one attempt.
type spreadChoices struct {
	// preferredUnit marks the chosen units, indexed like Snapshot.scalableUnits; nil
	// when there is nothing to choose.
	preferredUnit []bool
	// rails are the target rails of each run, most preferred first; computed when the
	// run is first placed (railsKnown).
	rails      [][]int32
	railsKnown []bool
}

// spreadChoicesOf returns the attempt's choices, made on first use (when no bundle of
// the attempt is placed yet, as placeSpread starts): the scalable units, and in the same
// pass over the nodes the target rails of the first run.
func (d *decision) spreadChoicesOf(a *attempt) *spreadChoices {
	if a.spread != nil {
		return a.spread
	}
	choices := &spreadChoices{rails: make([][]int32, len(d.bundleRuns)), railsKnown: make([]bool, len(d.bundleRuns))}
	a.spread = choices
	if len(d.bundles) == 0 || d.request.Topology == TopologyNode {
		return choices
	}
	first := &d.bundles[0]
	units := len(d.snapshot.scalableUnits)
	chooseUnits := units >= 2
	countRails := len(d.snapshot.rails) > 0 && first.gpu.any()
	if !chooseUnits && !countRails {
		return choices
	}
	railCount := len(d.snapshot.rails)
	// Per unit: the candidate nodes, those the first bundle would not break into a
	// wholly free island, and the partly used GPU nodes.
	capacity, intact, holdsGroup := make([]int, units), make([]int, units), make([]bool, units)
	partlyUsed := make([]int, units)
	// smallBundle: the first bundle takes less than some node's largest island.
	smallBundle := false
	// Free GPUs per unit and rail, unit-major: on nodes the bundle would not break into
	// a whole island (intact), and on all candidate nodes.
	var intactRails, unitRails []int
	if countRails {
		intactRails, unitRails = make([]int, units*railCount), make([]int, units*railCount)
	}
	row := make([]resources.Amount, len(d.resources))
	for node := range d.snapshot.nodes {
		record := &d.snapshot.nodes[node]
		unit := record.scalableUnit
		holdsGroup[unit] = holdsGroup[unit] || d.holdsPlaced[node]
		if record.gpuCount > 0 {
			if free := bits.OnesCount64(a.wholeFree(node)); free > 0 && free < record.gpuCount {
				partlyUsed[unit]++
			}
			smallBundle = smallBundle || first.gpu.whole < record.largestIsland
		}
		if !d.eligible[node] || a.bundlesOn(node) > 0 || !d.passesSelector(first.selector, node) {
			continue
		}
		gpusFit, breaks := true, false
		if record.gpuCount > 0 && first.gpu.any() {
			var counts, intactCounts []int
			if countRails {
				counts = unitRails[int(unit)*railCount : (int(unit)+1)*railCount]
				intactCounts = intactRails[int(unit)*railCount : (int(unit)+1)*railCount]
			}
			gpusFit, breaks = d.surveyForSpread(a, node, first.gpu, counts, intactCounts)
		}
		if !chooseUnits {
			continue
		}
		if a.load(node, row); fits(row, first.amounts, first.nonzero) && gpusFit {
			capacity[unit]++
			if !breaks {
				intact[unit]++
			}
		}
	}
	if chooseUnits {
		choices.preferredUnit = chooseScalableUnits(capacity, intact, holdsGroup, len(d.bundles), unitAffinity(partlyUsed, smallBundle))
	}
	if countRails {
		intactPerRail, allPerRail := make([]int, railCount), make([]int, railCount)
		for unit := range units {
			if choices.preferredUnit == nil || choices.preferredUnit[unit] {
				for rail := range railCount {
					intactPerRail[rail] += intactRails[unit*railCount+rail]
					allPerRail[rail] += unitRails[unit*railCount+rail]
				}
			}
		}
		choices.rails[first.run], choices.railsKnown[first.run] = d.railsByCount(intactPerRail, allPerRail), true
	}
	return choices
}

// unitAffinity ranks the units for a group (lower first): with partlyUsed, the partly
// used GPU nodes per unit, a group of bundles smaller than an island (small) ranks the
// unit with the most (ties to the first) first, any other group ranks it last; nil when
// no unit has any.
func unitAffinity(partlyUsed []int, small bool) []int {
	gather := -1
	for unit, count := range partlyUsed {
		if count > 0 && (gather < 0 || count > partlyUsed[gather]) {
			gather = unit
		}
	}
	if gather < 0 {
		return nil
	}
	rank := make([]int, len(partlyUsed))
	for unit := range rank {
		if (unit == gather) != small {
			rank[unit] = 1
		}
	}
	return rank
}

// chooseScalableUnits picks the units for a group of need bundles, given how many
// candidate nodes each unit has (capacity) and how many of them the group would not
// break into a whole island (intact): the units holding the group, then the largest
// while more than one is needed, last, of the units that cover the rest, the one that
// breaks the fewest whole islands (remainder - intact), then the lowest affinity rank
// (unitAffinity; nil: all equal), then the smallest.
func chooseScalableUnits(capacity, intact []int, holdsGroup []bool, need int, affinity []int) []bool {
	preferred := make([]bool, len(capacity))
	covered := 0
	for unit, holds := range holdsGroup {
		if holds {
			preferred[unit] = true
			covered += capacity[unit]
		}
	}
	for covered < need {
		remainder := need - covered
		breaks := func(unit int) int { return max(remainder-intact[unit], 0) }
		bestFit, largest := -1, -1
		for unit := range capacity {
			if preferred[unit] || capacity[unit] == 0 {
				continue
			}
			if capacity[unit] >= remainder && (bestFit < 0 || betterUnit(unit, bestFit, breaks, affinity, capacity)) {
				bestFit = unit
			}
			if largest < 0 || capacity[unit] > capacity[largest] || capacity[unit] == capacity[largest] && intact[unit] > intact[largest] {
				largest = unit
			}
		}
		if bestFit < 0 {
			bestFit = largest
		}
		if bestFit < 0 {
			break
		}
		preferred[bestFit] = true
		covered += capacity[bestFit]
	}
	return preferred
}

// betterUnit reports whether unit covers the rest of a group better than other: fewer
// whole islands broken, then a lower affinity rank, then the smaller capacity.
func betterUnit(unit, other int, breaks func(int) int, affinity, capacity []int) bool {
	if breaks(unit) != breaks(other) {
		return breaks(unit) < breaks(other)
	}
	if affinity != nil && affinity[unit] != affinity[other] {
		return affinity[unit] < affinity[other]
	}
	return capacity[unit] < capacity[other]
}

// surveyForSpread reports whether node's GPUs can take request and whether it would
// break into a wholly free island, and adds node's free GPUs per rail slot to counts,
// and to intact when it would not break an island (counts nil: no counting).
func (d *decision) surveyForSpread(a *attempt, node int, request gpuRequest, counts, intact []int) (fits, breaks bool) {
	gpus, _ := d.snapshot.nodeGPUs(node)
	if request.whole > 0 {
		wholeFree := a.wholeFree(node)
		fits = bits.OnesCount64(wholeFree&d.snapshot.islandMask(node, a.wholeIsland)) >= request.whole
		breaks = d.snapshot.breaksIslandMask(node, wholeFree, request.whole)
		if counts != nil {
			countFreeRailsMask(gpus, wholeFree, counts)
			if !breaks {
				countFreeRailsMask(gpus, wholeFree, intact)
			}
		}
		return fits, breaks
	}
	free := a.loadGPUs(node, d.gpuScratch)
	fits, breaks = gpusFitIn(gpus, free, request, a.wholeIsland), d.breaksIsland(node, free, request)
	if counts != nil {
		countFreeRails(gpus, free, request.share(), counts)
		if !breaks {
			countFreeRails(gpus, free, request.share(), intact)
		}
	}
	return fits, breaks
}

// countFreeRails adds to counts, per rail slot, the GPUs with at least need free.
func countFreeRails(gpus []snapshotGPU, free []resources.Amount, need resources.Amount, counts []int) {
	for g, gpu := range gpus {
		if gpu.railSlot >= 0 && free[g] >= need {
			counts[gpu.railSlot]++
		}
	}
}

// railsByCount orders the rails free somewhere (all > 0, per rail slot) by intact
// count, then all count, most first, ties to the lower rail.
func (d *decision) railsByCount(intact, all []int) []int32 {
	var slots []int
	for slot, count := range all {
		if count > 0 {
			slots = append(slots, slot)
		}
	}
	sort.SliceStable(slots, func(i, j int) bool {
		a, b := slots[i], slots[j]
		if intact[a] != intact[b] {
			return intact[a] > intact[b]
		}
		return all[a] > all[b]
	})
	rails := make([]int32, len(slots))
	for i, slot := range slots {
		rails[i] = d.snapshot.rails[slot]
	}
	return rails
}

// unitRank is a key entry: 0 for a node in a chosen scalable unit (or with nothing to
// choose), 1 otherwise.
func (d *decision) unitRank(a *attempt, node int) float64 {
	preferred := d.spreadChoicesOf(a).preferredUnit
	if preferred == nil {
		return 0
	}
	return boolKey(!preferred[d.snapshot.nodes[node].scalableUnit])
}

// roundRails returns the target rails of bundle's round on a node that holds round of
// the group's bundles already, or nil (no rails known, no GPUs asked, or more rounds
// than rails).
func (d *decision) roundRails(a *attempt, bundle *bundleDemand, round int) []int32 {
	if len(d.snapshot.rails) == 0 || !bundle.gpu.any() || d.request.Topology == TopologyNode {
		return nil
	}
	choices := d.spreadChoicesOf(a)
	if !choices.railsKnown[bundle.run] {
		choices.rails[bundle.run] = d.targetRails(a, bundle)
		choices.railsKnown[bundle.run] = true
	}
	rails := choices.rails[bundle.run]
	width := max(bundle.gpu.whole, 1)
	if (round+1)*width > len(rails) {
		return nil
	}
	return rails[round*width : (round+1)*width]
}

// targetRails orders the rails by how many candidate nodes (unused, eligible, matching
// the bundle's selector, in the chosen units) have a GPU on them free for bundle,
// counting first the nodes the bundle would not break into a whole island; rails free
// nowhere are left out.
func (d *decision) targetRails(a *attempt, bundle *bundleDemand) []int32 {
	intact, all := make([]int, len(d.snapshot.rails)), make([]int, len(d.snapshot.rails))
	preferred := d.spreadChoicesOf(a).preferredUnit
	for node := range d.snapshot.nodes {
		record := &d.snapshot.nodes[node]
		if record.gpuCount == 0 || !d.eligible[node] || a.bundlesOn(node) > 0 || !d.passesSelector(bundle.selector, node) ||
			preferred != nil && !preferred[record.scalableUnit] {
			continue
		}
		d.surveyForSpread(a, node, bundle.gpu, all, intact)
	}
	return d.railsByCount(intact, all)
}

// spreadFit is stage 5 for SPREAD with its preferences, for one bundle on one node.
type spreadFit struct {
	ok bool // the node's GPUs can take the bundle
	// missed counts what the placement would miss: the round's target rails (1), and
	// for a multi-GPU bundle, one NVLink island holding all its GPUs (1). A node that
	// does not list its GPUs misses the rails when there are any.
	missed float64
	// islandTaken: the free GPUs of the island the bundle's GPUs would come from.
	islandTaken int
	// migRank: what the bundle's MIG profile costs the node (migRank*), 0 without one.
	// Ranked with islandTaken: a bundle rarely asks for both.
	migRank int
}

// spreadGPUs is stage 5 for SPREAD: whether node's GPUs can take bundle, and how well.
func (d *decision) spreadGPUs(a *attempt, node int, bundle *bundleDemand) spreadFit {
	migFit, migRank := d.migFitsBundle(a, node, bundle)
	if !migFit {
		return spreadFit{}
	}
	if !bundle.gpu.any() {
		return spreadFit{ok: true, migRank: migRank}
	}
	rails := d.roundRails(a, bundle, a.bundlesOn(node))
	if d.snapshot.nodes[node].gpuCount == 0 {
		return spreadFit{ok: true, missed: boolKey(rails != nil)}
	}
	gpus, _ := d.snapshot.nodeGPUs(node)
	if whole := bundle.gpu.whole; whole > 0 {
		wholeFree := a.wholeFree(node)
		if bits.OnesCount64(wholeFree&d.snapshot.islandMask(node, a.wholeIsland)) < whole {
			return spreadFit{}
		}
		fit := spreadFit{ok: true, islandTaken: d.snapshot.islandTakenMask(node, wholeFree, whole)}
		if rails != nil && !railsFreeMask(gpus, wholeFree, rails) {
			fit.missed++
		}
		if whole > 1 && d.snapshot.largestFreeIslandMask(node, wholeFree) < whole {
			fit.missed++
		}
		return fit
	}
	free := a.loadGPUs(node, d.gpuScratch)
	if !gpusFitIn(gpus, free, bundle.gpu, a.wholeIsland) {
		return spreadFit{}
	}
	fit := spreadFit{ok: true, islandTaken: d.picker.islandTaken(node, free, bundle.gpu)}
	if rails != nil && !railsFree(gpus, free, rails, bundle.gpu) {
		fit.missed++
	}
	return fit
}

// breaksIsland reports whether request would take GPUs from one of node's islands that
// is wholly free and larger than it.
func (d *decision) breaksIsland(node int, free []resources.Amount, request gpuRequest) bool {
	taken := d.picker.islandTaken(node, free, request)
	if taken == 0 {
		return false
	}
	for i, islandFree := range d.picker.islandFree {
		if islandFree == taken && d.picker.islandSize[i] == islandFree && islandFree > max(request.whole, 1) {
			return true
		}
	}
	return false
}
