package raylet

import (
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/resources"
	"google.golang.org/grpc/codes"
)

func resourceSet(t *testing.T, amounts map[string]float64) resources.Set {
	t.Helper()
	set, err := resources.SetFromFloat(amounts)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// A lease that asks for a MIG bundle's slice gets the slice's device UUID and its parent
// GPU; the slice goes to one lease at a time.
func TestMIGBundleLease(t *testing.T) {
	table := newTable(t, map[string]float64{"CPU": 8})
	const mig = "nvidia.com/mig-1g.10gb"
	id := bundleID{"pg", 0}
	table.reserved[id] = &reservation{
		generation: 1, committed: true, resources: resourceSet(t, map[string]float64{"CPU": 2, mig: 1}),
		gpuIDs: []int32{5}, mig: &migHold{gpu: 5, profileID: 19, start: 2, deviceUUID: "MIG-test-uuid"},
	}
	lease, err := table.leaseFromBundle("n", "l1", "pg", 0, resourceSet(t, map[string]float64{"CPU": 1, mig: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if lease.cudaVisibleDevices != "MIG-test-uuid" || len(lease.gpuIDs) != 1 || lease.gpuIDs[0] != 5 {
		t.Fatalf("MIG lease: CUDA_VISIBLE_DEVICES %q, GPUs %v; want the slice's UUID on GPU 5", lease.cudaVisibleDevices, lease.gpuIDs)
	}
	_, err = table.leaseFromBundle("n", "l2", "pg", 0, resourceSet(t, map[string]float64{mig: 1}))
	wantCode(t, err, codes.ResourceExhausted)
	cpuOnly, err := table.leaseFromBundle("n", "l3", "pg", 0, resourceSet(t, map[string]float64{"CPU": 1}))
	if err != nil {
		t.Fatal(err)
	}
	if cpuOnly.cudaVisibleDevices != "" || cpuOnly.gpuIDs != nil {
		t.Fatalf("CPU-only lease of a MIG bundle got %q %v", cpuOnly.cudaVisibleDevices, cpuOnly.gpuIDs)
	}
	table.releaseLease(lease)
	if _, err := table.leaseFromBundle("n", "l4", "pg", 0, resourceSet(t, map[string]float64{mig: 1})); err != nil {
		t.Fatalf("the slice after its lease was released: %v", err)
	}
	_, err = table.leaseFromNode("n", "l5", resourceSet(t, map[string]float64{mig: 1}))
	wantCode(t, err, codes.InvalidArgument, mig, "placement_group_id")
}

// Leases inside a bundle with two GPUs and a fraction share them like the node's GPUs:
// whole GPUs lowest first, fractions best fit.
func TestBundleLeaseGPUShares(t *testing.T) {
	table := newTable(t, map[string]float64{"CPU": 8, "GPU": 4})
	id := bundleID{"pg", 0}
	table.reserved[id] = &reservation{generation: 1, committed: true, resources: resourceSet(t, map[string]float64{"GPU": 2}), gpuIDs: []int32{1, 3}}
	take := func(leaseID string, gpu float64) *workerLease {
		t.Helper()
		lease, err := table.leaseFromBundle("n", leaseID, "pg", 0, resourceSet(t, map[string]float64{"GPU": gpu}))
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	quarter := take("a", 0.25)
	whole := take("b", 1)
	another := take("c", 0.5)
	if quarter.cudaVisibleDevices != "1" || whole.cudaVisibleDevices != "3" || another.cudaVisibleDevices != "1" {
		t.Fatalf("GPUs %q %q %q, want 1 (best fit), 3 (the whole free one), 1 (best fit)",
			quarter.cudaVisibleDevices, whole.cudaVisibleDevices, another.cudaVisibleDevices)
	}
	_, err := table.leaseFromBundle("n", "d", "pg", 0, resourceSet(t, map[string]float64{"GPU": 0.5}))
	wantCode(t, err, codes.ResourceExhausted)
	// The node's accounting is the bundle's, whatever its leases take.
	if got := table.available()["GPU"]; got != 2*resources.AmountScale {
		t.Fatalf("node GPU available %s, want 2", got)
	}
	delete(table.reserved, id)
	if !table.orphaned(quarter) {
		t.Fatal("a lease of a released bundle is not orphaned")
	}
}

func TestWorkerConfigValidation(t *testing.T) {
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.ExecutableCacheDir = "" }, "raylet config: ExecutableCacheDir must be set"},
		{func(c *Config) { c.WorkerStartTimeout = 0 }, "raylet config: WorkerStartTimeout must be positive"},
		{func(c *Config) { c.IdleWorkerTimeout = -time.Second }, "raylet config: IdleWorkerTimeout must be positive"},
		{func(c *Config) { c.ExecutableCacheTTL = -time.Minute }, "raylet config: ExecutableCacheTTL -1m0s must not be negative (0 keeps executables forever)"},
	} {
		cfg := DefaultConfig()
		c.change(&cfg)
		if err := cfg.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("Validate() = %v, want %q", err, c.want)
		}
	}
	if cfg := DefaultConfig(); !strings.Contains(cfg.ExecutableCacheDir, "raygo-executables-") || cfg.WorkerStartTimeout != time.Minute ||
		cfg.IdleWorkerTimeout != time.Minute || cfg.ExecutableCacheTTL != time.Hour {
		t.Errorf("defaults %q %v %v %v", cfg.ExecutableCacheDir, cfg.WorkerStartTimeout, cfg.IdleWorkerTimeout, cfg.ExecutableCacheTTL)
	}
	cfg := DefaultConfig()
	cfg.ExecutableCacheTTL = 0 // never prune
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() with ExecutableCacheTTL 0: %v", err)
	}
}

// A blocked lease lends its CPU, and only its CPU, to the other leases of its bundle and of
// the node; unblocked, it takes the CPU back at once, and the node reports nothing free
// rather than a negative amount while oversubscribed.
func TestBlockedLeaseLendsItsCPU(t *testing.T) {
	table := newTable(t, map[string]float64{"CPU": 2, "GPU": 1})
	id := bundleID{"pg", 0}
	table.reserved[id] = &reservation{generation: 1, committed: true, resources: resourceSet(t, map[string]float64{"CPU": 1, "GPU": 1}), gpuIDs: []int32{0}}
	oneCPU := resourceSet(t, map[string]float64{"CPU": 1})
	parent, err := table.leaseFromBundle("n", "parent", "pg", 0, resourceSet(t, map[string]float64{"CPU": 1, "GPU": 1}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = table.leaseFromBundle("n", "child", "pg", 0, oneCPU)
	wantCode(t, err, codes.ResourceExhausted)
	parent.blocked = true
	if _, err := table.leaseFromBundle("n", "child", "pg", 0, oneCPU); err != nil {
		t.Fatalf("a child in the bundle of a blocked parent: %v", err)
	}
	_, err = table.leaseFromBundle("n", "gpu-child", "pg", 0, resourceSet(t, map[string]float64{"GPU": 1}))
	wantCode(t, err, codes.ResourceExhausted) // the GPU stays the parent's
	parent.blocked = false                    // the bundle is oversubscribed until the child ends
	_, err = table.leaseFromBundle("n", "another", "pg", 0, oneCPU)
	wantCode(t, err, codes.ResourceExhausted)

	nodeParent, err := table.leaseFromNode("n", "node-parent", oneCPU)
	if err != nil {
		t.Fatal(err)
	}
	_, err = table.leaseFromNode("n", "node-child", oneCPU)
	wantCode(t, err, codes.ResourceExhausted)
	nodeParent.blocked = true
	nodeChild, err := table.leaseFromNode("n", "node-child", oneCPU)
	if err != nil {
		t.Fatalf("a child on the node of a blocked parent: %v", err)
	}
	nodeParent.blocked = false
	if got := table.available()["CPU"]; got != 0 {
		t.Fatalf("node CPU available while oversubscribed: %s, want 0", got)
	}
	table.releaseLease(nodeChild)
	if got := table.available()["CPU"]; got != 0 {
		t.Fatalf("node CPU available after the child: %s, want 0 (bundle 1 + parent 1 of 2)", got)
	}
}
