package sdk

import (
	"testing"
	"time"
)

func TestLeaseRenewalsAreSentAgainSoonAfterAFailure(t *testing.T) {
	at := func(seconds float64) time.Time {
		return time.Unix(1000, 0).Add(time.Duration(seconds * float64(time.Second)))
	}
	s := func(seconds float64) time.Duration { return time.Duration(seconds * float64(time.Second)) }
	for _, tc := range []struct {
		name                string
		renewed, now        float64
		failures            int
		lease               float64
		wantWait, wantLimit float64
	}{
		{"every third of the lease, taking until it would run out", 0, 0, 0, 3, 1, 2},
		{"a third after the last renewal", 5, 5.5, 0, 3, 0.5, 2},
		{"a thread woken late renews at once", 0, 1.5, 0, 3, 0, 1.5},
		{"soon after a failure", 0, 1.4, 1, 3, 0.1, 1.5},
		{"a retry may take a third of the lease", 0, 2.5, 1, 3, 0.1, 1},
		{"the pause doubles per failure", 0, 2, 3, 3, 0.4, 1},
		{"at most a third of the lease apart", 0, 2, 9, 3, 1, 1},
		{"many failures do not overflow the pause", 0, 2, 80, 3, 1, 1},
		{"long past the lease", 0, 60, 4, 30, 0.8, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait, limit := renewalPlan(at(tc.renewed), at(tc.now), tc.failures, s(tc.lease))
			if wait != s(tc.wantWait) || limit != s(tc.wantLimit) {
				t.Fatalf("renewalPlan = (%v, %v), want (%v, %v)", wait, limit, s(tc.wantWait), s(tc.wantLimit))
			}
		})
	}
}
