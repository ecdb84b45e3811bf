package raylet

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// bundleID names a bundle across generations.
type bundleID struct {
	placementGroupID string
	index            int32
}

func (b bundleID) String() string { return fmt.Sprintf("%s[%d]", b.placementGroupID, b.index) }

// reservation is one prepared or committed bundle.
type reservation struct {
	generation int64
	resources  placement.ResourceSet
	committed  bool
	gcsEpoch   int64
}

// bundleTable is the raylet's accounting of placement-group bundles: prepared and
// committed reservations both reduce what is available. It is not safe for concurrent
// use; the raylet guards it with its mutex.
type bundleTable struct {
	total    placement.ResourceSet
	reserved map[bundleID]*reservation
	// newestGeneration remembers, per bundle, the newest generation any request named,
	// even after a cancel, so a delayed request for an older generation is refused.
	newestGeneration map[bundleID]int64
}

func newBundleTable(total placement.ResourceSet) *bundleTable {
	return &bundleTable{total: total, reserved: map[bundleID]*reservation{}, newestGeneration: map[bundleID]int64{}}
}

// available is total minus every reservation.
func (t *bundleTable) available() placement.ResourceSet {
	avail := t.total.Clone()
	for _, r := range t.reserved {
		for name, amount := range r.resources {
			avail[name] -= amount
		}
	}
	return avail
}

func staleGeneration(id bundleID, got, newest int64) error {
	return status.Errorf(codes.FailedPrecondition, "bundle %s: stale generation %d: this raylet has seen generation %d", id, got, newest)
}

// checkGeneration refuses a request older than the newest generation seen for the bundle.
func (t *bundleTable) checkGeneration(id bundleID, generation int64) error {
	if newest := t.newestGeneration[id]; generation < newest {
		return staleGeneration(id, generation, newest)
	}
	return nil
}

func (t *bundleTable) observe(id bundleID, generation int64) {
	if generation > t.newestGeneration[id] {
		t.newestGeneration[id] = generation
	}
}

// prepare reserves every bundle or none. A bundle already held at the same generation is
// kept as it is (a retried prepare); one held at an older generation is replaced.
func (t *bundleTable) prepare(nodeID string, bundles []*pb.BundleReservation, gcsEpoch int64, draining bool) error {
	type pending struct {
		id  bundleID
		res *reservation
	}
	var fresh []pending
	var replaced []bundleID
	need := placement.ResourceSet{}
	freed := placement.ResourceSet{}
	for i, b := range bundles {
		key := b.GetKey()
		if key.GetPlacementGroupId() == "" {
			return status.Errorf(codes.InvalidArgument, "bundles[%d].key.placement_group_id: required", i)
		}
		id := bundleID{key.PlacementGroupId, key.BundleIndex}
		if err := t.checkGeneration(id, key.Generation); err != nil {
			return err
		}
		if held := t.reserved[id]; held != nil {
			if held.generation == key.Generation {
				continue
			}
			replaced = append(replaced, id)
			freed = freed.Add(held.resources)
		}
		resources, err := placement.ResourceSetFromFloat(b.Resources)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "bundles[%d].resources%v", i, err)
		}
		need = need.Add(resources)
		fresh = append(fresh, pending{id, &reservation{generation: key.Generation, resources: resources, gcsEpoch: gcsEpoch}})
	}
	if len(fresh) == 0 {
		return nil
	}
	if draining {
		return status.Errorf(codes.FailedPrecondition, "node %s is draining and takes no new bundles", nodeID)
	}
	if avail := t.available().Add(freed); !need.IsSubsetOf(avail) {
		return status.Errorf(codes.FailedPrecondition, "node %s: insufficient resources: bundles need %s, available %s", nodeID, need, shortfall(need, avail))
	}
	for _, id := range replaced {
		delete(t.reserved, id)
	}
	for _, p := range fresh {
		t.reserved[p.id] = p.res
		t.observe(p.id, p.res.generation)
	}
	return nil
}

// shortfall prints the available amounts of the resources that fall short.
func shortfall(need, avail placement.ResourceSet) string {
	var parts []string
	for _, name := range need.Names() {
		if need[name] > avail[name] {
			parts = append(parts, fmt.Sprintf("%s %s", name, avail[name]))
		}
	}
	return strings.Join(parts, ", ")
}

// commit marks prepared bundles committed; a bundle already committed is fine.
func (t *bundleTable) commit(keys []*pb.BundleKey) error {
	for _, key := range keys {
		id := bundleID{key.PlacementGroupId, key.BundleIndex}
		if err := t.checkGeneration(id, key.Generation); err != nil {
			return err
		}
		held := t.reserved[id]
		if held == nil || held.generation != key.Generation {
			return status.Errorf(codes.NotFound, "bundle %s generation %d: not prepared on this node", id, key.Generation)
		}
	}
	for _, key := range keys {
		t.reserved[bundleID{key.PlacementGroupId, key.BundleIndex}].committed = true
	}
	return nil
}

// cancel releases bundles at or below the named generation; it never releases a newer one.
func (t *bundleTable) cancel(keys []*pb.BundleKey) {
	for _, key := range keys {
		id := bundleID{key.PlacementGroupId, key.BundleIndex}
		if held := t.reserved[id]; held != nil && held.generation <= key.Generation {
			delete(t.reserved, id)
		}
		t.observe(id, key.Generation)
	}
}

// releaseUnused releases every bundle reserved by a GCS older than currentEpoch that is
// not in inUse, and returns what it released and what it still holds.
func (t *bundleTable) releaseUnused(inUse []*pb.BundleKey, currentEpoch int64) (released, held []*pb.BundleReservation) {
	keep := map[bundleID]int64{}
	for _, key := range inUse {
		keep[bundleID{key.PlacementGroupId, key.BundleIndex}] = key.Generation
	}
	for _, id := range t.sortedIDs() {
		r := t.reserved[id]
		generation, used := keep[id]
		row := r.describe(id)
		if r.gcsEpoch < currentEpoch && (!used || generation != r.generation) {
			delete(t.reserved, id)
			released = append(released, row)
			continue
		}
		held = append(held, row)
	}
	return released, held
}

func (t *bundleTable) sortedIDs() []bundleID {
	ids := make([]bundleID, 0, len(t.reserved))
	for id := range t.reserved {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].placementGroupID != ids[j].placementGroupID {
			return ids[i].placementGroupID < ids[j].placementGroupID
		}
		return ids[i].index < ids[j].index
	})
	return ids
}

func (r *reservation) describe(id bundleID) *pb.BundleReservation {
	state := pb.BundleReservationState_BUNDLE_PREPARED
	if r.committed {
		state = pb.BundleReservationState_BUNDLE_COMMITTED
	}
	return &pb.BundleReservation{
		Key:       &pb.BundleKey{PlacementGroupId: id.placementGroupID, BundleIndex: id.index, Generation: r.generation},
		Resources: r.resources.ToFloat(), State: state, GcsEpoch: r.gcsEpoch,
	}
}
