package gpu

import (
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// The real library on a machine without the NVIDIA driver: discovery must fail cleanly.
func TestDiscoverWithoutDriverReportsUnavailable(t *testing.T) {
	devices, err := Discover(nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")))
	if !errors.Is(err, ErrNVMLUnavailable) {
		t.Fatalf("Discover without a driver: err = %v, want ErrNVMLUnavailable", err)
	}
	if len(devices) != 0 {
		t.Fatalf("Discover without a driver returned %d devices", len(devices))
	}
}

func TestDiscoverDGXA100Mock(t *testing.T) {
	devices, err := Discover(dgxa100.New())
	if err != nil {
		t.Fatalf("Discover(dgxa100): %v", err)
	}
	if len(devices) != 8 {
		t.Fatalf("Discover(dgxa100) found %d GPUs, want 8", len(devices))
	}
	seen := map[string]bool{}
	for i, d := range devices {
		if d.Index != i || d.UUID == "" || seen[d.UUID] {
			t.Fatalf("device %d: %+v (index or UUID wrong or repeated)", i, d)
		}
		seen[d.UUID] = true
		if d.MemoryBytes == 0 {
			t.Errorf("device %d: memory 0", i)
		}
	}
}
