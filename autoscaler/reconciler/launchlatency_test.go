package reconciler

import (
	"testing"
	"time"

	"github.com/raygo-dev/raygo/autoscaler"
)

func seconds(values ...int) []time.Duration {
	out := make([]time.Duration, len(values))
	for i, v := range values {
		out[i] = time.Duration(v) * time.Second
	}
	return out
}

func TestP90IsTheNearestRankOfTheSamples(t *testing.T) {
	for _, c := range []struct {
		name    string
		samples []time.Duration
		want    time.Duration
	}{
		{"none", nil, 0},
		{"one", seconds(7), 7 * time.Second},
		{"two: the slower", seconds(3, 9), 9 * time.Second},
		{"nine: the slowest", seconds(1, 2, 3, 4, 5, 6, 7, 8, 9), 9 * time.Second},
		{"ten: the 9th fastest, one outlier ignored", seconds(60, 1, 2, 3, 4, 5, 6, 7, 8, 9), 9 * time.Second},
		{"ten equal", seconds(5, 5, 5, 5, 5, 5, 5, 5, 5, 5), 5 * time.Second},
		{"unsorted", seconds(30, 10, 20), 30 * time.Second},
	} {
		if got := p90(c.samples); got != c.want {
			t.Errorf("%s: p90(%v) = %s, want %s", c.name, c.samples, got, c.want)
		}
	}
}

func TestLaunchLatencyIsTheP90OfTheLastTenLaunchesElseExpectedLaunch(t *testing.T) {
	l := launchLatencies{}
	expected := map[string]time.Duration{"gpu8": 90 * time.Second, "cpu": 0}
	if got, ok := l.latency("gpu8", expected); !ok || got != 90*time.Second {
		t.Fatalf("before any launch: %s %v, want expected_launch_s 90s", got, ok)
	}
	if _, ok := l.latency("cpu", expected); ok {
		t.Fatal("expected_launch_s 0 and no launch: want unknown")
	}
	if _, ok := l.latency("other", expected); ok {
		t.Fatal("no setting and no launch: want unknown")
	}
	// Eleven launches: the first (100 s) falls out of the window of ten.
	l.record("gpu8", 100*time.Second)
	for i := 1; i <= 10; i++ {
		l.record("gpu8", time.Duration(i)*time.Second)
	}
	if got := len(l["gpu8"]); got != latencySamples {
		t.Fatalf("samples kept = %d, want %d", got, latencySamples)
	}
	if got, ok := l.latency("gpu8", expected); !ok || got != 9*time.Second {
		t.Fatalf("after 11 launches: %s %v, want p90 of the last ten 9s", got, ok)
	}
}

func TestEstimatesAreTheLastNodeOfEachGangAndUnknownTypesGiveNone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := launchLatencies{"gpu8": seconds(20), "cpu": seconds(5)}
	expected := map[string]time.Duration{"slow": time.Minute}
	got := estimates([]launchingFor{
		{NodeType: "gpu8", RequestedAt: t0, Gangs: []string{"a"}},
		{NodeType: "cpu", RequestedAt: t0.Add(30 * time.Second), Gangs: []string{"a", "b"}},
		{NodeType: "slow", RequestedAt: t0, Gangs: []string{"c"}},
		{NodeType: "unknown", RequestedAt: t0, Gangs: []string{"b"}},
	}, l, expected)
	want := []CapacityEstimate{
		{GroupID: "a", NodeType: "cpu", ExpectedAt: t0.Add(35 * time.Second), Latency: 5 * time.Second},
		{GroupID: "c", NodeType: "slow", ExpectedAt: t0.Add(time.Minute), Latency: time.Minute},
	}
	if len(got) != len(want) {
		t.Fatalf("estimates = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("estimates[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestTheReconcilerReportsWhenAGangsNodeRunsAndMeasuresTheLaunch(t *testing.T) {
	r, cluster, mem, c := newTestReconciler(t)
	r.cfg.ExpectedLaunch = map[string]time.Duration{"gpu8": 45 * time.Second}
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{strictPack8()}})
	start := c.now()
	tick(t, r)
	if mem.Launches("gpu8") != 1 {
		t.Fatalf("launch calls = %d, want 1", mem.Launches("gpu8"))
	}
	est := cluster.Last.NewCapacity
	if len(est) != 1 || est[0].GroupID != "pg1" || !est[0].ExpectedAt.Equal(start.Add(45*time.Second)) {
		t.Fatalf("estimates = %+v, want pg1 at launch + expected_launch_s 45s", est)
	}
	c.advance(12 * time.Second)
	inst := r.Instances()[0]
	cluster.Set(Observation{Nodes: []autoscaler.Node{runningNode("n1", inst.ID, "gpu8", 0)}})
	tick(t, r)
	if len(cluster.Last.NewCapacity) != 0 {
		t.Fatalf("estimates once the node runs = %+v, want none", cluster.Last.NewCapacity)
	}
	if got, ok := r.latencies.latency("gpu8", r.cfg.ExpectedLaunch); !ok || got != 12*time.Second {
		t.Fatalf("measured latency = %s %v, want the launch's 12s replacing expected_launch_s", got, ok)
	}
}
