package placement

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
)

// NVLink islands for STRICT_PACK and PACK ("islands mode": a group with whole GPUs, on a
// cluster where some node lists its GPUs, unless Request.Topology is "node": Ray's
// one-node rule for STRICT_PACK, plain filling of nodes for PACK).
//
// The group's whole GPUs go inside one island, with every bundle (CPU-only and
// fractional ones too) on the island's nodes:
//   - a node-local island: every bundle on that node, the whole GPUs from the island;
//   - a multi-node NVLink domain (Node.NVLinkDomain): the bundles filled onto the
//     domain's nodes, fewest nodes first (fillNodes), the whole GPUs from the domain;
//   - a node that does not list its GPUs counts as one island of its GPU count, so it
//     is scheduled as before topology.
//
// Among the islands that can hold the group, the one left with the fewest free GPUs
// (best fit: the largest free islands stay whole for the groups that need them), then
// the fewest nodes, then a node-local island before a domain, then the node's best fit.
// STRICT_PACK fails when none can (failedIsland when no island is large enough,
// failedGroupSum when islands are but other resources fall short); PACK goes on to its
// one-node and fill stages.

// islandChoice is one way to hold the group inside one island.
type islandChoice struct {
	// node holds every bundle (a node-local island, or a node without GPU info); -1 for
	// a domain.
	node int
	// island is the node-local island or the domain; -1 for a node without GPU info.
	island int32
	// trial is, for a domain, the attempt with the group filled onto its nodes.
	trial *attempt
}

// bestIsland finds the best island that can hold every bundle, or false.
func (d *decision) bestIsland(a *attempt) (islandChoice, bool) {
	need := d.groupWholeGPUs
	row, freeAfter := make([]resources.Amount, len(d.resources)), make([]resources.Amount, len(d.resources))
	rank := d.newRanking()
	var best islandChoice
	for node := range d.snapshot.nodes {
		record := &d.snapshot.nodes[node]
		if !d.eligible[node] || record.domainIsland >= 0 || !d.passesAllSelectors(node) {
			continue
		}
		a.load(node, row)
		if !fits(row, d.groupSum, d.groupSumNonzero) {
			continue
		}
		if _, failed, _ := d.migFitsGroup(a, node); failed >= 0 {
			continue
		}
		for r := range freeAfter {
			freeAfter[r] = row[r] - d.groupSum[r]
		}
		if record.gpuCount == 0 {
			rank.setPreferences(float64(freeAfter[d.gpuResource]/resources.AmountScale), 1, 0)
			d.setFragmentation(rank.candidateKey, rank.bar(), a, node, -1, nil)
			d.setBestFit(rank, node, freeAfter)
			if rank.offer(node) {
				best = islandChoice{node: node, island: -1}
			}
			continue
		}
		wholeFree := a.wholeFree(node)
		for slot, island := range d.islandsOf(node) {
			islandFree := bits.OnesCount64(wholeFree & record.islandMasks[slot])
			if islandFree < need {
				continue
			}
			if fit, _ := d.gpusFitGroup(a, node, island, false); !fit {
				continue
			}
			rank.setPreferences(d.islandBestFit(islandFree-need), 1, 0)
			d.setFragmentation(rank.candidateKey, rank.bar(), a, node, island, nil)
			d.setBestFit(rank, node, freeAfter)
			if rank.offer(node) {
				best = islandChoice{node: node, island: island}
			}
		}
	}
	for _, domain := range d.snapshot.domainIslands {
		_, free := d.domainCapacity(a, domain)
		if free < need || d.strictPackDomain >= 0 && domain != d.strictPackDomain {
			continue
		}
		trial := d.newAttempt(a.view)
		trial.wholeIsland = domain
		if f := d.fillNodes(trial, d.snapshot.islands[domain].nodes); f != nil {
			continue
		}
		if trial.broken != nil {
			a.broken = trial.broken
			return islandChoice{}, false
		}
		rank.setPreferences(float64(free-need), float64(len(trial.groupNodes)), 1)
		clear(rank.candidateKey[preferenceSlots:])
		if rank.offer(d.snapshot.islands[domain].nodes[0]) {
			best = islandChoice{node: -1, island: domain, trial: trial}
		}
	}
	return best, rank.best >= 0
}

// applyIsland places every bundle as choice says.
func (d *decision) applyIsland(a *attempt, choice islandChoice) {
	if choice.trial != nil {
		*a = *choice.trial
		return
	}
	a.wholeIsland = choice.island
	for position := range d.bundles {
		d.assign(a, position, choice.node)
	}
}

// islandFailure is STRICT_PACK's failure in islands mode: failedIsland when no island
// (of eligible nodes matching every selector) has the group's whole GPUs free in the
// attempt's view, else failedGroupSum.
func (d *decision) islandFailure(a *attempt) *failure {
	largest, holders := d.largestIsland(a)
	if largest < d.groupWholeGPUs {
		return &failure{attempt: a, subject: failedIsland, largestIsland: largest, largestIslandNodes: holders}
	}
	return &failure{attempt: a, subject: failedGroupSum}
}

// islandSummary says what STRICT_PACK needs and what the cluster has: "STRICT_PACK
// needs an NVLink island of 4 GPUs; the largest is 2, on nodes a, b".
func (d *decision) islandSummary(f *failure) string {
	free := ""
	if f.attempt.view == viewAvailable {
		free = " free"
	}
	largest, holders := f.largestIsland, f.largestIslandNodes
	switch {
	case len(holders) == 0 && f.attempt.view == viewAvailable && d.anyEligibleGPUs():
		return fmt.Sprintf("STRICT_PACK needs an NVLink island of %d free GPUs; no island has a GPU free", d.groupWholeGPUs)
	case len(holders) == 0:
		return fmt.Sprintf("STRICT_PACK needs an NVLink island of %d%s GPUs; no eligible node has GPUs", d.groupWholeGPUs, free)
	}
	const maxShown = 3
	names := make([]string, 0, maxShown+1)
	for i, node := range holders {
		if i == maxShown {
			names = append(names, "…")
			break
		}
		names = append(names, ShortNodeID(d.snapshot.nodes[node].id))
	}
	where := "on node " + names[0]
	if len(holders) > 1 {
		where = "on nodes " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("STRICT_PACK needs an NVLink island of %d%s GPUs; the largest%s is %d, %s", d.groupWholeGPUs, free, free, largest, where)
}

// largestIsland returns the most whole GPUs free (in the attempt's view) in one island
// of eligible nodes matching every selector, and the nodes of the islands that have it
// (in id order). A node without GPU info counts its GPU resource as one island.
func (d *decision) largestIsland(a *attempt) (int, []int) {
	largest := 0
	var holders []int
	offer := func(size int, nodes ...int) {
		switch {
		case size > largest:
			largest, holders = size, append(holders[:0], nodes...)
		case size == largest:
			holders = append(holders, nodes...)
		}
	}
	row := make([]resources.Amount, len(d.resources))
	for node := range d.snapshot.nodes {
		record := &d.snapshot.nodes[node]
		if !d.eligible[node] || record.domainIsland >= 0 || !d.passesAllSelectors(node) {
			continue
		}
		if record.gpuCount == 0 {
			if a.load(node, row); d.gpuResource >= 0 && row[d.gpuResource] > 0 {
				offer(int(row[d.gpuResource]/resources.AmountScale), node)
			}
			continue
		}
		// Cheap bounds first: the node's largest island, and its free GPU count.
		bound := record.largestIsland
		if a.view == viewAvailable && d.gpuResource >= 0 {
			bound = min(bound, int(a.base[node*a.stride+a.columns[d.gpuResource]]/resources.AmountScale))
		}
		switch {
		case bound < largest:
			continue
		case a.view == viewCapacity && a.groupNode(node) == nil:
			offer(bound, node) // idle and untouched by the group: the island is whole
		default:
			offer(d.snapshot.largestFreeIslandMask(node, a.wholeFree(node)), node)
		}
	}
	for _, domain := range d.snapshot.domainIslands {
		if total, free := d.domainCapacity(a, domain); total > 0 {
			var members []int
			for _, node := range d.snapshot.islands[domain].nodes {
				if d.eligible[node] && d.passesAllSelectors(node) {
					members = append(members, node)
				}
			}
			offer(free, members...)
		}
	}
	if largest == 0 {
		// Only islands with no free GPU: list none rather than every node.
		holders = holders[:0]
	}
	return largest, holders
}

// anyEligibleGPUs reports whether an eligible node matching every selector has GPUs.
func (d *decision) anyEligibleGPUs() bool {
	for node := range d.snapshot.nodes {
		if d.eligible[node] && d.passesAllSelectors(node) && d.totalAt(node, d.gpuResource) > 0 {
			return true
		}
	}
	return false
}

// domainCapacity returns how many GPUs of the domain island are on its eligible nodes
// that match every selector, and how many of those are wholly free in the attempt.
func (d *decision) domainCapacity(a *attempt, domain int32) (total, free int) {
	for _, node := range d.snapshot.islands[domain].nodes {
		if !d.eligible[node] || !d.passesAllSelectors(node) {
			continue
		}
		islandMask := d.snapshot.islandMask(node, domain)
		total += bits.OnesCount64(islandMask)
		free += bits.OnesCount64(islandMask & a.wholeFree(node))
	}
	return total, free
}

// islandsOf returns the islands of node's GPUs, in GPU order (the snapshot's slice:
// read only).
func (d *decision) islandsOf(node int) []int32 { return d.snapshot.nodes[node].islands }

// largestIslandSize is the most GPUs of one node-local island on node.
func (d *decision) largestIslandSize(node int) int { return d.snapshot.nodes[node].largestIsland }

// gpusFitBundle is stage 5 for one bundle: its MIG profile fits node's MIG GPUs (if it
// asks for one), and node does not list its GPUs, or its free GPUs can take the
// bundle's (whole GPUs in the attempt's island, if any).
func (d *decision) gpusFitBundle(a *attempt, node int, bundle *bundleDemand) bool {
	if fit, _ := d.migFitsBundle(a, node, bundle); !fit {
		return false
	}
	if !bundle.gpu.any() || d.snapshot.nodes[node].gpuCount == 0 {
		return true
	}
	if bundle.gpu.whole > 0 {
		return bits.OnesCount64(a.wholeFree(node)&d.snapshot.islandMask(node, a.wholeIsland)) >= bundle.gpu.whole
	}
	gpus, _ := d.snapshot.nodeGPUs(node)
	return gpusFitIn(gpus, a.loadGPUs(node, d.gpuScratch), bundle.gpu, a.wholeIsland)
}

// gpusFitGroup is stage 5 for every bundle on one node: whether the node's GPUs can
// take every bundle's (whole GPUs confined to island when it is >= 0), and with
// wantIslands, how many islands the whole GPUs would span. A node that does not list
// its GPUs passes (the resource stage decided), spanning one island if the group has
// whole GPUs. Whole GPUs alone fit when enough are wholly free; with fractions, or to
// count islands, it runs the picker over the bundles in placement order, as assign will.
func (d *decision) gpusFitGroup(a *attempt, node int, island int32, wantIslands bool) (bool, int) {
	if d.snapshot.nodes[node].gpuCount == 0 {
		return true, min(d.groupWholeGPUs, 1)
	}
	gpus, _ := d.snapshot.nodeGPUs(node)
	free := a.loadGPUs(node, d.gpuTrial)
	if !d.hasFractions && !wantIslands {
		return countWhollyFree(gpus, free, island) >= d.groupWholeGPUs, 0
	}
	pref := gpuPreference{island: island}
	d.islandsSeen = d.islandsSeen[:0]
	for position := range d.bundles {
		bundle := &d.bundles[position]
		if !bundle.gpu.any() {
			continue
		}
		picked, ok := d.picker.pick(node, free, bundle.gpu, &pref, d.pickScratch[:0])
		if !ok {
			return false, 0
		}
		d.pickScratch = picked[:0]
		if bundle.gpu.whole == 0 {
			continue
		}
		for _, g := range picked {
			known := false
			for _, seen := range d.islandsSeen {
				known = known || seen == gpus[g].island
			}
			if !known {
				d.islandsSeen = append(d.islandsSeen, gpus[g].island)
			}
		}
	}
	return true, len(d.islandsSeen)
}

// everyNode returns 0..len(nodes)-1.
func (d *decision) everyNode() []int {
	if d.everyNodeList == nil {
		d.everyNodeList = make([]int, len(d.snapshot.nodes))
		for node := range d.everyNodeList {
			d.everyNodeList[node] = node
		}
	}
	return d.everyNodeList
}
