package gpu

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
)

const gib = 1 << 30

// simulatedTopology discovers a simulated node, failing the test on any error.
func simulatedTopology(t *testing.T, model string, opts gpusim.SimOptions) *Topology {
	t.Helper()
	if opts.SysfsDir == "" {
		opts.SysfsDir = t.TempDir()
	}
	lib, sysfsRoot, err := gpusim.Simulate(model, opts)
	if err != nil {
		t.Fatalf("gpusim.Simulate(%s): %v", model, err)
	}
	topo, err := DiscoverTopology(lib, sysfsRoot)
	if err != nil {
		t.Fatalf("DiscoverTopology(%s): %v", model, err)
	}
	return topo
}

var cliquePattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/[0-9]+$`)

func TestDiscoverTopologySimulatedModels(t *testing.T) {
	tests := []struct {
		model           string
		acceleratorType string
		memoryBytes     uint64 // per GPU, at least
		islands         [][]int
		rails           []int
		multiNodeDomain bool
	}{
		{"dgx-a100-40gb", "A100", 40 * gib, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, []int{0, 1, 2, 3, 4, 5, 6, 7}, false},
		{"dgx-a100-80gb", "A100", 80 * gib, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, []int{0, 1, 2, 3, 4, 5, 6, 7}, false},
		{"dgx-h100", "H100", 79 * gib, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, []int{0, 1, 2, 3, 4, 5, 6, 7}, false},
		// Each NVLink pair shares a PCIe switch and its one NIC.
		{"pcie-8gpu-nvlink-pairs", "H100", 79 * gib, [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, []int{0, 0, 1, 1, 2, 2, 3, 3}, false},
		{"gb200-nvl72", "GB200", 180 * gib, [][]int{{0, 1, 2, 3}}, []int{0, 1, 2, 3}, true},
	}
	if len(tests) != len(gpusim.SimulatedModels()) {
		t.Fatalf("table covers %d models, SimulatedModels has %d: %v", len(tests), len(gpusim.SimulatedModels()), gpusim.SimulatedModels())
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			topo := simulatedTopology(t, tc.model, gpusim.SimOptions{Seed: "node-1", Rack: "rack-a"})
			if len(topo.GPUs) != len(tc.rails) {
				t.Fatalf("%d GPUs, want %d", len(topo.GPUs), len(tc.rails))
			}
			if topo.AcceleratorType != tc.acceleratorType {
				t.Errorf("AcceleratorType = %q, want %q", topo.AcceleratorType, tc.acceleratorType)
			}
			if got := topo.Islands(); !reflect.DeepEqual(got, tc.islands) {
				t.Errorf("Islands() = %v, want %v", got, tc.islands)
			}
			seen := map[string]bool{}
			for i, g := range topo.GPUs {
				if g.Index != i || !strings.HasPrefix(g.UUID, "GPU-") || seen[g.UUID] {
					t.Errorf("GPU %d: index %d, UUID %q (bad or repeated)", i, g.Index, g.UUID)
				}
				seen[g.UUID] = true
				if g.MemoryBytes < tc.memoryBytes || g.MemoryBytes >= tc.memoryBytes+8*gib {
					t.Errorf("GPU %d: memory %d bytes, want about %d GiB", i, g.MemoryBytes, tc.memoryBytes/gib)
				}
				if normalizeBusID(g.PCIBusID) != g.PCIBusID || g.PCIBusID == "" {
					t.Errorf("GPU %d: PCI bus id %q not in sysfs form", i, g.PCIBusID)
				}
				if g.Rail != tc.rails[i] {
					t.Errorf("GPU %d: rail %d, want %d", i, g.Rail, tc.rails[i])
				}
				if want := "mlx5_" + string(rune('0'+tc.rails[i])); g.NIC != want {
					t.Errorf("GPU %d: NIC %q, want %q", i, g.NIC, want)
				}
			}
			if tc.multiNodeDomain {
				if !cliquePattern.MatchString(topo.NVLinkDomain) {
					t.Errorf("NVLinkDomain = %q, want <ClusterUuid>/<CliqueId>", topo.NVLinkDomain)
				}
				for _, g := range topo.GPUs {
					if g.FabricClique != topo.NVLinkDomain {
						t.Errorf("GPU %d: clique %q, node domain %q", g.Index, g.FabricClique, topo.NVLinkDomain)
					}
				}
			} else if topo.NVLinkDomain != "" {
				t.Errorf("NVLinkDomain = %q, want empty (node-local NVLink)", topo.NVLinkDomain)
			}
		})
	}
}

func TestGB200NVLinkDomainIsTheRack(t *testing.T) {
	sysfs := t.TempDir()
	a := simulatedTopology(t, "gb200-nvl72", gpusim.SimOptions{Seed: "node-a", Rack: "rack-1", SysfsDir: sysfs})
	b := simulatedTopology(t, "gb200-nvl72", gpusim.SimOptions{Seed: "node-b", Rack: "rack-1", SysfsDir: sysfs})
	c := simulatedTopology(t, "gb200-nvl72", gpusim.SimOptions{Seed: "node-c", Rack: "rack-2", SysfsDir: sysfs})
	if a.NVLinkDomain == "" || a.NVLinkDomain != b.NVLinkDomain {
		t.Errorf("same rack: domains %q and %q, want equal and set", a.NVLinkDomain, b.NVLinkDomain)
	}
	if c.NVLinkDomain == "" || c.NVLinkDomain == a.NVLinkDomain {
		t.Errorf("other rack: domain %q, rack-1's %q; want a different, set domain", c.NVLinkDomain, a.NVLinkDomain)
	}
	if a.GPUs[0].UUID == b.GPUs[0].UUID {
		t.Errorf("nodes of one rack share GPU UUID %s", a.GPUs[0].UUID)
	}
}

func TestSimulatedUUIDsFollowTheSeed(t *testing.T) {
	first := simulatedTopology(t, "dgx-h100", gpusim.SimOptions{Seed: "node-1"})
	again := simulatedTopology(t, "dgx-h100", gpusim.SimOptions{Seed: "node-1"})
	other := simulatedTopology(t, "dgx-h100", gpusim.SimOptions{Seed: "node-2"})
	uuids := map[string]bool{}
	for i := range first.GPUs {
		if first.GPUs[i].UUID != again.GPUs[i].UUID {
			t.Errorf("GPU %d: seed node-1 gave %s then %s", i, first.GPUs[i].UUID, again.GPUs[i].UUID)
		}
		uuids[first.GPUs[i].UUID] = true
	}
	for _, g := range other.GPUs {
		if uuids[g.UUID] {
			t.Errorf("seeds node-1 and node-2 share GPU UUID %s", g.UUID)
		}
	}
}

// The real library on a machine without the NVIDIA driver.
func TestDiscoverTopologyWithoutDriverReportsUnavailable(t *testing.T) {
	topo, err := DiscoverTopology(nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")), "/sys")
	if !errors.Is(err, ErrNVMLUnavailable) {
		t.Fatalf("err = %v, want ErrNVMLUnavailable", err)
	}
	if topo != nil {
		t.Fatalf("topology %+v returned with the error", topo)
	}
}

// After a failed Init nothing else may be called, not even Shutdown.
func TestDiscoverTopologyCallsNothingAfterFailedInit(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	var called []string
	gpusim.RecordUnsetCalls(lib, func(name string) { called = append(called, name) })
	if _, err := DiscoverTopology(lib, ""); !errors.Is(err, ErrNVMLUnavailable) {
		t.Fatalf("err = %v, want ErrNVMLUnavailable", err)
	}
	if _, err := Discover(lib); !errors.Is(err, ErrNVMLUnavailable) {
		t.Fatalf("Discover: err = %v, want ErrNVMLUnavailable", err)
	}
	if len(called) != 0 {
		t.Fatalf("NVML called after the failed Init: %v", called)
	}
}

// A bare dgxa100 mock panics on the NVLink, P2P and fabric functions it leaves unset;
// discovery must still list the GPUs, each without NVLink peer or rail.
func TestDiscoverTopologyOnBareMockDegrades(t *testing.T) {
	topo, err := DiscoverTopology(dgxa100.New(), t.TempDir())
	if err != nil {
		t.Fatalf("DiscoverTopology(dgxa100): %v", err)
	}
	assertNoNVLinkNoRail(t, topo, 8)
}

// ERROR_NOT_SUPPORTED from every topology function means no NVLink information.
func TestDiscoverTopologyWithoutNVLinkSupport(t *testing.T) {
	server := dgxa100.New()
	for _, d := range server.Devices {
		gpusim.FillUnsetWithNotSupported(&d.(*dgxa100.Device).Device)
	}
	topo, err := DiscoverTopology(server, "")
	if err != nil {
		t.Fatalf("DiscoverTopology: %v", err)
	}
	assertNoNVLinkNoRail(t, topo, 8)
}

func assertNoNVLinkNoRail(t *testing.T, topo *Topology, wantGPUs int) {
	t.Helper()
	if len(topo.GPUs) != wantGPUs {
		t.Fatalf("%d GPUs, want %d", len(topo.GPUs), wantGPUs)
	}
	for _, g := range topo.GPUs {
		if g.NVLinkIsland != NoIsland || g.Rail != NoRail || g.NIC != "" || g.FabricClique != "" {
			t.Errorf("GPU %d: island %d, rail %d, NIC %q, clique %q; want none", g.Index, g.NVLinkIsland, g.Rail, g.NIC, g.FabricClique)
		}
	}
	if topo.NVLinkDomain != "" || len(topo.Islands()) != 0 {
		t.Errorf("domain %q, islands %v; want none", topo.NVLinkDomain, topo.Islands())
	}
}

// Switch-attached GPUs that NVML says cannot reach each other over NVLink (different
// Fabric Manager partitions) are different islands.
func TestNVSwitchPartitionsFollowP2PStatus(t *testing.T) {
	lib, _, err := gpusim.Simulate("dgx-h100", gpusim.SimOptions{Seed: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	partition := func(d nvml.Device) int { return d.(*dgxa100.Device).Index / 4 }
	for i := range 8 {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			t.Fatalf("DeviceGetHandleByIndex(%d): %v", i, ret)
		}
		d.(*dgxa100.Device).GetP2PStatusFunc = func(other nvml.Device, _ nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			if partition(d) != partition(other) {
				return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_OK, nvml.SUCCESS
		}
	}
	topo, err := DiscoverTopology(lib, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := topo.Islands(), [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Islands() = %v, want %v", got, want)
	}
}

func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:1B:00.0": "0000:1b:00.0",
		"0000:1b:00.0":     "0000:1b:00.0",
		"00000008:01:00.1": "0008:01:00.1",
		"1b:00.0":          "0000:1b:00.0",
		"00010000:E0:00.0": "10000:e0:00.0",
		"":                 "",
		"not-a-bus-id":     "",
	} {
		if got := normalizeBusID(in); got != want {
			t.Errorf("normalizeBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAcceleratorType(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA A100-SXM4-40GB":   "A100",
		"NVIDIA A100-SXM4-80GB":   "A100",
		"NVIDIA H100 80GB HBM3":   "H100",
		"NVIDIA H100 PCIe":        "H100",
		"NVIDIA H200":             "H200",
		"NVIDIA GB200":            "GB200",
		"NVIDIA L40S":             "L40S",
		"Tesla V100-SXM2-16GB":    "V100",
		"NVIDIA GeForce RTX 4090": "GeForce-RTX-4090",
		// Whatever the driver says, the value is a valid node label (the GCS refuses others).
		"NVIDIA RTX A6000 (Ada) / 48GB":   "RTX",
		"Acme (R) Tensor/Core":            "Acme--R--Tensor-Core",
		" (weird) ":                       "weird",
		strings.Repeat("Model", 20) + "!": strings.Repeat("Model", 12) + "Mod",
	} {
		got := AcceleratorType(name)
		if got != want {
			t.Errorf("AcceleratorType(%q) = %q, want %q", name, got, want)
		}
		if err := nodelabel.CheckLabels(map[string]string{nodelabel.AcceleratorType: got}); err != nil {
			t.Errorf("AcceleratorType(%q) = %q: %v", name, got, err)
		}
	}
}
