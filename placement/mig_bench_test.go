package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/placement"
	"github.com/raygo-dev/raygo/placement/migsim"
)

// TestMIGAllocatorBench is the MIG benchmark of `make bench`: seeded streams of MIG
// slice requests and releases on 8 simulated dgx-h100 nodes (64 H100-80GB GPUs in MIG
// mode), offered 20% more memory slices than the fleet has, mostly 1g.10gb, 1g.20gb,
// 2g.20gb and 3g.40gb with some 4g.40gb, 7g.80gb and 1g.10gb+me (migsim.DefaultConfig
// has the stream, migsim.RunResult the exact definitions), played once with PlanMIG's
// best fit and once with first fit. It prints exactly these lines:
//
//	BENCH mig_accepted_ratio_vs_firstfit <requests accepted by best fit ÷ by first fit> x
//	BENCH mig_fragmentation_pct <free memory slices no profile could be carved on, % of free slices, at the end> %
//	BENCH mig_fragmentation_pct_firstfit <the same for first fit> %
//
// It is not a test and is skipped unless RAYGO_BENCH=1.
func TestMIGAllocatorBench(t *testing.T) {
	benchgate.Require(t)
	result, err := migsim.Run(migsim.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []migsim.RunResult{result.BestFit, result.FirstFit} {
		t.Logf("%s: accepted %d of %d requests (%d memory slices), mean held %.2f of the fleet; at the ends %d of %d free slices unusable (%.1f%%), %.1f%% on average; accepted by profile %v of %v",
			r.Policy, r.Accepted, r.Requests, r.AcceptedSlices, r.MeanHeldFraction, r.UnusableSlices, r.FreeSlices, r.FragmentationPct, r.MeanFragmentationPct, r.AcceptedByProfile, r.RequestsByProfile)
	}
	withIdle := migsim.DefaultConfig()
	withIdle.IdlePool = true
	idle, err := migsim.Run(withIdle)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []migsim.RunResult{idle.BestFit, idle.FirstFit} {
		t.Logf("with the idle pool, %s: accepted %d of %d, %d served by an idle instance, %d idle instances destroyed to make room",
			r.Policy, r.Accepted, r.Requests, r.Reused, r.Destroyed)
	}
	fmt.Printf("BENCH mig_accepted_ratio_vs_firstfit %.3f x\n", result.AcceptedRatio)
	fmt.Printf("BENCH mig_fragmentation_pct %.1f %%\n", result.BestFit.FragmentationPct)
	fmt.Printf("BENCH mig_fragmentation_pct_firstfit %.1f %%\n", result.FirstFit.FragmentationPct)
}

// BenchmarkPlanMIG measures one best-fit and one first-fit decision on the benchmark's
// 64 GPUs, about 80% of their memory slices held by a seeded mix of profiles.
func BenchmarkPlanMIG(b *testing.B) {
	fleet := make([]placement.MIGGPU, 64)
	for i := range fleet {
		fleet[i] = placement.MIGGPU{Index: i, Model: mig.H100_80GB}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "1g.10gb", "4g.40gb"}
	for held := 0; held < 64*mig.MemorySlices*8/10; {
		step, err := placement.PlanMIG(fleet, mig.ResourcePrefix+names[rng.IntN(len(names))], placement.MIGFirstFit)
		if err != nil {
			break
		}
		if err := fleet[step.GPU].Apply(step); err != nil {
			b.Fatal(err)
		}
		held += step.Profile.MemorySlices
	}
	for _, policy := range []placement.MIGPolicy{placement.MIGBestFit, placement.MIGFirstFit} {
		b.Run(policy.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := placement.PlanMIG(fleet, "nvidia.com/mig-1g.10gb", policy); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
