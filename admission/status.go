package admission

import (
	"cmp"
	"math/big"
	"slices"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/resources"
)

// QueueStatus is one queue's line of a queue listing.
type QueueStatus struct {
	Queue  string
	Cohort string
	// Pending counts the workloads waiting in the queue.
	Pending int
	// DominantShare is the fair-sharing share (weighted usage above nominal over the
	// cohort's lendable quota, the largest over resources); 0 when not borrowing.
	DominantShare float64
	// Resources has the resources the queue lists, and any it uses.
	Resources map[string]ResourceStatus
}

// ResourceStatus is one resource of a queue. Amounts are fixed-point.
type ResourceStatus struct {
	Nominal resources.Amount
	// BorrowingLimit is queues.Unlimited when absent; Limited is false for a resource
	// the queue does not list (usage only).
	BorrowingLimit resources.Amount
	Limited        bool
	Usage          resources.Amount
	// Borrowed is the usage above Nominal.
	Borrowed resources.Amount
	// Lent is the queue's part of what its cohort borrows, attributed to the members
	// pro rata to the unused quota each can lend (min(lendingLimit, nominal - usage)).
	Lent resources.Amount
}

// Status summarizes every configured queue (and any other queue with usage or pending
// work), sorted by name.
func Status(config *queues.Config, usage map[string]resources.Set, waiting []Workload) []QueueStatus {
	byName := map[string]*QueueStatus{}
	get := func(name string) *QueueStatus {
		if st, ok := byName[name]; ok {
			return st
		}
		q, _ := config.Queue(name)
		st := &QueueStatus{Queue: name, Cohort: q.Cohort, Resources: map[string]ResourceStatus{}}
		for resource, quota := range q.Quotas() {
			st.Resources[resource] = ResourceStatus{Nominal: quota.Nominal, BorrowingLimit: quota.Borrowing, Limited: true}
		}
		byName[name] = st
		return st
	}
	for _, q := range config.Queues {
		get(q.Name)
	}
	for name := range usage {
		get(name)
	}
	for _, w := range waiting {
		get(w.Queue).Pending++
	}
	// Usage and borrowing; per cohort and resource, what is borrowed and what each
	// member could lend.
	borrowed := map[[2]string]resources.Amount{}
	lendable := map[[2]string]resources.Amount{}
	pool := map[[2]string]resources.Amount{}
	for name, st := range byName {
		q, _ := config.Queue(name)
		quotas := q.Quotas()
		for resource, used := range usage[name] {
			rs := st.Resources[resource]
			rs.Usage = used
			if rs.Limited {
				rs.Borrowed = max(0, used-rs.Nominal)
			}
			st.Resources[resource] = rs
		}
		if q.Cohort == "" {
			continue
		}
		for resource, quota := range quotas {
			key := [2]string{q.Cohort, resource}
			used := usage[name][resource]
			borrowed[key] += max(0, used-quota.Nominal)
			lendable[key] += min(quota.Lending, max(0, quota.Nominal-used))
			pool[key] += quota.Lending
		}
	}
	for name, st := range byName {
		q, _ := config.Queue(name)
		for resource, quota := range q.Quotas() {
			rs := st.Resources[resource]
			if key := [2]string{q.Cohort, resource}; q.Cohort != "" {
				if lendable[key] > 0 {
					mine := min(quota.Lending, max(0, quota.Nominal-rs.Usage))
					// borrowed * mine / lendable without overflow: amounts reach 2^63.
					lent := new(big.Int).Mul(big.NewInt(int64(borrowed[key])), big.NewInt(int64(mine)))
					rs.Lent = resources.Amount(lent.Quo(lent, big.NewInt(int64(lendable[key]))).Int64())
				}
				st.DominantShare = max(st.DominantShare, weightedShare(rs.Borrowed, pool[key], q.Weight()))
			}
			st.Resources[resource] = rs
		}
	}
	out := make([]QueueStatus, 0, len(byName))
	for _, st := range byName {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b QueueStatus) int { return cmp.Compare(a.Queue, b.Queue) })
	return out
}
