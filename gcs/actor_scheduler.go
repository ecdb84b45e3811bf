package gcs

// The actor manager's scheduler: the loop, the queue of pending actors (restarting
// first, then by start time), backoff, the node view handed to placement.ChooseNodes,
// and the start of each attempt.

import (
	"sort"
	"strings"
	"time"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// loop runs scheduling rounds when woken, when a retry is due, and at least every second.
func (m *actorManager) loop(stop <-chan struct{}) {
	for {
		now := m.now()
		wait := m.scheduleRound(now)
		if now.Sub(m.lastPrune) >= time.Second {
			m.lastPrune = now
			m.pruneDead()
		}
		select {
		case <-stop:
			return
		case <-m.wake:
		case <-time.After(wait):
		}
	}
}

// scheduleRound decides a node for every pending actor whose retry is due (restarting
// actors first, then by start time) and starts a placement for each that got targets.
// It returns how long until the next retry is due.
func (m *actorManager) scheduleRound(now time.Time) time.Duration {
	retryAll := m.retryAll.Swap(false)
	next := time.Second
	// The inputs come first, without mu: the groups pending actors use and, when some
	// actor waits, the node table.
	m.mu.Lock()
	groupIDs := map[string]bool{}
	waiting := false
	var leases []leaseWork
	asked := map[string]bool{} // the uncharged actors outside groups admission is asked about
	anyPending := false
	for _, e := range m.actors {
		if !e.pending() {
			continue
		}
		anyPending = true
		if e.placing {
			continue
		}
		waiting = true
		if pg := e.info.SchedulingStrategy.GetPlacementGroupId(); pg != "" {
			groupIDs[pg] = true
		} else if e.info.Queue == "" {
			asked[e.info.ActorId] = true
			leases = append(leases, leaseWork{id: actorLeaseID(e.info.ActorId), namespace: e.info.Namespace, resources: e.request, arrival: e.info.StartTimeMs})
		}
	}
	returns := m.leaseReturns
	m.leaseReturns = nil
	m.idle.Store(!anyPending)
	m.mu.Unlock()
	// Charges go back before new ones are taken: an actor that restarts is charged again.
	var admitted leaseDecision
	if m.leases != nil {
		m.leases.returnLeases(returns)
		if len(leases) > 0 {
			admitted = m.leases.admitLeases(leases)
		}
	}
	if !waiting {
		return next
	}
	nodes := m.nodes.schedulingNodes()
	groups := map[string]*placement.WorkGroup{}
	for id := range groupIDs {
		groups[id] = newWorkGroup(m.groups.info(id))
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyLeaseDecisionLocked(admitted, now)
	var queue []*actorEntry
	for _, e := range m.actors {
		if !e.pending() || e.placing || !admittedLocked(e, asked, admitted.enabled) {
			continue
		}
		if !retryAll && e.retry.next.After(now) {
			next = min(next, e.retry.next.Sub(now))
			continue
		}
		queue = append(queue, e)
	}
	if len(queue) == 0 {
		return next
	}
	sortActors(queue)
	sort.SliceStable(queue, func(i, j int) bool {
		return queue[i].info.State == pb.ActorState_ACTOR_RESTARTING && queue[j].info.State != pb.ActorState_ACTOR_RESTARTING
	})
	views := workNodes(nodes)
	for _, e := range queue {
		strategy := e.info.SchedulingStrategy
		req := workRequest(e.info.ActorId, strategy, e.request, m.spreadCursor)
		if strategy.GetKind() == strategySpread {
			m.spreadCursor++
		}
		decision := chooseActorNodes(req, views, groups[strategy.GetPlacementGroupId()])
		switch {
		case decision.Fail != "":
			m.buryLocked(e, decision.Fail)
		case len(decision.Targets) == 0:
			m.waitLocked(e, decision.Wait, now)
			next = min(next, e.retry.delay)
		default:
			m.startPlacementLocked(e, decision.Targets)
			// Later actors of this round see the first target as taken.
			for i := range views {
				if views[i].ID == placement.NodeID(decision.Targets[0].NodeID) {
					if available, err := views[i].Available.Subtract(e.request); err == nil {
						views[i].Available = available
					}
				}
			}
		}
	}
	return next
}

// applyLeaseDecisionLocked records admission's answer for actors outside groups: the
// admitted hold their queue's charge (one that died meanwhile gives it back), the others
// wait with the reason code.
func (m *actorManager) applyLeaseDecisionLocked(d leaseDecision, now time.Time) {
	if !d.enabled {
		return
	}
	for id, queue := range d.admitted {
		e := m.actors[strings.TrimPrefix(id, actorLeasePrefix)]
		switch {
		case e == nil || !e.pending():
			m.leaseReturns = append(m.leaseReturns, id)
		case e.info.Queue == "":
			e.info.Queue = queue
			if e.info.PendingReasonCode != "" {
				e.info.PendingReason, e.info.PendingReasonCode = "", ""
				m.logPersistError(m.persistLocked(e))
			}
		}
	}
	for id, wait := range d.waiting {
		e := m.actors[strings.TrimPrefix(id, actorLeasePrefix)]
		if e == nil || !e.pending() || e.info.Queue != "" {
			continue
		}
		if e.info.PendingReasonCode != string(wait.reason) {
			e.info.PendingReasonCode = string(wait.reason)
			e.info.PendingReason = admissionWaitText(wait.reason, wait.queue)
			m.logPersistError(m.persistLocked(e))
			m.log.Debug().Str("actor_id", e.info.ActorId).Str("queue", wait.queue).Str("reason", string(wait.reason)).Msg("actor held by admission")
		}
	}
}

// admittedLocked: admission lets e be placed in this round. An actor in a group is
// covered by the group's charge; one outside groups must hold its queue's charge when
// queues are on, and with them off must have been asked about in this round: one
// created or restarted (its charge given back) while admission decided was not, and
// waits for the next round, which its creation or restart has woken.
func admittedLocked(e *actorEntry, asked map[string]bool, queuesOn bool) bool {
	if e.info.SchedulingStrategy.GetPlacementGroupId() != "" || e.info.Queue != "" {
		return true
	}
	return !queuesOn && asked[e.info.ActorId]
}

// sortActors orders actors by start time, then id.
func sortActors(entries []*actorEntry) {
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i].info, entries[j].info
		if a.StartTimeMs != b.StartTimeMs {
			return a.StartTimeMs < b.StartTimeMs
		}
		return a.ActorId < b.ActorId
	})
}

// workNodes turns the ALIVE nodes into the chooser's view (rows whose resources do not
// parse are left out).
func workNodes(nodes []*pb.NodeInfo) []placement.WorkNode {
	views := make([]placement.WorkNode, 0, len(nodes))
	for _, n := range nodes {
		total, err := resources.SetFromFloat(n.ResourcesTotal)
		if err != nil {
			continue
		}
		available, err := resources.SetFromFloat(n.ResourcesAvailable)
		if err != nil {
			continue
		}
		views = append(views, placement.WorkNode{ID: placement.NodeID(n.NodeId), Total: total, Available: available, Draining: n.IsDraining, Labels: n.Labels})
	}
	return views
}

// waitLocked records why an actor has no worker yet and backs off.
func (m *actorManager) waitLocked(e *actorEntry, reason string, now time.Time) {
	e.retry.fail(now, actorRetryBackoffMin, actorRetryBackoffMax)
	if e.info.PendingReason != reason {
		e.info.PendingReason = reason
		m.logPersistError(m.persistLocked(e))
		m.log.Debug().Str("actor_id", e.info.ActorId).Str("pg_id", e.info.PlacementGroupId).Str("reason", reason).Msg("actor waiting")
	}
}

// startPlacementLocked starts attempt e.attempt+1 on the targets in the background.
func (m *actorManager) startPlacementLocked(e *actorEntry, targets []leaseTarget) {
	e.attempt++
	e.placing = true
	lease := &pb.RequestWorkerLeaseRequest{
		JobId: e.info.JobId, ExecutableSha256: e.info.ExecutableSha256, Resources: e.info.RequiredResources,
		PlacementGroupId: e.info.SchedulingStrategy.GetPlacementGroupId(), ActorId: e.info.ActorId, Detached: e.info.IsDetached,
		PythonWorker: e.info.PythonWorker, LesseeTokenSha256: e.info.OwnerTokenSha256,
	}
	create := &pb.CreateActorOnWorkerRequest{ActorId: e.info.ActorId, ClassName: e.info.ClassName,
		ConstructorArgs: e.info.ConstructorArgs, NumRestarts: e.info.NumRestarts, PythonClassKey: e.info.PythonClassKey,
		PlacementGroupCaptureChildTasks: e.info.SchedulingStrategy.GetPlacementGroupCaptureChildTasks()}
	go m.place(e, e.attempt, targets, lease, create)
}

// leaseTarget is one raylet to ask for a worker, with the bundle index to pass.
type leaseTarget struct {
	NodeID      string
	BundleIndex int32
}

// actorPlacement is the actor scheduler's decision for one actor: raylets to ask in
// order, or why there is none now (Wait: pending_reason) or ever (Fail: death_cause).
type actorPlacement struct {
	Targets    []leaseTarget
	Wait, Fail string
}

// workRequest turns a SchedulingStrategy into the chooser's request for one actor (or
// one task's scheduling key, named id).
func workRequest(id string, strategy *pb.SchedulingStrategy, request resources.Set, spreadCursor uint64) placement.WorkRequest {
	req := placement.WorkRequest{ID: id, Resources: request, BundleIndex: resources.AnyBundle, SpreadCursor: spreadCursor}
	// Checked when the work came in (checkSchedulingStrategy).
	req.LabelSelector, req.SoftLabelSelector, _ = strategySelectors(strategy)
	switch strategy.GetKind() {
	case strategySpread:
		req.Strategy = placement.WorkSpread
	case strategyNodeAffinity:
		req.Strategy, req.NodeID, req.Soft = placement.WorkNodeAffinity, placement.NodeID(strategy.NodeId), strategy.Soft
	case strategyPlacementGroup:
		req.Strategy, req.BundleIndex = placement.WorkPlacementGroup, int(strategy.BundleIndex)
	}
	return req
}

// newWorkGroup is the chooser's view of a placement group (nil: unknown). Bundles are
// usable while the group is CREATED, or RESCHEDULING (its placed bundles stay committed).
func newWorkGroup(info *pb.PlacementGroupInfo) *placement.WorkGroup {
	if info == nil {
		return nil
	}
	g := &placement.WorkGroup{ID: info.PlacementGroupId, Removed: info.State == pb.PlacementGroupState_REMOVED,
		Usable:      info.State == pb.PlacementGroupState_CREATED || info.State == pb.PlacementGroupState_RESCHEDULING,
		BundleNodes: make([]placement.NodeID, len(info.Bundles))}
	for i, b := range info.Bundles {
		g.BundleNodes[i] = placement.NodeID(b.NodeId)
	}
	return g
}

// chooseActorNodes decides where an actor may get a worker: placement.ChooseNodes over
// the node and group views, its Choice turned into the actor's targets, pending reason
// or death cause.
func chooseActorNodes(req placement.WorkRequest, nodes []placement.WorkNode, group *placement.WorkGroup) actorPlacement {
	choice := placement.ChooseNodes(req, nodes, group)
	switch choice.Outcome {
	case placement.WorkPlaced:
		out := actorPlacement{Targets: make([]leaseTarget, len(choice.Targets))}
		for i, t := range choice.Targets {
			out.Targets[i] = leaseTarget{NodeID: string(t.Node), BundleIndex: int32(t.BundleIndex)}
		}
		return out
	case placement.WorkUnschedulable:
		if choice.Cause.Code == placement.ReasonGroupRemoved {
			return actorPlacement{Fail: deathGroupRemoved}
		}
		return actorPlacement{Fail: choice.Message}
	default:
		return actorPlacement{Wait: choice.Message}
	}
}
