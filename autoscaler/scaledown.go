package autoscaler

import (
	"cmp"
	"slices"
	"strings"

	"github.com/raygo-dev/raygo/placement"
)

// terminationOrder sorts nodes the way scale-down takes them: idle running nodes first,
// the longest idle first; then launching nodes (no work on them yet); then busy nodes;
// ties by id.
func terminationOrder(a, b *Node) int {
	rank := func(n *Node) int {
		switch {
		case n.State == NodeRunning && n.IdleFor > 0:
			return 0
		case n.State == NodeLaunching:
			return 1
		default:
			return 2
		}
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(b.IdleFor, a.IdleFor), strings.Compare(a.ID, b.ID))
}

func (p *planner) terminate(node *Node, cause TerminationCause) {
	p.terminated[node.ID] = true
	p.terminations = append(p.terminations, Termination{NodeID: node.ID, Type: node.Type, Cause: cause})
	p.count[node.Type]--
	p.workers--
}

// enforceMaxWorkers terminates nodes above a type's max_workers, then above the
// cluster's, in terminationOrder (for the cluster's, nodes of types no longer configured
// first). Neither the head nor a node of unknown type is ever taken, and the
// cluster-wide bound never takes a type below its min_workers. This is
// not voluntary scale-down: max_unavailable does not bound it.
func (p *planner) enforceMaxWorkers() {
	var candidates, outdated []*Node
	for i := range p.in.Nodes {
		node := &p.in.Nodes[i]
		if node.Head || node.Type == "" {
			continue
		}
		if _, known := p.types[node.Type]; known {
			candidates = append(candidates, node)
		} else {
			outdated = append(outdated, node)
		}
	}
	slices.SortFunc(candidates, terminationOrder)
	slices.SortFunc(outdated, terminationOrder)
	for _, node := range candidates {
		if t := p.types[node.Type]; p.count[t.Name] > max(0, t.MaxWorkers) {
			p.terminate(node, CauseMaxWorkers)
		}
	}
	// Above the cluster's bound, nodes of types no longer configured go first.
	for _, node := range append(outdated, candidates...) {
		if p.workers <= max(0, p.in.MaxWorkers) {
			break
		}
		if p.terminated[node.ID] {
			continue
		}
		if t, known := p.types[node.Type]; !known || p.count[t.Name] > t.MinWorkers {
			p.terminate(node, CauseMaxWorkers)
		}
	}
}

// scaleDown terminates, at most max_unavailable at once, running nodes of a type no
// longer configured once idle, then nodes idle past their type's idle timeout that the
// type's min_workers does not need. It never takes the head, a node of unknown type,
// or a node the plan places demand on.
func (p *planner) scaleDown() {
	budget := max(1, p.in.MaxUnavailable)
	var outdated, idle []*Node
	for i := range p.in.Nodes {
		node := &p.in.Nodes[i]
		if node.Head || node.Type == "" || node.State != NodeRunning || node.IdleFor <= 0 ||
			p.terminated[node.ID] || p.pool.pinned[placement.NodeID(node.ID)] {
			continue
		}
		t, known := p.types[node.Type]
		switch {
		case !known:
			outdated = append(outdated, node)
		case node.IdleFor > t.IdleTimeout:
			idle = append(idle, node)
		}
	}
	slices.SortFunc(outdated, terminationOrder)
	slices.SortFunc(idle, terminationOrder)
	for _, node := range outdated {
		if budget == 0 {
			return
		}
		p.terminate(node, CauseOutdated)
		budget--
	}
	for _, node := range idle {
		if budget == 0 {
			return
		}
		if p.count[node.Type] <= p.types[node.Type].MinWorkers {
			continue
		}
		p.terminate(node, CauseIdle)
		budget--
	}
}
