package gcs

import (
	"strings"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Admission of work outside placement groups. Work inside a group's bundles is covered
// by the group's charge; an actor outside groups, or a task lease outside groups, is a
// one-bundle workload (not a gang) charged to the queue its job's namespace maps to (or
// the default queue) before it may lease a worker, and the charge is returned when the
// lease ends (the actor dies or restarts, the SDK returns the worker or its job ends).
// Leases are admitted by quota alone (Decide with leaseCapacity): whether a node has room
// is the lease scheduler's question, asked after admission, and a lease admitted while
// no node has room holds its charge while it waits (Kueue's quota reservation). Leases
// are decided on their own, not in the same decision as the pending groups.

// leaseWork is one lease asking to be charged.
type leaseWork struct {
	// id keys the charge in the ledger: actorLeaseID or taskLeaseID.
	id        string
	namespace string
	resources resources.Set
	// arrival orders leases of one queue (e.g. the actor's start time in ms).
	arrival int64
	// queue, for restoreLeases: the queue it was charged to before the restart.
	queue string
}

// leaseDecision is admitLeases' answer.
type leaseDecision struct {
	// enabled: queues are on; the admitted leases are charged.
	enabled bool
	// admitted: the ids charged (now or before), with their queue.
	admitted map[string]string
	// waiting: why the others wait, and the queue each waits in.
	waiting map[string]leaseWait
}

type leaseWait struct {
	reason pending.Reason
	queue  string
}

// Ledger ids of lease charges; group ids have neither prefix.
const (
	actorLeasePrefix = "actor/"
	taskLeasePrefix  = "task/"
)

func actorLeaseID(actorID string) string { return actorLeasePrefix + actorID }

func taskLeaseID(jobID, chargeID string) string { return taskLeasePrefix + jobID + "/" + chargeID }

// leaseCapacity is admission's capacity oracle for leases: every lease fits, for node
// room is decided after admission by the lease scheduler (placement.ChooseNodes).
type leaseCapacity struct{}

var _ admission.Capacity = leaseCapacity{}

func (leaseCapacity) Fit([]resources.Set) pending.Reason        { return "" }
func (leaseCapacity) EarliestFit([]resources.Set) (int64, bool) { return 0, true }
func (leaseCapacity) FitsAt([]resources.Set, int64) bool        { return true }
func (leaseCapacity) Take(admission.Workload)                   {}
func (leaseCapacity) Release(admission.Workload)                {}

// leaseWorkload is a lease as admission's workload in its namespace's queue, at the
// queue's default priority.
func leaseWorkload(cfg *queues.Config, l leaseWork) admission.Workload {
	queue := cfg.QueueForNamespace(l.namespace)
	priority, _ := cfg.Priority("", queue) // a queue's own default class always resolves
	return admission.Workload{ID: l.id, Queue: queue, Priority: priority, Arrival: l.arrival, Bundles: []resources.Set{l.resources}}
}

// admitLeases implements leaseAdmitter.
func (m *pgManager) admitLeases(leases []leaseWork) leaseDecision {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.admission == nil {
		return leaseDecision{}
	}
	d := leaseDecision{enabled: true, admitted: map[string]string{}, waiting: map[string]leaseWait{}}
	cfg := m.admission.config
	var work []admission.Workload
	for _, l := range leases {
		w := leaseWorkload(cfg, l)
		if queue, held := m.admission.ledger.Queue(l.id); held {
			d.admitted[l.id] = queue
			continue
		}
		work = append(work, w)
	}
	if len(work) == 0 {
		return d
	}
	decision := admission.Decide(admission.Input{Config: cfg, Usage: m.admission.ledger.Usage(), Pending: work, Capacity: leaseCapacity{}})
	for _, w := range decision.Admitted {
		charge, err := w.Charge()
		if err == nil {
			err = m.admission.ledger.Admit(w.ID, w.Queue, charge)
		}
		if err != nil {
			m.log.Error().Err(err).Str("lease", w.ID).Msg("cannot charge an admitted lease")
			d.waiting[w.ID] = leaseWait{pending.Internal, w.Queue}
			continue
		}
		d.admitted[w.ID] = w.Queue
	}
	for _, w := range work {
		if reason, ok := decision.Waiting[w.ID]; ok {
			d.waiting[w.ID] = leaseWait{reason, w.Queue}
		}
	}
	return d
}

// returnLeases implements leaseAdmitter.
func (m *pgManager) returnLeases(ids []string) {
	if len(ids) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.returnChargeLocked(id)
	}
	if m.admission != nil && m.admission.dirty {
		m.kick() // freed quota may admit a waiting group
	}
}

// restoreLeases implements leaseAdmitter.
func (m *pgManager) restoreLeases(leases []leaseWork) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.admission == nil {
		return
	}
	for _, l := range leases {
		w := leaseWorkload(m.admission.config, l)
		if l.queue != "" {
			w.Queue = l.queue
		}
		if m.admission.ledger.Holds(w.ID) {
			continue
		}
		if err := m.admission.ledger.Admit(w.ID, w.Queue, l.resources); err != nil {
			m.log.Error().Err(err).Str("lease", w.ID).Msg("cannot charge a lease that ran before the restart")
		}
	}
}

// returnJobLeasesLocked returns the charges of a finished job's task leases (its
// actors' are returned as they die).
func (m *pgManager) returnJobLeasesLocked(jobID string) {
	if m.admission == nil {
		return
	}
	prefix := taskLeaseID(jobID, "")
	returned := false
	for _, id := range m.admission.ledger.Charged() {
		if strings.HasPrefix(id, prefix) {
			m.returnChargeLocked(id)
			returned = true
		}
	}
	if returned {
		m.kick() // freed quota may admit a waiting group
	}
}
