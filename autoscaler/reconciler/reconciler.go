// Package reconciler is the autoscaler's loop: every tick it reads the cluster from the
// GCS (AutoscalerStateService) and the machines from the provider, moves each instance
// along Ray's instance states, asks the pure planner (autoscaler.Decide) what to launch
// and terminate, does it, and reports what it did back to the GCS for `raygo status`.
//
// It owns the instance table; the truth it rebuilds that table from after a restart is
// the provider's instance list and the GCS's nodes, so a reconciler that crashes loses
// nothing but its recent-failure history.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/autoscaler"
	"github.com/raygo-dev/raygo/autoscaler/provider"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Observation is what the GCS reports at one tick.
type Observation struct {
	// Nodes are the alive nodes, running: Type from nodelabel.NodeType, Head set,
	// Placement.Labels carrying nodelabel.InstanceID for the nodes the autoscaler
	// launched, IdleFor from the GCS's idle clock.
	Nodes []autoscaler.Node
	// Dead are the ids of nodes the GCS declared dead, by instance id (nodes that
	// carried nodelabel.InstanceID).
	DeadInstances []string
	Groups        []autoscaler.GroupDemand
	Shapes        []autoscaler.ShapeDemand
	Constraint    []resources.Set
}

// DrainReason is why the reconciler drains a node.
type DrainReason int

const (
	// DrainIdle: the node is idle past its timeout (Ray's IDLE_TERMINATION); the GCS
	// refuses it when work landed on the node meanwhile.
	DrainIdle DrainReason = iota
	// DrainPreemption: the node is going away whatever runs on it (a spot interruption).
	DrainPreemption
)

// Cluster is the reconciler's view of the GCS.
//
// Concurrency: called from the reconciler's one goroutine, one call at a time.
type Cluster interface {
	Observe(ctx context.Context) (Observation, error)
	// DrainNode asks the GCS to take no new work on the node. accepted false, with why,
	// when the GCS refuses (for DrainIdle: the node is busy).
	DrainNode(ctx context.Context, nodeID string, reason DrainReason, message string, deadline time.Time) (accepted bool, why string, err error)
	// Report publishes the autoscaler's state for `raygo status`.
	Report(ctx context.Context, status Status) error
}

// Status is what the reconciler reports after each tick.
type Status struct {
	// Instances are the live instances and the recently finished ones.
	Instances []Instance
	// Failures are recent launch and install failures, newest last.
	Failures []Failure
	// Infeasible is the plan's infeasible and limited demand.
	Infeasible []autoscaler.Infeasible
	// Launches are the launches the last plan asked for.
	Launches []autoscaler.Launch
	// Launched counts the instances launched since the reconciler started, by type.
	Launched map[string]int64
	// NewCapacity is, per pending group with nodes launching for it, when they are
	// expected to run (launchlatency.go).
	NewCapacity []CapacityEstimate
	// Time is when the tick ran.
	Time time.Time
}

// Failure is one launch, install or termination that went wrong.
type Failure struct {
	Time     time.Time
	NodeType string
	// InstanceID is "" when the launch never created an instance.
	InstanceID string
	State      State
	Detail     string
}

// Config is a reconciler's configuration.
type Config struct {
	// Types are the worker node types the planner may launch (the head's type is not
	// among them unless it is also a worker type).
	Types []autoscaler.NodeType
	// NodeConfigs are the node types' node_config, passed to the provider.
	NodeConfigs map[string]map[string]any
	// MaxWorkers is the cluster's max_workers; UpscalingSpeed its upscaling_speed.
	MaxWorkers     int
	UpscalingSpeed float64
	// MaxUnavailable resolves provider.raygo.disruption.max_unavailable against the
	// cluster's node count (at least 1).
	MaxUnavailable func(nodes int) int
	// ExpectedLaunch is each type's provider.raygo expected_launch_s: its launch latency
	// until a launch of it has been measured (absent or 0: unknown).
	ExpectedLaunch map[string]time.Duration
	// Tick is the loop period (default 1 s; Ray's is 5 s).
	Tick     time.Duration
	Timeouts Timeouts
	// LaunchBackoff is the first wait after a failed launch of a type (default 5 s),
	// doubling per failure up to MaxLaunchBackoff (default 5 min); the type is planned
	// as unavailable meanwhile. A launch that failed for capacity (provider.ErrCapacity)
	// backs the type off for CapacityBackoff instead.
	LaunchBackoff, MaxLaunchBackoff time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log zerolog.Logger
}

// Reconciler is the autoscaler loop. Tick is not safe for concurrent use; Run calls it
// from one goroutine.
type Reconciler struct {
	cfg       Config
	cluster   Cluster
	provider  provider.Provider
	instances []Instance
	failures  []Failure
	// backoff is, per node type, until when it is unavailable and the current wait.
	backoff   map[string]typeBackoff
	requestID int
	// launched counts the instances launched, by type (Status.Launched).
	launched map[string]int64
	// latencies are the types' last measured launch latencies.
	latencies launchLatencies
}

type typeBackoff struct {
	until time.Time
	wait  time.Duration
}

// maxFailures bounds the failure history kept for status.
const maxFailures = 50

// New returns a reconciler; Config's zero durations take their defaults.
func New(cfg Config, cluster Cluster, p provider.Provider) *Reconciler {
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Timeouts == (Timeouts{}) {
		cfg.Timeouts = DefaultTimeouts()
	}
	if cfg.LaunchBackoff <= 0 {
		cfg.LaunchBackoff = 5 * time.Second
	}
	if cfg.MaxLaunchBackoff <= 0 {
		cfg.MaxLaunchBackoff = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxUnavailable == nil {
		cfg.MaxUnavailable = func(int) int { return 1 }
	}
	return &Reconciler{cfg: cfg, cluster: cluster, provider: p, backoff: map[string]typeBackoff{}, launched: map[string]int64{},
		latencies: launchLatencies{}}
}

// Run ticks until ctx ends. A failed tick is logged and retried at the next one.
func (r *Reconciler) Run(ctx context.Context) error {
	ticker := time.NewTicker(r.cfg.Tick)
	defer ticker.Stop()
	for {
		if err := r.Tick(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn().Err(err).Msg("autoscaler tick failed; retrying at the next tick")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Instances returns a copy of the instance table (for tests and status).
func (r *Reconciler) Instances() []Instance { return slices.Clone(r.instances) }

// Tick runs one round: observe, advance the instances, plan, act, report.
func (r *Reconciler) Tick(ctx context.Context) error {
	now := r.cfg.Now()
	obs, err := r.cluster.Observe(ctx)
	if err != nil {
		return fmt.Errorf("read the cluster from the GCS: %w", err)
	}
	cloudList, err := r.provider.Instances(ctx)
	if err != nil {
		return fmt.Errorf("list the provider's instances: %w", err)
	}
	cloud := make(map[string]provider.Instance, len(cloudList))
	for _, inst := range cloudList {
		cloud[inst.ID] = inst
	}
	nodes := nodesByInstance(obs)
	r.adopt(cloudList, nodes, now)
	r.applyTransitions(ctx, advance(r.instances, cloud, nodes, now, r.cfg.Timeouts), now)
	r.releaseCompleteGangs()
	r.forgetFinished(now)

	plan := autoscaler.Decide(r.plannerInput(obs, now))
	r.launch(ctx, plan.Launches, now)
	r.terminate(ctx, plan.Terminations, now)
	return r.cluster.Report(ctx, Status{
		Instances: r.Instances(), Failures: slices.Clone(r.failures),
		Infeasible: plan.Infeasible, Launches: plan.Launches, Time: now, Launched: maps.Clone(r.launched),
		NewCapacity: r.newCapacity(),
	})
}

// newCapacity estimates when the nodes launching for each gang run.
func (r *Reconciler) newCapacity() []CapacityEstimate {
	var launching []launchingFor
	for _, inst := range r.instances {
		if inst.launching() && len(inst.Gangs) > 0 && !inst.RequestedAt.IsZero() {
			launching = append(launching, launchingFor{NodeType: inst.NodeType, RequestedAt: inst.RequestedAt, Gangs: inst.Gangs})
		}
	}
	return estimates(launching, r.latencies, r.cfg.ExpectedLaunch)
}

// nodesByInstance maps instance ids to the GCS's nodes that carry them.
func nodesByInstance(obs Observation) map[string]nodeView {
	out := map[string]nodeView{}
	for _, id := range obs.DeadInstances {
		out[id] = nodeView{Alive: false}
	}
	for _, n := range obs.Nodes {
		if id := n.Placement.Labels[nodelabel.InstanceID]; id != "" {
			out[id] = nodeView{NodeID: n.ID, Alive: true}
		}
	}
	return out
}

// adopt adds the provider's instances the table does not know: those launched before a
// restart of the autoscaler.
func (r *Reconciler) adopt(cloud []provider.Instance, nodes map[string]nodeView, now time.Time) {
	known := map[string]bool{}
	for _, inst := range r.instances {
		known[inst.ID] = true
	}
	for _, c := range cloud {
		if known[c.ID] {
			continue
		}
		inst := Instance{ID: c.ID, NodeType: c.NodeType, State: Allocated, Since: now, Attempts: 1}
		if n, ok := nodes[c.ID]; ok && n.Alive {
			inst.State, inst.NodeID = RayRunning, n.NodeID
		}
		r.cfg.Log.Info().Str("instance_id", c.ID).Str("node_type", c.NodeType).Str("state", string(inst.State)).Msg("adopted an instance launched before this autoscaler started")
		r.instances = append(r.instances, inst)
	}
}

func (r *Reconciler) applyTransitions(ctx context.Context, changes []transition, now time.Time) {
	failedGangs := map[string]string{}
	defer func() {
		for _, gang := range slices.Sorted(maps.Keys(failedGangs)) {
			r.failGang(ctx, gang, failedGangs[gang], now)
		}
	}()
	for _, ch := range changes {
		inst := &r.instances[ch.Index]
		from := inst.State
		inst.State, inst.Since = ch.To, now
		if ch.NodeID != "" {
			inst.NodeID = ch.NodeID
		}
		if ch.To == RayRunning && !inst.RequestedAt.IsZero() {
			r.latencies.record(inst.NodeType, now.Sub(inst.RequestedAt))
		}
		if ch.Detail != "" {
			inst.Detail = ch.Detail
		}
		r.cfg.Log.Info().Str("instance_id", inst.ID).Str("node_type", inst.NodeType).Str("from", string(from)).Str("to", string(ch.To)).Str("detail", ch.Detail).Msg("instance state")
		switch ch.To {
		case RayInstallFailed, TerminationFailed, AllocationTimeout:
			r.recordFailure(Failure{Time: now, NodeType: inst.NodeType, InstanceID: inst.ID, State: ch.To, Detail: ch.Detail})
		case Terminated:
			if from == RayRunning || from == Allocated || from == RayInstalling {
				r.recordFailure(Failure{Time: now, NodeType: inst.NodeType, InstanceID: inst.ID, State: ch.To, Detail: ch.Detail})
			}
		}
		if len(inst.Gangs) > 0 && (ch.To == RayInstallFailed || ch.To == AllocationTimeout || (ch.To == Terminated && from != RayRunning)) {
			for _, gang := range inst.Gangs {
				failedGangs[gang] = fmt.Sprintf("instance %s (%s) is %s: %s", inst.ID, inst.NodeType, ch.To, ch.Detail)
			}
		}
		if ch.To == AllocationTimeout {
			// The machine may still appear: terminate the id so nothing leaks, then
			// ask again while retries last (not for a gang's: the gang is planned again).
			_ = r.provider.Terminate(ctx, []string{inst.ID})
			if inst.Attempts < r.cfg.Timeouts.RequestRetries && len(inst.Gangs) == 0 {
				inst.State, inst.ID = Queued, ""
				continue
			}
			inst.State = AllocationFailed
			continue
		}
		if ch.Terminate {
			r.terminateInstance(ctx, inst, now)
		}
	}
}

// terminateInstance asks the provider to end inst and moves it to TERMINATING.
func (r *Reconciler) terminateInstance(ctx context.Context, inst *Instance, now time.Time) {
	if err := r.provider.Terminate(ctx, []string{inst.ID}); err != nil {
		r.cfg.Log.Warn().Err(err).Str("instance_id", inst.ID).Msg("terminate failed; will retry")
		return
	}
	inst.State, inst.Since = Terminating, now
}

func (r *Reconciler) recordFailure(f Failure) {
	r.failures = append(r.failures, f)
	if len(r.failures) > maxFailures {
		r.failures = r.failures[len(r.failures)-maxFailures:]
	}
}

// forgetFinished drops terminated and failed instances older than KeepFinished.
func (r *Reconciler) forgetFinished(now time.Time) {
	r.instances = slices.DeleteFunc(r.instances, func(i Instance) bool {
		return !i.live() && now.Sub(i.Since) > r.cfg.Timeouts.KeepFinished
	})
	r.failures = slices.DeleteFunc(r.failures, func(f Failure) bool {
		return now.Sub(f.Time) > r.cfg.Timeouts.KeepFinished
	})
}

// plannerInput builds the planner's input: the configured types (those in launch
// backoff unavailable), the GCS's nodes, the instances still launching, the demand.
func (r *Reconciler) plannerInput(obs Observation, now time.Time) autoscaler.Input {
	types := slices.Clone(r.cfg.Types)
	for i := range types {
		if b, ok := r.backoff[types[i].Name]; ok && now.Before(b.until) {
			types[i].Unavailable = true
		}
	}
	stopping := map[string]bool{}
	for _, inst := range r.instances {
		if inst.NodeID != "" && !inst.launching() && inst.State != RayRunning {
			stopping[inst.NodeID] = true
		}
	}
	var nodes []autoscaler.Node
	for _, n := range obs.Nodes {
		if !stopping[n.ID] {
			nodes = append(nodes, n)
		}
	}
	for _, inst := range r.instances {
		if inst.launching() {
			id := inst.ID
			if id == "" {
				id = "queued-" + strconv.Itoa(len(nodes))
			}
			nodes = append(nodes, autoscaler.Node{ID: id, Type: inst.NodeType, State: autoscaler.NodeLaunching})
		}
	}
	return autoscaler.Input{
		Types: types, Nodes: nodes, Groups: obs.Groups, Shapes: obs.Shapes, Constraint: obs.Constraint,
		MaxWorkers: r.cfg.MaxWorkers, MaxUnavailable: max(1, r.cfg.MaxUnavailable(len(nodes))),
		UpscalingSpeed: r.cfg.UpscalingSpeed,
	}
}

// launch asks the provider for the plan's launches (and for queued retries), one
// request per type. A failure backs the type off; the instances it would have become are
// recorded as ALLOCATION_FAILED so status shows it.
func (r *Reconciler) launch(ctx context.Context, launches []autoscaler.Launch, now time.Time) {
	want := map[string]int{}
	var forWhat = map[string][]string{}
	for _, l := range launches {
		want[l.Type] += l.Count
		forWhat[l.Type] = append(forWhat[l.Type], l.For...)
	}
	// Queued retries of timed-out requests are launched with the plan's own.
	retries := map[string][]int{}
	for i, inst := range r.instances {
		if inst.State == Queued {
			retries[inst.NodeType] = append(retries[inst.NodeType], i)
		}
	}
	// The planner counted them as launching, so its launches come on top.
	for _, nodeType := range slices.Sorted(maps.Keys(retries)) {
		want[nodeType] += len(retries[nodeType])
	}
	failed := map[string]string{} // gang → why
	for _, nodeType := range slices.Sorted(maps.Keys(want)) {
		count := want[nodeType]
		nt, ok := r.nodeType(nodeType)
		if !ok || count <= 0 {
			continue
		}
		r.requestID++
		req := provider.LaunchRequest{
			NodeType: nodeType, NodeConfig: r.cfg.NodeConfigs[nodeType], Resources: nt.Resources.ToFloat(),
			GPUModel: nt.GPUModel, Labels: nt.Labels, Count: count,
			RequestID: fmt.Sprintf("launch-%d-%d", now.Unix(), r.requestID),
		}
		r.cfg.Log.Info().Str("node_type", nodeType).Int("count", count).Strs("for", forWhat[nodeType]).Msg("launching nodes")
		created, err := r.provider.Launch(ctx, req)
		attempts := 1
		for _, i := range retries[nodeType] {
			attempts = max(attempts, r.instances[i].Attempts+1)
		}
		// The retried queued rows are replaced by what this request created.
		r.instances = slices.DeleteFunc(r.instances, func(i Instance) bool { return i.State == Queued && i.NodeType == nodeType })
		gangs := autoscaler.GroupIDs(forWhat[nodeType])
		if err != nil {
			r.launchFailed(nodeType, count, attempts, err, now)
			for _, gang := range gangs {
				failed[gang] = fmt.Sprintf("the launch of %d %s node(s) failed", count, nodeType)
			}
			continue
		}
		delete(r.backoff, nodeType)
		r.launched[nodeType] += int64(len(created))
		for _, c := range created {
			state := Requested
			if c.State == provider.InstanceRunning {
				state = Allocated
			}
			r.instances = append(r.instances, Instance{ID: c.ID, NodeType: nodeType, State: state, Since: now, RequestedAt: now, Attempts: attempts, Gangs: slices.Clone(gangs)})
		}
	}
	// A gang whose launch failed in part gets none: the nodes launched for it go now.
	for _, gang := range slices.Sorted(maps.Keys(failed)) {
		r.failGang(ctx, gang, failed[gang], now)
	}
}

// failGang terminates every node launched for the gang that has not been released from
// it: launching ones at once, running ones once the GCS accepts their idle drain (a
// node that took other work stays). The planner then plans the gang again.
func (r *Reconciler) failGang(ctx context.Context, gang, cause string, now time.Time) {
	terminated := 0
	for i := range r.instances {
		inst := &r.instances[i]
		if !inst.live() || !slices.Contains(inst.Gangs, gang) {
			continue
		}
		inst.Gangs = slices.DeleteFunc(inst.Gangs, func(g string) bool { return g == gang })
		switch {
		case inst.ID == "":
			inst.State, inst.Since = AllocationFailed, now
		case inst.launching():
			inst.Detail = "gang " + gang + ": " + cause
			r.terminateInstance(ctx, inst, now)
			terminated++
		case inst.State == RayRunning:
			accepted, _, err := r.cluster.DrainNode(ctx, inst.NodeID, DrainIdle, "gang "+gang+" failed: "+cause, now.Add(r.cfg.Timeouts.Terminating))
			if err == nil && accepted {
				inst.State, inst.Since, inst.Detail = RayStopRequested, now, "gang "+gang+": "+cause
				r.terminateInstance(ctx, inst, now)
				terminated++
			}
		}
	}
	if terminated == 0 {
		return // nothing else was launched for it: the member's own failure says it all
	}
	r.cfg.Log.Warn().Str("pg_id", gang).Str("cause", cause).Int("terminated", terminated).Msg("gang launch failed; its nodes go and it is planned again")
	r.recordFailure(Failure{Time: now, State: AllocationFailed, Detail: fmt.Sprintf("placement group %s: %s; its %d other new node(s) terminated", gang, cause, terminated)})
}

// releaseCompleteGangs drops a gang from its instances once all of them run.
func (r *Reconciler) releaseCompleteGangs() {
	running := map[string]bool{}
	for _, inst := range r.instances {
		for _, gang := range inst.Gangs {
			if _, seen := running[gang]; !seen {
				running[gang] = true
			}
			running[gang] = running[gang] && inst.State == RayRunning
		}
	}
	for i := range r.instances {
		r.instances[i].Gangs = slices.DeleteFunc(r.instances[i].Gangs, func(g string) bool { return running[g] })
	}
}

// CapacityBackoff is how long a type the provider had no capacity for is planned as
// unavailable: Karpenter's 3 minutes for an unavailable offering, long enough for the
// planner to choose another type (an on-demand twin) rather than retry the same one.
const CapacityBackoff = 3 * time.Minute

func (r *Reconciler) launchFailed(nodeType string, count, attempts int, err error, now time.Time) {
	b := r.backoff[nodeType]
	b.wait = min(max(2*b.wait, r.cfg.LaunchBackoff), r.cfg.MaxLaunchBackoff)
	cause := "launch failed"
	if errors.Is(err, provider.ErrCapacity) {
		b.wait = CapacityBackoff
		cause = "no capacity"
	}
	b.until = now.Add(b.wait)
	r.backoff[nodeType] = b
	detail := fmt.Sprintf("%s: %v (next try in %s)", cause, err, b.wait)
	r.cfg.Log.Warn().Str("node_type", nodeType).Int("count", count).Err(err).Dur("backoff", b.wait).Msg("launch failed")
	r.recordFailure(Failure{Time: now, NodeType: nodeType, State: AllocationFailed, Detail: detail})
	r.instances = append(r.instances, Instance{NodeType: nodeType, State: AllocationFailed, Since: now, Attempts: attempts, Detail: detail})
}

func (r *Reconciler) nodeType(name string) (autoscaler.NodeType, bool) {
	for _, t := range r.cfg.Types {
		if t.Name == name {
			return t, true
		}
	}
	return autoscaler.NodeType{}, false
}

// terminate carries out the plan's terminations: a running node is drained first (for
// idleness the GCS refuses when work landed on it since the plan), then its instance is
// terminated; a launching one is terminated at once.
func (r *Reconciler) terminate(ctx context.Context, terms []autoscaler.Termination, now time.Time) {
	for _, term := range terms {
		inst := r.instanceOf(term.NodeID)
		if inst == nil || inst.ID == "" {
			r.cfg.Log.Warn().Str("node_id", term.NodeID).Msg("the plan terminates a node with no instance; skipped")
			continue
		}
		if inst.State == RayRunning {
			message := "idle for longer than its node type's idle timeout"
			if term.Cause != autoscaler.CauseIdle {
				message = "terminated by the autoscaler: " + strings.ToLower(string(term.Cause))
			}
			accepted, why, err := r.cluster.DrainNode(ctx, inst.NodeID, DrainIdle, message, now.Add(r.cfg.Timeouts.Terminating))
			if err != nil {
				r.cfg.Log.Warn().Err(err).Str("node_id", inst.NodeID).Msg("drain failed; will retry")
				continue
			}
			if !accepted {
				r.cfg.Log.Info().Str("node_id", inst.NodeID).Str("why", why).Msg("the GCS refused the idle drain; the node stays")
				continue
			}
			inst.State, inst.Since, inst.Detail = RayStopRequested, now, string(term.Cause)
		}
		r.cfg.Log.Info().Str("instance_id", inst.ID).Str("node_id", inst.NodeID).Str("cause", string(term.Cause)).Msg("terminating")
		inst.Detail = string(term.Cause)
		r.terminateInstance(ctx, inst, now)
	}
}

// instanceOf finds the instance of a GCS node id or of an instance id.
func (r *Reconciler) instanceOf(id string) *Instance {
	for i := range r.instances {
		inst := &r.instances[i]
		if inst.live() && (inst.NodeID == id || inst.ID == id) {
			return inst
		}
	}
	return nil
}
