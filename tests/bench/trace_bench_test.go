package bench

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/placement/tracereplay"
	"github.com/raygo-dev/raygo/tests/tracefiles"
)

// traceSeeds are the paper's ten seeds (its runs use -tuneseed 42..51).
var traceSeeds = []uint64{42, 43, 44, 45, 46, 47, 48, 49, 50, 51}

// TestTraceFragmentationBench replays the Alibaba GPU trace (tracefiles.Dir:
// $RAYGO_TRACE_DIR or ../shared/traces/alibaba-gpu-v2023) through raygo's placement core
// and the paper's six policies, on the default task list and the multigpu50,
// gpushare40 and gpuspec33 variants, with the paper's method (tracereplay.Run): the
// mean over ten seeds of the share of the cluster's GPU left unallocated when the
// arrived tasks ask for 100 % of it. It prints one line per variant and policy:
//
//	BENCH trace_fgd_unallocated_gpu_pct_<variant>_<policy> <mean> %
//	BENCH trace_first_failure_unallocated_gpu_pct_<variant>_<policy> <mean> %
//
// the second being the share unallocated when the first task failed. It is not a test
// and is skipped unless RAYGO_BENCH=1; RAYGO_TRACE_SEEDS=n runs only the first n seeds.
func TestTraceFragmentationBench(t *testing.T) {
	benchgate.Require(t)
	dir, err := tracefiles.Dir()
	if err != nil {
		t.Fatal(err)
	}
	seeds := traceSeeds
	if n, err := strconv.Atoi(os.Getenv("RAYGO_TRACE_SEEDS")); err == nil && n > 0 && n < len(seeds) {
		seeds = seeds[:n]
	}
	for _, variant := range tracefiles.Variants {
		nodes, tasks, err := tracefiles.Load(dir, variant)
		if err != nil {
			t.Fatal(err)
		}
		for _, policy := range tracePolicies() {
			start := time.Now()
			var unallocated, firstFailure float64
			for _, seed := range seeds {
				result, err := tracereplay.Run(tracereplay.DefaultConfig(nodes, tasks, seed), policy)
				if err != nil {
					t.Fatal(err)
				}
				unallocated += result.UnallocatedGPUPct
				firstFailure += result.FirstFailureUnallocatedGPUPct
				t.Logf("%s %s seed %d: unallocated %.2f%% at 100%% arrived; first failure at %.1f%% arrived with %.2f%% unallocated; %d arrived, %d placed, %d failed",
					variant, policy.Name(), seed, result.UnallocatedGPUPct, result.FirstFailureArrivedPct, result.FirstFailureUnallocatedGPUPct, result.Arrived, result.Placed, result.Failed)
			}
			n := float64(len(seeds))
			t.Logf("%s %s: %d seeds in %v", variant, policy.Name(), len(seeds), time.Since(start).Round(time.Millisecond))
			fmt.Printf("BENCH trace_fgd_unallocated_gpu_pct_%s_%s %.2f %%\n", variant, policy.Name(), unallocated/n)
			fmt.Printf("BENCH trace_first_failure_unallocated_gpu_pct_%s_%s %.2f %%\n", variant, policy.Name(), firstFailure/n)
		}
	}
}

// tracePolicies are raygo's placement and the paper's six policies.
func tracePolicies() []tracereplay.Policy {
	return append([]tracereplay.Policy{&tracereplay.Raygo{}}, tracereplay.PaperPolicies()...)
}
