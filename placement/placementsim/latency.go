package placementsim

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/raygo-dev/raygo/placement"
)

// LatencyConfig describes a decision-latency run.
type LatencyConfig struct {
	Fleet FleetConfig
	// Requests is how many placement groups to schedule.
	Requests int
	// BusyGPUFraction is the share of GPUs (0..1) the run keeps busy: before each
	// request the oldest groups are removed until the cluster is at or below it.
	BusyGPUFraction float64
	// Seed seeds the request stream.
	Seed uint64
	// LearnWorkload feeds every request's bundles to a placement.WorkloadHistogram (not
	// timed) and passes what it learned to Schedule (Request.Workload), so the decisions
	// run the fragmentation scoring stage.
	LearnWorkload bool
}

// DefaultLatencyConfig is the benchmark of `make bench`: the default fleet, 2,000
// mixed requests, about 70% of GPUs busy.
func DefaultLatencyConfig() LatencyConfig {
	return LatencyConfig{Fleet: DefaultFleetConfig(), Requests: 2000, BusyGPUFraction: 0.7, Seed: 7}
}

// LatencyResult summarizes a run.
type LatencyResult struct {
	Decisions  int
	Placed     int
	NotNow     int
	Infeasible int
	// P50, P99 and Max are of the latency of one Schedule call.
	P50, P99, Max time.Duration
	// FinalBusyGPUFraction is the share of GPUs busy at the end.
	FinalBusyGPUFraction float64
}

// P99Microseconds is P99 in microseconds, the unit of the BENCH line.
func (r LatencyResult) P99Microseconds() float64 { return float64(r.P99) / float64(time.Microsecond) }

// RunDecisionLatency schedules a seeded request stream on a simulated fleet, places
// every successful plan, removes the oldest groups to hold the busy fraction, and
// measures each placement.Schedule call (only that call) with now. The placement core
// takes no clock: the caller passes time.Now.
func RunDecisionLatency(config LatencyConfig, now func() time.Time) (LatencyResult, error) {
	snapshot, err := NewFleetSnapshot(config.Fleet)
	if err != nil {
		return LatencyResult{}, err
	}
	cluster := NewCluster(snapshot)
	stream := NewRequestStream(config.Seed, config.Fleet.Zones)
	latencies := make([]time.Duration, 0, config.Requests)
	var result LatencyResult
	histogram := placement.NewWorkloadHistogram()
	for range config.Requests {
		if err := holdBusyFraction(cluster, config.BusyGPUFraction); err != nil {
			return LatencyResult{}, err
		}
		request := stream.Next()
		if config.LearnWorkload {
			histogram.ObserveRequest(&request)
			workload := histogram.Distribution()
			request.Workload = &workload
		}
		start := now()
		plan, err := placement.Schedule(cluster.Snapshot(), request)
		latencies = append(latencies, now().Sub(start))

		var unschedulable *placement.UnschedulableError
		switch {
		case err == nil:
			if _, err := cluster.Place(request, plan); err != nil {
				return LatencyResult{}, fmt.Errorf("placementsim: placing a plan: %w", err)
			}
			result.Placed++
		case errors.As(err, &unschedulable) && unschedulable.Kind == placement.NotNow:
			result.NotNow++
		case errors.As(err, &unschedulable):
			result.Infeasible++
		default:
			return LatencyResult{}, fmt.Errorf("placementsim: schedule: %w", err)
		}
	}
	result.Decisions = len(latencies)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	result.P50 = percentile(latencies, 0.50)
	result.P99 = percentile(latencies, 0.99)
	if len(latencies) > 0 {
		result.Max = latencies[len(latencies)-1]
	}
	result.FinalBusyGPUFraction = busyGPUFraction(cluster.Snapshot())
	return result, nil
}

func holdBusyFraction(cluster *Cluster, target float64) error {
	for busyGPUFraction(cluster.Snapshot()) > target {
		if len(cluster.order) == 0 {
			return nil // busy with work outside groups
		}
		if err := cluster.Remove(cluster.order[0]); err != nil {
			return err
		}
	}
	return nil
}

func busyGPUFraction(snapshot *placement.Snapshot) float64 {
	total, available := snapshot.ResourceSummary()
	if total["GPU"] == 0 {
		return 0
	}
	return 1 - float64(available["GPU"])/float64(total["GPU"])
}

// percentile of sorted latencies, nearest rank.
func percentile(sorted []time.Duration, fraction float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(fraction*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
