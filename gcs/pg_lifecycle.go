package gcs

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/admission/preemption"
	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/resources"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// load reads the placement-group table after a restart: pending groups are queued again,
// CREATED groups on dead nodes reschedule, PREPARED groups are committed or cancelled.
func (m *pgManager) load(ctx context.Context) (prepared []*pgEntry, err error) {
	alive := map[string]bool{}
	for _, n := range m.nodes.aliveNodes() {
		alive[n.NodeId] = true
	}
	rows, err := m.store.GetAll(ctx, store.TablePlacementGroups)
	if err != nil {
		return nil, fmt.Errorf("load placement group table: %w", err)
	}
	ids := make([]string, 0, len(rows))
	entries := map[string]*pgEntry{}
	for id, raw := range rows {
		info := &pb.PlacementGroupInfo{}
		if err := proto.Unmarshal(raw, info); err != nil {
			return nil, fmt.Errorf("load placement group table: group %s: %w", id, err)
		}
		request, err := parseBundles(info.Strategy, info.Topology, info.Bundles)
		if err != nil {
			return nil, fmt.Errorf("load placement group table: group %s: %w", id, err)
		}
		entries[id] = newPGEntry(info, request)
		ids = append(ids, id)
	}
	// Arrival order is the creation time, then the id.
	sort.Slice(ids, func(i, j int) bool {
		a, b := entries[ids[i]].info.Stats, entries[ids[j]].info.Stats
		if a.GetCreationRequestReceivedMs() != b.GetCreationRequestReceivedMs() {
			return a.GetCreationRequestReceivedMs() < b.GetCreationRequestReceivedMs()
		}
		return ids[i] < ids[j]
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		e := entries[id]
		m.seq++
		e.seq = m.seq
		if !e.live() {
			m.removed[id] = e
			continue
		}
		m.groups[id] = e
		m.expireLater(e) // a group that ran past its max_runtime_s while the GCS was down goes now
		if e.info.Name != "" {
			m.names[nameKey(e.info.Namespace, e.info.Name)] = id
		}
		for _, b := range e.info.Bundles {
			if b.NodeId != "" && !alive[b.NodeId] {
				unplace(b)
				if e.info.State == pb.PlacementGroupState_CREATED {
					e.info.State = pb.PlacementGroupState_RESCHEDULING
				}
			}
		}
		// A notice given by the previous GCS still runs: released on acknowledgement or
		// at its deadline, as before the restart.
		if n := e.info.LastPreemption; n != nil && !n.Acknowledged && e.info.State == pb.PlacementGroupState_CREATED {
			e.eviction = &evictionState{notice: n, deadline: time.UnixMilli(n.DeadlineMs)}
			m.evicting[id] = e
		}
		switch e.info.State {
		case pb.PlacementGroupState_PREPARED:
			prepared = append(prepared, e)
		case pb.PlacementGroupState_PENDING, pb.PlacementGroupState_RESCHEDULING:
			m.queue.add(e)
		}
		// A group that holds bundles was admitted: it keeps its charge.
		if m.admission != nil && e.info.State != pb.PlacementGroupState_PENDING {
			if charge, err := resources.SumOf(e.request.Bundles); err == nil {
				_ = m.admission.ledger.Admit(id, e.info.Queue, charge)
			}
		}
		m.observeLocked(e.request)
	}
	return prepared, nil
}

// onNodeDead releases a dead node's bundles in the GCS view: groups that had bundles
// there reschedule just those bundles.
func (m *pgManager) onNodeDead(nodeID string) {
	m.mu.Lock()
	for _, e := range m.groups {
		m.loseBundlesLocked(e, nodeID)
	}
	m.mu.Unlock()
	m.nodesChanged()
}

// loseBundlesLocked takes a group's bundles on nodeID out of the GCS view, as the node's
// death does: a CREATED group becomes RESCHEDULING for just those bundles; a group whose
// two-phase commit runs has it fail on the node and re-queue. It returns the keys the
// node held them under.
func (m *pgManager) loseBundlesLocked(e *pgEntry, nodeID string) []*pb.BundleKey {
	var lost []*pb.BundleKey
	for _, b := range e.info.Bundles {
		if b.NodeId == nodeID {
			lost = append(lost, &pb.BundleKey{PlacementGroupId: e.id, BundleIndex: b.BundleIndex, Generation: b.Generation})
			unplace(b)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	if e.info.State != pb.PlacementGroupState_CREATED {
		// A PREPARED group's running commit fails on the node and re-queues it.
		m.logPersistError(m.persistLocked(e))
		return lost
	}
	e.info.State = pb.PlacementGroupState_RESCHEDULING
	e.info.Stats.SchedulingState = pb.SchedulingState_QUEUED
	e.retry.reset()
	m.queue.drop(e)
	m.queue.add(e)
	m.logPersistError(m.persistLocked(e))
	e.notify()
	m.log.Warn().Str("pg_id", e.id).Str("node_id", nodeID).Int("lost_bundles", len(lost)).Msg("placement group RESCHEDULING")
	return lost
}

// spotNoticeMargin is how long before a preempted node's deadline its groups' hooks
// must have acknowledged: the bundles then move with time to spare for the new node.
const spotNoticeMargin = 30 * time.Second

// evacuate moves the bundles of a node that is going away while it still runs (a spot
// interruption: an accepted PREEMPTION drain, deadline its end) as its death would, but
// before the deadline: only those bundles move, the autoscaler sees them as demand at
// once, and the raylet releases them (ending their workers: actors restart per
// max_restarts, tasks retry). A group whose owner has a preemption hook (a
// WaitPreemptionNotice poll seen within the last minute) first gets a notice (reason
// SpotInterruption) and its bundles move when the hook acknowledges or at the notice's
// deadline (its priority class's grace period, ended spotNoticeMargin before the
// node's); the others move at once. The node is draining already, so nothing new lands
// there meanwhile.
func (m *pgManager) evacuate(nodeID string, deadline time.Time) {
	m.mu.Lock()
	now := m.now()
	var lost []*pb.BundleKey
	noticed := 0
	for _, e := range m.groups {
		if !slices.ContainsFunc(e.info.Bundles, func(b *pb.Bundle) bool { return b.NodeId == nodeID }) || e.eviction != nil {
			continue // an eviction under way releases every bundle of the group
		}
		grace := m.gracePeriodLocked(e.info)
		if !deadline.IsZero() {
			grace = min(grace, deadline.Add(-spotNoticeMargin).Sub(now))
		}
		hooked := !e.lastNoticePoll.IsZero() && now.Sub(e.lastNoticePoll) <= maxNoticeWait+5*time.Second
		if e.info.State == pb.PlacementGroupState_CREATED && hooked && grace > 0 {
			m.noticeLocked(e, reasonSpotInterruption, "", grace, now)
			e.eviction.node = nodeID
			noticed++
			continue
		}
		lost = append(lost, m.loseBundlesLocked(e, nodeID)...)
	}
	m.mu.Unlock()
	m.log.Warn().Str("node_id", nodeID).Int("moved_now", len(lost)).Int("groups_noticed", noticed).Msg("node preempted: moving its bundles before its deadline")
	m.nodesChanged()
	m.cancelLost(nodeID, lost)
}

// reasonSpotInterruption is the notice's reason when a group's node is interrupted.
const reasonSpotInterruption = preemption.Reason("SpotInterruption")

// cancelLost has the node's raylet release bundles the GCS moved off it, in the
// background, sent again until confirmed or the node is gone (afterConfirmed). Nothing
// waits for them: the node is draining, so the view places nothing there meanwhile.
func (m *pgManager) cancelLost(nodeID string, keys []*pb.BundleKey) {
	if len(keys) == 0 {
		return
	}
	bundles := make([]*pb.BundleReservation, len(keys))
	for i, key := range keys {
		bundles[i] = &pb.BundleReservation{Key: key}
	}
	go func() {
		m.afterConfirmed(m.cancelAll(map[string][]*pb.BundleReservation{nodeID: bundles}), "a preempted node's bundles", func() {})
	}()
}

// onNodeConnected reconciles a raylet that registered or reconnected to this GCS: it
// releases what older GCS incarnations reserved there and this one does not know.
func (m *pgManager) onNodeConnected(node *pb.NodeInfo) {
	m.reconcileNode(node.NodeId)
}

// reconcileRefused reconciles a node whose raylet refused a reservation for want of room
// (or of free GPUs) that the GCS's view said it had: the raylet may hold bundles no group
// owns any more (an older GCS's, or an undo whose cancel was given up), and until they are
// released every attempt there is refused the same way. At most one runs per node at a time.
func (m *pgManager) reconcileRefused(nodeID string, err error) {
	if status.Code(err) != codes.FailedPrecondition {
		return
	}
	m.mu.Lock()
	if m.reconciling[nodeID] {
		m.mu.Unlock()
		return
	}
	m.reconciling[nodeID] = true
	m.mu.Unlock()
	go func() {
		m.reconcileNode(nodeID)
		m.mu.Lock()
		delete(m.reconciling, nodeID)
		m.mu.Unlock()
	}()
}

// reconcileNode has the node's raylet release every bundle that no group of this GCS
// holds or is placing there.
func (m *pgManager) reconcileNode(nodeID string) {
	m.mu.Lock()
	var inUse []*pb.BundleKey
	for id, e := range m.groups {
		for _, b := range e.info.Bundles {
			if b.NodeId == nodeID {
				inUse = append(inUse, &pb.BundleKey{PlacementGroupId: id, BundleIndex: b.BundleIndex, Generation: b.Generation})
			}
		}
		for index, p := range e.inFlight {
			if string(p.NodeID) == nodeID {
				b := e.info.Bundles[index]
				inUse = append(inUse, &pb.BundleKey{PlacementGroupId: id, BundleIndex: b.BundleIndex, Generation: b.Generation + 1})
			}
		}
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), rayletCallTimeout)
	defer cancel()
	reply, err := m.reserver.ReleaseUnused(ctx, nodeID, inUse)
	if err != nil {
		m.log.Warn().Err(err).Str("node_id", nodeID).Msg("could not reconcile the raylet's bundles")
		return
	}
	m.nodes.applyResourceReport(nodeID, reply.Resources)
	if len(reply.Released) > 0 {
		// Orphans hold nothing in this GCS's view (never there, or given back by the undo
		// whose cancel was lost): nothing to give back there.
		m.log.Info().Str("node_id", nodeID).Int("released", len(reply.Released)).Int("held", len(reply.Held)).Msg("released orphaned bundles")
	}
}

// onNodeRegistered implements nodeListener: a new or changed node may hold waiting groups.
func (m *pgManager) onNodeRegistered(*pb.NodeInfo) { m.nodesChanged() }

// onResourcesReported implements nodeListener. The scheduler's view of a node is its
// total less the bundles this GCS placed, not what the raylet reports; only MIG slot
// maps come from the reports.
func (m *pgManager) onResourcesReported(hasMIG bool) {
	if hasMIG {
		m.nodesChanged()
	}
}

var (
	_ nodeListener   = (*pgManager)(nil)
	_ jobListener    = (*pgManager)(nil)
	_ groupDirectory = (*pgManager)(nil)
	_ leaseAdmitter  = (*pgManager)(nil)
)

// onJobDead removes the non-detached groups the job created and returns the charges of
// its task leases.
func (m *pgManager) onJobDead(job *pb.JobInfo) {
	m.order.forget(job.JobId)
	m.mu.Lock()
	m.returnJobLeasesLocked(job.JobId)
	var ids []string
	for id, e := range m.groups {
		if !e.info.IsDetached && e.info.CreatorJobId == job.JobId {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.log.Info().Str("pg_id", id).Str("job_id", job.JobId).Msg("removing the group of a finished job")
		if err := m.remove(id, removedJobDone); err != nil {
			m.log.Error().Err(err).Str("pg_id", id).Str("job_id", job.JobId).Msg("could not remove the group of a finished job")
		}
	}
}

// pruneRemoved forgets REMOVED groups beyond the retention count or age, at most once a
// second; never one whose bundles are still being cancelled or placed (the view counts
// them held until then, and a view rebuilt without the row would give them out).
func (m *pgManager) pruneRemoved() {
	now := m.now()
	if now.Sub(m.lastPrune) < time.Second {
		return
	}
	m.lastPrune = now
	m.mu.Lock()
	removed := make([]deadRow, 0, len(m.removed))
	for id, e := range m.removed {
		if e.cancelling || e.inFlight != nil {
			continue // its bundles still count as held until the raylets confirm
		}
		removed = append(removed, deadRow{ID: id, EndTimeMs: e.info.RemovedTimeMs})
	}
	drop := deadRowsToPrune(removed, now.UnixMilli(), removedGroupRetention, maxRemovedGroupsKept)
	for _, id := range drop {
		delete(m.removed, id)
	}
	m.mu.Unlock()
	if len(drop) > 0 {
		if _, err := m.store.Delete(context.Background(), store.TablePlacementGroups, drop...); err != nil {
			m.log.Error().Err(err).Msg("could not delete removed placement groups")
		}
	}
}
