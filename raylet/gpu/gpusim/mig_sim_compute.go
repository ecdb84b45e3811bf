package gpusim

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/raygo-dev/raygo/internal/mig"
)

// The compute side of simulated MIG: the compute instances inside a GPU instance and the
// MIG device each one is (see mig_sim.go for what the simulation enforces).

func (gi *simGPUInstance) getInfo() (nvml.GpuInstanceInfo, nvml.Return) {
	gi.gpu.node.mu.Lock()
	defer gi.gpu.node.mu.Unlock()
	if gi.destroyed {
		return nvml.GpuInstanceInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return nvml.GpuInstanceInfo{
		Device:    gi.gpu.device,
		Id:        uint32(gi.id),
		ProfileId: uint32(gi.profile.ID),
		Placement: nvml.GpuInstancePlacement{Start: uint32(gi.start), Size: uint32(gi.profile.MemorySlices)},
	}, nvml.SUCCESS
}

// computeProfile returns the compute slices of a compute instance profile the GPU
// instance offers.
func (gi *simGPUInstance) computeProfile(profile int) (int, nvml.Return) {
	if profile < 0 || profile >= nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	size, ok := simComputeProfileSlices[profile]
	if !ok || size > gi.profile.ComputeSlices {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return size, nvml.SUCCESS
}

func (gi *simGPUInstance) computeInstanceProfileInfo(profile, engineProfile int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
	gi.gpu.node.mu.Lock()
	defer gi.gpu.node.mu.Unlock()
	if gi.destroyed || engineProfile < 0 || engineProfile >= nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT {
		return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	size, ret := gi.computeProfile(profile)
	if ret != nvml.SUCCESS {
		return nvml.ComputeInstanceProfileInfo{}, ret
	}
	return nvml.ComputeInstanceProfileInfo{
		Id:            uint32(profile),
		SliceCount:    uint32(size),
		InstanceCount: uint32(gi.profile.ComputeSlices / size),
	}, nvml.SUCCESS
}

// computeRangeFreeLocked reports whether compute slices [start, start+size) are inside the
// GPU instance and free.
func (gi *simGPUInstance) computeRangeFreeLocked(start, size int) bool {
	if start < 0 || start+size > gi.profile.ComputeSlices {
		return false
	}
	for _, ci := range gi.computeInstances {
		if start < ci.start+ci.slices && ci.start < start+size {
			return false
		}
	}
	return true
}

// freeComputeStartLocked is the first start of size contiguous free compute slices.
func (gi *simGPUInstance) freeComputeStartLocked(size int) (int, bool) {
	for start := 0; start+size <= gi.profile.ComputeSlices; start++ {
		if gi.computeRangeFreeLocked(start, size) {
			return start, true
		}
	}
	return 0, false
}

func (gi *simGPUInstance) computeInstanceRemainingCapacity(info *nvml.ComputeInstanceProfileInfo) (int, nvml.Return) {
	gi.gpu.node.mu.Lock()
	defer gi.gpu.node.mu.Unlock()
	if gi.destroyed || info == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	size, ret := gi.computeProfile(int(info.Id))
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	free := gi.profile.ComputeSlices
	for _, ci := range gi.computeInstances {
		free -= ci.slices
	}
	return free / size, nvml.SUCCESS
}

// createComputeInstance takes the first free run of compute slices. Compute instance ids
// are the lowest free in the GPU instance, from 0.
func (gi *simGPUInstance) createComputeInstance(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	g := gi.gpu
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	if gi.destroyed || info == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	size, ret := gi.computeProfile(int(info.Id))
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	start, ok := gi.freeComputeStartLocked(size)
	if !ok {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	id := lowestFreeID(gi.computeInstances, func(ci *simComputeInstance) int { return ci.id })
	ci := gi.newComputeInstance(id, int(info.Id), start, size, g.migDeviceUUID(g.uuidsIssued))
	g.uuidsIssued++
	gi.insertComputeInstanceLocked(ci)
	if ret := g.node.commitLocked(func() { gi.removeComputeInstanceLocked(ci) }); ret != nvml.SUCCESS {
		return nil, ret
	}
	return ci, nvml.SUCCESS
}

func (gi *simGPUInstance) insertComputeInstanceLocked(ci *simComputeInstance) {
	gi.computeInstances = append(gi.computeInstances, ci)
	slices.SortFunc(gi.computeInstances, func(a, b *simComputeInstance) int { return cmp.Compare(a.id, b.id) })
	ci.destroyed = false
}

func (gi *simGPUInstance) removeComputeInstanceLocked(ci *simComputeInstance) {
	gi.computeInstances = slices.DeleteFunc(gi.computeInstances, func(other *simComputeInstance) bool { return other == ci })
	ci.destroyed = true
}

func (gi *simGPUInstance) getComputeInstances(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
	gi.gpu.node.mu.Lock()
	defer gi.gpu.node.mu.Unlock()
	if gi.destroyed || info == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if _, ret := gi.computeProfile(int(info.Id)); ret != nvml.SUCCESS {
		return nil, ret
	}
	instances := []nvml.ComputeInstance{}
	for _, ci := range gi.computeInstances {
		if ci.profileID == int(info.Id) {
			instances = append(instances, ci)
		}
	}
	return instances, nvml.SUCCESS
}

func (gi *simGPUInstance) getComputeInstanceByID(id int) (nvml.ComputeInstance, nvml.Return) {
	gi.gpu.node.mu.Lock()
	defer gi.gpu.node.mu.Unlock()
	if gi.destroyed {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	for _, ci := range gi.computeInstances {
		if ci.id == id {
			return ci, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// destroy refuses while compute instances remain: they go first, as on hardware.
func (gi *simGPUInstance) destroy() nvml.Return {
	g := gi.gpu
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	switch {
	case gi.destroyed:
		return nvml.ERROR_INVALID_ARGUMENT
	case len(gi.computeInstances) > 0:
		return nvml.ERROR_IN_USE
	}
	g.removeGpuInstanceLocked(gi)
	return g.node.commitLocked(func() { g.insertGpuInstanceLocked(gi) })
}

func (gi *simGPUInstance) newComputeInstance(id, profileID, start, size int, uuid string) *simComputeInstance {
	ci := &simComputeInstance{gpuInstance: gi, id: id, profileID: profileID, start: start, slices: size}
	ci.GetInfoFunc = ci.getInfo
	ci.DestroyFunc = ci.destroy
	FillUnsetWithNotSupported(&ci.ComputeInstance)
	ci.migDevice = newSimMIGDevice(ci, uuid)
	return ci
}

func (ci *simComputeInstance) getInfo() (nvml.ComputeInstanceInfo, nvml.Return) {
	gi := ci.gpuInstance
	gi.gpu.node.mu.Lock()
	defer gi.gpu.node.mu.Unlock()
	if ci.destroyed {
		return nvml.ComputeInstanceInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return nvml.ComputeInstanceInfo{
		Device:      gi.gpu.device,
		GpuInstance: gi,
		Id:          uint32(ci.id),
		ProfileId:   uint32(ci.profileID),
		Placement:   nvml.ComputeInstancePlacement{Start: uint32(ci.start), Size: uint32(ci.slices)},
	}, nvml.SUCCESS
}

func (ci *simComputeInstance) destroy() nvml.Return {
	gi := ci.gpuInstance
	gi.gpu.node.mu.Lock()
	defer gi.gpu.node.mu.Unlock()
	if ci.destroyed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	gi.removeComputeInstanceLocked(ci)
	return gi.gpu.node.commitLocked(func() { gi.insertComputeInstanceLocked(ci) })
}

// name is what CUDA and nvidia-smi call the MIG device: "NVIDIA H100 80GB HBM3 MIG
// 1g.10gb", or "… MIG 1c.3g.40gb" for a compute instance smaller than its GPU instance.
func (ci *simComputeInstance) name() string {
	gi := ci.gpuInstance
	if ci.slices == gi.profile.ComputeSlices {
		return gi.gpu.device.Name + " MIG " + gi.profile.Name
	}
	return fmt.Sprintf("%s MIG %dc.%s", gi.gpu.device.Name, ci.slices, gi.profile.Name)
}

func newSimMIGDevice(ci *simComputeInstance, uuid string) *simMIGDevice {
	d := &simMIGDevice{computeInstance: ci, uuid: uuid}
	gi := ci.gpuInstance
	node := gi.gpu.node
	// Every query of a destroyed compute instance's handle fails, as NVML's do.
	alive := func() bool {
		node.mu.Lock()
		defer node.mu.Unlock()
		return !ci.destroyed
	}
	d.GetUUIDFunc = func() (string, nvml.Return) {
		if !alive() {
			return "", nvml.ERROR_INVALID_ARGUMENT
		}
		return uuid, nvml.SUCCESS
	}
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
	d.GetGpuInstanceIdFunc = func() (int, nvml.Return) {
		if !alive() {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return gi.id, nvml.SUCCESS
	}
	d.GetComputeInstanceIdFunc = func() (int, nvml.Return) {
		if !alive() {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return ci.id, nvml.SUCCESS
	}
	d.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) {
		if !alive() {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return gi.gpu.device, nvml.SUCCESS
	}
	d.GetNameFunc = func() (string, nvml.Return) {
		if !alive() {
			return "", nvml.ERROR_INVALID_ARGUMENT
		}
		return ci.name(), nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if !alive() {
			return nvml.Memory{}, nvml.ERROR_INVALID_ARGUMENT
		}
		total := gi.gpu.memoryMiB * mib * uint64(gi.profile.MemorySlices) / mig.MemorySlices
		used := node.activity.lookup(uuid, fmt.Sprintf("%d/%d", gi.gpu.index, gi.id)).FBUsedBytes
		return memoryUsed(total, used), nvml.SUCCESS
	}
	FillUnsetWithNotSupported(&d.Device)
	return d
}

// migDeviceByUUID finds a live MIG device of the node by its "MIG-…" UUID, for
// DeviceGetHandleByUUID.
func (s *simMIG) migDeviceByUUID(uuid string) (nvml.Device, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gpus {
		for _, gi := range g.gpuInstances {
			for _, ci := range gi.computeInstances {
				if ci.migDevice.uuid == uuid {
					return ci.migDevice, true
				}
			}
		}
	}
	return nil, false
}
