package gpusim

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// SimOptions describes one simulated node for Simulate.
type SimOptions struct {
	// Seed is a string unique to the node (its node id). GPU UUIDs are derived from it, so
	// several simulated nodes on one machine have distinct GPUs. Required.
	Seed string
	// Rack names the GB200 NVL72 rack of the node: nodes with the same Rack share one
	// multi-node NVLink domain, nodes of different racks do not. Empty is one default rack.
	// Other models ignore it.
	Rack string
	// SysfsDir is the directory (e.g. the session directory) under which the simulated PCI
	// tree is written, in the subdirectory "sysfs-<model>"; nodes of one model may share it.
	// Empty writes no tree, and rails are then unknown.
	SysfsDir string
	// MIGStateFile, when set, is a JSON file holding the node's simulated MIG state (MIG
	// mode and instances of each GPU): loaded by Simulate when it exists, rewritten after
	// every change. A test in another process reads it with ReadSimulatedMIGState, and a
	// simulated node restarted with the same Seed finds its instances again, as a raylet
	// restarting on real hardware does. Empty keeps the state in memory only
	// (SimulatedMIGState reads it).
	MIGStateFile string
	// ActivityFile, when set, is the control file (SimActivityFile, JSON) the simulated
	// GPUs read their activity and memory use from at every query; tests write it with
	// WriteSimActivity. Empty, or a file that does not exist: every GPU idle.
	ActivityFile string
}

// simMachine describes a simulated server: what NVML reports and its PCI layout.
type simMachine struct {
	deviceName  string
	memoryBytes uint64
	arch        nvml.DeviceArchitecture
	computeCap  dgxa100.CudaComputeCapability
	pciDeviceID uint32
	// switches lay out the PCI tree; GPU and NIC indices follow PCI bus order.
	switches []pciSwitch
	// nvlinks is the number of active NVLinks per GPU.
	nvlinks int
	// nvlinkBridgePeer returns the GPU at the other end of a GPU's NVLink bridge; nil when
	// every link goes to an NVSwitch.
	nvlinkBridgePeer func(gpu int) int
	// nvSwitchBusIDs are the NVSwitches' PCI bus ids that links report as remote; empty
	// when the switches are outside the node (GB200 switch trays) and NVML cannot say.
	nvSwitchBusIDs []string
	fabric         simFabric
}

// pciSwitch is one PCIe switch under its own root complex, with the GPUs and NICs behind it.
type pciSwitch struct {
	domain, bus uint32
	socket      int
	gpus, nics  []int
}

type simFabric int

const (
	// fabricNone: GetGpuFabricInfo is ERROR_NOT_SUPPORTED (before Hopper, PCIe cards).
	fabricNone simFabric = iota
	// fabricNodeLocal: registration completed with a zero ClusterUuid, as on HGX H100.
	fabricNodeLocal
	// fabricRack: registration completed in the clique of the node's NVL72 rack.
	fabricRack
)

const mib = 1 << 20

var simMachines = map[string]simMachine{
	"dgx-a100-40gb": dgxA100("NVIDIA A100-SXM4-40GB", 40960*mib, 0x20B010DE),
	"dgx-a100-80gb": dgxA100("NVIDIA A100-SXM4-80GB", 81920*mib, 0x20B210DE),
	"dgx-h100": {
		deviceName:  "NVIDIA H100 80GB HBM3",
		memoryBytes: 81559 * mib,
		arch:        nvml.DEVICE_ARCH_HOPPER,
		computeCap:  dgxa100.CudaComputeCapability{Major: 9, Minor: 0},
		pciDeviceID: 0x233010DE,
		// Each GPU shares a PCIe switch with its ConnectX-7: GPU i ↔ mlx5_i.
		switches:       pairedSwitches(8, 1, 1, 0x10, 0x18, 4),
		nvlinks:        18,
		nvSwitchBusIDs: []string{"0000:e0:00.0", "0000:e1:00.0", "0000:e2:00.0", "0000:e3:00.0"},
		fabric:         fabricNodeLocal,
	},
	"pcie-8gpu-nvlink-pairs": {
		deviceName:  "NVIDIA H100 PCIe",
		memoryBytes: 81559 * mib,
		arch:        nvml.DEVICE_ARCH_HOPPER,
		computeCap:  dgxa100.CudaComputeCapability{Major: 9, Minor: 0},
		pciDeviceID: 0x233110DE,
		// Each NVLink-bridged pair sits behind one PCIe switch with one NIC.
		switches:         pairedSwitches(4, 2, 1, 0x10, 0x30, 2),
		nvlinks:          12,
		nvlinkBridgePeer: func(gpu int) int { return gpu ^ 1 },
		fabric:           fabricNone,
	},
	"gb200-nvl72": {
		deviceName:  "NVIDIA GB200",
		memoryBytes: 189471 * mib,
		arch:        nvml.DEVICE_ARCH_BLACKWELL,
		computeCap:  dgxa100.CudaComputeCapability{Major: 10, Minor: 0},
		pciDeviceID: 0x294110DE,
		// A compute tray: two Grace CPUs with two GPUs and two ConnectX-7 each, one PCI
		// domain per GPU.
		switches: []pciSwitch{
			{domain: 0x0008, socket: 0, gpus: []int{0}, nics: []int{0}},
			{domain: 0x0009, socket: 0, gpus: []int{1}, nics: []int{1}},
			{domain: 0x0018, socket: 1, gpus: []int{2}, nics: []int{2}},
			{domain: 0x0019, socket: 1, gpus: []int{3}, nics: []int{3}},
		},
		nvlinks: 18,
		fabric:  fabricRack,
	},
}

// dgxA100 is a DGX A100: four PCIe switches with two GPUs and two HCAs each, twelve
// NVLinks per GPU to six NVSwitches.
func dgxA100(name string, memoryBytes uint64, pciDeviceID uint32) simMachine {
	return simMachine{
		deviceName:  name,
		memoryBytes: memoryBytes,
		arch:        nvml.DEVICE_ARCH_AMPERE,
		computeCap:  dgxa100.CudaComputeCapability{Major: 8, Minor: 0},
		pciDeviceID: pciDeviceID,
		switches:    pairedSwitches(4, 2, 2, 0x07, 0x30, 2),
		nvlinks:     12,
		nvSwitchBusIDs: []string{
			"0000:c4:00.0", "0000:c5:00.0", "0000:c6:00.0", "0000:c7:00.0", "0000:c8:00.0", "0000:c9:00.0",
		},
		fabric: fabricNone,
	}
}

// pairedSwitches lays out n switches in PCI domain 0 with gpusEach GPUs and nicsEach NICs
// behind each, numbered in order, root buses firstBus, firstBus+busStep, ...;
// switchesPerSocket switches per CPU socket.
func pairedSwitches(n, gpusEach, nicsEach int, firstBus, busStep uint32, switchesPerSocket int) []pciSwitch {
	switches := make([]pciSwitch, n)
	for s := range switches {
		sw := pciSwitch{bus: firstBus + uint32(s)*busStep, socket: s / switchesPerSocket}
		for k := 0; k < gpusEach; k++ {
			sw.gpus = append(sw.gpus, s*gpusEach+k)
		}
		for k := 0; k < nicsEach; k++ {
			sw.nics = append(sw.nics, s*nicsEach+k)
		}
		switches[s] = sw
	}
	return switches
}

// TestMachineH200 is a DGX H200 for the tests of the H200 MIG tables: the dgx-h100
// layout with H200 GPUs. Simulate builds it; SimulatedModels does not list it, so
// `raygo start --gpu-sim` does not offer it (no simulated machine has H200s yet).
const TestMachineH200 = "test-dgx-h200"

// SimulatedModels lists the machines Simulate knows, sorted.
func SimulatedModels() []string {
	models := make([]string, 0, len(simMachines))
	for name := range simMachines {
		models = append(models, name)
	}
	slices.Sort(models)
	return models
}

// Simulate builds the NVML of a simulated machine from go-nvml's dgxa100 mock devices, and
// writes its PCI tree under opts.SysfsDir. It returns the NVML to pass to DiscoverTopology
// and the sysfs root to pass with it ("" when opts.SysfsDir is empty).
//
// Every NVML function the simulation does not describe returns ERROR_NOT_SUPPORTED instead
// of panicking as a bare mock does, and the library-level forms (lib.DeviceGetUUID(dev))
// answer as the device methods do, as with the real library. MIG is simulated as hardware
// behaves (mig_sim.go) on the models placement has MIG tables for (A100, H100, H200);
// on the others the MIG functions return ERROR_NOT_SUPPORTED.
func Simulate(model string, opts SimOptions) (nvml.Interface, string, error) {
	machine, ok := simMachines[model]
	if model == TestMachineH200 {
		machine, ok = simMachines["dgx-h100"], true
		machine.deviceName, machine.memoryBytes = "NVIDIA H200", 143771*mib
	}
	if !ok {
		return nil, "", fmt.Errorf("%w %q; valid models: %s", ErrUnknownSimulatedModel, model, strings.Join(SimulatedModels(), ", "))
	}
	if opts.Seed == "" {
		return nil, "", fmt.Errorf("SimOptions.Seed: empty; give a string unique to the node, such as its node id")
	}
	return machine.simulate(model, opts)
}

// simulate builds the machine, named model; see Simulate.
func (m simMachine) simulate(model string, opts SimOptions) (nvml.Interface, string, error) {
	layout := m.pciLayout()
	devices := make([]*dgxa100.Device, len(layout.gpuBusIDs))
	for i := range devices {
		devices[i] = m.newDevice(model, i, layout, opts, devices)
	}
	mig, err := newSimMIG(devices, m.deviceName, m.memoryBytes, opts.MIGStateFile)
	if err != nil {
		return nil, "", fmt.Errorf("simulated MIG for %s: %w", model, err)
	}
	activity := &simActivity{path: opts.ActivityFile}
	if mig != nil {
		mig.activity = activity
	}
	for _, d := range devices {
		installActivity(d, m.arch, activity, mig)
	}
	lib := newSimServer(devices, mig)
	sysfsRoot := ""
	if opts.SysfsDir != "" {
		if sysfsRoot, err = writeSimSysfs(opts.SysfsDir, model, m, layout); err != nil {
			return nil, "", fmt.Errorf("simulated sysfs for %s: %w", model, err)
		}
	}
	return lib, sysfsRoot, nil
}

// simServer is a simulated machine's NVML: a dgxa100 server and the MIG state of its GPUs
// (nil for a model without MIG tables).
type simServer struct {
	*dgxa100.Server
	mig *simMIG
}

// newSimServer is a dgxa100 server whose GPUs are devices, with their MIG devices when
// mig is not nil.
func newSimServer(devices []*dgxa100.Device, mig *simMIG) *simServer {
	s := dgxa100.New()
	s.Devices = [8]nvml.Device{}
	for i, d := range devices {
		if i < len(s.Devices) {
			s.Devices[i] = d
		}
	}
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return len(devices), nvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(index int) (nvml.Device, nvml.Return) {
		if index < 0 || index >= len(devices) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return devices[index], nvml.SUCCESS
	}
	s.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		for _, d := range devices {
			if d.UUID == uuid {
				return d, nvml.SUCCESS
			}
		}
		if mig != nil {
			if d, ok := mig.migDeviceByUUID(uuid); ok {
				return d, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	s.DeviceGetHandleByPciBusIdFunc = func(busID string) (nvml.Device, nvml.Return) {
		want, ok := parseBusID(busID)
		for _, d := range devices {
			if have, _ := parseBusID(d.PciBusID); ok && have == want {
				return d, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	installGPM(s)
	delegateToHandleMethods(&s.Interface)
	FillUnsetWithNotSupported(&s.Interface)
	FillUnsetWithNotSupported(&s.ExtendedInterface)
	return &simServer{Server: s, mig: mig}
}

// parseBusID reads a PCI bus id as DeviceGetHandleByPciBusId accepts it:
// "[domain:]bus:device.function" in hex, in either case, with a domain of any width. The
// simulation keeps its own reading rather than share the discovery code's, so a bug
// there cannot hide behind the same bug here.
func parseBusID(id string) (parsed [4]uint64, ok bool) {
	parts := strings.Split(strings.TrimSpace(id), ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return parsed, false
	}
	device, function, found := strings.Cut(parts[2], ".")
	if !found {
		return parsed, false
	}
	for i, field := range []string{parts[0], parts[1], device, function} {
		v, err := strconv.ParseUint(field, 16, 32)
		if err != nil {
			return parsed, false
		}
		parsed[i] = v
	}
	return parsed, true
}

// newDevice is GPU index of the machine; peers are all the node's GPUs (filled in by the
// caller before any function runs).
func (m simMachine) newDevice(model string, index int, layout simLayout, opts SimOptions, peers []*dgxa100.Device) *dgxa100.Device {
	d := dgxa100.NewDevice(index)
	d.UUID = simGPUUUID(model, opts.Seed, index)
	d.Name = m.deviceName
	d.Architecture = m.arch
	d.CudaComputeCapability = m.computeCap
	d.MemoryInfo = nvml.Memory{Total: m.memoryBytes, Free: m.memoryBytes}
	busID := layout.gpuBusIDs[index]
	d.PciBusID = nvmlBusID(busID)
	pci := nvmlPciInfo(busID, m.pciDeviceID)
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return pci, nvml.SUCCESS }
	// The dgxa100 mock's MIG functions report enum indices as profile ids and check no
	// geometry: drop them (ERROR_NOT_SUPPORTED); newSimMIG installs the simulated driver's.
	d.SetMigModeFunc = nil
	d.GetMigModeFunc = nil
	d.GetGpuInstanceProfileInfoFunc = nil
	d.GetGpuInstancePossiblePlacementsFunc = nil
	d.CreateGpuInstanceFunc = nil
	d.CreateGpuInstanceWithPlacementFunc = nil
	d.GetGpuInstancesFunc = nil

	peerIndex := func(other nvml.Device) (int, bool) {
		for j, p := range peers {
			if p == other {
				return j, true
			}
		}
		return 0, false
	}
	sameIsland := func(j int) bool {
		if m.nvlinkBridgePeer != nil {
			return j == m.nvlinkBridgePeer(index)
		}
		return true // one NVSwitch fabric joins every GPU of the node
	}
	validLink := func(link int) nvml.Return {
		switch {
		case link < 0 || link >= nvml.NVLINK_MAX_LINKS:
			return nvml.ERROR_INVALID_ARGUMENT
		case link >= m.nvlinks:
			return nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.SUCCESS
	}
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if ret := validLink(link); ret != nvml.SUCCESS {
			return nvml.FEATURE_DISABLED, ret
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkRemoteDeviceTypeFunc = func(link int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		if ret := validLink(link); ret != nvml.SUCCESS {
			return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, ret
		}
		if m.nvlinkBridgePeer != nil {
			return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
		}
		return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
	}
	d.GetNvLinkRemotePciInfoFunc = func(link int) (nvml.PciInfo, nvml.Return) {
		if ret := validLink(link); ret != nvml.SUCCESS {
			return nvml.PciInfo{}, ret
		}
		switch {
		case m.nvlinkBridgePeer != nil:
			return nvmlPciInfo(layout.gpuBusIDs[m.nvlinkBridgePeer(index)], m.pciDeviceID), nvml.SUCCESS
		case len(m.nvSwitchBusIDs) > 0:
			return nvmlPciInfo(m.nvSwitchBusIDs[link%len(m.nvSwitchBusIDs)], nvSwitchPCIDeviceID), nvml.SUCCESS
		}
		return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetP2PStatusFunc = func(other nvml.Device, capability nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
		j, ok := peerIndex(other)
		if !ok {
			return nvml.P2P_STATUS_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT
		}
		if capability == nvml.P2P_CAPS_INDEX_NVLINK && !sameIsland(j) && j != index {
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		}
		return nvml.P2P_STATUS_OK, nvml.SUCCESS
	}
	d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
		j, ok := peerIndex(other)
		if !ok {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		a, b := m.switches[layout.gpuSwitch[index]], m.switches[layout.gpuSwitch[j]]
		switch {
		case j == index:
			return nvml.TOPOLOGY_INTERNAL, nvml.SUCCESS
		case layout.gpuSwitch[index] == layout.gpuSwitch[j]:
			return nvml.TOPOLOGY_SINGLE, nvml.SUCCESS
		case a.socket == b.socket:
			return nvml.TOPOLOGY_NODE, nvml.SUCCESS
		}
		return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
	}
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
		switch m.fabric {
		case fabricNodeLocal:
			return nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(nvml.SUCCESS)}, nvml.SUCCESS
		case fabricRack:
			return nvml.GpuFabricInfo{
				ClusterUuid: simRackClusterUUID(opts.Rack),
				CliqueId:    1,
				State:       nvml.GPU_FABRIC_STATE_COMPLETED,
				Status:      uint32(nvml.SUCCESS),
			}, nvml.SUCCESS
		}
		return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	FillUnsetWithNotSupported(&d.Device)
	return d
}

// nvSwitchPCIDeviceID is what the simulated NVSwitches report as their PCI device id.
const nvSwitchPCIDeviceID = 0x1AF110DE

// simLayout is the PCI position of each simulated GPU and NIC.
type simLayout struct {
	gpuBusIDs, nicBusIDs []string // sysfs form, by index
	gpuSwitch            []int    // index into simMachine.switches
	nicDirs              []string // NIC device directory under <root>/devices
	gpuDirs              []string
}

// pciLayout places each switch under its own root complex pciDDDD:BB: root port BB:01.0,
// switch upstream port (BB+1):00.0, downstream port k (BB+2):k.0, and behind it endpoint k
// at (BB+3+k):00.0, GPUs first, then NICs.
func (m simMachine) pciLayout() simLayout {
	var l simLayout
	for _, sw := range m.switches {
		for range sw.gpus {
			l.gpuBusIDs = append(l.gpuBusIDs, "")
			l.gpuDirs = append(l.gpuDirs, "")
			l.gpuSwitch = append(l.gpuSwitch, 0)
		}
		for range sw.nics {
			l.nicBusIDs = append(l.nicBusIDs, "")
			l.nicDirs = append(l.nicDirs, "")
		}
	}
	for s, sw := range m.switches {
		bdf := func(bus, device uint32) string {
			return fmt.Sprintf("%04x:%02x:%02x.0", sw.domain, bus, device)
		}
		upstream := strings.Join([]string{
			fmt.Sprintf("pci%04x:%02x", sw.domain, sw.bus), bdf(sw.bus, 1), bdf(sw.bus+1, 0),
		}, "/")
		endpoint := func(k int) (busID, dir string) {
			busID = bdf(sw.bus+3+uint32(k), 0)
			return busID, strings.Join([]string{upstream, bdf(sw.bus+2, uint32(k)), busID}, "/")
		}
		for k, g := range sw.gpus {
			l.gpuBusIDs[g], l.gpuDirs[g] = endpoint(k)
			l.gpuSwitch[g] = s
		}
		for k, n := range sw.nics {
			l.nicBusIDs[n], l.nicDirs[n] = endpoint(len(sw.gpus) + k)
		}
	}
	return l
}

// nvmlBusID writes a sysfs bus id as NVML reports it: "0000:1b:00.0" → "00000000:1B:00.0".
func nvmlBusID(sysfsBusID string) string {
	var domain, bus, device, function uint32
	_, _ = fmt.Sscanf(sysfsBusID, "%x:%x:%x.%x", &domain, &bus, &device, &function)
	return fmt.Sprintf("%08X:%02X:%02X.%X", domain, bus, device, function)
}

func nvmlPciInfo(sysfsBusID string, pciDeviceID uint32) nvml.PciInfo {
	var domain, bus, device, function uint32
	_, _ = fmt.Sscanf(sysfsBusID, "%x:%x:%x.%x", &domain, &bus, &device, &function)
	pci := nvml.PciInfo{Domain: domain, Bus: bus, Device: device, PciDeviceId: pciDeviceID}
	copy(pci.BusId[:len(pci.BusId)-1], nvmlBusID(sysfsBusID))
	copy(pci.BusIdLegacy[:len(pci.BusIdLegacy)-1], fmt.Sprintf("%04X:%02X:%02X.%X", domain, bus, device, function))
	return pci
}

// simGPUUUID derives a stable UUID, unique per (model, node seed, index), in NVML's
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" form.
func simGPUUUID(model, seed string, index int) string {
	return "GPU-" + formatSimUUID(sha256.Sum256(fmt.Appendf(nil, "raygo-gpu-sim\x00%s\x00%s\x00%d", model, seed, index)))
}

// formatSimUUID writes the first 16 bytes of a hash as a name-based UUID,
// "xxxxxxxx-xxxx-5xxx-xxxx-xxxxxxxxxxxx".
func formatSimUUID(sum [sha256.Size]byte) string {
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x50 // RFC 4122 version 5 (name-based) …
	u[8] = u[8]&0x3f | 0x80 // … and variant bits, so tools that parse UUIDs accept it
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// simRackClusterUUID is the fabric ClusterUuid shared by the simulated nodes of one rack.
func simRackClusterUUID(rack string) [nvml.GPU_FABRIC_UUID_LEN]uint8 {
	if rack == "" {
		rack = "default"
	}
	sum := sha256.Sum256([]byte("raygo-gpu-sim-nvl72-rack\x00" + rack))
	var u [nvml.GPU_FABRIC_UUID_LEN]uint8
	copy(u[:], sum[:])
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return u
}
