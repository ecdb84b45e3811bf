package preemption

import (
	"cmp"
	"slices"

	"github.com/raygo-dev/raygo/admission/queues"
)

// Fair-sharing preemption, Kueue's (fairPreemptions): with fairSharing on and the
// preemptor's queue in a cohort, victims are taken queue by queue, the queue with the
// highest weighted dominant-resource share first (admission.QuotaView.Share, the share
// admission orders queues by), each queue's work in Kueue's candidate order. The
// preemptor's own queue gives its next candidate whenever it comes up; another queue's
// candidate goes when the first strategy allows it (or it is under borrowWithinCohort's
// maxPriorityThreshold), and those it refuses are tried again with the second strategy.
// Then, from the second-to-last victim back to the first, each is kept only if the
// preemptor no longer fits without it. Other queues' victims carry InCohortFairSharing.
// Without a cohort there is no share to compare and the classic search runs.

// Kueue's fair-sharing preemption strategies (fairSharing.preemptionStrategies).
const (
	// LessThanOrEqualToFinalShare: evict when the preemptor's share with its charge is
	// at most the victim's queue's share without the victim.
	lessThanOrEqualToFinalShare = "LessThanOrEqualToFinalShare"
	// LessThanInitialShare: evict when the preemptor's share with its charge is below
	// the victim's queue's share with the victim.
	lessThanInitialShare = "LessThanInitialShare"
)

// shareRule is one strategy: may a victim go, given the preemptor's share with its
// charge and its queue's share before and after the eviction?
type shareRule func(preemptorNew, victimQueueBefore, victimQueueAfter float64) bool

func ruleOf(strategy string) shareRule {
	if strategy == lessThanInitialShare {
		return func(preemptorNew, before, _ float64) bool { return preemptorNew < before }
	}
	return func(preemptorNew, _, after float64) bool { return preemptorNew <= after }
}

// strategies are the configured ones, Kueue's default when none is.
func strategies(config *queues.Config) []shareRule {
	names := config.FairSharing.PreemptionStrategies
	if len(names) == 0 {
		names = []string{lessThanOrEqualToFinalShare, lessThanInitialShare}
	}
	out := make([]shareRule, 0, len(names))
	for _, name := range names {
		out = append(out, ruleOf(name))
	}
	return out
}

func (s *search) useFairSharing() bool {
	if !s.in.Config.FairSharing.Enable {
		return false
	}
	q, ok := s.in.Config.Queue(s.in.Preemptor.Queue)
	return ok && q.Cohort != ""
}

// shareQueue is one queue's remaining candidates in the fair-sharing search.
type shareQueue struct {
	name  string
	own   bool
	cands []int
	share float64
}

// shareHeap holds the queues still offering victims; pop takes the highest share
// (ties to the lower name, so a decision replays).
type shareHeap []*shareQueue

func (h *shareHeap) pop() *shareQueue {
	best := 0
	for k, q := range *h {
		if c := cmp.Compare(q.share, (*h)[best].share); c > 0 || c == 0 && q.name < (*h)[best].name {
			best = k
		}
	}
	q := (*h)[best]
	*h = slices.Delete(*h, best, best+1)
	return q
}

// queuesOf groups candidates by queue, keeping their order, with each queue's share now.
func (s *search) queuesOf(list []int) shareHeap {
	var out shareHeap
	byName := map[string]*shareQueue{}
	for _, i := range list {
		c := &s.cands[i]
		q := byName[c.run.Queue]
		if q == nil {
			q = &shareQueue{name: c.run.Queue, own: !c.otherQueue, share: s.quota.Share(c.run.Queue, nil)}
			byName[c.run.Queue] = q
			out = append(out, q)
		}
		q.cands = append(q.cands, i)
	}
	return out
}

// runFairSharing is the fair-sharing search; the set goes through the blast radius as
// the classic one does.
func (s *search) runFairSharing() ([]Victim, Cause) {
	s.allowBorrowing, s.fairSharing = true, true
	var pool []int
	for i, c := range s.cands {
		if !c.otherQueue || c.reclaim {
			pool = append(pool, i)
		}
	}
	if len(pool) == 0 {
		return nil, CauseNoCandidates
	}
	s.useScope(pool)
	s.setTo(nil)
	p := s.in.Preemptor
	rules := strategies(s.in.Config)
	preemptorShare := s.quota.Share(p.Queue, s.charge)
	var targets, retry []int
	fits := false
	take := func(i int) bool {
		s.remove(i)
		targets = append(targets, i)
		fits = s.fits()
		return fits
	}
	heap := s.queuesOf(pool)
	for len(heap) > 0 && !fits {
		q := heap.pop()
		if q.own {
			if take(q.cands[0]) {
				break
			}
			preemptorShare = s.quota.Share(p.Queue, s.charge)
			if q.cands = q.cands[1:]; len(q.cands) > 0 {
				q.share = s.quota.Share(q.name, nil)
				heap = append(heap, q)
			}
			continue
		}
		for k, i := range q.cands {
			c := &s.cands[i]
			s.quota.Release(c.run.Queue, c.charge)
			after := s.quota.Share(q.name, nil)
			s.quota.Charge(c.run.Queue, c.charge)
			if !c.borrow && !rules[0](preemptorShare, q.share, after) {
				if !slices.Contains(retry, i) {
					retry = append(retry, i)
				}
				continue
			}
			if take(i) {
				break
			}
			// The shares changed: the next victim may come from another queue.
			if q.cands = slices.Delete(q.cands, k, k+1); len(q.cands) > 0 && s.quota.Borrowing(q.name, s.charge) {
				q.share = after
				heap = append(heap, q)
			}
			break
		}
	}
	if !fits && len(rules) > 1 {
		retry = slices.DeleteFunc(retry, func(i int) bool { return s.cands[i].released })
		heap = s.queuesOf(retry)
		for len(heap) > 0 && !fits {
			q := heap.pop()
			if !rules[1](preemptorShare, q.share, 0) {
				continue // its share only falls from here
			}
			if take(q.cands[0]) {
				break
			}
			if q.cands = q.cands[1:]; len(q.cands) > 0 && s.quota.Borrowing(q.name, s.charge) {
				q.share = s.quota.Share(q.name, nil)
				heap = append(heap, q)
			}
		}
	}
	if !fits {
		return nil, CauseNotEnough
	}
	targets = s.addBackRedundant(targets)
	if !s.withinBlastRadius(targets) {
		return nil, CauseBlastRadius
	}
	return s.victims(targets, attempt{fairSharing: true}), ""
}
