package preemption

import (
	"cmp"
	"maps"
	"slices"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// exactLimit is the most candidates (at or below the chosen priority level) the search
// enumerates exhaustively; above it only the heuristic orders run. exactChecks bounds
// the placement.Schedule calls the enumeration may make.
const (
	exactLimit  = 12
	exactChecks = 4096
	// focusNodes is how many nodes the search tries to clear first, one at a time.
	focusNodes = 4
)

// search is one decision's victim search over a working copy of the snapshot and the
// quota view; candidates are removed (their charge returned at once, their bundles
// released in the copy when a fit check next needs it) and added back as sets are tried.
type search struct {
	in     Input
	base   *placement.Snapshot // the caller's, read only
	work   *placement.Snapshot // nil until the first fit check that needs it
	quota  *admission.QuotaView
	charge resources.Set
	cands  []candidate
	// anyOtherQueue: some candidate is in another queue, so removal orders and the
	// cohort rule depend on the quota view.
	anyOtherQueue bool
	// allowBorrowing: the attempt lets the preemptor borrow (else it must stay within
	// its nominal quota once the victims are gone).
	allowBorrowing bool
	// fairSharing: the fair-sharing search runs (fairsharing.go); the share rules, not
	// "only borrowed quota is taken back", say which other queues' work may go.
	fairSharing bool
	// freeGPU, freeCPU: the cluster's free GPUs and CPUs; freedGPU, freedCPU: what the
	// removed victims free. A set short of them in total needs no placement call.
	freeGPU, freeCPU, freedGPU, freedCPU resources.Amount
	// pending lists the candidates whose released flag changed since the working copy
	// last followed it (sync); mark and stamp make setTo's membership test allocation
	// free.
	pending []int
	mark    []uint32
	stamp   uint32
	checks  int

	// The working copy's rows (workcopy.go): scope is the candidates the coming fit
	// checks may remove; nodes caches the caller's nodes read so far; rows is the node
	// set of the copy, freeRows the nodes that could take a bundle without evictions
	// (computed once, rowsAll when every node must be kept).
	scope    []int
	nodes    map[placement.NodeID]placement.Node
	rows     map[placement.NodeID]bool
	unknown  map[placement.NodeID]bool // named by a placement, not in the snapshot
	freeRows []placement.NodeID
	freeDone bool
	rowsAll  bool
}

func newSearch(in Input, quota *admission.QuotaView, charge resources.Set) *search {
	s := &search{in: in, base: in.Cluster, quota: quota, charge: charge}
	_, free := in.Cluster.ResourceSummary()
	s.freeGPU, s.freeCPU = free[resources.GPU], free[resources.CPU]
	s.cands = collect(in, func(queue string) bool { return quota.Borrowing(queue, charge) })
	s.mark = make([]uint32, len(s.cands))
	s.nodes = map[placement.NodeID]placement.Node{}
	s.unknown = map[placement.NodeID]bool{}
	for i := range s.cands {
		s.anyOtherQueue = s.anyOtherQueue || s.cands[i].otherQueue
	}
	return s
}

// attempt is one of Kueue's tries: which candidates, and whether the preemptor may
// borrow once they are gone.
type attempt struct {
	pool           []int
	allowBorrowing bool
	whileBorrowing bool // other queues' victims are InCohortReclaimWhileBorrowing when the preemptor borrows
	fairSharing    bool // other queues' victims are InCohortFairSharing
}

// attempts follows Kueue's classic sequence: with borrowWithinCohort, one try over the
// queue's own candidates and the other queues' (those under the threshold unless the
// preemptor stays within its nominal quota); else reclaim without borrowing, when the
// preemptor's charge fits its nominal quota; then the queue's own work, borrowing.
func (s *search) attempts() []attempt {
	policy := preemptionOf(s.in.Config, s.in.Preemptor.Queue)
	underNominal := s.quota.WithinNominal(s.in.Preemptor.Queue, s.charge)
	var own, reclaim, borrow []int
	for i, c := range s.cands {
		switch {
		case !c.otherQueue:
			own = append(own, i)
			reclaim = append(reclaim, i)
			borrow = append(borrow, i)
		default:
			if c.reclaim {
				reclaim = append(reclaim, i)
			}
			if c.borrow || (underNominal && c.reclaim) {
				borrow = append(borrow, i)
			}
		}
	}
	if b := policy.BorrowWithinCohort; b != nil && b.Policy == "LowerPriority" {
		return []attempt{{pool: borrow, allowBorrowing: true, whileBorrowing: true}}
	}
	var out []attempt
	if underNominal && len(reclaim) > len(own) {
		out = append(out, attempt{pool: reclaim})
	}
	return append(out, attempt{pool: own, allowBorrowing: true})
}

// run tries the attempts in order and returns the first set found.
func (s *search) run() ([]Victim, Cause) {
	if len(s.cands) == 0 {
		return nil, CauseNoCandidates
	}
	if s.useFairSharing() {
		return s.runFairSharing()
	}
	cause := CauseNotEnough
	for _, a := range s.attempts() {
		if len(a.pool) == 0 {
			continue
		}
		s.allowBorrowing = a.allowBorrowing
		var set []int
		blastRadius := false
		if s.in.Search == SearchKueue {
			// Victims prune drops change no step of remove-then-add-back (prunable).
			order := s.prune(a.pool)
			s.useScope(order)
			set = s.removeThenAddBack(order)
			if set != nil && !s.withinBlastRadius(set) {
				set, blastRadius = nil, true
			}
		} else {
			set, blastRadius = s.best(a.pool)
		}
		if blastRadius {
			cause = CauseBlastRadius
		}
		if set == nil {
			continue
		}
		return s.victims(set, a), ""
	}
	return nil, cause
}

// withinBlastRadius: GPUs evicted <= GPUs needed + the largest victim gang's GPUs.
func (s *search) withinBlastRadius(set []int) bool {
	var evicted, largest resources.Amount
	for _, i := range set {
		evicted += s.cands[i].gpus
		largest = max(largest, s.cands[i].gpus)
	}
	return evicted <= s.charge[resources.GPU]+largest
}

func (s *search) victims(set []int, a attempt) []Victim {
	s.setTo(set)
	borrows := !s.quota.WithinNominal(s.in.Preemptor.Queue, s.charge)
	out := make([]Victim, 0, len(set))
	for _, i := range set {
		c := s.cands[i]
		reason := InClusterQueue
		switch {
		case c.otherQueue && a.fairSharing:
			reason = InCohortFairSharing
		case c.otherQueue && a.whileBorrowing && borrows:
			reason = InCohortReclaimWhileBorrowing
		case c.otherQueue:
			reason = InCohortReclamation
		}
		out = append(out, Victim{ID: c.run.ID, Reason: reason, GPUs: c.gpus})
	}
	slices.SortFunc(out, func(a, b Victim) int {
		ra, rb := s.runOf(a.ID), s.runOf(b.ID)
		return cmp.Or(cmp.Compare(rb.AdmittedAt, ra.AdmittedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func (s *search) runOf(id string) *Running {
	for _, c := range s.cands {
		if c.run.ID == id {
			return c.run
		}
	}
	return nil
}

// best is the search of SearchMinimal over a pool in Kueue's order:
//  1. the priority level: the lowest L such that evicting every candidate of priority
//     <= L makes room (no set can have a lower highest victim priority);
//  2. remove-then-add-back over several orders of those candidates (Kueue's; each of
//     the focusNodes nodes whose clearing looks cheapest first; largest GPUs first;
//     smallest first), and Kueue's over the whole pool, keeping the best set;
//  3. with at most exactLimit candidates, every set better than that one, best first,
//     until one fits;
//  4. when that set evicts more than the blast radius allows (withinBlastRadius), the
//     next best within it: with at most exactLimit candidates every set within it,
//     best first, until one fits; else the best of those step 2 found within it; else
//     steps 2 to 4 again at the next priority level.
//
// blastRadius reports that sets were found but none within the blast radius.
func (s *search) best(pool []int) (set []int, blastRadius bool) {
	levels := slices.Compact(slices.Sorted(func(yield func(int64) bool) {
		for _, i := range pool {
			if !yield(s.cands[i].run.Priority) {
				return
			}
		}
	}))
	fitting := false
	for _, level := range levels {
		sub := slices.DeleteFunc(slices.Clone(pool), func(i int) bool { return s.cands[i].run.Priority > level })
		subIsPrefix := slices.Equal(pool[:len(sub)], sub)
		sub = s.prune(sub)
		s.useScope(sub)
		// Kueue's order over sub finds a set exactly when removing all it removes makes
		// room, and gallops there from short prefixes, so the level is found without
		// releasing all of sub. Another queue stops lending victims once it no longer
		// borrows, so the order matters: small victims first can use up what a large
		// one alone would take; without other queues' candidates every order removes
		// all of sub.
		first := s.removeThenAddBack(sub)
		if first == nil {
			if !s.anyOtherQueue {
				continue
			}
			if s.setTo(s.removalSequence(s.largestFirst(sub))); !s.fits() {
				continue
			}
		}
		set, found := s.bestAt(pool, sub, first, subIsPrefix, !fitting)
		if set != nil {
			return set, false
		}
		fitting = true
		blastRadius = blastRadius || found
	}
	return nil, blastRadius
}

// bestAt is steps 2 to 4 of best at one level, sub its candidates, kueueSet what
// remove-then-add-back found over sub: the set, or nil and whether any set was found at
// all. first: no lower level makes room.
func (s *search) bestAt(pool, sub, kueueSet []int, subIsPrefix, first bool) (set []int, found bool) {
	var sets [][]int
	var keys []setKey
	consider := func(set []int) {
		if set != nil {
			sets, keys = append(sets, set), append(keys, s.keyOf(set))
		}
	}
	consider(kueueSet)
	for _, order := range s.focusOrders(sub) {
		consider(s.removeThenAddBack(order))
	}
	bigFirst := s.largestFirst(sub)
	consider(s.removeThenAddBack(bigFirst))
	slices.Reverse(bigFirst)
	consider(s.removeThenAddBack(bigFirst))
	// Kueue's own answer, so the best never loses to it. When sub is a prefix of pool
	// (no candidate above the level comes before one at or below it, as without other
	// queues' candidates), Kueue's order over pool finds its first fitting prefix inside
	// sub, and its answer is the one over sub, already considered.
	if !subIsPrefix {
		s.useScope(pool)
		consider(s.removeThenAddBack(pool))
	}
	if len(sets) == 0 {
		return nil, false
	}
	ranked := make([]int, len(sets))
	for i := range ranked {
		ranked[i] = i
	}
	slices.SortStableFunc(ranked, func(a, b int) int { return keys[a].compare(keys[b]) })
	if len(sub) <= exactLimit && !s.in.heuristicOnly {
		s.useScope(sub)
		level := keys[ranked[0]].maxPriority
		if first {
			// Sets entirely below the level were ruled out by step 1.
			bound := keys[ranked[0]]
			best := s.exact(sub, func(k setKey) bool { return k.maxPriority == level && k.less(bound) }, nil)
			if best == nil {
				best = sets[ranked[0]]
			}
			if s.withinBlastRadius(best) {
				return best, true
			}
		}
		// A set within the blast radius stays within it without any of its victims
		// (dropping the largest lowers what is evicted by at least what it lowers the
		// bound), so the first such set that fits is minimal too.
		if set := s.exact(sub, func(k setKey) bool { return !first || k.maxPriority == level }, s.withinBlastRadius); set != nil {
			return set, true
		}
	}
	for _, k := range ranked {
		if s.withinBlastRadius(sets[k]) {
			return sets[k], true
		}
	}
	return nil, true
}

// largestFirst orders candidates by GPUs, largest first, keeping the order of equals.
func (s *search) largestFirst(list []int) []int {
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(s.cands[b].gpus, s.cands[a].gpus) })
	return out
}

// exact enumerates the subsets of sub whose keys take and that keep allows (nil: all),
// best first, and returns the first that fits (it is minimal when dropping a victim
// ranks a set earlier and keeps it taken and kept).
func (s *search) exact(sub []int, take func(setKey) bool, keep func([]int) bool) []int {
	var sets [][]int
	var keys []setKey
	for mask := 1; mask < 1<<len(sub); mask++ {
		var set []int
		for b, i := range sub {
			if mask&(1<<b) != 0 {
				set = append(set, i)
			}
		}
		// Sets entirely below the level were ruled out by step 1.
		if key := s.keyOf(set); take(key) && (keep == nil || keep(set)) {
			sets, keys = append(sets, set), append(keys, key)
		}
	}
	order := make([]int, len(sets))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return keys[a].compare(keys[b]) })
	start := s.checks
	for _, k := range order {
		if s.checks-start >= exactChecks {
			return nil
		}
		s.setTo(sets[k])
		if s.fits() {
			return sets[k]
		}
	}
	return nil
}

// focusOrders returns, for the nodes whose clearing looks cheapest, the candidates on
// that node first (lower priority, then larger, first), then the others in pool order:
// remove-then-add-back then frees one node (one NVLink island) rather than scattered
// GPUs.
func (s *search) focusOrders(sub []int) [][]int {
	type nodeScore struct {
		id              placement.NodeID
		feasible        bool
		deficit, evicts resources.Amount
	}
	onNode := map[placement.NodeID][]int{}
	for _, i := range sub {
		for id := range s.cands[i].gpusByNode {
			onNode[id] = append(onNode[id], i)
		}
	}
	need := s.charge[resources.GPU]
	var scores []nodeScore
	for id, list := range onNode {
		node, ok := s.nodeOf(id)
		if !ok {
			continue
		}
		want := min(need, node.Total[resources.GPU])
		var evictable resources.Amount
		for _, i := range list {
			evictable += s.cands[i].gpusByNode[id]
		}
		free := node.Available[resources.GPU]
		scores = append(scores, nodeScore{id: id, feasible: free+evictable >= want, deficit: max(0, want-free), evicts: evictable})
	}
	slices.SortFunc(scores, func(a, b nodeScore) int {
		if a.feasible != b.feasible {
			if a.feasible {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.deficit, b.deficit), cmp.Compare(a.id, b.id))
	})
	var out [][]int
	for _, sc := range scores[:min(len(scores), focusNodes)] {
		first := slices.Clone(onNode[sc.id])
		slices.SortStableFunc(first, func(a, b int) int {
			return cmp.Or(cmp.Compare(s.cands[a].run.Priority, s.cands[b].run.Priority), cmp.Compare(s.cands[b].gpus, s.cands[a].gpus))
		})
		order := first
		for _, i := range sub {
			if !slices.Contains(first, i) {
				order = append(order, i)
			}
		}
		out = append(out, order)
	}
	return out
}

// removalSequence is the order in which candidates are removed: the given order,
// skipping a candidate of another queue once that queue no longer borrows (Kueue takes
// back only borrowed quota). It decides no fit.
func (s *search) removalSequence(order []int) []int {
	s.setTo(nil)
	var seq []int
	for _, i := range order {
		c := &s.cands[i]
		if c.otherQueue && !s.quota.Borrowing(c.run.Queue, s.charge) {
			continue
		}
		s.remove(i)
		seq = append(seq, i)
	}
	return seq
}

// removeThenAddBack is Kueue's heuristic: remove candidates in order until the
// preemptor fits, then, from the second-to-last removed back to the first, add each
// back when the preemptor still fits without it. The first fitting prefix is found by
// galloping then binary search (prefixes only grow, so the answer is the linear
// scan's); galloping keeps the bundles released and reserved again near the prefix's
// length rather than the whole order's.
func (s *search) removeThenAddBack(order []int) []int {
	seq := s.removalSequence(order)
	if len(seq) == 0 {
		return nil
	}
	lo, hi := 1, 0 // the first fitting prefix length is in [lo, hi]
	for n := 1; ; n = min(2*n, len(seq)) {
		s.setTo(seq[:n])
		if s.fits() {
			hi = n
			break
		}
		if n == len(seq) {
			return nil
		}
		lo = n + 1
	}
	for lo < hi {
		mid := (lo + hi) / 2
		s.setTo(seq[:mid])
		if s.fits() {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	targets := slices.Clone(seq[:lo])
	s.setTo(targets)
	return s.addBackRedundant(targets)
}

// addBackRedundant is the "add back" half of Kueue's search: with targets removed and
// the preemptor fitting, it tries adding each one back, the last removed first but the
// very last (the one that made it fit), and keeps out only those still needed.
func (s *search) addBackRedundant(targets []int) []int {
	for k := len(targets) - 2; k >= 0; k-- {
		i := targets[k]
		s.addBack(i)
		if s.fits() {
			targets = slices.Delete(targets, k, k+1)
		} else {
			s.remove(i)
		}
	}
	return targets
}

// fits asks, cheapest first: the quota (admission's rules), the preemptor staying
// within its nominal quota when the attempt requires it, the cohort rule that only
// borrowed quota is taken back, that the cluster holds the resources in total at all,
// then placement.Schedule on the snapshot with the removed victims' bundles released.
func (s *search) fits() bool {
	p := s.in.Preemptor
	if s.quota.Reason(p.Queue, s.charge) != "" {
		return false
	}
	if !s.allowBorrowing && !s.quota.WithinNominal(p.Queue, s.charge) {
		return false
	}
	if !s.fairSharing && !s.reclaimsOnlyBorrowed() {
		return false
	}
	if s.freeGPU+s.freedGPU < s.charge[resources.GPU] || s.freeCPU+s.freedCPU < s.charge[resources.CPU] {
		return false
	}
	if !s.sync() {
		return false
	}
	s.checks++
	_, err := placement.Schedule(s.work, p.Request)
	return err == nil
}

// reclaimsOnlyBorrowed: for every other queue with victims removed, the queue still
// borrowed before the last of them went (some order of removal takes only borrowed
// quota).
func (s *search) reclaimsOnlyBorrowed() bool {
	if !s.anyOtherQueue {
		return true
	}
	byQueue := map[string][]int{}
	for i := range s.cands {
		if s.cands[i].released && s.cands[i].otherQueue {
			byQueue[s.cands[i].run.Queue] = append(byQueue[s.cands[i].run.Queue], i)
		}
	}
	for _, queue := range slices.Sorted(maps.Keys(byQueue)) {
		ok := false
		for _, i := range byQueue[queue] {
			s.quota.Charge(queue, s.cands[i].charge)
			ok = s.quota.Borrowing(queue, s.charge)
			s.quota.Release(queue, s.cands[i].charge)
			if ok {
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// setTo makes exactly set removed.
func (s *search) setTo(set []int) {
	s.stamp++
	for _, i := range set {
		s.mark[i] = s.stamp
	}
	for i := range s.cands {
		if s.cands[i].released && s.mark[i] != s.stamp {
			s.addBack(i)
		}
	}
	for _, i := range set {
		if !s.cands[i].released {
			s.remove(i)
		}
	}
}

// remove evicts candidate i from the set being tried: its charge goes back to the quota
// view now, its bundles at the next sync.
func (s *search) remove(i int) {
	c := &s.cands[i]
	c.released = true
	s.quota.Release(c.run.Queue, c.charge)
	s.freedGPU += c.charge[resources.GPU]
	s.freedCPU += c.charge[resources.CPU]
	s.pending = append(s.pending, i)
}

func (s *search) addBack(i int) {
	c := &s.cands[i]
	c.released = false
	s.quota.Charge(c.run.Queue, c.charge)
	s.freedGPU -= c.charge[resources.GPU]
	s.freedCPU -= c.charge[resources.CPU]
	s.pending = append(s.pending, i)
}

// setKey ranks victim sets: lower highest priority, then fewer GPUs, then fewer
// victims, then the more recently admitted (admission times compared newest first),
// then ids.
type setKey struct {
	maxPriority int64
	gpus        resources.Amount
	count       int
	admitted    []int64 // descending
	ids         []string
}

func (s *search) keyOf(set []int) setKey {
	k := setKey{count: len(set)}
	for n, i := range set {
		c := s.cands[i]
		if n == 0 || c.run.Priority > k.maxPriority {
			k.maxPriority = c.run.Priority
		}
		k.gpus += c.gpus
		k.admitted = append(k.admitted, c.run.AdmittedAt)
		k.ids = append(k.ids, c.run.ID)
	}
	slices.SortFunc(k.admitted, func(a, b int64) int { return cmp.Compare(b, a) })
	slices.Sort(k.ids)
	return k
}

func (k setKey) compare(o setKey) int {
	if c := cmp.Or(cmp.Compare(k.maxPriority, o.maxPriority), cmp.Compare(k.gpus, o.gpus), cmp.Compare(k.count, o.count)); c != 0 {
		return c
	}
	for i := range k.admitted {
		if c := cmp.Compare(o.admitted[i], k.admitted[i]); c != 0 {
			return c // newer first
		}
	}
	return slices.Compare(k.ids, o.ids)
}

func (k setKey) less(o setKey) bool { return k.compare(o) < 0 }
