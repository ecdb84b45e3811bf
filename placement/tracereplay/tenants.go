package tracereplay

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// The tenant replay: the trace's tasks as the work of tenants sharing the cluster, each
// task a one-bundle workload of its tenant's queue, admitted by admission.Decide (quotas,
// cohort borrowing, fair sharing, EASY backfill) and placed by placement.Schedule on a
// simulated clock. A task runs for its trace duration (deletion_time − creation_time,
// at least a second) from the moment it is admitted, which is also its declared runtime.
//
// At the trace's own times the cluster never saturates (the default list asks for at
// most 66 GPUs at once of the GPU nodes' 6,212, and all its tasks together ask for
// fewer GPUs than the cluster has), so the arrivals are compressed and the trace
// repeated: copy c of the trace arrives at c × span + creation_time / TimeScale, where
// span is the trace's last creation_time / TimeScale; durations stay the trace's. The
// measure is taken over the saturation window: from the first moment the tasks arrived
// so far would ask for more GPUs than the cluster has if each ran from its arrival for
// its duration, to the last arrival.

// TenantConfig is one tenant replay.
type TenantConfig struct {
	Nodes []NodeSpec
	Tasks []Task
	// Queues is the queue configuration; TenantOf names a task's queue.
	Queues   *queues.Config
	TenantOf func(*Task) string
	// TimeScale divides the trace's arrival times (the arrival compression); Copies is
	// how many times the trace is replayed back to back.
	TimeScale float64
	Copies    int
	// TickS is the simulated time between admission cycles, in seconds.
	TickS int64
	// Baseline runs Kueue's BestEffortFIFO without raygo's additions: no reservations
	// (EASY backfill off) and fair sharing off (Kueue's classic order).
	Baseline bool
}

// TenantResult is what one tenant replay measured over its saturation window.
type TenantResult struct {
	// WindowStartS and WindowEndS bound the saturation window (simulated seconds).
	WindowStartS, WindowEndS int64
	// PeakDemandGPUs is the most GPUs the arrived tasks would hold at once if each ran
	// from its arrival (the unconstrained demand), CapacityGPUs the cluster's.
	PeakDemandGPUs, CapacityGPUs float64
	// AllocationPct is the mean share of the cluster's GPUs held, over the window's ticks.
	AllocationPct float64
	// Per tenant: mean GPUs held and asked (held plus waiting) over the window, and the
	// wait from arrival to admission of the tasks that arrived in the window, in seconds
	// (a task still waiting at the end counts its wait so far).
	UsageGPUs, DemandGPUs map[string]float64
	WaitP50S, WaitP95S    map[string]float64
	// Jain is Jain's fairness index over the tenants with demand of usage ÷ entitlement,
	// where a tenant's entitlement is the smaller of its nominal GPU quota and its mean
	// demand (a tenant asking for less than its quota is owed what it asks).
	Jain float64
	// Arrived, Admitted count tasks up to the window's end; Decisions the admission cycles.
	Arrived, Admitted, Decisions int
}

// tenantTask is one arrival of the stream.
type tenantTask struct {
	task      *Task
	id        string
	queue     string
	arrivalMs int64
	runMs     int64
	bundles   []resources.Set
	request   placement.Request
	gpuMilli  int64
	admitted  bool
	startMs   int64
	// hash identifies the task in a heldSignature.
	hash uint64
}

// RunTenants replays the trace through admission and placement.
func RunTenants(config TenantConfig) (TenantResult, error) {
	if config.TimeScale <= 0 || config.Copies <= 0 || config.TickS <= 0 {
		return TenantResult{}, fmt.Errorf("tracereplay: TimeScale %g, Copies %d and TickS %d must be positive", config.TimeScale, config.Copies, config.TickS)
	}
	snapshot, _, err := newSnapshot(config.Nodes)
	if err != nil {
		return TenantResult{}, err
	}
	var capacityMilli int64
	for _, n := range config.Nodes {
		capacityMilli += int64(n.GPUs) * MilliPerGPU
	}
	stream := tenantStream(config)
	if len(stream) == 0 || capacityMilli == 0 {
		return TenantResult{}, fmt.Errorf("tracereplay: no tasks or no GPUs")
	}
	result := TenantResult{CapacityGPUs: float64(capacityMilli) / MilliPerGPU, UsageGPUs: map[string]float64{}, DemandGPUs: map[string]float64{},
		WaitP50S: map[string]float64{}, WaitP95S: map[string]float64{}}
	startMs, peak, ok := saturationStart(stream, capacityMilli)
	result.PeakDemandGPUs = float64(peak) / MilliPerGPU
	if !ok {
		return result, fmt.Errorf("tracereplay: the stream never asks for more than the cluster's %g GPUs (at most %g at once): compress more", result.CapacityGPUs, result.PeakDemandGPUs)
	}
	endMs := stream[len(stream)-1].arrivalMs
	result.WindowStartS, result.WindowEndS = startMs/1000, endMs/1000

	cfg := *config.Queues
	if config.Baseline {
		cfg.FairSharing.Enable = false
	}
	capacity := &replayCapacity{snapshot: snapshot, byBundle: map[*resources.Set]*tenantTask{}, plans: map[*tenantTask]placement.Plan{}, failed: map[string]bool{}}
	ledger := admission.NewLedger()
	var waiting []*tenantTask
	var running runningHeap
	var usedMilli int64
	usage, demand := map[string]int64{}, map[string]int64{}
	samples := 0
	var allocationSum float64
	usageSum, demandSum := map[string]float64{}, map[string]float64{}
	next := 0
	tickMs := config.TickS * 1000
	// Cycles every tick until the one at or past the last arrival.
	for nowMs := int64(0); nowMs < endMs+tickMs; nowMs += tickMs {
		// Departures first: what ended by now gives back its placement and its charge.
		for running.Len() > 0 && running[0].end <= nowMs {
			r := heap.Pop(&running).(runningTask)
			if err := snapshot.Release(r.t.bundles, r.plan); err != nil {
				return result, fmt.Errorf("tracereplay: release %s: %w", r.t.id, err)
			}
			ledger.Remove(r.t.id)
			usedMilli -= r.t.gpuMilli
			usage[r.t.queue] -= r.t.gpuMilli
			demand[r.t.queue] -= r.t.gpuMilli
		}
		for ; next < len(stream) && stream[next].arrivalMs <= nowMs; next++ {
			t := &stream[next]
			waiting = append(waiting, t)
			demand[t.queue] += t.gpuMilli
			result.Arrived++
		}
		if len(waiting) > 0 {
			capacity.start(nowMs, running)
			work := make([]admission.Workload, len(waiting))
			for i, t := range waiting {
				work[i] = admission.Workload{ID: t.id, Queue: t.queue, Arrival: t.arrivalMs, Bundles: t.bundles, MaxRuntime: t.runMs}
				capacity.byBundle[&t.bundles[0]] = t
			}
			decision := admission.Decide(admission.Input{Config: &cfg, Usage: ledger.Usage(), Pending: work, Capacity: capacity, WithoutReservations: config.Baseline})
			result.Decisions++
			for _, w := range decision.Admitted {
				t := capacity.byBundle[&w.Bundles[0]]
				plan, placed := capacity.plans[t]
				if !placed {
					return result, fmt.Errorf("tracereplay: %s admitted without a plan", t.id)
				}
				charge, _ := w.Charge()
				if err := ledger.Admit(t.id, t.queue, charge); err != nil {
					return result, err
				}
				t.admitted, t.startMs = true, nowMs
				heap.Push(&running, runningTask{t: t, plan: plan, end: nowMs + t.runMs})
				usedMilli += t.gpuMilli
				usage[t.queue] += t.gpuMilli
				result.Admitted++
			}
			waiting = slices.DeleteFunc(waiting, func(t *tenantTask) bool { return t.admitted })
			clear(capacity.byBundle)
		}
		if nowMs >= startMs {
			samples++
			allocationSum += float64(usedMilli) / float64(capacityMilli)
			for q := range demand {
				usageSum[q] += float64(usage[q]) / MilliPerGPU
				demandSum[q] += float64(demand[q]) / MilliPerGPU
			}
		}
	}
	if samples == 0 {
		return result, fmt.Errorf("tracereplay: no tick inside the saturation window")
	}
	result.AllocationPct = 100 * allocationSum / float64(samples)
	for q := range demandSum {
		result.UsageGPUs[q] = usageSum[q] / float64(samples)
		result.DemandGPUs[q] = demandSum[q] / float64(samples)
	}
	result.Jain = jainOfEntitlements(config.Queues, result.UsageGPUs, result.DemandGPUs)
	waits := map[string][]float64{}
	for i := range stream[:next] {
		t := &stream[i]
		if t.arrivalMs < startMs {
			continue
		}
		until := endMs
		if t.admitted {
			until = t.startMs
		}
		waits[t.queue] = append(waits[t.queue], float64(until-t.arrivalMs)/1000)
	}
	for q, list := range waits {
		sort.Float64s(list)
		result.WaitP50S[q], result.WaitP95S[q] = percentile(list, 0.50), percentile(list, 0.95)
	}
	return result, nil
}

// tenantStream is the compressed, repeated trace in arrival order (ties: trace order).
func tenantStream(config TenantConfig) []tenantTask {
	var lastCreation int64
	for i := range config.Tasks {
		lastCreation = max(lastCreation, config.Tasks[i].CreationS)
	}
	spanMs := int64(math.Ceil(float64(lastCreation) * 1000 / config.TimeScale))
	stream := make([]tenantTask, 0, len(config.Tasks)*config.Copies)
	for c := range config.Copies {
		for i := range config.Tasks {
			task := &config.Tasks[i]
			request, _ := requestOf(task)
			stream = append(stream, tenantTask{task: task, id: strconv.Itoa(c) + "/" + strconv.Itoa(i), queue: config.TenantOf(task),
				arrivalMs: int64(c)*spanMs + int64(float64(task.CreationS)*1000/config.TimeScale),
				runMs:     max(task.DeletionS-task.CreationS, 1) * 1000,
				bundles:   request.Bundles, request: request, gpuMilli: task.GPUMilliTotal(),
				hash: splitmix64(uint64(len(stream)) + 1)})
		}
	}
	slices.SortStableFunc(stream, func(a, b tenantTask) int { return cmp.Compare(a.arrivalMs, b.arrivalMs) })
	return stream
}

// saturationStart is the first arrival at which the unconstrained demand (every task
// running from its arrival for its duration) exceeds capacity, and that demand's peak
// over the stream.
func saturationStart(stream []tenantTask, capacityMilli int64) (int64, int64, bool) {
	type change struct{ at, milli int64 }
	changes := make([]change, 0, 2*len(stream))
	for _, t := range stream {
		changes = append(changes, change{t.arrivalMs, t.gpuMilli}, change{t.arrivalMs + t.runMs, -t.gpuMilli})
	}
	// Ends before starts at one instant: a task that ends frees its GPUs first.
	slices.SortFunc(changes, func(a, b change) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.milli, b.milli)) })
	var inFlight, peak int64
	start, found := int64(0), false
	last := stream[len(stream)-1].arrivalMs
	for _, c := range changes {
		if c.at > last {
			break
		}
		inFlight += c.milli
		peak = max(peak, inFlight)
		if !found && inFlight > capacityMilli {
			start, found = c.at, true
		}
	}
	return start, peak, found
}

// jainOfEntitlements is Jain's index of usage ÷ min(nominal GPU quota, demand) over the
// queues with demand.
func jainOfEntitlements(config *queues.Config, usage, demand map[string]float64) float64 {
	var sum, squares float64
	n := 0
	for q, asked := range demand {
		if asked <= 0 {
			continue
		}
		entitled := asked
		if queue, ok := config.Queue(q); ok {
			if quota, limited := queue.Quotas()[resources.GPU]; limited {
				entitled = min(entitled, quota.Nominal.Float())
			}
		}
		if entitled <= 0 {
			continue
		}
		x := usage[q] / entitled
		sum += x
		squares += x * x
		n++
	}
	if n == 0 || squares == 0 {
		return 0
	}
	return sum * sum / (float64(n) * squares)
}

// splitmix64 spreads x over 64 bits (Steele et al.'s SplitMix64 finalizer).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(math.Ceil(p*float64(len(sorted))))-1)]
}

// runningTask is an admitted task until its end (simulated ms).
type runningTask struct {
	t    *tenantTask
	plan placement.Plan
	end  int64
}

type runningHeap []runningTask

func (h runningHeap) Len() int           { return len(h) }
func (h runningHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h runningHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runningHeap) Push(x any)        { *h = append(*h, x.(runningTask)) }
func (h *runningHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// replayCapacity answers admission's questions with placement over the replay's
// snapshot, as the GCS's viewCapacity does over its view: Fit schedules the task's
// one-bundle group, Take reserves the plan, and a waiting task's reservation is timed
// from the declared ends of running work.
type replayCapacity struct {
	snapshot *placement.Snapshot
	byBundle map[*resources.Set]*tenantTask
	plans    map[*tenantTask]placement.Plan
	// running and taken: work holding capacity with its end; nowMs is the cycle's time.
	running []runningTask
	taken   map[*tenantTask]int64
	nowMs   int64
	maxFree resources.Set
	// failed: bundles that did not fit in this cycle, by key (a later identical bundle
	// cannot fit either: within a cycle capacity only shrinks, Release undoing a Take).
	failed map[string]bool
	// fitsAt memoizes FitsAt by gang and time: its answer depends only on the work taken
	// in this cycle that is still held then (the running work is fixed in a cycle).
	fitsAt map[fitsAtKey]fitsAtAnswer
}

type fitsAtKey struct {
	gang *resources.Set
	at   int64
}

type fitsAtAnswer struct {
	held heldSignature
	fits bool
}

// heldSignature names a set of taken tasks: their count and the xor of their ids' hashes.
type heldSignature struct {
	count int
	hash  uint64
}

var _ admission.Capacity = (*replayCapacity)(nil)

func (c *replayCapacity) start(nowMs int64, running runningHeap) {
	c.nowMs, c.running, c.taken, c.maxFree = nowMs, running, map[*tenantTask]int64{}, nil
	clear(c.plans)
	clear(c.failed)
	c.fitsAt = map[fitsAtKey]fitsAtAnswer{}
}

// heldAt is the signature of the tasks taken in this cycle that still run at at.
func (c *replayCapacity) heldAt(at int64) heldSignature {
	var s heldSignature
	for t, end := range c.taken {
		if end > at {
			s.count++
			s.hash ^= t.hash
		}
	}
	return s
}

func shapeKey(t *tenantTask) string {
	return fmt.Sprint(t.bundles[0], t.task.GPUModels)
}

func (c *replayCapacity) Fit(gang []resources.Set) pending.Reason {
	t := c.byBundle[&gang[0]]
	if t == nil {
		return pending.Internal
	}
	if c.maxFree == nil {
		c.maxFree = c.snapshot.MaxAvailable()
	}
	key := shapeKey(t)
	if c.failed[key] || placement.CannotFitNow(t.request, c.maxFree) {
		return pending.NoResources
	}
	if _, err := placement.Schedule(c.snapshot, t.request); err != nil {
		c.failed[key] = true
		return pending.NoResources
	}
	return ""
}

func (c *replayCapacity) Take(w admission.Workload) {
	t := c.byBundle[&w.Bundles[0]]
	plan, err := placement.Schedule(c.snapshot, t.request)
	if err != nil || c.snapshot.Reserve(t.bundles, plan) != nil {
		return
	}
	c.plans[t] = plan
	c.taken[t] = c.nowMs + t.runMs
	c.maxFree = nil
}

func (c *replayCapacity) Release(w admission.Workload) {
	t := c.byBundle[&w.Bundles[0]]
	if plan, ok := c.plans[t]; ok {
		_ = c.snapshot.Release(t.bundles, plan)
		delete(c.plans, t)
		delete(c.taken, t)
		c.maxFree = nil
	}
}

// FitsAt gives back the placements of the work that ends by at, asks placement, and
// takes them again.
func (c *replayCapacity) FitsAt(gang []resources.Set, at int64) bool {
	t := c.byBundle[&gang[0]]
	key, signature := fitsAtKey{&gang[0], at}, c.heldAt(at)
	if answer, ok := c.fitsAt[key]; ok && answer.held == signature {
		return answer.fits
	}
	type held struct {
		bundles []resources.Set
		plan    placement.Plan
	}
	var freed []held
	for _, r := range c.running {
		if r.end <= at && c.snapshot.Release(r.t.bundles, r.plan) == nil {
			freed = append(freed, held{r.t.bundles, r.plan})
		}
	}
	for taken, end := range c.taken {
		if end <= at && c.snapshot.Release(taken.bundles, c.plans[taken]) == nil {
			freed = append(freed, held{taken.bundles, c.plans[taken]})
		}
	}
	_, err := placement.Schedule(c.snapshot, t.request)
	for _, h := range freed {
		_ = c.snapshot.Reserve(h.bundles, h.plan)
	}
	c.fitsAt[key] = fitsAtAnswer{signature, err == nil}
	return err == nil
}

// EarliestFit is the first declared end of running work after which the gang fits.
func (c *replayCapacity) EarliestFit(gang []resources.Set) (int64, bool) {
	ends := make([]int64, 0, len(c.running)+len(c.taken))
	for _, r := range c.running {
		ends = append(ends, max(r.end, c.nowMs))
	}
	for _, end := range c.taken {
		ends = append(ends, end)
	}
	return admission.FirstFitAmong(ends, func(at int64) bool { return c.FitsAt(gang, at) })
}
