// Package pending holds the one list of reasons a workload waits: the code a
// placement group's row shows as pending_reason, and that `raygo status`, the metrics,
// the dashboard and the autoscaler read. Multi-tenancy defines the list; every other
// part uses it and none adds a second.
//
// The package is vocabulary: no I/O, no imports beyond the standard library.
package pending

// Reason is why a workload is not running. The values are stable and appear verbatim
// in tables, JSON and metrics labels.
type Reason string

const (
	// QuotaExceeded: admitting the workload would take its queue above its nominal
	// quota plus borrowing limit.
	QuotaExceeded Reason = "QuotaExceeded"
	// WaitingForBorrowableQuota: the queue may borrow enough, but its cohort has not
	// enough unused quota to lend now.
	WaitingForBorrowableQuota Reason = "WaitingForBorrowableQuota"
	// WaitingForReclaim: the queue is reclaiming its nominal quota from borrowers; the
	// workload starts once they are evicted.
	WaitingForReclaim Reason = "WaitingForReclaim"
	// BlockedByReservation: the workload fits its quota, but starting it would delay
	// the reservation a higher-ranked gang holds (backfill refused it).
	BlockedByReservation Reason = "BlockedByReservation"
	// PreemptionDelay: victims were chosen and are being evicted (checkpoint first).
	PreemptionDelay Reason = "PreemptionDelay"
	// Preempted: the workload ran and was evicted to make room for another.
	Preempted Reason = "Preempted"
	// WaitingForNewNode: the autoscaler is launching capacity for the workload.
	WaitingForNewNode Reason = "WaitingForNewNode"
	// Fragmented: the cluster has the resources free in total, but not in the shape
	// the workload needs (one NVLink island, one node, MIG geometry).
	Fragmented Reason = "Fragmented"
	// NoResources: the resources are not free now; they would be on an idle cluster.
	NoResources Reason = "NoResources"
	// Infeasible: no node of the cluster could ever hold the workload, even idle.
	Infeasible Reason = "Infeasible"
	// Internal: the workload could not be scheduled for a reason inside raygo (a
	// store or raylet error); it never blocks other workloads.
	Internal Reason = "Internal"
)

// All lists every reason in the order above.
var All = []Reason{
	QuotaExceeded, WaitingForBorrowableQuota, WaitingForReclaim, BlockedByReservation,
	PreemptionDelay, Preempted, WaitingForNewNode, Fragmented, NoResources, Infeasible,
	Internal,
}

// HeldByAdmission reports whether the reason is admission's (quota, cohort,
// reservation, preemption): such work is not autoscaler demand, and Ray's
// scheduling_state shows it as QUEUED.
func (r Reason) HeldByAdmission() bool {
	switch r {
	case QuotaExceeded, WaitingForBorrowableQuota, WaitingForReclaim, BlockedByReservation,
		PreemptionDelay, Preempted:
		return true
	}
	return false
}

// Valid reports whether r is one of All.
func (r Reason) Valid() bool {
	for _, x := range All {
		if x == r {
			return true
		}
	}
	return false
}
