package admission

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Workload is one pending gang: a placement group (all its bundles) or a lease outside
// any group.
type Workload struct {
	ID string
	// Queue is the resolved queue name (queues.Config.QueueForNamespace or the group's
	// own queue).
	Queue string
	// Priority is the resolved value of its priority class; higher first.
	Priority int64
	// Arrival orders workloads of equal priority (e.g. creation time in ns); ties are
	// broken by ID.
	Arrival int64
	// Bundles is the gang; its sum is the quota charge. Admitted whole or not at all.
	Bundles []resources.Set
	// MaxRuntime is the declared maximum runtime in the caller's clock units; 0 = none.
	// Decide hands it to Capacity.Take; it does not read clocks itself.
	MaxRuntime int64
}

// Charge is the quota a workload takes: the sum of its bundles. It fails (naming the
// resource) when a sum would pass resources.MaxAmount: such a workload fits no quota
// and no cluster, and Decide leaves it waiting as Infeasible.
func (w Workload) Charge() (resources.Set, error) { return resources.SumOf(w.Bundles) }

// Capacity is the oracle Decide asks about free cluster capacity (the placement code
// over the GCS's cluster view). Decide calls it from one goroutine, in order, during one
// call; an implementation needs no locking for it. Take and Release change the oracle's
// view for the rest of the decision only (the caller then places what was admitted).
type Capacity interface {
	// Fit returns "" when the gang fits the free capacity now (after what Take took),
	// else why not: pending.NoResources, pending.Fragmented or pending.Infeasible (no
	// node could ever hold it).
	Fit(gang []resources.Set) pending.Reason
	// EarliestFit returns the earliest time at which the gang would fit the capacity if
	// all running work (and what Take took) ended at its declared end; ok is false when
	// that time is unknown (work it must wait for has no declared end).
	EarliestFit(gang []resources.Set) (at int64, ok bool)
	// FitsAt reports whether the gang would fit at time at, with running work ending at
	// its declared end (work without one never ends).
	FitsAt(gang []resources.Set, at int64) bool
	// Take starts w now (until now + w.MaxRuntime, or forever when 0).
	Take(w Workload)
	// Release undoes Take(w).
	Release(w Workload)
}

// Input is everything one admission decision reads.
type Input struct {
	Config *queues.Config
	// Usage is the charge per queue of admitted work (Ledger.Usage). Not modified.
	Usage map[string]resources.Set
	// Pending is the work waiting for admission, any order.
	Pending  []Workload
	Capacity Capacity
	// WithoutReservations turns EASY backfill off: a gang that does not fit holds
	// nothing and smaller work takes whatever frees up (Kueue's BestEffortFIFO, which can
	// starve gangs). Benchmarks and simulations run it as the baseline.
	WithoutReservations bool
}

// Reservation is the place a gang that could not start holds for itself: no smaller
// work may start where it would delay the gang (EASY backfill).
type Reservation struct {
	// Scope is the cohort name, or "queue/<name>" for a queue outside any cohort.
	Scope    string
	Workload string
	// At is when the gang is expected to fit (Capacity.EarliestFit); valid when Timed.
	At    int64
	Timed bool
}

// Decision is the outcome of one admission cycle.
type Decision struct {
	// Admitted lists the workloads to start, in admission order. Their charge is in Usage.
	Admitted []Workload
	// Waiting gives every other pending workload's reason.
	Waiting map[string]pending.Reason
	// Reservations held after this cycle, one per scope at most.
	Reservations []Reservation
	// Usage is Input.Usage plus the charges of Admitted.
	Usage map[string]resources.Set
}

// queueState is one queue during a decision.
type queueState struct {
	config   queues.Queue
	quotas   map[string]queues.Quota
	cohort   *cohortState
	scope    string
	weight   float64
	usage    resources.Set
	waiting  []Workload      // sorted: priority desc, arrival, ID
	charges  []resources.Set // charges[i] is waiting[i]'s charge, summed once per decision
	next     int
	closed   pending.Reason // StrictFIFO: the head's reason once it could not be admitted
	key      rankKey        // the head's rank, while keyValid
	keyValid bool
}

// cohortState is the lending pool of a cohort, per resource: what members lend
// (lendingLimit each) and what of it members use (usage above their non-lendable part).
type cohortState struct {
	capacity map[string]resources.Amount
	used     map[string]resources.Amount
}

// guaranteed is the part of the nominal quota a queue does not lend.
func guaranteed(q queues.Quota) resources.Amount { return q.Nominal - q.Lending }

func poolUse(usage resources.Amount, q queues.Quota) resources.Amount {
	return max(0, usage-guaranteed(q))
}

// Decide runs one admission cycle.
//
// Order: the head of every queue (priority, then arrival) competes; the next admitted
// is the head that needs no borrowing, then (fair sharing on) the lowest weighted
// dominant share after admission, then the highest priority, then the earliest arrival.
// A head that cannot be admitted gets its reason and the queue moves on (BestEffortFIFO)
// or stops (StrictFIFO). A head that fits its quota but not the free capacity takes its
// scope's reservation if the scope has none; later work (of any scope: capacity is
// shared) starts only if every reservation still fits at its time (untimed: only if it
// asks for none of the reservation's resources). Each reservation is kept on its own;
// two may count on the same capacity, the earlier-ranked one then starts first.
func Decide(in Input) Decision {
	d := Decision{Waiting: map[string]pending.Reason{}, Usage: map[string]resources.Set{}}
	for q, set := range in.Usage {
		d.Usage[q] = set.Clone()
	}
	states := buildStates(in, d.Usage, d.Waiting)
	holders := map[string]*Reservation{}
	holderGang := map[string][]resources.Set{}
	var holderOrder []string // scopes in the order their reservations were taken
	var active []*queueState
	for _, name := range slices.Sorted(maps.Keys(states)) {
		if len(states[name].waiting) > 0 {
			active = append(active, states[name])
		}
	}
	for {
		// A head's key depends only on its own queue's usage and position, which change
		// only for the queue chosen last; the others' keys are reused.
		var best *queueState
		for _, s := range active {
			if s.closed != "" || s.next >= len(s.waiting) {
				continue
			}
			if !s.keyValid {
				s.key, s.keyValid = s.rank(s.waiting[s.next], s.charges[s.next], in.Config.FairSharing.Enable), true
			}
			if best == nil || s.key.less(best.key) {
				best = s
			}
		}
		if best == nil {
			break
		}
		best.keyValid = false
		bestKey := best.key
		w := best.waiting[best.next]
		best.next++
		reason := best.quotaReason(bestKey.charge)
		if reason == "" {
			reason = in.Capacity.Fit(w.Bundles)
			res := holders[best.scope]
			switch {
			case reason == "" && len(holders) > 0:
				// Capacity is shared by every scope: work of any scope starts only where
				// it keeps every reservation held so far.
				in.Capacity.Take(w)
				for _, scope := range holderOrder {
					if !backfillKeeps(in.Capacity, *holders[scope], holderGang[scope], w) {
						in.Capacity.Release(w)
						reason = pending.BlockedByReservation
						break
					}
				}
			case reason == "":
				in.Capacity.Take(w)
			case reason != pending.Infeasible && res == nil && !in.WithoutReservations:
				at, ok := in.Capacity.EarliestFit(w.Bundles)
				holders[best.scope] = &Reservation{Scope: best.scope, Workload: w.ID, At: at, Timed: ok}
				holderGang[best.scope] = w.Bundles
				holderOrder = append(holderOrder, best.scope)
			}
		}
		if reason != "" {
			d.Waiting[w.ID] = reason
			if best.config.QueueingStrategy == queues.StrictFIFO {
				best.closed = reason
			}
			continue
		}
		best.charge(bestKey.charge)
		d.Admitted = append(d.Admitted, w)
	}
	for _, s := range states {
		for _, w := range s.waiting[s.next:] {
			d.Waiting[w.ID] = s.closed // StrictFIFO: behind a head that waits
		}
		if !s.usage.IsZero() {
			d.Usage[s.config.Name] = s.usage
		}
	}
	for _, scope := range slices.Sorted(maps.Keys(holders)) {
		d.Reservations = append(d.Reservations, *holders[scope])
	}
	return d
}

// backfillKeeps reports whether the reservation still holds with w started.
func backfillKeeps(c Capacity, res Reservation, gang []resources.Set, w Workload) bool {
	if res.Timed {
		return c.FitsAt(gang, res.At)
	}
	for _, bundle := range w.Bundles {
		for name, amount := range bundle {
			if amount == 0 {
				continue
			}
			for _, held := range gang {
				if held[name] > 0 {
					return false
				}
			}
		}
	}
	return true
}

func buildStates(in Input, usage map[string]resources.Set, waiting map[string]pending.Reason) map[string]*queueState {
	states := map[string]*queueState{}
	cohorts := map[string]*cohortState{}
	stateOf := func(name string) *queueState {
		if s, ok := states[name]; ok {
			return s
		}
		q, ok := in.Config.Queue(name)
		if !ok {
			return nil
		}
		s := &queueState{config: q, quotas: q.Quotas(), weight: q.Weight(), usage: usage[name].Clone(), scope: "queue/" + name}
		if s.usage == nil {
			s.usage = resources.Set{}
		}
		states[name] = s
		return s
	}
	// Every configured queue takes part in its cohort's pool, pending work or not.
	for _, q := range in.Config.Queues {
		stateOf(q.Name)
	}
	for _, s := range states {
		if s.config.Cohort == "" {
			continue
		}
		s.scope = s.config.Cohort
		c := cohorts[s.config.Cohort]
		if c == nil {
			c = &cohortState{capacity: map[string]resources.Amount{}, used: map[string]resources.Amount{}}
			cohorts[s.config.Cohort] = c
		}
		s.cohort = c
		for name, quota := range s.quotas {
			c.capacity[name] += quota.Lending
			c.used[name] += poolUse(s.usage[name], quota)
		}
	}
	type item struct {
		w      Workload
		charge resources.Set
	}
	items := map[*queueState][]item{}
	for _, w := range in.Pending {
		s := stateOf(w.Queue)
		if s == nil { // the queue left the config: nothing of it can be admitted
			waiting[w.ID] = pending.QuotaExceeded
			continue
		}
		charge, err := w.Charge()
		if err != nil {
			waiting[w.ID] = pending.Infeasible
			continue
		}
		items[s] = append(items[s], item{w, charge})
	}
	for s, list := range items {
		slices.SortFunc(list, func(a, b item) int {
			return cmp.Or(cmp.Compare(b.w.Priority, a.w.Priority), cmp.Compare(a.w.Arrival, b.w.Arrival), cmp.Compare(a.w.ID, b.w.ID))
		})
		for _, it := range list {
			s.waiting = append(s.waiting, it.w)
			s.charges = append(s.charges, it.charge)
		}
	}
	return states
}

// rankKey orders heads across queues; smaller first.
type rankKey struct {
	borrows  bool
	share    float64
	priority int64
	arrival  int64
	queue    string
	id       string
	charge   resources.Set
}

func (k rankKey) less(o rankKey) bool {
	if k.borrows != o.borrows {
		return !k.borrows
	}
	if c := cmp.Compare(k.share, o.share); c != 0 {
		return c < 0
	}
	return cmp.Or(cmp.Compare(o.priority, k.priority), cmp.Compare(k.arrival, o.arrival), cmp.Compare(k.queue, o.queue), cmp.Compare(k.id, o.id)) < 0
}

func (s *queueState) rank(w Workload, charge resources.Set, fair bool) rankKey {
	key := rankKey{priority: w.Priority, arrival: w.Arrival, queue: s.config.Name, id: w.ID, charge: charge}
	for name, amount := range key.charge {
		quota, limited := s.quotas[name]
		if !limited {
			continue
		}
		above := s.usage[name] + amount - quota.Nominal
		if above <= 0 {
			continue
		}
		key.borrows = true
		if !fair {
			continue
		}
		key.share = max(key.share, s.resourceShare(name, amount))
	}
	return key
}

// resourceShare is the queue's weighted share of one resource with extra added to its
// usage: its usage above nominal over what its cohort lends, divided by its weight.
func (s *queueState) resourceShare(name string, extra resources.Amount) float64 {
	return weightedShare(s.usage[name]+extra-s.quotas[name].Nominal, s.cohortCapacity(name), s.weight)
}

// weightedShare is a queue's share of one resource for fair sharing (Kueue's dominant
// resource share): its usage above nominal over what its cohort lends of the resource,
// divided by its weight. Borrowing with weight 0, or from a cohort that lends none of
// the resource, ranks last.
func weightedShare(above, pool resources.Amount, weight float64) float64 {
	if above <= 0 {
		return 0
	}
	if weight == 0 || pool == 0 {
		return math.Inf(1)
	}
	return float64(above) / float64(pool) / weight
}

func (s *queueState) cohortCapacity(name string) resources.Amount {
	if s.cohort == nil {
		return 0
	}
	return s.cohort.capacity[name]
}

// quotaReason returns "" when the charge fits the queue's quota and its cohort's pool.
func (s *queueState) quotaReason(charge resources.Set) pending.Reason {
	reason := pending.Reason("")
	for _, name := range charge.Names() {
		quota, limited := s.quotas[name]
		if !limited {
			continue
		}
		after := s.usage[name] + charge[name]
		if after-quota.Nominal > quota.Borrowing || (s.cohort == nil && after > quota.Nominal) {
			return pending.QuotaExceeded
		}
		if s.cohort == nil || reason != "" {
			continue
		}
		delta := poolUse(after, quota) - poolUse(s.usage[name], quota)
		if s.cohort.used[name]+delta > s.cohort.capacity[name] {
			if after <= quota.Nominal {
				reason = pending.WaitingForReclaim
			} else {
				reason = pending.WaitingForBorrowableQuota
			}
		}
	}
	return reason
}

func (s *queueState) charge(charge resources.Set) {
	for name, amount := range charge {
		if quota, limited := s.quotas[name]; limited && s.cohort != nil {
			s.cohort.used[name] += poolUse(s.usage[name]+amount, quota) - poolUse(s.usage[name], quota)
		}
	}
	// In place: preemption's search charges and releases thousands of times a decision.
	for name, amount := range charge {
		if amount != 0 {
			s.usage[name] += amount
		}
	}
}

// FirstFitAmong returns the first of the declared ends at which fits holds, for
// Capacity.EarliestFit implementations: ends are sorted and made unique here, and fitting
// only grows as more work ends, so the search is binary. ok is false when the gang fits at
// none of them.
func FirstFitAmong(ends []int64, fits func(at int64) bool) (at int64, ok bool) {
	slices.Sort(ends)
	ends = slices.Compact(ends)
	i := sort.Search(len(ends), func(i int) bool { return fits(ends[i]) })
	if i == len(ends) {
		return 0, false
	}
	return ends[i], true
}
