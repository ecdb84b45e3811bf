package bench

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/admission/queues"
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

// traceTenantOf is the mapping of the trace's qos to tenants (Guaranteed, seven
// tasks, goes with LS to prod).
func traceTenantOf(task *tracereplay.Task) string {
	switch task.QoS {
	case "LS", "Guaranteed":
		return "prod"
	case "Burstable":
		return "research"
	default:
		return "dev"
	}
}

// Trace admission replay settings: see TestTraceAdmissionBench.
const (
	traceTimeScale = 20000
	traceCopies    = 8
	traceTickS     = 5
)

// TestTraceAdmissionBench replays the Alibaba GPU trace's default task list on its GPU
// nodes (tracefiles.Dir) as the work of three tenants (qos LS → prod, Burstable →
// research, BE → dev; queues in testdata/trace-tenants.yaml) through raygo's admission
// (quotas, cohort borrowing, fair sharing, EASY backfill) and placement on a simulated
// clock (tracereplay.RunTenants), and again with Kueue's BestEffortFIFO (no reservations,
// no fair sharing) as the baseline. The trace never saturates the cluster at its own
// times, so its arrivals are compressed traceTimeScale times and the trace is replayed
// traceCopies times back to back; durations are the trace's. It prints, for raygo and
// with the suffix _besteffortfifo for the baseline:
//
//	BENCH trace_gpu_allocation_pct <mean share of the GPUs held in the saturation window> %
//	BENCH trace_wait_p50_s_<tenant> / trace_wait_p95_s_<tenant> <seconds>
//	BENCH trace_jain <Jain's index of usage ÷ entitlement over the tenants>
//
// and the compression as BENCH trace_time_scale and trace_copies. Skipped unless
// RAYGO_BENCH=1.
func TestTraceAdmissionBench(t *testing.T) {
	benchgate.Require(t)
	dir, err := tracefiles.Dir()
	if err != nil {
		t.Fatal(err)
	}
	nodes, tasks, err := tracefiles.Load(dir, "default")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/trace-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config, err := queues.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("BENCH trace_time_scale %d x\n", traceTimeScale)
	fmt.Printf("BENCH trace_copies %d copies\n", traceCopies)
	for _, baseline := range []bool{false, true} {
		suffix := ""
		if baseline {
			suffix = "_besteffortfifo"
		}
		start := time.Now()
		result, err := tracereplay.RunTenants(tracereplay.TenantConfig{Nodes: nodes, Tasks: tasks, Queues: config, TenantOf: traceTenantOf,
			TimeScale: traceTimeScale, Copies: traceCopies, TickS: traceTickS, Baseline: baseline})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: window %d-%d s, peak unconstrained demand %.0f of %.0f GPUs, %d arrived, %d admitted, %d decisions, usage %v, demand %v, in %v",
			cmp.Or(suffix, "raygo"), result.WindowStartS, result.WindowEndS, result.PeakDemandGPUs, result.CapacityGPUs, result.Arrived, result.Admitted,
			result.Decisions, result.UsageGPUs, result.DemandGPUs, time.Since(start).Round(time.Millisecond))
		fmt.Printf("BENCH trace_gpu_allocation_pct%s %.2f %%\n", suffix, result.AllocationPct)
		for _, tenant := range []string{"prod", "research", "dev"} {
			fmt.Printf("BENCH trace_wait_p50_s_%s%s %.1f s\n", tenant, suffix, result.WaitP50S[tenant])
			fmt.Printf("BENCH trace_wait_p95_s_%s%s %.1f s\n", tenant, suffix, result.WaitP95S[tenant])
		}
		fmt.Printf("BENCH trace_jain%s %.3f\n", suffix, result.Jain)
	}
}
