package gcs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/internal/pending"

	"github.com/raygo-dev/raygo/placement"
)

// twoPhaseCommit reserves a plan: prepare everywhere; all prepared → persist PREPARED →
// commit everywhere → persist CREATED. Any failure cancels everything the plan reserved
// and the group goes back to the queue with backoff.
func (m *pgManager) twoPhaseCommit(e *pgEntry, plan map[int]placement.BundlePlacement) {
	m.mu.Lock()
	id := e.info.PlacementGroupId
	byNode := bundlesByNode(id, e.info.Bundles, plan)
	m.mu.Unlock()
	if committer, ok := m.reserver.(prepareCommitter); ok && len(byNode) == 1 {
		m.oneStepCommit(e, plan, byNode, committer)
		return
	}

	if !m.reserveAndPlace(e, plan, byNode, "prepare", m.reserver.Prepare) {
		return
	}
	e.info.State = pb.PlacementGroupState_PREPARED
	if err := m.persistLocked(e); err != nil {
		m.mu.Unlock()
		m.requeuePlan(e, plan, byNode, err)
		return
	}
	e.notify()
	m.mu.Unlock()

	err := m.forEachNode(byNode, func(ctx context.Context, node string, bundles []*pb.BundleReservation) (*pb.ResourceReport, error) {
		return m.reserver.Commit(ctx, node, keysOf(bundles))
	})
	if err != nil {
		m.requeuePlan(e, plan, byNode, fmt.Errorf("commit: %w", err))
		return
	}
	m.mu.Lock()
	if !e.live() {
		m.mu.Unlock()
		// remove() cancelled too; cancels are idempotent.
		m.afterConfirmed(m.cancelAll(byNode), "a removed group's bundles", func() {
			m.mu.Lock()
			m.releasePlanLocked(id, plan)
			m.mu.Unlock()
			m.kick()
		})
		return
	}
	created := e.info.State == pb.PlacementGroupState_PREPARED && m.markCreatedLocked(e)
	m.mu.Unlock()
	m.notifyCreated(id, created)
	m.log.Debug().Str("pg_id", id).Int("bundles", len(plan)).Msg("placement group CREATED")
}

// oneStepCommit reserves a plan whose bundles all go to one node in a single raylet
// call, then persists the group CREATED.
// The cancels of removed groups waiting for a ride to the node go in the same call;
// they count as released once the call succeeded, else they are sent on their own.
func (m *pgManager) oneStepCommit(e *pgEntry, plan map[int]placement.BundlePlacement, byNode map[string][]*pb.BundleReservation, committer prepareCommitter) {
	var rides []cancelRide
	for node := range byNode {
		rides = m.takeRides(node, nil)
	}
	delivered := false
	reserve := func(ctx context.Context, node string, bundles []*pb.BundleReservation) ([]*pb.BundleReservation, *pb.ResourceReport, error) {
		made, report, err := committer.PrepareCommit(ctx, node, bundles, rideKeys(rides))
		if err == nil && len(rides) > 0 {
			delivered = true
			m.cancelled(rides)
		}
		return made, report, err
	}
	// placed: with mu held. Rides not delivered: not placed either, so mu is free.
	placed := m.reserveAndPlace(e, plan, byNode, "prepare and commit", reserve)
	if !delivered && len(rides) > 0 {
		// Not sent, or the call failed, maybe before the raylet applied them: they go
		// again on their own (cancels are idempotent).
		m.cancelNow(rides)
	}
	if !placed {
		return
	}
	created := m.markCreatedLocked(e)
	id := e.info.PlacementGroupId
	m.mu.Unlock()
	m.notifyCreated(id, created)
	m.log.Debug().Str("pg_id", id).Int("bundles", len(plan)).Msg("placement group CREATED")
}

// reserveAndPlace makes the reserving call (prepare, or prepare and commit) on every
// node of the plan in parallel and records where the bundles are, with what the raylets
// chose. On success it returns true with mu held; on a failure, or when the group was
// removed meanwhile, it undoes the plan (requeuePlan) and returns false without mu.
func (m *pgManager) reserveAndPlace(e *pgEntry, plan map[int]placement.BundlePlacement, byNode map[string][]*pb.BundleReservation, step string,
	reserve func(ctx context.Context, node string, bundles []*pb.BundleReservation) ([]*pb.BundleReservation, *pb.ResourceReport, error)) bool {
	// The plan may come from a view older than a drain: a draining node gets nothing.
	// A drain marks the node before it checks for in-flight plans, so a plan is either
	// seen by that check or refused here.
	for node := range byNode {
		if m.nodes.draining(node) {
			m.requeuePlan(e, plan, nil, fmt.Errorf("%s: node %s is draining", step, node))
			return false
		}
	}
	var madeMu sync.Mutex
	made := map[int32]*pb.BundleReservation{} // bundle index → reservation with its GPUs
	err := m.forEachNode(byNode, func(ctx context.Context, node string, bundles []*pb.BundleReservation) (*pb.ResourceReport, error) {
		reserved, report, err := reserve(ctx, node, bundles)
		m.reconcileRefused(node, err)
		madeMu.Lock()
		for _, r := range reserved {
			if r != nil {
				made[r.Key.BundleIndex] = r
			}
		}
		madeMu.Unlock()
		return report, err
	})
	if err != nil {
		m.requeuePlan(e, plan, byNode, fmt.Errorf("%s: %w", step, err))
		return false
	}
	addresses := rayletAddresses(m.nodes, byNode)
	m.mu.Lock()
	if !e.live() {
		m.mu.Unlock()
		m.requeuePlan(e, plan, byNode, errors.New("removed while being placed"))
		return false
	}
	placeLocked(e, plan, made, addresses)
	return true
}

// rayletAddresses is the raylet address of each node of byNode, read without mu.
func rayletAddresses(nodes nodeDirectory, byNode map[string][]*pb.BundleReservation) map[string]string {
	out := make(map[string]string, len(byNode))
	for node := range byNode {
		out[node] = nodes.rayletAddress(node)
	}
	return out
}

// placeLocked records where a reserved plan's bundles are, with what the raylets chose
// (GPUs, MIG devices), at their next generation.
func placeLocked(e *pgEntry, plan map[int]placement.BundlePlacement, made map[int32]*pb.BundleReservation, addresses map[string]string) {
	for index, p := range plan {
		b := e.info.Bundles[index]
		b.NodeId = string(p.NodeID)
		b.NodeAddress = addresses[b.NodeId]
		b.Generation++
		if r := made[b.BundleIndex]; r != nil {
			b.GpuIds, b.DeviceUuids = r.GpuIds, r.DeviceUuids
			b.CudaVisibleDevices = cudaVisibleDevices(r)
		}
	}
	e.inFlight = nil
}

// markCreatedLocked finishes a group: CREATED, stats, persisted, waiters woken. If a
// node died while the group was PREPARED, the group reschedules the lost bundles instead.
// It reports whether the group is CREATED: the caller tells the listeners once it has
// released mu (notifyCreated).
func (m *pgManager) markCreatedLocked(e *pgEntry) bool {
	now := m.now().UnixMilli()
	stats := e.info.Stats
	e.info.State = pb.PlacementGroupState_CREATED
	for _, b := range e.info.Bundles {
		if b.NodeId == "" {
			e.info.State = pb.PlacementGroupState_RESCHEDULING
		}
	}
	if e.info.State == pb.PlacementGroupState_CREATED {
		e.admittedAt, e.queuedSince, e.waitingForNode = time.UnixMilli(now), time.Time{}, false
		if e.info.RunningSinceMs == 0 {
			e.info.RunningSinceMs = now
			m.expireLater(e)
		}
		stats.SchedulingState = pb.SchedulingState_FINISHED
		if stats.EndToEndCreationLatencyMs == 0 {
			stats.EndToEndCreationLatencyMs = float64(now - stats.CreationRequestReceivedMs)
			stats.SchedulingLatencyMs = float64(now - stats.SchedulingStartedTimeMs)
		}
	} else {
		stats.SchedulingState = pb.SchedulingState_QUEUED
	}
	e.retry.reset()
	e.info.PendingReason, e.info.PendingReasonCode, e.info.RejectionSummaries = "", "", nil
	if e.info.State == pb.PlacementGroupState_RESCHEDULING && e.queued == nil {
		m.queue.add(e)
		m.kick()
	}
	m.logPersistError(m.persistLocked(e))
	e.notify()
	return e.info.State == pb.PlacementGroupState_CREATED
}

// notifyCreated tells the listeners (actors waiting for its bundles) that a group is
// CREATED. Callers hold no lock.
func (m *pgManager) notifyCreated(id string, created bool) {
	if !created {
		return
	}
	m.metrics.commit("created")
	for _, l := range m.listeners {
		l.onPlacementGroupCreated(id)
	}
}

// requeuePlan undoes a plan whose prepare or commit failed (or whose group was removed
// meanwhile): cancel everywhere, unplace the plan's bundles, and queue the group again
// with backoff — PENDING, or RESCHEDULING when it still holds other bundles. The bundles
// of a cancel a raylet did not confirm stay held (holdUndoneLocked) until it is
// confirmed; the group may be placed again meanwhile, at a newer generation.
func (m *pgManager) requeuePlan(e *pgEntry, plan map[int]placement.BundlePlacement, byNode map[string][]*pb.BundleReservation, cause error) {
	m.metrics.commit("requeued")
	unconfirmed := m.cancelAll(byNode)
	m.mu.Lock()
	e.inFlight = nil
	id := e.info.PlacementGroupId
	undo := m.holdUndoneLocked(e, plan, unconfirmed)
	for index := range plan {
		if !slices.ContainsFunc(m.undos[undo], func(v viewBundle) bool { return v.ref.index == index }) {
			m.releasedLocked(id, index)
		}
	}
	if e.live() {
		e.info.State = pb.PlacementGroupState_PENDING
		for i, b := range e.info.Bundles {
			if _, inPlan := plan[i]; inPlan {
				unplace(b)
			} else if b.NodeId != "" {
				e.info.State = pb.PlacementGroupState_RESCHEDULING
			}
		}
		e.info.Stats.SchedulingState = pb.SchedulingState_FAILED_TO_COMMIT_RESOURCES
		e.info.PendingReason = "reservation failed, retrying: " + cause.Error()
		e.info.PendingReasonCode = string(pending.Internal)
		m.backoffLocked(e, m.now())
		m.queue.addAfterBackoff(e)
		m.logPersistError(m.persistLocked(e))
		e.notify()
	}
	m.mu.Unlock()
	m.log.Info().Err(cause).Str("pg_id", id).Msg("placement group reservation failed; re-queued")
	m.kick()
	if undo != "" {
		m.afterConfirmed(unconfirmed, "an undone reservation's bundles", func() {
			m.mu.Lock()
			for _, v := range m.undos[undo] {
				m.releasedLocked(v.ref.group, v.ref.index)
			}
			delete(m.undos, undo)
			m.mu.Unlock()
			m.kick()
		})
	}
}

// holdUndoneLocked keeps the bundles of an undone plan whose cancel a raylet did not
// confirm held in the view, under an undo key of their own (returned; "" when every
// cancel was confirmed): the raylet may still hold them. Their group's bundles move to
// the generation the plan used, so that its next attempt is newer: a raylet replaces
// the bundle it holds with a newer generation, and the cancel sent again for the older
// one never releases the newer. The view is rebuilt before the next decision, which
// moves the hold from the group to the undo key. Callers hold mu.
func (m *pgManager) holdUndoneLocked(e *pgEntry, plan map[int]placement.BundlePlacement, unconfirmed map[string][]*pb.BundleReservation) string {
	if len(unconfirmed) == 0 {
		return ""
	}
	m.undoSeq++
	undo := fmt.Sprintf("%s#undo%d", e.info.PlacementGroupId, m.undoSeq)
	for _, bundles := range unconfirmed {
		for _, r := range bundles {
			index := int(r.Key.BundleIndex)
			p := plan[index]
			m.undos[undo] = append(m.undos[undo], viewBundle{bundleRef{undo, index}, heldBundle{node: p.NodeID, gpus: p.GPUIndices,
				resources: e.request.Bundles[index], mig: p.MIG != nil}})
			if b := e.info.Bundles[index]; b.Generation < r.Key.Generation {
				b.Generation = r.Key.Generation
			}
		}
	}
	// The view still holds them as the group's, and would give them back to the group's
	// next plan: the next round or create rebuilds it first.
	m.viewStale.Store(true)
	return undo
}

// recoverPrepared finishes the two-phase commits a dead GCS left half done: commit every
// bundle again (a commit is idempotent); if any node refuses, cancel them all and queue
// the group again. Never a double allocation: the raylets hold each bundle once.
func (m *pgManager) recoverPrepared(groups []*pgEntry) {
	for _, e := range groups {
		m.mu.Lock()
		id := e.info.PlacementGroupId
		byNode := bundlesByNode(e.info.PlacementGroupId, e.info.Bundles, nil)
		m.mu.Unlock()
		err := m.forEachNode(byNode, func(ctx context.Context, node string, bundles []*pb.BundleReservation) (*pb.ResourceReport, error) {
			return m.reserver.Commit(ctx, node, keysOf(bundles))
		})
		m.mu.Lock()
		if !e.live() || e.info.State != pb.PlacementGroupState_PREPARED {
			m.mu.Unlock()
			continue
		}
		if err == nil {
			created := m.markCreatedLocked(e)
			m.log.Info().Str("pg_id", id).Msg("recovered a PREPARED group: committed")
			m.mu.Unlock()
			m.notifyCreated(id, created)
			continue
		}
		m.mu.Unlock()
		m.log.Warn().Err(err).Str("pg_id", id).Msg("recovered a PREPARED group: commit failed, cancelling and re-queueing")
		// The group stays PREPARED, its bundles held, until the raylets confirmed.
		m.afterConfirmed(m.cancelAll(byNode), "a recovered group's bundles", func() {
			m.mu.Lock()
			for _, bundles := range byNode {
				for _, b := range bundles {
					m.releasedLocked(id, int(b.Key.BundleIndex))
				}
			}
			if e.live() {
				for _, b := range e.info.Bundles {
					unplace(b)
				}
				e.info.State = pb.PlacementGroupState_PENDING
				e.info.Stats.SchedulingState = pb.SchedulingState_QUEUED
				m.queue.add(e)
				m.logPersistError(m.persistLocked(e))
				e.notify()
			}
			m.mu.Unlock()
			m.kick()
		})
	}
	m.kick()
}

// releasePlanLocked records that a plan's bundles hold nothing any more (their cancel
// is confirmed).
func (m *pgManager) releasePlanLocked(group string, plan map[int]placement.BundlePlacement) {
	for index := range plan {
		m.releasedLocked(group, index)
	}
}

// forEachNode calls call for every node's bundles in parallel, each bounded by
// rayletCallTimeout, records the resource report each returns and the node's work, and
// returns the first error.
func (m *pgManager) forEachNode(byNode map[string][]*pb.BundleReservation, call func(ctx context.Context, node string, bundles []*pb.BundleReservation) (*pb.ResourceReport, error)) error {
	one := func(node string, bundles []*pb.BundleReservation) error {
		ctx, cancel := context.WithTimeout(context.Background(), rayletCallTimeout)
		report, err := call(ctx, node, bundles)
		cancel()
		m.nodes.applyResourceReport(node, report)
		if err != nil {
			return fmt.Errorf("node %s: %w", node, err)
		}
		// Bundles came to or left the node: its idle clock restarts.
		m.nodes.noteWork(node)
		return nil
	}
	if len(byNode) == 1 { // the common case (a group on one node): no goroutine
		for node, bundles := range byNode {
			return one(node, bundles)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(byNode))
	for node, bundles := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := one(node, bundles); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// afterConfirmed calls released once the cancels that cancelAll left unconfirmed are
// confirmed, or their node is no longer ALIVE (a dead node holds nothing): at once when
// there are none, else from a goroutine that sends them again with backoff (never, if
// the GCS stops first). Until released runs, the caller keeps their bundles held in the
// view: the raylet may still hold them, and a group placed in that room would be refused
// there on every attempt. what names the bundles in the warning.
func (m *pgManager) afterConfirmed(unconfirmed map[string][]*pb.BundleReservation, what string, released func()) {
	if len(unconfirmed) == 0 {
		released()
		return
	}
	go func() {
		if m.retryCancels(what, unconfirmed) {
			released()
		}
	}()
}

// cancelAll releases bundles everywhere and returns those of the nodes whose raylet did
// not confirm (afterConfirmed sends them again).
func (m *pgManager) cancelAll(byNode map[string][]*pb.BundleReservation) map[string][]*pb.BundleReservation {
	var mu sync.Mutex
	unconfirmed := map[string][]*pb.BundleReservation{}
	err := m.forEachNode(byNode, func(ctx context.Context, node string, bundles []*pb.BundleReservation) (*pb.ResourceReport, error) {
		report, err := m.reserver.Cancel(ctx, node, keysOf(bundles))
		if err != nil {
			mu.Lock()
			unconfirmed[node] = bundles
			mu.Unlock()
		}
		return report, err
	})
	if err != nil {
		m.log.Debug().Err(err).Msg("cancel did not reach every raylet")
	}
	return unconfirmed
}

// bundlesByNode groups group id's placed bundles (or, with plan, the planned ones at
// their next generation) by node.
func bundlesByNode(id string, bundles []*pb.Bundle, plan map[int]placement.BundlePlacement) map[string][]*pb.BundleReservation {
	out := map[string][]*pb.BundleReservation{}
	for i, b := range bundles {
		node, generation, gpus := b.NodeId, b.Generation, b.GpuIds
		var mig *pb.MIGStep
		if plan != nil {
			p, ok := plan[i]
			if !ok {
				continue
			}
			node, generation, gpus = string(p.NodeID), generation+1, nil
			if mig = migStep(p.MIG); mig == nil {
				for _, gpu := range p.GPUIndices {
					gpus = append(gpus, int32(gpu))
				}
			}
		}
		if node == "" {
			continue
		}
		out[node] = append(out[node], &pb.BundleReservation{
			Key:       &pb.BundleKey{PlacementGroupId: id, BundleIndex: b.BundleIndex, Generation: generation},
			Resources: b.UnitResources, GpuIds: gpus, Mig: mig,
		})
	}
	return out
}

// migStep is the raylet's form of a scheduler MIG step (nil for none).
func migStep(step *placement.MIGStep) *pb.MIGStep {
	if step == nil {
		return nil
	}
	out := &pb.MIGStep{Gpu: int32(step.GPU), ProfileId: int32(step.Profile.ID), Start: int32(step.Start), ReuseIdle: step.Action == placement.MIGReuseIdle}
	for _, idle := range step.Destroy {
		out.DestroyStarts = append(out.DestroyStarts, int32(idle.Start))
	}
	return out
}

// unplace forgets where a bundle was.
func unplace(b *pb.Bundle) {
	b.NodeId, b.NodeAddress, b.GpuIds, b.DeviceUuids, b.CudaVisibleDevices = "", "", nil, nil, ""
}

// cudaVisibleDevices is the CUDA_VISIBLE_DEVICES value of a bundle: its MIG device UUIDs
// when it has MIG slices, else its GPUs' NVML indices (with CUDA_DEVICE_ORDER=PCI_BUS_ID,
// CUDA numbers GPUs as NVML does).
func cudaVisibleDevices(r *pb.BundleReservation) string {
	if r.Mig != nil {
		return strings.Join(r.DeviceUuids, ",")
	}
	parts := make([]string, len(r.GpuIds))
	for i, id := range r.GpuIds {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

func keysOf(bundles []*pb.BundleReservation) []*pb.BundleKey {
	keys := make([]*pb.BundleKey, len(bundles))
	for i, b := range bundles {
		keys[i] = b.Key
	}
	return keys
}
