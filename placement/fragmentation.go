package placement

import (
	"math"
	"sort"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Fragmentation, as "Beware of Fragmentation" (Weng et al., USENIX ATC 2023) defines
// it: a node's fragmentation, for a workload, is the expected number of its free GPUs
// that a task drawn from the workload's distribution could not use. A task "could not
// use" every free GPU of a node it cannot run on at all (too few CPUs or memory, the
// wrong GPU model, too few whole GPUs, no GPU with its fraction free, or it asks for no
// GPU or for a MIG slice, which never takes a whole GPU); on a node it can run on, the
// free shares of the GPUs too small for it (partly used GPUs for whole-GPU tasks, GPUs
// with less than its fraction free for fractional ones, wholly free GPUs in NVLink
// islands too small for a task that needs one island).
//
// NodeFragmentation is the one function that computes it: per shape, how many free
// GPUs are unusable, and their expectation under the shapes' weights. The scoring stage
// (Request.Workload, fragmentation_score.go), the trace replayer's FGD policy and the
// head's raygo_gpu_fragmentation_expected call it. raygo_gpus_free_unschedulable is a
// plainer count over NVLink islands (ClusterFragmentation), sharing the island count.

// LabelAcceleratorType is Ray's node label for the GPU model ("ray.io/accelerator-type",
// e.g. "H100"); a workload shape or a bundle selects GPU models with it.
const LabelAcceleratorType = "ray.io/accelerator-type"

// WorkloadShape is one request shape of a workload: what one task (one bundle) asks.
type WorkloadShape struct {
	// CPU and Memory are the amounts asked (0: none).
	CPU, Memory resources.Amount
	// GPUs is the number of whole GPUs asked (0: none); GPUFraction a share of one GPU,
	// 0 < GPUFraction < resources.AmountScale (0: none). At most one of them is set.
	GPUs        int
	GPUFraction resources.Amount
	// OneIsland: the whole GPUs must come from one NVLink island (a STRICT_PACK gang).
	OneIsland bool
	// MIGProfile is the MIG resource asked ("nvidia.com/mig-1g.10gb"), or "". A MIG
	// slice lives on a GPU in MIG mode, never on a whole GPU, so it can use none of the
	// free whole GPUs this measure counts.
	MIGProfile string
	// Selector is the shape's label selector (e.g. on LabelAcceleratorType); a node it
	// does not match can run none of it.
	Selector nodelabel.Selector
	// Weight is the shape's share of the workload (any scale: NodeFragmentation
	// normalizes by the sum). Weights <= 0 are ignored.
	Weight float64
}

// usesGPU reports whether the shape takes whole GPUs or a fraction of one.
func (s *WorkloadShape) usesGPU() bool { return s.GPUs > 0 || s.GPUFraction > 0 }

// WorkloadDistribution is the workload a fragmentation is measured against: shapes with
// weights. The zero value (no shapes) measures nothing: every node's fragmentation is 0.
type WorkloadDistribution struct {
	Shapes []WorkloadShape
}

// totalWeight is the sum of the positive weights.
func (w *WorkloadDistribution) totalWeight() float64 {
	total := 0.0
	for i := range w.Shapes {
		if w.Shapes[i].Weight > 0 {
			total += w.Shapes[i].Weight
		}
	}
	return total
}

// FragmentationNode is one node's free capacity, as the measure reads it.
type FragmentationNode struct {
	// FreeCPU and FreeMemory are what the node has not reserved.
	FreeCPU, FreeMemory resources.Amount
	// GPUFree is each whole GPU's free share, 0..AmountScale (at most MaxGPUsPerNode
	// GPUs, as in a snapshot; partly free GPUs beyond it are not counted).
	GPUFree []resources.Amount
	// GPUIslands is each GPU's NVLink island (same order as GPUFree); nil: one island.
	GPUIslands []int32
	// Labels are the node's labels, for the shapes' selectors.
	Labels map[string]string
}

// NodeFragmentation returns the node's expected fragmentation under workload, in GPUs:
// Σ over shapes of p(shape) × unusable(shape). When perShape is not nil (len at least
// len(workload.Shapes)), perShape[i] is set to unusable(shape i): how many of the
// node's free GPUs (shares summed, in GPUs) shape i could not use. The expectation is
// never negative and never above the node's free GPUs.
func NodeFragmentation(node *FragmentationNode, workload *WorkloadDistribution, perShape []float64) float64 {
	return nodeFragmentation(node, workload, perShape, nil)
}

// nodeFragmentation is NodeFragmentation with selects(i) telling whether shape i's
// selector matches the node, for a caller that caches it (nil: evaluated here). It is
// asked only for shapes the node could otherwise run.
func nodeFragmentation(node *FragmentationNode, workload *WorkloadDistribution, perShape []float64, selects func(shape int) bool) float64 {
	summary := summarizeGPUs(node)
	if summary.free == 0 {
		clear(perShape[:min(len(perShape), len(workload.Shapes))])
		return 0
	}
	total := workload.totalWeight()
	expected := 0.0
	for i := range workload.Shapes {
		shape := &workload.Shapes[i]
		unusable := unusableShare(node, &summary, shape, func() bool {
			if selects != nil {
				return selects(i)
			}
			return shape.Selector.Matches(node.Labels)
		})
		if perShape != nil {
			perShape[i] = float64(unusable) / resources.AmountScale
		}
		if shape.Weight > 0 && total > 0 {
			expected += shape.Weight / total * float64(unusable) / resources.AmountScale
		}
	}
	// Rounding of the weights could leave the sum a hair above the free GPUs.
	return math.Min(expected, float64(summary.free)/resources.AmountScale)
}

// gpuSummary is what the shapes read of a node's GPUs, computed once per node: the
// free shares summed, the wholly free GPUs, and the partly free shares (ascending);
// and, when a shape first needs them, the wholly free GPUs per island
// (freeGPUsByIsland).
type gpuSummary struct {
	free, partial resources.Amount
	whole         int
	partials      [MaxGPUsPerNode]resources.Amount
	partialCount  int

	islandsCounted bool
	islandCounts   [MaxGPUsPerNode]int
	islandDistinct int
}

func summarizeGPUs(node *FragmentationNode) gpuSummary {
	var summary gpuSummary
	for _, share := range node.GPUFree {
		summary.free += share
		switch {
		case share == resources.AmountScale:
			summary.whole++
		case share > 0 && summary.partialCount < MaxGPUsPerNode:
			// Insertion keeps partials ascending: a node has few GPUs.
			at := summary.partialCount
			for at > 0 && summary.partials[at-1] > share {
				summary.partials[at] = summary.partials[at-1]
				at--
			}
			summary.partials[at] = share
			summary.partialCount++
			summary.partial += share
		}
	}
	return summary
}

// unusableShare is how much of the node's free GPU shares shape cannot use; selects
// tells whether the shape's (non-empty) selector matches the node.
func unusableShare(node *FragmentationNode, summary *gpuSummary, shape *WorkloadShape, selects func() bool) resources.Amount {
	free := summary.free
	switch {
	case !shape.usesGPU() || shape.MIGProfile != "":
		return free
	case node.FreeCPU < shape.CPU || node.FreeMemory < shape.Memory:
		return free
	case len(shape.Selector) > 0 && !selects():
		return free
	}
	if shape.GPUFraction > 0 {
		fits := summary.whole > 0
		small := resources.Amount(0)
		for _, share := range summary.partials[:summary.partialCount] {
			if share >= shape.GPUFraction {
				fits = true
				break
			}
			small += share
		}
		if !fits {
			return free
		}
		return small
	}
	// Whole GPUs: partly used GPUs never serve them.
	if summary.whole < shape.GPUs {
		return free
	}
	if !shape.OneIsland || node.GPUIslands == nil {
		return summary.partial
	}
	// One island: wholly free GPUs of islands with too few of them are unusable too.
	if !summary.islandsCounted {
		_, summary.islandCounts, summary.islandDistinct = freeGPUsByIsland(node)
		summary.islandsCounted = true
	}
	fits, stranded := false, 0
	for _, count := range summary.islandCounts[:summary.islandDistinct] {
		if count >= shape.GPUs {
			fits = true
		} else {
			stranded += count
		}
	}
	if !fits {
		return free
	}
	return summary.partial + resources.Amount(stranded)*resources.AmountScale
}

// freeGPUsByIsland counts the node's wholly free GPUs per NVLink island: island
// islands[i] has counts[i] of them, for i < distinct (islands with none are left out),
// in the order the islands first appear. A node without GPUIslands is one island, 0.
func freeGPUsByIsland(node *FragmentationNode) (islands [MaxGPUsPerNode]int32, counts [MaxGPUsPerNode]int, distinct int) {
	for g, share := range node.GPUFree {
		if share != resources.AmountScale {
			continue
		}
		island := int32(0)
		if node.GPUIslands != nil {
			island = node.GPUIslands[g]
		}
		slot := 0
		for slot < distinct && islands[slot] != island {
			slot++
		}
		if slot == MaxGPUsPerNode {
			continue // beyond a snapshot's largest node: not counted
		}
		if slot == distinct {
			islands[slot] = island
			distinct++
		}
		counts[slot]++
	}
	return islands, counts, distinct
}

// WorkloadHistogram learns a workload distribution from the requests seen: a histogram
// of shapes whose weights decay by Decay per observation, so recent requests count
// more (with Decay 0.9999, a request seen 6,931 requests ago counts half). It is pure
// state: the caller feeds it (the GCS, each bundle it is asked to place) and passes
// Distribution to Schedule in Request.Workload. Not safe for concurrent use.
type WorkloadHistogram struct {
	// Decay is the factor every weight is multiplied by per observation, in (0, 1];
	// 1 keeps every request forever.
	Decay float64
	// MaxShapes caps the distinct shapes kept (the lightest go first); 0: 64.
	MaxShapes int

	shapes []WorkloadShape
	keys   []string
	// scale is what one observation weighs now: it grows by 1/Decay per observation
	// instead of every weight shrinking, and weights are rescaled when it gets large.
	scale float64
}

// DefaultWorkloadDecay is the decay per observation of NewWorkloadHistogram.
const DefaultWorkloadDecay = 0.9999

// NewWorkloadHistogram returns an empty histogram with DefaultWorkloadDecay.
func NewWorkloadHistogram() *WorkloadHistogram {
	return &WorkloadHistogram{Decay: DefaultWorkloadDecay}
}

// Observe adds one request of shape (its Weight is ignored).
func (h *WorkloadHistogram) Observe(shape WorkloadShape) {
	if h.scale == 0 {
		h.scale = 1
	} else if h.Decay > 0 && h.Decay < 1 {
		h.scale /= h.Decay
	}
	if h.scale > 1e12 {
		for i := range h.shapes {
			h.shapes[i].Weight /= h.scale
		}
		h.scale = 1
	}
	key := shapeKey(&shape)
	for i, known := range h.keys {
		if known == key {
			h.shapes[i].Weight += h.scale
			return
		}
	}
	shape.Weight = h.scale
	limit := h.MaxShapes
	if limit <= 0 {
		limit = 64
	}
	if len(h.shapes) >= limit {
		lightest := 0
		for i := range h.shapes {
			if h.shapes[i].Weight < h.shapes[lightest].Weight {
				lightest = i
			}
		}
		h.shapes[lightest], h.keys[lightest] = shape, key
		return
	}
	h.shapes = append(h.shapes, shape)
	h.keys = append(h.keys, key)
}

// Distribution returns the shapes seen, heaviest first, with weights summing to 1 (no
// shapes when nothing was observed).
func (h *WorkloadHistogram) Distribution() WorkloadDistribution {
	out := WorkloadDistribution{Shapes: make([]WorkloadShape, len(h.shapes))}
	copy(out.Shapes, h.shapes)
	total := out.totalWeight()
	for i := range out.Shapes {
		out.Shapes[i].Weight /= total
	}
	sort.SliceStable(out.Shapes, func(i, j int) bool { return out.Shapes[i].Weight > out.Shapes[j].Weight })
	return out
}

// ShapeOfBundle is the workload shape of one bundle of a group (weight 1): its CPU,
// GPUs or GPU fraction, MIG profile and selector; oneIsland for a STRICT_PACK group
// kept in one NVLink island. Memory is left out, as FGD's shapes leave it out: it
// varies from task to task far more than CPU and GPU, and would split the histogram
// into many shapes of one task each.
func ShapeOfBundle(bundle resources.Set, selector nodelabel.Selector, oneIsland bool) WorkloadShape {
	gpu := gpuRequestOf(bundle["GPU"])
	return WorkloadShape{
		CPU:         bundle["CPU"],
		GPUs:        gpu.whole,
		GPUFraction: gpu.fraction,
		OneIsland:   oneIsland && gpu.whole > 0,
		MIGProfile:  migResourceOf(bundle),
		Selector:    selector,
		Weight:      1,
	}
}

// ObserveRequest adds the shapes of one placement group: a STRICT_PACK group, which
// lands on one node as one task does, is one shape (its bundles summed, whole GPUs
// kept in one NVLink island), unless its bundles ask for MIG slices or for different
// selectors; other groups add one shape per bundle.
func (h *WorkloadHistogram) ObserveRequest(request *Request) {
	selectorOf := func(i int) nodelabel.Selector {
		if i < len(request.BundleLabelSelectors) {
			return request.BundleLabelSelectors[i]
		}
		return nil
	}
	strictPack := request.Strategy == StrategyStrictPack
	if strictPack && len(request.Bundles) > 1 {
		if sum, ok := packedShape(request, selectorOf); ok {
			h.Observe(sum)
			return
		}
	}
	for i, bundle := range request.Bundles {
		h.Observe(ShapeOfBundle(bundle, selectorOf(i), strictPack))
	}
}

// packedShape is a STRICT_PACK group's bundles as one shape, or false when they ask for
// MIG slices, for different selectors, or more than an amount can hold.
func packedShape(request *Request, selectorOf func(int) nodelabel.Selector) (WorkloadShape, bool) {
	sum, err := resources.SumOf(request.Bundles)
	if err != nil || migResourceOf(sum) != "" {
		return WorkloadShape{}, false
	}
	selector := selectorOf(0)
	for i := 1; i < len(request.Bundles); i++ {
		if selectorOf(i).String() != selector.String() {
			return WorkloadShape{}, false
		}
	}
	return ShapeOfBundle(sum, selector, true), true
}

// shapeKey identifies a shape in the histogram (every field but the weight).
func shapeKey(s *WorkloadShape) string {
	island := "0"
	if s.OneIsland {
		island = "1"
	}
	return s.CPU.String() + "/" + s.Memory.String() + "/" + resources.Amount(s.GPUs).String() + "/" +
		s.GPUFraction.String() + "/" + island + "/" + s.MIGProfile + "/" + s.Selector.String()
}

// ClusterFragmentation measures the live nodes' free GPUs. unschedulable[i] is, for a
// gang of sizes[i] whole GPUs in one NVLink island, the free GPUs it could not use:
// Σ over NVLink islands of (wholly free GPUs mod sizes[i]) — 100 nodes with one free
// GPU each leave 100 to an 8-GPU gang, one island with 7 free leaves 3 to a 4-GPU gang.
// A multi-node NVLink domain (Node.NVLinkDomain) is one island across its nodes; the
// islands are counted as fragmentationNodeOf and freeGPUsByIsland (FGD's) see them. This
// is raygo_gpus_free_unschedulable; it reads only GPUs, not CPUs or memory. expected
// is FGD's expected fragmentation under workload (NodeFragmentation summed over the
// nodes; 0 when workload is nil or has no shapes).
func ClusterFragmentation(nodes []Node, sizes []int, workload *WorkloadDistribution) (unschedulable []int, expected float64) {
	unschedulable = make([]int, len(sizes))
	domains := map[string]int{} // a multi-node NVLink domain's free GPUs, over its nodes
	addIsland := func(free int) {
		for i, k := range sizes {
			if k > 0 {
				unschedulable[i] += free % k
			}
		}
	}
	for i := range nodes {
		if !nodes[i].Alive {
			continue
		}
		node := fragmentationNodeOf(&nodes[i])
		islands, counts, distinct := freeGPUsByIsland(&node)
		for slot, free := range counts[:distinct] {
			// As the snapshot's topology: a domain node's listed GPUs with an NVLink peer
			// are the domain's; a GPU without one is an island of its own.
			if domain := nodes[i].NVLinkDomain; domain != "" && len(nodes[i].GPUs) > 0 && islands[slot] >= 0 {
				domains[domain] += free
			} else {
				addIsland(free)
			}
		}
		if workload != nil {
			expected += NodeFragmentation(&node, workload, nil)
		}
	}
	for _, free := range domains {
		addIsland(free)
	}
	return unschedulable, expected
}

// fragmentationNodeOf is a node's free capacity as NodeFragmentation reads it. GPUs
// without an NVLink peer are islands of their own; a node whose GPUs are known by count
// only is one island of its free GPUs.
func fragmentationNodeOf(n *Node) FragmentationNode {
	f := FragmentationNode{FreeCPU: n.Available[resources.CPU], FreeMemory: n.Available[resources.Memory], Labels: n.Labels}
	if len(n.GPUs) > 0 {
		for i, gpu := range n.GPUs[:min(len(n.GPUs), MaxGPUsPerNode)] {
			island := int32(gpu.NVLinkIsland)
			if island < 0 {
				island = int32(-1 - i) // alone: an island no other GPU shares
			}
			f.GPUFree = append(f.GPUFree, gpu.Available)
			f.GPUIslands = append(f.GPUIslands, island)
		}
		return f
	}
	free := n.Available[resources.GPU]
	for free >= resources.AmountScale && len(f.GPUFree) < MaxGPUsPerNode {
		f.GPUFree = append(f.GPUFree, resources.AmountScale)
		free -= resources.AmountScale
	}
	if free > 0 && len(f.GPUFree) < MaxGPUsPerNode {
		f.GPUFree = append(f.GPUFree, free)
	}
	return f
}

// MIGUnschedulable is, for each MIG profile of the GPUs' models (by profile name, e.g.
// "1g.10gb"), the free compute slices of the MIG GPUs on which a request for the
// profile could not be served now: no idle instance of it to reuse and no placement left
// to carve it, held and idle instances left in place. It is the MIG part of
// raygo_gpus_free_unschedulable: free capacity that a pending request of that shape
// could not use.
func MIGUnschedulable(nodes []Node) map[string]int {
	out := map[string]int{}
	for i := range nodes {
		if !nodes[i].Alive {
			continue
		}
		for _, gpu := range nodes[i].MIGGPUs {
			free := mig.ComputeSlices
			idle := map[int]bool{}
			for _, in := range gpu.Instances {
				if profile, ok := gpu.Model.ProfileByID(in.ProfileID); ok {
					free -= profile.ComputeSlices
				}
				if in.State == MIGIdle {
					idle[in.ProfileID] = true
				}
			}
			for _, profile := range gpu.Model.Profiles() {
				if _, seen := out[profile.Name]; !seen {
					out[profile.Name] = 0
				}
				if idle[profile.ID] {
					continue
				}
				if placements, err := FeasibleMIGPlacements(gpu, profile); err == nil && len(placements) == 0 {
					out[profile.Name] += max(free, 0)
				}
			}
		}
	}
	return out
}
