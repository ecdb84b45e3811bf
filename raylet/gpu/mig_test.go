package gpu

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/placement"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim/gpusimtest"
)

func newTestManager(t *testing.T, lib nvml.Interface) *MIGManager {
	t.Helper()
	manager, err := NewMIGManager(lib)
	if err != nil {
		t.Fatalf("NewMIGManager: %v", err)
	}
	t.Cleanup(func() { _ = manager.Close() })
	return manager
}

// simInstances is what the simulated driver holds on a GPU, as "profile@start" strings.
func simInstances(t *testing.T, lib nvml.Interface, gpu int) []string {
	t.Helper()
	state, ok := gpusim.SimulatedMIGState(lib)
	if !ok || gpu >= len(state) {
		t.Fatalf("no simulated MIG state for GPU %d", gpu)
	}
	var got []string
	for _, gi := range state[gpu].GPUInstances {
		got = append(got, fmt.Sprintf("%d@%d", gi.ProfileID, gi.Start))
	}
	return got
}

// Carve two layouts that use every profile, rediscover them, destroy them, on every
// simulated MIG model; the simulated driver's state follows.
func TestMIGManagerCarveAndDestroyOnEachModel(t *testing.T) {
	layouts := [][]struct{ profileID, start int }{
		{{9, 4}, {14, 2}, {19, 0}, {20, 1}}, // 3g, 2g, 1g, 1g+me: 7 compute slices
		{{5, 0}, {15, 6}, {15, 4}},          // 4g, two 1g with 2 memory slices
		{{0, 0}},                            // 7g
	}
	for _, m := range gpusimtest.MIGMachines {
		t.Run(m.Machine, func(t *testing.T) {
			lib := gpusimtest.SimulateMIG(t, m.Machine, gpusim.SimOptions{})
			manager := newTestManager(t, lib)
			const gpu = 1
			if err := manager.SetMode(gpu, true); err != nil {
				t.Fatal(err)
			}
			if on, err := manager.Mode(gpu); err != nil || !on {
				t.Fatalf("Mode = %v, %v after SetMode(on)", on, err)
			}
			for _, layout := range layouts {
				carved := map[int]MIGInstanceInfo{}
				for _, c := range layout {
					info, err := manager.Carve(gpu, c.profileID, c.start)
					if err != nil {
						t.Fatal(err)
					}
					profile, _ := m.Model.ProfileByID(c.profileID)
					if info.GPU != gpu || info.ProfileID != c.profileID || info.Start != c.start || info.Size != profile.MemorySlices ||
						info.CIID == NoComputeInstance || info.ComputeInstances != 1 || !strings.HasPrefix(info.DeviceUUID, "MIG-") {
						t.Errorf("Carve(%s at %d) = %+v", profile.Name, c.start, info)
					}
					carved[c.start] = info
				}
				found, err := manager.Instances(gpu)
				if err != nil {
					t.Fatal(err)
				}
				if len(found) != len(layout) {
					t.Fatalf("Instances = %+v, carved %+v", found, carved)
				}
				for i, info := range found {
					if i > 0 && found[i-1].Start >= info.Start {
						t.Errorf("Instances not by start: %+v", found)
					}
					if carved[info.Start] != info {
						t.Errorf("Instances found %+v, carved %+v", info, carved[info.Start])
					}
				}
				if got := simInstances(t, lib, gpu); len(got) != len(layout) {
					t.Errorf("simulated driver holds %v", got)
				}
				for _, c := range layout {
					if err := manager.Destroy(gpu, c.start); err != nil {
						t.Fatal(err)
					}
				}
				if got := simInstances(t, lib, gpu); len(got) != 0 {
					t.Errorf("after Destroy the simulated driver still holds %v", got)
				}
				if found, err := manager.Instances(gpu); err != nil || len(found) != 0 {
					t.Errorf("Instances after Destroy = %+v, %v", found, err)
				}
			}
			if err := manager.SetMode(gpu, false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMIGManagerRefusesOverlap(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-h100", gpusim.SimOptions{})
	manager := newTestManager(t, lib)
	if err := manager.SetMode(0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := manager.Carve(0, 9, 4); err != nil {
		t.Fatal(err)
	}
	_, err := manager.Carve(0, 14, 4)
	if !errors.Is(err, ErrMIGSlotsTaken) || !errors.Is(err, nvml.ERROR_INSUFFICIENT_RESOURCES) {
		t.Fatalf("overlapping carve: err = %v, want ErrMIGSlotsTaken wrapping ERROR_INSUFFICIENT_RESOURCES", err)
	}
	for _, want := range []string{"GPU 0", "profile 14 (2g.20gb)", "start 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if got := simInstances(t, lib, 0); len(got) != 1 || got[0] != "9@4" {
		t.Errorf("a refused carve changed the GPU: %v", got)
	}
	if _, err := manager.Carve(0, 20, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := manager.Carve(0, 20, 1); !errors.Is(err, ErrMIGSlotsTaken) {
		t.Errorf("a second +me: err = %v, want ErrMIGSlotsTaken", err)
	}
}

func TestMIGManagerRefusesInvalidStartsAndProfiles(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-a100-40gb", gpusim.SimOptions{})
	manager := newTestManager(t, lib)
	if err := manager.SetMode(0, true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		profileID, start int
		name             string
		validStarts      string
	}{
		{14, 1, "profile 14 (2g.10gb)", "[0 2 4]"},
		{0, 4, "profile 0 (7g.40gb)", "[0]"},
		{15, 7, "profile 15 (1g.10gb)", "[0 2 4 6]"},
		{19, -1, "profile 19 (1g.5gb)", "[0 1 2 3 4 5 6]"},
		{19, 8, "profile 19 (1g.5gb)", "[0 1 2 3 4 5 6]"},
	} {
		_, err := manager.Carve(0, c.profileID, c.start)
		if !errors.Is(err, ErrMIGInvalidStart) {
			t.Errorf("Carve(%s at %d): err = %v, want ErrMIGInvalidStart", c.name, c.start, err)
			continue
		}
		for _, want := range []string{"GPU 0", c.name, fmt.Sprintf("start %d", c.start), c.validStarts} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	}
	if _, err := manager.Carve(0, 99, 0); !errors.Is(err, ErrMIGUnknownProfile) || !strings.Contains(err.Error(), "profile 19 (1g.5gb)") {
		t.Errorf("unknown profile: err = %v, want ErrMIGUnknownProfile listing the GPU's profiles", err)
	}
	if got := simInstances(t, lib, 0); len(got) != 0 {
		t.Errorf("refused carves left %v", got)
	}
}

func TestMIGManagerModeOff(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-h100", gpusim.SimOptions{})
	manager := newTestManager(t, lib)
	_, err := manager.Carve(0, 19, 0)
	if !errors.Is(err, ErrMIGModeOff) || !strings.Contains(err.Error(), "GPU 0") {
		t.Fatalf("carve with MIG mode off: err = %v, want ErrMIGModeOff naming GPU 0", err)
	}
	if found, err := manager.Instances(0); err != nil || len(found) != 0 {
		t.Errorf("Instances with MIG mode off = %+v, %v; want none", found, err)
	}
	if err := manager.Destroy(0, 0); !errors.Is(err, ErrMIGInstanceNotFound) {
		t.Errorf("Destroy with MIG mode off: err = %v, want ErrMIGInstanceNotFound", err)
	}
	// MIG mode cannot go off under an instance.
	if err := manager.SetMode(0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := manager.Carve(0, 19, 0); err != nil {
		t.Fatal(err)
	}
	if err := manager.SetMode(0, false); !errors.Is(err, ErrMIGInUse) {
		t.Errorf("MIG mode off with an instance: err = %v, want ErrMIGInUse", err)
	}
	if err := manager.SetMode(0, true); err != nil {
		t.Errorf("SetMode to the current mode: %v", err)
	}
	// A GPU without MIG.
	gb200 := newTestManager(t, gpusimtest.SimulateMIG(t, "gb200-nvl72", gpusim.SimOptions{}))
	if err := gb200.SetMode(0, true); !errors.Is(err, ErrMIGUnsupported) {
		t.Errorf("MIG on a GB200: err = %v, want ErrMIGUnsupported", err)
	}
}

// Destroy takes the compute instance first; NVML refuses the GPU instance alone.
func TestMIGManagerDestroyOrder(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-a100-80gb", gpusim.SimOptions{})
	manager := newTestManager(t, lib)
	if err := manager.SetMode(5, true); err != nil {
		t.Fatal(err)
	}
	carved, err := manager.Carve(5, 14, 2)
	if err != nil {
		t.Fatal(err)
	}
	gi, ret := gpusimtest.Device(t, lib, 5).GetGpuInstanceById(carved.GIID)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if ret := gi.Destroy(); ret != nvml.ERROR_IN_USE {
		t.Fatalf("destroying the GPU instance before its compute instance: %v, want ERROR_IN_USE", ret)
	}
	if err := manager.Destroy(5, 0); !errors.Is(err, ErrMIGInstanceNotFound) || !strings.Contains(err.Error(), "start 0") {
		t.Errorf("Destroy where nothing starts: err = %v, want ErrMIGInstanceNotFound naming start 0", err)
	}
	if err := manager.Destroy(5, 2); err != nil {
		t.Fatal(err)
	}
	if got := simInstances(t, lib, 5); len(got) != 0 {
		t.Errorf("after Destroy: %v", got)
	}
}

// A raylet that restarts finds the instances through NVML, including a GPU instance whose
// carve stopped before its compute instance, which it can then destroy.
func TestMIGManagerRediscoversAfterRestart(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-h100", gpusim.SimOptions{})
	first, err := NewMIGManager(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.SetMode(7, true); err != nil {
		t.Fatal(err)
	}
	var carved []MIGInstanceInfo
	for _, start := range []int{0, 1, 2} {
		info, err := first.Carve(7, 19, start)
		if err != nil {
			t.Fatal(err)
		}
		carved = append(carved, info)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Instances(7); !errors.Is(err, ErrNVMLUnavailable) {
		t.Errorf("Instances after Close: err = %v", err)
	}
	// The half-carved instance: a GPU instance without a compute instance.
	dev := gpusimtest.Device(t, lib, 7)
	if _, ret := gpusimtest.CreateGI(dev, gpusimtest.ProfileInfo(t, dev, 9), 4, 4); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}

	restarted := newTestManager(t, lib)
	found, err := restarted.Instances(7)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 4 || !reflect.DeepEqual(found[:3], carved) {
		t.Fatalf("after restart: %+v, carved %+v", found, carved)
	}
	if half := found[3]; half.ProfileID != 9 || half.Start != 4 || half.CIID != NoComputeInstance || half.ComputeInstances != 0 || half.DeviceUUID != "" {
		t.Errorf("half-carved instance: %+v", half)
	}
	if err := restarted.Destroy(7, 4); err != nil {
		t.Fatal(err)
	}
	if got := simInstances(t, lib, 7); strings.Join(got, ",") != "19@0,19@1,19@2" {
		t.Errorf("after destroying the half-carved instance: %v", got)
	}
}

// failingComputeLib is a simulated NVML whose GPU instances cannot get a compute instance.
type failingComputeLib struct{ nvml.Interface }

func (l failingComputeLib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	dev, ret := l.Interface.DeviceGetHandleByIndex(i)
	return failingComputeDevice{dev}, ret
}

type failingComputeDevice struct{ nvml.Device }

func (d failingComputeDevice) CreateGpuInstanceWithPlacement(info *nvml.GpuInstanceProfileInfo, at *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	gi, ret := d.Device.CreateGpuInstanceWithPlacement(info, at)
	return failingComputeGpuInstance{gi}, ret
}

type failingComputeGpuInstance struct{ nvml.GpuInstance }

func (failingComputeGpuInstance) CreateComputeInstance(*nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
}

// A carve that cannot finish destroys its GPU instance: the GPU is left as it was.
func TestMIGManagerCarveUndoesAHalfCarve(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-h100", gpusim.SimOptions{})
	manager := newTestManager(t, failingComputeLib{lib})
	if err := manager.SetMode(0, true); err != nil {
		t.Fatal(err)
	}
	_, err := manager.Carve(0, 14, 2)
	if err == nil || !strings.Contains(err.Error(), "CreateComputeInstance") || !strings.Contains(err.Error(), "start 2") {
		t.Fatalf("err = %v, want the compute instance failure at start 2", err)
	}
	if got := simInstances(t, lib, 0); len(got) != 0 {
		t.Errorf("a failed carve left %v", got)
	}
}

// The real library without a driver: an error wrapping ErrNVMLUnavailable.
func TestNewMIGManagerWithoutDriver(t *testing.T) {
	_, err := NewMIGManager(nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")))
	if !errors.Is(err, ErrNVMLUnavailable) {
		t.Fatalf("err = %v, want ErrNVMLUnavailable", err)
	}
}

// After a failed Init, no other NVML function is called.
func TestNewMIGManagerCallsNothingAfterAFailedInit(t *testing.T) {
	var calls atomic.Int32
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	gpusim.RecordUnsetCalls(lib, func(string) { calls.Add(1) })
	if _, err := NewMIGManager(lib); !errors.Is(err, ErrNVMLUnavailable) {
		t.Fatalf("err = %v, want ErrNVMLUnavailable", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d NVML calls after the failed Init", n)
	}
}

// One manager used from many goroutines, each carving on its own GPU while others list.
func TestMIGManagerConcurrentUse(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-h100", gpusim.SimOptions{})
	manager := newTestManager(t, lib)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for gpu := 0; gpu < 8; gpu++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := manager.SetMode(gpu, true); err != nil {
				errs <- err
				return
			}
			for start := 0; start < 7; start++ {
				if _, err := manager.Carve(gpu, 19, start); err != nil {
					errs <- err
				}
				if _, err := manager.Instances((gpu + 1) % 8); err != nil {
					errs <- err
				}
			}
			for start := 0; start < 7; start++ {
				if err := manager.Destroy(gpu, start); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	state, _ := gpusim.SimulatedMIGState(lib)
	for _, g := range state {
		if len(g.GPUInstances) != 0 {
			t.Errorf("GPU %d: %+v left", g.Index, g.GPUInstances)
		}
	}
}

// The slot map a raylet builds from Instances is one placement accepts.
func TestMIGManagerInstancesMakeAValidSlotMap(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, gpusim.TestMachineH200, gpusim.SimOptions{})
	manager := newTestManager(t, lib)
	if err := manager.SetMode(0, true); err != nil {
		t.Fatal(err)
	}
	step, err := placement.PlanMIG([]placement.MIGGPU{{Index: 0, Model: mig.H200_141GB}}, "nvidia.com/mig-3g.71gb", placement.MIGBestFit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := manager.Carve(step.GPU, step.Profile.ID, step.Start); err != nil {
		t.Fatal(err)
	}
	found, err := manager.Instances(0)
	if err != nil {
		t.Fatal(err)
	}
	gpu := placement.MIGGPU{Index: 0, Model: mig.H200_141GB}
	for _, info := range found {
		gpu.Instances = append(gpu.Instances, placement.MIGInstance{ProfileID: info.ProfileID, Start: info.Start, State: placement.MIGHeld})
	}
	if err := gpu.Validate(); err != nil || len(gpu.Instances) != 1 || gpu.Instances[0].ProfileID != 9 {
		t.Errorf("slot map %v: %v", gpu, err)
	}
}
