package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/admissiontest"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/internal/resources"
)

// One admission cycle over 1,000 pending workloads in 30 queues / 5 cohorts (fair
// sharing on) on 1,250 nodes x 8 GPUs kept full by running work with declared runtimes;
// between two cycles one running workload ends (and the pending list is topped up to
// 1,000 again). p99 of 1,000 cycles; the goal is < 10 ms. Capacity is the in-memory
// GPU model of admission/admissiontest, not the placement code.
func TestAdmissionDecisionBench(t *testing.T) {
	benchgate.Require(t)
	const (
		cohorts, queuesPerCohort = 5, 6
		nodes, gpusPerNode       = 1250, 8
		pendingTarget, cycles    = 1000, 1000
	)
	var yaml strings.Builder
	yaml.WriteString("fairSharing: {enable: true}\nqueues:\n")
	var queueNames []string
	for c := range cohorts {
		for q := range queuesPerCohort {
			name := fmt.Sprintf("c%d-q%d", c, q)
			queueNames = append(queueNames, name)
			fmt.Fprintf(&yaml, "  - {name: %s, cohort: c%d, fairSharing: {weight: %d}, resources: {GPU: {nominalQuota: 333, borrowingLimit: 200}, CPU: {nominalQuota: 4000}}}\n", name, c, 1+q%2)
		}
	}
	config, err := queues.Load([]byte(yaml.String()))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	cluster := admissiontest.NewCluster(nodes, gpusPerNode)
	ledger := admission.NewLedger()
	ends := map[string]int64{}
	var waiting []admission.Workload
	next := 0
	newWorkload := func() admission.Workload {
		next++
		var bundles []resources.Set
		switch r := rng.IntN(10); {
		case r < 7:
			bundles = []resources.Set{{resources.GPU: resources.AmountScale, resources.CPU: 4 * resources.AmountScale}}
		case r < 9:
			for range 2 {
				bundles = append(bundles, resources.Set{resources.GPU: 4 * resources.AmountScale, resources.CPU: 16 * resources.AmountScale})
			}
		default:
			for range 8 {
				bundles = append(bundles, resources.Set{resources.GPU: 8 * resources.AmountScale})
			}
		}
		return admission.Workload{ID: fmt.Sprintf("w%d", next), Queue: queueNames[rng.IntN(len(queueNames))],
			Priority: int64(rng.IntN(3) * 500), Arrival: int64(next), Bundles: bundles, MaxRuntime: 50 + rng.Int64N(450)}
	}
	cycle := func() time.Duration {
		for len(waiting) < pendingTarget {
			waiting = append(waiting, newWorkload())
		}
		start := time.Now()
		d := admission.Decide(admission.Input{Config: config, Usage: ledger.Usage(), Pending: waiting, Capacity: cluster})
		elapsed := time.Since(start)
		admitted := map[string]bool{}
		for _, w := range d.Admitted {
			if err := ledger.Admit(w.ID, w.Queue, mustCharge(t, w)); err != nil {
				t.Fatal(err)
			}
			ends[w.ID] = cluster.Now + w.MaxRuntime
			admitted[w.ID] = true
		}
		waiting = slices.DeleteFunc(waiting, func(w admission.Workload) bool { return admitted[w.ID] })
		return elapsed
	}
	// Fill the cluster, then measure.
	for range 5 {
		cycle()
	}
	if used := cluster.UsedGPUs().Float(); used < 0.8*nodes*gpusPerNode {
		t.Fatalf("the cluster is only %.0f GPUs busy after warm-up: not the loaded case to measure", used)
	}
	var samples []time.Duration
	admittedTotal := 0
	for range cycles {
		// One change: the running workload with the earliest declared end ends.
		var first string
		for id, end := range ends {
			if first == "" || end < ends[first] || (end == ends[first] && id < first) {
				first = id
			}
		}
		cluster.Advance(ends[first])
		cluster.Finish(first)
		ledger.Remove(first)
		delete(ends, first)
		before := len(ends)
		samples = append(samples, cycle())
		admittedTotal += len(ends) - before
	}
	slices.Sort(samples)
	p99 := samples[len(samples)*99/100-1]
	t.Logf("p50 %v, p99 %v, max %v; %d admitted over %d cycles; %d running", samples[len(samples)/2], p99, samples[len(samples)-1], admittedTotal, cycles, len(ends))
	fmt.Printf("BENCH admission_decision_p99_ms %.3f ms\n", float64(p99.Microseconds())/1000)
}

func mustCharge(t testing.TB, w admission.Workload) resources.Set {
	t.Helper()
	charge, err := w.Charge()
	if err != nil {
		t.Fatal(err)
	}
	return charge
}
