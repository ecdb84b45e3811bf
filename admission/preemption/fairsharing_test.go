package preemption

import (
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/placement"
)

const fairCohort = `
fairSharing: {enable: %t%s}
queues:
  - name: a
    cohort: ml
    resources: {GPU: {nominalQuota: %d}}
    preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  - name: b
    cohort: ml
    resources: {GPU: {nominalQuota: %d}}
  - name: c
    cohort: ml
    resources: {GPU: {nominalQuota: %d}}
`

// The cohort lends all 16 GPUs of two nodes (nominal quotas a 2, b 4, c 10; shares are
// over 16). b uses 9 (share 5/16) and c 7 (none); a asks 4 and would borrow 2 (share
// 2/16). LessThanOrEqualToFinalShare takes b1 (b's share falls to 4/16, still above a's)
// but refuses b2 and b3 (b would fall to 0); LessThanInitialShare then takes b2 (b's
// 4/16 is above a's 2/16), and b1 is added back.
func TestFairSharingStrategies(t *testing.T) {
	build := func() *cluster {
		c := newCluster(t, dgx("n1"), dgx("n2"))
		c.on(Running{ID: "b3", Queue: "b", Priority: 100, AdmittedAt: 1}, "n1", 0, 1, 2, 3)
		c.on(Running{ID: "b2", Queue: "b", Priority: 100, AdmittedAt: 2}, "n1", 4, 5, 6, 7)
		c.on(Running{ID: "b1", Queue: "b", Priority: 100, AdmittedAt: 3}, "n2", 0)
		c.on(Running{ID: "c1", Queue: "c", Priority: 100, AdmittedAt: 1}, "n2", 1, 2, 3, 4, 5, 6, 7)
		return c
	}
	p := Preemptor{ID: "p", Queue: "a", Priority: 100, Request: placement.Request{Strategy: placement.StrategyPack, Bundles: gpuBundles(4, 1)}}
	for _, tc := range []struct {
		name, strategies string
		outcome          Outcome
		cause            Cause
		victims          []string
	}{
		{"default: both", "", Preempt, "", []string{"b2"}},
		{"LessThanOrEqualToFinalShare alone", ", preemptionStrategies: [LessThanOrEqualToFinalShare]", Cannot, CauseNotEnough, nil},
		{"LessThanInitialShare alone", ", preemptionStrategies: [LessThanInitialShare]", Preempt, "", []string{"b2"}},
		{"both, explicit", ", preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]", Preempt, "", []string{"b2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := build()
			d := Decide(c.input(mustLoad(t, sprintf(fairCohort, true, tc.strategies, 2, 4, 10)), p, 10))
			if d.Outcome != tc.outcome || d.Cause != tc.cause || !slices.Equal(victimIDs(d), tc.victims) {
				t.Fatalf("got %v %q %v (%v); want %v %q %v", d.Outcome, d.Cause, victimIDs(d), d.Err, tc.outcome, tc.cause, tc.victims)
			}
			for _, v := range d.Victims {
				if v.Reason != InCohortFairSharing {
					t.Fatalf("%s: reason %s", v.ID, v.Reason)
				}
			}
		})
	}
}

// a stays within its nominal quota (share 0); b borrows 1 GPU (share 1/16) and c 3
// (3/16). Fair sharing takes from c, the highest share; the classic order takes the
// most recently admitted of the borrowers' work, b1.
func TestFairSharingTakesFromTheHighestShare(t *testing.T) {
	build := func() *cluster {
		c := newCluster(t, dgx("n1"), dgx("n2"))
		c.on(Running{ID: "b1", Queue: "b", Priority: 100, AdmittedAt: 5}, "n1", 0, 1, 2, 3)
		c.on(Running{ID: "b2", Queue: "b", Priority: 100, AdmittedAt: 1}, "n1", 4, 5, 6)
		c.on(Running{ID: "c3", Queue: "c", Priority: 100, AdmittedAt: 1}, "n1", 7)
		c.on(Running{ID: "c1", Queue: "c", Priority: 100, AdmittedAt: 2}, "n2", 0, 1, 2, 3)
		c.on(Running{ID: "c2", Queue: "c", Priority: 100, AdmittedAt: 3}, "n2", 4, 5, 6, 7)
		return c
	}
	p := Preemptor{ID: "p", Queue: "a", Priority: 100, Request: placement.Request{Strategy: placement.StrategyPack, Bundles: gpuBundles(4, 1)}}
	for _, tc := range []struct {
		fair    bool
		victims []string
		reason  Reason
	}{{true, []string{"c2"}, InCohortFairSharing}, {false, []string{"b1"}, InCohortReclamation}} {
		c := build()
		d := Decide(c.input(mustLoad(t, sprintf(fairCohort, tc.fair, "", 4, 6, 6)), p, 10))
		if d.Outcome != Preempt || !slices.Equal(victimIDs(d), tc.victims) || d.Victims[0].Reason != tc.reason {
			t.Fatalf("fair %t: %v %q %v", tc.fair, d.Outcome, d.Cause, d.Victims)
		}
	}
}

// The preemptor's own queue has the highest share (a borrows 2 of 16, b 1): its own
// lower-priority work goes first, with InClusterQueue.
func TestFairSharingOwnQueueFirst(t *testing.T) {
	c := newCluster(t, dgx("n1"), dgx("n2"))
	c.on(Running{ID: "a1", Queue: "a", Priority: 100, AdmittedAt: 1}, "n1", 0, 1, 2, 3)
	c.on(Running{ID: "b1", Queue: "b", Priority: 100, AdmittedAt: 9}, "n1", 4, 5, 6, 7)
	c.on(Running{ID: "b2", Queue: "b", Priority: 100, AdmittedAt: 9}, "n2", 0)
	c.on(Running{ID: "c1", Queue: "c", Priority: 100, AdmittedAt: 1}, "n2", 1, 2, 3, 4, 5, 6, 7)
	p := Preemptor{ID: "p", Queue: "a", Priority: 1000, Request: placement.Request{Strategy: placement.StrategyPack, Bundles: gpuBundles(4, 1)}}
	d := Decide(c.input(mustLoad(t, sprintf(fairCohort, true, "", 2, 4, 10)), p, 10))
	if d.Outcome != Preempt || !slices.Equal(victimIDs(d), []string{"a1"}) || d.Victims[0].Reason != InClusterQueue {
		t.Fatalf("%v %q %v", d.Outcome, d.Cause, d.Victims)
	}
}
