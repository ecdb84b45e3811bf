package gpu

import (
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
)

func simulateWithActivity(t *testing.T, model string) (nvml.Interface, string) {
	t.Helper()
	control := filepath.Join(t.TempDir(), gpusim.ActivityFileName)
	lib, _, err := gpusim.Simulate(model, gpusim.SimOptions{Seed: "activity-" + t.Name(), ActivityFile: control})
	if err != nil {
		t.Fatal(err)
	}
	return lib, control
}

func sampleActivity(t *testing.T, sampler *ActivitySampler) []Activity {
	t.Helper()
	activity, err := sampler.Sample()
	if err != nil {
		t.Fatal(err)
	}
	return activity
}

func writeActivity(t *testing.T, path string, gpus map[string]gpusim.SimActivity) {
	t.Helper()
	if err := gpusim.WriteSimActivity(path, gpusim.SimActivityFile{GPUs: gpus}); err != nil {
		t.Fatal(err)
	}
}

// On a DGX H100, GPM measures SM and graphics activity between two samples: the first
// sample has none, and a change of the control file shows at the next one.
func TestActivitySamplerReadsGPMOnHopper(t *testing.T) {
	lib, control := simulateWithActivity(t, "dgx-h100")
	writeActivity(t, control, map[string]gpusim.SimActivity{
		"*": {SMActive: 0.05, GrEngineActive: 0.07},
		"3": {SMActive: 0.8, GrEngineActive: 0.9, FBUsedBytes: 40 << 30},
	})
	sampler := NewActivitySampler(lib)
	defer sampler.Close()

	first := sampleActivity(t, sampler)
	if len(first) != 8 {
		t.Fatalf("%d GPUs sampled, want 8", len(first))
	}
	if first[3].HasGPM || !first[3].HasMemory || first[3].FBUsedBytes != 40<<30 || first[3].MIG != nil {
		t.Fatalf("first sample of GPU 3: %+v; want memory, no GPM yet", first[3])
	}
	second := sampleActivity(t, sampler)
	if g := second[3]; !g.HasGPM || g.SMActive != 0.8 || g.GraphicsActive != 0.9 {
		t.Fatalf("GPU 3: %+v, want GPM SM 0.8 graphics 0.9", g)
	}
	if g := second[0]; !g.HasGPM || g.SMActive != 0.05 || g.FBUsedBytes != 0 || g.Model != "NVIDIA H100 80GB HBM3" || g.UUID == "" {
		t.Fatalf("GPU 0 (the \"*\" entry): %+v", g)
	}
	if busy, ok := second[3].SMBusy(); !ok || busy != 0.8 {
		t.Fatalf("SMBusy of GPU 3 = %v, %v; want GPM's 0.8", busy, ok)
	}

	writeActivity(t, control, map[string]gpusim.SimActivity{second[3].UUID: {SMActive: 0.02}})
	third := sampleActivity(t, sampler)
	if g := third[3]; g.SMActive != 0.02 || g.FBUsedBytes != 0 {
		t.Fatalf("GPU 3 after the control file changed (by UUID): %+v", g)
	}
	if g := third[0]; g.SMActive != 0 {
		t.Fatalf("GPU 0 without an entry: %+v, want idle", g)
	}
}

// An A100 has no GPM: the sampler falls back to utilization rates, which the simulation
// derives from the graphics engine's activity.
func TestActivitySamplerUsesUtilizationRatesOnA100(t *testing.T) {
	lib, control := simulateWithActivity(t, "dgx-a100-80gb")
	writeActivity(t, control, map[string]gpusim.SimActivity{"1": {SMActive: 0.5, GrEngineActive: 0.62, FBUsedBytes: 1 << 30}})
	sampler := NewActivitySampler(lib)
	defer sampler.Close()
	for range 2 {
		activity := sampleActivity(t, sampler)
		g := activity[1]
		if g.HasGPM || !g.HasUtilization || g.Utilization != 0.62 || g.FBUsedBytes != 1<<30 {
			t.Fatalf("A100 GPU 1: %+v; want utilization 0.62, no GPM", g)
		}
		if busy, ok := g.SMBusy(); !ok || busy != 0.62 {
			t.Fatalf("SMBusy = %v, %v; want the utilization rate", busy, ok)
		}
	}
}

// A GPU in MIG mode is read per instance: GPM through GpmMigSampleGet on Hopper, with the
// instance's GPU instance id and profile name, and its own memory.
func TestActivitySamplerReadsMIGInstances(t *testing.T) {
	lib, control := simulateWithActivity(t, "dgx-h100")
	manager, err := NewMIGManager(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer manager.Close()
	if err := manager.SetMode(0, true); err != nil {
		t.Fatal(err)
	}
	small, err := manager.Carve(0, 19, 0) // 1g.10gb
	if err != nil {
		t.Fatal(err)
	}
	large, err := manager.Carve(0, 9, 4) // 3g.40gb
	if err != nil {
		t.Fatal(err)
	}
	writeActivity(t, control, map[string]gpusim.SimActivity{
		small.DeviceUUID:                {SMActive: 0.4, GrEngineActive: 0.5, FBUsedBytes: 2 << 30},
		"0/" + strconv.Itoa(large.GIID): {SMActive: 0.7, FBUsedBytes: 3 << 30},
		"*":                             {SMActive: 0.9},
	})
	sampler := NewActivitySampler(lib)
	defer sampler.Close()
	sampleActivity(t, sampler)
	activity := sampleActivity(t, sampler)
	byInstance := map[string]Activity{}
	for _, a := range activity {
		if a.GPU == 0 {
			if a.MIG == nil {
				t.Fatalf("GPU 0 in MIG mode reported whole: %+v", a)
			}
			byInstance[a.MIG.Profile] = a
		}
	}
	if len(byInstance) != 2 || len(activity) != 9 {
		t.Fatalf("%d activities, MIG instances %v; want 7 GPUs and 2 instances", len(activity), byInstance)
	}
	s, l := byInstance["1g.10gb"], byInstance["3g.40gb"]
	if s.MIG.GPUInstanceID != small.GIID || s.MIG.DeviceUUID != small.DeviceUUID || !s.HasGPM || s.SMActive != 0.4 || s.FBUsedBytes != 2<<30 || s.HasUtilization {
		t.Errorf("1g.10gb: %+v %+v", s, s.MIG)
	}
	if l.MIG.GPUInstanceID != large.GIID || l.SMActive != 0.7 || l.FBUsedBytes != 3<<30 {
		t.Errorf("3g.40gb: %+v %+v", l, l.MIG)
	}

	// A destroyed instance leaves the sample, and its GPM buffers are freed.
	if err := manager.Destroy(0, 4); err != nil {
		t.Fatal(err)
	}
	activity = sampleActivity(t, sampler)
	if len(activity) != 8 || len(sampler.gpm) != 8 {
		t.Fatalf("after destroying one instance: %d activities, %d GPM sources; want 8 and 8", len(activity), len(sampler.gpm))
	}
}

// Without NVML the sampler reports the error once per call and calls nothing after the
// failed Init.
func TestActivitySamplerWithoutNVML(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	var calls []string
	gpusim.RecordUnsetCalls(lib, func(name string) { calls = append(calls, name) })
	sampler := NewActivitySampler(lib)
	for range 2 {
		if _, err := sampler.Sample(); !errors.Is(err, ErrNVMLUnavailable) {
			t.Fatalf("Sample without NVML: %v, want ErrNVMLUnavailable", err)
		}
	}
	sampler.Close()
	if len(calls) != 0 {
		t.Fatalf("NVML calls after a failed Init: %v", calls)
	}
}

// The real library: on a machine without the NVIDIA driver the sampler reports
// ErrNVMLUnavailable, twice, without crashing; with one it samples.
func TestActivitySamplerOnTheRealLibrary(t *testing.T) {
	sampler := NewActivitySampler(nvml.New())
	defer sampler.Close()
	for range 2 {
		if _, err := sampler.Sample(); err != nil && !errors.Is(err, ErrNVMLUnavailable) {
			t.Fatalf("Sample on the real library: %v", err)
		}
	}
}
