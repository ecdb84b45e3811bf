package gcs

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// What the placement-group and actor managers tell the autoscaler state
// (autoscaler_state.go): their pending work, and the work they hold on each node.

// pendingGangs returns the groups waiting for bundles (PENDING, or RESCHEDULING lost
// ones), in arrival order, each with its full request and pending reason. Groups whose
// two-phase commit runs are being placed, not waiting, and are left out.
func (m *pgManager) pendingGangs() []*pb.GangResourceRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := m.sortedLocked(func(e *pgEntry) bool {
		state := e.info.State
		return (state == pb.PlacementGroupState_PENDING || state == pb.PlacementGroupState_RESCHEDULING) && e.inFlight == nil
	})
	out := make([]*pb.GangResourceRequest, 0, len(entries))
	for _, e := range entries {
		info := e.info
		gang := &pb.GangResourceRequest{
			Details:          fmt.Sprintf("%s:%s|%s", info.PlacementGroupId, info.Strategy, info.State),
			PlacementGroupId: info.PlacementGroupId, Strategy: info.Strategy, Topology: info.Topology, State: info.State,
			PendingReason: info.PendingReasonCode, PendingReasonMessage: info.PendingReason, Name: info.Name, Namespace: info.Namespace,
		}
		for _, b := range info.Bundles {
			gang.Bundles = append(gang.Bundles, proto.Clone(b).(*pb.Bundle))
			if b.NodeId == "" {
				gang.Requests = append(gang.Requests, &pb.ResourceRequest{ResourcesBundle: maps.Clone(b.UnitResources), LabelSelector: maps.Clone(b.LabelSelector)})
			}
		}
		out = append(out, gang)
	}
	return out
}

// heldOnNodes sums, per node, the bundles the GCS placed or is placing there (those of
// removed groups whose cancel is not confirmed included).
func (m *pgManager) heldOnNodes() map[string]*nodeHeld {
	m.mu.Lock()
	held := m.heldBundlesLocked()
	m.mu.Unlock()
	return heldByNode(held)
}

// pendingActorShapes counts the actors waiting for a node, by resource shape and label
// selector, in order of their first actor. Actors placed into a placement group wait
// for their group's bundle (the group is the demand) and are left out, as are actors
// being placed now. A hard node affinity is the selector on the node's id label.
func (m *actorManager) pendingActorShapes() []*pb.ResourceRequestByCount {
	m.mu.Lock()
	entries := make([]*actorEntry, 0)
	for _, e := range m.actors {
		if e.pending() && !e.placing && e.info.SchedulingStrategy.GetPlacementGroupId() == "" {
			entries = append(entries, e)
		}
	}
	sortActors(entries)
	var out []*pb.ResourceRequestByCount
	byKey := map[string]*pb.ResourceRequestByCount{}
	for _, e := range entries {
		selector := leaseSelector(e.info.SchedulingStrategy)
		key := e.request.String() + "|" + selectorKey(selector)
		if shape := byKey[key]; shape != nil {
			shape.Count++
			continue
		}
		shape := &pb.ResourceRequestByCount{Request: &pb.ResourceRequest{ResourcesBundle: e.request.ToFloat(), LabelSelector: selector}, Count: 1}
		byKey[key] = shape
		out = append(out, shape)
	}
	m.mu.Unlock()
	return out
}

// leaseSelector is the label selector a strategy holds work to, for the autoscaler: a
// hard node affinity is the selector on the node's id label, a hard label selector
// itself; nil otherwise.
func leaseSelector(s *pb.SchedulingStrategy) map[string]string {
	if s.GetKind() == pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_NODE_AFFINITY && !s.GetSoft() {
		return map[string]string{nodelabel.NodeID: s.GetNodeId()}
	}
	if len(s.GetLabelSelector()) > 0 {
		return maps.Clone(s.GetLabelSelector()) // a hard label selector: nodes with those labels
	}
	return nil
}

// taskBacklogTTL is how long a scheduling key's backlog counts as demand after the
// key last asked ChooseLeaseTargets: longer than a lease request may wait at a raylet
// for room (the SDK's 2 min), so tasks queued there stay demand, and short enough that
// the backlog of a driver that finished or died stops counting soon after.
const taskBacklogTTL = 150 * time.Second

// taskBacklogs is the SDK's tasks that wait for a worker, by scheduling key, as their
// submitter last reported them (ChooseLeaseTargetsRequest.backlog). It is safe for
// concurrent use.
type taskBacklogs struct {
	mu   sync.Mutex
	keys map[string]*taskBacklog
}

type taskBacklog struct {
	request  resources.Set
	selector map[string]string
	// count tasks wait; seen is when the key last asked.
	count int
	seen  time.Time
}

// note records what a ChooseLeaseTargets call says of its key: backlog tasks wait, one
// fewer when a node has room now (that one is about to run); none left forgets the key.
func (b *taskBacklogs) note(key string, request resources.Set, selector map[string]string, backlog int, outcome placement.WorkOutcome, availableNow bool, now time.Time) {
	waiting := backlog
	if outcome == placement.WorkPlaced && availableNow {
		waiting--
	}
	if outcome == placement.WorkUnschedulable {
		waiting = 0 // it fails: nothing will run it
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if waiting <= 0 {
		delete(b.keys, key)
		return
	}
	if b.keys == nil {
		b.keys = map[string]*taskBacklog{}
	}
	b.keys[key] = &taskBacklog{request: request, selector: selector, count: waiting, seen: now}
}

// shapes counts the waiting tasks by shape and selector, dropping keys that have not
// asked within taskBacklogTTL.
func (b *taskBacklogs) shapes(now time.Time) []*pb.ResourceRequestByCount {
	b.mu.Lock()
	defer b.mu.Unlock()
	keys := make([]string, 0, len(b.keys))
	for key, t := range b.keys {
		if now.Sub(t.seen) > taskBacklogTTL {
			delete(b.keys, key)
			continue
		}
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var out []*pb.ResourceRequestByCount
	byShape := map[string]*pb.ResourceRequestByCount{}
	for _, key := range keys {
		t := b.keys[key]
		shapeKey := t.request.String() + "|" + selectorKey(t.selector)
		if shape := byShape[shapeKey]; shape != nil {
			shape.Count += int64(t.count)
			continue
		}
		shape := &pb.ResourceRequestByCount{Request: &pb.ResourceRequest{ResourcesBundle: t.request.ToFloat(), LabelSelector: maps.Clone(t.selector)}, Count: int64(t.count)}
		byShape[shapeKey] = shape
		out = append(out, shape)
	}
	return out
}

// pendingTaskShapes is the SDK's waiting tasks by shape (taskBacklogs).
func (m *actorManager) pendingTaskShapes() []*pb.ResourceRequestByCount {
	return m.tasks.shapes(m.now())
}

// selectorKey is a selector in one canonical string.
func selectorKey(selector map[string]string) string {
	keys := make([]string, 0, len(selector))
	for k := range selector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q,", k, selector[k])
	}
	return b.String()
}

// actorsOnNodes counts, per node, the actors that are not DEAD and have a worker there.
func (m *actorManager) actorsOnNodes() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, e := range m.actors {
		if !e.dead() && e.info.NodeId != "" {
			out[e.info.NodeId]++
		}
	}
	return out
}
