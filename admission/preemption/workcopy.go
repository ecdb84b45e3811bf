package preemption

import (
	"slices"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// The working copy is the snapshot the fit checks schedule on: the caller's, with the
// bundles of the set being tried released. It holds only the rows that can matter:
// the nodes of the candidates in scope and the nodes that could take one of the
// preemptor's bundles as they are. That is exact for "does the preemptor fit": a node
// left out holds no candidate of the scope, so no set tried changes it, and it takes no
// bundle (dead or draining) or has none free of any resource the preemptor asks for, so
// Schedule's filters reject it for every bundle in every state of the search (no plan
// puts anything there); its free GPUs, the only thing island and rail preferences
// count, are none. What would make a
// left-out node matter keeps every row: a bundle asking for nothing, a MIG profile
// (slots are not resources of the table), bundles already placed (STRICT_PACK's group
// node, PACK's and SPREAD's preferences), a multi-node NVLink domain (an island
// spanning nodes). A candidate outside the scope is rebuilt in before its bundles are
// released (sync), so a scope that is too small costs a copy, never a wrong answer.

// nodeOf is the caller's node id, copied once per decision.
func (s *search) nodeOf(id placement.NodeID) (placement.Node, bool) {
	if node, ok := s.nodes[id]; ok {
		return node, true
	}
	node, ok := s.base.Node(id)
	if ok {
		s.nodes[id] = node
	}
	return node, ok
}

// useScope says which candidates the coming fit checks may remove.
func (s *search) useScope(list []int) { s.scope = list }

// computeFreeRows finds the nodes that could take one of the preemptor's bundles now,
// or sets rowsAll when the working copy must keep every node.
func (s *search) computeFreeRows() {
	s.freeDone = true
	request := s.in.Preemptor.Request
	if len(request.PlacedBundles) > 0 {
		s.rowsAll = true
		return
	}
	asked := map[string]bool{}
	for _, bundle := range request.Bundles {
		any := false
		for name, amount := range bundle {
			if mig.IsResource(name) {
				s.rowsAll = true
				return
			}
			if amount > 0 {
				asked[name], any = true, true
			}
		}
		if !any {
			s.rowsAll = true
			return
		}
	}
	// No node has more of a resource free than the most any usable node has: when that
	// is none for everything asked, no node need be read.
	most, anyFree := s.base.MaxAvailable(), false
	for name := range asked {
		anyFree = anyFree || most[name] > 0
	}
	if !anyFree {
		return
	}
	for _, node := range s.base.Nodes() {
		if !node.Alive || node.Draining {
			continue // takes no bundle
		}
		for name := range asked {
			if node.Available[name] > 0 {
				s.freeRows = append(s.freeRows, node.ID)
				s.nodes[node.ID] = node
				break
			}
		}
	}
}

// sync makes the working copy follow the set being tried: the bundles of candidates
// added back since the last sync are reserved again, those of candidates removed
// released. Reservations go first so a victim's GPUs are never taken twice. False when
// the copy cannot be made (the caller's snapshot is not consistent).
func (s *search) sync() bool {
	if s.work == nil {
		return s.rebuild()
	}
	for _, i := range s.pending {
		if c := &s.cands[i]; c.released && !c.covered {
			return s.rebuild() // a candidate outside the rows: widen them
		}
	}
	for _, i := range s.pending {
		c := &s.cands[i]
		if c.applied && !c.released {
			c.applied = false
			if !c.unplaced && s.work.Reserve(c.run.Bundles, placement.Plan{Placements: c.run.Placements}) != nil {
				return s.rebuild() // a MIG instance that cannot be taken back as planned: start again
			}
		}
	}
	for _, i := range s.pending {
		c := &s.cands[i]
		if !c.applied && c.released {
			s.release(c)
		}
	}
	s.pending = s.pending[:0]
	return true
}

// release frees candidate c's bundles in the working copy.
func (s *search) release(c *candidate) {
	c.applied = true
	if !c.unplaced && s.work.Release(c.run.Bundles, placement.Plan{Placements: c.run.Placements}) != nil {
		c.unplaced = true // not in the snapshot (a dead node): only its quota counts
	}
}

// rebuild copies the rows that matter for the scope and the set being tried from the
// caller's snapshot, and releases what is removed.
func (s *search) rebuild() bool {
	if !s.freeDone {
		s.computeFreeRows()
	}
	work, err := s.copyRows()
	if err != nil {
		s.work = nil
		return false
	}
	s.work = work
	for i := range s.cands {
		c := &s.cands[i]
		c.applied = false
		c.covered = s.rowsAll || !slices.ContainsFunc(c.run.Placements, func(pl placement.BundlePlacement) bool {
			return !s.rows[pl.NodeID] && !s.unknown[pl.NodeID]
		})
		if c.released {
			s.release(c)
		}
	}
	s.pending = s.pending[:0]
	return true
}

func (s *search) copyRows() (*placement.Snapshot, error) {
	if s.rowsAll {
		return placement.NewSnapshot(s.base.Nodes())
	}
	s.rows = map[placement.NodeID]bool{}
	var rows []placement.Node
	add := func(id placement.NodeID) {
		if s.rows[id] {
			return
		}
		if node, ok := s.nodeOf(id); ok {
			s.rows[id] = true
			rows = append(rows, node)
		} else {
			s.unknown[id] = true // its bundles release nothing: the candidate is unplaced
		}
	}
	for _, id := range s.freeRows {
		add(id)
	}
	for _, i := range s.scope {
		for _, pl := range s.cands[i].run.Placements {
			add(pl.NodeID)
		}
	}
	for i := range s.cands {
		if s.cands[i].released {
			for _, pl := range s.cands[i].run.Placements {
				add(pl.NodeID)
			}
		}
	}
	if slices.ContainsFunc(rows, func(n placement.Node) bool { return n.NVLinkDomain != "" }) {
		s.rowsAll = true
		return placement.NewSnapshot(s.base.Nodes())
	}
	return placement.NewSnapshot(rows)
}

// prune drops from pool the candidates that cannot help the preemptor fit whatever
// else of pool goes (see prunable for when and why that is exact).
func (s *search) prune(pool []int) []int {
	if !s.prunable() {
		return pool
	}
	need := s.charge[resources.GPU]
	// A node is reachable when, emptied of every candidate of pool, it has the GPUs
	// the preemptor needs: STRICT_PACK puts the whole group on one node.
	evictable := map[placement.NodeID]resources.Amount{}
	for _, i := range pool {
		for id, gpus := range s.cands[i].gpusByNode {
			evictable[id] += gpus
		}
	}
	reachable := map[placement.NodeID]bool{}
	for id, gpus := range evictable {
		node, ok := s.nodeOf(id)
		if !ok {
			continue
		}
		if node.NVLinkDomain != "" {
			return pool // an island spanning nodes: every candidate of it may help
		}
		reachable[id] = node.Alive && !node.Draining && node.Total[resources.GPU] >= need && node.Available[resources.GPU]+gpus >= need
	}
	return slices.DeleteFunc(slices.Clone(pool), func(i int) bool {
		for id := range s.cands[i].gpusByNode {
			if reachable[id] {
				return false
			}
		}
		return true
	})
}

// prunable: the preemptor is one STRICT_PACK group of whole GPUs placed anew, no
// candidate is in another queue, and its quota fits with nothing evicted. Then a
// victim whose nodes are all unreachable (prune) is in no minimal set and changes no
// fit check: the preemptor goes on one reachable node, whose state the victim does
// not touch, and the quota fits whatever is evicted (evicting only lowers usage). So
// leaving such victims out changes no set remove-then-add-back finds over any order,
// nor which sets are minimal; it shrinks the working copy and the exact search.
func (s *search) prunable() bool {
	request := s.in.Preemptor.Request
	if s.anyOtherQueue || request.Strategy != placement.StrategyStrictPack || len(request.PlacedBundles) > 0 ||
		s.charge[resources.GPU] < resources.AmountScale {
		return false
	}
	for name := range s.charge {
		if mig.IsResource(name) {
			return false
		}
	}
	s.setTo(nil)
	p := s.in.Preemptor
	return s.quota.Reason(p.Queue, s.charge) == "" && (s.allowBorrowing || s.quota.WithinNominal(p.Queue, s.charge))
}
