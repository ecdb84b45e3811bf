package preemption

import (
	"cmp"
	"slices"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// candidate is a running workload the rules allow evicting in some attempt.
type candidate struct {
	run    *Running
	charge resources.Set
	gpus   resources.Amount
	// otherQueue: in another queue of the cohort (it borrows); reclaim and borrow say
	// which policy allows evicting it (reclaimWithinCohort, borrowWithinCohort).
	otherQueue, reclaim, borrow bool
	// gpusByNode is the GPUs its bundles hold on each node.
	gpusByNode map[placement.NodeID]resources.Amount
	// released: the set being tried evicts it (its charge is returned to the quota
	// view at once); applied: its bundles are released in the working snapshot, which
	// follows released only when a fit check needs it (search.sync); unplaced: its
	// placements name nothing the snapshot holds, so only its quota counts.
	released, applied, unplaced bool
	// covered: every node its bundles are on is in the working copy (or in no snapshot).
	covered bool
}

// collect returns the running workloads that some attempt may evict, in Kueue's order:
// other (borrowing) queues first, then lower priority, then most recently admitted,
// then id. Filters, cheapest first: the preemptor itself; the priority class
// (preemptible, minRuntime with the queue's); the victim's queue against the
// preemptor's policies and priority.
func collect(in Input, borrowing func(queue string) bool) []candidate {
	p := in.Preemptor
	own, _ := in.Config.Queue(p.Queue)
	policy := preemptionOf(in.Config, p.Queue)
	var out []candidate
	for i := range in.Running {
		r := &in.Running[i]
		if r.ID == p.ID || !evictableNow(in.Config, r, in.Now) {
			continue
		}
		c := candidate{run: r}
		if r.Queue == p.Queue {
			if !withinQueueAllows(policy.WithinClusterQueue, *r, p) {
				continue
			}
		} else {
			theirs, ok := in.Config.Queue(r.Queue)
			if !ok || own.Cohort == "" || theirs.Cohort != own.Cohort || !borrowing(r.Queue) {
				continue
			}
			c.otherQueue = true
			c.reclaim = policy.ReclaimWithinCohort == queues.PreemptAny ||
				(policy.ReclaimWithinCohort == queues.PreemptLowerPriority && r.Priority < p.Priority)
			if b := policy.BorrowWithinCohort; b != nil && b.Policy == queues.PreemptLowerPriority && r.Priority < p.Priority {
				c.borrow = b.MaxPriorityThreshold == nil || r.Priority <= *b.MaxPriorityThreshold
			}
			if !c.reclaim && !c.borrow {
				continue
			}
		}
		charge, ok := chargeOf(r.Bundles)
		if !ok {
			continue // an overflowing charge was never admitted
		}
		c.charge, c.gpus = charge, charge[resources.GPU]
		c.gpusByNode = map[placement.NodeID]resources.Amount{}
		for _, pl := range r.Placements {
			if pl.BundleIndex >= 0 && pl.BundleIndex < len(r.Bundles) {
				c.gpusByNode[pl.NodeID] += r.Bundles[pl.BundleIndex][resources.GPU]
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b candidate) int {
		if a.otherQueue != b.otherQueue {
			if a.otherQueue {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.run.Priority, b.run.Priority), cmp.Compare(b.run.AdmittedAt, a.run.AdmittedAt), cmp.Compare(a.run.ID, b.run.ID))
	})
	return out
}

// evictableNow: the workload's class is preemptible and it has run its minRuntime (the
// longer of its class's and its queue's).
func evictableNow(config *queues.Config, r *Running, now int64) bool {
	class := r.PriorityClass
	if class == "" {
		if q, ok := config.Queue(r.Queue); ok {
			class = q.DefaultPriorityClass
		}
	}
	minRuntime := preemptionOf(config, r.Queue).MinRuntime
	if pc, ok := config.PriorityClass(class); ok {
		if !pc.IsPreemptible() {
			return false
		}
		minRuntime = max(minRuntime, pc.MinRuntime)
	}
	return now-r.AdmittedAt >= int64(minRuntime)
}

func withinQueueAllows(policy string, r Running, p Preemptor) bool {
	switch policy {
	case queues.PreemptLowerPriority:
		return r.Priority < p.Priority
	case queues.PreemptLowerOrNewerEqualPriority:
		return r.Priority < p.Priority || (r.Priority == p.Priority && r.Arrival > p.Arrival)
	}
	return false
}

// chargeOf is resources.SumOf without its error message: collect sums a thousand
// charges per decision and only needs to know that one overflows. Bundles name few
// resources, so the sum is kept in a short list until the set is made, and GPUs and
// CPUs are looked up rather than found by walking the bundle.
func chargeOf(bundles []resources.Set) (resources.Set, bool) {
	type entry struct {
		name   string
		amount resources.Amount
	}
	var buf [4]entry
	sum := buf[:0]
	add := func(name string, amount resources.Amount) bool {
		if amount == 0 {
			return true
		}
		k := slices.IndexFunc(sum, func(e entry) bool { return e.name == name })
		if k < 0 {
			sum, k = append(sum, entry{name: name}), len(sum)
		}
		if amount > resources.MaxAmount-sum[k].amount {
			return false
		}
		sum[k].amount += amount
		return true
	}
	for _, bundle := range bundles {
		known := 0
		for _, name := range [...]string{resources.GPU, resources.CPU} {
			if amount, ok := bundle[name]; ok {
				known++
				if !add(name, amount) {
					return nil, false
				}
			}
		}
		if known == len(bundle) {
			continue
		}
		for name, amount := range bundle {
			if name != resources.GPU && name != resources.CPU && !add(name, amount) {
				return nil, false
			}
		}
	}
	out := make(resources.Set, len(sum))
	for _, e := range sum {
		out[e.name] = e.amount
	}
	return out, true
}
