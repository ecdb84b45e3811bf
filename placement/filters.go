package placement

import (
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Feasibility stages, cheapest first. A node must pass all five to take a bundle:
//
//  1. status: dead and draining nodes take no new bundles. Two booleans.
//  2. group rule: where the strategy lets this group go given where its bundles already
//     are. STRICT_SPREAD excludes nodes holding one of the group's bundles; STRICT_PACK,
//     when rescheduling, is bound to the node holding the others. One lookup.
//  3. label selector: the bundle's selector. A map lookup per constraint; run once per
//     distinct selector per decision, not per bundle.
//  4. resources: the bundle's demand fits what the node has left in the attempt's view.
//     One comparison per requested resource, repeated as the plan grows.
//  5. GPUs, on nodes that list them: the node's free GPUs can take the bundle (whole
//     GPUs wholly free, a fraction on one GPU; in islands mode the group's whole GPUs in
//     one NVLink island). A scan of the node's few GPUs, so it runs after stage 4 and
//     only where stage 4 passed. A bundle's MIG profile is checked here too: PlanMIG
//     over the node's MIG slot maps as the attempt changed them (mig_schedule.go); its
//     resource name is not a resource column, stage 4 skips it.
//
// Stages 1-3 do not depend on what the plan has taken so far (except STRICT_SPREAD's
// "taken earlier in this plan"), so computeStaticFeasibility runs them once into per-node
// booleans and the strategies' hot loops only run stages 4 and 5. On failure,
// rejectionReasons runs the same stage functions again, for every node, to say why each
// was rejected.

// statusRejection is stage 1.
func statusRejection(node *snapshotNode) (Reason, bool) {
	switch {
	case !node.alive:
		return Reason{Code: ReasonDead}, true
	case node.draining:
		return Reason{Code: ReasonDraining}, true
	default:
		return Reason{}, false
	}
}

// groupRejection is stage 2. a is nil for the static pass (placed bundles only) and
// the failed attempt when explaining a failure.
func (d *decision) groupRejection(node int, a *attempt) (Reason, bool) {
	switch d.strategy {
	case StrategyStrictSpread:
		if d.holdsPlaced[node] || (a != nil && a.bundlesOn(node) > 0) {
			return Reason{Code: ReasonAlreadyHoldsBundle}, true
		}
	case StrategyStrictPack:
		switch domain := d.strictPackDomain; {
		case domain >= 0 && d.snapshot.nodes[node].domainIsland != domain:
			return Reason{Code: ReasonNotGroupDomain, NVLinkDomain: d.snapshot.islands[domain].domain}, true
		case domain < 0 && d.strictPackNode >= 0 && node != d.strictPackNode:
			return Reason{Code: ReasonNotGroupNode, GroupNode: d.snapshot.nodes[d.strictPackNode].id}, true
		}
	}
	return Reason{}, false
}

// labelRejection is stage 3.
func labelRejection(selector nodelabel.Selector, labels map[string]string) (Reason, bool) {
	constraint, mismatch := selector.FirstMismatch(labels)
	if !mismatch {
		return Reason{}, false
	}
	value, present := labels[constraint.Key]
	return Reason{
		Code:           ReasonLabelMismatch,
		Label:          constraint.Key,
		LabelSelector:  constraint.Expression(),
		NodeLabelValue: value,
		NodeHasLabel:   present,
	}, true
}

// fits is stage 4 on the hot path: demand fits what node has left.
func fits(row, demand []resources.Amount, nonzero []int) bool {
	for _, r := range nonzero {
		if row[r] < demand[r] {
			return false
		}
	}
	return true
}

// resourceRejections is stage 4 with reasons: one per resource that is short. A
// resource short even in the node's total is insufficient_total in either view. row is
// scratch space of one entry per decision resource.
func (d *decision) resourceRejections(a *attempt, node int, demand []resources.Amount, nonzero []int, row []resources.Amount, reasons []Reason) []Reason {
	a.load(node, row)
	for _, r := range nonzero {
		if row[r] >= demand[r] {
			continue
		}
		total := d.totalAt(node, r)
		reason := Reason{Code: ReasonInsufficientAvailable, Resource: d.resources[r].name, Want: demand[r], Have: row[r], Total: total}
		switch {
		case a.view == viewCapacity:
			reason.Code = ReasonInsufficientTotal
		case total < demand[r]:
			reason.Code, reason.Have = ReasonInsufficientTotal, total
		}
		reasons = append(reasons, reason)
	}
	return reasons
}

// computeStaticFeasibility runs stages 1-3 once per node.
func (d *decision) computeStaticFeasibility() {
	nodeCount := len(d.snapshot.nodes)
	d.eligible = make([]bool, nodeCount)
	for node := range d.snapshot.nodes {
		_, rejectedByStatus := statusRejection(&d.snapshot.nodes[node])
		_, rejectedByGroup := d.groupRejection(node, nil)
		d.eligible[node] = !rejectedByStatus && !rejectedByGroup
	}
	if len(d.selectors) == 0 {
		return
	}
	d.matchesAllSelectors = make([]bool, nodeCount)
	for node := range d.matchesAllSelectors {
		d.matchesAllSelectors[node] = true
	}
	for s := range d.selectors {
		matches := make([]bool, nodeCount)
		for node := range d.snapshot.nodes {
			if !d.eligible[node] {
				continue // never asked
			}
			_, rejected := labelRejection(d.selectors[s].selector, d.snapshot.nodes[node].labels)
			matches[node] = !rejected
			d.matchesAllSelectors[node] = d.matchesAllSelectors[node] && !rejected
		}
		d.selectors[s].matches = matches
	}
}

// passesSelector reports stage 3 for a bundle's selector (-1: none).
func (d *decision) passesSelector(selector, node int) bool {
	return selector < 0 || d.selectors[selector].matches[node]
}

// passesAllSelectors reports stage 3 for every bundle at once.
func (d *decision) passesAllSelectors(node int) bool {
	return d.matchesAllSelectors == nil || d.matchesAllSelectors[node]
}

// rejectionCheck is what a failure is explained against: one bundle, or the group's sum.
type rejectionCheck struct {
	demand    []resources.Amount
	nonzero   []int
	selectors []int // the selector ids the demand must satisfy
	position  int   // the bundle in decision.bundles, or -1 for the group
	group     bool  // the group as a whole (STRICT_PACK)
}

// rejectionReasons runs every stage for one node and appends to reasons why it cannot
// take the check's demand in the attempt's state. row is scratch space as for
// resourceRejections.
func (d *decision) rejectionReasons(a *attempt, node int, check *rejectionCheck, row []resources.Amount, reasons []Reason) []Reason {
	record := &d.snapshot.nodes[node]
	if reason, rejected := statusRejection(record); rejected {
		// A node that takes no bundles at all needs no other reason.
		return append(reasons, reason)
	}
	if reason, rejected := d.groupRejection(node, a); rejected {
		reasons = append(reasons, reason)
	}
	for _, s := range check.selectors {
		if reason, rejected := labelRejection(d.selectors[s].selector, record.labels); rejected {
			reasons = append(reasons, reason)
		}
	}
	if check.group && d.islandMode && record.domainIsland >= 0 {
		return d.domainRejections(a, node, row, reasons)
	}
	before := len(reasons)
	reasons = d.resourceRejections(a, node, check.demand, check.nonzero, row, reasons)
	if len(reasons) > before {
		return reasons
	}
	if d.hasMIG {
		if reason, rejected := d.migRejection(a, node, check); rejected {
			return append(reasons, reason)
		}
	}
	if record.gpuCount == 0 {
		return reasons
	}
	if reason, rejected := d.gpuRejection(a, node, check); rejected {
		reasons = append(reasons, reason)
	}
	return reasons
}

// gpuRejection is stage 5 with a reason, for a node whose resource counts pass.
func (d *decision) gpuRejection(a *attempt, node int, check *rejectionCheck) (Reason, bool) {
	gpus, _ := d.snapshot.nodeGPUs(node)
	free := a.loadGPUs(node, d.gpuScratch)
	if check.position >= 0 {
		bundle := &d.bundles[check.position]
		if d.gpusFitBundle(a, node, bundle) {
			return Reason{}, false
		}
		return gpusNotFreeReason(gpus, free, bundle.gpu, a.wholeIsland), true
	}
	if d.islandMode {
		need := d.groupWholeGPUs
		if largestFree := d.picker.largestFreeIsland(node, free, -1); largestFree < need {
			if size := d.largestIslandSize(node); size < need {
				return islandReason(ReasonNVLinkIslandTooSmall, need, size), true
			}
			return islandReason(ReasonNVLinkIslandBusy, need, largestFree), true
		}
		for _, island := range d.islandsOf(node) {
			if fit, _ := d.gpusFitGroup(a, node, island, false); fit {
				return Reason{}, false
			}
		}
	} else if fit, _ := d.gpusFitGroup(a, node, -1, false); fit {
		return Reason{}, false
	}
	// The whole GPUs fit: the fractions do not.
	if d.groupWholeGPUs > 0 && countWhollyFree(gpus, free, -1) < d.groupWholeGPUs {
		return gpusNotFreeReason(gpus, free, gpuRequest{whole: d.groupWholeGPUs}, -1), true
	}
	largestFraction := resources.Amount(0)
	for position := range d.bundles {
		largestFraction = max(largestFraction, d.bundles[position].gpu.fraction)
	}
	return gpusNotFreeReason(gpus, free, gpuRequest{fraction: largestFraction}, -1), true
}

func gpusNotFreeReason(gpus []snapshotGPU, free []resources.Amount, request gpuRequest, island int32) Reason {
	reason := Reason{Code: ReasonGPUsNotFree, Resource: "GPU", Want: request.fraction, Have: mostFreeOnOneGPU(free)}
	if request.whole > 0 {
		reason.Want = resources.Amount(request.whole) * resources.AmountScale
		reason.Have = resources.Amount(countWhollyFree(gpus, free, island)) * resources.AmountScale
	}
	return reason
}

func islandReason(code ReasonCode, want, have int) Reason {
	return Reason{Code: code, Resource: "GPU", Want: resources.Amount(want) * resources.AmountScale, Have: resources.Amount(have) * resources.AmountScale}
}

// domainRejections explains why a node of a multi-node NVLink domain could not help a
// STRICT_PACK group: the domain is too small or too busy for its whole GPUs, or else
// why the node could not take the bundle that filling the domain got stuck on.
func (d *decision) domainRejections(a *attempt, node int, row []resources.Amount, reasons []Reason) []Reason {
	need := d.groupWholeGPUs
	domain := d.snapshot.nodes[node].domainIsland
	total, free := d.domainCapacity(a, domain)
	switch {
	case total < need:
		return append(reasons, islandReason(ReasonNVLinkIslandTooSmall, need, total))
	case free < need:
		return append(reasons, islandReason(ReasonNVLinkIslandBusy, need, free))
	}
	stuck := d.domainFillFailure(a, domain)
	if stuck == nil || stuck.subject != failedBundle {
		return reasons
	}
	bundle := &d.bundles[stuck.position]
	check := rejectionCheck{demand: bundle.amounts, nonzero: bundle.nonzero, position: stuck.position}
	before := len(reasons)
	reasons = d.resourceRejections(stuck.attempt, node, check.demand, check.nonzero, row, reasons)
	if len(reasons) == before {
		if reason, rejected := d.gpuRejection(stuck.attempt, node, &check); rejected {
			reasons = append(reasons, reason)
		}
	}
	return reasons
}

// domainFillFailure replays filling the domain with the group (as bestIsland did) and
// returns where it got stuck, once per domain and view.
func (d *decision) domainFillFailure(a *attempt, domain int32) *failure {
	key := domainView{domain: domain, view: a.view}
	if stuck, ok := d.domainFailures[key]; ok {
		return stuck
	}
	trial := d.newAttempt(a.view)
	trial.wholeIsland = domain
	stuck := d.fillNodes(trial, d.snapshot.islands[domain].nodes)
	if d.domainFailures == nil {
		d.domainFailures = make(map[domainView]*failure)
	}
	d.domainFailures[key] = stuck
	return stuck
}

type domainView struct {
	domain int32
	view   viewKind
}
