package gpusim

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

func TestFillUnsetReturnsNotSupportedInsteadOfPanicking(t *testing.T) {
	d := &mock.Device{GetNameFunc: func() (string, nvml.Return) { return "kept", nvml.SUCCESS }}
	FillUnsetWithNotSupported(d)
	if name, ret := d.GetName(); name != "kept" || ret != nvml.SUCCESS {
		t.Errorf("GetName() = %q, %v; a set function must be kept", name, nvml.ErrorString(ret))
	}
	if temp, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); temp != 0 || ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetTemperature() = %d, %v; want 0, ERROR_NOT_SUPPORTED", temp, nvml.ErrorString(ret))
	}
	// Every nvml.Return of a function with several is ERROR_NOT_SUPPORTED.
	if current, pending, ret := d.GetMigMode(); current != 0 || pending != 0 || ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetMigMode() = %d, %d, %v; want 0, 0, ERROR_NOT_SUPPORTED", current, pending, nvml.ErrorString(ret))
	}
	if activation, ret := d.SetMigMode(1); activation != nvml.ERROR_NOT_SUPPORTED || ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("SetMigMode() = %v, %v; want ERROR_NOT_SUPPORTED twice", nvml.ErrorString(activation), nvml.ErrorString(ret))
	}
}

func TestSimulatedNVMLAnswersUnsetFunctionsWithNotSupported(t *testing.T) {
	for _, model := range SimulatedModels() {
		lib, _, err := Simulate(model, SimOptions{Seed: "node-1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ret := lib.GetExcludedDeviceCount(); ret != nvml.ERROR_NOT_SUPPORTED {
			t.Errorf("%s: lib.GetExcludedDeviceCount() = %v, want ERROR_NOT_SUPPORTED", model, nvml.ErrorString(ret))
		}
		dev, ret := lib.DeviceGetHandleByIndex(0)
		if ret != nvml.SUCCESS {
			t.Fatalf("%s: DeviceGetHandleByIndex(0): %v", model, nvml.ErrorString(ret))
		}
		if _, ret := dev.GetPowerUsage(); ret != nvml.ERROR_NOT_SUPPORTED {
			t.Errorf("%s: GetPowerUsage() = %v, want ERROR_NOT_SUPPORTED", model, nvml.ErrorString(ret))
		}
		// The library-level form answers as the device method does, as the real library.
		want, _ := dev.GetUUID()
		if got, ret := lib.DeviceGetUUID(dev); got != want || ret != nvml.SUCCESS {
			t.Errorf("%s: lib.DeviceGetUUID(dev) = %q, %v; dev.GetUUID() = %q", model, got, nvml.ErrorString(ret), want)
		}
		if state, ret := lib.DeviceGetNvLinkState(dev, 0); state != nvml.FEATURE_ENABLED || ret != nvml.SUCCESS {
			t.Errorf("%s: lib.DeviceGetNvLinkState(dev, 0) = %v, %v; want an active link", model, state, nvml.ErrorString(ret))
		}
		if _, ret := lib.DeviceGetUUID(nil); ret != nvml.ERROR_NOT_SUPPORTED {
			t.Errorf("%s: lib.DeviceGetUUID(nil) = %v, want ERROR_NOT_SUPPORTED", model, nvml.ErrorString(ret))
		}
	}
}

// MIG is simulated where placement has the model's MIG tables: every simulated model but
// the GB200.
func TestSimulatedMIGOnModelsWithMIGTables(t *testing.T) {
	for _, model := range SimulatedModels() {
		lib, _, err := Simulate(model, SimOptions{Seed: "node-1"})
		if err != nil {
			t.Fatal(err)
		}
		dev, _ := lib.DeviceGetHandleByIndex(0)
		_, _, ret := dev.GetMigMode()
		wantSupported := model != "gb200-nvl72"
		if (ret == nvml.SUCCESS) != wantSupported {
			t.Errorf("%s: GetMigMode() returned %v", model, nvml.ErrorString(ret))
		}
	}
}
