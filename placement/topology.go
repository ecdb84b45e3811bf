package placement

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Topology is whether a placement group asks for raygo's GPU topology or for Ray's
// plain, node-level meaning of its strategy.
type Topology string

const (
	// TopologyIsland (the default): raygo's GPU topology. A STRICT_PACK group with whole
	// GPUs keeps every whole GPU inside one NVLink island, on one node or across the
	// nodes of one multi-node NVLink domain; PACK fills islands before spilling; SPREAD
	// and STRICT_SPREAD prefer the fewest scalable units and the same rails on every
	// node (spread.go).
	TopologyIsland Topology = ""
	// TopologyNode: Ray's plain meaning, by nodes alone. STRICT_PACK puts every bundle
	// on one node, whatever NVLink joins its GPUs; PACK does not fill NVLink islands
	// first; SPREAD and STRICT_SPREAD prefer no scalable units or rails. For a group
	// that gains nothing from the fabric (replicas that never all-reduce): with a
	// workload (Request.Workload), it goes where fragmentation grows least instead of
	// where the fabric is best.
	TopologyNode Topology = "node"
)

// ParseTopology converts the wire value ("" or "node").
func ParseTopology(value string) (Topology, error) {
	switch topology := Topology(value); topology {
	case TopologyIsland, TopologyNode:
		return topology, nil
	default:
		return "", fielderr.New(ErrUnknownTopology, "topology", `must be "" (GPU topology) or "node" (nodes alone), got %s`, strconv.Quote(value))
	}
}

// MaxGPUsPerNode is the most GPUs a node may list (the largest servers have 16).
const MaxGPUsPerNode = 64

// GPU is one whole GPU of a node, as the raylet reports it (NodeInfo.gpus) with what the
// GCS has reserved on it.
type GPU struct {
	// Index is the NVML index: what CUDA_VISIBLE_DEVICES names with
	// CUDA_DEVICE_ORDER=PCI_BUS_ID. Unique on the node, >= 0.
	Index int
	// UUID is the NVML UUID ("GPU-…"), copied into BundlePlacement.GPUUUIDs.
	UUID string
	// NVLinkIsland is the node-local NVLink island: GPUs joined by NVLink or NVSwitch
	// share it. -1: the GPU has no NVLink peer (an island of its own). Ignored for the
	// node's GPUs with an island >= 0 when Node.NVLinkDomain is set: those belong to the
	// domain's one island.
	NVLinkIsland int
	// Rail is the InfiniBand rail of the GPU's closest NIC (GPU i ↔ NIC i ↔ rail i on
	// rail-optimized nodes), >= 0; -1 when unknown.
	Rail int
	// Available is how much of the GPU no bundle holds, in resources.Amount units: resources.AmountScale
	// (wholly free) down to 0. A whole-GPU bundle needs it at resources.AmountScale; fractional
	// bundles share a GPU while their amounts fit. The GCS computes it from the GPU
	// indices of the bundles it has placed (BundlePlacement.GPUIndices). The zero value
	// means "in use": a caller that forgets it gets no GPUs, never a double booking.
	Available resources.Amount
}

// islandKind is what joins an island's GPUs, for the fabric cost model.
type islandKind uint8

const (
	islandSingle islandKind = iota + 1 // one GPU without NVLink peers
	islandPair                         // two GPUs on one node: an NVLink bridge
	islandSwitch                       // three or more GPUs on one node: NVSwitch
	islandDomain                       // a multi-node NVLink domain (NVL72 rack)
)

// snapshotGPU is the static part of one GPU in the snapshot.
type snapshotGPU struct {
	index        int
	uuid         string
	nvlinkIsland int   // as reported (Node.GPUs), for Snapshot.Nodes
	island       int32 // index in Snapshot.islands
	islandSlot   int32 // index of island in its node's snapshotNode.islands
	rail         int32 // -1: unknown
	railSlot     int32 // index of rail in Snapshot.rails, -1: unknown
}

// snapshotIsland is one NVLink island: GPUs of one node, or of every node of one
// multi-node domain.
type snapshotIsland struct {
	kind   islandKind
	size   int    // GPUs in the island
	domain string // for islandDomain
	nodes  []int  // nodes holding its GPUs, in id order
}

// buildTopology fills the snapshot's GPU, island and scalable-unit tables from the
// validated input nodes (order maps snapshot rows to input indices).
func (s *Snapshot) buildTopology(nodes []Node, order []int) {
	domainIsland := map[string]int32{}
	scalableUnitID := map[string]int32{}
	gpuCount := 0
	for i := range nodes {
		gpuCount += len(nodes[i].GPUs)
	}
	s.gpus = make([]snapshotGPU, 0, gpuCount)
	s.gpuFree = make([]resources.Amount, 0, gpuCount)
	s.islands = make([]snapshotIsland, 0, len(nodes))
	for row, inputIndex := range order {
		node := &nodes[inputIndex]
		record := &s.nodes[row]
		unit := record.labels[nodelabel.ScalableUnit]
		id, ok := scalableUnitID[unit]
		if !ok {
			id = int32(len(s.scalableUnits))
			scalableUnitID[unit] = id
			s.scalableUnits = append(s.scalableUnits, unit)
		}
		record.scalableUnit = id
		record.nvlinkDomain = node.NVLinkDomain
		record.domainIsland = -1
		if len(node.GPUs) == 0 {
			continue
		}
		gpus := make([]GPU, len(node.GPUs))
		copy(gpus, node.GPUs)
		sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
		record.firstGPU, record.gpuCount = len(s.gpus), len(gpus)
		localIsland := map[int]int32{}
		for _, gpu := range gpus {
			var island int32
			switch {
			case gpu.NVLinkIsland < 0:
				island = s.newIsland(islandSingle, "")
			case node.NVLinkDomain != "":
				id, ok := domainIsland[node.NVLinkDomain]
				if !ok {
					id = s.newIsland(islandDomain, node.NVLinkDomain)
					domainIsland[node.NVLinkDomain] = id
				}
				island = id
				record.domainIsland = id
			default:
				id, ok := localIsland[gpu.NVLinkIsland]
				if !ok {
					id = s.newIsland(islandSwitch, "")
					localIsland[gpu.NVLinkIsland] = id
				}
				island = id
			}
			islandRecord := &s.islands[island]
			islandRecord.size++
			if len(islandRecord.nodes) == 0 || islandRecord.nodes[len(islandRecord.nodes)-1] != row {
				islandRecord.nodes = append(islandRecord.nodes, row)
			}
			slot := int32(0)
			for slot < int32(len(record.islands)) && record.islands[slot] != island {
				slot++
			}
			if slot == int32(len(record.islands)) {
				record.islands = append(record.islands, island)
				record.islandSizes = append(record.islandSizes, 0)
			}
			record.islandSizes[slot]++
			s.gpus = append(s.gpus, snapshotGPU{index: gpu.Index, uuid: gpu.UUID, nvlinkIsland: gpu.NVLinkIsland, island: island, islandSlot: slot, rail: int32(gpu.Rail)})
			s.gpuFree = append(s.gpuFree, gpu.Available)
		}
	}
	s.numberRails()
	s.wholeFree = make([]uint64, len(s.nodes))
	for node := range s.nodes {
		record := &s.nodes[node]
		gpus, free := s.nodeGPUs(node)
		record.islandMasks = make([]uint64, len(record.islands))
		for g, gpu := range gpus {
			record.islandMasks[gpu.islandSlot] |= 1 << g
			record.allGPUs |= 1 << g
		}
		s.wholeFree[node] = wholeFreeMask(free)
	}
	for i := range s.islands {
		if island := &s.islands[i]; island.kind == islandSwitch && island.size == 2 {
			island.kind = islandPair
		}
	}
	for node := range s.nodes {
		for _, island := range s.nodes[node].islands {
			if s.islands[island].kind != islandDomain {
				s.nodes[node].largestIsland = max(s.nodes[node].largestIsland, s.islands[island].size)
			}
		}
	}
	for _, id := range domainIsland {
		s.domainIslands = append(s.domainIslands, id)
	}
	// Domains in the order of their first node, so decisions visit them in id order.
	sort.Slice(s.domainIslands, func(i, j int) bool {
		return s.islands[s.domainIslands[i]].nodes[0] < s.islands[s.domainIslands[j]].nodes[0]
	})
}

// numberRails fills Snapshot.rails and every GPU's railSlot.
func (s *Snapshot) numberRails() {
	slotOf := map[int32]int32{}
	for _, gpu := range s.gpus {
		if gpu.rail >= 0 {
			slotOf[gpu.rail] = 0
		}
	}
	for rail := range slotOf {
		s.rails = append(s.rails, rail)
	}
	sort.Slice(s.rails, func(i, j int) bool { return s.rails[i] < s.rails[j] })
	for slot, rail := range s.rails {
		slotOf[rail] = int32(slot)
	}
	for g := range s.gpus {
		s.gpus[g].railSlot = -1
		if rail := s.gpus[g].rail; rail >= 0 {
			s.gpus[g].railSlot = slotOf[rail]
		}
	}
}

func (s *Snapshot) newIsland(kind islandKind, domain string) int32 {
	s.islands = append(s.islands, snapshotIsland{kind: kind, domain: domain})
	return int32(len(s.islands) - 1)
}

// hasTopology reports whether any node lists its GPUs.
func (s *Snapshot) hasTopology() bool { return len(s.gpus) > 0 }

// nodeGPUs returns node's GPUs (static part) and its row of gpuFree.
func (s *Snapshot) nodeGPUs(node int) ([]snapshotGPU, []resources.Amount) {
	record := &s.nodes[node]
	end := record.firstGPU + record.gpuCount
	return s.gpus[record.firstGPU:end], s.gpuFree[record.firstGPU:end]
}

// domainIslandOf returns the multi-node NVLink domain island of node, or -1.
func (s *Snapshot) domainIslandOf(node int) int32 { return s.nodes[node].domainIsland }

// checkGPUs validates node.GPUs: unique indices >= 0, islands >= -1, rails in
// >= -1, 0 <= Available <= resources.AmountScale, and the GPU resource total equal to the
// number of GPUs listed (the raylet offers every listed GPU, and only those).
func checkGPUs(field func() string, node Node) error {
	if len(node.GPUs) == 0 {
		return nil
	}
	if len(node.GPUs) > MaxGPUsPerNode {
		return fielderr.New(ErrInvalidSnapshot, field()+".gpus", "at most %d GPUs per node, got %d", MaxGPUsPerNode, len(node.GPUs))
	}
	if want := resources.Amount(len(node.GPUs)) * resources.AmountScale; node.Total["GPU"] != want {
		return fielderr.New(ErrInvalidSnapshot, field()+".gpus", "%d GPUs listed, but total GPU is %s", len(node.GPUs), node.Total["GPU"])
	}
	seen := make(map[int]int, len(node.GPUs))
	for i, gpu := range node.GPUs {
		// Named only on failure: a snapshot of thousands of nodes is checked whole.
		gpuField := func() string { return fmt.Sprintf("%s.gpus[%d]", field(), i) }
		switch {
		case gpu.Index < 0:
			return fielderr.New(ErrInvalidSnapshot, gpuField()+".index", "must be >= 0, got %d", gpu.Index)
		case gpu.NVLinkIsland < -1:
			return fielderr.New(ErrInvalidSnapshot, gpuField()+".nvlink_island", "must be -1 (no NVLink peer) or >= 0, got %d", gpu.NVLinkIsland)
		case gpu.Rail < -1:
			return fielderr.New(ErrInvalidSnapshot, gpuField()+".rail", "must be -1 (unknown) or >= 0, got %d", gpu.Rail)
		case gpu.Available < 0 || gpu.Available > resources.AmountScale:
			return fielderr.New(ErrInvalidSnapshot, gpuField()+".available", "must be 0..1, got %s", gpu.Available)
		}
		if other, duplicate := seen[gpu.Index]; duplicate {
			return fielderr.New(ErrInvalidSnapshot, gpuField()+".index", "duplicate GPU index %d (also gpus[%d])", gpu.Index, other)
		}
		seen[gpu.Index] = i
	}
	return nil
}

// nodeGPUsCopy returns node's GPUs as the caller's type, with what is free now.
func (s *Snapshot) nodeGPUsCopy(node int) []GPU {
	gpus, free := s.nodeGPUs(node)
	if len(gpus) == 0 {
		return nil
	}
	out := make([]GPU, len(gpus))
	for i, gpu := range gpus {
		out[i] = GPU{Index: gpu.index, UUID: gpu.uuid, NVLinkIsland: gpu.nvlinkIsland, Rail: int(gpu.rail), Available: free[i]}
	}
	return out
}
