package admission

import (
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
)

// QuotaView is the quota of every queue and cohort as Decide sees it, for deciders that
// ask "what if" outside an admission cycle (preemption: does the preemptor's charge fit
// once these victims' charges are returned?). It applies Decide's own rules. Not safe
// for concurrent use.
type QuotaView struct {
	states map[string]*queueState
}

// NewQuotaView builds the view from the configuration and the usage per queue
// (Ledger.Usage); usage is not modified.
func NewQuotaView(config *queues.Config, usage map[string]resources.Set) *QuotaView {
	return &QuotaView{states: buildStates(Input{Config: config}, usage, nil)}
}

// Reason returns "" when charging queue with charge fits its quota and its cohort's
// pool, else why not (pending.QuotaExceeded, WaitingForReclaim,
// WaitingForBorrowableQuota). A queue the config lacks fits nothing.
func (v *QuotaView) Reason(queue string, charge resources.Set) pending.Reason {
	s := v.states[queue]
	if s == nil {
		return pending.QuotaExceeded
	}
	return s.quotaReason(charge)
}

// WithinNominal reports whether queue's usage plus charge stays within its nominal
// quota in every resource the queue limits (it would borrow nothing).
func (v *QuotaView) WithinNominal(queue string, charge resources.Set) bool {
	s := v.states[queue]
	if s == nil {
		return false
	}
	for name, amount := range charge {
		if quota, limited := s.quotas[name]; limited && s.usage[name]+amount > quota.Nominal {
			return false
		}
	}
	return true
}

// Borrowing reports whether queue uses more than its nominal quota of a resource that
// names is non-zero for (any resource when names is nil).
func (v *QuotaView) Borrowing(queue string, names resources.Set) bool {
	s := v.states[queue]
	if s == nil {
		return false
	}
	for name, quota := range s.quotas {
		if names != nil && names[name] == 0 {
			continue
		}
		if s.usage[name] > quota.Nominal {
			return true
		}
	}
	return false
}

// Charge adds charge to queue's usage (and its cohort's pool).
func (v *QuotaView) Charge(queue string, charge resources.Set) {
	if s := v.states[queue]; s != nil {
		s.charge(charge)
	}
}

// Release returns charge from queue's usage (and its cohort's pool); usage does not go
// below zero.
func (v *QuotaView) Release(queue string, charge resources.Set) {
	s := v.states[queue]
	if s == nil {
		return
	}
	for name, amount := range charge {
		before := s.usage[name]
		after := max(0, before-amount)
		if quota, limited := s.quotas[name]; limited && s.cohort != nil {
			s.cohort.used[name] += poolUse(after, quota) - poolUse(before, quota)
		}
		if after == 0 {
			delete(s.usage, name)
		} else {
			s.usage[name] = after
		}
	}
}

// Share is queue's weighted dominant-resource share with extra added to its usage (nil:
// as it is), the value fair sharing orders queues by (Kueue's DominantResourceShare):
// the largest, over the resources the queue limits, of its usage above nominal over
// what its cohort lends, divided by its weight. 0 when it borrows nothing or the config
// lacks it; +Inf when it borrows with weight 0 or from a cohort that lends none.
func (v *QuotaView) Share(queue string, extra resources.Set) float64 {
	s := v.states[queue]
	if s == nil {
		return 0
	}
	share := 0.0
	for name := range s.quotas {
		share = max(share, s.resourceShare(name, extra[name]))
	}
	return share
}
