package admission

import (
	"fmt"
	"maps"
	"slices"

	"github.com/raygo-dev/raygo/internal/resources"
)

// Ledger is the quota charged to each queue by admitted work: a workload's charge is
// added at admission and returned at removal, so usage is always the sum over admitted
// work. Not safe for concurrent use; the GCS loop owns it.
type Ledger struct {
	charges map[string]charge
	usage   map[string]resources.Set
}

type charge struct {
	queue  string
	amount resources.Set
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{charges: map[string]charge{}, usage: map[string]resources.Set{}}
}

// Admit charges amount to queue for workload id. Charging an id twice is an error.
func (l *Ledger) Admit(id, queue string, amount resources.Set) error {
	if _, dup := l.charges[id]; dup {
		return fmt.Errorf("workload %q is already charged to queue %q", id, l.charges[id].queue)
	}
	l.charges[id] = charge{queue, amount.Clone()}
	l.usage[queue] = l.usage[queue].Add(amount)
	return nil
}

// Remove returns the charge of workload id; false if it holds none.
func (l *Ledger) Remove(id string) bool {
	c, ok := l.charges[id]
	if !ok {
		return false
	}
	delete(l.charges, id)
	left, err := l.usage[c.queue].Subtract(c.amount)
	if err != nil { // cannot happen: the usage includes this charge
		panic(fmt.Sprintf("ledger: queue %q usage below a charge: %v", c.queue, err))
	}
	l.usage[c.queue] = left
	return true
}

// Holds reports whether workload id holds a charge.
func (l *Ledger) Holds(id string) bool {
	_, ok := l.charges[id]
	return ok
}

// Queue returns the queue workload id is charged to; false if it holds no charge.
func (l *Ledger) Queue(id string) (string, bool) {
	c, ok := l.charges[id]
	return c.queue, ok
}

// Usage returns a copy of the usage per queue.
func (l *Ledger) Usage() map[string]resources.Set {
	out := make(map[string]resources.Set, len(l.usage))
	for q, set := range l.usage {
		out[q] = set.Clone()
	}
	return out
}

// Charged returns the ids of the charged workloads (any order).
func (l *Ledger) Charged() []string { return slices.Collect(maps.Keys(l.charges)) }
