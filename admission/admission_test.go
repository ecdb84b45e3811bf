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

const gpu = resources.AmountScale

func mustLoad(t testing.TB, yaml string) *queues.Config {
	t.Helper()
	c, err := queues.Load([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// gang returns n bundles of g GPUs each.
func gang(n int, g float64) []resources.Set {
	var out []resources.Set
	for range n {
		out = append(out, resources.Set{resources.GPU: resources.Amount(g * gpu)})
	}
	return out
}

func wl(id, queue string, priority, arrival int64, bundles []resources.Set) admission.Workload {
	return admission.Workload{ID: id, Queue: queue, Priority: priority, Arrival: arrival, Bundles: bundles}
}

func gpus(n float64) resources.Set { return resources.Set{resources.GPU: resources.Amount(n * gpu)} }

const issueExample = `
cohorts: [{name: ml}]
queues:
  - name: research
    cohort: ml
    namespaces: ["research", "research-*"]
    resources:
      GPU: {nominalQuota: 8, borrowingLimit: 8}
      CPU: {nominalQuota: 64}
  - name: prod
    cohort: ml
    namespaces: ["prod"]
    resources:
      GPU: {nominalQuota: 16, borrowingLimit: 0}
    preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
priorityClasses:
  - {name: production-inference, value: 10000, preemptible: false}
  - {name: training-high, value: 1000}
  - {name: training, value: 500}
`

func TestDecideTable(t *testing.T) {
	cases := []struct {
		name     string
		config   string
		usage    map[string]resources.Set
		cluster  [2]int // nodes, GPUs per node; zero = 100 x 8
		running  []admission.Workload
		pending  []admission.Workload
		admitted []string
		waiting  map[string]pending.Reason
		// reservations, when set, are the holders expected (by scope order)
		reservations []string
	}{
		{
			name:   "cohort scenario: research borrows up to its limit, the fifth group waits",
			config: issueExample, cluster: [2]int{3, 8},
			pending: []admission.Workload{
				wl("r1", "research", 500, 1, gang(4, 1)), wl("r2", "research", 500, 2, gang(4, 1)),
				wl("r3", "research", 500, 3, gang(4, 1)), wl("r4", "research", 500, 4, gang(4, 1)),
				wl("r5", "research", 500, 5, gang(4, 1)),
			},
			admitted: []string{"r1", "r2", "r3", "r4"},
			waiting:  map[string]pending.Reason{"r5": pending.QuotaExceeded},
		},
		{
			name:   "no cohort: nominal is the limit",
			config: "queues: [{name: a, resources: {GPU: {nominalQuota: 4}}}]",
			pending: []admission.Workload{
				wl("a1", "a", 0, 1, gang(3, 1)), wl("a2", "a", 0, 2, gang(2, 1)), wl("a3", "a", 0, 3, gang(1, 1)),
			},
			admitted: []string{"a1", "a3"},
			waiting:  map[string]pending.Reason{"a2": pending.QuotaExceeded},
		},
		{
			name:   "StrictFIFO: the head that waits blocks the queue",
			config: "queues: [{name: a, queueingStrategy: StrictFIFO, resources: {GPU: {nominalQuota: 4}}}]",
			pending: []admission.Workload{
				wl("a1", "a", 0, 1, gang(3, 1)), wl("a2", "a", 0, 2, gang(2, 1)), wl("a3", "a", 0, 3, gang(1, 1)),
			},
			admitted: []string{"a1"},
			waiting:  map[string]pending.Reason{"a2": pending.QuotaExceeded, "a3": pending.QuotaExceeded},
		},
		{
			name:     "priority before arrival inside a queue",
			config:   "queues: [{name: a, resources: {GPU: {nominalQuota: 1}}}]",
			pending:  []admission.Workload{wl("early", "a", 100, 1, gang(1, 1)), wl("late-high", "a", 1000, 2, gang(1, 1))},
			admitted: []string{"late-high"},
			waiting:  map[string]pending.Reason{"early": pending.QuotaExceeded},
		},
		{
			name: "borrowing needs unused quota in the cohort",
			config: `queues:
  - {name: a, cohort: c, resources: {GPU: {nominalQuota: 2}}}
  - {name: b, cohort: c, resources: {GPU: {nominalQuota: 2}}}`,
			usage:    map[string]resources.Set{"b": gpus(2)},
			pending:  []admission.Workload{wl("a1", "a", 0, 1, gang(3, 1)), wl("a2", "a", 0, 2, gang(2, 1))},
			admitted: []string{"a2"},
			waiting:  map[string]pending.Reason{"a1": pending.WaitingForBorrowableQuota},
		},
		{
			name: "nominal quota lent out: waiting for reclaim",
			config: `queues:
  - {name: a, cohort: c, resources: {GPU: {nominalQuota: 2}}}
  - {name: b, cohort: c, resources: {GPU: {nominalQuota: 2}}}`,
			usage:   map[string]resources.Set{"b": gpus(4)},
			pending: []admission.Workload{wl("a1", "a", 0, 1, gang(1, 1))},
			waiting: map[string]pending.Reason{"a1": pending.WaitingForReclaim},
		},
		{
			name: "lendingLimit bounds what a queue lends",
			config: `queues:
  - {name: lender, cohort: c, resources: {GPU: {nominalQuota: 8, lendingLimit: 2}}}
  - {name: b, cohort: c, resources: {GPU: {nominalQuota: 0}}}`,
			pending:  []admission.Workload{wl("b1", "b", 0, 1, gang(2, 1)), wl("b2", "b", 0, 2, gang(1, 1)), wl("l1", "lender", 0, 3, gang(6, 1))},
			admitted: []string{"l1", "b1"},
			waiting:  map[string]pending.Reason{"b2": pending.WaitingForBorrowableQuota},
		},
		{
			name: "a queue below nominal goes ahead of a borrowing one, whatever priority and arrival",
			config: `queues:
  - {name: a, cohort: c, resources: {GPU: {nominalQuota: 4}}}
  - {name: b, cohort: c, resources: {GPU: {nominalQuota: 4}}}`,
			usage:    map[string]resources.Set{"a": gpus(3), "b": gpus(4)},
			pending:  []admission.Workload{wl("b-borrow", "b", 1_000_000, 1, gang(1, 1)), wl("a-own", "a", 0, 2, gang(1, 1))},
			admitted: []string{"a-own"},
			waiting:  map[string]pending.Reason{"b-borrow": pending.WaitingForBorrowableQuota},
		},
		{
			name:     "resources a queue does not list are not limited",
			config:   "queues: [{name: a, resources: {GPU: {nominalQuota: 1}}}]",
			pending:  []admission.Workload{wl("a1", "a", 0, 1, []resources.Set{{resources.GPU: gpu, resources.CPU: 1000 * gpu}})},
			admitted: []string{"a1"},
		},
		{
			name:     "a queue not in the config admits nothing; the implicit default queue is unbounded",
			config:   "queues: [{name: a}]",
			pending:  []admission.Workload{wl("x", "gone", 0, 1, gang(1, 1)), wl("d", queues.DefaultQueueName, 0, 1, gang(64, 1))},
			admitted: []string{"d"},
			waiting:  map[string]pending.Reason{"x": pending.QuotaExceeded},
		},
		{
			name:     "infeasible gang takes no reservation; work behind it runs",
			config:   "queues: [{name: a}]",
			cluster:  [2]int{2, 8},
			pending:  []admission.Workload{wl("huge", "a", 10, 1, gang(1, 9)), wl("small", "a", 0, 2, gang(1, 1))},
			admitted: []string{"small"},
			waiting:  map[string]pending.Reason{"huge": pending.Infeasible},
		},
		{
			name:    "EASY backfill: short work runs, long work would delay the reservation",
			config:  "queues: [{name: a}]",
			cluster: [2]int{2, 8},
			running: []admission.Workload{{ID: "busy", Queue: "a", Bundles: gang(1, 8), MaxRuntime: 100}},
			pending: []admission.Workload{
				{ID: "gang16", Queue: "a", Priority: 10, Arrival: 1, Bundles: gang(2, 8)},
				{ID: "short", Queue: "a", Arrival: 2, Bundles: gang(4, 1), MaxRuntime: 50},
				{ID: "long", Queue: "a", Arrival: 3, Bundles: gang(1, 1), MaxRuntime: 500},
				{ID: "undeclared", Queue: "a", Arrival: 4, Bundles: gang(1, 1)},
			},
			admitted: []string{"short"},
			waiting: map[string]pending.Reason{"gang16": pending.NoResources, "long": pending.BlockedByReservation,
				"undeclared": pending.BlockedByReservation},
		},
		{
			name:    "one reservation per cohort; work of any cohort starts only where it keeps them",
			config:  "queues: [{name: a, cohort: x}, {name: b, cohort: y}]",
			cluster: [2]int{2, 8},
			running: []admission.Workload{{ID: "busy", Queue: "a", Bundles: gang(1, 8), MaxRuntime: 100}},
			pending: []admission.Workload{
				{ID: "gang16", Queue: "a", Priority: 10, Arrival: 1, Bundles: gang(2, 8)},
				{ID: "gang-a2", Queue: "a", Priority: 10, Arrival: 2, Bundles: gang(2, 8)},
				{ID: "gang-y", Queue: "b", Priority: 5, Arrival: 2, Bundles: gang(2, 8)},
				{ID: "short-y", Queue: "b", Arrival: 3, Bundles: gang(1, 1), MaxRuntime: 50},
				{ID: "long-y", Queue: "b", Arrival: 4, Bundles: gang(1, 1), MaxRuntime: 500},
			},
			admitted: []string{"short-y"},
			waiting: map[string]pending.Reason{"gang16": pending.NoResources, "gang-a2": pending.NoResources,
				"gang-y": pending.NoResources, "long-y": pending.BlockedByReservation},
			reservations: []string{"gang16", "gang-y"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes, per := 100, 8
			if tc.cluster[0] > 0 {
				nodes, per = tc.cluster[0], tc.cluster[1]
			}
			cluster := admissiontest.NewCluster(nodes, per)
			for _, r := range tc.running {
				cluster.Take(r)
			}
			d := admission.Decide(admission.Input{Config: mustLoad(t, tc.config), Usage: tc.usage, Pending: tc.pending, Capacity: cluster})
			var admitted []string
			for _, w := range d.Admitted {
				admitted = append(admitted, w.ID)
			}
			if !slices.Equal(admitted, tc.admitted) {
				t.Errorf("admitted %v, want %v", admitted, tc.admitted)
			}
			if len(d.Waiting) != len(tc.waiting) {
				t.Errorf("waiting %v, want %v", d.Waiting, tc.waiting)
			}
			for id, want := range tc.waiting {
				if d.Waiting[id] != want {
					t.Errorf("%s waits with %q, want %q", id, d.Waiting[id], want)
				}
			}
			if tc.reservations != nil {
				var holders []string
				for _, r := range d.Reservations {
					holders = append(holders, r.Workload)
				}
				if !slices.Equal(holders, tc.reservations) {
					t.Errorf("reservations held by %v, want %v", holders, tc.reservations)
				}
			}
			if len(admitted)+len(d.Waiting) != len(tc.pending) {
				t.Errorf("every pending workload is admitted or has a reason: %d + %d != %d", len(admitted), len(d.Waiting), len(tc.pending))
			}
		})
	}
}

// randomConfig builds two cohorts and a queue outside any, with random limits.
func randomConfig(t testing.TB, rng *rand.Rand) *queues.Config {
	y := "queues:\n"
	for i := range 5 {
		cohort := []string{"x", "y", ""}[i%3]
		quota := fmt.Sprintf("nominalQuota: %d", rng.IntN(10))
		if cohort != "" {
			if rng.IntN(2) == 0 {
				quota += fmt.Sprintf(", borrowingLimit: %d", rng.IntN(8))
			}
			if rng.IntN(2) == 0 {
				quota += ", lendingLimit: 0"
			}
		}
		strategy := []string{queues.BestEffortFIFO, queues.StrictFIFO}[rng.IntN(2)]
		y += fmt.Sprintf("  - {name: q%d, cohort: %q, queueingStrategy: %s, fairSharing: {weight: %d}, resources: {GPU: {%s}}}\n", i, cohort, strategy, 1+rng.IntN(3), quota)
	}
	y += fmt.Sprintf("fairSharing: {enable: %v}\n", rng.IntN(2) == 0)
	return mustLoad(t, y)
}

// checkInvariants asserts DESIGN's quota invariants on a usage map.
func checkInvariants(t *testing.T, c *queues.Config, usage map[string]resources.Set) {
	t.Helper()
	borrowed := map[string]resources.Amount{}
	lendable := map[string]resources.Amount{}
	for _, q := range c.Queues {
		quota, ok := q.Quotas()[resources.GPU]
		if !ok {
			continue
		}
		used := usage[q.Name][resources.GPU]
		if used-quota.Nominal > quota.Borrowing || (q.Cohort == "" && used > quota.Nominal) {
			t.Fatalf("queue %s uses %s GPUs, above nominal %s + borrowing limit %s", q.Name, used, quota.Nominal, quota.Borrowing)
		}
		if q.Cohort != "" {
			borrowed[q.Cohort] += max(0, used-quota.Nominal)
			lendable[q.Cohort] += min(quota.Lending, max(0, quota.Nominal-used))
		}
	}
	for cohort := range borrowed {
		if borrowed[cohort] > lendable[cohort] {
			t.Fatalf("cohort %s: %s GPUs borrowed, but members lend at most %s (lending limits)", cohort, borrowed[cohort], lendable[cohort])
		}
	}
}

// Property: after any sequence of decisions and removals, no queue is above nominal +
// borrowing limit, no queue lends above its lending limit, the ledger equals the sum of
// admitted work, and backfill never moves a timed reservation.
func TestDecideProperties(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		config := randomConfig(t, rng)
		// Quotas add up to more than the cluster, so capacity binds and reservations form.
		cluster := admissiontest.NewCluster(2, 8)
		ledger := admission.NewLedger()
		admitted := map[string]admission.Workload{}
		var waiting []admission.Workload
		next := 0
		for step := range 40 {
			cluster.Advance(int64(step * 10))
			for _, id := range cluster.Due() {
				cluster.Finish(id)
				ledger.Remove(id)
				delete(admitted, id)
			}
			if len(admitted) > 0 && rng.IntN(3) == 0 { // a removal before its end
				ids := slices.Sorted(func(yield func(string) bool) {
					for id := range admitted {
						if !yield(id) {
							return
						}
					}
				})
				id := ids[rng.IntN(len(ids))]
				cluster.Finish(id)
				ledger.Remove(id)
				delete(admitted, id)
			}
			for range rng.IntN(4) {
				next++
				w := admission.Workload{ID: fmt.Sprintf("w%d", next), Queue: fmt.Sprintf("q%d", rng.IntN(5)),
					Priority: int64(rng.IntN(3)), Arrival: int64(next), Bundles: gang(1+rng.IntN(4), float64(1+rng.IntN(8))),
					MaxRuntime: int64(rng.IntN(4) * 30)}
				if seed%2 == 0 { // every runtime declared: reservations are timed
					w.MaxRuntime = int64(1+rng.IntN(4)) * 30
				}
				waiting = append(waiting, w)
			}
			d := admission.Decide(admission.Input{Config: config, Usage: ledger.Usage(), Pending: waiting, Capacity: cluster})
			for _, w := range d.Admitted {
				if err := ledger.Admit(w.ID, w.Queue, mustCharge(t, w)); err != nil {
					t.Fatal(err)
				}
				admitted[w.ID] = w
			}
			waiting = slices.DeleteFunc(waiting, func(w admission.Workload) bool { _, ok := admitted[w.ID]; return ok })
			for _, w := range waiting {
				if !d.Waiting[w.ID].Valid() {
					t.Fatalf("seed %d: %s waits without a valid reason (%q)", seed, w.ID, d.Waiting[w.ID])
				}
			}
			for _, res := range d.Reservations {
				if !res.Timed {
					continue
				}
				i := slices.IndexFunc(waiting, func(w admission.Workload) bool { return w.ID == res.Workload })
				if !cluster.FitsAt(waiting[i].Bundles, res.At) {
					t.Fatalf("seed %d step %d: backfill delayed %s past its reservation at %d", seed, step, res.Workload, res.At)
				}
			}
			sum := map[string]resources.Set{}
			for _, w := range admitted {
				sum[w.Queue] = sum[w.Queue].Add(mustCharge(t, w))
			}
			usage := ledger.Usage()
			for q := range joinKeys(sum, usage, d.Usage) {
				if !usage[q].Equal(sum[q]) {
					t.Fatalf("seed %d: ledger says %s uses %v, admitted work sums to %v", seed, q, usage[q], sum[q])
				}
				if !d.Usage[q].Equal(sum[q]) {
					t.Fatalf("seed %d: decision says %s uses %v, admitted work sums to %v", seed, q, d.Usage[q], sum[q])
				}
			}
			checkInvariants(t, config, usage)
		}
	}
}

func joinKeys(maps ...map[string]resources.Set) map[string]bool {
	out := map[string]bool{}
	for _, m := range maps {
		for k := range m {
			out[k] = true
		}
	}
	return out
}

func TestLedger(t *testing.T) {
	l := admission.NewLedger()
	if err := l.Admit("a", "q", gpus(2)); err != nil {
		t.Fatal(err)
	}
	if err := l.Admit("a", "q", gpus(2)); err == nil {
		t.Fatal("charging one workload twice must fail")
	}
	if err := l.Admit("b", "q", gpus(1)); err != nil {
		t.Fatal(err)
	}
	if !l.Remove("a") || l.Remove("a") {
		t.Fatal("Remove returns true exactly once")
	}
	if got := l.Usage()["q"]; !got.Equal(gpus(1)) {
		t.Fatalf("usage %v, want 1 GPU", got)
	}
}

func mustCharge(t testing.TB, w admission.Workload) resources.Set {
	t.Helper()
	charge, err := w.Charge()
	if err != nil {
		t.Fatal(err)
	}
	return charge
}

// A gang whose charge cannot be summed fits nothing: it waits as Infeasible and never
// slips past a quota.
func TestOverflowingChargeIsInfeasible(t *testing.T) {
	huge := []resources.Set{{resources.GPU: resources.MaxAmount}, {resources.GPU: resources.MaxAmount}}
	d := admission.Decide(admission.Input{Config: mustLoad(t, "queues: [{name: a}]"), Capacity: admissiontest.NewCluster(1, 8),
		Pending: []admission.Workload{wl("huge", "a", 0, 1, huge)}})
	if len(d.Admitted) != 0 || d.Waiting["huge"] != pending.Infeasible {
		t.Fatalf("admitted %v, waiting %v", d.Admitted, d.Waiting)
	}
}
