// Package gpusimtest is test support for code that runs on the simulated GPUs of
// package gpusim: the simulated machines with MIG and their MIG models, and the raw NVML
// calls the MIG tests make. It asks the simulation only what a program may ask real
// NVML (profiles by enum, placements by start), so a test written with it checks the
// simulation too.
package gpusimtest

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
)

// MIGMachines are the simulated machines with MIG and the MIG model of their GPUs,
// gpusim.TestMachineH200 included.
var MIGMachines = []struct {
	Machine string
	Model   mig.Model
}{
	{"dgx-a100-40gb", mig.A100_40GB},
	{"dgx-a100-80gb", mig.A100_80GB},
	{"dgx-h100", mig.H100_80GB},
	{"pcie-8gpu-nvlink-pairs", mig.H100_80GB},
	{gpusim.TestMachineH200, mig.H200_141GB},
}

// SimulateMIG builds a simulated machine; an empty opts.Seed is "node-1".
func SimulateMIG(t testing.TB, machine string, opts gpusim.SimOptions) nvml.Interface {
	t.Helper()
	if opts.Seed == "" {
		opts.Seed = "node-1"
	}
	lib, _, err := gpusim.Simulate(machine, opts)
	if err != nil {
		t.Fatalf("simulate %s: %v", machine, err)
	}
	return lib
}

// Device is GPU index of lib.
func Device(t testing.TB, lib nvml.Interface, index int) nvml.Device {
	t.Helper()
	dev, ret := lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		t.Fatalf("DeviceGetHandleByIndex(%d): %v", index, ret)
	}
	return dev
}

// ProfileInfo is the GPU instance profile with hardware id id, asked for by its enum as
// the real API is asked: the enum whose answer carries that id.
func ProfileInfo(t testing.TB, dev nvml.Device, id int) nvml.GpuInstanceProfileInfo {
	t.Helper()
	for profileEnum := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		if info, ret := dev.GetGpuInstanceProfileInfo(profileEnum); ret == nvml.SUCCESS && int(info.Id) == id {
			return info
		}
	}
	t.Fatalf("no profile enum answers profile id %d", id)
	return nvml.GpuInstanceProfileInfo{}
}

// EnableMIG turns MIG mode on for dev.
func EnableMIG(t testing.TB, dev nvml.Device) {
	t.Helper()
	if activation, ret := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS || activation != nvml.SUCCESS {
		t.Fatalf("SetMigMode(on) = %v, %v", activation, ret)
	}
}

// CreateGI creates a GPU instance of the profile at start (size memory slices).
func CreateGI(dev nvml.Device, info nvml.GpuInstanceProfileInfo, start, size int) (nvml.GpuInstance, nvml.Return) {
	return dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(start), Size: uint32(size)})
}
