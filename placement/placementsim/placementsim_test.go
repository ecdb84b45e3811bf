package placementsim

import (
	"reflect"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/placement"
)

func TestFleetIsSeededAndRayShaped(t *testing.T) {
	config := DefaultFleetConfig()
	config.Nodes = 100
	first, second := NewFleet(config), NewFleet(config)
	if !reflect.DeepEqual(first, second) {
		t.Fatal("the same seed gave two fleets")
	}
	partlyUsed := 0
	for _, node := range first {
		if len(node.ID) != 56 || node.Labels[placement.NodeIDLabel] != string(node.ID) {
			t.Fatalf("node %q: want a 56-hex-digit id and its node-id label, labels %v", node.ID, node.Labels)
		}
		if !node.Available.Equal(node.Total) {
			partlyUsed++
		}
	}
	if partlyUsed == 0 || partlyUsed == len(first) {
		t.Errorf("%d of %d nodes partly used, want some", partlyUsed, len(first))
	}
	if _, err := placement.NewSnapshot(first); err != nil {
		t.Fatal(err)
	}
}

// The latency run is deterministic apart from the clock: with a fake clock that
// advances 3µs per reading, every decision measures 3µs.
func TestRunDecisionLatencyWithFakeClock(t *testing.T) {
	config := DefaultLatencyConfig()
	config.Fleet.Nodes = 60
	config.Requests = 300
	var ticks time.Duration
	fakeNow := func() time.Time {
		ticks += 3 * time.Microsecond
		return time.Unix(0, 0).Add(ticks)
	}
	result, err := RunDecisionLatency(config, fakeNow)
	if err != nil {
		t.Fatal(err)
	}
	if result.Decisions != 300 || result.Placed+result.NotNow+result.Infeasible != 300 {
		t.Errorf("counts do not add up: %+v", result)
	}
	if result.P50 != 3*time.Microsecond || result.P99 != 3*time.Microsecond || result.P99Microseconds() != 3 {
		t.Errorf("latencies = %v / %v, want 3µs", result.P50, result.P99)
	}
	if result.Placed == 0 || result.FinalBusyGPUFraction > config.BusyGPUFraction+0.2 {
		t.Errorf("unexpected run: %+v", result)
	}
	again, err := RunDecisionLatency(config, fakeNow)
	if err != nil || again.Placed != result.Placed || again.NotNow != result.NotNow || again.Infeasible != result.Infeasible {
		t.Errorf("a second run differs: %+v vs %+v (%v)", again, result, err)
	}
}
