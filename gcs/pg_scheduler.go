package gcs

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// kick makes the scheduler loop run a round soon.
func (m *pgManager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// retryAllNow is called when capacity may have appeared: a node joined, resources
// were released.
func (m *pgManager) retryAllNow() {
	m.mu.Lock()
	for _, e := range m.groups {
		e.retry.retryNow()
	}
	m.mu.Unlock()
	m.kick()
}

// loop runs scheduling rounds when woken, when a retry is due, and at least every second.
func (m *pgManager) loop(stop <-chan struct{}) {
	for {
		start := time.Now()
		wait, attempts := m.scheduleRound()
		m.rounds.add(SchedulerRound{Start: start, Took: time.Since(start), Attempts: attempts})
		m.pruneRemoved()
		select {
		case <-stop:
			return
		case <-m.wake:
		case <-time.After(wait):
		}
	}
}

// scheduleRound tries every pending group whose retry is due, in queue order (groups
// rescheduling lost bundles first, then arrival order), against one snapshot that each
// successful plan updates. It returns how long until the next retry is due and how many
// groups it tried.
func (m *pgManager) scheduleRound() (time.Duration, int) {
	nodes := m.nodes.aliveNodes()
	now := m.now()
	next := time.Second

	m.mu.Lock()
	defer m.mu.Unlock()
	queue := m.sortedLocked(func(e *pgEntry) bool {
		return e.inFlight == nil && (e.info.State == pb.PlacementGroupState_PENDING || e.info.State == pb.PlacementGroupState_RESCHEDULING)
	})
	if len(queue) == 0 {
		return next, 0
	}
	sort.SliceStable(queue, func(i, j int) bool {
		return queue[i].info.State == pb.PlacementGroupState_RESCHEDULING && queue[j].info.State != pb.PlacementGroupState_RESCHEDULING
	})
	snapshot, err := m.snapshotLocked(nodes)
	if err != nil {
		m.log.Error().Err(err).Msg("cannot build a cluster snapshot")
		return next, 0
	}
	attempts := 0
	for _, e := range queue {
		if e.retry.next.After(now) {
			if d := e.retry.next.Sub(now); d < next {
				next = d
			}
			continue
		}
		m.attemptLocked(e, snapshot, now)
		attempts++
	}
	return next, attempts
}

// snapshotLocked builds the scheduler's view: alive nodes, their totals and GPUs, and what
// is available once every bundle the GCS placed (or is placing) is subtracted.
func (m *pgManager) snapshotLocked(nodes []*pb.NodeInfo) (*placement.Snapshot, error) {
	reserved := map[string]resources.Set{}
	gpuUsed := map[string]map[int]resources.Amount{} // node → GPU index → share held
	hold := func(node string, bundle resources.Set, gpus []int) {
		reserved[node] = reserved[node].Add(bundle)
		if len(gpus) == 0 {
			return
		}
		if gpuUsed[node] == nil {
			gpuUsed[node] = map[int]resources.Amount{}
		}
		// Each GPU of a bundle holds one whole GPU, or the bundle's fraction of it.
		share := min(bundle["GPU"], resources.AmountScale)
		for _, gpu := range gpus {
			gpuUsed[node][gpu] += share
		}
	}
	for _, e := range m.groups {
		if !e.live() {
			continue
		}
		for i, b := range e.info.Bundles {
			if b.NodeId != "" {
				gpus := make([]int, len(b.GpuIds))
				for j, id := range b.GpuIds {
					gpus[j] = int(id)
				}
				hold(b.NodeId, e.request.Bundles[i], gpus)
			}
		}
		for i, p := range e.inFlight {
			hold(string(p.NodeID), e.request.Bundles[i], p.GPUIndices)
		}
	}
	rows := make([]placement.Node, 0, len(nodes))
	for _, n := range nodes {
		total, err := resources.SetFromFloat(n.ResourcesTotal)
		if err != nil {
			return nil, fmt.Errorf("node %s resources_total: %w", n.NodeId, err)
		}
		available := total.Clone()
		for name, amount := range reserved[n.NodeId] {
			available[name] = max(available[name]-amount, 0)
		}
		labels := maps.Clone(n.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[nodelabel.NodeID] = n.NodeId
		rows = append(rows, placement.Node{ID: placement.NodeID(n.NodeId), Total: total, Available: available,
			Labels: labels, Alive: true, Draining: n.IsDraining,
			GPUs: topologyGPUs(n, gpuUsed[n.NodeId]), NVLinkDomain: n.NvlinkDomain, MIGGPUs: migGPUs(n)})
	}
	return placement.NewSnapshot(rows)
}

// migGPUs is a node's MIG slot maps as its raylet last reported them. The raylet checks
// every step again, so a plan made on a report that an in-flight prepare has outdated
// fails its prepare and is retried, never double-booked.
func migGPUs(n *pb.NodeInfo) []placement.MIGGPU {
	var out []placement.MIGGPU
	for _, g := range n.MigGpus {
		model, ok := mig.ModelOfDevice(g.Model)
		if !ok {
			continue
		}
		gpu := placement.MIGGPU{Index: int(g.Index), Model: model}
		for _, in := range g.Instances {
			state := placement.MIGIdle
			if in.Held {
				state = placement.MIGHeld
			}
			gpu.Instances = append(gpu.Instances, placement.MIGInstance{ProfileID: int(in.ProfileId), Start: int(in.Start), State: state})
		}
		out = append(out, gpu)
	}
	return out
}

// topologyGPUs lists a node's GPUs for the scheduler with what is free of each. GPUs the
// raylet only counted (--num-gpus without NVML: no UUID, no topology), or a list that does
// not match the node's GPU total, are not passed: the node is then scheduled by its GPU
// count and the raylet picks the indices, rather than one odd node failing the snapshot.
func topologyGPUs(n *pb.NodeInfo, used map[int]resources.Amount) []placement.GPU {
	if float64(len(n.Gpus)) != n.ResourcesTotal["GPU"] {
		return nil
	}
	gpus := make([]placement.GPU, 0, len(n.Gpus))
	for _, g := range n.Gpus {
		if g.Uuid == "" {
			return nil
		}
		gpus = append(gpus, placement.GPU{Index: int(g.Index), UUID: g.Uuid, NVLinkIsland: int(g.NvlinkIsland),
			Rail: int(g.Rail), Available: max(resources.AmountScale-used[int(g.Index)], 0)})
	}
	return gpus
}

// attemptLocked schedules one group; on a plan it reserves it in the snapshot and starts
// the two-phase commit.
func (m *pgManager) attemptLocked(e *pgEntry, snapshot *placement.Snapshot, now time.Time) {
	stats := e.info.Stats
	stats.SchedulingAttempt++
	if stats.SchedulingStartedTimeMs == 0 {
		stats.SchedulingStartedTimeMs = now.UnixMilli()
	}
	request := e.request
	request.PlacedBundles = map[int]placement.NodeID{}
	for i, b := range e.info.Bundles {
		if b.NodeId != "" {
			request.PlacedBundles[i] = placement.NodeID(b.NodeId)
		}
	}
	plan, err := placement.Schedule(snapshot, request)
	if err != nil {
		m.recordUnschedulableLocked(e, err, now)
		return
	}
	if err := snapshot.Reserve(request.Bundles, plan); err != nil {
		m.log.Error().Err(err).Str("pg_id", e.info.PlacementGroupId).Msg("plan does not fit its own snapshot")
		return
	}
	e.inFlight = map[int]placement.BundlePlacement{}
	for _, p := range plan.Placements {
		e.inFlight[p.BundleIndex] = p
	}
	stats.SchedulingState = pb.SchedulingState_SCHEDULING_STARTED
	e.info.PendingReason, e.info.NodeRejections = "", nil
	go m.twoPhaseCommit(e, maps.Clone(e.inFlight))
}

func (m *pgManager) recordUnschedulableLocked(e *pgEntry, err error, now time.Time) {
	var unschedulable *placement.UnschedulableError
	state := pb.SchedulingState_NO_RESOURCES
	if errors.As(err, &unschedulable) {
		if unschedulable.Kind == placement.Infeasible {
			state = pb.SchedulingState_INFEASIBLE
		}
		ids := make([]string, 0, len(unschedulable.NodeReasons))
		for id := range unschedulable.NodeReasons {
			ids = append(ids, string(id))
		}
		sort.Strings(ids)
		e.info.NodeRejections = e.info.NodeRejections[:0]
		for _, id := range ids {
			var reasons []string
			for _, r := range unschedulable.NodeReasons[placement.NodeID(id)] {
				reasons = append(reasons, r.String())
			}
			e.info.NodeRejections = append(e.info.NodeRejections, &pb.NodeRejection{NodeId: id, Reasons: reasons})
		}
	}
	changed := e.info.Stats.SchedulingState != state || e.info.PendingReason != err.Error()
	e.info.Stats.SchedulingState = state
	e.info.PendingReason = err.Error()
	m.backoffLocked(e, now)
	if changed {
		m.logPersistError(m.persistLocked(e))
	}
}

func (m *pgManager) backoffLocked(e *pgEntry, now time.Time) {
	delay := e.retry.fail(now, retryBackoffMin, retryBackoffMax)
	if ms := float64(delay.Milliseconds()); ms > e.info.Stats.HighestRetryDelayMs {
		e.info.Stats.HighestRetryDelayMs = ms
	}
}
