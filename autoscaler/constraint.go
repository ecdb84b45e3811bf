package autoscaler

import (
	"cmp"
	"slices"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// planConstraint sizes the cluster for the last request_resources call: its bundles
// must fit the cluster's totals at once (what runs counts toward them, as in Ray), so
// they are scheduled against every node's total capacity (running nodes as if idle,
// launching and planned nodes as new), largest first, and a node of the cheapest type
// that holds a bundle is launched for each bundle the totals lack. Running nodes the
// bundles land on are kept from idle scale-down: request_resources is a floor. The
// launched nodes are empty in fact, so later demand sees them all free.
func (p *planner) planConstraint() {
	if len(p.in.Constraint) == 0 {
		return
	}
	bundles := make([]resources.Set, 0, len(p.in.Constraint))
	for _, bundle := range p.in.Constraint {
		if !bundle.IsZero() {
			bundles = append(bundles, bundle)
		}
	}
	slices.SortStableFunc(bundles, func(a, b resources.Set) int {
		return cmp.Or(cmp.Compare(b[resources.GPU], a[resources.GPU]), cmp.Compare(b[resources.CPU], a[resources.CPU]),
			strings.Compare(a.String(), b.String()))
	})
	var rows []placement.Node
	for position, node := range p.pool.nodes {
		if node.kind == kindRunning {
			rows = append(rows, atTotal(node.row))
		} else {
			rows = append(rows, p.pool.rowAt(position)) // launching and planned nodes are still empty
		}
	}
	snapshot, err := placement.NewSnapshot(rows)
	if err != nil {
		return
	}
	reported := make(map[string]bool)
	for _, bundle := range bundles {
		d := newDemand(ForRequestResources, placement.Request{Bundles: []resources.Set{bundle}, Strategy: placement.StrategyPack}, 1, false)
		d.key = "constraint|" + d.key
		plan, err := placement.Schedule(snapshot, d.request)
		if err == nil && snapshot.Reserve(d.request.Bundles, plan) == nil {
			for _, placed := range plan.Placements {
				if position, ok := p.pool.index[placed.NodeID]; ok && p.pool.nodes[position].kind == kindRunning {
					p.pool.pinned[placed.NodeID] = true
				}
			}
			continue
		}
		t, limits := p.constraintType(d)
		if t == nil {
			reason := p.unheldReason(d, limits, func(t *NodeType) error { return p.cache.shape(d, t).err })
			if reason != nil && !reported[reason.Reason] {
				reported[reason.Reason] = true
				p.infeasible = append(p.infeasible, *reason)
			}
			continue
		}
		id := p.newID(t)
		p.pool.add(NewNode(id, t), kindPlanned, t.Name)
		p.launch(t, 1, ForRequestResources)
		grown := append(snapshot.Nodes(), withID(p.cache.shape(d, t).fills[0], id))
		if snapshot, err = placement.NewSnapshot(grown); err != nil {
			return
		}
	}
}

// constraintType is the cheapest launchable type one new node of which holds the
// bundle.
func (p *planner) constraintType(d *demand) (*NodeType, limitTracker) {
	fits := func(t *NodeType) bool { return len(p.cache.shape(d, t).fills) > 0 }
	var best *option
	var limits limitTracker
	for _, t := range p.candidateTypes(d, fits) {
		if !fits(t) {
			continue
		}
		if t.Unavailable || p.allowance(t) == 0 {
			limits.note(p.limitReason(t))
			continue
		}
		opt := option{t: t, nodes: 1}
		if best == nil || cheaper(opt, *best) {
			best = &opt
		}
	}
	if best == nil {
		return nil, limits
	}
	return best.t, limits
}
