package admission_test

import (
	"testing"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/resources"
)

func TestStatus(t *testing.T) {
	config := mustLoad(t, `
queues:
  - {name: a, cohort: c, fairSharing: {weight: 2}, resources: {GPU: {nominalQuota: 4}}}
  - {name: b, cohort: c, resources: {GPU: {nominalQuota: 8, lendingLimit: 6}}}
  - {name: d, cohort: c, resources: {GPU: {nominalQuota: 2}}}
`)
	usage := map[string]resources.Set{"a": gpus(8), "b": {resources.GPU: 0, resources.CPU: 3 * gpu}}
	status := admission.Status(config, usage, []admission.Workload{wl("x", "a", 0, 1, gang(1, 1)), wl("y", queues.DefaultQueueName, 0, 1, gang(1, 1))})
	byName := map[string]admission.QueueStatus{}
	for _, st := range status {
		byName[st.Queue] = st
	}
	a, b, d := byName["a"].Resources[resources.GPU], byName["b"].Resources[resources.GPU], byName["d"].Resources[resources.GPU]
	if a.Usage != 8*gpu || a.Borrowed != 4*gpu || a.Lent != 0 || byName["a"].Pending != 1 {
		t.Fatalf("a: %+v pending %d", a, byName["a"].Pending)
	}
	// a borrows 4; b can lend 6 and d 2: b lends 3, d lends 1.
	if b.Lent != 3*gpu || d.Lent != 1*gpu {
		t.Fatalf("lent: b %s, d %s; want 3 and 1", b.Lent, d.Lent)
	}
	// a's share: 4 borrowed over the 12 the cohort lends (4 + 6 + 2), weight 2.
	if got, want := byName["a"].DominantShare, 4.0/12/2; got != want {
		t.Fatalf("a's dominant share %v, want %v", got, want)
	}
	if cpu := byName["b"].Resources[resources.CPU]; cpu.Limited || cpu.Usage != 3*gpu {
		t.Fatalf("b's CPU (not listed): %+v", cpu)
	}
	if byName[queues.DefaultQueueName].Pending != 1 || len(status) != 4 {
		t.Fatalf("status %+v", status)
	}
}
