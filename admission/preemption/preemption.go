package preemption

import (
	"errors"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Reason is why a victim is evicted: Kueue's eviction reasons, verbatim.
type Reason string

const (
	// InClusterQueue: the victim is in the preemptor's queue (withinClusterQueue).
	InClusterQueue Reason = "InClusterQueue"
	// InCohortReclamation: the victim's queue borrows quota the preemptor's queue lends
	// and takes back (reclaimWithinCohort); the preemptor does not borrow.
	InCohortReclamation Reason = "InCohortReclamation"
	// InCohortReclaimWhileBorrowing: the victim's queue borrows, and so will the
	// preemptor's (borrowWithinCohort).
	InCohortReclaimWhileBorrowing Reason = "InCohortReclaimWhileBorrowing"
	// InCohortFairSharing: the victim's queue has a higher share than the preemptor's
	// would have, by fair sharing's preemption strategies (fairsharing.go); chosen with
	// fair sharing on and the preemptor's queue in a cohort.
	InCohortFairSharing Reason = "InCohortFairSharing"
)

// Running is one admitted, running workload: a candidate victim.
type Running struct {
	ID    string
	Queue string
	// PriorityClass is the class name ("" = the queue's default class, or none);
	// it says whether the workload may be evicted and after how long.
	PriorityClass string
	Priority      int64
	// Arrival is its creation time (ns), for LowerOrNewerEqualPriority.
	Arrival int64
	// AdmittedAt is when it started running (ns, the caller's clock).
	AdmittedAt int64
	// Bundles are its bundles; their sum is its quota charge.
	Bundles []resources.Set
	// Placements are where its bundles are (node, GPUs), as Schedule planned them.
	Placements []placement.BundlePlacement
}

// Preemptor is the pending workload that wants room.
type Preemptor struct {
	ID            string
	Queue         string
	PriorityClass string
	Priority      int64
	// Arrival is its creation time (ns).
	Arrival int64
	// PendingSince is when it started waiting (ns).
	PendingSince int64
	Request      placement.Request
	// NewCapacityIn is the autoscaler's estimate of how long new nodes that can hold the
	// workload take to join (ns); valid when NewCapacityKnown. Unknown: the autoscaler
	// cannot help (none, or no node type fits).
	NewCapacityIn    int64
	NewCapacityKnown bool
}

// Search chooses how victims are searched.
type Search int

const (
	// SearchMinimal (default): the best minimal set found (search.go).
	SearchMinimal Search = iota
	// SearchKueue: Kueue's remove-then-add-back over its candidate order, the baseline.
	SearchKueue
)

// Input is everything one decision reads; nothing of it is modified.
type Input struct {
	Config *queues.Config
	// Usage is the quota charged per queue (admission.Ledger.Usage), the running work's
	// included.
	Usage     map[string]resources.Set
	Preemptor Preemptor
	Running   []Running
	// Cluster is the GCS's view, with the running work's bundles reserved.
	Cluster *placement.Snapshot
	// Now is the caller's clock (ns).
	Now    int64
	Search Search

	// heuristicOnly leaves out the exhaustive step (tests measure the heuristics alone).
	heuristicOnly bool
}

// Outcome is what the decision says to do.
type Outcome int

const (
	// Fits: the preemptor fits its quota and the cluster now; nothing to evict.
	Fits Outcome = iota + 1
	// Preempt: evict Victims; the preemptor shows pending.PreemptionDelay meanwhile.
	Preempt
	// Wait: evict nothing now (Cause says why: the preemption delay has not passed, or
	// new nodes come sooner); ask again later.
	Wait
	// Cannot: no allowed eviction would make room (Cause says why).
	Cannot
)

func (o Outcome) String() string {
	switch o {
	case Fits:
		return "fits"
	case Preempt:
		return "preempt"
	case Wait:
		return "wait"
	case Cannot:
		return "cannot"
	}
	return "unknown"
}

// Cause says why a decision evicts nothing. The values are stable.
type Cause string

const (
	// CauseWithinDelay: the preemptor has waited less than its queue's preemptionDelay.
	CauseWithinDelay Cause = "within_preemption_delay"
	// CauseNewCapacitySooner: the autoscaler brings capacity within preemptionDelay.
	CauseNewCapacitySooner Cause = "new_capacity_sooner"
	// CauseNoCandidates: the policies, priorities, preemptible flags and minRuntimes
	// leave no running workload to evict.
	CauseNoCandidates Cause = "no_candidates"
	// CauseNotEnough: evicting every allowed candidate would still not make it fit.
	CauseNotEnough Cause = "not_enough"
	// CauseBlastRadius: every set found would evict more GPUs than the preemptor needs
	// plus its largest victim gang.
	CauseBlastRadius Cause = "blast_radius"
	// CauseInfeasible: no node of the cluster could hold the preemptor even idle, or its
	// charge overflows.
	CauseInfeasible Cause = "infeasible"
	// CauseInvalid: the input is not consistent (Decision.Err says what).
	CauseInvalid Cause = "invalid_input"
)

// Victim is one workload to evict.
type Victim struct {
	ID     string
	Reason Reason
	// GPUs is the GPUs its eviction frees.
	GPUs resources.Amount
}

// Decision is the outcome of Decide.
type Decision struct {
	Outcome Outcome
	// Victims, for Preempt: a minimal set, most recently admitted first.
	Victims []Victim
	// Pending is the preemptor's reason code meanwhile: PreemptionDelay (Preempt),
	// WaitingForNewNode (new nodes come sooner), or why it does not fit now.
	Pending pending.Reason
	// Cause says why nothing is evicted (Wait, Cannot).
	Cause Cause
	// Err is set with CauseInvalid.
	Err error
	// GPUsNeeded is the preemptor's GPUs; GPUsEvicted the victims'.
	GPUsNeeded, GPUsEvicted resources.Amount
	// Checks counts the placement.Schedule calls the decision made.
	Checks int
}

// Decide chooses victims for the preemptor, or says why not.
//
// Order: (1) does the preemptor fit as things are (then Fits), or can it never fit
// (Infeasible)? (2) Would the autoscaler's new nodes come within the queue's
// preemptionDelay (Wait, WaitingForNewNode)? Has the preemptor waited that delay (else
// Wait)? (3) Candidates: running work the queue's policies allow evicting, preemptible
// and past its minRuntime, in Kueue's order. (4) The search: with fair sharing on and
// the queue in a cohort, Kueue's fair-sharing preemption (fairsharing.go); else Kueue's
// sequence of attempts: borrowing within the cohort when borrowWithinCohort allows it;
// else reclaim from borrowers without borrowing; else the queue's own work, borrowing
// allowed.
func Decide(in Input) Decision {
	p := in.Preemptor
	charge, err := resources.SumOf(p.Request.Bundles)
	if err != nil {
		return Decision{Outcome: Cannot, Cause: CauseInfeasible, Pending: pending.Infeasible, Err: err}
	}
	d := Decision{GPUsNeeded: charge[resources.GPU]}
	quota := admission.NewQuotaView(in.Config, in.Usage)
	quotaReason := quota.Reason(p.Queue, charge)
	// Schedule only reads the snapshot: the caller's serves until victims are tried on a
	// copy (search.sync).
	_, placeErr := placement.Schedule(in.Cluster, p.Request)
	d.Checks++
	var unschedulable *placement.UnschedulableError
	switch {
	case placeErr == nil && quotaReason == "":
		d.Outcome = Fits
		return d
	case errors.As(placeErr, &unschedulable) && unschedulable.Kind == placement.Infeasible:
		d.Outcome, d.Cause, d.Pending = Cannot, CauseInfeasible, pending.Infeasible
		return d
	case placeErr != nil && unschedulable == nil:
		return invalidInput(d, placeErr)
	}
	current := quotaReason
	if current == "" {
		current = pending.NoResources
	}
	delay := preemptionOf(in.Config, p.Queue).PreemptionDelay
	if quotaReason == "" && p.NewCapacityKnown && p.NewCapacityIn <= int64(delay) {
		// Only capacity is short and new nodes bring it within the delay: evicting would
		// cost work that waiting does not.
		d.Outcome, d.Cause, d.Pending = Wait, CauseNewCapacitySooner, pending.WaitingForNewNode
		return d
	}
	if in.Now-p.PendingSince < int64(delay) {
		d.Outcome, d.Cause, d.Pending = Wait, CauseWithinDelay, current
		return d
	}
	s := newSearch(in, quota, charge)
	victims, cause := s.run()
	d.Checks += s.checks
	if cause != "" {
		d.Outcome, d.Cause, d.Pending = Cannot, cause, current
		return d
	}
	d.Outcome, d.Pending, d.Victims = Preempt, pending.PreemptionDelay, victims
	for _, v := range victims {
		d.GPUsEvicted += v.GPUs
	}
	return d
}

func invalidInput(d Decision, err error) Decision {
	d.Outcome, d.Cause, d.Pending, d.Err = Cannot, CauseInvalid, pending.Internal, err
	return d
}

// preemptionOf is the queue's preemption section, Never everywhere when absent.
func preemptionOf(config *queues.Config, queue string) queues.Preemption {
	q, ok := config.Queue(queue)
	if !ok || q.Preemption == nil {
		return queues.Preemption{}
	}
	return *q.Preemption
}
