package placement

// Plan is a successful decision: where each bundle goes. The GCS prepares and commits
// exactly these reservations; nothing is reserved by Schedule itself.
type Plan struct {
	// Placements has one entry per bundle that was to be placed (every bundle not in
	// Request.PlacedBundles), ordered by BundleIndex.
	Placements []BundlePlacement
}

// BundlePlacement is where one bundle goes. It is a struct, not a bare node id, so the
// topology-aware scheduler can add the GPU indices or MIG slot it picks on the node.
type BundlePlacement struct {
	BundleIndex int
	NodeID      NodeID
}

// NodeOf returns the node of a bundle, if the plan places it.
func (p Plan) NodeOf(bundleIndex int) (NodeID, bool) {
	for _, placement := range p.Placements {
		if placement.BundleIndex == bundleIndex {
			return placement.NodeID, true
		}
	}
	return "", false
}
