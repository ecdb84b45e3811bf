package raylet

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/raygo-dev/raygo/raylet/gpu"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
)

// A held GPU counts as idle once every sample for gpuIdleFor saw it under gpuIdleBelow;
// one sample at or above it starts the spell again, and so does a new holder.
func TestAllocatedIdleNeedsTenQuietMinutes(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held := map[string]string{"GPU-a": "pg1", "GPU-b": "pg1", "GPU-c": "pg2"}
	var idle allocatedIdle
	at := func(minutes float64, busy map[string]float64) map[string]int {
		now := start.Add(time.Duration(minutes * float64(time.Minute)))
		idle.observe(now, busy, held)
		return idle.idleByGroup(now, held)
	}
	quiet := map[string]float64{"GPU-a": 0.02, "GPU-b": 0.09, "GPU-c": 0.5}
	if got := at(0, quiet); got["pg1"] != 0 || got["pg2"] != 0 || len(got) != 2 {
		t.Fatalf("at 0 min: %v, want both groups listed with 0", got)
	}
	if got := at(9.9, quiet); got["pg1"] != 0 {
		t.Fatalf("at 9.9 min: %v, want none idle yet", got)
	}
	if got := at(10, quiet); got["pg1"] != 2 || got["pg2"] != 0 {
		t.Fatalf("at 10 min: %v, want pg1's 2 GPUs idle, pg2's busy one not", got)
	}
	// GPU b works (10 % is not idle): it leaves the count and starts over.
	if got := at(11, map[string]float64{"GPU-a": 0.02, "GPU-b": 0.10, "GPU-c": 0.5}); got["pg1"] != 1 {
		t.Fatalf("after GPU b reached 10 %%: %v, want 1", got)
	}
	if got := at(12, quiet); got["pg1"] != 1 {
		t.Fatalf("GPU b quiet again: %v, want 1", got)
	}
	if got := at(21.9, quiet); got["pg1"] != 1 {
		t.Fatalf("9.9 min after GPU b went quiet: %v, want 1", got)
	}
	if got := at(22, quiet); got["pg1"] != 2 {
		t.Fatalf("10 min after GPU b went quiet: %v, want 2", got)
	}
	// A GPU that was not measured is not idle; a GPU given to another group starts over.
	held["GPU-a"] = "pg3"
	if got := at(23, map[string]float64{"GPU-b": 0.0}); got["pg1"] != 1 || got["pg3"] != 0 {
		t.Fatalf("GPU a unmeasured and moved to pg3: %v", got)
	}
	if got := at(40, map[string]float64{"GPU-a": 0, "GPU-b": 0}); got["pg3"] != 0 {
		t.Fatalf("GPU a quiet for 18 min, but measured only since min 40: %v", got)
	}
	// A GPU no bundle holds is never counted.
	delete(held, "GPU-b")
	if got := at(60, map[string]float64{"GPU-a": 0, "GPU-b": 0}); got["pg1"] != 0 || got["pg3"] != 1 {
		t.Fatalf("GPU b released: %v", got)
	}
}

// dcgmSeries is each exported series of a DCGM metric, by "gpu" or "gpu/GPU_I_ID".
func dcgmSeries(t *testing.T, registry *prometheus.Registry, name string) map[string]*dto.Metric {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]*dto.Metric{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			key := labels["gpu"]
			if labels["GPU_I_ID"] != "" {
				key += "/" + labels["GPU_I_ID"]
			}
			series[key] = m
		}
	}
	return series
}

func activityRig(t *testing.T, model string) (*gpu.ActivitySampler, *gpuActivity, *prometheus.Registry, string, *gpu.MIGManager) {
	t.Helper()
	control := filepath.Join(t.TempDir(), gpusim.ActivityFileName)
	lib, _, err := gpusim.Simulate(model, gpusim.SimOptions{Seed: t.Name(), ActivityFile: control})
	if err != nil {
		t.Fatal(err)
	}
	manager, err := gpu.NewMIGManager(lib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = manager.Close() })
	sampler := gpu.NewActivitySampler(lib)
	t.Cleanup(sampler.Close)
	activity := &gpuActivity{}
	registry := prometheus.NewRegistry()
	registry.MustRegister(newGPUActivityCollector("node-1", activity))
	return sampler, activity, registry, control, manager
}

func sampleInto(t *testing.T, sampler *gpu.ActivitySampler, activity *gpuActivity, now time.Time, held map[string]string) []gpu.Activity {
	t.Helper()
	sample, err := sampler.Sample()
	if err != nil {
		t.Fatal(err)
	}
	activity.record(now, sample, held)
	return sample
}

// On a DGX H100 the control file's activity reaches /metrics under DCGM's names, labels
// and units; a change shows at the next sample; the held GPU left idle for 10 minutes is
// counted for its group.
func TestGPUActivityMetricsFollowTheSimulatedGPUs(t *testing.T) {
	sampler, activity, registry, control, _ := activityRig(t, "dgx-h100")
	write := func(gpus map[string]gpusim.SimActivity) {
		if err := gpusim.WriteSimActivity(control, gpusim.SimActivityFile{GPUs: gpus}); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]gpusim.SimActivity{"*": {SMActive: 0.01}, "2": {SMActive: 0.75, GrEngineActive: 0.8, FBUsedBytes: 1536 << 20}})
	start := time.Now()
	sample := sampleInto(t, sampler, activity, start, nil)
	held := map[string]string{sample[0].UUID: "pg-idle", sample[2].UUID: "pg-busy"}
	if n := len(dcgmSeries(t, registry, "DCGM_FI_PROF_SM_ACTIVE")); n != 0 {
		t.Fatalf("%d SM activity series after the first GPM sample, want none yet", n)
	}
	sampleInto(t, sampler, activity, start, held)
	sm := dcgmSeries(t, registry, "DCGM_FI_PROF_SM_ACTIVE")
	if len(sm) != 8 || sm["2"].GetGauge().GetValue() != 0.75 || sm["0"].GetGauge().GetValue() != 0.01 {
		t.Fatalf("DCGM_FI_PROF_SM_ACTIVE: %v", sm)
	}
	labels := map[string]string{}
	for _, l := range sm["2"].Label {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["UUID"] != sample[2].UUID || labels["modelName"] != "NVIDIA H100 80GB HBM3" || labels["device"] != "nvidia2" || labels["Hostname"] == "" {
		t.Fatalf("labels of GPU 2: %v", labels)
	}
	if got := dcgmSeries(t, registry, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")["2"].GetGauge().GetValue(); got != 0.8 {
		t.Fatalf("DCGM_FI_PROF_GR_ENGINE_ACTIVE of GPU 2 = %v, want 0.8", got)
	}
	if got := dcgmSeries(t, registry, "DCGM_FI_DEV_FB_USED")["2"].GetGauge().GetValue(); got != 1536 {
		t.Fatalf("DCGM_FI_DEV_FB_USED of GPU 2 = %v MiB, want 1536", got)
	}

	write(map[string]gpusim.SimActivity{"2": {SMActive: 0.3}})
	sampleInto(t, sampler, activity, start.Add(10*time.Minute), held)
	if got := dcgmSeries(t, registry, "DCGM_FI_PROF_SM_ACTIVE")["2"].GetGauge().GetValue(); got != 0.3 {
		t.Fatalf("after the control file changed, SM activity of GPU 2 = %v, want 0.3", got)
	}
	idle := map[string]float64{}
	for _, f := range must(registry.Gather()) {
		if f.GetName() == "raygo_raylet_gpus_allocated_idle" {
			for _, m := range f.Metric {
				for _, l := range m.Label {
					if l.GetName() == "placement_group_id" {
						idle[l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	if idle["pg-idle"] != 1 || idle["pg-busy"] != 0 || len(idle) != 2 {
		t.Fatalf("raygo_raylet_gpus_allocated_idle = %v, want pg-idle 1 and pg-busy 0", idle)
	}
}

// An A100 has no GPM: its activity is the utilization rate (DCGM_FI_DEV_GPU_UTIL, in %),
// which also decides idleness; MIG instances carry GPU_I_PROFILE and GPU_I_ID.
func TestGPUActivityMetricsOnA100WithMIG(t *testing.T) {
	sampler, activity, registry, control, manager := activityRig(t, "dgx-a100-80gb")
	if err := manager.SetMode(1, true); err != nil {
		t.Fatal(err)
	}
	carved, err := manager.Carve(1, 19, 0) // 1g.10gb on the A100 80GB
	if err != nil {
		t.Fatal(err)
	}
	if err := gpusim.WriteSimActivity(control, gpusim.SimActivityFile{GPUs: map[string]gpusim.SimActivity{
		"0":                              {SMActive: 0.5, GrEngineActive: 0.05},
		"1/" + strconv.Itoa(carved.GIID): {FBUsedBytes: 512 << 20},
	}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sample := sampleInto(t, sampler, activity, start, nil)
	held := map[string]string{sample[0].UUID: "pg"}
	activity.record(start, sample, held)
	sampleInto(t, sampler, activity, start.Add(gpuIdleFor), held)
	if n := len(dcgmSeries(t, registry, "DCGM_FI_PROF_SM_ACTIVE")); n != 0 {
		t.Fatalf("%d GPM series on an A100, want none", n)
	}
	util := dcgmSeries(t, registry, "DCGM_FI_DEV_GPU_UTIL")
	if len(util) != 7 || util["0"].GetGauge().GetValue() != 5 {
		t.Fatalf("DCGM_FI_DEV_GPU_UTIL: %d series, GPU 0 %v; want 7 whole GPUs, GPU 0 at 5 %%", len(util), util["0"])
	}
	instance := dcgmSeries(t, registry, "DCGM_FI_DEV_FB_USED")["1/"+strconv.Itoa(carved.GIID)]
	if instance == nil || instance.GetGauge().GetValue() != 512 {
		t.Fatalf("MIG instance memory: %v", instance)
	}
	for _, l := range instance.Label {
		if l.GetName() == "GPU_I_PROFILE" && l.GetValue() != "1g.10gb" {
			t.Fatalf("GPU_I_PROFILE %q, want 1g.10gb", l.GetValue())
		}
	}
	if _, idle := activity.snapshot(); idle["pg"] != 1 {
		t.Fatalf("GPU 0 at 5 %% utilization for %s: idle %v, want 1", gpuIdleFor, idle)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
