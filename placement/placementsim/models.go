package placementsim

import (
	"fmt"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// NodeModel is a simulated machine, named as `raygo start --gpu-sim <model>` names it:
// how many GPUs, how NVLink joins them, and which rail each GPU's NIC is on.
type NodeModel string

const (
	// ModelCountOnly: GPUs known by count only (no Node.GPUs), as a raylet without
	// NVML reports them.
	ModelCountOnly NodeModel = ""
	// ModelDGXH100: 8 H100 SXM GPUs on NVSwitch (one island of 8), 8 ConnectX-7 400G
	// NICs, GPU i on rail i.
	ModelDGXH100 NodeModel = "dgx-h100"
	// ModelPCIe8GPUNVLinkPairs: 8 PCIe GPUs joined in pairs by NVLink bridges, (0,1),
	// (2,3), (4,5), (6,7): 4 islands of 2. Modeled rail-optimized like the DGX (GPU i on
	// rail i) so the fleet's rails line up.
	ModelPCIe8GPUNVLinkPairs NodeModel = "pcie-8gpu-nvlink-pairs"
	// ModelGB200NVL72: one compute tray of a GB200 NVL72 rack: 4 GPUs, part of the rack's
	// multi-node NVLink domain (18 trays, 72 GPUs), GPU i on rail i.
	ModelGB200NVL72 NodeModel = "gb200-nvl72"
)

// GPUCount is how many whole GPUs the model has (0 for ModelCountOnly).
func (m NodeModel) GPUCount() int {
	switch m {
	case ModelDGXH100, ModelPCIe8GPUNVLinkPairs:
		return 8
	case ModelGB200NVL72:
		return 4
	default:
		return 0
	}
}

// AcceleratorType is the model's ray.io/accelerator-type label value.
func (m NodeModel) AcceleratorType() string {
	switch m {
	case ModelGB200NVL72:
		return "GB200"
	default:
		return "H100"
	}
}

// GPUs returns the model's GPUs for the node id, every one free. UUIDs are derived from
// the id so they are unique in a fleet.
func (m NodeModel) GPUs(id placement.NodeID) []placement.GPU {
	gpus := make([]placement.GPU, m.GPUCount())
	for i := range gpus {
		island := 0
		if m == ModelPCIe8GPUNVLinkPairs {
			island = i / 2
		}
		gpus[i] = placement.GPU{
			Index:        i,
			UUID:         fmt.Sprintf("GPU-%.8s-%04d", id, i),
			NVLinkIsland: island,
			Rail:         i,
			Available:    resources.AmountScale,
		}
	}
	return gpus
}

// withModel gives node the model's GPUs (and NVLink domain for GB200), marking the
// lowest used GPUs as in use, and sets GPU to match. used is how many GPUs work outside
// any placement group holds.
func withModel(node placement.Node, model NodeModel, domain string, used int) placement.Node {
	if model == ModelCountOnly {
		return node
	}
	node.GPUs = model.GPUs(node.ID)
	for i := range min(used, len(node.GPUs)) {
		node.GPUs[i].Available = 0
	}
	gpus := resources.Amount(len(node.GPUs)) * resources.AmountScale
	node.Total["GPU"] = gpus
	node.Available["GPU"] = gpus - resources.Amount(min(used, len(node.GPUs)))*resources.AmountScale
	if model == ModelGB200NVL72 {
		node.NVLinkDomain = domain
	}
	return node
}
