package resources

// Standard resource names, as Ray's.
const (
	CPU    = "CPU"
	GPU    = "GPU"
	Memory = "memory"
	// ObjectStoreMemory is Ray's object store size in bytes. raygo has no object store;
	// the resource exists so that bundles asking for it (as Ray Train's and Tune's default
	// bundles may) are placed as in Ray.
	ObjectStoreMemory = "object_store_memory"
	// NodeIPPrefix + the node's IP is 1 on every node, and HeadNode is 1 on the head
	// node: Ray's implicit resources, with which Ray Train, Tune and vLLM pin a bundle to
	// a node (e.g. {"node:10.0.0.5": 0.001}).
	NodeIPPrefix = "node:"
	HeadNode     = "node:__internal_head__"
)
