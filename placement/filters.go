package placement

// Feasibility stages, cheapest first. A node must pass all four to take a bundle:
//
//  1. status: dead and draining nodes take no new bundles. Two booleans.
//  2. group rule: where the strategy lets this group go given where its bundles already
//     are. STRICT_SPREAD excludes nodes holding one of the group's bundles; STRICT_PACK,
//     when rescheduling, is bound to the node holding the others. One lookup.
//  3. label selector: the bundle's selector. A map lookup per constraint; run once per
//     distinct selector per decision, not per bundle.
//  4. resources: the bundle's demand fits what the node has left in the attempt's view.
//     One comparison per requested resource, repeated as the plan grows.
//
// Stages 1-3 do not depend on what the plan has taken so far (except STRICT_SPREAD's
// "taken earlier in this plan"), so computeStaticFeasibility runs them once into per-node
// booleans and the strategies' hot loops only run stage 4. On failure, rejectionReasons
// runs the same stage functions again, for every node, to say why each was rejected.
// A topology stage (NVLink island, free GPU indices) belongs after stage 3.

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
		if d.strictPackNode >= 0 && node != d.strictPackNode {
			return Reason{Code: ReasonNotGroupNode, GroupNode: d.snapshot.nodes[d.strictPackNode].id}, true
		}
	}
	return Reason{}, false
}

// labelRejection is stage 3.
func labelRejection(selector LabelSelector, labels map[string]string) (Reason, bool) {
	constraint, mismatch := selector.firstMismatch(labels)
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
func fits(row, demand []Amount, nonzero []int) bool {
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
func (d *decision) resourceRejections(a *attempt, node int, demand []Amount, nonzero []int, row []Amount, reasons []Reason) []Reason {
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

// rejectionReasons runs every stage for one node and appends to reasons why it cannot
// take demand in the attempt's state. selectors are the selector ids the demand must
// satisfy; row is scratch space as for resourceRejections.
func (d *decision) rejectionReasons(a *attempt, node int, demand []Amount, nonzero, selectors []int, row []Amount, reasons []Reason) []Reason {
	record := &d.snapshot.nodes[node]
	if reason, rejected := statusRejection(record); rejected {
		// A node that takes no bundles at all needs no other reason.
		return append(reasons, reason)
	}
	if reason, rejected := d.groupRejection(node, a); rejected {
		reasons = append(reasons, reason)
	}
	for _, s := range selectors {
		if reason, rejected := labelRejection(d.selectors[s].selector, record.labels); rejected {
			reasons = append(reasons, reason)
		}
	}
	return d.resourceRejections(a, node, demand, nonzero, row, reasons)
}
