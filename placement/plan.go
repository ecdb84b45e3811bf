package placement

// Plan is a successful decision: where each bundle goes. The GCS prepares and commits
// exactly these reservations; nothing is reserved by Schedule itself.
type Plan struct {
	// Placements has one entry per bundle that was to be placed (every bundle not in
	// Request.PlacedBundles), ordered by BundleIndex.
	Placements []BundlePlacement
}

// BundlePlacement is where one bundle goes: the node and, on nodes that list their
// GPUs (Node.GPUs), which GPUs.
type BundlePlacement struct {
	BundleIndex int
	NodeID      NodeID
	// GPUIndices are the NVML indices of the bundle's GPUs, ascending; the bundle's
	// CUDA_VISIBLE_DEVICES is them joined with commas (with CUDA_DEVICE_ORDER=PCI_BUS_ID).
	//   - whole GPUs ({GPU: n}, n >= 1): n distinct GPUs, held by this bundle alone;
	//   - a fraction ({GPU: 0.25}): one GPU, shared with other fractional bundles while
	//     their amounts add up to at most 1;
	//   - no GPUs, or a node without Node.GPUs: empty (the raylet picks the lowest free
	//     GPUs, as before topology).
	// Snapshot.Reserve and Release take and give back exactly these GPUs.
	GPUIndices []int
	// GPUUUIDs are the UUIDs of GPUIndices, in the same order (informational: Reserve
	// and Release read only the indices).
	GPUUUIDs []string
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
