package preemption

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/placement"
)

// TestNoPreemptionCycles runs a seeded, bounded simulation (two 8-GPU nodes, gangs of
// random size and priority arriving and finishing, evicted work queued again) and
// checks that no workload A evicts B after B evicted A (no A/B/A cycle), that no
// victim is evicted before its minRuntime, and that no preemptor evicts before its
// preemption delay.
func TestNoPreemptionCycles(t *testing.T) {
	config := mustLoad(t, `
queues:
  - name: q
    preemption: {withinClusterQueue: LowerOrNewerEqualPriority, minRuntime: 3s, preemptionDelay: 2s}
`)
	step := int64(queues.Second)
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 11))
		c := newCluster(t, dgx("n1"), dgx("n2"))
		type job struct {
			p    Preemptor
			ends int64
		}
		var waiting []job
		ends := map[string]int64{}
		evicted := map[[2]string]bool{}
		for now := int64(0); now < 300*step; now += step {
			for i := 0; i < len(c.running); i++ { // finished work leaves
				if r := c.running[i]; ends[r.ID] <= now {
					if err := c.snap.Release(r.Bundles, placement.Plan{Placements: r.Placements}); err != nil {
						t.Fatal(err)
					}
					c.running = slices.Delete(c.running, i, i+1)
					i--
				}
			}
			if rng.IntN(2) == 0 {
				id := fmt.Sprintf("j%d", now/step)
				waiting = append(waiting, job{p: Preemptor{ID: id, Queue: "q", Priority: []int64{100, 500, 1000}[rng.IntN(3)], Arrival: now, PendingSince: now,
					Request: strictPack([]int{1, 2, 4, 8}[rng.IntN(4)])}, ends: int64(5+rng.IntN(20)) * step})
			}
			slices.SortStableFunc(waiting, func(a, b job) int { return int(b.p.Priority - a.p.Priority) })
			for i := 0; i < len(waiting); i++ {
				w := waiting[i]
				d := Decide(c.input(config, w.p, now))
				if d.Outcome == Preempt {
					if now-w.p.PendingSince < 2*step {
						t.Fatalf("seed %d: %s evicts before its preemption delay", seed, w.p.ID)
					}
					for _, v := range d.Victims {
						at := slices.IndexFunc(c.running, func(r Running) bool { return r.ID == v.ID })
						r := c.running[at]
						if now-r.AdmittedAt < 3*step {
							t.Fatalf("seed %d: %s evicted before its minRuntime", seed, r.ID)
						}
						if evicted[[2]string{r.ID, w.p.ID}] {
							t.Fatalf("seed %d: %s evicts %s, which evicted it before", seed, w.p.ID, r.ID)
						}
						evicted[[2]string{w.p.ID, r.ID}] = true
						if err := c.snap.Release(r.Bundles, placement.Plan{Placements: r.Placements}); err != nil {
							t.Fatal(err)
						}
						c.running = slices.Delete(c.running, at, at+1)
						waiting = append(waiting, job{p: Preemptor{ID: r.ID, Queue: "q", Priority: r.Priority, Arrival: r.Arrival, PendingSince: now,
							Request: placement.Request{Strategy: placement.StrategyStrictPack, Bundles: r.Bundles}}, ends: ends[r.ID] - now})
					}
				}
				if d.Outcome == Fits || d.Outcome == Preempt {
					if c.place(Running{ID: w.p.ID, Queue: "q", Priority: w.p.Priority, Arrival: w.p.Arrival, AdmittedAt: now}, w.p.Request) {
						ends[w.p.ID] = now + w.ends
						waiting = slices.Delete(waiting, i, i+1)
						i--
					}
				}
			}
		}
		if len(evicted) == 0 {
			t.Fatalf("seed %d: the simulation evicted nothing", seed)
		}
	}
}
