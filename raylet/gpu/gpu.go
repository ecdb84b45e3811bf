// Package gpu discovers a node's GPUs through NVML. With no NVIDIA driver on the machine
// (no libnvidia-ml.so), discovery reports no GPUs and makes no further NVML call: after a
// failed Init an NVML call can crash the process.
package gpu

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNVMLUnavailable means the NVML library could not be loaded or initialised.
var ErrNVMLUnavailable = errors.New("NVML unavailable")

// Device is one whole GPU as NVML reports it.
type Device struct {
	Index       int
	UUID        string
	Model       string
	MemoryBytes uint64
}

// Discover lists the GPUs of lib (nvml.New() for the real library). It returns an error
// wrapping ErrNVMLUnavailable when NVML cannot be initialised; the caller reports no GPUs.
func Discover(lib nvml.Interface) (devices []Device, err error) {
	defer func() {
		// go-nvml panics when libnvidia-ml.so is present but lacks a symbol it needs.
		if r := recover(); r != nil {
			devices, err = nil, fmt.Errorf("%w: %v", ErrNVMLUnavailable, r)
		}
	}()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: Init: %s", ErrNVMLUnavailable, nvml.ErrorString(ret))
	}
	defer lib.Shutdown()
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML DeviceGetCount: %s", nvml.ErrorString(ret))
	}
	for i := 0; i < count; i++ {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML DeviceGetHandleByIndex(%d): %s", i, nvml.ErrorString(ret))
		}
		d := Device{Index: i}
		if d.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML GetUUID(gpu %d): %s", i, nvml.ErrorString(ret))
		}
		if d.Model, ret = dev.GetName(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML GetName(gpu %d): %s", i, nvml.ErrorString(ret))
		}
		if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.MemoryBytes = mem.Total
		}
		devices = append(devices, d)
	}
	return devices, nil
}
