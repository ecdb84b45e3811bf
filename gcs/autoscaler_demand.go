package gcs

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/internal/nodelabel"
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
		var selector map[string]string
		if s := e.info.SchedulingStrategy; s.GetKind() == pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_NODE_AFFINITY && !s.GetSoft() {
			selector = map[string]string{nodelabel.NodeID: s.GetNodeId()}
		}
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
