package tracereplay

import (
	"fmt"
	"math/rand/v2"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Raygo places each task with raygo's own placement core, as the GCS would: the task
// becomes a one-bundle PACK placement group ({"CPU", "memory" in bytes, "GPU": whole
// GPUs or a share}, gpu_spec as a label selector on LabelAcceleratorType), Schedule
// decides on a snapshot of the cluster, and Reserve takes the plan. Every node lists
// its GPUs, one NVLink island per node (the trace does not say more), so a share gets
// a GPU index that other shares may use too, as Ray's fractional GPUs.
//
// The workload for the fragmentation scoring stage (Request.Workload) is learned as
// the GCS would learn it: a placement.WorkloadHistogram of the tasks seen so far (each
// task is observed as it arrives), its heaviest shapes up to 95 % of the weight.
type Raygo struct {
	// NoWorkload leaves Request.Workload nil: raygo's placement without the
	// fragmentation stage.
	NoWorkload bool

	snapshot  *placement.Snapshot
	nodeOf    map[placement.NodeID]int
	histogram *placement.WorkloadHistogram
}

func (p *Raygo) Name() string {
	if p.NoWorkload {
		return "raygo_nofrag"
	}
	return "raygo"
}

func (p *Raygo) Start(c *Cluster, _ []Task) error {
	snapshot, nodeOf, err := newSnapshot(c.Nodes)
	if err != nil {
		return err
	}
	p.snapshot, p.nodeOf = snapshot, nodeOf
	p.histogram = placement.NewWorkloadHistogram()
	return nil
}

// newSnapshot is the trace's nodes as placement sees them, with each node's position in
// specs by id.
func newSnapshot(specs []NodeSpec) (*placement.Snapshot, map[placement.NodeID]int, error) {
	nodes := make([]placement.Node, len(specs))
	nodeOf := make(map[placement.NodeID]int, len(specs))
	for i, spec := range specs {
		id := placement.NodeID(spec.Name)
		if _, duplicate := nodeOf[id]; duplicate {
			return nil, nil, fmt.Errorf("node %s is listed twice", spec.Name)
		}
		nodeOf[id] = i
		total := resources.Set{"CPU": milliToAmount(spec.CPUMilli), "memory": mibToAmount(spec.MemoryMiB)}
		node := placement.Node{ID: id, Total: total, Available: total, Alive: true, Labels: map[string]string{}}
		if spec.GPUs > 0 {
			total["GPU"] = resources.Amount(spec.GPUs) * resources.AmountScale
			node.Labels[placement.LabelAcceleratorType] = spec.Model
			for g := range spec.GPUs {
				node.GPUs = append(node.GPUs, placement.GPU{Index: g, NVLinkIsland: 0, Rail: -1, Available: resources.AmountScale})
			}
		}
		nodes[i] = node
	}
	snapshot, err := placement.NewSnapshot(nodes)
	return snapshot, nodeOf, err
}

// requestOf is a task as a one-bundle PACK placement group, gpu_spec as the bundle's
// label selector.
func requestOf(task *Task) (placement.Request, nodelabel.Selector) {
	request := placement.Request{Bundles: []resources.Set{BundleOf(task)}, Strategy: placement.StrategyPack}
	var selector nodelabel.Selector
	if len(task.GPUModels) > 0 && task.GPUs > 0 {
		selector = modelSelector(task.GPUModels)
		request.BundleLabelSelectors = []nodelabel.Selector{selector}
	}
	return request, selector
}

func (p *Raygo) Choose(_ *Cluster, task *Task, _ *rand.Rand) (Choice, bool) {
	request, selector := requestOf(task)
	if !p.NoWorkload {
		p.histogram.Observe(placement.ShapeOfBundle(request.Bundles[0], selector, false))
		workload := heaviestShapes(p.histogram.Distribution(), 0.95)
		request.Workload = &workload
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
func BundleOf(task *Task) resources.Set {
	bundle := resources.Set{}
	if task.CPUMilli > 0 {
		bundle["CPU"] = milliToAmount(task.CPUMilli)
	}
	if task.MemoryMiB > 0 {
		bundle["memory"] = mibToAmount(task.MemoryMiB)
	}
	if task.GPUs > 0 {
		bundle["GPU"] = resources.Amount(task.GPUs) * resources.AmountScale
		if task.fractional() {
			bundle["GPU"] = milliToAmount(task.GPUMilli)
		}
	}
	return bundle
}

// mibToAmount converts MiB to a memory amount in bytes, as Ray counts memory.
func mibToAmount(mib int64) resources.Amount {
	return resources.Amount(mib<<20) * resources.AmountScale
}

// heaviestShapes keeps the heaviest shapes of a distribution (heaviest first) up to
// coverage of its weight.
func heaviestShapes(distribution placement.WorkloadDistribution, coverage float64) placement.WorkloadDistribution {
	covered := 0.0
	for i, shape := range distribution.Shapes {
		if covered >= coverage {
			distribution.Shapes = distribution.Shapes[:i]
			break
		}
		covered += shape.Weight
	}
	return distribution
}
