package placementsim

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Label keys the generated nodes carry besides nodelabel.NodeID.
const (
	AcceleratorTypeLabel = "ray.io/accelerator-type"
	ZoneLabel            = "zone"
)

// gib is one GiB in bytes, the unit of Ray's "memory" resource.
const gib = 1 << 30

// FleetConfig describes a homogeneous GPU fleet.
type FleetConfig struct {
	// Nodes is the number of nodes.
	Nodes int
	// Model is the machine: its GPUs with NVLink islands and rails. ModelCountOnly
	// describes GPUs by count alone (GPUsPerNode); otherwise GPUsPerNode is the model's.
	Model NodeModel
	// NodesPerScalableUnit labels nodes with nodelabel.ScalableUnit "su-<n>", this
	// many nodes per unit in node order; 0 leaves the label off.
	NodesPerScalableUnit int
	// GPUsPerNode, CPUsPerNode: whole units per node.
	GPUsPerNode int
	CPUsPerNode int
	// MemoryGiBPerNode is the "memory" resource in GiB (Ray counts it in bytes).
	MemoryGiBPerNode int
	// PartlyUsedFraction is the share of nodes (0..1) that start with work outside any
	// placement group: 1 to GPUsPerNode-1 GPUs and a matching share of CPU and memory.
	PartlyUsedFraction float64
	// Zones is how many zone label values to spread nodes over.
	Zones int
	// Seed makes the fleet reproducible.
	Seed uint64
}

// DefaultFleetConfig is the benchmark fleet: 1,250 DGX H100 nodes (10,000 GPUs, their
// NVLink islands and rails listed) in scalable units of 32, 128 CPUs and 2 TiB of
// memory each, a quarter of them partly used.
func DefaultFleetConfig() FleetConfig {
	return FleetConfig{
		Nodes:                1250,
		Model:                ModelDGXH100,
		NodesPerScalableUnit: 32,
		GPUsPerNode:          8,
		CPUsPerNode:          128,
		MemoryGiBPerNode:     2048,
		PartlyUsedFraction:   0.25,
		Zones:                4,
		Seed:                 1,
	}
}

// NewFleet generates the nodes of a fleet: Ray-style 56-hex-digit ids, labels
// (node id, accelerator type, zone, scalable unit), the model's GPUs (the lowest ones in
// use on partly used nodes), alive and not draining.
func NewFleet(config FleetConfig) []placement.Node {
	rng := rand.New(rand.NewPCG(config.Seed, 0x5eed))
	gpusPerNode := config.GPUsPerNode
	if config.Model != ModelCountOnly {
		gpusPerNode = config.Model.GPUCount()
	}
	nodes := make([]placement.Node, config.Nodes)
	for i := range nodes {
		total := resources.Set{
			"GPU":    resources.Amount(gpusPerNode) * resources.AmountScale,
			"CPU":    resources.Amount(config.CPUsPerNode) * resources.AmountScale,
			"memory": resources.Amount(config.MemoryGiBPerNode) * gib * resources.AmountScale,
		}
		available := total.Clone()
		usedGPUs := 0
		if gpusPerNode > 1 && rng.Float64() < config.PartlyUsedFraction {
			usedGPUs = 1 + rng.IntN(gpusPerNode-1)
			for name, amount := range total {
				available[name] = amount - amount*resources.Amount(usedGPUs)/resources.Amount(gpusPerNode)
			}
		}
		node := newNode(rng, total, available, fmt.Sprintf("zone-%d", i%max(config.Zones, 1)), config.Model.AcceleratorType())
		if config.NodesPerScalableUnit > 0 {
			node.Labels[nodelabel.ScalableUnit] = fmt.Sprintf("su-%d", i/config.NodesPerScalableUnit)
		}
		nodes[i] = withModel(node, config.Model, "", usedGPUs)
	}
	return nodes
}

// NewFleetSnapshot is NewFleet as a snapshot.
func NewFleetSnapshot(config FleetConfig) (*placement.Snapshot, error) {
	return placement.NewSnapshot(NewFleet(config))
}

func newNode(rng *rand.Rand, total, available resources.Set, zone, accelerator string) placement.Node {
	id := randomNodeID(rng)
	labels := map[string]string{nodelabel.NodeID: string(id), ZoneLabel: zone}
	if accelerator != "" {
		labels[AcceleratorTypeLabel] = accelerator
	}
	return placement.Node{ID: id, Total: total, Available: available, Labels: labels, Alive: true}
}

// randomNodeID returns 28 random bytes in hex, the shape of Ray's node ids.
func randomNodeID(rng *rand.Rand) placement.NodeID {
	var raw [28]byte
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return placement.NodeID(hex.EncodeToString(raw[:]))
}

// RandomSmallCluster generates 2-12 heterogeneous nodes for property tests: without
// GPUs, with 4 or 8 GPUs known by count only, or a simulated model with its topology
// (DGX H100, PCIe NVLink pairs, GB200 trays of two NVL72 domains), 8-64 CPUs, custom
// resource "ssd" on some, over zones a-c and scalable units su-0 and su-1, every node
// idle.
func RandomSmallCluster(rng *rand.Rand) []placement.Node {
	nodes := make([]placement.Node, 2+rng.IntN(11))
	for i := range nodes {
		nodes[i] = RandomNode(rng)
	}
	return nodes
}

// RandomNode generates one idle node as RandomSmallCluster does.
func RandomNode(rng *rand.Rand) placement.Node {
	model := ModelCountOnly
	gpus := []int{0, 4, 8}[rng.IntN(3)]
	if gpus > 0 && rng.IntN(3) > 0 {
		model = []NodeModel{ModelDGXH100, ModelPCIe8GPUNVLinkPairs, ModelGB200NVL72}[rng.IntN(3)]
		gpus = model.GPUCount()
	}
	total := resources.Set{
		"CPU":    resources.Amount(8<<rng.IntN(4)) * resources.AmountScale,
		"memory": resources.Amount(64<<rng.IntN(3)) * gib * resources.AmountScale,
	}
	accelerator := ""
	if gpus > 0 {
		total["GPU"] = resources.Amount(gpus) * resources.AmountScale
		accelerator = []string{"A100", "H100"}[rng.IntN(2)]
	}
	if rng.IntN(3) == 0 {
		total["ssd"] = resources.Amount(1+rng.IntN(4)) * resources.AmountScale
	}
	node := newNode(rng, total, total.Clone(), "zone-"+string(rune('a'+rng.IntN(3))), accelerator)
	node.Labels[nodelabel.ScalableUnit] = fmt.Sprintf("su-%d", rng.IntN(2))
	return withModel(node, model, fmt.Sprintf("nvl72-rack-%d", rng.IntN(2)), 0)
}

// RandomRequest generates a small request for property tests: any strategy, 1-6
// bundles of GPU (whole or fractional), CPU, memory and sometimes "ssd", about a third
// of the time label selectors in every form Ray accepts, and sometimes topology "node".
func RandomRequest(rng *rand.Rand) placement.Request {
	strategies := []placement.Strategy{placement.StrategyPack, placement.StrategySpread, placement.StrategyStrictPack, placement.StrategyStrictSpread}
	request := placement.Request{
		Strategy: strategies[rng.IntN(len(strategies))],
		Bundles:  make([]resources.Set, 1+rng.IntN(6)),
	}
	withSelectors := rng.IntN(3) == 0
	if withSelectors {
		request.BundleLabelSelectors = make([]nodelabel.Selector, len(request.Bundles))
	}
	for i := range request.Bundles {
		bundle := resources.Set{"CPU": resources.Amount(1+rng.IntN(16)) * resources.AmountScale / 2}
		switch rng.IntN(4) {
		case 0:
			bundle["GPU"] = resources.Amount(1+rng.IntN(4)) * resources.AmountScale
		case 1:
			bundle["GPU"] = resources.Amount(1 + rng.IntN(resources.AmountScale)) // a fraction of one GPU
		}
		if rng.IntN(3) == 0 {
			bundle["memory"] = resources.Amount(1+rng.IntN(64)) * gib * resources.AmountScale
		}
		if rng.IntN(8) == 0 {
			bundle["ssd"] = resources.AmountScale
		}
		request.Bundles[i] = bundle
		if withSelectors {
			request.BundleLabelSelectors[i] = randomSelector(rng)
		}
	}
	if rng.IntN(6) == 0 {
		request.Topology = placement.TopologyNode
	}
	return request
}

func randomSelector(rng *rand.Rand) nodelabel.Selector {
	wire := map[string]string{}
	switch rng.IntN(5) {
	case 0:
		wire[AcceleratorTypeLabel] = []string{"A100", "H100"}[rng.IntN(2)]
	case 1:
		wire[ZoneLabel] = "in(zone-a,zone-b)"
	case 2:
		wire[ZoneLabel] = "!zone-c"
	case 3:
		wire[AcceleratorTypeLabel] = "!in(A100)"
	}
	selector, err := nodelabel.ParseSelector(wire)
	if err != nil {
		panic(fmt.Sprintf("placementsim: generated selector %v: %v", wire, err)) // a bug in this generator
	}
	return selector
}

// RequestStream generates the benchmark's mix of placement groups from a seed:
//   - 25% STRICT_PACK of 1-8 bundles {GPU: 1, CPU: 8, memory: 64 GiB},
//   - 20% PACK and 20% SPREAD of 2-16 bundles {GPU: 1, CPU: 8},
//   - 15% STRICT_SPREAD of 2-8 bundles {GPU: 1-4, CPU: 16},
//   - 15% CPU-only PACK or SPREAD of 1-4 bundles {CPU: 4-32, memory: 16 GiB},
//   - 4% STRICT_PACK of 2-8 {GPU: 1, CPU: 8} with a zone label selector,
//   - 1% infeasible: STRICT_PACK of 2 bundles {GPU: 8}, more than any node has.
type RequestStream struct {
	rng   *rand.Rand
	zones int
}

// NewRequestStream starts a stream; zones is the number of zones selectors may name.
func NewRequestStream(seed uint64, zones int) *RequestStream {
	return &RequestStream{rng: rand.New(rand.NewPCG(seed, 0xbe9c)), zones: max(zones, 1)}
}

// Next returns the next request.
func (s *RequestStream) Next() placement.Request {
	rng := s.rng
	gpuBundle := func(gpus, cpus, memoryGiB int) resources.Set {
		bundle := resources.Set{
			"GPU": resources.Amount(gpus) * resources.AmountScale,
			"CPU": resources.Amount(cpus) * resources.AmountScale,
		}
		if memoryGiB > 0 {
			bundle["memory"] = resources.Amount(memoryGiB) * gib * resources.AmountScale
		}
		return bundle
	}
	repeat := func(count int, bundle resources.Set) []resources.Set {
		bundles := make([]resources.Set, count)
		for i := range bundles {
			bundles[i] = bundle
		}
		return bundles
	}
	switch roll := rng.IntN(100); {
	case roll < 25:
		return placement.Request{Strategy: placement.StrategyStrictPack, Bundles: repeat(1+rng.IntN(8), gpuBundle(1, 8, 64))}
	case roll < 45:
		return placement.Request{Strategy: placement.StrategyPack, Bundles: repeat(2+rng.IntN(15), gpuBundle(1, 8, 0))}
	case roll < 65:
		return placement.Request{Strategy: placement.StrategySpread, Bundles: repeat(2+rng.IntN(15), gpuBundle(1, 8, 0))}
	case roll < 80:
		return placement.Request{Strategy: placement.StrategyStrictSpread, Bundles: repeat(2+rng.IntN(7), gpuBundle(1+rng.IntN(4), 16, 0))}
	case roll < 95:
		strategy := []placement.Strategy{placement.StrategyPack, placement.StrategySpread}[rng.IntN(2)]
		bundle := resources.Set{
			"CPU":    resources.Amount(4<<rng.IntN(4)) * resources.AmountScale,
			"memory": 16 * gib * resources.AmountScale,
		}
		return placement.Request{Strategy: strategy, Bundles: repeat(1+rng.IntN(4), bundle)}
	case roll < 99:
		count := 2 + rng.IntN(7)
		selector := nodelabel.Selector{{Key: ZoneLabel, Values: []string{fmt.Sprintf("zone-%d", rng.IntN(s.zones))}}}
		selectors := make([]nodelabel.Selector, count)
		for i := range selectors {
			selectors[i] = selector
		}
		return placement.Request{Strategy: placement.StrategyStrictPack, Bundles: repeat(count, gpuBundle(1, 8, 0)), BundleLabelSelectors: selectors}
	default:
		return placement.Request{Strategy: placement.StrategyStrictPack, Bundles: repeat(2, gpuBundle(8, 16, 0))}
	}
}
