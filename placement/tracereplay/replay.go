package tracereplay

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// The method is the paper's (its simulator, hkust-adsl/kubernetes-scheduler-simulator,
// experiments with "-tune 1.3 --shuffle-pod=true" and the analysis at an arrival of
// 100 %): the trace's tasks are topped up with random copies of its tasks (or trimmed
// by random removals) until they ask for TuneRatio × the cluster's GPUs, shuffled with
// the seed, and submitted one after another with no departures; a task no node can
// take fails and the next one comes. The figure is the share of the cluster's GPU
// (milli-GPUs summed) left unallocated when the GPU asked for by the tasks arrived so
// far reaches MeasureAt × the cluster's GPUs (averaged over the arrivals that round to
// it, as the paper's analysis does, or at the first arrival past it when none rounds to
// it). The run also records the share unallocated when
// the first task failed.

// Config is one replay.
type Config struct {
	// Nodes is the cluster; Tasks the trace's task list.
	Nodes []NodeSpec
	Tasks []Task
	// Seed seeds the stream (top-up, shuffle) and the policy's random choices.
	Seed uint64
	// TuneRatio is the GPU the stream asks for, as a multiple of the cluster's (1.3).
	TuneRatio float64
	// MeasureAt is the arrived GPU, as a share of the cluster's, where the unallocated
	// share is read (1.0). The run stops after it, once a task has failed.
	MeasureAt float64
}

// DefaultConfig is the paper's method on nodes and tasks.
func DefaultConfig(nodes []NodeSpec, tasks []Task, seed uint64) Config {
	return Config{Nodes: nodes, Tasks: tasks, Seed: seed, TuneRatio: 1.3, MeasureAt: 1.0}
}

// Result is what one replay measured.
type Result struct {
	Policy string
	// UnallocatedGPUPct is the share of the cluster's GPU unallocated at MeasureAt, in %.
	UnallocatedGPUPct float64
	// FirstFailureUnallocatedGPUPct is the share unallocated when the first task failed
	// (100 if none failed), and FirstFailureArrivedPct the GPU arrived by then, in % of
	// the cluster's.
	FirstFailureUnallocatedGPUPct float64
	FirstFailureArrivedPct        float64
	// Arrived, Placed and Failed count tasks up to the end of the run.
	Arrived, Placed, Failed int
}

// Policy chooses where tasks go. Choose is called once per arriving task with the
// cluster as it is; it returns a node and GPUs that can take the task (Cluster.Fits),
// or false, and commits its choice to any state of its own: Run applies every choice
// to the cluster. A policy is used by one run at a time.
type Policy interface {
	Name() string
	// Start is called before the first task of a run, with the run's cluster and the
	// trace's task list (what a policy may learn a workload from).
	Start(cluster *Cluster, trace []Task) error
	Choose(cluster *Cluster, task *Task, rng *rand.Rand) (Choice, bool)
}

// Choice is where one task goes: a node and the positions of its GPUs on the node
// (GPUs of them for whole GPUs, one for a share).
type Choice struct {
	Node int
	GPUs []int
}

// Run replays the trace through policy and returns what it measured.
func Run(config Config, policy Policy) (Result, error) {
	cluster := NewCluster(config.Nodes)
	if cluster.TotalGPUMilli == 0 {
		return Result{}, fmt.Errorf("tracereplay: the cluster has no GPUs")
	}
	if len(config.Tasks) == 0 {
		return Result{}, fmt.Errorf("tracereplay: the trace has no tasks")
	}
	if err := policy.Start(cluster, config.Tasks); err != nil {
		return Result{}, fmt.Errorf("tracereplay: %s: %w", policy.Name(), err)
	}
	streamRNG := rand.New(rand.NewPCG(config.Seed, 0x5eed))
	policyRNG := rand.New(rand.NewPCG(config.Seed, 0xc401ce))
	stream := Stream(config.Tasks, float64(cluster.TotalGPUMilli)*config.TuneRatio, streamRNG)

	result := Result{Policy: policy.Name(), FirstFailureUnallocatedGPUPct: 100, FirstFailureArrivedPct: -1}
	total := float64(cluster.TotalGPUMilli)
	measureAt := 100 * config.MeasureAt
	var arrived int64
	samples, sampleSum := 0, 0.0
	// Past is the share unallocated at the first arrival at or past MeasureAt: the
	// figure when no arrival rounds to it (a small cluster, where one task is more than
	// 1 % of the GPUs).
	past := math.NaN()
	for i := range stream {
		task := &stream[i]
		arrived += task.GPUMilliTotal()
		result.Arrived++
		choice, ok := policy.Choose(cluster, task, policyRNG)
		if ok {
			if err := cluster.Apply(task, choice); err != nil {
				return Result{}, fmt.Errorf("tracereplay: %s: task %d (%s): %w", policy.Name(), i, task.Name, err)
			}
			result.Placed++
		} else {
			result.Failed++
		}
		unallocated := 100 * (1 - float64(cluster.UsedGPUMilli)/total)
		arrivedPct := 100 * float64(arrived) / total
		if !ok && result.FirstFailureArrivedPct < 0 {
			result.FirstFailureUnallocatedGPUPct, result.FirstFailureArrivedPct = unallocated, arrivedPct
		}
		if math.Round(arrivedPct) == math.Round(measureAt) {
			samples++
			sampleSum += unallocated
		}
		if arrivedPct >= measureAt && math.IsNaN(past) {
			past = unallocated
		}
		if arrivedPct >= measureAt+0.5 && result.FirstFailureArrivedPct >= 0 {
			break
		}
	}
	switch {
	case samples > 0:
		result.UnallocatedGPUPct = sampleSum / float64(samples)
	case !math.IsNaN(past):
		result.UnallocatedGPUPct = past
	default:
		return Result{}, fmt.Errorf("tracereplay: the stream never arrived at %.0f%% of the cluster's GPUs", measureAt)
	}
	return result, nil
}

// Stream is the paper's task stream: the trace's tasks, topped up with random copies
// (or trimmed by random removals) until their GPU adds up to at most targetGPUMilli,
// then shuffled.
func Stream(trace []Task, targetGPUMilli float64, rng *rand.Rand) []Task {
	stream := make([]Task, len(trace))
	copy(stream, trace)
	var asked int64
	for i := range stream {
		asked += stream[i].GPUMilliTotal()
	}
	for float64(asked) > targetGPUMilli && len(stream) > 0 {
		i := rng.IntN(len(stream))
		asked -= stream[i].GPUMilliTotal()
		stream = append(stream[:i], stream[i+1:]...)
	}
	for float64(asked) < targetGPUMilli {
		task := trace[rng.IntN(len(trace))]
		if float64(asked+task.GPUMilliTotal()) > targetGPUMilli {
			break
		}
		asked += task.GPUMilliTotal()
		stream = append(stream, task)
	}
	rng.Shuffle(len(stream), func(i, j int) { stream[i], stream[j] = stream[j], stream[i] })
	return stream
}

// Cluster is the replay's ledger: what every node has left.
type Cluster struct {
	Nodes []NodeSpec
	// CPULeft (milli-CPU), MemoryLeft (MiB) and GPULeft (milli-GPU per GPU) per node.
	CPULeft, MemoryLeft []int64
	GPULeft             [][]int64
	// TotalGPUMilli is every GPU of the cluster; UsedGPUMilli what tasks hold.
	TotalGPUMilli, UsedGPUMilli int64
}

// NewCluster is an idle cluster of nodes.
func NewCluster(nodes []NodeSpec) *Cluster {
	c := &Cluster{
		Nodes:      nodes,
		CPULeft:    make([]int64, len(nodes)),
		MemoryLeft: make([]int64, len(nodes)),
		GPULeft:    make([][]int64, len(nodes)),
	}
	for i, node := range nodes {
		c.CPULeft[i], c.MemoryLeft[i] = node.CPUMilli, node.MemoryMiB
		c.GPULeft[i] = make([]int64, node.GPUs)
		for g := range c.GPULeft[i] {
			c.GPULeft[i][g] = MilliPerGPU
		}
		c.TotalGPUMilli += int64(node.GPUs) * MilliPerGPU
	}
	return c
}

// Fits reports whether node can take task: CPU, memory, GPU model, and GPUs GPUs with
// GPUMilli left each.
func (c *Cluster) Fits(node int, task *Task) bool {
	if c.CPULeft[node] < task.CPUMilli || c.MemoryLeft[node] < task.MemoryMiB {
		return false
	}
	if task.GPUs == 0 {
		return true
	}
	if !task.acceptsModel(c.Nodes[node].Model) {
		return false
	}
	usable := 0
	for _, left := range c.GPULeft[node] {
		if left >= task.GPUMilli {
			usable++
		}
	}
	return usable >= task.GPUs
}

// Apply takes task's resources from the choice's node and GPUs, or fails without
// changing anything.
func (c *Cluster) Apply(task *Task, choice Choice) error {
	node := choice.Node
	if node < 0 || node >= len(c.Nodes) {
		return fmt.Errorf("no node %d", node)
	}
	if c.CPULeft[node] < task.CPUMilli || c.MemoryLeft[node] < task.MemoryMiB {
		return fmt.Errorf("node %s: CPU or memory short", c.Nodes[node].Name)
	}
	if len(choice.GPUs) != task.GPUs {
		return fmt.Errorf("node %s: %d GPUs chosen for a task of %d", c.Nodes[node].Name, len(choice.GPUs), task.GPUs)
	}
	if task.GPUs > 0 && !task.acceptsModel(c.Nodes[node].Model) {
		return fmt.Errorf("node %s: GPU model %s not in %v", c.Nodes[node].Name, c.Nodes[node].Model, task.GPUModels)
	}
	for i, g := range choice.GPUs {
		if g < 0 || g >= len(c.GPULeft[node]) || c.GPULeft[node][g] < task.GPUMilli {
			return fmt.Errorf("node %s: GPU %d cannot take %d milli-GPU", c.Nodes[node].Name, g, task.GPUMilli)
		}
		for _, earlier := range choice.GPUs[:i] {
			if earlier == g {
				return fmt.Errorf("node %s: GPU %d chosen twice", c.Nodes[node].Name, g)
			}
		}
	}
	c.CPULeft[node] -= task.CPUMilli
	c.MemoryLeft[node] -= task.MemoryMiB
	for _, g := range choice.GPUs {
		c.GPULeft[node][g] -= task.GPUMilli
	}
	c.UsedGPUMilli += task.GPUMilliTotal()
	return nil
}

// GPUMilliLeft is what node has left of its GPUs, summed.
func (c *Cluster) GPUMilliLeft(node int) int64 {
	var left int64
	for _, share := range c.GPULeft[node] {
		left += share
	}
	return left
}
