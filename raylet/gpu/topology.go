package gpu

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NoIsland is the NVLinkIsland of a GPU without an NVLink peer; NoRail is the Rail of a GPU
// whose closest NIC is unknown. Both match the -1 of GPUInfo in protos/common.proto.
const (
	NoIsland = -1
	NoRail   = -1
)

// Topology is what the raylet reports about its GPUs: each GPU with its NVLink island and
// InfiniBand rail, and the node's multi-node NVLink domain.
type Topology struct {
	// GPUs in NVML index order.
	GPUs []GPU
	// NVLinkDomain is "<ClusterUuid>/<CliqueId>" when every GPU of the node completed its
	// NVLink fabric registration in the same clique (a GB200 NVL72 rack); empty when NVLink
	// is node-local or absent.
	NVLinkDomain string
	// AcceleratorType is Ray's accelerator_type of GPU 0 ("A100", "H100", "H200", "GB200"),
	// the value of the ray.io/accelerator-type label; empty without GPUs.
	AcceleratorType string
}

// GPU is one whole GPU with its place in the node's NVLink and PCIe topology.
type GPU struct {
	Device
	// PCIBusID in sysfs form, "0000:1b:00.0"; empty when NVML does not report it.
	PCIBusID string
	// NVLinkIsland numbers the node's islands 0, 1, ... in order of their lowest GPU index;
	// NoIsland when the GPU has no NVLink peer. With NVLinkDomain set, every GPU of the node
	// is in island 0, which spans the domain's nodes.
	NVLinkIsland int
	// Rail is the position of the GPU's closest NIC among the node's InfiniBand NICs in
	// natural name order (see mapRails); NoRail when sysfs does not say.
	Rail int
	// NIC is the closest InfiniBand NIC, e.g. "mlx5_0"; empty when unknown.
	NIC string
	// FabricClique is this GPU's "<ClusterUuid>/<CliqueId>"; empty when it has none.
	FabricClique string
}

// Islands returns the GPU indices of each NVLink island, indexed by island number.
func (t *Topology) Islands() [][]int {
	var islands [][]int
	for _, g := range t.GPUs {
		if g.NVLinkIsland == NoIsland {
			continue
		}
		for len(islands) <= g.NVLinkIsland {
			islands = append(islands, nil)
		}
		islands[g.NVLinkIsland] = append(islands[g.NVLinkIsland], g.Index)
	}
	return islands
}

// DiscoverTopology lists the GPUs of lib (nvml.New() for the real library) with their NVLink
// islands, fabric clique and, from the PCI tree under sysfsRoot ("/sys" on a real node, ""
// to skip), their closest NIC and rail. It returns an error wrapping ErrNVMLUnavailable when
// NVML cannot be initialised, and then makes no other NVML call.
//
// Topology queries that the driver or GPU does not support (ERROR_NOT_SUPPORTED, a symbol
// missing from an old libnvidia-ml.so, an unset mock function) leave the GPU without that
// information: no NVLink peer, no clique, no rail. Only failing to list the GPUs is an error.
func DiscoverTopology(lib nvml.Interface, sysfsRoot string) (*Topology, error) {
	topo := &Topology{}
	err := withNVML(lib, func() error {
		devices, handles, err := listDevices(lib)
		if err != nil {
			return err
		}
		supported := supportedQueries(lib)
		topo.GPUs = make([]GPU, len(devices))
		for i, d := range devices {
			topo.GPUs[i] = GPU{Device: d, NVLinkIsland: NoIsland, Rail: NoRail}
			if pci, ret := optional(handles[i].GetPciInfo); ret == nvml.SUCCESS {
				topo.GPUs[i].PCIBusID = pciBusID(pci)
			}
			if supported.fabricInfo {
				topo.GPUs[i].FabricClique = fabricClique(handles[i])
			}
		}
		topo.NVLinkDomain = commonClique(topo.GPUs)
		assignIslands(topo, nvlinkComponents(handles, topo.GPUs, supported))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(topo.GPUs) > 0 {
		topo.AcceleratorType = AcceleratorType(topo.GPUs[0].Model)
	}
	busIDs := make([]string, len(topo.GPUs))
	for i, g := range topo.GPUs {
		busIDs[i] = g.PCIBusID
	}
	for i, r := range mapRails(sysfsRoot, busIDs) {
		topo.GPUs[i].Rail, topo.GPUs[i].NIC = r.rail, r.nic
	}
	return topo, nil
}

// optionalQueries says which topology functions the loaded libnvidia-ml.so exports. go-nvml
// binds symbols lazily, and calling one that an old driver lacks can abort the process in
// the dynamic linker, where no recover reaches.
type optionalQueries struct {
	nvlinkRemoteType bool
	p2pStatus        bool
	fabricInfo       bool
}

func supportedQueries(lib nvml.Interface) optionalQueries {
	return optionalQueries{
		nvlinkRemoteType: hasSymbol(lib, "nvmlDeviceGetNvLinkRemoteDeviceType"),
		p2pStatus:        hasSymbol(lib, "nvmlDeviceGetP2PStatus"),
		fabricInfo:       hasSymbol(lib, "nvmlDeviceGetGpuFabricInfo"),
	}
}

// optional calls an NVML query whose absence is not an error; a panic (an unset mock
// function) reads as ERROR_NOT_SUPPORTED.
func optional[T any](query func() (T, nvml.Return)) (v T, ret nvml.Return) {
	defer func() {
		if recover() != nil {
			var zero T
			v, ret = zero, nvml.ERROR_NOT_SUPPORTED
		}
	}()
	return query()
}

// nvlinkComponents returns, for each GPU, the representative of its NVLink component.
//
// The rule, in order:
//  1. An active link (GetNvLinkState = FEATURE_ENABLED) whose remote PCI bus id
//     (GetNvLinkRemotePciInfo) is another GPU of this node joins the two GPUs: NVLink
//     bridges and direct GPU-to-GPU meshes.
//  2. An active link to anything else whose remote device type is NVLINK_DEVICE_TYPE_SWITCH,
//     or unknown (old drivers cannot say; an IBM NPU can and is skipped), makes the GPU
//     switch-attached.
//  3. Two switch-attached GPUs join unless GetP2PStatus(a, b, P2P_CAPS_INDEX_NVLINK)
//     answers and says the pair cannot talk over NVLink (for example GPUs in different
//     Fabric Manager partitions). When P2P status is not available they join: the GPUs of
//     one HGX baseboard share its NVSwitches.
//
// Links are probed 0..NVLINK_MAX_LINKS-1 and any failing query skips that link, so a GPU
// without NVLink, or a driver that answers ERROR_NOT_SUPPORTED, leaves the GPU alone.
func nvlinkComponents(handles []nvml.Device, gpus []GPU, supported optionalQueries) []int {
	parent := make([]int, len(handles))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	union := func(a, b int) { parent[find(a)] = find(b) }

	gpuByBusID := map[string]int{}
	for i, g := range gpus {
		if g.PCIBusID != "" {
			gpuByBusID[g.PCIBusID] = i
		}
	}
	switchAttached := make([]bool, len(handles))
	for i, h := range handles {
		for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
			state, ret := optional(func() (nvml.EnableState, nvml.Return) { return h.GetNvLinkState(link) })
			if ret != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
				continue
			}
			remote, ret := optional(func() (nvml.PciInfo, nvml.Return) { return h.GetNvLinkRemotePciInfo(link) })
			if ret == nvml.SUCCESS {
				if peer, ok := gpuByBusID[pciBusID(remote)]; ok && peer != i {
					union(i, peer)
					continue
				}
			}
			remoteType, ret := nvml.IntNvLinkDeviceType(nvml.NVLINK_DEVICE_TYPE_UNKNOWN), nvml.ERROR_NOT_SUPPORTED
			if supported.nvlinkRemoteType {
				remoteType, ret = optional(func() (nvml.IntNvLinkDeviceType, nvml.Return) { return h.GetNvLinkRemoteDeviceType(link) })
			}
			if ret != nvml.SUCCESS || remoteType == nvml.NVLINK_DEVICE_TYPE_SWITCH || remoteType == nvml.NVLINK_DEVICE_TYPE_UNKNOWN {
				switchAttached[i] = true
			}
		}
	}
	for a := range handles {
		for b := a + 1; b < len(handles); b++ {
			if !switchAttached[a] || !switchAttached[b] {
				continue
			}
			if supported.p2pStatus {
				status, ret := optional(func() (nvml.GpuP2PStatus, nvml.Return) {
					return handles[a].GetP2PStatus(handles[b], nvml.P2P_CAPS_INDEX_NVLINK)
				})
				if ret == nvml.SUCCESS && status != nvml.P2P_STATUS_OK {
					continue
				}
			}
			union(a, b)
		}
	}
	components := make([]int, len(handles))
	for i := range components {
		components[i] = find(i)
	}
	return components
}

// assignIslands numbers the components of two or more GPUs in order of their lowest GPU
// index. A node inside a multi-node NVLink domain is one island: its GPUs reach each other
// through the domain's NVSwitches even when the node-local probes said less.
func assignIslands(topo *Topology, components []int) {
	if topo.NVLinkDomain != "" {
		for i := range topo.GPUs {
			topo.GPUs[i].NVLinkIsland = 0
		}
		return
	}
	size := map[int]int{}
	for _, c := range components {
		size[c]++
	}
	island := map[int]int{}
	for i, c := range components {
		if size[c] < 2 {
			continue
		}
		if _, ok := island[c]; !ok {
			island[c] = len(island)
		}
		topo.GPUs[i].NVLinkIsland = island[c]
	}
}

// fabricClique returns "<ClusterUuid>/<CliqueId>" when the GPU completed its NVLink fabric
// registration. A zero ClusterUuid (what single-node NVSwitch systems report) is no clique.
// The versioned GetGpuFabricInfoV is not used: its handler cannot be mocked.
func fabricClique(h nvml.Device) string {
	info, ret := optional(h.GetGpuFabricInfo)
	if ret != nvml.SUCCESS || info.State != nvml.GPU_FABRIC_STATE_COMPLETED || nvml.Return(info.Status) != nvml.SUCCESS {
		return ""
	}
	if info.ClusterUuid == [nvml.GPU_FABRIC_UUID_LEN]uint8{} {
		return ""
	}
	u := info.ClusterUuid
	return fmt.Sprintf("%x-%x-%x-%x-%x/%d", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16], info.CliqueId)
}

// commonClique is the clique every GPU shares; empty when any GPU has none or they differ.
func commonClique(gpus []GPU) string {
	if len(gpus) == 0 {
		return ""
	}
	for _, g := range gpus[1:] {
		if g.FabricClique != gpus[0].FabricClique {
			return ""
		}
	}
	return gpus[0].FabricClique
}

// pciBusID returns the bus id of an NVML PciInfo in sysfs form ("0000:1b:00.0"); NVML
// reports "00000000:1B:00.0".
func pciBusID(pci nvml.PciInfo) string {
	id := cString(pci.BusId[:])
	if id == "" {
		id = cString(pci.BusIdLegacy[:])
	}
	return normalizeBusID(id)
}

// normalizeBusID turns "[domain:]bus:device.function" in any case and domain width into the
// sysfs form; it returns "" for anything else.
func normalizeBusID(id string) string {
	var domain, bus, device, function uint32
	parts := strings.Split(strings.TrimSpace(id), ":")
	var err error
	switch len(parts) {
	case 3:
		_, err = fmt.Sscanf(id, "%x:%x:%x.%x", &domain, &bus, &device, &function)
	case 2:
		_, err = fmt.Sscanf(id, "%x:%x.%x", &bus, &device, &function)
	default:
		return ""
	}
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", domain, bus, device, function)
}

func cString(b []uint8) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// rayAcceleratorPattern is Ray's NVIDIA_GPU_NAME_PATTERN: the upper-case model token after
// the vendor word, "NVIDIA A100-SXM4-80GB" → "A100", "NVIDIA H100 80GB HBM3" → "H100".
var rayAcceleratorPattern = regexp.MustCompile(`^\w+\s+([A-Z0-9]+)`)

// AcceleratorType returns Ray's accelerator_type for an NVML device name ("A100", "H100",
// "H200", "GB200", "L40S"). Names without an upper-case model token ("NVIDIA GeForce RTX
// 4090") become the name without "NVIDIA " and with dashes for spaces, as newer Ray does.
func AcceleratorType(model string) string {
	if m := rayAcceleratorPattern.FindStringSubmatch(model); m != nil && len(m[1]) > 1 {
		return labelValue(m[1])
	}
	return labelValue(strings.TrimSpace(strings.TrimPrefix(model, "NVIDIA ")))
}

// labelValue makes s a valid label value (the GCS refuses others): characters other than
// letters, digits, - _ . become -, the ends are alphanumeric, at most 63 bytes.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for len(b) > 0 && !alnum(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && !alnum(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return string(b)
}
