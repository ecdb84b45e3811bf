package raylet

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
)

// workerLease is what one leased worker takes: resources from the node, or from a
// committed bundle held here. Like the bundle table, it is guarded by the raylet's mutex.
type workerLease struct {
	id string
	// lessee is the SHA-256 of the tenant token the lease was taken with ("" for the
	// cluster token's or the GCS's): its worker takes that token too.
	lessee string
	// lesseeToken is the tenant's token itself, when the tenant leased the worker (the
	// GCS's lease for a tenant's actor has only its hash): its worker's token. In memory
	// only, never logged.
	lesseeToken string
	resources   resources.Set
	// holder is the bundle reservation the lease takes from, bundle its name; holder is
	// nil for a lease taken from the node.
	holder *reservation
	bundle bundleID
	// gpuIDs are the NVML indices of the GPUs the lease uses; gpuShares[i] is how much of
	// gpuIDs[i] it takes. A MIG lease names its slice's parent GPU and takes no share:
	// the slice is the bundle's alone.
	gpuIDs    []int32
	gpuShares []resources.Amount
	// cudaVisibleDevices is the worker's CUDA_VISIBLE_DEVICES: the GPU indices, or the
	// MIG device UUID of the bundle's slice; empty without GPUs.
	cudaVisibleDevices string
	// blocked is set while the worker waits for tasks it submitted (NotifyWorkerBlocked):
	// its CPU is lent to other leases meanwhile.
	blocked bool
}

// held is what the lease takes now: its resources, but for its CPU while it is blocked
// (Ray's raylet releases a blocked worker's CPU only; GPUs and the rest stay held).
func (l *workerLease) held() resources.Set {
	if !l.blocked || l.resources[resources.CPU] == 0 {
		return l.resources
	}
	held := l.resources.Clone()
	delete(held, resources.CPU)
	return held
}

// bundleIndex is the bundle the lease takes from, -1 for the node.
func (l *workerLease) bundleIndex() int32 {
	if l.holder == nil {
		return -1
	}
	return l.bundle.index
}

// leaseFromNode takes a lease's resources from the node, GPUs as a bundle gets them.
// Errors: ErrInvalidLease when the node's totals can never hold the request, ErrNoRoom
// when it does not fit now.
func (t *bundleTable) leaseFromNode(nodeID, leaseID string, request resources.Set) (*workerLease, error) {
	for _, name := range request.Names() {
		if mig.IsResource(name) && request[name] > 0 {
			return nil, fielderr.New(ErrInvalidLease, fmt.Sprintf("resources[%q]", name),
				"a MIG slice is leased from a placement-group bundle that holds one (set placement_group_id)")
		}
	}
	if !request.IsSubsetOf(t.total) {
		return nil, fielderr.New(ErrInvalidLease, "resources", "the request asks %s; node %s has only %s in total",
			request, nodeID, shortfall(request, t.total))
	}
	if avail := t.available(); !request.IsSubsetOf(avail) {
		return nil, refusef(ErrNoRoom, "node %s: the request asks %s; available now %s",
			nodeID, request, shortfall(request, avail))
	}
	gpus, shares, err := pickGPUs(request[resources.GPU], t.wholeGPUIDs(), t.gpuFree(nil))
	if err != nil {
		// Enough GPU in sum, but spread as fractions over several GPUs.
		return nil, refusef(ErrNoRoom, "node %s: the request asks %s GPU: %w", nodeID, request[resources.GPU], err)
	}
	lease := &workerLease{id: leaseID, resources: request, gpuIDs: gpus, gpuShares: shares, cudaVisibleDevices: joinGPUIDs(gpus)}
	t.nodeLeases[leaseID] = lease
	return lease, nil
}

// leaseFromBundle takes a lease's resources from a committed bundle of the group held
// here: bundle index, or with resources.AnyBundle the first one (by index) with room now.
// Errors: ErrBundleNotHeld when no such committed bundle is held here (the cheapest
// check, and the one a caller acts on first), a *fielderr.Error on bundle_index when the
// held bundles can never hold the request, ErrNoRoom when the bundle's other leases
// leave no room now.
func (t *bundleTable) leaseFromBundle(nodeID, leaseID, placementGroupID string, index int32, request resources.Set) (*workerLease, error) {
	candidates, err := t.committedBundles(nodeID, placementGroupID, index)
	if err != nil {
		return nil, err
	}
	if err := t.checkFitsHeldBundles(placementGroupID, index, request); err != nil {
		return nil, err
	}
	for _, id := range candidates {
		if lease := t.takeFromBundle(id, t.reserved[id], leaseID, request); lease != nil {
			return lease, nil
		}
	}
	if index == resources.AnyBundle {
		return nil, refusef(ErrNoRoom, "placement group %s: no bundle on node %s has room now for %s", placementGroupID, nodeID, request)
	}
	return nil, refusef(ErrNoRoom, "placement group %s bundle %d: its other leases leave no room now for %s", placementGroupID, index, request)
}

// committedBundles lists the bundles a lease may take from, or says why there are none.
func (t *bundleTable) committedBundles(nodeID, placementGroupID string, index int32) ([]bundleID, error) {
	if index != resources.AnyBundle {
		id := bundleID{placementGroupID, index}
		held := t.reserved[id]
		if held == nil {
			return nil, refusef(ErrBundleNotHeld, "placement group %s bundle %d is not held on node %s", placementGroupID, index, nodeID)
		}
		if !held.committed {
			return nil, refusef(ErrBundleNotHeld, "placement group %s bundle %d is prepared but not committed on node %s", placementGroupID, index, nodeID)
		}
		return []bundleID{id}, nil
	}
	var ids []bundleID
	for _, id := range t.sortedIDs() {
		if id.placementGroupID == placementGroupID && t.reserved[id].committed {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, refusef(ErrBundleNotHeld, "placement group %s has no committed bundle on node %s", placementGroupID, nodeID)
	}
	return ids, nil
}

// checkFitsHeldBundles refuses a request that the group's committed bundles held here can
// never hold. Bundles held elsewhere count as empty: this raylet cannot lease from them.
func (t *bundleTable) checkFitsHeldBundles(placementGroupID string, index int32, request resources.Set) error {
	var held []resources.Set
	for id, r := range t.reserved {
		if id.placementGroupID != placementGroupID || !r.committed || id.index < 0 {
			continue
		}
		for int(id.index) >= len(held) {
			held = append(held, resources.Set{})
		}
		held[id.index] = r.resources
	}
	err := resources.CheckFitsBundle(placementGroupID, held, int(index), request)
	var fieldErr *fielderr.Error
	if errors.As(err, &fieldErr) {
		fieldErr.Field = "bundle_index" // the name of the field in RequestWorkerLeaseRequest
	}
	return err
}

// takeFromBundle leases request from what the bundle's other leases leave, or returns nil.
func (t *bundleTable) takeFromBundle(id bundleID, r *reservation, leaseID string, request resources.Set) *workerLease {
	used := resources.Set{}
	gpuUsed := map[int32]resources.Amount{}
	for _, other := range r.leases {
		used = used.Add(other.held())
		for i, share := range other.gpuShares {
			gpuUsed[other.gpuIDs[i]] += share
		}
	}
	if !request.Add(used).IsSubsetOf(r.resources) {
		return nil
	}
	lease := &workerLease{id: leaseID, resources: request, holder: r, bundle: id}
	switch {
	case r.mig != nil:
		// The bundle holds one slice: a lease that asks for it gets it whole (the fit
		// check above keeps a second lease off it).
		if asksMIG(request) {
			lease.gpuIDs = []int32{int32(r.mig.gpu)}
			lease.cudaVisibleDevices = r.mig.deviceUUID
		}
	default:
		capacity := gpuShares(r.resources[resources.GPU])
		free := make([]resources.Amount, min(len(capacity), len(r.gpuIDs)))
		for i := range free {
			free[i] = capacity[i] - gpuUsed[r.gpuIDs[i]]
		}
		gpus, shares, err := pickGPUs(request[resources.GPU], r.gpuIDs[:len(free)], free)
		if err != nil {
			return nil
		}
		lease.gpuIDs, lease.gpuShares, lease.cudaVisibleDevices = gpus, shares, joinGPUIDs(gpus)
	}
	if r.leases == nil {
		r.leases = map[string]*workerLease{}
	}
	r.leases[leaseID] = lease
	return lease
}

// releaseLease gives a lease's resources back to the node or its bundle. Releasing twice,
// or after the bundle itself was released, is harmless.
func (t *bundleTable) releaseLease(lease *workerLease) {
	if lease.holder != nil {
		delete(lease.holder.leases, lease.id)
		return
	}
	delete(t.nodeLeases, lease.id)
}

// orphaned tells whether the bundle a lease took from is no longer held (cancelled,
// released, or replaced by a newer generation).
func (t *bundleTable) orphaned(lease *workerLease) bool {
	return !t.holds(lease.bundle, lease.holder)
}

// holds tells whether holder is still the reservation of bundle id; a nil holder (the
// node, not a bundle) always is.
func (t *bundleTable) holds(id bundleID, holder *reservation) bool {
	return holder == nil || t.reserved[id] == holder
}

func asksMIG(request resources.Set) bool {
	for name, amount := range request {
		if mig.IsResource(name) && amount > 0 {
			return true
		}
	}
	return false
}

// joinGPUIDs is CUDA_VISIBLE_DEVICES for whole GPUs: "0,3" (with CUDA_DEVICE_ORDER=
// PCI_BUS_ID, CUDA numbers GPUs as NVML does).
func joinGPUIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

// validateLeaseResources converts a lease request's resources (resources.ParseTaskResources).
func validateLeaseResources(wire map[string]float64) (resources.Set, error) {
	set, err := resources.ParseTaskResources(wire)
	if err != nil {
		return nil, fmt.Errorf("resources%w", err)
	}
	return set, nil
}
