package gcs

import (
	"fmt"
	"maps"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pbplacement"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// The scheduler's view of the cluster is kept, not rebuilt per round: built from the node
// table and the bundles placed (or being placed) when a node joins, dies or changes, and
// otherwise changed in place — each plan reserved as it is decided, each bundle released
// once its raylet confirmed the cancel. Only the holder of pgManager.viewMu touches it:
// the loop during a round, or a create placing its group at once.

// bundleRef names one bundle of one group.
type bundleRef struct {
	group string
	index int
}

// heldBundle is a bundle the view counts as held.
type heldBundle struct {
	node      placement.NodeID
	gpus      []int
	resources resources.Set
	mig       bool
}

// clusterView is the kept snapshot and what it counts as held. Guarded by
// pgManager.viewMu.
type clusterView struct {
	snapshot *placement.Snapshot
	held     map[bundleRef]heldBundle
	// nodes are the rows it was built from, by id: a rebuild compares them to tell which
	// nodes are new or changed.
	nodes map[placement.NodeID]placement.Node
}

// viewBundle is one bundle the rebuild counts: placed, or in a running two-phase commit.
type viewBundle struct {
	ref  bundleRef
	held heldBundle
}

// heldBundlesLocked lists every bundle the GCS placed or is placing, those of removed
// groups whose cancel is not confirmed yet (or whose prepare still runs), and those of
// undone reservations whose cancel is not confirmed yet. Callers hold mu.
func (m *pgManager) heldBundlesLocked() []viewBundle {
	var out []viewBundle
	for _, undone := range m.undos {
		out = append(out, undone...)
	}
	for id, e := range m.groups {
		out = appendHeld(out, id, e)
	}
	for id, e := range m.removed {
		switch {
		case e.cancelling:
			out = appendHeld(out, id, e)
		case e.inFlight != nil:
			// Removed while its prepare runs: the commit's undo releases the plan.
			out = appendInFlight(out, id, e)
		}
	}
	return out
}

// appendHeld adds a group's placed bundles and those of its running two-phase commit.
func appendHeld(out []viewBundle, id string, e *pgEntry) []viewBundle {
	for i, b := range e.info.Bundles {
		if b.NodeId == "" {
			continue
		}
		gpus := make([]int, len(b.GpuIds))
		for j, g := range b.GpuIds {
			gpus[j] = int(g)
		}
		out = append(out, viewBundle{bundleRef{id, i}, heldBundle{node: placement.NodeID(b.NodeId), gpus: gpus,
			resources: e.request.Bundles[i], mig: hasMIGResource(e.request.Bundles[i])}})
	}
	return appendInFlight(out, id, e)
}

// appendInFlight adds the bundles of a group's running two-phase commit.
func appendInFlight(out []viewBundle, id string, e *pgEntry) []viewBundle {
	for i, p := range e.inFlight {
		out = append(out, viewBundle{bundleRef{id, i}, heldBundle{node: p.NodeID, gpus: p.GPUIndices,
			resources: e.request.Bundles[i], mig: p.MIG != nil}})
	}
	return out
}

// hasMIGResource: the bundle asks for a MIG profile.
func hasMIGResource(bundle resources.Set) bool {
	for name := range bundle {
		if mig.IsResource(name) {
			return true
		}
	}
	return false
}

// nodeHeld is what the bundles held on one node take of it.
type nodeHeld struct {
	bundles  int
	reserved resources.Set
	// gpuUsed: GPU index → the share of it held.
	gpuUsed map[int]resources.Amount
}

// heldByNode sums the held bundles by node: the scheduler's view and the autoscaler
// state subtract them from the nodes' totals alike.
func heldByNode(held []viewBundle) map[string]*nodeHeld {
	out := map[string]*nodeHeld{}
	for _, h := range held {
		node := out[string(h.held.node)]
		if node == nil {
			node = &nodeHeld{}
			out[string(h.held.node)] = node
		}
		node.bundles++
		node.reserved = node.reserved.Add(h.held.resources)
		if len(h.held.gpus) == 0 {
			continue
		}
		if node.gpuUsed == nil {
			node.gpuUsed = map[int]resources.Amount{}
		}
		// Each GPU of a bundle holds one whole GPU, or the bundle's fraction of it.
		share := min(h.held.resources[resources.GPU], resources.AmountScale)
		for _, gpu := range h.held.gpus {
			node.gpuUsed[gpu] += share
		}
	}
	return out
}

// buildView makes the scheduler's view: alive nodes, their totals and GPUs, and what is
// available once every held bundle is subtracted.
func buildView(nodes []*pb.NodeInfo, held []viewBundle) (*clusterView, error) {
	view := &clusterView{held: make(map[bundleRef]heldBundle, len(held)), nodes: make(map[placement.NodeID]placement.Node, len(nodes))}
	for _, h := range held {
		view.held[h.ref] = h.held
	}
	byNode := heldByNode(held)
	rows := make([]placement.Node, 0, len(nodes))
	for _, n := range nodes {
		total, err := resources.SetFromFloat(n.ResourcesTotal)
		if err != nil {
			return nil, fmt.Errorf("node %s resources_total: %w", n.NodeId, err)
		}
		onNode := byNode[n.NodeId]
		if onNode == nil {
			onNode = &nodeHeld{}
		}
		available := total.Clone()
		for name, amount := range onNode.reserved {
			available[name] = max(available[name]-amount, 0)
		}
		labels := maps.Clone(n.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[nodelabel.NodeID] = n.NodeId
		row := placement.Node{ID: placement.NodeID(n.NodeId), Total: total, Available: available,
			Labels: labels, Alive: true, Draining: n.IsDraining,
			GPUs: pbplacement.GPUs(n.Gpus, n.ResourcesTotal[resources.GPU], onNode.gpuUsed), NVLinkDomain: n.NvlinkDomain, MIGGPUs: pbplacement.MIGGPUs(n.MigGpus)}
		rows = append(rows, row)
		view.nodes[row.ID] = row
	}
	snapshot, err := placement.NewSnapshot(rows)
	if err != nil {
		return nil, err
	}
	view.snapshot = snapshot
	return view, nil
}

// changedNodes returns the nodes of next that prev lacks or that differ from prev's in
// what could let more fit: total, labels, draining, MIG GPUs.
func changedNodes(prev, next *clusterView) []placement.NodeID {
	var out []placement.NodeID
	for id, n := range next.nodes {
		old, ok := prev.nodes[id]
		if !ok || !old.Total.Equal(n.Total) || !maps.Equal(old.Labels, n.Labels) || old.Draining != n.Draining ||
			len(old.MIGGPUs) != len(n.MIGGPUs) || len(n.MIGGPUs) > 0 {
			out = append(out, id)
		}
	}
	return out
}

// reserve counts a plan's bundles as held.
func (v *clusterView) reserve(group string, bundles []resources.Set, plan placement.Plan) error {
	if err := v.snapshot.Reserve(bundles, plan); err != nil {
		return err
	}
	for _, p := range plan.Placements {
		v.held[bundleRef{group, p.BundleIndex}] = heldBundle{node: p.NodeID, gpus: p.GPUIndices, resources: bundles[p.BundleIndex], mig: p.MIG != nil}
	}
	return nil
}

// release gives a held bundle back to its node and reports the node; a bundle the view
// does not hold is a no-op (releases are idempotent). ok is false when the view cannot
// release it in place (a MIG bundle, whose slices the raylet's next report describes):
// the caller rebuilds the view.
func (v *clusterView) release(ref bundleRef) (node placement.NodeID, released, ok bool) {
	h, held := v.held[ref]
	if !held {
		return "", false, true
	}
	delete(v.held, ref)
	if h.mig {
		return h.node, true, false
	}
	plan := placement.Plan{Placements: []placement.BundlePlacement{{BundleIndex: 0, NodeID: h.node, GPUIndices: h.gpus}}}
	if err := v.snapshot.Release([]resources.Set{h.resources}, plan); err != nil {
		return h.node, true, false
	}
	return h.node, true, true
}
