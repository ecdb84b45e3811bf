package gcs

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/admission/preemption"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	"google.golang.org/protobuf/proto"
)

// Preemption carries out admission/preemption's decisions: checkpoint, then evict.
//
// After an admission round, a group that admission holds back (quota or capacity; not a
// backfill reservation, which ends by itself) in a queue whose preemption policies allow
// evicting anything asks preemption.Decide once for victims among the running groups.
// Each victim gets a notice (Kueue's reason, the
// preemptor, a deadline: now + its priority class's gracePeriod) on its row and through
// the WaitPreemptionNotice long poll, where its owner's hook and its Go actors'
// Checkpoint methods listen. When every listener polling at the notice acknowledged
// (AckPreemptionNotice), or at the deadline, the victim's bundles are
// cancelled on the raylets (its workers end: actors restart per max_restarts, tasks
// retry), and once the raylets confirmed, its quota is returned and it waits in its
// queue again, PENDING with reason Preempted, keeping its id, name and priority.
//
// The decision reads the autoscaler's last estimate of when the nodes it launches for
// the group run (newCapacityReport): due within the queue's preemptionDelay, the group
// waits for them (WaitingForNewNode) and nothing is evicted.
//
// The preemptor shows PreemptionDelay meanwhile and is not decided for again while its
// victims are being evicted. It cannot be placed before they are released: the loop's
// view counts a victim's bundles until their cancel is confirmed, and its quota stays
// charged until then.

// Preemption settings.
const (
	// maxPreemptionDecisionsPerRound bounds the preemption decisions of one round; the
	// others are decided in the next round, which starts at once.
	maxPreemptionDecisionsPerRound = 8
	// preemptionRetry: a group that could not preempt (no candidate yet: minRuntime, a
	// victim's notice still running) asks again after this long, whatever happened.
	preemptionRetry = 10 * time.Second
	// maxNoticeWait caps WaitPreemptionNoticeRequest.wait_ms.
	maxNoticeWait = time.Minute
	// newCapacityStale: the autoscaler's estimates are ignored when it has not reported
	// for this long (it stopped, or its GCS connection did); it reports every tick.
	newCapacityStale = 30 * time.Second
)

// newCapacityReport is the autoscaler's last word on when the nodes it launches for
// pending groups run (ReportAutoscalingState's new_capacity_estimates).
type newCapacityReport struct {
	// expected is when the group's last new node is expected to run, by group id.
	expected map[string]time.Time
	// received is when the GCS got the report.
	received time.Time
}

// newCapacityReported implements autoscalerGroups: the autoscaler's estimates replace
// the last ones; when they change, held-back groups are decided again at once, so that a
// preemptor the new nodes serve says WaitingForNewNode from the report on.
func (m *pgManager) newCapacityReported(expected map[string]time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := !maps.EqualFunc(m.newCapacity.expected, expected, time.Time.Equal)
	m.newCapacity = newCapacityReport{expected: expected, received: m.now()}
	if changed && m.admission != nil {
		m.admission.dirty = true
		m.kick()
	}
}

// newCapacityIn is preemption.Decide's NewCapacityIn for a group: how long until the
// autoscaler's new nodes for it are expected to run (0 when due). Unknown without a
// fresh estimate for the group, and once the nodes are later than expected by more
// than the group's preemptionDelay: waiting on must not postpone preemption for ever.
func newCapacityIn(report newCapacityReport, id string, delay time.Duration, now time.Time) (time.Duration, bool) {
	at, ok := report.expected[id]
	if !ok || now.Sub(report.received) > newCapacityStale || now.After(at.Add(delay)) {
		return 0, false
	}
	return max(0, at.Sub(now)), true
}

// evictionState is a running group told it is being preempted. Guarded by pgManager.mu.
type evictionState struct {
	notice   *pb.PreemptionNotice // the row's last_preemption
	deadline time.Time
	// releasing: acknowledged or past its deadline; the raylets are cancelling its
	// bundles.
	releasing bool
	// node, for a spot interruption's notice: the node going away. The release moves
	// only the group's bundles there (the group reschedules them) instead of queueing
	// the whole group again.
	node string
	// awaiting are the listeners (WaitPreemptionNoticeRequest.listener_id) that were
	// polling when the notice was given and have not acknowledged it: the owner's hook,
	// the group's Go actors with a Checkpoint method. The group is released once none is
	// left, or at the deadline.
	awaiting map[string]bool
}

// noticeListener is one poller of a group's notices.
type noticeListener struct {
	// polling counts its WaitPreemptionNotice calls in progress; last is when its last
	// one returned.
	polling int
	last    time.Time
}

// listenerGap is how long after a poll returned its listener still counts as polling:
// a hook asks again at once after an empty reply.
const listenerGap = 5 * time.Second

// listeningLocked returns the ids of the group's listeners polling now (or a moment
// ago), forgetting the others.
func (e *pgEntry) listeningLocked(now time.Time) map[string]bool {
	out := map[string]bool{}
	for id, l := range e.listeners {
		if l.polling > 0 || now.Sub(l.last) <= listenerGap {
			out[id] = true
		} else {
			delete(e.listeners, id)
		}
	}
	return out
}

// preemptionAllowed reports whether a queue's policies let its work evict anything.
func preemptionAllowed(cfg *queues.Config, queue string) bool {
	q, ok := cfg.Queue(queue)
	if !ok || q.Preemption == nil {
		return false
	}
	p := q.Preemption
	allows := func(policy string) bool { return policy != "" && policy != queues.PreemptNever }
	return allows(p.WithinClusterQueue) || allows(p.ReclaimWithinCohort) ||
		(p.BorrowWithinCohort != nil && allows(p.BorrowWithinCohort.Policy))
}

// gracePeriod is how long a group has to checkpoint once noticed: its priority class's
// gracePeriod (the queue's default class when it names none), default 30 s.
func gracePeriod(cfg *queues.Config, info *pb.PlacementGroupInfo) time.Duration {
	class := info.PriorityClass
	if class == "" {
		if q, ok := cfg.Queue(info.Queue); ok {
			class = q.DefaultPriorityClass
		}
	}
	grace := queues.DefaultGracePeriod
	if pc, ok := cfg.PriorityClass(class); ok {
		grace = pc.Grace()
	}
	return min(time.Duration(grace), time.Duration(queues.MaxGracePeriod))
}

// gracePeriodLocked is gracePeriod under the queue configuration in force; without
// queues, the default.
func (m *pgManager) gracePeriodLocked(info *pb.PlacementGroupInfo) time.Duration {
	if m.admission == nil || m.admission.config == nil {
		return time.Duration(queues.DefaultGracePeriod)
	}
	return gracePeriod(m.admission.config, info)
}

// waitingOnVictimsLocked reports whether a preemptor still waits for victims it chose
// (also those noticed by a GCS before a restart).
func (m *pgManager) waitingOnVictimsLocked(e *pgEntry) bool {
	for _, v := range m.evicting {
		if v.eviction.notice.PreemptorId == e.id {
			return true
		}
	}
	return false
}

// runningLocked lists the admitted, CREATED groups that may be victims: not already
// being evicted, nothing in flight, every bundle held in the loop's view. Groups with
// MIG bundles are left out: their slices are the raylet's to give back, which a
// decision's copy of the view cannot model. Called from the loop goroutine (it reads
// the view).
func (m *pgManager) runningLocked() []preemption.Running {
	var out []preemption.Running
	for id, e := range m.groups {
		if e.info.State != pb.PlacementGroupState_CREATED || e.eviction != nil || e.inFlight != nil || !m.admission.ledger.Holds(id) {
			continue
		}
		r := preemption.Running{ID: id, Queue: e.info.Queue, PriorityClass: e.info.PriorityClass, Priority: e.info.Priority,
			Arrival: msToNs(e.info.Stats.GetCreationRequestReceivedMs()), AdmittedAt: e.admittedAt.UnixNano(), Bundles: e.request.Bundles}
		if e.admittedAt.IsZero() {
			r.AdmittedAt = msToNs(e.info.RunningSinceMs)
		}
		usable := true
		for i := range e.info.Bundles {
			// Where the view holds the bundle; GPU indices only on nodes whose GPUs the
			// view lists (a node without GPU details is counted by amount).
			h, held := m.view.held[bundleRef{id, i}]
			if !held || h.mig {
				usable = false
				break
			}
			gpus := h.gpus
			if node, ok := m.view.snapshot.Node(h.node); !ok || len(node.GPUs) == 0 {
				gpus = nil
			}
			r.Placements = append(r.Placements, placement.BundlePlacement{BundleIndex: i, NodeID: h.node, GPUIndices: gpus})
		}
		if usable {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID }) // decisions replay from the same input
	return out
}

func msToNs(ms int64) int64 { return ms * int64(time.Millisecond) }

// preemptionCandidate is a held-back group that may ask for victims this round.
type preemptionCandidate struct {
	entry     *pgEntry
	preemptor preemption.Preemptor
}

// preemptRound decides victims for the groups admission held back this round, at most
// once each (and at most maxPreemptionDecisionsPerRound in all), and carries the
// decisions out. It runs in the loop goroutine, after admitRound, and reads the view.
func (m *pgManager) preemptRound(now time.Time, waiting map[string]pending.Reason) int {
	m.mu.Lock()
	if m.admission == nil || len(waiting) == 0 {
		m.mu.Unlock()
		return 0
	}
	cfg := m.admission.config
	var candidates []preemptionCandidate
	for id, reason := range waiting {
		e := m.groups[id]
		if e == nil || e.queued == nil || e.inFlight != nil || m.chargedLocked(id) ||
			reason == pending.Infeasible || reason == pending.Internal || reason == pending.BlockedByReservation ||
			!preemptionAllowed(cfg, e.info.Queue) || m.waitingOnVictimsLocked(e) {
			continue
		}
		if e.queuedSince.IsZero() { // waiting since before this GCS started: from now
			e.queuedSince = now
		}
		since := e.queuedSince
		q, _ := cfg.Queue(e.info.Queue) // preemptionAllowed: it exists, with a preemption section
		newIn, known := newCapacityIn(m.newCapacity, id, time.Duration(q.Preemption.PreemptionDelay), now)
		candidates = append(candidates, preemptionCandidate{entry: e, preemptor: preemption.Preemptor{
			ID: id, Queue: e.info.Queue, PriorityClass: e.info.PriorityClass, Priority: e.info.Priority,
			Arrival: msToNs(e.info.Stats.GetCreationRequestReceivedMs()), PendingSince: since.UnixNano(), Request: e.request,
			NewCapacityIn: int64(newIn), NewCapacityKnown: known}})
	}
	if len(candidates) == 0 {
		m.mu.Unlock()
		return 0
	}
	// Higher priority first, then arrival: the most important work chooses first.
	sort.Slice(candidates, func(i, j int) bool {
		a, b := candidates[i].entry, candidates[j].entry
		if a.info.Priority != b.info.Priority {
			return a.info.Priority > b.info.Priority
		}
		return a.seq < b.seq
	})
	if len(candidates) > maxPreemptionDecisionsPerRound {
		candidates = candidates[:maxPreemptionDecisionsPerRound]
		m.admission.dirty = true
		m.kick()
	}
	usage := m.admission.ledger.Usage()
	running := m.runningLocked()
	m.mu.Unlock()

	checks := 0
	chosen := map[string]bool{} // victims of earlier decisions this round
	for _, c := range candidates {
		var candidates []preemption.Running
		for _, r := range running {
			if !chosen[r.ID] {
				candidates = append(candidates, r)
			}
		}
		d := preemption.Decide(preemption.Input{Config: cfg, Usage: usage, Preemptor: c.preemptor, Running: candidates,
			Cluster: m.view.snapshot, Now: now.UnixNano()})
		checks += d.Checks
		for _, v := range d.Victims {
			chosen[v.ID] = true
		}
		m.mu.Lock()
		m.applyPreemptionLocked(c, d, cfg, now)
		m.mu.Unlock()
	}
	return checks
}

// applyPreemptionLocked carries out one decision: notices for the victims and
// PreemptionDelay for the preemptor, or the wait's reason, and when to ask again.
func (m *pgManager) applyPreemptionLocked(c preemptionCandidate, d preemption.Decision, cfg *queues.Config, now time.Time) {
	e := c.entry
	if !e.live() || e.queued == nil || m.chargedLocked(e.id) {
		return // placed or removed meanwhile: its victims are not needed
	}
	retryAt := now.Add(preemptionRetry)
	m.preemptionDecisions[[2]string{d.Outcome.String(), string(d.Cause)}]++
	e.waitingForNode = d.Pending == pending.WaitingForNewNode
	if d.Outcome != preemption.Preempt {
		m.log.Debug().Str("pg_id", e.id).Str("outcome", d.Outcome.String()).Str("cause", string(d.Cause)).Err(d.Err).
			Msg("preemption: nothing evicted")
	}
	switch d.Outcome {
	case preemption.Fits:
		// Admission held it back all the same (its order, fair sharing): nothing to
		// evict; ask again later like any wait.
	case preemption.Preempt:
		noticed := 0
		for _, v := range d.Victims {
			victim := m.groups[v.ID]
			if victim == nil || victim.eviction != nil || victim.info.State != pb.PlacementGroupState_CREATED {
				continue
			}
			m.noticeLocked(victim, v.Reason, e.id, gracePeriod(cfg, victim.info), now)
			noticed++
		}
		m.log.Info().Str("pg_id", e.id).Int("victims", noticed).Int64("gpus_evicted", int64(d.GPUsEvicted/resources.AmountScale)).
			Msg("preempting running groups to make room")
		m.recordWaitingLocked(e, pending.PreemptionDelay, now)
		return
	case preemption.Wait:
		q, ok := cfg.Queue(e.info.Queue)
		if !ok || q.Preemption == nil {
			break
		}
		delay := time.Duration(q.Preemption.PreemptionDelay)
		switch d.Cause {
		case preemption.CauseWithinDelay:
			retryAt = time.Unix(0, c.preemptor.PendingSince).Add(delay)
		case preemption.CauseNewCapacitySooner:
			// Decide again once the nodes are later than expected by the delay.
			if due := now.Add(time.Duration(c.preemptor.NewCapacityIn) + delay + time.Millisecond); due.Before(retryAt) {
				retryAt = due
			}
		}
	case preemption.Cannot:
		if d.Cause == preemption.CauseInvalid {
			m.log.Error().Err(d.Err).Str("pg_id", e.id).Msg("preemption decision refused its input")
		}
	}
	if d.Pending == pending.WaitingForNewNode {
		m.recordWaitingLocked(e, d.Pending, now)
	}
	if m.preemptRetryAt.IsZero() || retryAt.Before(m.preemptRetryAt) {
		m.preemptRetryAt = retryAt
	}
}

// noticeLocked tells a running group it is being preempted: the notice goes on its row
// (persisted) and to its owner's long poll; the group is released at the deadline
// unless its owner acknowledges first.
func (m *pgManager) noticeLocked(e *pgEntry, reason preemption.Reason, preemptor string, grace time.Duration, now time.Time) {
	deadline := now.Add(grace)
	notice := &pb.PreemptionNotice{Reason: string(reason), PreemptorId: preemptor, TimeMs: now.UnixMilli(), DeadlineMs: deadline.UnixMilli()}
	e.info.Preemptions++
	e.info.LastPreemption = notice
	m.preemptions[[2]string{e.info.Queue, string(reason)}]++
	e.eviction = &evictionState{notice: notice, deadline: deadline, awaiting: e.listeningLocked(now)}
	m.evicting[e.id] = e
	m.logPersistError(m.persistLocked(e))
	e.notify()
	m.log.Info().Str("pg_id", e.id).Str("reason", string(reason)).Str("preemptor", preemptor).Time("deadline", deadline).
		Msg("placement group preempted: notice given")
}

// evictionsDueLocked starts releasing the noticed groups whose deadline passed and
// returns how long until the next deadline (at most max).
func (m *pgManager) evictionsDueLocked(now time.Time, max time.Duration) time.Duration {
	next := max
	for _, e := range m.evicting {
		if e.eviction.releasing {
			continue
		}
		if wait := e.eviction.deadline.Sub(now); wait > 0 {
			next = min(next, wait)
			continue
		}
		m.log.Info().Str("pg_id", e.id).Msg("preemption deadline passed without an acknowledgement: releasing the group")
		m.evictLocked(e)
	}
	if !m.preemptRetryAt.IsZero() {
		if wait := m.preemptRetryAt.Sub(now); wait <= 0 {
			m.preemptRetryAt = time.Time{}
			if m.admission != nil {
				m.admission.dirty = true
			}
		} else {
			next = min(next, wait)
		}
	}
	return next
}

// evictLocked releases a noticed group's bundles: the raylets cancel them (ending its
// workers), then, once confirmed, the view gives them back, its quota is returned and it
// waits in its queue again, PENDING with reason Preempted.
func (m *pgManager) evictLocked(e *pgEntry) {
	if node := e.eviction.node; node != "" {
		e.eviction.notice.Acknowledged = true
		delete(m.evicting, e.id)
		e.eviction = nil
		lost := m.loseBundlesLocked(e, node)
		m.nodesChanged()
		m.cancelLost(node, lost)
		return
	}
	e.eviction.releasing = true
	e.eviction.notice.Acknowledged = true
	m.logPersistError(m.persistLocked(e))
	e.notify()
	byNode := bundlesByNode(e.id, e.info.Bundles, nil)
	released := func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, bundles := range byNode {
			for _, b := range bundles {
				m.releasedLocked(e.id, int(b.Key.BundleIndex))
			}
		}
		delete(m.evicting, e.id)
		notice := e.eviction.notice
		e.eviction = nil
		if m.groups[e.id] != e {
			return // removed meanwhile: the removal cancelled its bundles too
		}
		for _, b := range e.info.Bundles {
			unplace(b)
		}
		m.queue.drop(e)
		m.returnChargeLocked(e.id)
		e.info.State = pb.PlacementGroupState_PENDING
		e.info.Stats.SchedulingState = pb.SchedulingState_QUEUED
		e.info.PendingReasonCode = string(pending.Preempted)
		e.info.PendingReason = fmt.Sprintf("%s by %s (%s) in queue %q", pending.Preempted, notice.PreemptorId, notice.Reason, e.info.Queue)
		e.info.RejectionSummaries = nil
		e.admittedAt, e.queuedSince = time.Time{}, m.now()
		e.retry.reset()
		m.queue.add(e)
		m.logPersistError(m.persistLocked(e))
		e.notify()
		m.log.Info().Str("pg_id", e.id).Msg("preempted placement group released; queued again")
		m.kick()
	}
	// Not under mu: the cancels call the raylets.
	go func() { m.afterConfirmed(m.cancelAll(byNode), "a preempted group's bundles", released) }()
}

// WaitPreemptionNotice implements pb.PlacementGroupServiceServer.
func (m *pgManager) WaitPreemptionNotice(ctx context.Context, req *pb.WaitPreemptionNoticeRequest) (*pb.WaitPreemptionNoticeReply, error) {
	wait := maxNoticeWait
	if req.WaitMs > 0 {
		wait = min(time.Duration(req.WaitMs)*time.Millisecond, maxNoticeWait)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var listener *noticeListener // registered on the group while this call polls
	defer func() {
		if listener != nil {
			m.mu.Lock()
			listener.polling--
			listener.last = m.now()
			m.mu.Unlock()
		}
	}()
	for {
		m.mu.Lock()
		e := m.lookupLocked(req.PlacementGroupId)
		if e == nil {
			m.mu.Unlock()
			return nil, errNoSuchGroup(req.PlacementGroupId)
		}
		if !e.live() {
			m.mu.Unlock()
			return nil, errGroupRemoved(req.PlacementGroupId)
		}
		e.lastNoticePoll = m.now() // a hook listens: a spot interruption notices it first
		if listener == nil {
			if e.listeners == nil {
				e.listeners = map[string]*noticeListener{}
			}
			if listener = e.listeners[req.ListenerId]; listener == nil {
				listener = &noticeListener{}
				e.listeners[req.ListenerId] = listener
			}
			listener.polling++
		}
		if e.eviction != nil && !e.eviction.releasing {
			reply := &pb.WaitPreemptionNoticeReply{Notice: proto.Clone(e.eviction.notice).(*pb.PreemptionNotice)}
			m.mu.Unlock()
			return reply, nil
		}
		changed := e.changedLocked()
		m.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			return &pb.WaitPreemptionNoticeReply{}, nil
		case <-ctx.Done():
			return &pb.WaitPreemptionNoticeReply{}, nil
		}
	}
}

// AckPreemptionNotice implements pb.PlacementGroupServiceServer.
func (m *pgManager) AckPreemptionNotice(ctx context.Context, req *pb.AckPreemptionNoticeRequest) (*pb.AckPreemptionNoticeReply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.lookupLocked(req.PlacementGroupId)
	if e == nil {
		return nil, errNoSuchGroup(req.PlacementGroupId)
	}
	if e.eviction == nil || e.eviction.releasing || (req.TimeMs != 0 && req.TimeMs != e.eviction.notice.TimeMs) {
		return &pb.AckPreemptionNoticeReply{}, nil
	}
	delete(e.eviction.awaiting, req.ListenerId)
	if len(e.eviction.awaiting) > 0 {
		m.log.Info().Str("pg_id", e.id).Str("listener", req.ListenerId).Int("awaiting", len(e.eviction.awaiting)).
			Msg("preemption notice acknowledged; waiting for the group's other listeners")
		return &pb.AckPreemptionNoticeReply{}, nil
	}
	m.log.Info().Str("pg_id", e.id).Str("listener", req.ListenerId).Msg("preemption notice acknowledged: releasing the group")
	m.evictLocked(e)
	return &pb.AckPreemptionNoticeReply{}, nil
}

// queueOf is a group's queue ("" for an unknown group or without queues).
func (m *pgManager) queueOf(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.groups[id]; e != nil {
		return e.info.Queue
	}
	return ""
}

// preemptionDecisionCounts copies the preemption decisions made so far by outcome and
// cause.
func (m *pgManager) preemptionDecisionCounts() map[[2]string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.preemptionDecisions)
}

// preemptionCounts copies the notices given so far by queue and reason.
func (m *pgManager) preemptionCounts() map[[2]string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.preemptions)
}
