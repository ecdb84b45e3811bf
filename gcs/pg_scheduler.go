package gcs

import (
	"errors"
	"maps"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/internal/pending"
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

// Scheduler settings.
const (
	// roundBudget bounds the deciding part of one round; what is left waits for the next
	// round, which starts at once.
	roundBudget = 50 * time.Millisecond
	// parkedFlush: every shape is tried again at least this often, whatever happened.
	parkedFlush = time.Minute
)

// nodesChanged is called when a node joined, died, changed or reported new MIG slot maps:
// the loop rebuilds its view of the cluster before its next round.
func (m *pgManager) nodesChanged() {
	m.viewStale.Store(true)
	m.kick()
}

// releasedLocked records that bundles no longer hold their node's resources (their
// raylets confirmed the cancel, or never held them): the loop gives them back in its
// view and wakes the shapes that the freed capacity could help. Callers hold mu.
func (m *pgManager) releasedLocked(group string, indices ...int) {
	for _, i := range indices {
		m.releases = append(m.releases, bundleRef{group, i})
	}
	if m.admission != nil {
		m.admission.dirty = true
	}
}

// waitingLocked reports whether anything may be waiting for capacity: queued groups,
// groups backing off, admission (its queues and preemptions), evictions. When nothing
// is, released bundles need no round at once: the view takes them back at its next use
// (a create placing its group, or the loop's next round, at most a second away).
// Callers hold mu.
func (m *pgManager) waitingLocked() bool {
	return len(m.queue.shapes) > 0 || len(m.queue.backoff) > 0 || m.admission != nil || len(m.evicting) > 0
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

// rebuildView builds the view from the node table and the held bundles, outside mu (at
// ten thousand nodes it takes a while): the bundles held are read under mu, and the
// releases recorded until then are in them; those recorded while building are applied
// to the new view after (releases are idempotent). Shapes that a new or changed node
// could help are woken. It reports false when the view cannot be built (logged; tried
// again next round).
func (m *pgManager) rebuildView() bool {
	nodes := m.nodes.schedulingNodes() // without mu: a directory is never called under it
	m.mu.Lock()
	held := m.heldBundlesLocked()
	m.releases = m.releases[:0]
	m.mu.Unlock()
	view, err := buildView(nodes, held)
	if err != nil {
		m.log.Error().Err(err).Msg("cannot build a cluster snapshot")
		m.viewStale.Store(true)
		return false
	}
	var changed []placement.NodeID
	if m.view != nil {
		changed = changedNodes(m.view, view)
	}
	m.mu.Lock()
	if m.view == nil {
		m.queue.wakeAll()
	}
	for _, id := range changed {
		if node, ok := view.snapshot.Node(id); ok {
			m.queue.wakeFor(node)
		}
	}
	m.view = view
	if m.admission != nil {
		m.admission.dirty = true
	}
	m.mu.Unlock()
	return true
}

// decision is one group's outcome in a round.
type roundDecision struct {
	entry *pgEntry
	plan  placement.Plan
}

// roundFailure is one shape's failed attempt.
type roundFailure struct {
	shape   *shape
	tried   *pgEntry
	err     error
	request placement.Request
}

// scheduleRound brings the view up to date, then tries the unparked shapes in queue order
// (groups rescheduling lost bundles first, then arrival order): each shape's groups one
// after the other until one fails, which parks the shape. Deciding runs without mu, so
// the table's RPCs never wait for it, and within roundBudget. It returns how long until
// the loop must run again and how many decisions it made.
func (m *pgManager) scheduleRound() (time.Duration, int) {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	now := m.now()
	if m.view == nil || m.viewStale.Swap(false) {
		if !m.rebuildView() {
			return time.Second, 0
		}
	}

	m.mu.Lock()
	m.applyReleasesLocked()
	if now.Sub(m.lastFlush) >= parkedFlush {
		m.lastFlush = now
		m.queue.wakeAll()
		if m.admission != nil {
			m.admission.dirty = true
		}
	}
	wait := m.queue.due(now, time.Second)
	wait = m.evictionsDueLocked(now, wait)
	type work struct {
		shape   *shape
		entries []*pgEntry
		placed  []map[int]placement.NodeID
		// explained: every group of the shape already says why it waits.
		explained bool
	}
	var todo []work
	for _, s := range m.queue.ready() {
		entries := s.entries
		if m.admission != nil { // only groups admission charged are placed here
			entries = nil
			for _, e := range s.entries {
				if m.chargedLocked(e.info.PlacementGroupId) {
					entries = append(entries, e)
				}
			}
			if len(entries) == 0 {
				continue
			}
		}
		w := work{shape: s, entries: append([]*pgEntry(nil), entries...), explained: true}
		for _, e := range w.entries {
			w.explained = w.explained && e.info.PendingReasonCode != "" && e.info.PendingReasonCode != string(pending.Internal)
			var placed map[int]placement.NodeID
			for i, b := range e.info.Bundles {
				if b.NodeId != "" {
					if placed == nil {
						placed = map[int]placement.NodeID{}
					}
					placed[i] = placement.NodeID(b.NodeId)
				}
			}
			w.placed = append(w.placed, placed)
		}
		todo = append(todo, w)
	}
	var workload *placement.WorkloadDistribution
	admitting := m.admission != nil && m.admission.dirty
	if len(todo) > 0 || admitting {
		workload = m.workloadLocked()
	}
	m.mu.Unlock()
	attempts := 0
	if admitting {
		decisions, waiting := m.admitRound(now, workload)
		attempts += decisions + m.preemptRound(now, waiting)
	}
	if len(todo) == 0 {
		return wait, attempts
	}

	// Decide, without mu. viewMu keeps placeNow out of the view.
	view := m.view
	var decided []roundDecision
	var failed []roundFailure
	var untried []*shape
	var stillParked []*shape
	// maxFree bounds what any node has free; a shape with a bundle above it cannot fit
	// and keeps the reason its last attempt gave, without another decision.
	var maxFree resources.Set
	deadline := time.Now().Add(roundBudget)
	for _, w := range todo {
		if time.Now().After(deadline) {
			untried = append(untried, w.shape)
			continue
		}
		if maxFree == nil {
			maxFree = view.snapshot.MaxAvailable()
		}
		head := w.entries[0].request
		head.PlacedBundles = w.placed[0]
		if w.explained && placement.CannotFitNow(head, maxFree) {
			stillParked = append(stillParked, w.shape)
			continue
		}
		for i, e := range w.entries {
			request := e.request
			request.PlacedBundles, request.Workload = w.placed[i], workload
			attempts++
			plan, err := m.metrics.schedule(view.snapshot, request)
			if err == nil {
				err = view.reserve(e.id, request.Bundles, plan)
			}
			if err != nil {
				failed = append(failed, roundFailure{shape: w.shape, tried: e, err: err, request: request})
				break
			}
			decided = append(decided, roundDecision{entry: e, plan: plan})
			maxFree = nil
		}
	}

	// Apply, under mu: a group removed (or changed) meanwhile gives its plan back.
	m.mu.Lock()
	var available resources.Set
	for _, d := range decided {
		e := d.entry
		if !e.live() || e.inFlight != nil || e.queued == nil {
			for _, p := range d.plan.Placements {
				view.release(bundleRef{e.info.PlacementGroupId, p.BundleIndex})
			}
			continue
		}
		m.queue.drop(e)
		m.startCommitLocked(e, d.plan, now)
	}
	for _, s := range stillParked {
		s.parked = true
	}
	for _, f := range failed {
		if m.queue.shapes[f.shape.key] != f.shape {
			continue // every group of the shape left the queue meanwhile
		}
		if available == nil {
			_, available = view.snapshot.ResourceSummary()
		}
		m.recordUnschedulableLocked(f, available, now)
	}
	m.mu.Unlock()
	if len(untried) > 0 {
		m.kick()
	}
	return wait, attempts
}

// applyReleasesLocked gives the bundles released since the view last looked back to
// their nodes in the view, and wakes the shapes the freed nodes could help. A release
// the view cannot make in place (a MIG bundle) asks for a rebuild. Callers hold viewMu
// and mu.
func (m *pgManager) applyReleasesLocked() {
	if len(m.releases) == 0 {
		return
	}
	freed := map[placement.NodeID]bool{}
	for _, ref := range m.releases {
		node, released, ok := m.view.release(ref)
		if !ok {
			m.viewStale.Store(true)
			m.kick()
		}
		if released {
			freed[node] = true
		}
	}
	m.releases = m.releases[:0]
	for id := range freed {
		if node, ok := m.view.snapshot.Node(id); ok {
			m.queue.wakeFor(node)
		}
	}
}

// workloadLocked is the decaying distribution of request shapes the GCS saw, for
// fragmentation-aware scoring: nil before it saw any. Callers hold mu.
func (m *pgManager) workloadLocked() *placement.WorkloadDistribution {
	if d := m.workload.Distribution(); len(d.Shapes) > 0 {
		return &d
	}
	return nil
}

// placeNow makes a new group's first attempt inside its create call, without waiting
// for the loop's next round, when nothing waits ahead of it: admission is off, the group
// is the first of its shape and every other shape is parked (so the loop would try it
// first too), and the view is current. On success it starts the group's reservation and
// reports true; otherwise the group stays queued untouched (the loop tries it, and says
// why when it cannot be placed) and it reports false.
func (m *pgManager) placeNow(e *pgEntry) bool {
	if m.admission != nil {
		return false // admission decides in the loop, charging queues in order
	}
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	if m.view == nil || m.viewStale.Load() {
		return false
	}
	now := m.now()
	m.mu.Lock()
	if !m.firstInLineLocked(e) {
		m.mu.Unlock()
		return false
	}
	m.applyReleasesLocked()
	request := e.request
	request.Workload = m.workloadLocked()
	m.mu.Unlock()

	// Decide without mu, as a round does; viewMu keeps the loop out.
	plan, err := m.metrics.schedule(m.view.snapshot, request)
	if err == nil {
		err = m.view.reserve(e.id, request.Bundles, plan)
	}
	if err != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !e.live() || e.inFlight != nil || e.queued == nil {
		// Removed or taken meanwhile: give the plan back.
		for _, p := range plan.Placements {
			m.view.release(bundleRef{e.id, p.BundleIndex})
		}
		return false
	}
	m.queue.drop(e)
	m.startCommitLocked(e, plan, now)
	return true
}

// firstInLineLocked reports whether the loop's next round would try e before any other
// group: a group new to the queue (not RESCHEDULING), first of its shape, with every
// other shape parked. Callers hold mu.
func (m *pgManager) firstInLineLocked(e *pgEntry) bool {
	s := e.queued
	if s == nil || !e.live() || e.rescheduling() || len(s.entries) == 0 || s.entries[0] != e {
		return false
	}
	for _, other := range m.queue.shapes {
		if other != s && !other.parked && len(other.entries) > 0 {
			return false
		}
	}
	return true
}

// startCommitLocked starts the two-phase commit of a group's plan.
func (m *pgManager) startCommitLocked(e *pgEntry, plan placement.Plan, now time.Time) {
	stats := e.info.Stats
	stats.SchedulingAttempt++
	if stats.SchedulingStartedTimeMs == 0 {
		stats.SchedulingStartedTimeMs = now.UnixMilli()
	}
	e.inFlight = map[int]placement.BundlePlacement{}
	for _, p := range plan.Placements {
		e.inFlight[p.BundleIndex] = p
	}
	stats.SchedulingState = pb.SchedulingState_SCHEDULING_STARTED
	e.info.PendingReason, e.info.PendingReasonCode, e.info.RejectionSummaries = "", "", nil
	go m.twoPhaseCommit(e, maps.Clone(e.inFlight))
}

// recordUnschedulableLocked parks a shape after its attempt failed and gives every group
// of it the reason. A failure that is not the cluster's (a bug, a bad stored row) backs
// the tried group off alone, with reason Internal, and never holds the others.
func (m *pgManager) recordUnschedulableLocked(f roundFailure, available resources.Set, now time.Time) {
	var unschedulable *placement.UnschedulableError
	if !errors.As(f.err, &unschedulable) {
		e := f.tried
		m.log.Error().Err(f.err).Str("pg_id", e.info.PlacementGroupId).Msg("placement group cannot be scheduled")
		if e.queued != nil && e.live() {
			m.queue.drop(e)
			e.info.Stats.SchedulingAttempt++
			e.info.PendingReason, e.info.PendingReasonCode = "internal: "+f.err.Error(), string(pending.Internal)
			m.backoffLocked(e, now)
			m.queue.addAfterBackoff(e)
			e.notify()
		}
		m.kick() // the shape's other groups are not held back
		return
	}
	state := pb.SchedulingState_NO_RESOURCES
	if unschedulable.Kind == placement.Infeasible {
		state = pb.SchedulingState_INFEASIBLE
	}
	summaries := summarizeRejections(unschedulable.NodeReasons)
	reason := pendingReasonText(unschedulable, summaries)
	code := string(pendingCode(unschedulable, f.request, available))
	f.shape.parked = true
	f.tried.info.Stats.SchedulingAttempt++
	for _, e := range f.shape.entries {
		stats := e.info.Stats
		if stats.SchedulingStartedTimeMs == 0 {
			stats.SchedulingStartedTimeMs = now.UnixMilli()
		}
		changed := stats.SchedulingState != state || e.info.PendingReasonCode != code
		stats.SchedulingState = state
		e.info.PendingReason, e.info.PendingReasonCode, e.info.RejectionSummaries = reason, code, summaries
		if changed {
			// The reason is soft state, computed again after a restart: a row is written
			// when its state or code changes, not on every new wording.
			m.logPersistError(m.persistLocked(e))
			e.notify()
		}
	}
}

func (m *pgManager) backoffLocked(e *pgEntry, now time.Time) {
	delay := e.retry.fail(now, retryBackoffMin, retryBackoffMax)
	if ms := float64(delay.Milliseconds()); ms > e.info.Stats.HighestRetryDelayMs {
		e.info.Stats.HighestRetryDelayMs = ms
	}
}
