package gpusim_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/raygo-dev/raygo/raylet/gpu"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim/gpusimtest"
)

// newManager is a MIG manager on lib, closed when the test ends.
func newManager(t *testing.T, lib nvml.Interface) *gpu.MIGManager {
	t.Helper()
	manager, err := gpu.NewMIGManager(lib)
	if err != nil {
		t.Fatalf("NewMIGManager: %v", err)
	}
	t.Cleanup(func() { _ = manager.Close() })
	return manager
}

// GetGpuInstanceProfileInfo answers the hardware profile ids and sizes, and the possible
// placements are the real table's, on every model.
func TestSimulatedMIGProfilesAreTheHardwareTables(t *testing.T) {
	for _, m := range gpusimtest.MIGMachines {
		dev := gpusimtest.Device(t, gpusimtest.SimulateMIG(t, m.Machine, gpusim.SimOptions{}), 0)
		var got []int
		for profileEnum := 0; profileEnum < nvml.GPU_INSTANCE_PROFILE_COUNT; profileEnum++ {
			info, ret := dev.GetGpuInstanceProfileInfo(profileEnum)
			if ret == nvml.ERROR_NOT_SUPPORTED {
				continue
			}
			if ret != nvml.SUCCESS {
				t.Fatalf("%s: GetGpuInstanceProfileInfo(%d): %v", m.Machine, profileEnum, ret)
			}
			profile, ok := m.Model.ProfileByID(int(info.Id))
			if !ok {
				t.Fatalf("%s: enum %d answered profile id %d, not in the %s table", m.Machine, profileEnum, info.Id, m.Model)
			}
			got = append(got, profile.ID)
			if int(info.SliceCount) != profile.ComputeSlices || int(info.InstanceCount) != profile.MaxInstances {
				t.Errorf("%s %s: slices %d, instances %d; want %d, %d", m.Machine, profile.Name, info.SliceCount, info.InstanceCount, profile.ComputeSlices, profile.MaxInstances)
			}
			placements, ret := dev.GetGpuInstancePossiblePlacements(&info)
			if ret != nvml.SUCCESS {
				t.Fatalf("%s %s: GetGpuInstancePossiblePlacements: %v", m.Machine, profile.Name, ret)
			}
			var starts []int
			for _, p := range placements {
				starts = append(starts, int(p.Start))
				if int(p.Size) != profile.MemorySlices {
					t.Errorf("%s %s: placement size %d, want %d", m.Machine, profile.Name, p.Size, profile.MemorySlices)
				}
			}
			if !slices.Equal(starts, profile.ValidStarts()) {
				t.Errorf("%s %s: starts %v, want %v", m.Machine, profile.Name, starts, profile.ValidStarts())
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, []int{0, 5, 9, 14, 15, 19, 20}) {
			t.Errorf("%s: profile ids %v", m.Machine, got)
		}
		if _, ret := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_COUNT); ret != nvml.ERROR_INVALID_ARGUMENT {
			t.Errorf("%s: profile enum past the last: %v, want ERROR_INVALID_ARGUMENT", m.Machine, ret)
		}
	}
}

// The driver refuses what hardware refuses, with hardware's return codes.
func TestSimulatedMIGRefusesWhatHardwareRefuses(t *testing.T) {
	dev := gpusimtest.Device(t, gpusimtest.SimulateMIG(t, "dgx-h100", gpusim.SimOptions{}), 0)
	gi3g := gpusimtest.ProfileInfo(t, dev, 9)
	if _, ret := gpusimtest.CreateGI(dev, gi3g, 4, 4); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Fatalf("carve with MIG mode off: %v, want ERROR_NOT_SUPPORTED", ret)
	}
	if _, ret := dev.GetGpuInstances(&gi3g); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Fatalf("GetGpuInstances with MIG mode off: %v, want ERROR_NOT_SUPPORTED", ret)
	}
	gpusimtest.EnableMIG(t, dev)
	if _, ret := gpusimtest.CreateGI(dev, gi3g, 4, 4); ret != nvml.SUCCESS {
		t.Fatalf("3g.40gb at 4: %v", ret)
	}
	me := gpusimtest.ProfileInfo(t, dev, 20)
	if _, ret := gpusimtest.CreateGI(dev, me, 0, 1); ret != nvml.SUCCESS {
		t.Fatalf("1g.10gb+me at 0: %v", ret)
	}
	for _, c := range []struct {
		name        string
		profileID   int
		start, size int
		want        nvml.Return
	}{
		{"2g.20gb overlapping the 3g at [4,8)", 14, 4, 2, nvml.ERROR_INSUFFICIENT_RESOURCES},
		{"1g.10gb on the +me slice", 19, 0, 1, nvml.ERROR_INSUFFICIENT_RESOURCES},
		{"a second +me", 20, 1, 1, nvml.ERROR_INSUFFICIENT_RESOURCES},
		{"a second 3g.40gb, over the +me", 9, 0, 4, nvml.ERROR_INSUFFICIENT_RESOURCES},
		{"2g.20gb at an odd start", 14, 1, 2, nvml.ERROR_INVALID_ARGUMENT},
		{"1g.20gb at 7", 15, 7, 2, nvml.ERROR_INVALID_ARGUMENT},
		{"7g.80gb at 1", 0, 1, 8, nvml.ERROR_INVALID_ARGUMENT},
		{"a size not the profile's", 19, 1, 2, nvml.ERROR_INVALID_ARGUMENT},
		{"a start past the GPU", 19, 8, 1, nvml.ERROR_INVALID_ARGUMENT},
	} {
		if _, ret := gpusimtest.CreateGI(dev, gpusimtest.ProfileInfo(t, dev, c.profileID), c.start, c.size); ret != c.want {
			t.Errorf("%s: %v, want %v", c.name, ret, c.want)
		}
	}
	if _, ret := dev.CreateGpuInstanceWithPlacement(&nvml.GpuInstanceProfileInfo{Id: 42}, &nvml.GpuInstancePlacement{Size: 1}); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("unknown profile id: %v, want ERROR_INVALID_ARGUMENT", ret)
	}
	// What remains, [1,4), takes one 2g at 2 and one 1g at 1: not 2g at 0.
	for id, want := range map[int]int{19: 3, 14: 1, 15: 1, 9: 0, 0: 0, 20: 0} {
		info := gpusimtest.ProfileInfo(t, dev, id)
		if got, ret := dev.GetGpuInstanceRemainingCapacity(&info); ret != nvml.SUCCESS || got != want {
			t.Errorf("remaining capacity of profile %d: %d (%v), want %d", id, got, ret, want)
		}
	}
}

// Compute instances go before their GPU instance; MIG mode stays on while instances exist;
// a destroyed instance's handles fail.
func TestSimulatedMIGDestroyOrder(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-a100-80gb", gpusim.SimOptions{})
	dev := gpusimtest.Device(t, lib, 3)
	gpusimtest.EnableMIG(t, dev)
	gi, ret := gpusimtest.CreateGI(dev, gpusimtest.ProfileInfo(t, dev, 14), 2, 2)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ciProfile, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("a 3-slice compute profile in a 2g instance: %v, want ERROR_NOT_SUPPORTED", ret)
	}
	ci, ret := gi.CreateComputeInstance(&ciProfile)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := gi.CreateComputeInstance(&ciProfile); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("a second full compute instance: %v, want ERROR_INSUFFICIENT_RESOURCES", ret)
	}
	if ret := gi.Destroy(); ret != nvml.ERROR_IN_USE {
		t.Fatalf("destroying a GPU instance with a compute instance: %v, want ERROR_IN_USE", ret)
	}
	if _, ret := dev.SetMigMode(nvml.DEVICE_MIG_DISABLE); ret != nvml.ERROR_IN_USE {
		t.Fatalf("MIG mode off with instances: %v, want ERROR_IN_USE", ret)
	}
	if ret := ci.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if ret := ci.Destroy(); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("destroying a compute instance twice: %v, want ERROR_INVALID_ARGUMENT", ret)
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := gi.GetInfo(); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("GetInfo of a destroyed GPU instance: %v, want ERROR_INVALID_ARGUMENT", ret)
	}
	state, _ := gpusim.SimulatedMIGState(lib)
	if len(state[3].GPUInstances) != 0 {
		t.Errorf("GPU 3 still has %+v", state[3].GPUInstances)
	}
	if activation, ret := dev.SetMigMode(nvml.DEVICE_MIG_DISABLE); ret != nvml.SUCCESS || activation != nvml.SUCCESS {
		t.Errorf("MIG mode off once empty: %v, %v", activation, ret)
	}
}

// MIG devices: one per compute instance, "MIG-" UUIDs unique across GPUs and carvings,
// the same every time they are listed, found by UUID through the library.
func TestSimulatedMIGDeviceUUIDs(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-h100", gpusim.SimOptions{})
	seen := map[string]bool{}
	for round := 0; round < 2; round++ {
		for i := 0; i < 2; i++ {
			dev := gpusimtest.Device(t, lib, i)
			if round == 0 {
				gpusimtest.EnableMIG(t, dev)
			}
			info := gpusimtest.ProfileInfo(t, dev, 19)
			gi, ret := gpusimtest.CreateGI(dev, info, 3, 1)
			if ret != nvml.SUCCESS {
				t.Fatal(ret)
			}
			ciProfile, _ := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
			ci, ret := gi.CreateComputeInstance(&ciProfile)
			if ret != nvml.SUCCESS {
				t.Fatal(ret)
			}
			if count, _ := dev.GetMaxMigDeviceCount(); count != 7 {
				t.Errorf("GetMaxMigDeviceCount = %d, want 7", count)
			}
			migDev, ret := dev.GetMigDeviceHandleByIndex(0)
			if ret != nvml.SUCCESS {
				t.Fatal(ret)
			}
			uuid, _ := migDev.GetUUID()
			again, _ := dev.GetMigDeviceHandleByIndex(0)
			if againUUID, _ := again.GetUUID(); againUUID != uuid {
				t.Errorf("MIG device UUID changed between listings: %s, %s", uuid, againUUID)
			}
			if !strings.HasPrefix(uuid, "MIG-") || len(uuid) != len("MIG-")+36 || seen[uuid] {
				t.Errorf("MIG device UUID %q: malformed or repeated", uuid)
			}
			seen[uuid] = true
			if isMIG, _ := migDev.IsMigDeviceHandle(); !isMIG {
				t.Error("IsMigDeviceHandle = false on a MIG device")
			}
			if parent, _ := migDev.GetDeviceHandleFromMigDeviceHandle(); parent != dev {
				t.Error("GetDeviceHandleFromMigDeviceHandle is not the GPU")
			}
			if name, _ := migDev.GetName(); name != "NVIDIA H100 80GB HBM3 MIG 1g.10gb" {
				t.Errorf("MIG device name %q", name)
			}
			if byUUID, ret := lib.DeviceGetHandleByUUID(uuid); ret != nvml.SUCCESS || byUUID != migDev {
				t.Errorf("DeviceGetHandleByUUID(%s) = %v, %v", uuid, byUUID, ret)
			}
			if _, ret := dev.GetMigDeviceHandleByIndex(1); ret != nvml.ERROR_NOT_FOUND {
				t.Errorf("GetMigDeviceHandleByIndex(1) with one device: %v, want ERROR_NOT_FOUND", ret)
			}
			if ret := ci.Destroy(); ret != nvml.SUCCESS {
				t.Fatal(ret)
			}
			if _, ret := migDev.GetUUID(); ret != nvml.ERROR_INVALID_ARGUMENT {
				t.Errorf("GetUUID of a destroyed MIG device: %v, want ERROR_INVALID_ARGUMENT", ret)
			}
			if _, ret := lib.DeviceGetHandleByUUID(uuid); ret != nvml.ERROR_NOT_FOUND {
				t.Errorf("DeviceGetHandleByUUID of a destroyed MIG device: %v, want ERROR_NOT_FOUND", ret)
			}
			if ret := gi.Destroy(); ret != nvml.SUCCESS {
				t.Fatal(ret)
			}
		}
	}
}

func TestSimulatedMIGUnsupportedOnGB200(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "gb200-nvl72", gpusim.SimOptions{})
	dev := gpusimtest.Device(t, lib, 0)
	if _, ret := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetGpuInstanceProfileInfo: %v, want ERROR_NOT_SUPPORTED", ret)
	}
	if state, ok := gpusim.SimulatedMIGState(lib); !ok || len(state) != 0 {
		t.Errorf("SimulatedMIGState = %v, %v; want none, true", state, ok)
	}
	if _, ok := gpusim.SimulatedMIGState(nvml.New()); ok {
		t.Error("SimulatedMIGState of the real library: ok")
	}
}

// The state file: another process reads it; a node restarted with the same seed finds
// its instances; another seed's file is refused.
func TestSimulatedMIGStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mig-node-1.json")
	lib := gpusimtest.SimulateMIG(t, "dgx-h100", gpusim.SimOptions{Seed: "node-1", MIGStateFile: path})
	manager := newManager(t, lib)
	if err := manager.SetMode(2, true); err != nil {
		t.Fatal(err)
	}
	carved, err := manager.Carve(2, 15, 6)
	if err != nil {
		t.Fatal(err)
	}
	state, err := gpusim.ReadSimulatedMIGState(path)
	if err != nil {
		t.Fatal(err)
	}
	inMemory, _ := gpusim.SimulatedMIGState(lib)
	if len(state) != 8 || !state[2].MIGEnabled || state[1].MIGEnabled || len(state[2].GPUInstances) != 1 {
		t.Fatalf("state file: %+v", state)
	}
	if got := state[2].GPUInstances[0]; got.ProfileID != 15 || got.Start != 6 || got.Size != 2 ||
		len(got.ComputeInstances) != 1 || got.ComputeInstances[0].DeviceUUID != carved.DeviceUUID {
		t.Errorf("state file GPU 2: %+v, carved %+v", got, carved)
	}
	if inMemory[2].GPUInstances[0].ComputeInstances[0].DeviceUUID != carved.DeviceUUID {
		t.Errorf("in-memory state %+v", inMemory[2])
	}

	restarted := gpusimtest.SimulateMIG(t, "dgx-h100", gpusim.SimOptions{Seed: "node-1", MIGStateFile: path})
	found, err := newManager(t, restarted).Instances(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0] != carved {
		t.Errorf("after a restart: %+v, want [%+v]", found, carved)
	}
	// A new carve after the restart gets a new UUID.
	again, err := newManager(t, restarted).Carve(2, 15, 4)
	if err != nil {
		t.Fatal(err)
	}
	if again.DeviceUUID == carved.DeviceUUID {
		t.Errorf("UUID %s issued twice", again.DeviceUUID)
	}

	if _, _, err := gpusim.Simulate("dgx-h100", gpusim.SimOptions{Seed: "node-2", MIGStateFile: path}); err == nil || !strings.Contains(err.Error(), "SimOptions.Seed") {
		t.Errorf("another node's state file: err = %v, want one naming SimOptions.Seed", err)
	}
	if err := os.WriteFile(path, []byte(`{"version": 1, "gpus": [{"index": 0, "uuid": "x"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gpusim.Simulate("dgx-h100", gpusim.SimOptions{Seed: "node-1", MIGStateFile: path}); err == nil {
		t.Error("a state file for other GPUs: accepted")
	}
}

// The simulated driver is safe for concurrent use: raw NVML calls on one GPU from several
// goroutines never carve overlapping instances.
func TestSimulatedMIGConcurrentCarving(t *testing.T) {
	lib := gpusimtest.SimulateMIG(t, "dgx-a100-40gb", gpusim.SimOptions{})
	dev := gpusimtest.Device(t, lib, 0)
	gpusimtest.EnableMIG(t, dev)
	info := gpusimtest.ProfileInfo(t, dev, 19)
	var wg sync.WaitGroup
	results := make([]nvml.Return, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = gpusimtest.CreateGI(dev, info, i%7, 1)
		}()
	}
	wg.Wait()
	created := 0
	for _, ret := range results {
		if ret == nvml.SUCCESS {
			created++
		} else if ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
			t.Errorf("concurrent carve: %v", ret)
		}
	}
	state, _ := gpusim.SimulatedMIGState(lib)
	if created != 7 || len(state[0].GPUInstances) != 7 {
		t.Errorf("%d carves succeeded, %d instances; want 7 (one per start)", created, len(state[0].GPUInstances))
	}
}
