package main

import (
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/placement"
)

// checkerSet: a STRICT_PACK of 8 GPUs needs the one type whose NVLink island holds 8;
// STRICT_SPREAD of 3 needs 3 nodes; 4 tasks of 8 CPUs fill one cpu32.
func checkerSet() DemandSet {
	return DemandSet{
		Types: []TypeSpec{
			{Name: "cpu32", Resources: map[string]float64{"CPU": 32, "memory": 128}, Price: 1.5, MaxWorkers: 10},
			{Name: "dgx", Resources: map[string]float64{"CPU": 64, "GPU": 8, "memory": 256}, GPUIslands: []int{8}, Price: 20, MaxWorkers: 4},
			{Name: "pairs", Resources: map[string]float64{"CPU": 64, "GPU": 8, "memory": 256}, GPUIslands: []int{2, 2, 2, 2}, Price: 12, MaxWorkers: 4},
		},
		Tasks: []TaskSpec{{Shape: map[string]float64{"CPU": 8}, Count: 4}},
		Groups: []GroupSpec{
			{ID: "train", Strategy: placement.StrategyStrictPack, Bundles: repeatBundle(8, map[string]float64{"CPU": 4, "GPU": 1})},
			{ID: "spread", Strategy: placement.StrategyStrictSpread, Bundles: repeatBundle(3, map[string]float64{"CPU": 1})},
		},
	}
}

func repeatBundle(n int, bundle map[string]float64) []map[string]float64 {
	out := make([]map[string]float64, n)
	for i := range out {
		out[i] = bundle
	}
	return out
}

func TestCheckPlan(t *testing.T) {
	cases := []struct {
		name    string
		counts  map[string]int
		wantErr string // "" when the plan fits
	}{
		// dgx takes the STRICT_PACK and one spread bundle; two cpu32s take the other
		// spread bundles and the tasks.
		{"fits", map[string]int{"dgx": 1, "cpu32": 2}, ""},
		{"one node short of STRICT_SPREAD", map[string]int{"dgx": 1, "cpu32": 1}, "spread"},
		{"8 GPUs but no island of 8", map[string]int{"pairs": 1, "cpu32": 2}, "train"},
		{"no nodes", map[string]int{}, "train"},
		{"unknown type", map[string]int{"dgx": 1, "cpu32": 2, "tpu": 1}, "unknown type tpu"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkPlan(checkerSet(), c.counts)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("plan %v: %v, want it to fit", c.counts, err)
			case c.wantErr != "" && err == nil:
				t.Fatalf("plan %v fits, want a shortfall naming %q", c.counts, c.wantErr)
			case c.wantErr != "" && !strings.Contains(err.Error(), c.wantErr):
				t.Fatalf("plan %v: %v, want it to name %q", c.counts, err, c.wantErr)
			}
		})
	}
}

// The generator's sets are what the benchmark's figures rest on: every demand fits
// some type on its own, and raygo's plan, where it fits, costs what its launches do.
func TestGeneratedSetsAreSatisfiable(t *testing.T) {
	for _, set := range generate(50, 7) {
		counts, err := raygoPlan(set)
		if err != nil {
			t.Fatalf("set %d: %v", set.ID, err)
		}
		// Enough nodes of every type for the demand: the plan's failures, if any, are
		// the checker's, not the set's.
		generous := make(map[string]int)
		for _, spec := range set.Types {
			generous[spec.Name] = spec.MaxWorkers
		}
		if err := checkPlan(set, generous); err != nil {
			t.Errorf("set %d does not fit even on every type's max_workers: %v", set.ID, err)
		}
		if len(counts) == 0 {
			t.Errorf("set %d: raygo launches nothing", set.ID)
		}
	}
}
