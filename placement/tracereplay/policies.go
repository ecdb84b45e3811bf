package tracereplay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// The paper's policies, as its simulator scores them (facts from
// hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/plugin): each feasible node
// gets an integer score in 0..100, the highest wins, and ties go to the node with the
// smallest name (the simulator's selectHost: "for reproducibility", instead of the
// Kubernetes scheduler's random pick). A node's "free vector" is its CPU
// left over 128 CPUs and its GPU left (summed) over 8 GPUs, the simulator's maximum
// node spec. GPUs within the node: FGD picks by fragmentation, random-fit at random,
// the others "best": a share goes on the GPU with the least left that fits, whole
// GPUs on the lowest wholly free ones.

const (
	maxSpecCPUMilli = 128000
	maxSpecGPUMilli = 8 * MilliPerGPU
	maxNodeScore    = 100
)

// PaperPolicies returns the paper's six policies: FGD, best-fit, dot-product, GPU
// packing, GPU clustering, random-fit.
func PaperPolicies() []Policy {
	return []Policy{
		&FGD{},
		&scoredPolicy{name: "bestfit", score: bestFitScore, normalize: true},
		&scoredPolicy{name: "dotprod", score: dotProductScore},
		&scoredPolicy{name: "packing", score: gpuPackingScore},
		&scoredPolicy{name: "clustering", score: gpuClusteringScore, clustering: true},
		&randomFit{},
	}
}

// scoredPolicy is a node scorer with the simulator's selection: the best integer score,
// ties at random; normalize maps the scores linearly onto 0..100 first (best-fit's
// NormalizeScore, whose integer division merges close scores).
type scoredPolicy struct {
	name       string
	score      func(c *Cluster, node int, task *Task, affinity map[string]int) int64
	normalize  bool
	clustering bool
	// affinity is, per node, how many tasks of each GPU kind it holds (GPU clustering).
	affinity []map[string]int
	scores   []int64
	nodes    []int
}

func (p *scoredPolicy) Name() string { return p.name }

func (p *scoredPolicy) Start(c *Cluster, _ []Task) error {
	p.affinity = nil
	if p.clustering {
		p.affinity = make([]map[string]int, len(c.Nodes))
		for i := range p.affinity {
			p.affinity[i] = map[string]int{}
		}
	}
	return nil
}

func (p *scoredPolicy) Choose(c *Cluster, task *Task, _ *rand.Rand) (Choice, bool) {
	p.scores, p.nodes = p.scores[:0], p.nodes[:0]
	for node := range c.Nodes {
		if !c.Fits(node, task) {
			continue
		}
		var affinity map[string]int
		if p.affinity != nil {
			affinity = p.affinity[node]
		}
		p.nodes = append(p.nodes, node)
		p.scores = append(p.scores, p.score(c, node, task, affinity))
	}
	if p.normalize {
		normalizeScores(p.scores)
	}
	node, ok := pickHighest(c, p.nodes, p.scores)
	if !ok {
		return Choice{}, false
	}
	if p.affinity != nil && task.GPUs > 0 {
		p.affinity[node][gpuKind(task)]++
	}
	return Choice{Node: node, GPUs: bestGPUs(c, node, task)}, true
}

// pickHighest returns the node with the highest score, of a tie the one with the
// smallest name.
func pickHighest(c *Cluster, nodes []int, scores []int64) (int, bool) {
	best := pickHighestIndex(c, nodes, scores)
	if best < 0 {
		return 0, false
	}
	return nodes[best], true
}

// pickHighestIndex is pickHighest's position in nodes, or -1.
func pickHighestIndex(c *Cluster, nodes []int, scores []int64) int {
	best := -1
	for i, score := range scores {
		if best < 0 || score > scores[best] || score == scores[best] && c.Nodes[nodes[i]].Name < c.Nodes[nodes[best]].Name {
			best = i
		}
	}
	return best
}

func normalizeScores(scores []int64) {
	if len(scores) == 0 {
		return
	}
	lowest, highest := slices.Min(scores), slices.Max(scores)
	for i, score := range scores {
		if highest == lowest {
			scores[i] = 0
		} else {
			scores[i] = (score - lowest) * maxNodeScore / (highest - lowest)
		}
	}
}

// bestGPUs is the "best" GPU choice: a share on the GPU with the least left that fits,
// whole GPUs on the lowest wholly free ones.
func bestGPUs(c *Cluster, node int, task *Task) []int {
	if task.GPUs == 0 {
		return nil
	}
	left := c.GPULeft[node]
	if task.fractional() {
		best := -1
		for g, share := range left {
			if share >= task.GPUMilli && (best < 0 || share < left[best]) {
				best = g
			}
		}
		return []int{best}
	}
	gpus := make([]int, 0, task.GPUs)
	for g, share := range left {
		if share == MilliPerGPU && len(gpus) < task.GPUs {
			gpus = append(gpus, g)
		}
	}
	return gpus
}

// bestFitScore: the least CPU and GPU left after the task, equally weighted.
func bestFitScore(c *Cluster, node int, task *Task, _ map[string]int) int64 {
	cpu := float64(c.CPULeft[node]-task.CPUMilli) / maxSpecCPUMilli
	gpu := float64(c.GPUMilliLeft(node)-task.GPUMilliTotal()) / maxSpecGPUMilli
	return int64((1 - 0.5*cpu - 0.5*gpu) * maxNodeScore)
}

// dotProductScore: the smallest dot product of the node's free vector and the task's
// demand (merged GPU dimension, normalized by the maximum spec).
func dotProductScore(c *Cluster, node int, task *Task, _ map[string]int) int64 {
	dot := float64(c.CPULeft[node])/maxSpecCPUMilli*float64(task.CPUMilli)/maxSpecCPUMilli +
		float64(c.GPUMilliLeft(node))/maxSpecGPUMilli*float64(task.GPUMilliTotal())/maxSpecGPUMilli
	return int64(maxNodeScore * (1 - dot/2))
}

// gpuPackingScore: first nodes where the task fits on partly used GPUs (the less left
// on them the better), then nodes where it takes wholly free GPUs of partly used
// nodes, then idle nodes; tasks without GPUs score 0 everywhere.
func gpuPackingScore(c *Cluster, node int, task *Task, _ map[string]int) int64 {
	if task.GPUs == 0 {
		return 0
	}
	left := c.GPULeft[node]
	wholly := 0
	for _, share := range left {
		if share == MilliPerGPU {
			wholly++
		}
	}
	if wholly == len(left) {
		return max(maxNodeScore/3-int64(wholly), int64(wholly))
	}
	order := make([]int, len(left))
	for g := range order {
		order[g] = g
	}
	sort.SliceStable(order, func(a, b int) bool { return left[order[a]] < left[order[b]] })
	need, whollyUsed := task.GPUs, 0
	var used []int
	for _, g := range order {
		if need == 0 {
			break
		}
		if task.GPUMilli <= left[g] {
			need--
			used = append(used, g)
			if left[g] == MilliPerGPU {
				whollyUsed++
			}
		}
	}
	if whollyUsed > 0 {
		return max(maxNodeScore/2-int64(whollyUsed), maxNodeScore/3)
	}
	var freeOnUsed int64
	for _, g := range used {
		freeOnUsed += left[g] * 100 / MilliPerGPU
	}
	return max(maxNodeScore-freeOnUsed/10, maxNodeScore/2)
}

// gpuKind is the task's GPU clustering tag: shared, or its count of whole GPUs.
func gpuKind(task *Task) string {
	if task.fractional() {
		return "share-gpu"
	}
	return fmt.Sprintf("%d-gpu", task.GPUs)
}

// gpuClusteringScore: nodes holding only tasks of the same GPU kind first, then nodes
// holding that kind among others, then idle ones, then nodes of other kinds; within
// each band, the less GPU left the better. Tasks without GPUs score 0 everywhere.
func gpuClusteringScore(c *Cluster, node int, task *Task, affinity map[string]int) int64 {
	if task.GPUs == 0 {
		return 0
	}
	quarter := int64(maxNodeScore / 4)
	fill := quarter * (maxSpecGPUMilli - c.GPUMilliLeft(node)) / maxSpecGPUMilli
	switch {
	case affinity[gpuKind(task)] > 0 && len(affinity) == 1:
		return fill + 3*quarter
	case affinity[gpuKind(task)] > 0:
		return fill + 2*quarter
	case len(affinity) == 0:
		return fill + quarter
	default:
		return fill
	}
}

// randomFit puts a task on a feasible node drawn at random, on random GPUs that fit.
type randomFit struct{ nodes []int }

func (p *randomFit) Name() string                 { return "random" }
func (p *randomFit) Start(*Cluster, []Task) error { return nil }

func (p *randomFit) Choose(c *Cluster, task *Task, rng *rand.Rand) (Choice, bool) {
	p.nodes = p.nodes[:0]
	for node := range c.Nodes {
		if c.Fits(node, task) {
			p.nodes = append(p.nodes, node)
		}
	}
	if len(p.nodes) == 0 {
		return Choice{}, false
	}
	node := p.nodes[rng.IntN(len(p.nodes))]
	var usable []int
	for g, share := range c.GPULeft[node] {
		if share >= task.GPUMilli {
			usable = append(usable, g)
		}
	}
	rng.Shuffle(len(usable), func(i, j int) { usable[i], usable[j] = usable[j], usable[i] })
	gpus := usable[:task.GPUs]
	sort.Ints(gpus)
	return Choice{Node: node, GPUs: gpus}, true
}

// FGD is Fragmentation Gradient Descent: each task goes where the node's expected
// fragmentation (placement.NodeFragmentation, under the trace's typical shapes) grows
// least; the score is 100 × sigmoid(decrease in milli-GPUs / 1000), truncated to an
// integer as the simulator does, ties at random. A share goes on the GPU of the node
// that scores best.
type FGD struct {
	workload placement.WorkloadDistribution
	frag     fragmentationCache
	nodes    []int
	scores   []int64
	gpus     [][]int
	scratch  []int64
}

func (p *FGD) Name() string { return "fgd" }

func (p *FGD) Start(c *Cluster, trace []Task) error {
	p.workload = TypicalShapes(trace, 0.95)
	p.frag = newFragmentationCache(c, &p.workload)
	return nil
}

func (p *FGD) Choose(c *Cluster, task *Task, _ *rand.Rand) (Choice, bool) {
	p.nodes, p.scores, p.gpus = p.nodes[:0], p.scores[:0], p.gpus[:0]
	for node := range c.Nodes {
		if !c.Fits(node, task) {
			continue
		}
		score, gpus := p.score(c, node, task)
		p.nodes = append(p.nodes, node)
		p.scores = append(p.scores, score)
		p.gpus = append(p.gpus, gpus)
	}
	best := pickHighestIndex(c, p.nodes, p.scores)
	if best < 0 {
		return Choice{}, false
	}
	return Choice{Node: p.nodes[best], GPUs: p.gpus[best]}, true
}

func (p *FGD) score(c *Cluster, node int, task *Task) (int64, []int) {
	before := p.frag.of(c.CPULeft[node], c.GPULeft[node], c.Nodes[node].Model)
	p.scratch = append(p.scratch[:0], c.GPULeft[node]...)
	left := p.scratch
	cpu := c.CPULeft[node] - task.CPUMilli
	if task.fractional() {
		best, bestScore := -1, int64(0)
		for g := range left {
			if left[g] < task.GPUMilli {
				continue
			}
			left[g] -= task.GPUMilli
			score := fgdScore(before, p.frag.of(cpu, left, c.Nodes[node].Model))
			left[g] += task.GPUMilli
			if best < 0 || score > bestScore {
				best, bestScore = g, score
			}
		}
		return bestScore, []int{best}
	}
	gpus := bestGPUs(c, node, task)
	for _, g := range gpus {
		left[g] = 0
	}
	return fgdScore(before, p.frag.of(cpu, left, c.Nodes[node].Model)), gpus
}

func fgdScore(before, after float64) int64 {
	// The simulator divides the decrease in milli-GPUs by 1000: in GPUs, as here.
	decrease := before - after
	return int64(maxNodeScore / (1 + math.Exp(-decrease)))
}

// TypicalShapes is the paper's workload distribution from a trace: the task shapes
// (CPU, GPU count and share, accepted models; memory is not part of it), most frequent
// first, as many as cover coverage of the tasks, weighted by their frequency.
func TypicalShapes(trace []Task, coverage float64) placement.WorkloadDistribution {
	type counted struct {
		shape placement.WorkloadShape
		key   string
		count int
	}
	byKey := map[string]*counted{}
	var order []*counted
	for i := range trace {
		task := &trace[i]
		shape := ShapeOf(task)
		key := fmt.Sprintf("%d/%d/%d/%s", task.CPUMilli, task.GPUs, task.GPUMilli, strings.Join(task.GPUModels, "|"))
		if known, ok := byKey[key]; ok {
			known.count++
			continue
		}
		entry := &counted{shape: shape, key: key, count: 1}
		byKey[key] = entry
		order = append(order, entry)
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].count != order[j].count {
			return order[i].count > order[j].count
		}
		return order[i].key < order[j].key
	})
	var out placement.WorkloadDistribution
	covered := 0
	for _, entry := range order {
		if float64(covered) >= coverage*float64(len(trace)) {
			break
		}
		covered += entry.count
		entry.shape.Weight = float64(entry.count)
		out.Shapes = append(out.Shapes, entry.shape)
	}
	for i := range out.Shapes {
		out.Shapes[i].Weight /= float64(covered)
	}
	return out
}

// ShapeOf is a task's workload shape (weight 1): CPU, GPUs or share, accepted models.
func ShapeOf(task *Task) placement.WorkloadShape {
	shape := placement.WorkloadShape{CPU: milliToAmount(task.CPUMilli), Weight: 1}
	switch {
	case task.fractional():
		shape.GPUFraction = milliToAmount(task.GPUMilli)
	case task.GPUs > 0:
		shape.GPUs = task.GPUs
	}
	if len(task.GPUModels) > 0 && task.GPUs > 0 {
		shape.Selector = modelSelector(task.GPUModels)
	}
	return shape
}

func modelSelector(models []string) nodelabel.Selector {
	values := slices.Clone(models)
	sort.Strings(values)
	return nodelabel.Selector{{Key: placement.LabelAcceleratorType, Values: values}}
}

// milliToAmount converts milli-units (CPU, GPU) to placement amounts.
func milliToAmount(milli int64) resources.Amount {
	return resources.Amount(milli * resources.AmountScale / 1000)
}

// fragmentationCache memoizes NodeFragmentation by what it reads of a node: its model,
// CPU left and GPU shares left (sorted: the trace's nodes are one NVLink island each,
// so which GPU has which share does not matter).
type fragmentationCache struct {
	workload *placement.WorkloadDistribution
	values   map[fragmentationKey]float64
	node     placement.FragmentationNode
	labels   map[string]map[string]string
}

type fragmentationKey struct {
	model string
	cpu   int64
	gpus  [8]int64
}

func newFragmentationCache(c *Cluster, workload *placement.WorkloadDistribution) fragmentationCache {
	cache := fragmentationCache{workload: workload, values: map[fragmentationKey]float64{}, labels: map[string]map[string]string{}}
	for _, node := range c.Nodes {
		cache.labels[node.Model] = map[string]string{placement.LabelAcceleratorType: node.Model}
	}
	return cache
}

// of is the expected fragmentation, in GPUs, of a node with the model, CPU left
// (milli) and GPU shares left (milli).
func (f *fragmentationCache) of(cpuLeft int64, gpuLeft []int64, model string) float64 {
	cacheable := len(gpuLeft) <= 8
	var key fragmentationKey
	if cacheable {
		key = fragmentationKey{model: model, cpu: cpuLeft}
		copy(key.gpus[:], gpuLeft)
		for i := 1; i < len(gpuLeft); i++ { // insertion sort: at most 8, no allocation
			for j := i; j > 0 && key.gpus[j] < key.gpus[j-1]; j-- {
				key.gpus[j], key.gpus[j-1] = key.gpus[j-1], key.gpus[j]
			}
		}
		if value, ok := f.values[key]; ok {
			return value
		}
	}
	f.node.FreeCPU = milliToAmount(cpuLeft)
	f.node.FreeMemory = math.MaxInt64 // the paper's measure leaves memory out
	f.node.GPUFree = f.node.GPUFree[:0]
	for _, share := range gpuLeft {
		f.node.GPUFree = append(f.node.GPUFree, milliToAmount(share))
	}
	f.node.Labels = f.labels[model]
	value := placement.NodeFragmentation(&f.node, f.workload, nil)
	if cacheable {
		f.values[key] = value
	}
	return value
}
