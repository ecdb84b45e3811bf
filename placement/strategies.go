package placement

import (
	"fmt"
	"math/bits"

	"github.com/raygo-dev/raygo/internal/resources"
)

// The strategies, with the semantics of Ray's bundle_scheduling_policy.cc: PACK and
// SPREAD are best effort, STRICT_PACK needs one node holding the sum, STRICT_SPREAD
// needs as many eligible nodes as bundles and never reuses one. Each places
// decision.bundles in order (GPU-heavy first) into an attempt and returns nil, or the
// failure that stopped it; the attempt is left as it was at the failure so the reasons
// can be read from it.
//
// GPU topology changes them where nodes list their GPUs: STRICT_PACK with whole GPUs
// needs one NVLink island instead of one node and PACK tries one island first
// (islands.go); SPREAD and STRICT_SPREAD choose the fewest scalable units and align
// rails (spread.go); every strategy checks that a node's GPUs, not only its GPU count,
// can take a bundle, and assign picks the GPUs (gpus.go).

// failure is where an attempt stopped.
type failure struct {
	attempt *attempt
	subject failureSubject
	// position is the bundle (in decision.bundles) no node could take, for failedBundle.
	position int
	// eligibleNodes is how many distinct nodes STRICT_SPREAD could use, for
	// failedTooFewNodes.
	eligibleNodes int
	// largestIsland is the most GPUs free in one island, and largestIslandNodes the
	// nodes of the islands that have it, for failedIsland.
	largestIsland      int
	largestIslandNodes []int
}

type failureSubject int

const (
	failedBundle      failureSubject = iota + 1 // one bundle fits no node
	failedGroupSum                              // STRICT_PACK: the sum fits no node (or island)
	failedTooFewNodes                           // STRICT_SPREAD: fewer eligible nodes than bundles
	failedIsland                                // STRICT_PACK: no NVLink island has the whole GPUs
)

func (d *decision) place(a *attempt) *failure {
	switch d.strategy {
	case StrategyStrictPack:
		return d.placeStrictPack(a)
	case StrategyStrictSpread:
		return d.placeSpread(a, true)
	case StrategySpread:
		return d.placeSpread(a, false)
	default:
		return d.placePack(a)
	}
}

// placeStrictPack puts every bundle on the best-fitting node that holds their sum (when
// rescheduling, only the node holding the group's other bundles passes stage 2); in
// islands mode, inside the best-fitting NVLink island instead (islands.go).
func (d *decision) placeStrictPack(a *attempt) *failure {
	if d.islandMode {
		choice, ok := d.bestIsland(a)
		if !ok {
			return d.islandFailure(a)
		}
		d.applyIsland(a, choice)
		return nil
	}
	node := d.bestNodeForGroupSum(a, false)
	if node < 0 && len(d.bundles) == 1 {
		return &failure{attempt: a, subject: failedBundle, position: 0}
	}
	if node < 0 {
		return &failure{attempt: a, subject: failedGroupSum}
	}
	for position := range d.bundles {
		d.assign(a, position, node)
	}
	return nil
}

// placePack puts the group on as few nodes as it can, best effort. In islands mode, a
// new group first goes inside one NVLink island if one can hold it (fewest islands
// before fewest nodes). Then the whole group on one node (preferring a node that
// already holds the group's bundles, then the fewest islands, then best fit); if no
// node can hold it all, fillNodes.
func (d *decision) placePack(a *attempt) *failure {
	if d.islandMode && len(d.request.PlacedBundles) == 0 {
		if choice, ok := d.bestIsland(a); ok {
			d.applyIsland(a, choice)
			return nil
		}
	}
	if node := d.bestNodeForGroupSum(a, true); node >= 0 {
		for position := range d.bundles {
			d.assign(a, position, node)
		}
		return nil
	}
	if position := d.bundleFittingNoNode(a); position >= 0 {
		return &failure{attempt: a, subject: failedBundle, position: position}
	}
	return d.fillNodes(a, nil)
}

// fillNodes places the bundles by filling nodes one at a time (candidates only, or
// every node when nil), each round taking the node that takes the most of the remaining
// bundles (tried in placement order), then the one needing the fewest NVLink islands
// for them, ties to best fit. Ray's PACK fills, round by round, the best node for the
// largest remaining bundle; choosing the node by how much it takes spans fewer nodes
// and keeps the best-fit scorer from steering a big group onto a nearly full node. It
// fails only when some remaining bundle fits no candidate at all.
func (d *decision) fillNodes(a *attempt, candidates []int) *failure {
	placedOfRun := make([]int, len(d.bundleRuns))
	take := make([]int, len(d.bundleRuns))
	freeAfter := make([]resources.Amount, len(d.resources))
	// A filled node takes no more: the fill tried every remaining bundle on it.
	filled := make([]bool, len(d.snapshot.nodes))
	rank := d.newRanking()
	for remaining := len(d.bundles); remaining > 0; {
		rank.reset()
		if candidates == nil {
			candidates = d.everyNode()
		}
		for _, node := range candidates {
			if filled[node] || !d.eligible[node] {
				continue
			}
			count := d.simulateFill(a, node, placedOfRun, freeAfter, nil)
			if count == 0 {
				continue
			}
			rank.setPreferences(boolKey(!d.holdsPlaced[node]), -float64(count), float64(d.fillIslands))
			d.setBestFit(rank, node, freeAfter)
			rank.offer(node)
		}
		if rank.best < 0 {
			return &failure{attempt: a, subject: failedBundle, position: d.firstWaiting(placedOfRun)}
		}
		d.simulateFill(a, rank.best, placedOfRun, freeAfter, take)
		for g, count := range take {
			for ; count > 0; count-- {
				d.assign(a, d.bundleRuns[g].positions[placedOfRun[g]], rank.best)
				placedOfRun[g]++
				remaining--
			}
		}
		filled[rank.best] = true
	}
	return nil
}

// simulateFill counts how many waiting bundles node would take, trying them in
// placement order (a run of identical bundles at once), and leaves what the node would
// have free in freeAfter and in d.fillIslands how many NVLink islands their whole GPUs
// need at least. With take non-nil it records how many of each run it takes.
func (d *decision) simulateFill(a *attempt, node int, placedOfRun []int, freeAfter []resources.Amount, take []int) int {
	a.load(node, freeAfter)
	gpus, _ := d.snapshot.nodeGPUs(node)
	// The node's GPUs, loaded when a bundle with GPUs fits its resources: as a mask of
	// the wholly free ones that whole GPUs may use when the group has no fractions,
	// else as free shares.
	var gpuFree []resources.Amount
	var wholeFree uint64
	// The node's MIG slot maps, with the steps of the bundles counted so far.
	var migTrial []MIGGPU
	migLoaded := false
	gpusLoaded := false
	wholeGPUs := 0
	taken := 0
	for g, run := range d.bundleRuns {
		if take != nil {
			take[g] = 0
		}
		waiting := len(run.positions) - placedOfRun[g]
		bundle := &d.bundles[run.positions[0]]
		if waiting == 0 || !d.passesSelector(bundle.selector, node) {
			continue
		}
		count := waiting
		for _, r := range bundle.nonzero {
			count = min(count, int(freeAfter[r]/bundle.amounts[r]))
		}
		if count > 0 && bundle.mig != "" {
			if !migLoaded {
				migTrial, migLoaded = a.migGPUs(node), true
			}
			// Before the GPUs: a bundle asking for both a MIG profile and GPUs is
			// counted conservatively (its MIG steps stay taken if its GPUs fall short).
			count = migTakes(&migTrial, bundle.mig, count)
		}
		if count > 0 && len(gpus) > 0 && bundle.gpu.any() {
			if !gpusLoaded {
				gpusLoaded = true
				wholeFree = a.wholeFree(node) & d.snapshot.islandMask(node, a.wholeIsland)
				d.islandCounts = d.islandCounts[:0]
				for _, islandMask := range d.snapshot.nodes[node].islandMasks {
					d.islandCounts = append(d.islandCounts, bits.OnesCount64(wholeFree&islandMask))
				}
				if d.hasFractions {
					gpuFree = a.loadGPUs(node, d.gpuTrial)
				}
			}
			if gpuFree != nil {
				count = d.simulateGPUTakes(node, gpus, gpuFree, bundle.gpu, a.wholeIsland, count)
			} else {
				count = min(count, bits.OnesCount64(wholeFree)/bundle.gpu.whole)
				for range count * bundle.gpu.whole {
					wholeFree &= wholeFree - 1 // the lowest: only how many matters, see simulateGPUTakes
				}
			}
			wholeGPUs += count * bundle.gpu.whole
		}
		if count == 0 {
			continue
		}
		for _, r := range bundle.nonzero {
			freeAfter[r] -= resources.Amount(count) * bundle.amounts[r]
		}
		taken += count
		if take != nil {
			take[g] = count
		}
	}
	d.fillIslands = 0
	if wholeGPUs > 0 && d.islandMode {
		d.fillIslands = islandsToHold(d.islandCounts, wholeGPUs)
	}
	return taken
}

// simulateGPUTakes takes the GPUs of up to count bundles of request from free and
// returns for how many there were GPUs. Whole-GPU bundles take the lowest wholly free
// GPUs: assign's picker may choose others, but a whole GPU taken anywhere leaves the
// same free shares behind, so how many bundles fit (of this run and the fractional
// runs after it) comes out the same. Fractions go through the picker, as in assign.
func (d *decision) simulateGPUTakes(node int, gpus []snapshotGPU, free []resources.Amount, request gpuRequest, island int32, count int) int {
	if request.whole > 0 {
		count = min(count, countWhollyFree(gpus, free, island)/request.whole)
		for g, marked := 0, 0; marked < count*request.whole; g++ {
			if usableWhole(gpus, free, g, island) {
				free[g] = 0
				marked++
			}
		}
		return count
	}
	pref := gpuPreference{island: -1}
	for taken := range count {
		if _, ok := d.picker.pick(node, free, request, &pref, d.pickScratch[:0]); !ok {
			return taken
		}
	}
	return count
}

// islandsToHold is the fewest islands (with islandFree wholly free GPUs each) that hold
// gpus whole GPUs: the largest first.
func islandsToHold(islandFree []int, gpus int) int {
	islands := 0
	for gpus > 0 && len(islandFree) > 0 {
		largest := 0
		for i, free := range islandFree {
			if free > islandFree[largest] {
				largest = i
			}
		}
		if islandFree[largest] == 0 {
			break
		}
		gpus -= islandFree[largest]
		islandFree[largest] = 0
		islands++
	}
	return islands
}

// bundleFittingNoNode returns the first bundle that no node could take even alone, or
// -1. Checking before placing anything keeps the failure's reasons about the bundle
// itself, not about what its smaller siblings took first.
func (d *decision) bundleFittingNoNode(a *attempt) int {
	row := make([]resources.Amount, len(d.resources))
	for _, run := range d.bundleRuns {
		bundle := &d.bundles[run.positions[0]]
		fitsSomeNode := false
		for node := range d.snapshot.nodes {
			if !d.eligible[node] || !d.passesSelector(bundle.selector, node) {
				continue
			}
			if a.load(node, row); fits(row, bundle.amounts, bundle.nonzero) && d.gpusFitBundle(a, node, bundle) {
				fitsSomeNode = true
				break
			}
		}
		if !fitsSomeNode {
			return run.positions[0]
		}
	}
	return -1
}

func (d *decision) firstWaiting(placedOfRun []int) int {
	for g, run := range d.bundleRuns {
		if placedOfRun[g] < len(run.positions) {
			return run.positions[placedOfRun[g]]
		}
	}
	return -1
}

// bestNodeForGroupSum returns the best-fitting node that passes every stage for the sum
// of the bundles (its GPUs taking every bundle's), or -1. PACK (pack) ranks nodes
// already holding the group first, then those whose NVLink islands the group's whole
// GPUs span fewest of; STRICT_PACK goes by best fit alone, as Ray's. Both then prefer
// the node where the group's MIG profiles cost least (migRank*: idle instances reused,
// partitioned GPUs before empty ones).
func (d *decision) bestNodeForGroupSum(a *attempt, pack bool) int {
	row, freeAfter := make([]resources.Amount, len(d.resources)), make([]resources.Amount, len(d.resources))
	rank := d.newRanking()
	for node := range d.snapshot.nodes {
		if !d.eligible[node] || !d.passesAllSelectors(node) {
			continue
		}
		a.load(node, row)
		if !fits(row, d.groupSum, d.groupSumNonzero) {
			continue
		}
		gpusFit, islands := d.gpusFitGroup(a, node, -1, pack && d.islandMode)
		if !gpusFit {
			continue
		}
		migRank, failed, _ := d.migFitsGroup(a, node)
		if failed >= 0 {
			continue
		}
		for r := range freeAfter {
			freeAfter[r] = row[r] - d.groupSum[r]
		}
		if pack {
			rank.setPreferences(boolKey(!d.holdsPlaced[node]), float64(islands), float64(migRank))
		} else {
			rank.setPreferences(float64(migRank), 0, 0)
		}
		d.setFragmentation(rank.candidateKey, rank.bar(), a, node, -1, nil)
		d.setBestFit(rank, node, freeAfter)
		rank.offer(node)
	}
	return rank.best
}

// placeSpread puts each bundle on the best-fitting node. SPREAD (as Ray's) prefers a
// node the group does not use yet and, once none fits, reuses the node with the fewest
// of the group's bundles, best effort; STRICT_SPREAD only takes unused nodes and fails
// at once when there are fewer eligible nodes than bundles. Among nodes equal on that,
// those in the scalable units chosen for the group come first, then those where the
// bundle's GPUs can sit on the round's target rails inside one island (spread.go).
func (d *decision) placeSpread(a *attempt, strict bool) *failure {
	if strict {
		eligibleNodes := 0
		for node := range d.snapshot.nodes {
			if d.eligible[node] && a.bundlesOn(node) == 0 {
				eligibleNodes++
			}
		}
		if eligibleNodes < len(d.bundles) {
			return &failure{attempt: a, subject: failedTooFewNodes, eligibleNodes: eligibleNodes}
		}
	}
	if position := d.bundleFittingNoNode(a); position >= 0 {
		return &failure{attempt: a, subject: failedBundle, position: position}
	}
	d.spreadChoicesOf(a) // the scalable units, chosen before any bundle is placed
	row, freeAfter := make([]resources.Amount, len(d.resources)), make([]resources.Amount, len(d.resources))
	rank := d.newRanking()
	for _, run := range d.bundleRuns {
		// While unused nodes fit, a run of identical bundles goes to the best unused nodes
		// in key order (placing a bundle only makes its own node worse), so one pass over
		// the nodes picks them all, instead of one pass per bundle.
		best := d.bestUnusedNodes(a, &d.bundles[run.positions[0]], len(run.positions))
		for i, node := range best {
			d.assign(a, run.positions[i], node)
		}
		for _, position := range run.positions[len(best):] {
			if f := d.placeOneSpread(a, position, strict, rank, row, freeAfter); f != nil {
				return f
			}
		}
	}
	return nil
}

// bestUnusedNodes returns up to limit nodes holding none of the group's bundles that
// could each take bundle, best first: in the chosen scalable units, then rail-aligned,
// then best fit.
func (d *decision) bestUnusedNodes(a *attempt, bundle *bundleDemand, limit int) []int {
	row, freeAfter := make([]resources.Amount, len(d.resources)), make([]resources.Amount, len(d.resources))
	top := d.newTopNodes(limit)
	for node := range d.snapshot.nodes {
		if !d.eligible[node] || a.bundlesOn(node) > 0 || !d.passesSelector(bundle.selector, node) {
			continue
		}
		a.load(node, row)
		if !fits(row, bundle.amounts, bundle.nonzero) {
			continue
		}
		for r := range freeAfter {
			freeAfter[r] = row[r] - bundle.amounts[r]
		}
		fit := d.spreadGPUs(a, node, bundle)
		if !fit.ok {
			continue
		}
		setPreferenceKey(top.candidateKey, 0, d.unitRank(a, node), fit.missed, float64(fit.islandTaken+fit.migRank))
		d.setFragmentation(top.candidateKey, top.bar(), a, node, -1, d.bundleRuns[bundle.run].positions[:1])
		d.setBestFitKey(top.candidateKey, node, freeAfter)
		top.offer(node)
	}
	return top.nodes
}

// placeOneSpread places the bundle at position on the best node for it: SPREAD
// prefers nodes with fewer of the group's bundles, STRICT_SPREAD takes only unused ones;
// then as bestUnusedNodes.
func (d *decision) placeOneSpread(a *attempt, position int, strict bool, rank *ranking, row, freeAfter []resources.Amount) *failure {
	bundle := &d.bundles[position]
	rank.reset()
	for node := range d.snapshot.nodes {
		if !d.eligible[node] || (strict && a.bundlesOn(node) > 0) || !d.passesSelector(bundle.selector, node) {
			continue
		}
		a.load(node, row)
		if !fits(row, bundle.amounts, bundle.nonzero) {
			continue
		}
		fit := d.spreadGPUs(a, node, bundle)
		if !fit.ok {
			continue
		}
		for r := range freeAfter {
			freeAfter[r] = row[r] - bundle.amounts[r]
		}
		rank.setPreferences(float64(a.bundlesOn(node)), d.unitRank(a, node), fit.missed, float64(fit.islandTaken+fit.migRank))
		d.setFragmentation(rank.candidateKey, rank.bar(), a, node, -1, []int{position})
		d.setBestFit(rank, node, freeAfter)
		rank.offer(node)
	}
	if rank.best < 0 {
		return &failure{attempt: a, subject: failedBundle, position: position}
	}
	d.assign(a, position, rank.best)
	return nil
}

// unschedulable turns a failure into the typed error, with a reason for every node
// rejected for the demand that failed.
func (d *decision) unschedulable(kind UnschedulableKind, f *failure) *UnschedulableError {
	err := &UnschedulableError{Kind: kind, Strategy: d.strategy, BundleIndex: -1}
	check := rejectionCheck{position: -1}
	switch f.subject {
	case failedBundle:
		bundle := &d.bundles[f.position]
		check.demand, check.nonzero, check.position = bundle.amounts, bundle.nonzero, f.position
		if bundle.selector >= 0 {
			check.selectors = []int{bundle.selector}
		}
		err.BundleIndex = bundle.index
		err.Demand = d.resourceSet(check.demand)
		err.summary = fmt.Sprintf("bundle %d %s fits no node", bundle.index, err.Demand)
	case failedGroupSum, failedIsland:
		check.demand, check.nonzero, check.group = d.groupSum, d.groupSumNonzero, true
		for s := range d.selectors {
			check.selectors = append(check.selectors, s)
		}
		err.Demand = d.resourceSet(check.demand)
		switch {
		case f.subject == failedIsland:
			err.summary = d.islandSummary(f)
		case d.islandMode:
			err.summary = fmt.Sprintf("STRICT_PACK bundles %s (sum of %d) fit no single NVLink island", err.Demand, len(d.bundles))
		default:
			err.summary = fmt.Sprintf("STRICT_PACK bundles %s (sum of %d) fit no single node", err.Demand, len(d.bundles))
		}
	case failedTooFewNodes:
		err.summary = fmt.Sprintf("STRICT_SPREAD needs %d distinct nodes, only %d are eligible", len(d.bundles), f.eligibleNodes)
	}
	if d.islandMode && d.strategy == StrategyStrictPack {
		err.IslandGPUs = d.groupWholeGPUs
	}
	if len(d.snapshot.nodes) == 0 {
		err.summary += ": the cluster has no nodes"
	}
	err.NodeReasons = make(map[NodeID][]Reason, len(d.snapshot.nodes))
	backing := make([]Reason, 0, len(d.snapshot.nodes))
	row := make([]resources.Amount, len(d.resources))
	for node := range d.snapshot.nodes {
		start := len(backing)
		backing = d.rejectionReasons(f.attempt, node, &check, row, backing)
		if len(backing) > start {
			err.NodeReasons[d.snapshot.nodes[node].id] = backing[start:len(backing):len(backing)]
		}
	}
	return err
}

func (d *decision) resourceSet(amounts []resources.Amount) resources.Set {
	set := make(resources.Set)
	for r, amount := range amounts {
		if amount > 0 {
			set[d.resources[r].name] = amount
		}
	}
	return set
}
