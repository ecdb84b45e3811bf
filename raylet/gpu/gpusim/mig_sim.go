package gpusim

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/raygo-dev/raygo/internal/mig"
)

// Simulated MIG: the MIG side of a simulated machine's NVML, answering as the driver of a
// GPU with the real geometry (placement's tables) does. It replaces the dgxa100 mock's MIG
// functions, which report profile enum indices as profile ids, check no overlap, keep one
// A100 table for every GPU and let a GPU instance with compute instances be destroyed.
//
// What it enforces, with the NVML return codes of nvml.h:
//   - MIG mode must be on to list, carve or destroy instances (ERROR_NOT_SUPPORTED), and
//     stays on while GPU instances exist (SetMigMode: ERROR_IN_USE);
//   - a start that is not a valid placement of the profile, or a size that is not the
//     profile's: ERROR_INVALID_ARGUMENT;
//   - a valid placement the GPU cannot take as it is (overlap, the profile's max
//     instances, a second "+me", more than 7 compute slices): ERROR_INSUFFICIENT_RESOURCES;
//   - destroying a GPU instance that still has compute instances: ERROR_IN_USE;
//   - a handle used after its instance was destroyed: ERROR_INVALID_ARGUMENT.
//
// Each compute instance is a MIG device with a "MIG-<uuid>" UUID derived from the GPU's UUID
// and a per-GPU counter: unique, and the same every time the instance is listed.
//
// Concurrency: one mutex per simulated node guards the MIG state of all its GPUs; every
// device, GPU instance, compute instance and MIG device function takes it.

// simProfileEnums is the one translation between the two numberings of GPU instance
// profiles: NVML's GetGpuInstanceProfileInfo takes a profile enum
// (NVML_GPU_INSTANCE_PROFILE_*) and answers a GpuInstanceProfileInfo whose Id is the
// profile id hardware reports (`nvidia-smi mig -lgip`), mig.Profile.ID, which
// every other MIG function takes. go-nvml's mock answers the enum as the id; the
// simulation answers as hardware does, and MIGManager learns the mapping by asking, as it
// must on a real driver. Names are the H100-80GB ones.
var simProfileEnums = map[int]int{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      19, // 1g.10gb: 1 memory slice
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 20, // 1g.10gb+me
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: 15, // 1g.20gb: 2 memory slices
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      14, // 2g.20gb
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      9,  // 3g.40gb
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      5,  // 4g.40gb
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      0,  // 7g.80gb
}

// simComputeProfileSlices gives the compute slices of the compute instance profiles the
// simulation offers (NVML_COMPUTE_INSTANCE_PROFILE_*, shared engines). A GPU instance
// offers those no larger than itself; as on hardware, a profile's id is its enum value.
var simComputeProfileSlices = map[int]int{
	nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE: 1,
	nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE: 2,
	nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE: 3,
	nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE: 4,
	nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE: 7,
}

// simMIG is the MIG state of one simulated node.
type simMIG struct {
	mu   sync.Mutex
	gpus []*simMIGGPU // by GPU index
	// stateFile, when set, holds the state between runs and for other processes
	// (SimOptions.MIGStateFile); rewritten after every change.
	stateFile string
	// activity is the node's control file (activity_sim.go), for the MIG devices' memory.
	activity *simActivity
}

// simMIGGPU is one simulated GPU's MIG state. Fields below node are guarded by node.mu.
type simMIGGPU struct {
	node      *simMIG
	index     int
	device    *dgxa100.Device
	model     mig.Model
	memoryMiB uint64

	enabled      bool
	gpuInstances []*simGPUInstance // by id
	// uuidsIssued counts the MIG device UUIDs the GPU ever issued: the next one's seed.
	uuidsIssued uint64
}

type simGPUInstance struct {
	mock.GpuInstance
	gpu              *simMIGGPU
	id               int
	profile          mig.Profile
	start            int
	computeInstances []*simComputeInstance // by id
	destroyed        bool
}

type simComputeInstance struct {
	mock.ComputeInstance
	gpuInstance *simGPUInstance
	id          int
	// profileID is the compute instance profile (its enum value); start and slices place
	// it among the GPU instance's compute slices.
	profileID, start, slices int
	migDevice                *simMIGDevice
	destroyed                bool
}

// simMIGDevice is the MIG device handle of a compute instance.
type simMIGDevice struct {
	mock.Device
	computeInstance *simComputeInstance
	uuid            string
}

// newSimMIG gives the devices of a machine whose GPUs are named deviceName the MIG
// functions of their model, and loads stateFile when it exists. It returns nil, leaving
// the MIG functions at ERROR_NOT_SUPPORTED, when placement has no MIG table for the model.
// Call it before the devices are shared.
func newSimMIG(devices []*dgxa100.Device, deviceName string, memoryBytes uint64, stateFile string) (*simMIG, error) {
	model, ok := mig.ModelOfDevice(deviceName)
	if !ok {
		return nil, nil
	}
	s := &simMIG{stateFile: stateFile}
	for i, d := range devices {
		s.gpus = append(s.gpus, &simMIGGPU{node: s, index: i, device: d, model: model, memoryMiB: memoryBytes / mib})
	}
	if stateFile != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
		if err := s.persistLocked(); err != nil {
			return nil, err
		}
	}
	for _, g := range s.gpus {
		g.install()
	}
	return s, nil
}

func (g *simMIGGPU) install() {
	d := g.device
	d.SetMigModeFunc = g.setMigMode
	d.GetMigModeFunc = g.getMigMode
	d.GetGpuInstanceProfileInfoFunc = g.gpuInstanceProfileInfo
	d.GetGpuInstancePossiblePlacementsFunc = g.possiblePlacements
	d.GetGpuInstanceRemainingCapacityFunc = g.remainingCapacity
	d.CreateGpuInstanceFunc = g.createGpuInstance
	d.CreateGpuInstanceWithPlacementFunc = g.createGpuInstanceWithPlacement
	d.GetGpuInstancesFunc = g.getGpuInstances
	d.GetGpuInstanceByIdFunc = g.getGpuInstanceByID
	d.GetMaxMigDeviceCountFunc = g.maxMigDeviceCount
	d.GetMigDeviceHandleByIndexFunc = g.migDeviceHandleByIndex
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
}

func (g *simMIGGPU) setMigMode(mode int) (nvml.Return, nvml.Return) {
	if mode != nvml.DEVICE_MIG_DISABLE && mode != nvml.DEVICE_MIG_ENABLE {
		return nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_INVALID_ARGUMENT
	}
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	want := mode == nvml.DEVICE_MIG_ENABLE
	if !want && len(g.gpuInstances) > 0 {
		return nvml.ERROR_IN_USE, nvml.ERROR_IN_USE
	}
	before := g.enabled
	g.enabled = want
	if ret := g.node.commitLocked(func() { g.enabled = before }); ret != nvml.SUCCESS {
		return ret, ret
	}
	// The simulated GPU resets at once: the new mode is current, nothing is pending.
	return nvml.SUCCESS, nvml.SUCCESS
}

func (g *simMIGGPU) getMigMode() (int, int, nvml.Return) {
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	mode := nvml.DEVICE_MIG_DISABLE
	if g.enabled {
		mode = nvml.DEVICE_MIG_ENABLE
	}
	return mode, mode, nvml.SUCCESS
}

// gpuInstanceProfileInfo answers for a profile enum (see simProfileEnums), with MIG mode
// on or off: the profiles are the GPU's.
func (g *simMIGGPU) gpuInstanceProfileInfo(profileEnum int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	if profileEnum < 0 || profileEnum >= nvml.GPU_INSTANCE_PROFILE_COUNT {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	id, ok := simProfileEnums[profileEnum]
	if !ok {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	profile, ok := g.model.ProfileByID(id)
	if !ok {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.GpuInstanceProfileInfo{
		Id:            uint32(profile.ID),
		SliceCount:    uint32(profile.ComputeSlices),
		InstanceCount: uint32(profile.MaxInstances),
		// An approximation: hardware reserves a little of each slice.
		MemorySizeMB: g.memoryMiB * uint64(profile.MemorySlices) / mig.MemorySlices,
	}, nvml.SUCCESS
}

// profileOf returns the profile a GpuInstanceProfileInfo names by its id.
func (g *simMIGGPU) profileOf(info *nvml.GpuInstanceProfileInfo) (mig.Profile, nvml.Return) {
	if info == nil {
		return mig.Profile{}, nvml.ERROR_INVALID_ARGUMENT
	}
	profile, ok := g.model.ProfileByID(int(info.Id))
	if !ok {
		return mig.Profile{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return profile, nvml.SUCCESS
}

// possiblePlacements lists every valid placement of the profile, free or not, with MIG
// mode on or off, as NVML does.
func (g *simMIGGPU) possiblePlacements(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
	profile, ret := g.profileOf(info)
	if ret != nvml.SUCCESS {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	var placements []nvml.GpuInstancePlacement
	for _, start := range profile.ValidStarts() {
		placements = append(placements, nvml.GpuInstancePlacement{Start: uint32(start), Size: uint32(profile.MemorySlices)})
	}
	return placements, nvml.SUCCESS
}

// instancesLocked is the GPU's carved instances as the geometry sees them.
func (g *simMIGGPU) instancesLocked() []simInstance {
	instances := make([]simInstance, 0, len(g.gpuInstances))
	for _, gi := range g.gpuInstances {
		instances = append(instances, simInstance{profile: gi.profile, start: gi.start})
	}
	return instances
}

func (g *simMIGGPU) remainingCapacity(info *nvml.GpuInstanceProfileInfo) (int, nvml.Return) {
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	if !g.enabled {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	profile, ret := g.profileOf(info)
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	// Lowest start first places the most instances of one profile: the starts of one
	// profile are aligned to its size (or every slice, for size 1).
	instances := g.instancesLocked()
	for count := 0; ; count++ {
		starts := simFeasibleStarts(g.model, instances, profile)
		if len(starts) == 0 {
			return count, nvml.SUCCESS
		}
		instances = append(instances, simInstance{profile: profile, start: starts[0]})
	}
}

// createGpuInstance carves at the lowest free placement, where the driver would choose.
func (g *simMIGGPU) createGpuInstance(info *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	if !g.enabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	profile, ret := g.profileOf(info)
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	starts := simFeasibleStarts(g.model, g.instancesLocked(), profile)
	if len(starts) == 0 {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	return g.addGpuInstanceLocked(profile, starts[0])
}

func (g *simMIGGPU) createGpuInstanceWithPlacement(info *nvml.GpuInstanceProfileInfo, at *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	if !g.enabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	profile, ret := g.profileOf(info)
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	if at == nil || at.Start >= mig.MemorySlices || int(at.Size) != profile.MemorySlices || !profile.IsValidStart(int(at.Start)) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	start := int(at.Start)
	if checkSimGeometry(g.model, append(g.instancesLocked(), simInstance{profile: profile, start: start})) != nil {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	return g.addGpuInstanceLocked(profile, start)
}

// addGpuInstanceLocked carves a checked placement. GPU instance ids are the lowest free,
// from 0; hardware derives them from the placement, so callers must read them, never
// assume them.
func (g *simMIGGPU) addGpuInstanceLocked(profile mig.Profile, start int) (nvml.GpuInstance, nvml.Return) {
	gi := g.newGpuInstance(lowestFreeID(g.gpuInstances, func(gi *simGPUInstance) int { return gi.id }), profile, start)
	g.insertGpuInstanceLocked(gi)
	if ret := g.node.commitLocked(func() { g.removeGpuInstanceLocked(gi) }); ret != nvml.SUCCESS {
		return nil, ret
	}
	return gi, nvml.SUCCESS
}

func (g *simMIGGPU) insertGpuInstanceLocked(gi *simGPUInstance) {
	g.gpuInstances = append(g.gpuInstances, gi)
	slices.SortFunc(g.gpuInstances, func(a, b *simGPUInstance) int { return cmp.Compare(a.id, b.id) })
	gi.destroyed = false
}

func (g *simMIGGPU) removeGpuInstanceLocked(gi *simGPUInstance) {
	g.gpuInstances = slices.DeleteFunc(g.gpuInstances, func(other *simGPUInstance) bool { return other == gi })
	gi.destroyed = true
}

func (g *simMIGGPU) getGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	if !g.enabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	profile, ret := g.profileOf(info)
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	instances := []nvml.GpuInstance{}
	for _, gi := range g.gpuInstances {
		if gi.profile.ID == profile.ID {
			instances = append(instances, gi)
		}
	}
	return instances, nvml.SUCCESS
}

func (g *simMIGGPU) getGpuInstanceByID(id int) (nvml.GpuInstance, nvml.Return) {
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	if !g.enabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	for _, gi := range g.gpuInstances {
		if gi.id == id {
			return gi, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// maxMigDeviceCount is zero with MIG mode off, as NVML says.
func (g *simMIGGPU) maxMigDeviceCount() (int, nvml.Return) {
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	if !g.enabled {
		return 0, nvml.SUCCESS
	}
	return mig.ComputeSlices, nvml.SUCCESS
}

// migDeviceHandleByIndex numbers the MIG devices by GPU instance id, then compute
// instance id; as on hardware, an index names another device after a change.
func (g *simMIGGPU) migDeviceHandleByIndex(index int) (nvml.Device, nvml.Return) {
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	if !g.enabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	if index < 0 || index >= mig.ComputeSlices {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	for _, gi := range g.gpuInstances {
		if index < len(gi.computeInstances) {
			return gi.computeInstances[index].migDevice, nvml.SUCCESS
		}
		index -= len(gi.computeInstances)
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// migDeviceUUID is the UUID of the GPU's n-th MIG device ever: "MIG-" and a name-based
// UUID of the GPU's UUID and n.
func (g *simMIGGPU) migDeviceUUID(n uint64) string {
	return "MIG-" + formatSimUUID(sha256.Sum256(fmt.Appendf(nil, "raygo-mig-sim\x00%s\x00%d", g.device.UUID, n)))
}

func (g *simMIGGPU) newGpuInstance(id int, profile mig.Profile, start int) *simGPUInstance {
	gi := &simGPUInstance{gpu: g, id: id, profile: profile, start: start}
	gi.GetInfoFunc = gi.getInfo
	gi.GetComputeInstanceProfileInfoFunc = gi.computeInstanceProfileInfo
	gi.GetComputeInstanceRemainingCapacityFunc = gi.computeInstanceRemainingCapacity
	gi.CreateComputeInstanceFunc = gi.createComputeInstance
	gi.GetComputeInstancesFunc = gi.getComputeInstances
	gi.GetComputeInstanceByIdFunc = gi.getComputeInstanceByID
	gi.DestroyFunc = gi.destroy
	FillUnsetWithNotSupported(&gi.GpuInstance)
	return gi
}

// commitLocked saves the state after a change, or undoes the change and answers
// ERROR_UNKNOWN when the state file cannot be written.
func (s *simMIG) commitLocked(undo func()) nvml.Return {
	if err := s.persistLocked(); err != nil {
		undo()
		return nvml.ERROR_UNKNOWN
	}
	return nvml.SUCCESS
}

// lowestFreeID is the lowest id ≥ 0 that no item has.
func lowestFreeID[T any](items []T, id func(T) int) int {
	for candidate := 0; ; candidate++ {
		if !slices.ContainsFunc(items, func(item T) bool { return id(item) == candidate }) {
			return candidate
		}
	}
}
