package placement_test

import (
	"fmt"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/testutil/resourcespec"
	"github.com/raygo-dev/raygo/placement"
)

// parseResources parses "GPU=1 CPU=8" into a resources.Set.
func parseResources(spec string) resources.Set { return resourcespec.Parse(spec) }

// node is an alive node with the node-id label; available "" means idle.
func node(id, total, available string) placement.Node {
	if available == "" {
		available = total
	}
	return placement.Node{
		ID:        placement.NodeID(id),
		Total:     parseResources(total),
		Available: parseResources(available),
		Labels:    map[string]string{nodelabel.NodeID: id},
		Alive:     true,
	}
}

func draining(n placement.Node) placement.Node { n.Draining = true; return n }
func dead(n placement.Node) placement.Node     { n.Alive = false; return n }

func labeled(n placement.Node, keyValues ...string) placement.Node {
	for i := 0; i+1 < len(keyValues); i += 2 {
		n.Labels[keyValues[i]] = keyValues[i+1]
	}
	return n
}

func bundles(specs ...string) []resources.Set {
	out := make([]resources.Set, len(specs))
	for i, spec := range specs {
		out[i] = parseResources(spec)
	}
	return out
}

func selectors(t *testing.T, wire ...map[string]string) []nodelabel.Selector {
	t.Helper()
	out := make([]nodelabel.Selector, len(wire))
	for i, w := range wire {
		selector, err := nodelabel.ParseSelector(w)
		if err != nil {
			t.Fatalf("selector %v: %v", w, err)
		}
		out[i] = selector
	}
	return out
}

func snapshotOf(t *testing.T, nodes ...placement.Node) *placement.Snapshot {
	t.Helper()
	snapshot, err := placement.NewSnapshot(nodes)
	if err != nil {
		t.Fatalf("NewSnapshot: %v", err)
	}
	return snapshot
}

// gpuNode is an idle node listing gpus GPUs, GPU i on rail i and in NVLink island
// islandOf(i), with 64 CPUs; the GPUs in used are taken (their Available and the GPU
// resource reduced).
func gpuNode(id string, gpus int, islandOf func(int) int, used ...int) placement.Node {
	n := node(id, fmt.Sprintf("GPU=%d CPU=64", gpus), "")
	for i := range gpus {
		n.GPUs = append(n.GPUs, placement.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", id, i), NVLinkIsland: islandOf(i), Rail: i, Available: resources.AmountScale})
	}
	for _, i := range used {
		n.GPUs[i].Available = 0
		n.Available["GPU"] -= resources.AmountScale
	}
	return n
}

// dgxH100 is a DGX H100: 8 GPUs on one NVSwitch island, GPU i on rail i.
func dgxH100(id string, used ...int) placement.Node {
	return gpuNode(id, 8, func(int) int { return 0 }, used...)
}

// pciePairs is a pcie-8gpu-nvlink-pairs node: islands (0,1), (2,3), (4,5), (6,7).
func pciePairs(id string, used ...int) placement.Node {
	return gpuNode(id, 8, func(i int) int { return i / 2 }, used...)
}

// gb200Tray is one 4-GPU tray of a GB200 NVL72 rack: its GPUs are part of the rack's
// multi-node NVLink domain.
func gb200Tray(id, domain string, used ...int) placement.Node {
	n := gpuNode(id, 4, func(int) int { return 0 }, used...)
	n.NVLinkDomain = domain
	return n
}

// inUnit labels a node with its scalable unit.
func inUnit(n placement.Node, unit string) placement.Node {
	return labeled(n, nodelabel.ScalableUnit, unit)
}

// withGPUShares sets the free share of some GPUs: index, amount, index, amount, …
func withGPUShares(n placement.Node, indexAmount ...float64) placement.Node {
	for i := 0; i+1 < len(indexAmount); i += 2 {
		gpu := &n.GPUs[int(indexAmount[i])]
		amount := resources.Amount(indexAmount[i+1] * resources.AmountScale)
		n.Available["GPU"] -= gpu.Available - amount
		gpu.Available = amount
	}
	return n
}
