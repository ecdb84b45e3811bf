package gpusim

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/raylet/gpu"
)

func TestSimulateUnknownModelNamesTheValidOnes(t *testing.T) {
	_, _, err := Simulate("dgx-z9000", SimOptions{Seed: "node-1"})
	if !errors.Is(err, ErrUnknownSimulatedModel) {
		t.Fatalf("err = %v, want ErrUnknownSimulatedModel", err)
	}
	if !strings.Contains(err.Error(), `"dgx-z9000"`) {
		t.Errorf("error %q does not name the model", err)
	}
	for _, model := range SimulatedModels() {
		if !strings.Contains(err.Error(), model) {
			t.Errorf("error %q does not list %s", err, model)
		}
	}
}

func TestSimulateNeedsASeed(t *testing.T) {
	_, _, err := Simulate("dgx-h100", SimOptions{})
	if err == nil || !strings.Contains(err.Error(), "SimOptions.Seed") {
		t.Fatalf("err = %v, want one naming SimOptions.Seed", err)
	}
}

func TestSimulatedModelsListsTheIssueModels(t *testing.T) {
	got := SimulatedModels()
	for _, want := range []string{"dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "gb200-nvl72", "pcie-8gpu-nvlink-pairs"} {
		if !slices.Contains(got, want) {
			t.Errorf("SimulatedModels() = %v, missing %s", got, want)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("SimulatedModels() = %v, not sorted", got)
	}
}

// Several simulated nodes of one model share the tree, and a second write changes nothing.
func TestSimulatedSysfsIsSharedAndRewritable(t *testing.T) {
	dir := t.TempDir()
	_, first, err := Simulate("dgx-h100", SimOptions{Seed: "node-1", SysfsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, second, err := Simulate("dgx-h100", SimOptions{Seed: "node-2", SysfsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if first != second || first != filepath.Join(dir, "sysfs-dgx-h100") {
		t.Errorf("sysfs roots %q and %q, want both %q", first, second, filepath.Join(dir, "sysfs-dgx-h100"))
	}
	nics, err := os.ReadDir(filepath.Join(first, "class", "infiniband"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nics {
		names = append(names, n.Name())
	}
	if got := strings.Join(names, ","); got != "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7" {
		t.Errorf("NICs %s, want mlx5_0..7", got)
	}
}

// No SysfsDir: no tree, and discovery reports the rails unknown.
func TestSimulateWithoutSysfsDir(t *testing.T) {
	lib, root, err := Simulate("dgx-h100", SimOptions{Seed: "node-1"})
	if err != nil || root != "" {
		t.Fatalf("Simulate: root %q, err %v; want no root", root, err)
	}
	topo, err := gpu.DiscoverTopology(lib, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range topo.GPUs {
		if g.Rail != gpu.NoRail || g.NIC != "" {
			t.Errorf("GPU %d: rail %d NIC %q without sysfs", g.Index, g.Rail, g.NIC)
		}
	}
	if len(topo.Islands()) != 1 {
		t.Errorf("islands %v, want one", topo.Islands())
	}
}
