package gpu

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// railAssignment is one GPU's closest NIC and its rail.
type railAssignment struct {
	rail int
	nic  string
}

// mapRails finds each GPU's closest InfiniBand NIC in the PCI tree under sysfsRoot and
// its rail. NVML does not list NICs, so this reads sysfs:
// <root>/bus/pci/devices/<bdf> and <root>/class/infiniband/<nic>/device are symlinks into
// <root>/devices/pciDDDD:BB/<root port>/<bridge>/.../<device>, where each directory below
// the root complex is a PCI bridge or device; the path is the device's chain of upstream
// bridges.
//
//  1. The distance between a GPU and a NIC is the number of hops through their closest
//     common ancestor: a GPU and NIC behind one PCIe switch are 4 apart, across the CPU more.
//  2. A GPU's candidates are the NICs at its smallest distance. GPUs that share the same
//     candidates (two GPUs and two NICs behind one switch, as on DGX A100, or a flat
//     virtual-machine tree) are paired in order: k-th GPU by PCI bus id ↔ k-th NIC by name,
//     wrapping when there are fewer NICs than GPUs.
//  3. A GPU's rail is its NIC's position among all the node's InfiniBand NICs in natural
//     name order (mlx5_2 before mlx5_10), so GPU i ↔ NIC i ↔ rail i on rail-optimized
//     nodes. A rail is a label matched across nodes: it depends only on the NICs, so it
//     stays put when a GPU is missing, and identical machines agree on it. NICs that serve
//     no GPU still take a position: storage NICs named between compute NICs (mlx5_4 and
//     mlx5_5 on a DGX A100) leave gaps in the rail numbers (0-3, 6-9).
//
// A GPU that sysfs does not show, or a node without InfiniBand NICs (sysfsRoot "" included),
// gets NoRail and no NIC.
func mapRails(sysfsRoot string, busIDs []string) []railAssignment {
	out := make([]railAssignment, len(busIDs))
	for i := range out {
		out[i] = railAssignment{rail: NoRail}
	}
	if sysfsRoot == "" {
		return out
	}
	nics := listNICs(sysfsRoot)
	if len(nics) == 0 {
		return out
	}
	names := make([]string, 0, len(nics))
	for name := range nics {
		names = append(names, name)
	}
	slices.SortFunc(names, compareNatural)

	// GPUs grouped by their candidate NICs, key = candidate names joined.
	candidates := map[string][]string{}
	groups := map[string][]int{}
	for i, busID := range busIDs {
		if busID == "" {
			continue
		}
		gpuPath, ok := resolvePath(filepath.Join(sysfsRoot, "bus", "pci", "devices", busID))
		if !ok {
			continue
		}
		best, nearest := -1, []string(nil)
		for _, name := range names {
			d := pciDistance(gpuPath, nics[name])
			switch {
			case best < 0 || d < best:
				best, nearest = d, []string{name}
			case d == best:
				nearest = append(nearest, name)
			}
		}
		key := strings.Join(nearest, "\x00")
		candidates[key] = nearest
		groups[key] = append(groups[key], i)
	}
	for key, members := range groups {
		slices.SortFunc(members, func(a, b int) int { return strings.Compare(busIDs[a], busIDs[b]) })
		nearest := candidates[key]
		for k, i := range members {
			out[i].nic = nearest[k%len(nearest)]
			out[i].rail = slices.Index(names, out[i].nic)
		}
	}
	return out
}

// listNICs maps each InfiniBand device name to the path components of its PCI device.
func listNICs(sysfsRoot string) map[string][]string {
	classDir := filepath.Join(sysfsRoot, "class", "infiniband")
	entries, err := os.ReadDir(classDir)
	if err != nil {
		return nil
	}
	nics := map[string][]string{}
	for _, e := range entries {
		if path, ok := resolvePath(filepath.Join(classDir, e.Name(), "device")); ok {
			nics[e.Name()] = path
		}
	}
	return nics
}

// resolvePath follows symlinks and splits the real path into its components.
func resolvePath(path string) ([]string, bool) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, false
	}
	resolved, err = filepath.Abs(resolved)
	if err != nil {
		return nil, false
	}
	return strings.Split(filepath.ToSlash(resolved), "/"), true
}

// pciDistance counts the hops from a up to the closest common ancestor and down to b.
func pciDistance(a, b []string) int {
	common := 0
	for common < len(a) && common < len(b) && a[common] == b[common] {
		common++
	}
	return len(a) + len(b) - 2*common
}

// compareNatural orders names by their text, then by their trailing number: mlx5_2 before
// mlx5_10.
func compareNatural(a, b string) int {
	aText, aNum := splitTrailingNumber(a)
	bText, bNum := splitTrailingNumber(b)
	if c := strings.Compare(aText, bText); c != 0 {
		return c
	}
	if aNum != bNum {
		if aNum < bNum {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func splitTrailingNumber(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(s[i:])
	if err != nil {
		return s, -1
	}
	return s[:i], n
}
