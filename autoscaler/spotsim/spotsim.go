// Package spotsim simulates a GPU training cluster run on spot nodes or on on-demand
// nodes only, for the spot_cost_saving_pct benchmark. The real planner
// (autoscaler.Decide, through the reconciler) and the real reconciler
// (autoscaler/reconciler) drive the in-memory provider (provider.Memory) under a
// simulated clock; around them a small model of the GCS (reconciler.FakeCluster fed each
// tick) registers booted instances as nodes, gives each training job whole 8-GPU nodes
// (a gang: all of its nodes or none), advances and checkpoints its work, and delivers
// spot interruption notices: the node drains, its job loses the work since its last
// checkpoint, pays a restart cost once it runs again, and waits for a replacement node
// that the reconciler launches from the job's demand; the node dies at the notice's
// deadline.
//
// The package does no I/O and reads no real clock: the same Params give the same Result.
package spotsim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/raygo-dev/raygo/autoscaler"
	"github.com/raygo-dev/raygo/autoscaler/provider"
	"github.com/raygo-dev/raygo/autoscaler/reconciler"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Params describe one simulated week (or any span) of training work and its prices.
type Params struct {
	// OnDemandPerHour and SpotPerHour are the prices of one 8-GPU node per hour.
	OnDemandPerHour, SpotPerHour float64
	// Checkpoint is how often a running job saves its progress; an interrupted job
	// resumes from its last checkpoint.
	Checkpoint time.Duration
	// RestartCost is how long a job that was interrupted spends, once all its nodes are
	// back, before it makes progress again (processes start, checkpoint load, NCCL init).
	RestartCost time.Duration
	// Boot is how long a launched instance takes until its raylet registers.
	Boot time.Duration
	// Notice is the time between a spot interruption notice and the node's end (EC2: 2 min).
	Notice time.Duration
	// IdleTimeout is the node types' idle_timeout_s.
	IdleTimeout time.Duration
	// Step is the simulated time between two reconciler ticks.
	Step time.Duration
	// Span is the time over which the jobs arrive (a week).
	Span time.Duration
	// Jobs is the training mix that arrives during Span.
	Jobs []JobClass
	// MaxWorkers bounds the cluster's nodes (and each type's).
	MaxWorkers int
	// Seed fixes the arrival times and the interruptions.
	Seed uint64
}

// JobClass is Count training jobs, each on Nodes whole 8-GPU nodes for Hours of work.
type JobClass struct {
	Name  string
	Count int
	Nodes int
	Hours float64
}

// Market is what kind of nodes the cluster may launch.
type Market int

const (
	// OnDemand: one on-demand node type.
	OnDemand Market = iota
	// Spot: a spot node type and its on-demand twin; the planner launches the cheaper.
	Spot
)

// Result is what one run cost and what happened in it.
type Result struct {
	// Cost is the price of every instance-step, from launch to termination.
	Cost float64
	// NodeHours are the instance hours paid for.
	NodeHours float64
	// Makespan is the time from the start until the last job finished.
	Makespan time.Duration
	// JobsDone counts finished jobs (all of them when Run returns no error).
	JobsDone int
	// Work is the node time of useful work done (each job's hours × its nodes).
	Work time.Duration
	// Notices counts the interruption notices delivered; HitJobs those that hit a
	// node a job ran on.
	Notices, HitJobs int
	// LostWork is the node time of work redone after interruptions (a job's progress
	// since its last checkpoint × its nodes).
	LostWork time.Duration
	// Launched counts the instances launched, by node type.
	Launched map[string]int64
}

// SavingPct is the saving of a spot run against an on-demand run of the same work, in
// percent of the on-demand cost.
func SavingPct(onDemand, spot Result) float64 {
	return 100 * (1 - spot.Cost/onDemand.Cost)
}

// Node type names of the simulation.
const (
	OnDemandType = "h100-on-demand"
	SpotType     = "h100-spot"
)

// gpusPerNode is the GPU count of one node (p5.48xlarge: 8 H100).
const gpusPerNode = 8

var nodeResources = resources.Set{"CPU": 192 * resources.AmountScale, "GPU": gpusPerNode * resources.AmountScale}

type job struct {
	id      string
	nodes   int
	work    time.Duration
	arrival time.Time
	held    []string
	// done is the progress; restart what is left of the restart cost.
	done, restart time.Duration
	finished      bool
}

type node struct {
	id, instance, nodeType string
	job                    string
	idleSince              time.Time
	// deadline is when an interrupted node ends; zero when not interrupted.
	deadline time.Time
}

type sim struct {
	p       Params
	market  Market
	now     time.Time
	start   time.Time
	mem     *provider.Memory
	cluster *reconciler.FakeCluster
	rec     *reconciler.Reconciler
	jobs    []*job
	nodes   map[string]*node // by node id
	notices []time.Time      // pending interruption times, sorted
	rng     *rand.Rand
	res     Result
}

// Run simulates the jobs of p on the market's nodes with perDay spot interruption
// notices a day (ignored for OnDemand) until every job has finished and every instance
// has been terminated. It fails when that takes more than eight times p.Span.
func Run(ctx context.Context, p Params, market Market, perDay int) (Result, error) {
	if p.Step <= 0 || p.Checkpoint <= 0 || p.Span <= 0 || p.MaxWorkers <= 0 {
		return Result{}, errors.New("spotsim: Step, Checkpoint, Span and MaxWorkers must be positive")
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	s := &sim{p: p, market: market, now: start, start: start, nodes: map[string]*node{},
		rng: rand.New(rand.NewPCG(p.Seed, 0x5107))}
	s.mem = provider.NewMemory(func() time.Time { return s.now })
	s.cluster = reconciler.NewFakeCluster()
	s.rec = reconciler.New(reconciler.Config{
		Types: s.types(), MaxWorkers: p.MaxWorkers, UpscalingSpeed: 1, Tick: p.Step,
		Now: func() time.Time { return s.now },
	}, s.cluster, s.mem)
	s.jobs = arrivals(p, start)
	if market == Spot {
		s.notices = noticeTimes(p.Seed, perDay, start, 8*p.Span)
	}
	limit := start.Add(8 * p.Span)
	for !s.finished(ctx) {
		if s.now.After(limit) {
			return s.res, fmt.Errorf("spotsim: %d of %d jobs finished after %s", s.res.JobsDone, len(s.jobs), limit.Sub(start))
		}
		if err := s.step(ctx); err != nil {
			return s.res, err
		}
	}
	s.res.Launched = s.cluster.Last.Launched
	return s.res, nil
}

func (s *sim) types() []autoscaler.NodeType {
	nodeType := func(name string, price float64) autoscaler.NodeType {
		return autoscaler.NodeType{
			Name: name, Resources: nodeResources, GPUModel: "dgx-h100", GPUIslands: []int{gpusPerNode},
			PricePerHour: price, MaxWorkers: s.p.MaxWorkers, IdleTimeout: s.p.IdleTimeout,
			Labels: map[string]string{nodelabel.NodeType: name},
		}
	}
	if s.market == OnDemand {
		return []autoscaler.NodeType{nodeType(OnDemandType, s.p.OnDemandPerHour)}
	}
	return []autoscaler.NodeType{nodeType(SpotType, s.p.SpotPerHour), nodeType(OnDemandType, s.p.OnDemandPerHour)}
}

func (s *sim) price(nodeType string) float64 {
	if nodeType == SpotType {
		return s.p.SpotPerHour
	}
	return s.p.OnDemandPerHour
}

// arrivals spreads each class's jobs uniformly at random over the span, in arrival order.
func arrivals(p Params, start time.Time) []*job {
	rng := rand.New(rand.NewPCG(p.Seed, 0xa11))
	var jobs []*job
	for _, class := range p.Jobs {
		for i := range class.Count {
			jobs = append(jobs, &job{
				id:    fmt.Sprintf("%s-%d", class.Name, i),
				nodes: class.Nodes, work: time.Duration(class.Hours * float64(time.Hour)),
				arrival: start.Add(time.Duration(rng.Int64N(int64(p.Span)))),
			})
		}
	}
	slices.SortStableFunc(jobs, func(a, b *job) int { return a.arrival.Compare(b.arrival) })
	return jobs
}

// noticeTimes draws perDay notice times in each day from that day's own random stream,
// so that the notices of a lower rate are a subset of a higher rate's.
func noticeTimes(seed uint64, perDay int, start time.Time, span time.Duration) []time.Time {
	var out []time.Time
	for day := 0; time.Duration(day)*24*time.Hour < span; day++ {
		rng := rand.New(rand.NewPCG(seed, 0xd00+uint64(day)))
		for range perDay {
			out = append(out, start.Add(time.Duration(day)*24*time.Hour+time.Duration(rng.Int64N(int64(24*time.Hour)))))
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

func (s *sim) finished(ctx context.Context) bool {
	if s.res.JobsDone < len(s.jobs) {
		return false
	}
	left, _ := s.mem.Instances(ctx)
	return len(left) == 0
}

// step advances the simulated cluster by one Step and runs one reconciler tick.
func (s *sim) step(ctx context.Context) error {
	// Bill the instances alive during this step.
	insts, err := s.mem.Instances(ctx)
	if err != nil {
		return err
	}
	for _, inst := range insts {
		s.res.Cost += s.price(inst.NodeType) * s.p.Step.Hours()
		s.res.NodeHours += s.p.Step.Hours()
	}
	s.now = s.now.Add(s.p.Step)
	s.register(insts)
	s.interrupt(ctx)
	s.place()
	s.progress()
	s.observe()
	if err := s.rec.Tick(ctx); err != nil {
		return fmt.Errorf("spotsim: reconciler tick: %w", err)
	}
	return s.forgetTerminated(ctx)
}

// register turns the instances booted by now into nodes.
func (s *sim) register(insts []provider.Instance) {
	for _, inst := range insts {
		id := "node-" + inst.ID
		if _, ok := s.nodes[id]; ok || s.now.Sub(inst.LaunchedAt) < s.p.Boot {
			continue
		}
		s.nodes[id] = &node{id: id, instance: inst.ID, nodeType: inst.NodeType, idleSince: s.now}
	}
}

// interrupt delivers the notices due by now to a random running spot node, and ends the
// nodes whose notice deadline has passed (the cloud terminates the instance).
func (s *sim) interrupt(ctx context.Context) {
	for len(s.notices) > 0 && !s.notices[0].After(s.now) {
		s.notices = s.notices[1:]
		var candidates []*node
		for _, n := range s.sortedNodes() {
			if n.nodeType == SpotType && n.deadline.IsZero() {
				candidates = append(candidates, n)
			}
		}
		if len(candidates) == 0 {
			continue // no spot node runs: nothing to interrupt
		}
		n := candidates[s.rng.IntN(len(candidates))]
		n.deadline = s.now.Add(s.p.Notice)
		s.res.Notices++
		if n.job != "" {
			s.res.HitJobs++
			s.loseNode(n)
		}
	}
	for _, n := range s.sortedNodes() {
		if !n.deadline.IsZero() && !n.deadline.After(s.now) {
			_ = s.mem.Terminate(ctx, []string{n.instance})
			delete(s.nodes, n.id)
		}
	}
}

// loseNode takes n from its job: the job goes back to its last checkpoint, pays the
// restart cost when it runs again, and waits for a node in n's place.
func (s *sim) loseNode(n *node) {
	j := s.job(n.job)
	n.job = ""
	j.held = slices.DeleteFunc(j.held, func(id string) bool { return id == n.id })
	checkpoint := j.done / s.p.Checkpoint * s.p.Checkpoint
	s.res.LostWork += (j.done - checkpoint) * time.Duration(j.nodes)
	j.done, j.restart = checkpoint, s.p.RestartCost
}

func (s *sim) job(id string) *job {
	for _, j := range s.jobs {
		if j.id == id {
			return j
		}
	}
	panic("spotsim: unknown job " + id)
}

func (s *sim) sortedNodes() []*node {
	out := make([]*node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *node) int { return cmp.Compare(a.id, b.id) })
	return out
}

// place gives the waiting jobs, in arrival order, the free nodes they miss, all at once.
func (s *sim) place() {
	free := []*node{}
	for _, n := range s.sortedNodes() {
		if n.job == "" && n.deadline.IsZero() {
			free = append(free, n)
		}
	}
	for _, j := range s.jobs {
		missing := j.nodes - len(j.held)
		if j.finished || j.arrival.After(s.now) || missing == 0 || missing > len(free) {
			continue
		}
		for _, n := range free[:missing] {
			n.job = j.id
			j.held = append(j.held, n.id)
		}
		free = free[missing:]
	}
}

// progress advances every job that holds all its nodes by one step.
func (s *sim) progress() {
	for _, j := range s.jobs {
		if j.finished || len(j.held) < j.nodes {
			continue
		}
		step := s.p.Step
		if j.restart > 0 {
			used := min(j.restart, step)
			j.restart -= used
			step -= used
		}
		j.done += step
		if j.done < j.work {
			continue
		}
		j.finished = true
		s.res.JobsDone++
		s.res.Work += j.work * time.Duration(j.nodes)
		s.res.Makespan = s.now.Sub(s.start)
		for _, id := range j.held {
			s.nodes[id].job, s.nodes[id].idleSince = "", s.now
		}
		j.held = nil
	}
}

// observe sets what the GCS reports to the reconciler: the nodes (busy, idle or
// draining) and each waiting job's missing nodes as a pending STRICT_SPREAD group.
func (s *sim) observe() {
	var obs reconciler.Observation
	busy := map[string]bool{}
	for _, n := range s.sortedNodes() {
		working := n.job != "" || !n.deadline.IsZero()
		busy[n.id] = working
		available := nodeResources
		gpuFree := resources.Amount(resources.AmountScale)
		var idle time.Duration
		if working {
			available, gpuFree = resources.Set{}, 0
		} else {
			idle = s.now.Sub(n.idleSince)
		}
		gpus := make([]placement.GPU, gpusPerNode)
		for i := range gpus {
			gpus[i] = placement.GPU{Index: i, UUID: "GPU-" + n.id + "-" + strconv.Itoa(i), Rail: i, Available: gpuFree}
		}
		obs.Nodes = append(obs.Nodes, autoscaler.Node{
			ID: n.id, Type: n.nodeType, State: autoscaler.NodeRunning, IdleFor: idle,
			Placement: placement.Node{
				ID: placement.NodeID(n.id), Total: nodeResources, Available: available, Alive: true,
				Draining: !n.deadline.IsZero(), GPUs: gpus,
				Labels: map[string]string{nodelabel.NodeID: n.id, nodelabel.InstanceID: n.instance, nodelabel.NodeType: n.nodeType},
			},
		})
	}
	for _, j := range s.jobs {
		missing := j.nodes - len(j.held)
		if j.finished || j.arrival.After(s.now) || missing == 0 {
			continue
		}
		bundles := make([]resources.Set, missing)
		for i := range bundles {
			bundles[i] = resources.Set{"GPU": gpusPerNode * resources.AmountScale}
		}
		obs.Groups = append(obs.Groups, autoscaler.GroupDemand{
			ID: j.id, Request: placement.Request{Bundles: bundles, Strategy: placement.StrategyStrictSpread}, Reason: pending.NoResources,
		})
	}
	s.cluster.Set(obs)
	s.cluster.Busy = busy
}

// forgetTerminated drops the nodes whose instance the reconciler terminated. A node
// with a job is never idle, so the GCS refuses its idle drain; should one go anyway,
// its job loses it as if it had been interrupted.
func (s *sim) forgetTerminated(ctx context.Context) error {
	insts, err := s.mem.Instances(ctx)
	if err != nil {
		return err
	}
	alive := map[string]bool{}
	for _, inst := range insts {
		alive[inst.ID] = true
	}
	for _, n := range s.sortedNodes() {
		if alive[n.instance] {
			continue
		}
		if n.job != "" {
			s.loseNode(n)
		}
		delete(s.nodes, n.id)
	}
	return nil
}
