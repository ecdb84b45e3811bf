package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pciTree builds a sysfs tree by hand, independent of the simulator's writer.
type pciTree struct {
	t    *testing.T
	root string
}

func newPCITree(t *testing.T) *pciTree { return &pciTree{t: t, root: t.TempDir()} }

// device creates devices/<path> and links bus/pci/devices/<last element> to it.
func (p *pciTree) device(path string) {
	p.t.Helper()
	dir := filepath.Join(p.root, "devices", path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	p.link(filepath.Join("bus", "pci", "devices", filepath.Base(path)), filepath.Join("devices", path))
}

// nic creates the device at path and the InfiniBand device name on it, in the kernel's
// layout: class/infiniband/<name> -> devices/.../infiniband/<name>, whose device -> ../../.
func (p *pciTree) nic(name, path string) {
	p.t.Helper()
	p.device(path)
	ibDir := filepath.Join("devices", path, "infiniband", name)
	if err := os.MkdirAll(filepath.Join(p.root, ibDir), 0o755); err != nil {
		p.t.Fatal(err)
	}
	p.link(filepath.Join(ibDir, "device"), filepath.Join("devices", path))
	p.link(filepath.Join("class", "infiniband", name), ibDir)
}

func (p *pciTree) link(link, target string) {
	p.t.Helper()
	abs := filepath.Join(p.root, link)
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		p.t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Dir(abs), filepath.Join(p.root, target))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.Symlink(rel, abs); err != nil {
		p.t.Fatal(err)
	}
}

// behindSwitch is the path of the endpoint on bus endpointBus behind downstream port port
// of the PCIe switch under root complex 0000:<rootBus>: root port rootBus:01.0, switch
// upstream port (rootBus+1):00.0, downstream ports on rootBus+2.
func behindSwitch(rootBus, port, endpointBus int) string {
	bdf := func(bus, device int) string { return fmt.Sprintf("0000:%02x:%02x.0", bus, device) }
	return strings.Join([]string{
		fmt.Sprintf("pci0000:%02x", rootBus), bdf(rootBus, 1), bdf(rootBus+1, 0), bdf(rootBus+2, port), bdf(endpointBus, 0),
	}, "/")
}

func TestMapRailsHandMadeTrees(t *testing.T) {
	tests := []struct {
		name  string
		build func(*pciTree)
		gpus  []string
		want  []railAssignment
	}{
		{
			// Four switches with a NIC each; the one GPU shares the switch of NIC 3, and a
			// storage NIC hangs off the root complex of switch 0.
			name: "GPU behind NIC 3's switch",
			build: func(p *pciTree) {
				for i := 0; i < 4; i++ {
					p.nic(fmt.Sprintf("mlx5_%d", i), behindSwitch(0x10+0x20*i, 1, 0x14+0x20*i))
				}
				p.nic("mlx5_4", "pci0000:10/0000:10:02.0/0000:1a:00.0")
				p.device(behindSwitch(0x70, 0, 0x73))
			},
			gpus: []string{"0000:73:00.0"},
			want: []railAssignment{{rail: 3, nic: "mlx5_3"}},
		},
		{
			// DGX A100: two GPUs and two NICs behind one switch pair up in bus/name order.
			name: "two GPUs and two NICs behind one switch",
			build: func(p *pciTree) {
				p.nic("mlx5_1", behindSwitch(0x07, 3, 0x0d))
				p.nic("mlx5_0", behindSwitch(0x07, 2, 0x0c))
				p.device(behindSwitch(0x07, 1, 0x0b))
				p.device(behindSwitch(0x07, 0, 0x0a))
			},
			gpus: []string{"0000:0a:00.0", "0000:0b:00.0"},
			want: []railAssignment{{rail: 0, nic: "mlx5_0"}, {rail: 1, nic: "mlx5_1"}},
		},
		{
			// Rails follow natural name order: mlx5_10 is the eleventh NIC, not the third.
			name: "natural NIC order",
			build: func(p *pciTree) {
				for i := 0; i < 12; i++ {
					p.nic(fmt.Sprintf("mlx5_%d", i), behindSwitch(0x10*(i+1), 1, 0x10*(i+1)+4))
				}
				p.device(behindSwitch(0xb0, 0, 0xb3))
			},
			gpus: []string{"0000:b3:00.0"},
			want: []railAssignment{{rail: 10, nic: "mlx5_10"}},
		},
		{
			name: "GPU missing from sysfs, GPU without bus id",
			build: func(p *pciTree) {
				p.nic("mlx5_0", behindSwitch(0x10, 1, 0x14))
			},
			gpus: []string{"0000:99:00.0", ""},
			want: []railAssignment{{rail: NoRail}, {rail: NoRail}},
		},
		{
			name:  "no InfiniBand NICs",
			build: func(p *pciTree) { p.device(behindSwitch(0x10, 0, 0x13)) },
			gpus:  []string{"0000:13:00.0"},
			want:  []railAssignment{{rail: NoRail}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree := newPCITree(t)
			tc.build(tree)
			got := mapRails(tree.root, tc.gpus)
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Errorf("GPU %s: %+v, want %+v", tc.gpus[i], got[i], tc.want[i])
				}
			}
		})
	}
}

func TestMapRailsWithoutSysfs(t *testing.T) {
	for _, root := range []string{"", filepath.Join(t.TempDir(), "absent")} {
		got := mapRails(root, []string{"0000:1b:00.0"})
		if got[0] != (railAssignment{rail: NoRail}) {
			t.Errorf("mapRails(%q) = %+v, want no rail", root, got[0])
		}
	}
}
