package admission_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/admissiontest"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
)

// sim drives Decide with a simulated clock (one tick per cycle): work ends at its
// declared end, arrivals join the pending list, admitted work is charged and started.
type sim struct {
	t        *testing.T
	config   *queues.Config
	cluster  *admissiontest.Cluster
	ledger   *admission.Ledger
	pending  []admission.Workload
	running  map[string]admission.Workload
	started  map[string]int64
	reasons  map[string]pending.Reason // first reason each workload waited with
	baseline bool
	last     admission.Decision
}

func newSim(t *testing.T, config *queues.Config, nodes, gpusPerNode int) *sim {
	return &sim{t: t, config: config, cluster: admissiontest.NewCluster(nodes, gpusPerNode), ledger: admission.NewLedger(),
		running: map[string]admission.Workload{}, started: map[string]int64{}, reasons: map[string]pending.Reason{}}
}

func (s *sim) submit(ws ...admission.Workload) { s.pending = append(s.pending, ws...) }

// cycle runs one tick at now.
func (s *sim) cycle(now int64) {
	s.cluster.Advance(now)
	for _, id := range s.cluster.Due() {
		s.cluster.Finish(id)
		s.ledger.Remove(id)
		delete(s.running, id)
	}
	d := admission.Decide(admission.Input{Config: s.config, Usage: s.ledger.Usage(), Pending: s.pending, Capacity: s.cluster, WithoutReservations: s.baseline})
	for _, w := range d.Admitted {
		if err := s.ledger.Admit(w.ID, w.Queue, mustCharge(s.t, w)); err != nil {
			s.t.Fatal(err)
		}
		s.running[w.ID] = w
		s.started[w.ID] = now
	}
	s.pending = slices.DeleteFunc(s.pending, func(w admission.Workload) bool { _, ok := s.running[w.ID]; return ok })
	for id, r := range d.Waiting {
		if _, seen := s.reasons[id]; !seen {
			s.reasons[id] = r
		}
	}
	checkInvariants(s.t, s.config, s.ledger.Usage())
	s.last = d
}

func (s *sim) usedGPUs(queue string) float64 { return s.ledger.Usage()[queue][resources.GPU].Float() }

// The issue's cohort scenario: 3 nodes x 8 GPUs and the issue's config. research's
// 4 x {GPU: 1} groups at `training` run up to 16 GPUs (8 borrowed); the fifth waits with
// QuotaExceeded; prod's groups are admitted as research's finish, up to 16.
func TestSimCohortScenario(t *testing.T) {
	config := mustLoad(t, issueExample)
	training, _ := config.Priority("training", "research")
	s := newSim(t, config, 3, 8)
	group := func(id, queue string, at, runtime int64) admission.Workload {
		return admission.Workload{ID: id, Queue: queue, Priority: training, Arrival: at, Bundles: gang(4, 1), MaxRuntime: runtime}
	}
	s.submit(group("r1", "research", 0, 100), group("r2", "research", 0, 110), group("r3", "research", 0, 120))
	s.cycle(0)
	if got := s.usedGPUs("research"); got != 12 {
		t.Fatalf("three groups: research uses %v GPUs, want 12 (4 borrowed)", got)
	}
	s.submit(group("r4", "research", 1, 130))
	s.cycle(1)
	if got := s.usedGPUs("research"); got != 16 {
		t.Fatalf("four groups: research uses %v GPUs, want 16 (8 borrowed)", got)
	}
	s.submit(group("r5", "research", 2, 140))
	s.cycle(2)
	if s.last.Waiting["r5"] != pending.QuotaExceeded || s.usedGPUs("research") != 16 {
		t.Fatalf("the fifth group: reason %q, research at %v GPUs; want QuotaExceeded at 16", s.last.Waiting["r5"], s.usedGPUs("research"))
	}
	for i := range 6 {
		s.submit(group(fmt.Sprintf("p%d", i), "prod", 3, 1000))
	}
	peak := 0.0
	for now := int64(3); now <= 300; now++ {
		s.cycle(now)
		peak = max(peak, s.usedGPUs("prod"))
		if s.usedGPUs("prod") > 16 || s.usedGPUs("research") > 16 {
			t.Fatalf("t=%d: prod %v, research %v GPUs: above nominal + borrowing limit", now, s.usedGPUs("prod"), s.usedGPUs("research"))
		}
	}
	if peak != 16 {
		t.Fatalf("prod peaked at %v GPUs, want 16 once research's groups finished", peak)
	}
	if s.reasons["p2"] != pending.WaitingForReclaim {
		t.Fatalf("prod's third group first waited with %q, want WaitingForReclaim (its nominal quota lent to research)", s.reasons["p2"])
	}
}

func jain(x []float64) float64 {
	var sum, squares float64
	for _, v := range x {
		sum += v
		squares += v * v
	}
	return sum * sum / (float64(len(x)) * squares)
}

// fairShareRun floods a, b, c (nominal 0) with 10-tick 1-GPU groups in a cohort whose
// `pool` holds all 24 GPUs, and returns each queue's mean GPU usage over the second half.
func fairShareRun(t *testing.T, weightA int) []float64 {
	config := mustLoad(t, fmt.Sprintf(`
fairSharing: {enable: true}
queues:
  - {name: pool, cohort: c, resources: {GPU: {nominalQuota: 24}}}
  - {name: a, cohort: c, fairSharing: {weight: %d}, resources: {GPU: {nominalQuota: 0}}}
  - {name: b, cohort: c, resources: {GPU: {nominalQuota: 0}}}
  - {name: c, cohort: c, resources: {GPU: {nominalQuota: 0}}}
`, weightA))
	s := newSim(t, config, 3, 8)
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c"}
	const ticks = 400
	sums := make([]float64, 3)
	next := 0
	for now := int64(0); now < ticks; now++ {
		backlog := map[string]int{}
		for _, w := range s.pending {
			backlog[w.Queue]++
		}
		for _, q := range names {
			for backlog[q] < 20 {
				next++
				// Arrival order is shuffled across queues so no queue wins ties by name.
				s.submit(admission.Workload{ID: fmt.Sprintf("%s%d", q, next), Queue: q, Arrival: now*1000 + int64(rng.IntN(1000)), Bundles: gang(1, 1), MaxRuntime: 10})
				backlog[q]++
			}
		}
		s.cycle(now)
		if now >= ticks/2 {
			for i, q := range names {
				sums[i] += s.usedGPUs(q)
			}
		}
	}
	for i := range sums {
		sums[i] /= ticks / 2
	}
	return sums
}

func TestSimFairShare(t *testing.T) {
	equal := fairShareRun(t, 1)
	if j := jain(equal); j < 0.95 || equal[0]+equal[1]+equal[2] < 23 {
		t.Fatalf("equal weights: mean GPUs %v, Jain %.3f; want >= 0.95 with the 24 GPUs in use", equal, j)
	}
	weighted := fairShareRun(t, 2)
	if ratio := weighted[0] / weighted[1]; ratio < 1.7 || ratio > 2.3 {
		t.Fatalf("a's weight 2: mean GPUs %v, a/b = %.2f; want in [1.7, 2.3]", weighted, ratio)
	}
	t.Logf("equal weights %v (Jain %.3f); a weighted 2: %v (a/b %.2f)", equal, jain(equal), weighted, weighted[0]/weighted[1])
}

// gangUnderFlood runs a 64-GPU gang (training-high) under a flood of 1-GPU development
// jobs with declared runtimes on 8 x 8 GPUs. It returns when the gang became the
// reservation holder, the latest declared end of the work running then, and its start
// (-1 if it never started).
func gangUnderFlood(t *testing.T, baseline bool) (heldAt, latestEnd, start int64) {
	// Quota does not bind here (the issue: the holder is the top gang that fits its
	// quota but not free capacity); capacity does.
	config := mustLoad(t, "queues: [{name: team}]")
	s := newSim(t, config, 8, 8)
	s.baseline = baseline
	rng := rand.New(rand.NewPCG(3, 4))
	high, _ := config.Priority("training-high", "team")
	low, _ := config.Priority("development", "team")
	heldAt, latestEnd, start = -1, -1, -1
	next := 0
	for now := int64(0); now < 600; now++ {
		for len(s.pending) < 50 {
			next++
			s.submit(admission.Workload{ID: fmt.Sprintf("small%d", next), Queue: "team", Priority: low, Arrival: int64(next), Bundles: gang(1, 1), MaxRuntime: 1 + rng.Int64N(40)})
		}
		if now == 30 {
			s.submit(admission.Workload{ID: "gang64", Queue: "team", Priority: high, Arrival: int64(next), Bundles: gang(8, 8), MaxRuntime: 100})
			next++
		}
		// The latest end of the work running when the gang becomes the holder: read
		// before the cycle in which it does.
		end, _ := s.cluster.LatestEnd()
		s.cycle(now)
		if heldAt < 0 && slices.ContainsFunc(s.last.Reservations, func(r admission.Reservation) bool { return r.Workload == "gang64" }) {
			heldAt, latestEnd = now, end
		}
		if at, ok := s.started["gang64"]; ok {
			return heldAt, latestEnd, at
		}
	}
	return heldAt, latestEnd, start
}

func TestSimGangNotStarvedByFlood(t *testing.T) {
	heldAt, latestEnd, start := gangUnderFlood(t, false)
	if heldAt < 0 || start < 0 {
		t.Fatalf("with reservations: the gang held from %d, started at %d; want it held and started", heldAt, start)
	}
	if start > latestEnd+1 {
		t.Fatalf("the gang became the holder at %d with work running until %d, but started at %d (> end + 1 tick)", heldAt, latestEnd, start)
	}
	_, _, baselineStart := gangUnderFlood(t, true)
	if baselineStart >= 0 {
		t.Fatalf("the BestEffortFIFO baseline started the gang at %d: the flood does not starve it, so this test shows nothing", baselineStart)
	}
	t.Logf("gang held at t=%d, running work's latest end %d, started at t=%d; baseline: starved for 600 ticks", heldAt, latestEnd, start)
}
