package placement

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/raygo-dev/raygo/internal/nodelabel"
)

// The fabric cost model: for a placement, the estimated all-reduce bus bandwidth of the
// group, in GB/s per direction per GPU, the figure NCCL's all_reduce_perf reports as
// "busbw". A ring all-reduce moves every byte over every hop of the ring, so its bus
// bandwidth is that of the slowest hop. The model builds the ring NCCL would (GPUs of an
// island together, islands of a node together, nodes of a scalable unit together) and
// takes the slowest of the hops it must have:
//
//   - inside an NVLink island: the island's NVLink (bridge pair, NVSwitch, or a
//     multi-node NVLink domain);
//   - between islands of one node (or GPUs without NVLink peers): PCIe;
//   - between nodes (or domains): one InfiniBand hop per GPU through its own NIC. The
//     hop stays under one leaf switch only when both ends are in the same scalable unit
//     and on the same rail; NCCL runs one ring per rail, so the nodes' GPUs are on the
//     same rails exactly when every node holds the group's GPUs on the same set of
//     rails ("rail-aligned"). A hop between scalable units crosses the spine
//     (SpineFactor); a rail-misaligned hop crosses rails, which rail-optimized fabrics
//     join only at the spine (CrossRailFactor). Both at once is still one spine hop:
//     the smaller factor applies, not their product.
//
// It is an estimate for comparing placements, not a performance prediction: it ignores
// message size, latency, NVLS/SHARP in-network reduction, and other jobs' traffic.

// Link bandwidths of the default model, GB/s per direction per GPU, with their sources.
const (
	// NVSwitchGBps: H100 SXM5, NVLink 4, 18 links × 25 GB/s per direction = 450 GB/s per
	// direction (900 GB/s bidirectional), all-to-all through NVSwitch (NVIDIA H100
	// Tensor Core GPU datasheet; DGX H100 user guide).
	NVSwitchGBps = 450.0
	// NVLinkBridgeGBps: a 2-GPU NVLink bridge, H100 NVL / H100 PCIe: 600 GB/s
	// bidirectional between the pair = 300 GB/s per direction (NVIDIA H100 NVL
	// datasheet). A node-local island of 2 GPUs is costed as a bridge pair.
	NVLinkBridgeGBps = 300.0
	// NVLinkDomainGBps: GB200 NVL72, NVLink 5, 1.8 TB/s bidirectional per GPU = 900 GB/s
	// per direction, to all 72 GPUs of the rack through the NVLink switch trays (NVIDIA
	// GB200 NVL72 specifications).
	NVLinkDomainGBps = 900.0
	// PCIeGBps: PCIe Gen5 x16 is 64 GB/s per direction raw (32 GT/s × 16 lanes,
	// 128b/130b; PCI-SIG). Peer traffic between GPUs without NVLink crosses PCIe switches
	// and usually the CPU root complex; NCCL reaches about half the link rate there, so
	// 32.
	PCIeGBps = 32.0
	// RailGBps: one 400 Gb/s NIC per GPU (ConnectX-7, InfiniBand NDR) = 400/8 = 50 GB/s
	// per direction, on the GPU's rail (DGX H100: 8 GPUs, 8 NICs, GPU i ↔ NIC i).
	RailGBps = 50.0
	// SpineFactor is the share of RailGBps a hop between scalable units keeps. An
	// assumption, not a datasheet figure: a DGX SuperPOD's compute fabric is non-blocking
	// (1.0), but fleets joined above the SU level are commonly 2:1 oversubscribed there,
	// and the spine is shared by every job crossing it; 0.5 models 2:1.
	SpineFactor = 0.5
	// CrossRailFactor is the share of RailGBps a rail-misaligned hop keeps: the traffic
	// leaves its rail leaf for the spine (or detours over NVLink to a GPU on the peer's
	// rail, NCCL's PXN, competing with that GPU's own traffic). Modeled like a spine hop.
	CrossRailFactor = 0.5
)

// FabricModel holds the cost model's bandwidths, GB/s per direction per GPU, and the
// factors (0..1] of RailGBps kept by spine and rail-crossing hops.
type FabricModel struct {
	NVSwitchGBps     float64 // node-local NVLink island of 3+ GPUs
	NVLinkBridgeGBps float64 // node-local NVLink island of 2 GPUs
	NVLinkDomainGBps float64 // multi-node NVLink domain
	PCIeGBps         float64 // between islands of one node
	RailGBps         float64 // between nodes of one scalable unit, on one rail
	SpineFactor      float64 // between scalable units
	CrossRailFactor  float64 // between nodes on different rails
}

// DefaultFabricModel is an H100-generation fleet: the constants above.
func DefaultFabricModel() FabricModel {
	return FabricModel{
		NVSwitchGBps:     NVSwitchGBps,
		NVLinkBridgeGBps: NVLinkBridgeGBps,
		NVLinkDomainGBps: NVLinkDomainGBps,
		PCIeGBps:         PCIeGBps,
		RailGBps:         RailGBps,
		SpineFactor:      SpineFactor,
		CrossRailFactor:  CrossRailFactor,
	}
}

// Validate checks that every bandwidth is positive and every factor in (0, 1].
func (m FabricModel) Validate() error {
	for _, field := range []struct {
		name  string
		value float64
	}{
		{"nvswitch_gbps", m.NVSwitchGBps}, {"nvlink_bridge_gbps", m.NVLinkBridgeGBps},
		{"nvlink_domain_gbps", m.NVLinkDomainGBps}, {"pcie_gbps", m.PCIeGBps}, {"rail_gbps", m.RailGBps},
	} {
		if !(field.value > 0) {
			return fmt.Errorf("placement: fabric model %s: must be > 0, got %s", field.name, formatFloat(field.value))
		}
	}
	for _, field := range []struct {
		name  string
		value float64
	}{{"spine_factor", m.SpineFactor}, {"cross_rail_factor", m.CrossRailFactor}} {
		if !(field.value > 0 && field.value <= 1) {
			return fmt.Errorf("placement: fabric model %s: must be in (0, 1], got %s", field.name, formatFloat(field.value))
		}
	}
	return nil
}

// LinkClass names the kind of hop that limits an all-reduce.
type LinkClass string

const (
	LinkNone      LinkClass = ""           // fewer than 2 GPUs: no collective
	LinkNVLink    LinkClass = "nvlink"     // inside one NVLink island
	LinkPCIe      LinkClass = "pcie"       // between islands of one node
	LinkRail      LinkClass = "rail"       // between nodes, one leaf hop on a rail
	LinkCrossRail LinkClass = "cross_rail" // between nodes on different rails
	LinkSpine     LinkClass = "spine"      // between scalable units
)

// AllReduceEstimate is the model's answer for one group.
type AllReduceEstimate struct {
	// GPUs is how many distinct GPUs the placements name.
	GPUs int
	// BusGBps is the estimated all-reduce bus bandwidth, GB/s per direction per GPU;
	// 0 with fewer than 2 GPUs.
	BusGBps float64
	// Bottleneck is the kind of hop that sets BusGBps.
	Bottleneck LinkClass
}

func (e AllReduceEstimate) String() string {
	return fmt.Sprintf("%d GPUs, %s GB/s (%s)", e.GPUs, strconv.FormatFloat(e.BusGBps, 'f', -1, 64), e.Bottleneck)
}

// EstimateAllReduce estimates the all-reduce bus bandwidth of the GPUs the placements
// name (BundlePlacement.GPUIndices), with the topology (islands, rails, scalable units)
// of the snapshot's nodes. GPUs shared by fractional bundles count once; placements
// without GPU indices (no GPUs, or a node that does not list them) add none. An unknown
// node or GPU index is an error wrapping ErrUnknownNode or ErrInvalidGPUAssignment.
func EstimateAllReduce(snapshot *Snapshot, placements []BundlePlacement, model FabricModel) (AllReduceEstimate, error) {
	if err := model.Validate(); err != nil {
		return AllReduceEstimate{}, err
	}
	type groupGPU struct{ node, position int }
	var gpus []groupGPU
	seen := make(map[groupGPU]bool)
	for _, placement := range placements {
		node, ok := snapshot.indexByID[placement.NodeID]
		if !ok {
			return AllReduceEstimate{}, fmt.Errorf("%w: bundle %d is placed on node %s", ErrUnknownNode, placement.BundleIndex, placement.NodeID)
		}
		nodeGPUs, _ := snapshot.nodeGPUs(node)
		for _, index := range placement.GPUIndices {
			position := gpuPosition(nodeGPUs, index)
			if position < 0 {
				return AllReduceEstimate{}, fmt.Errorf("%w: bundle %d: node %s has no GPU %d", ErrInvalidGPUAssignment, placement.BundleIndex, placement.NodeID, index)
			}
			if gpu := (groupGPU{node, position}); !seen[gpu] {
				seen[gpu] = true
				gpus = append(gpus, gpu)
			}
		}
	}
	estimate := AllReduceEstimate{GPUs: len(gpus)}
	if len(gpus) < 2 {
		return estimate, nil
	}
	hop := func(bandwidth float64, class LinkClass) {
		if estimate.Bottleneck == LinkNone || bandwidth <= estimate.BusGBps {
			estimate.BusGBps, estimate.Bottleneck = bandwidth, class
		}
	}

	// Inside islands: the NVLink of every island holding two or more of the GPUs.
	perIsland := make(map[int32]int)
	for _, gpu := range gpus {
		perIsland[snapshot.gpus[snapshot.nodes[gpu.node].firstGPU+gpu.position].island]++
	}
	for island, count := range perIsland {
		if count >= 2 {
			hop(model.nvlinkGBps(snapshot.islands[island].kind), LinkNVLink)
		}
	}
	if len(perIsland) == 1 {
		return estimate, nil
	}

	// Network units: a multi-node NVLink domain, or a node. Islands of one node meet over
	// PCIe; units meet over the network.
	type unit struct {
		islands      map[int32]bool
		rails        []int32
		scalableUnit string
	}
	units := make(map[string]*unit)
	var unitOrder []string
	for _, gpu := range gpus {
		record := &snapshot.nodes[gpu.node]
		info := snapshot.gpus[record.firstGPU+gpu.position]
		key := "node/" + string(record.id)
		if snapshot.islands[info.island].kind == islandDomain {
			key = "domain/" + snapshot.islands[info.island].domain
		}
		u := units[key]
		if u == nil {
			u = &unit{islands: make(map[int32]bool), scalableUnit: record.labels[nodelabel.ScalableUnit]}
			units[key] = u
			unitOrder = append(unitOrder, key)
		}
		u.islands[info.island] = true
		u.rails = append(u.rails, info.rail)
	}
	for _, key := range unitOrder {
		if len(units[key].islands) > 1 {
			hop(model.PCIeGBps, LinkPCIe)
		}
	}
	if len(units) == 1 {
		return estimate, nil
	}
	first := units[unitOrder[0]]
	sort.Slice(first.rails, func(i, j int) bool { return first.rails[i] < first.rails[j] })
	sameScalableUnit, aligned := first.scalableUnit != "", !containsRail(first.rails, -1)
	for _, key := range unitOrder[1:] {
		u := units[key]
		sort.Slice(u.rails, func(i, j int) bool { return u.rails[i] < u.rails[j] })
		sameScalableUnit = sameScalableUnit && u.scalableUnit == first.scalableUnit
		aligned = aligned && equalRails(u.rails, first.rails)
	}
	factor, class := 1.0, LinkRail
	if !sameScalableUnit && model.SpineFactor < factor {
		factor, class = model.SpineFactor, LinkSpine
	}
	if !aligned && model.CrossRailFactor < factor {
		factor, class = model.CrossRailFactor, LinkCrossRail
	}
	hop(model.RailGBps*factor, class)
	return estimate, nil
}

// nvlinkGBps is the NVLink bandwidth of an island of the kind.
func (m FabricModel) nvlinkGBps(kind islandKind) float64 {
	switch kind {
	case islandPair:
		return m.NVLinkBridgeGBps
	case islandDomain:
		return m.NVLinkDomainGBps
	default:
		return m.NVSwitchGBps
	}
}

func containsRail(rails []int32, rail int32) bool {
	for _, r := range rails {
		if r == rail {
			return true
		}
	}
	return false
}

func equalRails(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func formatFloat(value float64) string { return strconv.FormatFloat(value, 'g', -1, 64) }
