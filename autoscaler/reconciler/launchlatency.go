package reconciler

import (
	"maps"
	"slices"
	"time"
)

// Launch latency and the new-capacity estimates the GCS's preemption reads: a pending
// group that new nodes will hold within its queue's preemptionDelay waits for them
// instead of evicting running work.

// latencySamples is how many launches of a type its latency is measured over.
const latencySamples = 10

// launchLatencies keeps, per node type, the last latencySamples REQUESTED→RAY_RUNNING
// durations, oldest first.
type launchLatencies map[string][]time.Duration

// record adds one measured launch of the type, dropping the oldest beyond the window.
func (l launchLatencies) record(nodeType string, d time.Duration) {
	samples := append(l[nodeType], d)
	if len(samples) > latencySamples {
		samples = samples[len(samples)-latencySamples:]
	}
	l[nodeType] = samples
}

// p90 is the 90th percentile of the samples by the nearest-rank method (the smallest
// sample with at least 90 % of the samples at or below it): of 10 launches the 9th
// fastest, of fewer the slowest but one only from 10 up. 0 without samples.
func p90(samples []time.Duration) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	rank := (len(sorted)*9 + 9) / 10 // ceil(0.9 n)
	return sorted[rank-1]
}

// latency is the type's expected launch latency: p90 of its measured launches, else
// expected (its expected_launch_s). ok is false when neither is known.
func (l launchLatencies) latency(nodeType string, expected map[string]time.Duration) (time.Duration, bool) {
	if samples := l[nodeType]; len(samples) > 0 {
		return p90(samples), true
	}
	d, ok := expected[nodeType]
	return d, ok && d > 0
}

// CapacityEstimate is when the nodes launched for one pending placement group are
// expected to run.
type CapacityEstimate struct {
	GroupID string
	// NodeType is the type whose node is expected last.
	NodeType string
	// ExpectedAt is the launch's request time plus the type's latency.
	ExpectedAt time.Time
	Latency    time.Duration
}

// launchingFor is one instance still launching for gangs, as estimates reads it.
type launchingFor struct {
	NodeType    string
	RequestedAt time.Time
	Gangs       []string
}

// estimates says, per gang with nodes launching for it, when the last of them is
// expected to run. A gang with any node of a type whose latency is unknown gets no
// estimate: the GCS then decides as without an autoscaler. Sorted by group id.
func estimates(launching []launchingFor, l launchLatencies, expected map[string]time.Duration) []CapacityEstimate {
	byGang := map[string]CapacityEstimate{}
	unknown := map[string]bool{}
	for _, inst := range launching {
		latency, ok := l.latency(inst.NodeType, expected)
		for _, gang := range inst.Gangs {
			if !ok {
				unknown[gang] = true
				continue
			}
			at := inst.RequestedAt.Add(latency)
			if e, seen := byGang[gang]; !seen || at.After(e.ExpectedAt) {
				byGang[gang] = CapacityEstimate{GroupID: gang, NodeType: inst.NodeType, ExpectedAt: at, Latency: latency}
			}
		}
	}
	var out []CapacityEstimate
	for _, gang := range slices.Sorted(maps.Keys(byGang)) {
		if !unknown[gang] {
			out = append(out, byGang[gang])
		}
	}
	return out
}
