package gcs

import (
	"errors"
	"fmt"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Admission of placement groups into queues with quotas (Kueue's semantics, package
// admission). With a queue configuration, a new group is first admitted whole against its
// queue's quota (and its cohort's), in priority then arrival order, and only then placed;
// its charge is returned when it is removed. Without one (the default) groups are placed
// as they come. Groups already charged (placed, or rescheduling lost bundles) are not
// admitted again.

// admissionState is the manager's side of admission. Guarded by pgManager.mu.
type admissionState struct {
	config *queues.Config
	ledger *admission.Ledger
	// dirty: something happened that may change a decision (a group came or went,
	// capacity was freed, a node changed); the next round decides again.
	dirty bool
}

// resolveQueue fills a new group's queue and priority from the request, or says
// which field is wrong. Without queues it records what was asked, unchecked.
func (m *pgManager) resolveQueue(req *pb.CreatePlacementGroupRequest, info *pb.PlacementGroupInfo) error {
	if m.admission == nil {
		info.Queue, info.PriorityClass = req.Queue, req.Priority
		return nil
	}
	cfg := m.admission.config
	queue := req.Queue
	if queue == "" {
		queue = cfg.QueueForNamespace(info.Namespace)
	}
	if err := cfg.CheckQueue(queue); err != nil {
		return errorf(fielderr.ErrInvalid, "%s", err.Error())
	}
	value, err := cfg.Priority(req.Priority, queue)
	if err != nil {
		return errorf(fielderr.ErrInvalid, "%s", err.Error())
	}
	info.Queue, info.PriorityClass, info.Priority = queue, req.Priority, value
	return nil
}

// chargedLocked reports whether a group holds its queue's quota.
func (m *pgManager) chargedLocked(id string) bool {
	return m.admission == nil || m.admission.ledger.Holds(id)
}

// returnChargeLocked gives a removed group's quota back.
func (m *pgManager) returnChargeLocked(id string) {
	if m.admission != nil && m.admission.ledger.Remove(id) {
		m.admission.dirty = true
	}
}

// viewCapacity answers admission's questions with the scheduler itself over the loop's
// view: a workload fits when placement finds a plan for its group now, and Take reserves
// that plan (the round then starts its two-phase commit). Time is in Unix milliseconds:
// a group that declared max_runtime_s ends max_runtime_s after it first ran (work taken
// in this decision, after now), and a gang that waits is expected to fit once enough of
// that work has ended (EarliestFit), so its reservation is timed and smaller work may
// backfill where it ends in time (FitsAt). Work without a declared end never ends.
type viewCapacity struct {
	view     *clusterView
	requests map[*resources.Set]placement.Request // by the workload's first bundle
	ids      map[*resources.Set]string
	plans    map[string]placement.Plan
	maxFree  resources.Set
	// now and ends: the decision's time, and each group's declared end.
	now  int64
	ends map[string]int64
	// metrics times the placement decisions.
	metrics *pgMetrics
	// decisions counts the placement decisions made.
	decisions int
}

func (c *viewCapacity) request(gang []resources.Set) (placement.Request, string, bool) {
	if len(gang) == 0 {
		return placement.Request{}, "", false
	}
	r, ok := c.requests[&gang[0]]
	return r, c.ids[&gang[0]], ok
}

func (c *viewCapacity) Fit(gang []resources.Set) pending.Reason {
	request, _, ok := c.request(gang)
	if !ok {
		return pending.Internal
	}
	if c.maxFree == nil {
		c.maxFree = c.view.snapshot.MaxAvailable()
	}
	if placement.CannotFitNow(request, c.maxFree) {
		return pending.NoResources
	}
	c.decisions++
	_, err := c.metrics.schedule(c.view.snapshot, request)
	if err == nil {
		return ""
	}
	var unschedulable *placement.UnschedulableError
	if errors.As(err, &unschedulable) {
		_, available := c.view.snapshot.ResourceSummary()
		return pendingCode(unschedulable, request, available)
	}
	return pending.Internal
}

// EarliestFit is the first declared end of held work after which the gang fits.
func (c *viewCapacity) EarliestFit(gang []resources.Set) (int64, bool) {
	if c.Fit(gang) == "" {
		return c.now, true
	}
	var ends []int64
	for ref := range c.view.held {
		if end, ok := c.ends[ref.group]; ok {
			ends = append(ends, max(end, c.now))
		}
	}
	return admission.FirstFitAmong(ends, func(at int64) bool { return c.FitsAt(gang, at) })
}

// FitsAt reports whether the gang would fit once the held work that declared an end at
// or before at has ended: it gives those bundles back in the view, asks the scheduler,
// and holds them again.
func (c *viewCapacity) FitsAt(gang []resources.Set, at int64) bool {
	request, _, ok := c.request(gang)
	if !ok {
		return false
	}
	var freed []heldBundle
	for ref, h := range c.view.held {
		end, declared := c.ends[ref.group]
		if !declared || max(end, c.now) > at || h.mig { // MIG slices are the raylet's to give back
			continue
		}
		if c.view.snapshot.Release([]resources.Set{h.resources}, heldPlan(h)) == nil {
			freed = append(freed, h)
		}
	}
	c.decisions++
	_, err := c.metrics.schedule(c.view.snapshot, request)
	for _, h := range freed {
		_ = c.view.snapshot.Reserve([]resources.Set{h.resources}, heldPlan(h)) // gives back what Release took
	}
	return err == nil
}

// heldPlan is the one-bundle plan of a held bundle.
func heldPlan(h heldBundle) placement.Plan {
	return placement.Plan{Placements: []placement.BundlePlacement{{BundleIndex: 0, NodeID: h.node, GPUIndices: h.gpus}}}
}

func (c *viewCapacity) Take(w admission.Workload) {
	request, id, ok := c.request(w.Bundles)
	if !ok {
		return
	}
	c.decisions++
	plan, err := c.metrics.schedule(c.view.snapshot, request)
	if err != nil || c.view.reserve(id, request.Bundles, plan) != nil {
		return
	}
	c.plans[id] = plan
	c.maxFree = nil
	if w.MaxRuntime > 0 {
		c.ends[id] = c.now + w.MaxRuntime
	}
}

func (c *viewCapacity) Release(w admission.Workload) {
	_, id, ok := c.request(w.Bundles)
	if !ok {
		return
	}
	if plan, held := c.plans[id]; held {
		for _, p := range plan.Placements {
			c.view.release(bundleRef{id, p.BundleIndex})
		}
		delete(c.plans, id)
		c.maxFree = nil
	}
	delete(c.ends, id) // a pending workload's end exists only once Take took it
}

// admitRound runs one admission decision over every queued group that holds no charge,
// places what it admits and records why the others wait, which it returns. It runs in the loop goroutine
// (it reads and changes the view) and returns how many placement decisions it made.
func (m *pgManager) admitRound(now time.Time, workload *placement.WorkloadDistribution) (int, map[string]pending.Reason) {
	m.mu.Lock()
	if m.admission == nil || !m.admission.dirty {
		m.mu.Unlock()
		return 0, nil
	}
	m.admission.dirty = false
	cfg := m.admission.config
	usage := m.admission.ledger.Usage()
	capacity := &viewCapacity{view: m.view, requests: map[*resources.Set]placement.Request{}, ids: map[*resources.Set]string{}, plans: map[string]placement.Plan{},
		now: now.UnixMilli(), ends: map[string]int64{}, metrics: m.metrics}
	for id, e := range m.groups {
		// Admitted and being placed, it runs from about now.
		if end, declared := runEndMs(e.info, now.UnixMilli()); declared && m.chargedLocked(id) {
			capacity.ends[id] = end
		}
	}
	var work []admission.Workload
	entries := map[string]*pgEntry{}
	for _, s := range m.queue.shapes {
		for _, e := range s.entries {
			id := e.info.PlacementGroupId
			if m.chargedLocked(id) {
				continue
			}
			request := e.request
			request.Bundles = append([]resources.Set(nil), request.Bundles...) // a slice of its own: its first element keys it
			request.Workload = workload
			w := admission.Workload{ID: id, Queue: e.info.Queue, Priority: e.info.Priority, Arrival: e.seq, Bundles: request.Bundles,
				MaxRuntime: e.info.MaxRuntimeS * 1000}
			capacity.requests[&request.Bundles[0]] = request
			capacity.ids[&request.Bundles[0]] = id
			entries[id] = e
			work = append(work, w)
		}
	}
	m.mu.Unlock()
	if len(work) == 0 {
		return 0, nil
	}

	decision := admission.Decide(admission.Input{Config: cfg, Usage: usage, Pending: work, Capacity: capacity})

	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range decision.Admitted {
		e := entries[w.ID]
		plan, planned := capacity.plans[w.ID]
		if !e.live() || e.queued == nil || e.inFlight != nil {
			capacity.Release(w)
			continue
		}
		charge, err := w.Charge()
		if err == nil {
			err = m.admission.ledger.Admit(w.ID, w.Queue, charge)
		}
		if err != nil {
			m.log.Error().Err(err).Str("pg_id", w.ID).Msg("cannot charge an admitted group")
			capacity.Release(w)
			continue
		}
		if !planned { // admitted, but the plan could not be reserved: the shape path places it
			continue
		}
		m.queue.drop(e)
		m.startCommitLocked(e, plan, now)
	}
	for id, reason := range decision.Waiting {
		e := entries[id]
		if !e.live() || e.queued == nil {
			continue
		}
		m.recordWaitingLocked(e, reason, now)
	}
	return capacity.decisions, decision.Waiting
}

// admissionWaitText is the pending_reason of work admission holds back.
func admissionWaitText(reason pending.Reason, queue string) string {
	return fmt.Sprintf("%s in queue %q", reason, queue)
}

// recordWaitingLocked records why admission holds a group back. A preempted group keeps
// saying Preempted until it runs again, unless it can never run or preempts in turn.
func (m *pgManager) recordWaitingLocked(e *pgEntry, reason pending.Reason, now time.Time) {
	if e.waitingForNode && (reason == pending.NoResources || reason == pending.Fragmented) {
		// Preemption chose to wait for the autoscaler's new nodes: that is why it waits
		// (the next decision says otherwise if the nodes stop coming).
		reason = pending.WaitingForNewNode
	}
	if e.info.PendingReasonCode == string(pending.Preempted) &&
		reason != pending.Infeasible && reason != pending.PreemptionDelay && reason != pending.WaitingForNewNode {
		return
	}
	state := pb.SchedulingState_QUEUED
	switch {
	case reason == pending.Infeasible:
		state = pb.SchedulingState_INFEASIBLE
	case !reason.HeldByAdmission():
		state = pb.SchedulingState_NO_RESOURCES
	}
	text := admissionWaitText(reason, e.info.Queue)
	stats := e.info.Stats
	if stats.SchedulingStartedTimeMs == 0 {
		stats.SchedulingStartedTimeMs = now.UnixMilli()
	}
	changed := stats.SchedulingState != state || e.info.PendingReasonCode != string(reason)
	stats.SchedulingState = state
	e.info.PendingReason, e.info.PendingReasonCode = text, string(reason)
	if changed {
		m.logPersistError(m.persistLocked(e))
		e.notify()
	}
}
