package tracereplay

import (
	"fmt"
	"math/rand/v2"

	"github.com/raygo-dev/raygo/placement"
)

// Raygo places each task with raygo's own placement core, as the GCS would: the task
// becomes a one-bundle PACK placement group ({"CPU", "memory" in bytes, "GPU": whole
// GPUs or a share}, gpu_spec as a label selector on LabelAcceleratorType), Schedule
// decides on a snapshot of the cluster, and Reserve takes the plan. Every node lists
// its GPUs, one NVLink island per node (the trace does not say more), so a share gets
// a GPU index that other shares may use too, as Ray's fractional GPUs.
type Raygo struct {
	snapshot *placement.Snapshot
	nodeOf   map[placement.NodeID]int
}

func (p *Raygo) Name() string { return "raygo" }

func (p *Raygo) Start(c *Cluster, _ []Task) error {
	nodes := make([]placement.Node, len(c.Nodes))
	p.nodeOf = make(map[placement.NodeID]int, len(c.Nodes))
	for i, spec := range c.Nodes {
		id := placement.NodeID(spec.Name)
		if _, duplicate := p.nodeOf[id]; duplicate {
			return fmt.Errorf("node %s is listed twice", spec.Name)
		}
		p.nodeOf[id] = i
		total := placement.ResourceSet{"CPU": milliToAmount(spec.CPUMilli), "memory": mibToAmount(spec.MemoryMiB)}
		node := placement.Node{ID: id, Total: total, Available: total, Alive: true, Labels: map[string]string{}}
		if spec.GPUs > 0 {
			total["GPU"] = placement.Amount(spec.GPUs) * placement.AmountScale
			node.Labels[placement.LabelAcceleratorType] = spec.Model
			for g := range spec.GPUs {
				node.GPUs = append(node.GPUs, placement.GPU{Index: g, NVLinkIsland: 0, Rail: -1, Available: placement.AmountScale})
			}
		}
		nodes[i] = node
	}
	snapshot, err := placement.NewSnapshot(nodes)
	if err != nil {
		return err
	}
	p.snapshot = snapshot
	return nil
}

func (p *Raygo) Choose(_ *Cluster, task *Task, _ *rand.Rand) (Choice, bool) {
	request := placement.Request{Bundles: []placement.ResourceSet{BundleOf(task)}, Strategy: placement.StrategyPack}
	if len(task.GPUModels) > 0 && task.GPUs > 0 {
		request.BundleLabelSelectors = []placement.LabelSelector{modelSelector(task.GPUModels)}
	}
	plan, err := placement.Schedule(p.snapshot, request)
	if err != nil {
		return Choice{}, false
	}
	if err := p.snapshot.Reserve(request.Bundles, plan); err != nil {
		return Choice{}, false
	}
	placed := plan.Placements[0]
	// GPU indices are the GPUs' positions on the node (Start lists them so).
	return Choice{Node: p.nodeOf[placed.NodeID], GPUs: placed.GPUIndices}, true
}

// BundleOf is a task as a placement-group bundle.
func BundleOf(task *Task) placement.ResourceSet {
	bundle := placement.ResourceSet{}
	if task.CPUMilli > 0 {
		bundle["CPU"] = milliToAmount(task.CPUMilli)
	}
	if task.MemoryMiB > 0 {
		bundle["memory"] = mibToAmount(task.MemoryMiB)
	}
	if task.GPUs > 0 {
		bundle["GPU"] = placement.Amount(task.GPUs) * placement.AmountScale
		if task.fractional() {
			bundle["GPU"] = milliToAmount(task.GPUMilli)
		}
	}
	return bundle
}

// mibToAmount converts MiB to a memory amount in bytes, as Ray counts memory.
func mibToAmount(mib int64) placement.Amount {
	return placement.Amount(mib<<20) * placement.AmountScale
}
