package placement_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	"github.com/raygo-dev/raygo/placement/placementsim"
)

// TestDecisionLatencyBench is the decision-latency benchmark of `make bench`: 2,000
// mixed placement groups on 1,250 simulated DGX H100 nodes (GPUs, NVLink islands, rails
// and scalable units listed) kept about 70% busy. It prints
// "BENCH placement_decision_p99_us <value> us", then the same stream with the workload
// learned from it passed to every decision (the fragmentation scoring stage):
// "BENCH placement_decision_p99_us_workload <value> us", then the first on a fleet of
// 10,000 nodes: "BENCH placement_decision_p99_us_10000n <value> us". It is not a test
// and is skipped unless RAYGO_BENCH=1.
func TestDecisionLatencyBench(t *testing.T) {
	benchgate.Require(t)
	for _, run := range []struct {
		suffix string
		learn  bool
		nodes  int
	}{{"", false, 1250}, {"_workload", true, 1250}, {"_10000n", false, 10000}} {
		config := placementsim.DefaultLatencyConfig()
		config.LearnWorkload = run.learn
		config.Fleet.Nodes = run.nodes
		result, err := placementsim.RunDecisionLatency(config, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s decisions=%d placed=%d not_now=%d infeasible=%d p50=%v p99=%v max=%v busy_gpu_fraction=%.2f", run.suffix,
			result.Decisions, result.Placed, result.NotNow, result.Infeasible, result.P50, result.P99, result.Max, result.FinalBusyGPUFraction)
		fmt.Printf("BENCH placement_decision_p99_us%s %.1f us\n", run.suffix, result.P99Microseconds())
	}
}

// benchmarkSnapshot is the default fleet, built once per benchmark.
func benchmarkSnapshot(b *testing.B) *placement.Snapshot {
	b.Helper()
	snapshot, err := placementsim.NewFleetSnapshot(placementsim.DefaultFleetConfig())
	if err != nil {
		b.Fatal(err)
	}
	return snapshot
}

func repeatBundle(count int, bundle resources.Set) []resources.Set {
	bundles := make([]resources.Set, count)
	for i := range bundles {
		bundles[i] = bundle
	}
	return bundles
}

// BenchmarkSchedule measures one decision per strategy on the 1,250-node fleet; the
// snapshot is not changed between iterations.
func BenchmarkSchedule(b *testing.B) {
	gpuBundle := resources.Set{"GPU": 1 * resources.AmountScale, "CPU": 8 * resources.AmountScale}
	cases := []struct {
		name    string
		request placement.Request
	}{
		{"STRICT_PACK_8", placement.Request{Strategy: placement.StrategyStrictPack, Bundles: repeatBundle(8, gpuBundle)}},
		{"PACK_16", placement.Request{Strategy: placement.StrategyPack, Bundles: repeatBundle(16, gpuBundle)}},
		{"SPREAD_16", placement.Request{Strategy: placement.StrategySpread, Bundles: repeatBundle(16, gpuBundle)}},
		{"STRICT_SPREAD_8", placement.Request{Strategy: placement.StrategyStrictSpread, Bundles: repeatBundle(8, gpuBundle)}},
		{"INFEASIBLE_GPU_16", placement.Request{Strategy: placement.StrategyStrictPack, Bundles: repeatBundle(16, gpuBundle)}},
	}
	snapshot := benchmarkSnapshot(b)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				placement.Schedule(snapshot, c.request)
			}
		})
	}
}

// BenchmarkScheduleStream measures decisions of the mixed stream with plans applied, as
// TestDecisionLatencyBench, reported per decision by the testing package.
func BenchmarkScheduleStream(b *testing.B) {
	cluster := placementsim.NewCluster(benchmarkSnapshot(b))
	stream := placementsim.NewRequestStream(7, placementsim.DefaultFleetConfig().Zones)
	b.ReportAllocs()
	for b.Loop() {
		request := stream.Next()
		plan, err := placement.Schedule(cluster.Snapshot(), request)
		b.StopTimer()
		if err == nil {
			if _, err := cluster.Place(request, plan); err != nil {
				b.Fatal(err)
			}
		}
		for groups := cluster.Groups(); len(groups) > 0 && busyGPUs(cluster.Snapshot()) > 0.7; groups = groups[1:] {
			if err := cluster.Remove(groups[0].ID); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
}

func busyGPUs(snapshot *placement.Snapshot) float64 {
	total, available := snapshot.ResourceSummary()
	return 1 - float64(available["GPU"])/float64(total["GPU"])
}

// TestTopologyBench is the GPU-topology benchmark of `make bench`: seeded streams of
// tensor-parallel (STRICT_PACK) and data-parallel (SPREAD) groups scheduled
// topology-aware and topology-blind (placementsim.RunTopologyBench has the stream and the
// exact definitions), first on the fleet — 64 DGX H100 nodes in 2 scalable units
// — then on a mixed fleet that adds 16 pcie-8gpu-nvlink-pairs nodes, where NVLink islands
// smaller than a node exist. It prints exactly these lines:
//
//	BENCH topo_allreduce_gbps_ratio <aware mean all-reduce bus GB/s ÷ blind mean> x
//	BENCH topo_fragmentation_pct <free GPUs unusable by the largest pending STRICT_PACK> %
//	BENCH topo_fragmentation_pct_blind <the same for the blind run> %
//	BENCH topo_allreduce_gbps_ratio_data_parallel <the ratio over SPREAD groups alone> x
//	BENCH topo_fragmentation_mean_pct <the same as topo_fragmentation_pct, over samples every 10 steps> %
//	BENCH topo_fragmentation_mean_pct_blind <the same for the blind run> %
//	BENCH topo_allreduce_gbps_ratio_mixed_fleet … x
//	BENCH topo_fragmentation_pct_mixed_fleet … %
//	BENCH topo_fragmentation_pct_blind_mixed_fleet … %
//	BENCH topo_allreduce_gbps_ratio_data_parallel_mixed_fleet … x
//	BENCH topo_fragmentation_mean_pct_mixed_fleet … %
//	BENCH topo_fragmentation_mean_pct_blind_mixed_fleet … %
//
// It is not a test and is skipped unless RAYGO_BENCH=1. RAYGO_TOPO_STREAMS and
// RAYGO_TOPO_SEED replace the number of streams (8) and the first stream's seed (1), for
// measuring with more streams, or other ones, than `make bench` does.
func TestTopologyBench(t *testing.T) {
	benchgate.Require(t)
	base := placementsim.DefaultTopologyBenchConfig()
	for _, override := range []struct {
		env  string
		into func(n uint64)
	}{
		{"RAYGO_TOPO_STREAMS", func(n uint64) { base.Streams = int(n) }},
		{"RAYGO_TOPO_SEED", func(n uint64) { base.Seed = n }},
	} {
		if text := os.Getenv(override.env); text != "" {
			n, err := strconv.ParseUint(text, 10, 32)
			if err != nil || n == 0 {
				t.Fatalf("%s=%q: must be a whole number above 0", override.env, text)
			}
			override.into(n)
		}
	}
	dgxOnly := base
	dgxOnly.Fleet.PCIePerUnit = 0
	for _, fleet := range []struct {
		suffix string
		config placementsim.TopologyBenchConfig
	}{{"", dgxOnly}, {"_mixed_fleet", base}} {
		result, err := placementsim.RunTopologyBench(fleet.config)
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range []struct {
			name   string
			result placementsim.TopologyRunResult
		}{{"aware", result.Aware}, {"blind", result.Blind}} {
			r := run.result
			t.Logf("fleet%s %s: placed=%d gave_up=%d infeasible=%d pending_at_ends=%d busy=%.2f mean_allreduce=%.1fGB/s over %d groups, bottlenecks %v",
				fleet.suffix, run.name, r.Placed, r.GaveUp, r.Infeasible, r.PendingAtEnd, r.MeanBusyGPUFraction, r.MeanBusGBps, r.Measured, r.Bottlenecks)
			t.Logf("fleet%s %s: at the ends, islands that fit the probe: %d of %d free GPUs unusable (%.1f%%); all islands: %d of %d (%.1f%%); sampled every 10 steps: %.1f%%",
				fleet.suffix, run.name, r.UnusableGPUs, r.FreeGPUs, r.FragmentationPct, r.UnusableGPUsAllIslands, r.FreeGPUsAllIslands, r.FragmentationPctAllIslands, r.MeanFragmentationPct)
			t.Logf("fleet%s %s: data-parallel groups by GPUs per bundle and limiting hop: %v",
				fleet.suffix, run.name, r.DataParallelBottlenecks)
		}
		fmt.Printf("BENCH topo_allreduce_gbps_ratio%s %.2f x\n", fleet.suffix, result.AllReduceRatio)
		fmt.Printf("BENCH topo_fragmentation_pct%s %.1f %%\n", fleet.suffix, result.Aware.FragmentationPct)
		fmt.Printf("BENCH topo_fragmentation_pct_blind%s %.1f %%\n", fleet.suffix, result.Blind.FragmentationPct)
		fmt.Printf("BENCH topo_allreduce_gbps_ratio_data_parallel%s %.2f x\n", fleet.suffix, result.DataParallelAllReduceRatio)
		fmt.Printf("BENCH topo_fragmentation_mean_pct%s %.1f %%\n", fleet.suffix, result.Aware.MeanFragmentationPct)
		fmt.Printf("BENCH topo_fragmentation_mean_pct_blind%s %.1f %%\n", fleet.suffix, result.Blind.MeanFragmentationPct)
	}
}
