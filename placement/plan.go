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
	//   - a MIG profile ({"nvidia.com/mig-1g.10gb": 1}): the MIG instance's parent GPU,
	//     MIG.GPU (with the bundle's whole GPUs, if it asks for both);
	//   - no GPUs, or a node without Node.GPUs: empty (the raylet picks the lowest free
	//     GPUs, as before topology).
	// Snapshot.Reserve and Release take and give back exactly these GPUs.
	GPUIndices []int
	// GPUUUIDs are the UUIDs of GPUIndices, in the same order (informational: Reserve
	// and Release read only the indices); "" for a MIG parent GPU, whose MIG device UUID
	// the raylet reports once the instance is carved.
	GPUUUIDs []string
	// MIG is, for a bundle asking for a MIG profile, where its instance goes and what
	// the raylet does to get it: reuse the idle instance at (MIG.GPU, MIG.Start), or
	// destroy the idle instances in MIG.Destroy and carve one there. Nil otherwise.
	// Snapshot.Reserve applies it to the GPU's slot map, Release returns the instance
	// to the idle pool.
	MIG *MIGStep
}

// sortGPUsByIndex sorts indices ascending, keeping uuids parallel.
func sortGPUsByIndex(indices []int, uuids []string) {
	for i := 1; i < len(indices); i++ {
		for j := i; j > 0 && indices[j] < indices[j-1]; j-- {
			indices[j], indices[j-1] = indices[j-1], indices[j]
			uuids[j], uuids[j-1] = uuids[j-1], uuids[j]
		}
	}
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
