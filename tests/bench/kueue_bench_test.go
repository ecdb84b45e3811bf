package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// kueueClass is one workload class of Kueue's scheduler performance test
// (test/performance/scheduler, configs/baseline/generator.yaml): per queue, count
// workloads created one every interval, each asking cpus CPUs for runtime, at priority.
// The counts, intervals, sizes, priorities, quotas and preemption policies below are
// that file's. Its workloads stand for no process, so an evicted one is gone at once:
// gracePeriod 0s.
type kueueClass struct {
	name     string
	count    int
	interval time.Duration
	runtime  time.Duration
	cpus     float64
	priority int
}

// The shape of Kueue's run: 5 cohorts × 6 queues (nominal 20 CPUs, borrowing limit 100,
// reclaimWithinCohort Any, withinClusterQueue LowerPriority), per queue 350 small, 100
// medium and 50 large workloads: 15,000 in all.
var kueueClasses = []kueueClass{
	{"small", 350, 100 * time.Millisecond, 200 * time.Millisecond, 1, 50},
	{"medium", 100, 500 * time.Millisecond, 500 * time.Millisecond, 5, 100},
	{"large", 50, 1200 * time.Millisecond, time.Second, 20, 200},
}

const (
	kueueCohorts        = 5
	kueueQueuesInCohort = 6
	kueueNominalCPUs    = 20
)

// kueueThresholds are Kueue's published thresholds for its run: mean time to admission
// per class, in seconds.
var kueueThresholds = map[string]float64{"large": 23, "medium": 90, "small": 260}

func kueueQueuesYAML() string {
	var b strings.Builder
	b.WriteString("priorityClasses:\n")
	for _, c := range kueueClasses {
		fmt.Fprintf(&b, "  - {name: %s, value: %d, gracePeriod: 0s}\n", c.name, c.priority)
	}
	b.WriteString("cohorts:\n")
	for c := range kueueCohorts {
		fmt.Fprintf(&b, "  - name: cohort-%d\n", c)
	}
	b.WriteString("queues:\n")
	for c := range kueueCohorts {
		for q := range kueueQueuesInCohort {
			name := fmt.Sprintf("cq-%d-%d", c, q)
			fmt.Fprintf(&b, "  - {name: %s, cohort: cohort-%d, namespaces: [%q], resources: {CPU: {nominalQuota: %d, borrowingLimit: 100}}, preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}}\n",
				name, c, name, kueueNominalCPUs)
		}
	}
	return b.String()
}

// TestKueueShapedBench runs a workload shaped as Kueue's scheduler performance test on
// the real GCS (in this process, memory store, real clock) with synthetic CPU nodes
// whose raylet side is gcs/reservertest: 20 nodes of 100 CPUs, more than the queues'
// 600 CPUs of nominal quota, so quota alone limits, as in Kueue's run. Each workload is a
// one-bundle group of its class's CPUs in its queue's namespace, created on its class's
// schedule, removed by its driver once it has run its class's runtime (200 ms, 500 ms,
// 1 s) from CREATED. It prints, next to Kueue's thresholds (≤ 425 s wall, ≥ 50 % usage,
// ≤ 23 / 90 / 260 s mean time to admission for large / medium / small):
//
//	BENCH kueue_wall_s <s> s                       first creation to last removal
//	BENCH kueue_usage_pct <pct> %                  CPU usage of the queues ÷ their nominal quota, sampled every 500 ms
//	BENCH kueue_admission_mean_s_<class> <s> s     creation to CREATED, mean over the class
//
// Skipped unless RAYGO_BENCH=1.
func TestKueueShapedBench(t *testing.T) {
	benchgate.Require(t)
	g := startScaleGCSWithQueues(t, []byte(kueueQueuesYAML()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	for i := range 20 {
		node := syntheticDGX(fmt.Sprintf("cpu-%02d", i), 0, 100)
		if err := g.register(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := rpcutil.Dial(g.server.Address(), rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	queuesClient := pb.NewQueueServiceClient(conn)

	type outcome struct {
		class string
		wait  time.Duration
		err   error
	}
	total := 0
	for _, c := range kueueClasses {
		total += c.count * kueueCohorts * kueueQueuesInCohort
	}
	outcomes := make(chan outcome, total)
	var running sync.WaitGroup
	start := time.Now()
	var last time.Time
	var lastMu sync.Mutex
	run := func(queue string, c kueueClass) {
		defer running.Done()
		created := time.Now()
		req := &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: "detached", Namespace: queue, Priority: c.name,
			Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": c.cpus}}}}
		reply, err := g.groups.CreatePlacementGroup(ctx, req)
		if err != nil {
			outcomes <- outcome{c.name, 0, err}
			return
		}
		id := reply.PlacementGroup.PlacementGroupId
		if err := g.waitReady(ctx, id); err != nil {
			outcomes <- outcome{c.name, 0, err}
			return
		}
		wait := time.Since(created)
		time.Sleep(c.runtime)
		_, err = g.groups.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: id})
		lastMu.Lock()
		last = time.Now()
		lastMu.Unlock()
		outcomes <- outcome{c.name, wait, err}
	}
	// One generator per queue and class, as Kueue's: a workload every interval.
	var generators sync.WaitGroup
	for cohort := range kueueCohorts {
		for q := range kueueQueuesInCohort {
			queue := fmt.Sprintf("cq-%d-%d", cohort, q)
			for _, c := range kueueClasses {
				generators.Add(1)
				go func() {
					defer generators.Done()
					ticker := time.NewTicker(c.interval)
					defer ticker.Stop()
					for range c.count {
						running.Add(1)
						go run(queue, c)
						<-ticker.C
					}
				}()
			}
		}
	}
	// Usage samples until every workload is done.
	done := make(chan struct{})
	go func() {
		generators.Wait()
		running.Wait()
		close(done)
	}()
	var usageSum float64
	samples := 0
	nominal := float64(kueueCohorts * kueueQueuesInCohort * kueueNominalCPUs)
	for sampling := true; sampling; {
		select {
		case <-done:
			sampling = false
		case <-time.After(500 * time.Millisecond):
			reply, err := queuesClient.ListQueues(ctx, &pb.ListQueuesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			used := 0.0
			for _, q := range reply.Queues {
				for _, r := range q.Resources {
					if r.Resource == "CPU" {
						used += r.Usage
					}
				}
			}
			usageSum += used / nominal
			samples++
		}
	}
	close(outcomes)
	sums, counts := map[string]time.Duration{}, map[string]int{}
	for o := range outcomes {
		if o.err != nil {
			t.Fatalf("%s workload: %v", o.class, o.err)
		}
		sums[o.class] += o.wait
		counts[o.class]++
	}
	wall := last.Sub(start)
	t.Logf("%d workloads in %v; Kueue's thresholds: wall <= 425 s, usage >= 50 %%, mean time to admission large <= 23 s, medium <= 90 s, small <= 260 s", total, wall.Round(time.Millisecond))
	fmt.Printf("BENCH kueue_wall_s %.1f s\n", wall.Seconds())
	if samples > 0 {
		fmt.Printf("BENCH kueue_usage_pct %.1f %%\n", 100*usageSum/float64(samples))
	}
	for _, c := range kueueClasses {
		mean := sums[c.name].Seconds() / float64(counts[c.name])
		t.Logf("%s: %d workloads, mean time to admission %.2f s (Kueue's threshold %g s)", c.name, counts[c.name], mean, kueueThresholds[c.name])
		fmt.Printf("BENCH kueue_admission_mean_s_%s %.2f s\n", c.name, mean)
	}
}
