package raylet

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
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
	resources  resources.Set
	committed  bool
	gcsEpoch   int64
	// gpuIDs are the NVML indices of the bundle's GPUs: one per whole GPU, plus one
	// shared GPU for a fractional remainder; for a MIG bundle, the GPU of its instance.
	gpuIDs []int32
	// mig is the MIG instance a MIG bundle holds; nil for other bundles.
	mig *migHold
	// leases are the worker leases taken from this bundle, by lease id: they share the
	// bundle's resources, not the node's, and go with the bundle when it is released.
	leases map[string]*workerLease
}

// bundleTable is the raylet's accounting of placement-group bundles: prepared and
// committed reservations both reduce what is available. It is not safe for concurrent
// use; the raylet guards it with its mutex.
type bundleTable struct {
	total    resources.Set
	gpus     []*pb.GPUInfo
	reserved map[bundleID]*reservation
	// newestGeneration remembers, per bundle, the newest generation any request named,
	// even after a cancel, so a delayed request for an older generation is refused.
	newestGeneration map[bundleID]int64
	// mig accounts for the GPUs in MIG mode; nil when the node has none. MIG resources
	// ("nvidia.com/mig-…") are accounted there by slot, not in total.
	mig *migTable
	// nodeLeases are the worker leases taken from the node rather than from a bundle, by
	// lease id. They reduce what is available exactly as a bundle does, so heartbeats and
	// prepares see them, but they are no bundles: the GCS never lists or releases them.
	nodeLeases map[string]*workerLease
}

func newBundleTable(total resources.Set, gpus []*pb.GPUInfo) *bundleTable {
	return &bundleTable{
		total: total, gpus: gpus, reserved: map[bundleID]*reservation{}, newestGeneration: map[bundleID]int64{},
		nodeLeases: map[string]*workerLease{},
	}
}

// gpuFree is the free share of each whole GPU (resources.AmountScale = a whole GPU), by
// position in t.gpus, leaving out the reservations in skip.
func (t *bundleTable) gpuFree(skip map[bundleID]bool) []resources.Amount {
	free := make([]resources.Amount, len(t.gpus))
	for i := range free {
		free[i] = resources.AmountScale
	}
	for id, r := range t.reserved {
		if skip[id] || r.mig != nil {
			continue
		}
		share := gpuShares(r.resources[resources.GPU])
		for i, gpu := range r.gpuIDs {
			if position := t.gpuPosition(gpu); position >= 0 {
				free[position] -= share[i]
			}
		}
	}
	for _, l := range t.nodeLeases {
		for i, share := range l.gpuShares {
			if position := t.gpuPosition(l.gpuIDs[i]); position >= 0 {
				free[position] -= share
			}
		}
	}
	return free
}

// gpuPosition is the position in t.gpus of the whole GPU with that NVML index, -1 when
// the node offers no such whole GPU (GPUs in MIG mode are not whole GPUs).
func (t *bundleTable) gpuPosition(index int32) int {
	for position, g := range t.gpus {
		if g.GetIndex() == index {
			return position
		}
	}
	return -1
}

// gpuShares splits a GPU amount into per-GPU shares: whole GPUs, then the remainder.
func gpuShares(amount resources.Amount) []resources.Amount {
	var shares []resources.Amount
	for ; amount >= resources.AmountScale; amount -= resources.AmountScale {
		shares = append(shares, resources.AmountScale)
	}
	if amount > 0 {
		shares = append(shares, amount)
	}
	return shares
}

// assignGPUs reserves GPUs for a bundle in free: the requested indices if the scheduler
// chose them (checked), else the lowest free whole GPUs and, for a remainder, the
// fullest GPU that still has room (best fit keeps whole GPUs free).
func (t *bundleTable) assignGPUs(id bundleID, amount resources.Amount, requested []int32, free []resources.Amount) ([]int32, error) {
	shares := gpuShares(amount)
	if len(shares) == 0 {
		if len(requested) > 0 {
			return nil, refusef(ErrInvalidBundle, "bundle %s: gpu_ids %v given for a bundle without GPUs", id, requested)
		}
		return nil, nil
	}
	if len(requested) > 0 {
		if len(requested) != len(shares) {
			return nil, refusef(ErrInvalidBundle, "bundle %s: %d gpu_ids for a GPU amount of %s", id, len(requested), amount)
		}
		for i, gpu := range requested {
			position := t.gpuPosition(gpu)
			if position < 0 {
				return nil, refusef(ErrInvalidBundle, "bundle %s: gpu_ids[%d] = %d: not a whole GPU of this node (it has %s)", id, i, gpu, t.wholeGPUIndices())
			}
			if free[position] < shares[i] {
				return nil, refusef(ErrGPUNotFree, "bundle %s: GPU %d is not free (%s of it left)", id, gpu, free[position])
			}
			free[position] -= shares[i]
		}
		return requested, nil
	}
	chosen, _, err := pickGPUs(amount, t.wholeGPUIDs(), free)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", id, err)
	}
	return chosen, nil
}

// pickGPUs takes amount of GPU from free, where free[i] is what is left of GPU ids[i]:
// the lowest free whole GPUs and, for a remainder, the fullest GPU that still has room
// (best fit keeps whole GPUs free). It returns the GPUs and the share taken of each.
func pickGPUs(amount resources.Amount, ids []int32, free []resources.Amount) ([]int32, []resources.Amount, error) {
	shares := gpuShares(amount)
	var chosen []int32
	for _, share := range shares {
		best := -1
		for i, left := range free {
			if left < share {
				continue
			}
			if share == resources.AmountScale {
				best = i
				break
			}
			if best < 0 || left < free[best] {
				best = i
			}
		}
		if best < 0 {
			return nil, nil, refusef(ErrGPUNotFree, "no GPU has %s free", share)
		}
		free[best] -= share
		chosen = append(chosen, ids[best])
	}
	return chosen, shares, nil
}

// wholeGPUIDs are the NVML indices of the whole GPUs, by position in t.gpus.
func (t *bundleTable) wholeGPUIDs() []int32 {
	ids := make([]int32, len(t.gpus))
	for i, g := range t.gpus {
		ids[i] = g.GetIndex()
	}
	return ids
}

// wholeGPUIndices lists the NVML indices of the whole GPUs, for messages.
func (t *bundleTable) wholeGPUIndices() string {
	if len(t.gpus) == 0 {
		return "none"
	}
	indices := make([]string, len(t.gpus))
	for i, g := range t.gpus {
		indices[i] = fmt.Sprint(g.GetIndex())
	}
	return "GPUs " + strings.Join(indices, ", ")
}

// available is total minus every reservation and every worker lease taken from the
// node. MIG resources are left out: resources_total lists them for information, and the
// MIG slot maps account for them.
func (t *bundleTable) available() resources.Set {
	avail := withoutMIG(t.total)
	for _, r := range t.reserved {
		for name, amount := range withoutMIG(r.resources) {
			avail[name] -= amount
		}
	}
	for _, l := range t.nodeLeases {
		for name, amount := range withoutMIG(l.held()) {
			avail[name] -= amount
		}
	}
	for name, amount := range avail {
		if amount < 0 { // a worker unblocked while its CPU was lent out: nothing is free
			avail[name] = 0
		}
	}
	return avail
}

// withoutMIG is a resource set without its MIG resources, which the MIG table accounts
// for by slot.
func withoutMIG(set resources.Set) resources.Set {
	out := resources.Set{}
	for name, amount := range set {
		if !mig.IsResource(name) {
			out[name] = amount
		}
	}
	return out
}

func staleGeneration(id bundleID, got, newest int64) error {
	return refusef(ErrStaleGeneration, "bundle %s: stale generation %d: this raylet has seen generation %d", id, got, newest)
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
// kept as it is (a retried prepare); one held at an older generation is replaced. A
// bundle with a MIG step gets its instance last, after every cheaper check passed: see
// migTable.prepare.
func (t *bundleTable) prepare(nodeID string, bundles []*pb.BundleReservation, gcsEpoch int64, draining bool) error {
	type pending struct {
		id  bundleID
		res *reservation
	}
	var fresh []pending
	var requestedGPUs [][]int32
	var migSteps []*pb.MIGStep
	var replaced []bundleID
	need := resources.Set{}
	freed := resources.Set{}
	for i, b := range bundles {
		key := b.GetKey()
		if key.GetPlacementGroupId() == "" {
			return fielderr.New(ErrRequired, fmt.Sprintf("bundles[%d].key.placement_group_id", i), "required")
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
			freed = freed.Add(withoutMIG(held.resources))
		}
		resources, err := resources.SetFromFloat(b.Resources)
		if err != nil {
			return fmt.Errorf("bundles[%d].resources%w", i, err)
		}
		if err := t.checkMIG(id, b, resources); err != nil {
			return err
		}
		need = need.Add(withoutMIG(resources))
		fresh = append(fresh, pending{id, &reservation{generation: key.Generation, resources: resources, gcsEpoch: gcsEpoch}})
		requestedGPUs = append(requestedGPUs, b.GpuIds)
		migSteps = append(migSteps, b.Mig)
	}
	if len(fresh) == 0 {
		return nil
	}
	if draining {
		return refusef(ErrDraining, "node %s is draining and takes no new bundles", nodeID)
	}
	if avail := t.available().Add(freed); !need.IsSubsetOf(avail) {
		return refusef(ErrInsufficientResources, "node %s: insufficient resources: bundles need %s, available %s", nodeID, need, shortfall(need, avail))
	}
	skip := map[bundleID]bool{}
	for _, id := range replaced {
		skip[id] = true
	}
	free := t.gpuFree(skip)
	var migRequests []migRequest
	for i, p := range fresh {
		if migSteps[i] != nil {
			migRequests = append(migRequests, migRequest{p.id, migSteps[i]})
			continue
		}
		gpus, err := t.assignGPUs(p.id, p.res.resources[resources.GPU], requestedGPUs[i], free)
		if err != nil {
			return err
		}
		p.res.gpuIDs = gpus
	}
	replacedHolds := map[bundleID]*migHold{}
	for _, id := range replaced {
		if hold := t.reserved[id].mig; hold != nil {
			replacedHolds[id] = hold
		}
	}
	if len(migRequests) > 0 || len(replacedHolds) > 0 {
		holds, err := t.mig.prepare(migRequests, replacedHolds)
		if err != nil {
			return err
		}
		k := 0
		for i, p := range fresh {
			if migSteps[i] != nil {
				p.res.mig = &holds[k]
				p.res.gpuIDs = []int32{int32(holds[k].gpu)}
				k++
			}
		}
	}
	for _, id := range replaced {
		t.remove(id, false)
	}
	for _, p := range fresh {
		t.reserved[p.id] = p.res
		t.observe(p.id, p.res.generation)
	}
	return nil
}

// checkMIG validates a bundle's MIG step, and refuses MIG resources without one.
func (t *bundleTable) checkMIG(id bundleID, b *pb.BundleReservation, resources resources.Set) error {
	if b.Mig == nil {
		for _, name := range resources.Names() {
			if mig.IsResource(name) && resources[name] > 0 {
				return refusef(ErrInvalidBundle, "bundle %s: asks for %s without a mig step", id, name)
			}
		}
		return nil
	}
	if len(b.GpuIds) > 0 && !slices.Equal(b.GpuIds, []int32{b.Mig.Gpu}) {
		return refusef(ErrInvalidBundle, "bundle %s: gpu_ids %v given with a mig step on GPU %d", id, b.GpuIds, b.Mig.Gpu)
	}
	return t.mig.checkStep(id, b.Mig, resources)
}

// remove drops a reservation; with release its MIG instance goes idle (a replaced
// reservation's was released by migTable.prepare, and may be held again already).
func (t *bundleTable) remove(id bundleID, release bool) {
	if r := t.reserved[id]; r != nil && r.mig != nil && release {
		t.mig.release(id, r.mig)
	}
	delete(t.reserved, id)
}

// shortfall prints the available amounts of the resources that fall short.
func shortfall(need, avail resources.Set) string {
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
			return refusef(ErrNotPrepared, "bundle %s generation %d: not prepared on this node", id, key.Generation)
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
			t.remove(id, true)
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
		row := t.describe(id, r)
		if r.gcsEpoch < currentEpoch && (!used || generation != r.generation) {
			t.remove(id, true)
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

// describe reports a reservation: its GPUs' UUIDs, or for a MIG bundle its MIG device
// UUID and step.
func (t *bundleTable) describe(id bundleID, r *reservation) *pb.BundleReservation {
	state := pb.BundleReservationState_BUNDLE_PREPARED
	if r.committed {
		state = pb.BundleReservationState_BUNDLE_COMMITTED
	}
	row := &pb.BundleReservation{
		Key:       &pb.BundleKey{PlacementGroupId: id.placementGroupID, BundleIndex: id.index, Generation: r.generation},
		Resources: r.resources.ToFloat(), State: state, GcsEpoch: r.gcsEpoch, GpuIds: r.gpuIDs,
	}
	if r.mig != nil {
		row.DeviceUuids = []string{r.mig.deviceUUID}
		row.Mig = &pb.MIGStep{Gpu: int32(r.mig.gpu), ProfileId: int32(r.mig.profileID), Start: int32(r.mig.start)}
		return row
	}
	for _, gpu := range r.gpuIDs {
		if position := t.gpuPosition(gpu); position >= 0 && t.gpus[position].GetUuid() != "" {
			row.DeviceUuids = append(row.DeviceUuids, t.gpus[position].GetUuid())
		}
	}
	return row
}

// describeBundle reports the reservation of a bundle key (nil when not held).
func (t *bundleTable) describeBundle(key *pb.BundleKey) *pb.BundleReservation {
	id := bundleID{key.PlacementGroupId, key.BundleIndex}
	if r := t.reserved[id]; r != nil && r.generation == key.Generation {
		return t.describe(id, r)
	}
	return nil
}
