package gpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Device is one whole GPU as NVML reports it.
type Device struct {
	Index       int
	UUID        string
	Model       string
	MemoryBytes uint64
}

// Discover lists the GPUs of lib (nvml.New() for the real library). It returns an error
// wrapping ErrNVMLUnavailable when NVML cannot be initialised; the caller reports no GPUs.
// DiscoverTopology returns the same GPUs with their NVLink islands and rails.
func Discover(lib nvml.Interface) (devices []Device, err error) {
	err = withNVML(lib, func() error {
		devices, _, err = listDevices(lib)
		return err
	})
	return devices, err
}

// withNVML runs discover between lib.Init and lib.Shutdown. When Init fails nothing else
// is called, not even Shutdown: after a failed Init an NVML call can crash the process.
func withNVML(lib nvml.Interface, discover func() error) (err error) {
	defer func() {
		// go-nvml panics when libnvidia-ml.so is present but lacks a symbol it needs.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrNVMLUnavailable, r)
		}
	}()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("%w: Init: %s", ErrNVMLUnavailable, nvml.ErrorString(ret))
	}
	defer lib.Shutdown()
	return discover()
}

// hasSymbol reports whether the loaded libnvidia-ml.so exports symbol. go-nvml binds
// symbols lazily, and calling one that an old driver lacks can abort the process in the
// dynamic linker, where no recover reaches.
func hasSymbol(lib nvml.Interface, symbol string) (found bool) {
	defer func() {
		// A mock without Extensions: assume present; callers guard the call itself.
		if recover() != nil {
			found = true
		}
	}()
	return lib.Extensions().LookupSymbol(symbol) == nil
}

// listDevices returns the GPUs in NVML index order with their handles, for the queries
// that follow.
func listDevices(lib nvml.Interface) ([]Device, []nvml.Device, error) {
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("NVML DeviceGetCount: %s", nvml.ErrorString(ret))
	}
	devices := make([]Device, 0, count)
	handles := make([]nvml.Device, 0, count)
	for i := 0; i < count; i++ {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, nil, fmt.Errorf("NVML DeviceGetHandleByIndex(%d): %s", i, nvml.ErrorString(ret))
		}
		d := Device{Index: i}
		if d.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
			return nil, nil, fmt.Errorf("NVML GetUUID(gpu %d): %s", i, nvml.ErrorString(ret))
		}
		if d.Model, ret = dev.GetName(); ret != nvml.SUCCESS {
			return nil, nil, fmt.Errorf("NVML GetName(gpu %d): %s", i, nvml.ErrorString(ret))
		}
		if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.MemoryBytes = mem.Total
		}
		devices = append(devices, d)
		handles = append(handles, dev)
	}
	return devices, handles, nil
}
