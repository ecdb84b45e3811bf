package preemption

import (
	"fmt"
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/placement"
)

const within = `
queues:
  - name: q
    preemption: {withinClusterQueue: LowerPriority}
`

// A STRICT_PACK of 8 GPUs on two 8-GPU nodes, each half full of lower-priority gangs
// (a 4-GPU gang on one, four 1-GPU gangs on the other): the victims free one node's
// island; Kueue's order (newest first) takes the four small gangs.
func TestStrictPackEvictsOneIsland(t *testing.T) {
	c := newCluster(t, dgx("n1"), dgx("n2"))
	c.on(Running{ID: "big", Queue: "q", Priority: 100, AdmittedAt: 10}, "n1", 0, 1, 2, 3)
	for i, id := range []string{"s1", "s2", "s3", "s4"} {
		c.on(Running{ID: id, Queue: "q", Priority: 100, AdmittedAt: int64(20 + i)}, "n2", i)
	}
	config := mustLoad(t, within)
	p := Preemptor{ID: "p", Queue: "q", Priority: 1000, Request: strictPack(8)}
	d := Decide(c.input(config, p, 100))
	if d.Outcome != Preempt || !slices.Equal(victimIDs(d), []string{"big"}) || d.Victims[0].Reason != InClusterQueue || d.Pending != pending.PreemptionDelay {
		t.Fatalf("decision %+v", d)
	}
	in := c.input(config, p, 100)
	in.Search = SearchKueue
	k := Decide(in)
	if k.Outcome != Preempt || len(k.Victims) != 4 {
		t.Fatalf("kueue %+v", k)
	}
	// Each set frees one node: the victims' nodes.
	for _, dec := range []Decision{d, k} {
		nodes := map[placement.NodeID]bool{}
		for _, v := range dec.Victims {
			for _, r := range c.running {
				if r.ID == v.ID {
					for _, pl := range r.Placements {
						nodes[pl.NodeID] = true
					}
				}
			}
		}
		if len(nodes) != 1 {
			t.Fatalf("victims %v span %d nodes", victimIDs(dec), len(nodes))
		}
	}
}

func TestPolicies(t *testing.T) {
	base := func() *cluster {
		c := newCluster(t, dgx("n1"))
		c.on(Running{ID: "low", Queue: "q", PriorityClass: "development", Priority: 100, Arrival: 5, AdmittedAt: 0}, "n1", 0, 1, 2, 3)
		c.on(Running{ID: "eq-new", Queue: "q", PriorityClass: "training", Priority: 500, Arrival: 50, AdmittedAt: 0}, "n1", 4, 5)
		c.on(Running{ID: "eq-old", Queue: "q", PriorityClass: "training", Priority: 500, Arrival: 1, AdmittedAt: 0}, "n1", 6, 7)
		return c
	}
	p := Preemptor{ID: "p", Queue: "q", PriorityClass: "training", Priority: 500, Arrival: 10}
	cases := []struct {
		name, config string
		gpus         int
		outcome      Outcome
		cause        Cause
		victims      []string
	}{
		{"Never is the default", "queues: [{name: q}]", 4, Cannot, CauseNoCandidates, nil},
		{"LowerPriority takes the lower", within, 4, Preempt, "", []string{"low"}},
		{"LowerPriority never takes equal", within, 6, Cannot, CauseNotEnough, nil},
		{"newer equal priority", "queues: [{name: q, preemption: {withinClusterQueue: LowerOrNewerEqualPriority}}]", 6, Preempt, "", []string{"eq-new", "low"}},
		{"older equal stays", "queues: [{name: q, preemption: {withinClusterQueue: LowerOrNewerEqualPriority}}]", 8, Cannot, CauseNotEnough, nil},
		{"not preemptible", within + "priorityClasses: [{name: development, value: 100, preemptible: false}]", 4, Cannot, CauseNoCandidates, nil},
		{"class minRuntime not reached", within + "priorityClasses: [{name: development, value: 100, minRuntime: 2m}]", 4, Cannot, CauseNoCandidates, nil},
		{"queue minRuntime not reached", "queues: [{name: q, preemption: {withinClusterQueue: LowerPriority, minRuntime: 1h}}]", 4, Cannot, CauseNoCandidates, nil},
		{"minRuntime reached", within + "priorityClasses: [{name: development, value: 100, minRuntime: 30s}]", 4, Preempt, "", []string{"low"}},
		{"fits", within, 0, Fits, "", nil},
		{"infeasible", within, 9, Cannot, CauseInfeasible, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			p := p
			p.Request = strictPack(tc.gpus)
			if tc.gpus == 0 {
				p.Request = placement.Request{Bundles: gpuBundles(1, 0)}
				p.Request.Bundles[0]["CPU"] = 1
			}
			d := Decide(c.input(mustLoad(t, tc.config), p, int64(60*queues.Second)))
			if d.Outcome != tc.outcome || d.Cause != tc.cause || !slices.Equal(victimIDs(d), tc.victims) {
				t.Fatalf("got %v %q %v (%v); want %v %q %v", d.Outcome, d.Cause, victimIDs(d), d.Err, tc.outcome, tc.cause, tc.victims)
			}
		})
	}
}

const cohort = `
queues:
  - name: a
    cohort: ml
    resources: {GPU: {nominalQuota: 8}}
    preemption: {reclaimWithinCohort: %s}
  - name: b
    cohort: ml
    resources: {GPU: {nominalQuota: 8}}
`

func TestReclaimAndBorrowWithinCohort(t *testing.T) {
	build := func() *cluster {
		c := newCluster(t, dgx("n1"), dgx("n2"))
		// b borrows a's quota: 12 GPUs used of its 8.
		c.on(Running{ID: "b-old", Queue: "b", Priority: 1000, AdmittedAt: 1}, "n1", 0, 1, 2, 3, 4, 5, 6, 7)
		c.on(Running{ID: "b-new", Queue: "b", Priority: 1000, AdmittedAt: 2}, "n2", 0, 1, 2, 3)
		return c
	}
	p := Preemptor{ID: "p", Queue: "a", Priority: 100, Request: placement.Request{Bundles: gpuBundles(8, 1)}}
	for _, tc := range []struct {
		policy  string
		outcome Outcome
		victims []string
	}{{"Any", Preempt, []string{"b-new"}}, {"LowerPriority", Cannot, nil}, {"Never", Cannot, nil}} {
		c := build()
		d := Decide(c.input(mustLoad(t, sprintf(cohort, tc.policy)), p, 10))
		if d.Outcome != tc.outcome || !slices.Equal(victimIDs(d), tc.victims) {
			t.Fatalf("%s: %+v", tc.policy, d)
		}
		if d.Outcome == Preempt && d.Victims[0].Reason != InCohortReclamation {
			t.Fatalf("%s: reason %s", tc.policy, d.Victims[0].Reason)
		}
	}

	// borrowWithinCohort: a has 4 of its 8 and asks for 8 on one node, so it borrows;
	// b borrows 4. Only b's work at or under the threshold may go.
	borrow := `
queues:
  - name: a
    cohort: ml
    resources: {GPU: {nominalQuota: 8}}
    preemption: {borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: %d}}
  - name: b
    cohort: ml
    resources: {GPU: {nominalQuota: 8}}
`
	c := newCluster(t, dgx("n1"), dgx("n2"))
	c.on(Running{ID: "a-1", Queue: "a", Priority: 500, AdmittedAt: 1}, "n1", 0, 1, 2, 3)
	c.on(Running{ID: "b-low", Queue: "b", Priority: 100, AdmittedAt: 1}, "n1", 4, 5, 6, 7)
	c.on(Running{ID: "b-mid", Queue: "b", Priority: 300, AdmittedAt: 2}, "n2", 0, 1, 2, 3, 4, 5, 6, 7)
	p = Preemptor{ID: "p", Queue: "a", Priority: 1000, Request: strictPack(8)}
	if d := Decide(c.input(mustLoad(t, sprintf(borrow, 200)), p, 10)); d.Outcome != Cannot || d.Cause != CauseNotEnough {
		t.Fatalf("threshold 200: %+v", d)
	}
	d := Decide(c.input(mustLoad(t, sprintf(borrow, 300)), p, 10))
	if d.Outcome != Preempt || !slices.Equal(victimIDs(d), []string{"b-mid"}) || d.Victims[0].Reason != InCohortReclaimWhileBorrowing {
		t.Fatalf("threshold 300: %+v", d)
	}
}

func TestWaitOrPreempt(t *testing.T) {
	config := mustLoad(t, "queues: [{name: q, preemption: {withinClusterQueue: LowerPriority, preemptionDelay: 2m}}]")
	c := newCluster(t, dgx("n1"))
	c.on(Running{ID: "low", Queue: "q", Priority: 100}, "n1", 0, 1, 2, 3, 4, 5, 6, 7)
	p := Preemptor{ID: "p", Queue: "q", Priority: 1000, Request: strictPack(8), PendingSince: 0}
	minute := int64(queues.Minute)
	for _, tc := range []struct {
		name    string
		now     int64
		newIn   int64
		known   bool
		outcome Outcome
		reason  pending.Reason
		cause   Cause
	}{
		{"new nodes sooner", 0, minute, true, Wait, pending.WaitingForNewNode, CauseNewCapacitySooner},
		{"new nodes at the delay", 3 * minute, 2 * minute, true, Wait, pending.WaitingForNewNode, CauseNewCapacitySooner},
		{"within the delay", minute, 0, false, Wait, pending.NoResources, CauseWithinDelay},
		{"new nodes later, delay not over", minute, 5 * minute, true, Wait, pending.NoResources, CauseWithinDelay},
		{"new nodes later, delay over", 2 * minute, 5 * minute, true, Preempt, pending.PreemptionDelay, ""},
		{"no autoscaler, delay over", 3 * minute, 0, false, Preempt, pending.PreemptionDelay, ""},
	} {
		p := p
		p.NewCapacityIn, p.NewCapacityKnown = tc.newIn, tc.known
		d := Decide(c.input(config, p, tc.now))
		if d.Outcome != tc.outcome || d.Pending != tc.reason || d.Cause != tc.cause {
			t.Errorf("%s: got %v %s %q", tc.name, d.Outcome, d.Pending, d.Cause)
		}
	}
}

var sprintf = fmt.Sprintf

// The queue is 2 GPUs over its quota of 8 and the preemptor needs 2 more, so 4 GPUs of
// the queue's work must go. The best set, four 1-GPU gangs of the lowest priority,
// evicts 4 GPUs for 2 needed, past the blast radius (2 + its largest gang, 1); the next
// best, one 4-GPU gang of a higher priority, is within it (2 + 4). Kueue's search stops
// at the first.
func TestBlastRadiusFallsBackToNextBest(t *testing.T) {
	c := newCluster(t, dgx("n1"), dgx("n2"))
	for i, id := range []string{"s1", "s2", "s3", "s4"} {
		c.on(Running{ID: id, Queue: "q", Priority: 100, AdmittedAt: int64(10 + i)}, "n1", i)
	}
	c.on(Running{ID: "big", Queue: "q", Priority: 500, AdmittedAt: 1}, "n1", 4, 5, 6, 7)
	c.on(Running{ID: "vip", Queue: "q", Priority: 2000, AdmittedAt: 1}, "n2", 0, 1)
	config := mustLoad(t, "queues: [{name: q, resources: {GPU: {nominalQuota: 8}}, preemption: {withinClusterQueue: LowerPriority}}]")
	p := Preemptor{ID: "p", Queue: "q", Priority: 1000, Request: strictPack(2)}
	d := Decide(c.input(config, p, 100))
	if d.Outcome != Preempt || !slices.Equal(victimIDs(d), []string{"big"}) || d.GPUsEvicted != 4*gpu {
		t.Fatalf("decision %v %q %v", d.Outcome, d.Cause, victimIDs(d))
	}
	in := c.input(config, p, 100)
	in.Search = SearchKueue
	if k := Decide(in); k.Outcome != Cannot || k.Cause != CauseBlastRadius {
		t.Fatalf("kueue %v %q %v", k.Outcome, k.Cause, victimIDs(k))
	}
	in.Search, in.heuristicOnly = SearchMinimal, true
	if h := Decide(in); h.Outcome != Preempt || !slices.Equal(victimIDs(h), []string{"big"}) {
		t.Fatalf("heuristics alone %v %q %v", h.Outcome, h.Cause, victimIDs(h))
	}
}
