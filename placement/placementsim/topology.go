package placementsim

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// The topology benchmark: the same seeded stream of tensor-parallel and data-parallel
// placement groups, arriving one per step and leaving after their lifetime, scheduled
// twice on the same simulated fleet:
//
//   - topology-aware: placement.Schedule on a snapshot listing every node's GPUs,
//     NVLink islands, rails and scalable units; the GPUs are the plan's;
//   - topology-blind: placement.Schedule on the same fleet described by GPU counts
//     alone (no Node.GPUs, no scalable-unit label), which is Ray's view and raygo's
//     behavior without topology, with GPU indices then assigned lowest free first, as a
//     raylet does when the scheduler names none.
//
// Both runs wait the same way: a group that does not fit now (NotNow) waits in a FIFO
// queue, retried every step, and gives up after MaxWaitSteps; an infeasible one is
// dropped. Each placed group's all-reduce bus bandwidth is estimated with
// placement.EstimateAllReduce on the real topology, at the moment it is placed.
//
// Fragmentation is a snapshot of a moving system, so one stream's end is a noisy
// sample: the benchmark runs Streams seeded streams and pools what each leaves at its
// end (TopologyBenchResult.ProbeGPUs says how it is counted), and, less noisy, what
// both runs hold every fragmentationSampleEvery steps once the fleet has filled
// (TopologyRunResult.MeanFragmentationPct). The two runs step in lockstep, so each
// sample probes both with the same request.

// TopologyFleetConfig describes the benchmark fleet.
type TopologyFleetConfig struct {
	// ScalableUnits is the number of scalable units (label su-0, su-1, …).
	ScalableUnits int
	// DGXPerUnit and PCIePerUnit are the DGX H100 and pcie-8gpu-nvlink-pairs nodes of
	// each unit. The PCIe nodes are where NVLink islands matter on a fleet of DGX nodes:
	// a topology-blind STRICT_PACK of 4 or 8 GPUs may land on one and span its pairs.
	DGXPerUnit, PCIePerUnit int
	// NodesPerRack sets the rack label (rack-<n>), in node order within a unit.
	NodesPerRack int
	Seed         uint64
}

// DefaultTopologyFleetConfig is the fleet of BENCH topo_*: 2 scalable units, each of 32
// DGX H100 nodes (the 64-node DGX H100 fleet) and 8 pcie-8gpu-nvlink-pairs nodes; 80
// nodes, 640 GPUs, rails 0..7 on every node, 4 nodes per rack.
func DefaultTopologyFleetConfig() TopologyFleetConfig {
	return TopologyFleetConfig{ScalableUnits: 2, DGXPerUnit: 32, PCIePerUnit: 8, NodesPerRack: 4, Seed: 11}
}

// NewTopologyFleet generates the fleet: DGX H100 nodes with 224 CPUs and 2 TiB of
// memory, PCIe nodes with 128 CPUs and 1 TiB, all idle.
func NewTopologyFleet(config TopologyFleetConfig) []placement.Node {
	rng := rand.New(rand.NewPCG(config.Seed, 0x70b0))
	var nodes []placement.Node
	for unit := range config.ScalableUnits {
		perUnit := config.DGXPerUnit + config.PCIePerUnit
		for i := range perUnit {
			model, cpus, memoryGiB := ModelDGXH100, 224, 2048
			if i >= config.DGXPerUnit {
				model, cpus, memoryGiB = ModelPCIe8GPUNVLinkPairs, 128, 1024
			}
			total := resources.Set{
				"CPU":    resources.Amount(cpus) * resources.AmountScale,
				"memory": resources.Amount(memoryGiB) * gib * resources.AmountScale,
			}
			node := newNode(rng, total, total.Clone(), fmt.Sprintf("zone-%d", unit), model.AcceleratorType())
			node.Labels[nodelabel.ScalableUnit] = fmt.Sprintf("su-%d", unit)
			node.Labels[nodelabel.Rack] = fmt.Sprintf("rack-%d-%d", unit, i/max(config.NodesPerRack, 1))
			nodes = append(nodes, withModel(node, model, "", 0))
		}
	}
	return nodes
}

// WithoutTopology returns the nodes as a topology-blind scheduler sees them: GPU counts
// only, no NVLink domain, no scalable-unit or rack label.
func WithoutTopology(nodes []placement.Node) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, node := range nodes {
		node.GPUs, node.NVLinkDomain = nil, ""
		labels := make(map[string]string, len(node.Labels))
		for key, value := range node.Labels {
			if key != nodelabel.ScalableUnit && key != nodelabel.Rack {
				labels[key] = value
			}
		}
		node.Labels = labels
		node.Total, node.Available = node.Total.Clone(), node.Available.Clone()
		out[i] = node
	}
	return out
}

// TopologyRequest is one placement group of the stream and how many steps it holds its
// resources once placed.
type TopologyRequest struct {
	Request  placement.Request
	Lifetime int
}

// TopologyStream generates the benchmark's mix from a seed:
//   - 55% tensor-parallel: STRICT_PACK of 2, 4 or 8 bundles {GPU: 1, CPU: 8};
//   - 45% data-parallel: SPREAD of 4-16 bundles, {GPU: 8, CPU: 64} (40%) or
//     {GPU: 1, CPU: 8} (60%);
//
// each holding its resources 5-40 steps.
type TopologyStream struct {
	rng *rand.Rand
}

// NewTopologyStream starts a stream.
func NewTopologyStream(seed uint64) *TopologyStream {
	return &TopologyStream{rng: rand.New(rand.NewPCG(seed, 0x7095))}
}

// MaxTensorParallelGPUs is the largest STRICT_PACK group of TopologyStream.
const MaxTensorParallelGPUs = 8

// Next returns the next request.
func (s *TopologyStream) Next() TopologyRequest {
	rng := s.rng
	bundle := func(gpus, cpus int) resources.Set {
		return resources.Set{"GPU": resources.Amount(gpus) * resources.AmountScale, "CPU": resources.Amount(cpus) * resources.AmountScale}
	}
	repeat := func(count int, b resources.Set) []resources.Set {
		bundles := make([]resources.Set, count)
		for i := range bundles {
			bundles[i] = b
		}
		return bundles
	}
	var request placement.Request
	if rng.IntN(100) < 55 {
		size := []int{2, 4, MaxTensorParallelGPUs}[rng.IntN(3)]
		request = placement.Request{Strategy: placement.StrategyStrictPack, Bundles: repeat(size, bundle(1, 8))}
	} else if count := 4 + rng.IntN(13); rng.IntN(100) < 40 {
		request = placement.Request{Strategy: placement.StrategySpread, Bundles: repeat(count, bundle(8, 64))}
	} else {
		request = placement.Request{Strategy: placement.StrategySpread, Bundles: repeat(count, bundle(1, 8))}
	}
	return TopologyRequest{Request: request, Lifetime: 5 + rng.IntN(36)}
}

// TopologyBenchConfig describes a benchmark run.
type TopologyBenchConfig struct {
	Fleet TopologyFleetConfig
	// Streams is how many streams to run, seeded Seed, Seed+1, …
	Streams int
	// Requests is the length of each stream, one arrival per step.
	Requests int
	// MaxWaitSteps is how many steps a group that does not fit waits before it gives up.
	MaxWaitSteps int
	Seed         uint64
	Fabric       placement.FabricModel
	// LearnWorkload: the topology-aware run learns the workload from the arrivals
	// (placement.WorkloadHistogram, as the GCS does) and passes it to every decision, so
	// they run the fragmentation scoring stage. The blind run never does.
	LearnWorkload bool
}

// DefaultTopologyBenchConfig is the benchmark of `make bench`: the default fleet, 8
// streams of 2,000 requests, groups wait up to 20 steps, the default fabric model, the
// aware run learning the workload.
func DefaultTopologyBenchConfig() TopologyBenchConfig {
	return TopologyBenchConfig{Fleet: DefaultTopologyFleetConfig(), Streams: 8, Requests: 2000, MaxWaitSteps: 20, Seed: 1,
		Fabric: placement.DefaultFabricModel(), LearnWorkload: true}
}

// TopologyRunResult is one scheduler's (topology-aware or blind) runs of the streams,
// pooled.
type TopologyRunResult struct {
	// Placed, GaveUp and Infeasible count groups; PendingAtEnd still wait at the ends.
	Placed, GaveUp, Infeasible, PendingAtEnd int
	// Measured is how many placed groups have 2 GPUs or more, whose estimates
	// MeanBusGBps averages; Bottlenecks counts them by limiting hop.
	Measured    int
	MeanBusGBps float64
	Bottlenecks map[placement.LinkClass]int
	// MeasuredDataParallel and MeanDataParallelBusGBps are the same for the SPREAD
	// (data-parallel) groups alone: the groups whose placement crosses the fabric.
	MeasuredDataParallel    int
	MeanDataParallelBusGBps float64
	// DataParallelBottlenecks counts the measured SPREAD groups by the GPUs of their
	// bundles (1 or 8 in the stream) and limiting hop: which groups keep a rail inside
	// one scalable unit (LinkRail) and which cross the spine or rails.
	DataParallelBottlenecks map[DataParallelHop]int
	// MeanBusyGPUFraction is the share of GPUs held, averaged over the steps.
	MeanBusyGPUFraction float64
	// FreeGPUs, UnusableGPUs and FragmentationPct: at the streams' ends, in islands
	// large enough for the probe (see TopologyBenchResult.ProbeGPUs).
	FreeGPUs, UnusableGPUs int
	FragmentationPct       float64
	// The same over every island, small ones included (their free GPUs are unusable by
	// a larger probe whatever the placements were: that part measures the fleet).
	FreeGPUsAllIslands, UnusableGPUsAllIslands int
	FragmentationPctAllIslands                 float64
	// MeanFragmentationPct is FragmentationPct over samples taken every
	// fragmentationSampleEvery steps from step fragmentationSampleFrom of each stream,
	// each sample probed like a stream's end (the largest STRICT_PACK pending in either
	// run at that step, or MaxTensorParallelGPUs): Σ unusable / Σ free over the samples.
	// A stream's end is one sample; this is about 180 per stream.
	MeanFragmentationPct float64

	sampledFree, sampledUnusable int

	bandwidthSum, dataParallelBandwidthSum, busySum float64
	steps                                           int
}

// DataParallelHop is a key of TopologyRunResult.DataParallelBottlenecks.
type DataParallelHop struct {
	BundleGPUs int
	Hop        placement.LinkClass
}

// TopologyBenchResult compares the two schedulers.
type TopologyBenchResult struct {
	Aware, Blind TopologyRunResult
	// AllReduceRatio is Aware.MeanBusGBps / Blind.MeanBusGBps; DataParallelAllReduceRatio
	// the same over the data-parallel (SPREAD) groups alone.
	AllReduceRatio             float64
	DataParallelAllReduceRatio float64
	// ProbeGPUs holds, per stream, G: the whole GPUs of the largest STRICT_PACK request
	// pending at the end of the stream in either run (MaxTensorParallelGPUs if none is).
	// At a stream's end, each NVLink island that could hold G GPUs when idle has f
	// wholly free GPUs, of which a G-GPU STRICT_PACK can use floor(f/G)·G; the others
	// are free but unusable by it. FragmentationPct = 100 · Σ unusable / Σ free over
	// those islands and every stream (0 when none is free). Islands smaller than G are
	// left out: no placement could make them usable, so they would measure the fleet,
	// not the scheduler (FragmentationPctAllIslands counts them too). Both runs are
	// measured against the real islands: the blind scheduler's placements leave the
	// same kind of holes, it just does not see them.
	ProbeGPUs []int
}

// RunTopologyBench runs the streams topology-aware and topology-blind and compares
// them.
func RunTopologyBench(config TopologyBenchConfig) (TopologyBenchResult, error) {
	if err := config.Fabric.Validate(); err != nil {
		return TopologyBenchResult{}, err
	}
	fleet := NewTopologyFleet(config.Fleet)
	topology, err := placement.NewSnapshot(fleet)
	if err != nil {
		return TopologyBenchResult{}, err
	}
	var result TopologyBenchResult
	for stream := range uint64(max(config.Streams, 1)) {
		aware, blind, err := runTopologyStream(config, config.Seed+stream, fleet, topology)
		if err != nil {
			return TopologyBenchResult{}, err
		}
		probe := max(aware.largestPendingStrictPack(), blind.largestPendingStrictPack())
		if probe == 0 {
			probe = MaxTensorParallelGPUs
		}
		result.ProbeGPUs = append(result.ProbeGPUs, probe)
		aware.measureFragmentation(probe, aware.cluster.Snapshot().Nodes())
		blind.measureFragmentation(probe, blind.lowestFree.nodes(fleet))
		aware.result.PendingAtEnd, blind.result.PendingAtEnd = len(aware.pending), len(blind.pending)
		result.Aware.add(aware.result)
		result.Blind.add(blind.result)
	}
	result.Aware.finish()
	result.Blind.finish()
	if result.Blind.MeanDataParallelBusGBps > 0 {
		result.DataParallelAllReduceRatio = result.Aware.MeanDataParallelBusGBps / result.Blind.MeanDataParallelBusGBps
	}
	if result.Blind.MeanBusGBps > 0 {
		result.AllReduceRatio = result.Aware.MeanBusGBps / result.Blind.MeanBusGBps
	}
	return result, nil
}

// runTopologyStream runs one seeded stream through both schedulers.
func runTopologyStream(config TopologyBenchConfig, seed uint64, fleet []placement.Node, topology *placement.Snapshot) (aware, blind *topologyRun, err error) {
	awareSnapshot, err := placement.NewSnapshot(fleet)
	if err != nil {
		return nil, nil, err
	}
	blindSnapshot, err := placement.NewSnapshot(WithoutTopology(fleet))
	if err != nil {
		return nil, nil, err
	}
	aware = &topologyRun{config: config, topology: topology, cluster: NewCluster(awareSnapshot)}
	if config.LearnWorkload {
		aware.workload = placement.NewWorkloadHistogram()
	}
	blind = &topologyRun{config: config, topology: topology, cluster: NewCluster(blindSnapshot), lowestFree: newLowestFreeGPUs(fleet)}
	stream := NewTopologyStream(seed)
	for step := range config.Requests {
		arrival := stream.Next()
		for _, run := range []*topologyRun{aware, blind} {
			if err := run.step(step, arrival); err != nil {
				return nil, nil, err
			}
		}
		if step < fragmentationSampleFrom || step%fragmentationSampleEvery != 0 {
			continue
		}
		probe := max(aware.largestPendingStrictPack(), blind.largestPendingStrictPack())
		if probe == 0 {
			probe = MaxTensorParallelGPUs
		}
		aware.sampleFragmentation(probe, aware.cluster.Snapshot().Nodes())
		blind.sampleFragmentation(probe, blind.lowestFree.nodes(fleet))
	}
	return aware, blind, nil
}

// fragmentationSampleEvery is how many steps apart MeanFragmentationPct samples the
// fleet, from step fragmentationSampleFrom: by then groups placed at the start (they
// hold 5-40 steps) have left several times over and the fleet has filled.
const (
	fragmentationSampleEvery = 10
	fragmentationSampleFrom  = 200
)

// add pools one stream's result into r.
func (r *TopologyRunResult) add(stream TopologyRunResult) {
	r.Placed += stream.Placed
	r.GaveUp += stream.GaveUp
	r.Infeasible += stream.Infeasible
	r.PendingAtEnd += stream.PendingAtEnd
	r.Measured += stream.Measured
	r.bandwidthSum += stream.bandwidthSum
	r.MeasuredDataParallel += stream.MeasuredDataParallel
	r.dataParallelBandwidthSum += stream.dataParallelBandwidthSum
	r.busySum += stream.busySum
	r.steps += stream.steps
	for class, count := range stream.Bottlenecks {
		if r.Bottlenecks == nil {
			r.Bottlenecks = make(map[placement.LinkClass]int)
		}
		r.Bottlenecks[class] += count
	}
	for key, count := range stream.DataParallelBottlenecks {
		if r.DataParallelBottlenecks == nil {
			r.DataParallelBottlenecks = make(map[DataParallelHop]int)
		}
		r.DataParallelBottlenecks[key] += count
	}
	r.FreeGPUs += stream.FreeGPUs
	r.UnusableGPUs += stream.UnusableGPUs
	r.FreeGPUsAllIslands += stream.FreeGPUsAllIslands
	r.UnusableGPUsAllIslands += stream.UnusableGPUsAllIslands
	r.sampledFree += stream.sampledFree
	r.sampledUnusable += stream.sampledUnusable
}

// finish computes the means and percentages of the pooled sums.
func (r *TopologyRunResult) finish() {
	percent := func(part, whole int) float64 {
		if whole == 0 {
			return 0
		}
		return 100 * float64(part) / float64(whole)
	}
	if r.Measured > 0 {
		r.MeanBusGBps = r.bandwidthSum / float64(r.Measured)
	}
	if r.MeasuredDataParallel > 0 {
		r.MeanDataParallelBusGBps = r.dataParallelBandwidthSum / float64(r.MeasuredDataParallel)
	}
	if r.steps > 0 {
		r.MeanBusyGPUFraction = r.busySum / float64(r.steps)
	}
	r.FragmentationPct = percent(r.UnusableGPUs, r.FreeGPUs)
	r.FragmentationPctAllIslands = percent(r.UnusableGPUsAllIslands, r.FreeGPUsAllIslands)
	r.MeanFragmentationPct = percent(r.sampledUnusable, r.sampledFree)
}

// topologyRun is one run of the stream.
type topologyRun struct {
	config   TopologyBenchConfig
	topology *placement.Snapshot // the real topology, for the estimates
	cluster  *Cluster
	// lowestFree assigns GPU indices in the blind run; nil in the aware run.
	lowestFree *lowestFreeGPUs
	// workload learns the arrivals' shapes; nil: decisions without a workload.
	workload *placement.WorkloadHistogram
	pending  []pendingGroup
	live     []liveGroup
	result   TopologyRunResult
}

type pendingGroup struct {
	request TopologyRequest
	since   int
}

type liveGroup struct {
	id      GroupID
	leaves  int
	request placement.Request
	// plan is where the group went, with the blind run's GPU indices filled in.
	plan placement.Plan
}

func (r *topologyRun) step(step int, arrival TopologyRequest) error {
	kept := r.live[:0]
	for _, group := range r.live {
		if group.leaves > step {
			kept = append(kept, group)
			continue
		}
		if err := r.cluster.Remove(group.id); err != nil {
			return err
		}
		if r.lowestFree != nil {
			r.lowestFree.release(group.request, group.plan)
		}
	}
	r.live = kept
	if r.workload != nil {
		r.workload.ObserveRequest(&arrival.Request)
	}
	queue := append(r.pending, pendingGroup{request: arrival, since: step})
	var waiting []pendingGroup
	for _, p := range queue {
		placed, err := r.try(step, p.request)
		switch {
		case err != nil:
			return err
		case placed:
		case step-p.since >= r.config.MaxWaitSteps:
			r.result.GaveUp++
		default:
			waiting = append(waiting, p)
		}
	}
	r.pending = waiting
	total, available := r.cluster.Snapshot().ResourceSummary()
	if total["GPU"] > 0 {
		r.result.busySum += 1 - float64(available["GPU"])/float64(total["GPU"])
	}
	r.result.steps++
	return nil
}

// try schedules one group; false when it waits (not now), and an infeasible one is
// counted and dropped (reported as placed=true so it leaves the queue).
func (r *topologyRun) try(step int, request TopologyRequest) (bool, error) {
	scheduled := request.Request
	if r.workload != nil {
		workload := r.workload.Distribution()
		scheduled.Workload = &workload
	}
	plan, err := placement.Schedule(r.cluster.Snapshot(), scheduled)
	var unschedulable *placement.UnschedulableError
	switch {
	case errors.As(err, &unschedulable) && unschedulable.Kind == placement.NotNow:
		return false, nil
	case errors.As(err, &unschedulable):
		r.result.Infeasible++
		return true, nil
	case err != nil:
		return false, fmt.Errorf("placementsim: topology bench: %w", err)
	}
	group, err := r.cluster.Place(request.Request, plan)
	if err != nil {
		return false, fmt.Errorf("placementsim: topology bench: placing a plan: %w", err)
	}
	if r.lowestFree != nil {
		r.lowestFree.assign(request.Request, plan)
	}
	r.live = append(r.live, liveGroup{id: group.ID, leaves: step + request.Lifetime, request: request.Request, plan: plan})
	r.result.Placed++
	estimate, err := placement.EstimateAllReduce(r.topology, plan.Placements, r.config.Fabric)
	if err != nil {
		return false, err
	}
	if estimate.GPUs >= 2 {
		r.result.Measured++
		r.result.bandwidthSum += estimate.BusGBps
		if request.Request.Strategy == placement.StrategySpread {
			r.result.MeasuredDataParallel++
			r.result.dataParallelBandwidthSum += estimate.BusGBps
			if r.result.DataParallelBottlenecks == nil {
				r.result.DataParallelBottlenecks = make(map[DataParallelHop]int)
			}
			gpus := int(request.Request.Bundles[0]["GPU"] / resources.AmountScale)
			r.result.DataParallelBottlenecks[DataParallelHop{BundleGPUs: gpus, Hop: estimate.Bottleneck}]++
		}
		if r.result.Bottlenecks == nil {
			r.result.Bottlenecks = make(map[placement.LinkClass]int)
		}
		r.result.Bottlenecks[estimate.Bottleneck]++
	}
	return true, nil
}

func (r *topologyRun) largestPendingStrictPack() int {
	largest := 0
	for _, p := range r.pending {
		if p.request.Request.Strategy != placement.StrategyStrictPack {
			continue
		}
		gpus := 0
		for _, bundle := range p.request.Request.Bundles {
			gpus += int(bundle["GPU"] / resources.AmountScale)
		}
		largest = max(largest, gpus)
	}
	return largest
}

// measureFragmentation counts the end-of-stream free and unusable GPUs (see
// TopologyBenchResult.ProbeGPUs) from nodes, with their GPUs' free shares, and the real
// islands of r.topology.
func (r *topologyRun) measureFragmentation(probe int, nodes []placement.Node) {
	r.countFragmentation(probe, nodes, &r.result.FreeGPUs, &r.result.UnusableGPUs, &r.result.FreeGPUsAllIslands, &r.result.UnusableGPUsAllIslands)
}

// sampleFragmentation adds one sample of MeanFragmentationPct (the islands that fit the
// probe, as at the ends).
func (r *topologyRun) sampleFragmentation(probe int, nodes []placement.Node) {
	var allFree, allUnusable int
	r.countFragmentation(probe, nodes, &r.result.sampledFree, &r.result.sampledUnusable, &allFree, &allUnusable)
}

// countFragmentation adds to free and unusable the free GPUs and those unusable by a
// probe-GPU STRICT_PACK in the islands that could hold it, and to allFree and
// allUnusable the same over every island.
func (r *topologyRun) countFragmentation(probe int, nodes []placement.Node, free, unusable, allFree, allUnusable *int) {
	freeIn, size := make(map[string]int), make(map[string]int)
	for _, node := range nodes {
		real, _ := r.topology.Node(node.ID)
		for _, gpu := range real.GPUs {
			size[islandKey(real, gpu.Index)]++
		}
		for _, gpu := range node.GPUs {
			if gpu.Available == resources.AmountScale {
				freeIn[islandKey(real, gpu.Index)]++
			}
		}
	}
	for island, count := range freeIn {
		left := count - count/probe*probe
		*allFree += count
		*allUnusable += left
		if size[island] >= probe {
			*free += count
			*unusable += left
		}
	}
}

// lowestFreeGPUs is what a raylet does when the scheduler names no GPUs: each bundle
// takes the lowest-index GPUs that are wholly free (a fraction: the lowest GPU with
// room), blind to islands and rails.
type lowestFreeGPUs struct {
	free map[placement.NodeID][]resources.Amount // per node, per GPU index
}

func newLowestFreeGPUs(fleet []placement.Node) *lowestFreeGPUs {
	l := &lowestFreeGPUs{free: make(map[placement.NodeID][]resources.Amount, len(fleet))}
	for _, node := range fleet {
		shares := make([]resources.Amount, len(node.GPUs))
		for _, gpu := range node.GPUs {
			shares[gpu.Index] = gpu.Available
		}
		l.free[node.ID] = shares
	}
	return l
}

// assign fills in the plan's GPU indices (the plan's placements are updated in place).
func (l *lowestFreeGPUs) assign(request placement.Request, plan placement.Plan) {
	for i := range plan.Placements {
		p := &plan.Placements[i]
		amount, shares := request.Bundles[p.BundleIndex]["GPU"], l.free[p.NodeID]
		switch {
		case amount <= 0:
		case amount < resources.AmountScale:
			for index, free := range shares {
				if free >= amount {
					shares[index] -= amount
					p.GPUIndices = []int{index}
					break
				}
			}
		default:
			want := int(amount / resources.AmountScale)
			for index, free := range shares {
				if len(p.GPUIndices) < want && free == resources.AmountScale {
					shares[index] = 0
					p.GPUIndices = append(p.GPUIndices, index)
				}
			}
		}
	}
}

func (l *lowestFreeGPUs) release(request placement.Request, plan placement.Plan) {
	for _, p := range plan.Placements {
		share := gpuShare(request.Bundles[p.BundleIndex])
		for _, index := range p.GPUIndices {
			l.free[p.NodeID][index] += share
		}
	}
}

// nodes returns the fleet with the blind run's GPU free shares.
func (l *lowestFreeGPUs) nodes(fleet []placement.Node) []placement.Node {
	out := make([]placement.Node, len(fleet))
	for i, node := range fleet {
		node.GPUs = append([]placement.GPU(nil), node.GPUs...)
		for g := range node.GPUs {
			node.GPUs[g].Available = l.free[node.ID][node.GPUs[g].Index]
		}
		out[i] = node
	}
	return out
}
