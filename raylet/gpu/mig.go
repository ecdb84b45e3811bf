package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/raygo-dev/raygo/internal/mig"
)

// MIGInstanceInfo is one MIG instance of a GPU as NVML reports it: a GPU instance with its
// placement, its compute instance and the MIG device CUDA sees.
type MIGInstanceInfo struct {
	// GPU is the NVML index of the parent GPU.
	GPU int
	// ProfileID is the NVML GPU instance profile id (nvmlGpuInstanceProfileInfo_t.id, the
	// ID column of `nvidia-smi mig -lgip`): mig.Profile.ID of the GPU's model.
	ProfileID int
	// Start and Size are the placement in memory slices, [Start, Start+Size)
	// (mig.Placement).
	Start, Size int
	// GIID is the GPU instance id. CIID is the id of its compute instance (the lowest, if
	// it has several), NoComputeInstance when it has none: a carve interrupted between its
	// two steps, which only Destroy can use.
	GIID, CIID int
	// ComputeInstances counts the GPU instance's compute instances: 1 for what Carve makes;
	// anything else was carved by someone else.
	ComputeInstances int
	// DeviceUUID is the MIG device's UUID, "MIG-…", the CUDA_VISIBLE_DEVICES of a bundle
	// holding the instance; empty without a compute instance.
	DeviceUUID string
}

// NoComputeInstance is the CIID of a GPU instance without a compute instance.
const NoComputeInstance = -1

// MIGManager turns MIG mode on and off, carves and destroys MIG instances, and finds the
// instances that exist, through NVML: the real library (nvml.New()) or a simulated
// machine (gpusim.Simulate).
//
// It speaks the hardware's vocabulary: a profile is its NVML profile id (placement's
// MIGProfile.ID), a placement its start memory slice. NVML's GetGpuInstanceProfileInfo is
// asked by profile enum (NVML_GPU_INSTANCE_PROFILE_*) and answers the id; the manager
// learns each GPU's enum → id mapping by asking for every enum, as nvidia-smi does, and
// so holds no table of its own (the simulation's is in gpusim).
//
// Concurrency: safe for concurrent use; calls are serialized, since NVML does not promise
// that reconfiguring a GPU races safely with reading it, and carving is rare. NVML stays
// initialised from NewMIGManager to Close.
type MIGManager struct {
	lib nvml.Interface

	mu     sync.Mutex
	closed bool
	// profiles caches each GPU's GPU instance profiles by index; NVML says they do not
	// change while the MIG mode stays. SetMode forgets the GPU's.
	profiles map[int][]nvml.GpuInstanceProfileInfo
}

// migSymbols are the newest NVML functions MIGManager calls (R470 drivers and later have
// them); go-nvml binds symbols lazily and calling a missing one aborts the process.
var migSymbols = []string{"nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlDeviceGetMigDeviceHandleByIndex"}

// NewMIGManager initialises lib. When NVML cannot be initialised it returns an error
// wrapping ErrNVMLUnavailable and makes no other NVML call: after a failed Init an NVML
// call can crash the process. A library without the MIG functions is ErrMIGUnsupported.
func NewMIGManager(lib nvml.Interface) (manager *MIGManager, err error) {
	defer func() {
		// go-nvml panics when libnvidia-ml.so is present but lacks a symbol it needs.
		if r := recover(); r != nil {
			manager, err = nil, fmt.Errorf("%w: %v", ErrNVMLUnavailable, r)
		}
	}()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: Init: %s", ErrNVMLUnavailable, nvml.ErrorString(ret))
	}
	for _, symbol := range migSymbols {
		if !hasSymbol(lib, symbol) {
			lib.Shutdown()
			return nil, fmt.Errorf("%w: the NVML library lacks %s (driver older than R470?)", ErrMIGUnsupported, symbol)
		}
	}
	return &MIGManager{lib: lib, profiles: map[int][]nvml.GpuInstanceProfileInfo{}}, nil
}

// Close shuts NVML down; the manager refuses every call after it.
func (m *MIGManager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if ret := m.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML Shutdown: %w", ret)
	}
	return nil
}

// call runs op with the manager's lock, turning a go-nvml panic into an error.
func (m *MIGManager) call(op func() error) (err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: MIG manager closed", ErrNVMLUnavailable)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("NVML: %v", r)
		}
	}()
	return op()
}

// migDevice is one GPU as a MIG call sees it.
type migDevice struct {
	index  int
	handle nvml.Device
	// model is placement's name for the GPU's MIG tables, "" when it has none; used only
	// to name profiles in messages.
	model mig.Model
}

func (m *MIGManager) device(index int) (migDevice, error) {
	handle, ret := m.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return migDevice{}, fmt.Errorf("GPU %d: NVML DeviceGetHandleByIndex: %w", index, ret)
	}
	d := migDevice{index: index, handle: handle}
	if name, ret := handle.GetName(); ret == nvml.SUCCESS {
		d.model, _ = mig.ModelOfDevice(name)
	}
	return d, nil
}

// profileName names a profile id in messages: "profile 19 (1g.10gb)".
func (d migDevice) profileName(id int) string {
	if profile, ok := d.model.ProfileByID(id); ok {
		return fmt.Sprintf("profile %d (%s)", id, profile.Name)
	}
	return fmt.Sprintf("profile %d", id)
}

// migEnabled reads the current MIG mode; a GPU that cannot say is ErrMIGUnsupported.
//
// The helpers below return errors without the GPU: each MIGManager method prefixes its
// errors with the GPU and what it was doing.
func (d migDevice) migEnabled() (bool, error) {
	current, _, ret := d.handle.GetMigMode()
	switch ret {
	case nvml.SUCCESS:
		return current == nvml.DEVICE_MIG_ENABLE, nil
	case nvml.ERROR_NOT_SUPPORTED:
		return false, fmt.Errorf("%w: NVML GetMigMode: %w", ErrMIGUnsupported, ret)
	default:
		return false, fmt.Errorf("NVML GetMigMode: %w", ret)
	}
}

// gpuInstanceProfiles returns the GPU's GPU instance profiles, asking NVML for every
// profile enum once (ERROR_NOT_SUPPORTED and ERROR_INVALID_ARGUMENT: not on this GPU or
// driver).
func (m *MIGManager) gpuInstanceProfiles(d migDevice) ([]nvml.GpuInstanceProfileInfo, error) {
	if profiles, ok := m.profiles[d.index]; ok {
		return profiles, nil
	}
	var profiles []nvml.GpuInstanceProfileInfo
	for profileEnum := 0; profileEnum < nvml.GPU_INSTANCE_PROFILE_COUNT; profileEnum++ {
		info, ret := d.handle.GetGpuInstanceProfileInfo(profileEnum)
		switch ret {
		case nvml.SUCCESS:
			if !slices.ContainsFunc(profiles, func(p nvml.GpuInstanceProfileInfo) bool { return p.Id == info.Id }) {
				profiles = append(profiles, info)
			}
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT:
		default:
			return nil, fmt.Errorf("NVML GetGpuInstanceProfileInfo(%d): %w", profileEnum, ret)
		}
	}
	if len(profiles) == 0 {
		return nil, fmt.Errorf("%w: NVML reports no GPU instance profile", ErrMIGUnsupported)
	}
	m.profiles[d.index] = profiles
	return profiles, nil
}

func (m *MIGManager) gpuInstanceProfile(d migDevice, id int) (nvml.GpuInstanceProfileInfo, error) {
	profiles, err := m.gpuInstanceProfiles(d)
	if err != nil {
		return nvml.GpuInstanceProfileInfo{}, err
	}
	ids := make([]string, len(profiles))
	for i, p := range profiles {
		if int(p.Id) == id {
			return p, nil
		}
		ids[i] = d.profileName(int(p.Id))
	}
	return nvml.GpuInstanceProfileInfo{}, fmt.Errorf("%w %d; the GPU has %s", ErrMIGUnknownProfile, id, strings.Join(ids, ", "))
}

// Mode reports whether the GPU's MIG mode is on.
func (m *MIGManager) Mode(gpu int) (on bool, err error) {
	err = m.call(func() error {
		d, err := m.device(gpu)
		if err != nil {
			return err
		}
		if on, err = d.migEnabled(); err != nil {
			return fmt.Errorf("GPU %d: %w", gpu, err)
		}
		return nil
	})
	return on, err
}

// SetMode turns the GPU's MIG mode on or off; nothing is done when it already is. Turning
// it off fails with ErrMIGInUse while instances (or processes) remain. On hardware that
// needs a GPU reset to apply the change, the error wraps ErrMIGModePending.
func (m *MIGManager) SetMode(gpu int, on bool) error {
	want, word := nvml.DEVICE_MIG_DISABLE, "off"
	if on {
		want, word = nvml.DEVICE_MIG_ENABLE, "on"
	}
	return m.call(func() error {
		d, err := m.device(gpu)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("GPU %d: turn MIG mode %s", gpu, word)
		current, pending, ret := d.handle.GetMigMode()
		switch {
		case ret == nvml.ERROR_NOT_SUPPORTED:
			return fmt.Errorf("%s: %w: NVML GetMigMode: %w", what, ErrMIGUnsupported, ret)
		case ret != nvml.SUCCESS:
			return fmt.Errorf("%s: NVML GetMigMode: %w", what, ret)
		case current == want && pending == want:
			return nil
		}
		delete(m.profiles, gpu)
		activation, ret := d.handle.SetMigMode(want)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_SUPPORTED:
			return fmt.Errorf("%s: %w: NVML SetMigMode: %w", what, ErrMIGUnsupported, ret)
		case nvml.ERROR_IN_USE:
			return fmt.Errorf("%s: %w: MIG instances or processes remain: NVML SetMigMode: %w", what, ErrMIGInUse, ret)
		default:
			return fmt.Errorf("%s: NVML SetMigMode: %w", what, ret)
		}
		if activation != nvml.SUCCESS {
			return fmt.Errorf("%s: %w: NVML SetMigMode activation: %w", what, ErrMIGModePending, activation)
		}
		if current, _, ret = d.handle.GetMigMode(); ret != nvml.SUCCESS || current != want {
			return fmt.Errorf("%s: %w: NVML GetMigMode after the change: current mode %d (%s)", what, ErrMIGModePending, current, nvml.ErrorString(ret))
		}
		return nil
	})
}

// Instances lists the GPU's MIG instances by start: each GPU instance with its compute
// instance and MIG device UUID, as a restarted raylet finds them. A GPU whose MIG mode is
// off has none.
func (m *MIGManager) Instances(gpu int) (instances []MIGInstanceInfo, err error) {
	err = m.call(func() error {
		d, err := m.device(gpu)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("GPU %d: list MIG instances", gpu)
		switch on, err := d.migEnabled(); {
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case !on:
			return nil
		}
		found, err := m.gpuInstances(d)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		uuids, err := migDeviceUUIDs(d)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, gi := range found {
			info := MIGInstanceInfo{
				GPU: gpu, ProfileID: int(gi.info.ProfileId), Start: int(gi.info.Placement.Start), Size: int(gi.info.Placement.Size),
				GIID: int(gi.info.Id), CIID: NoComputeInstance,
			}
			computeInstances, err := computeInstancesOf(gi)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			info.ComputeInstances = len(computeInstances)
			if len(computeInstances) > 0 {
				info.CIID = int(computeInstances[0].info.Id)
				info.DeviceUUID = uuids[migDeviceKey{gi.info.Id, computeInstances[0].info.Id}]
			}
			instances = append(instances, info)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return instances, nil
}

// Carve makes a MIG instance of the profile (NVML profile id) at the start memory slice:
// the GPU instance with that explicit placement, then its default compute instance (one
// spanning all its compute slices), and returns it with its MIG device UUID. When the
// compute instance or the UUID cannot be had, what was made is destroyed again, so a
// failed Carve leaves the GPU as it was (unless that cleanup fails too, which the error
// says; Instances then shows the leftover).
//
// Errors name the GPU, the profile and the start, and wrap ErrMIGModeOff,
// ErrMIGUnknownProfile, ErrMIGInvalidStart or ErrMIGSlotsTaken with NVML's return code.
func (m *MIGManager) Carve(gpu, profileID, start int) (carved MIGInstanceInfo, err error) {
	err = m.call(func() error {
		d, err := m.device(gpu)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("GPU %d: carve %s at start %d", gpu, d.profileName(profileID), start)
		switch on, err := d.migEnabled(); {
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case !on:
			return fmt.Errorf("%s: %w", what, ErrMIGModeOff)
		}
		profile, err := m.gpuInstanceProfile(d, profileID)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		possible, ret := d.handle.GetGpuInstancePossiblePlacements(&profile)
		if ret != nvml.SUCCESS || len(possible) == 0 {
			return fmt.Errorf("%s: NVML GetGpuInstancePossiblePlacements: no placement (%s)", what, nvml.ErrorString(ret))
		}
		validStarts := make([]int, len(possible))
		for i, p := range possible {
			validStarts[i] = int(p.Start)
		}
		if start < 0 || start >= mig.MemorySlices {
			return fmt.Errorf("%s: %w: valid starts are %v", what, ErrMIGInvalidStart, validStarts)
		}
		// Every placement of a profile has its size; NVML judges the start.
		at := nvml.GpuInstancePlacement{Start: uint32(start), Size: possible[0].Size}
		gi, ret := d.handle.CreateGpuInstanceWithPlacement(&profile, &at)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_INVALID_ARGUMENT:
			return fmt.Errorf("%s: %w: valid starts are %v: NVML CreateGpuInstanceWithPlacement: %w", what, ErrMIGInvalidStart, validStarts, ret)
		case nvml.ERROR_INSUFFICIENT_RESOURCES:
			return fmt.Errorf("%s: %w: it overlaps an instance, or the profile's max instances, the compute slices or the media extensions are used up: NVML CreateGpuInstanceWithPlacement: %w",
				what, ErrMIGSlotsTaken, ret)
		case nvml.ERROR_NOT_SUPPORTED:
			return fmt.Errorf("%s: %w: NVML CreateGpuInstanceWithPlacement: %w", what, ErrMIGModeOff, ret)
		default:
			return fmt.Errorf("%s: NVML CreateGpuInstanceWithPlacement: %w", what, ret)
		}
		carved, err = finishCarve(d, gi, profile)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
	return carved, err
}

// finishCarve gives a new GPU instance its default compute instance and finds its MIG
// device, or destroys what it made and the GPU instance.
func finishCarve(d migDevice, gi nvml.GpuInstance, profile nvml.GpuInstanceProfileInfo) (MIGInstanceInfo, error) {
	var made []interface{ Destroy() nvml.Return }
	undo := func(cause error) error {
		var failures []error
		made = append(made, gi)
		for _, instance := range made {
			if ret := instance.Destroy(); ret != nvml.SUCCESS {
				failures = append(failures, ret)
			}
		}
		if len(failures) > 0 {
			return fmt.Errorf("%w; destroying the half-carved instance failed too: %w", cause, errors.Join(failures...))
		}
		return cause
	}
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return MIGInstanceInfo{}, undo(fmt.Errorf("NVML GpuInstance GetInfo: %w", ret))
	}
	ci, err := createDefaultComputeInstance(gi, profile.SliceCount)
	if err != nil {
		return MIGInstanceInfo{}, undo(err)
	}
	made = append(made, ci)
	ciInfo, ret := ci.GetInfo()
	if ret != nvml.SUCCESS {
		return MIGInstanceInfo{}, undo(fmt.Errorf("NVML ComputeInstance GetInfo: %w", ret))
	}
	uuids, err := migDeviceUUIDs(d)
	if err != nil {
		return MIGInstanceInfo{}, undo(err)
	}
	uuid, ok := uuids[migDeviceKey{giInfo.Id, ciInfo.Id}]
	if !ok {
		return MIGInstanceInfo{}, undo(fmt.Errorf("no MIG device for GPU instance %d, compute instance %d", giInfo.Id, ciInfo.Id))
	}
	return MIGInstanceInfo{
		GPU: d.index, ProfileID: int(giInfo.ProfileId), Start: int(giInfo.Placement.Start), Size: int(giInfo.Placement.Size),
		GIID: int(giInfo.Id), CIID: int(ciInfo.Id), ComputeInstances: 1, DeviceUUID: uuid,
	}, nil
}

// createDefaultComputeInstance makes the compute instance that spans all of the GPU
// instance's compute slices, what `nvidia-smi mig -cgi … -C` makes.
func createDefaultComputeInstance(gi nvml.GpuInstance, computeSlices uint32) (nvml.ComputeInstance, error) {
	for profileEnum := 0; profileEnum < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; profileEnum++ {
		info, ret := gi.GetComputeInstanceProfileInfo(profileEnum, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS || info.SliceCount != computeSlices {
			continue
		}
		ci, ret := gi.CreateComputeInstance(&info)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML CreateComputeInstance (compute profile %d): %w", info.Id, ret)
		}
		return ci, nil
	}
	return nil, fmt.Errorf("no compute instance profile spans the GPU instance's %d compute slices", computeSlices)
}

// Destroy destroys the MIG instance starting at the start memory slice: its compute
// instances first, then the GPU instance, the order NVML requires. Errors wrap
// ErrMIGInstanceNotFound when there is none, ErrMIGInUse when processes still use it.
func (m *MIGManager) Destroy(gpu, start int) error {
	return m.call(func() error {
		d, err := m.device(gpu)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("GPU %d: destroy the MIG instance at start %d", gpu, start)
		switch on, err := d.migEnabled(); {
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case !on:
			return fmt.Errorf("%s: %w: MIG mode is off", what, ErrMIGInstanceNotFound)
		}
		found, err := m.gpuInstances(d)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		k := slices.IndexFunc(found, func(gi foundGpuInstance) bool { return int(gi.info.Placement.Start) == start })
		if k < 0 {
			return fmt.Errorf("%s: %w", what, ErrMIGInstanceNotFound)
		}
		gi := found[k]
		what = fmt.Sprintf("GPU %d: destroy %s at start %d (GPU instance %d)", gpu, d.profileName(int(gi.info.ProfileId)), start, gi.info.Id)
		computeInstances, err := computeInstancesOf(gi)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, ci := range computeInstances {
			if ret := ci.handle.Destroy(); ret != nvml.SUCCESS {
				return fmt.Errorf("%s: compute instance %d: %w", what, ci.info.Id, destroyError(ret))
			}
		}
		if ret := gi.handle.Destroy(); ret != nvml.SUCCESS {
			return fmt.Errorf("%s: %w", what, destroyError(ret))
		}
		return nil
	})
}

func destroyError(ret nvml.Return) error {
	if ret == nvml.ERROR_IN_USE {
		return fmt.Errorf("%w: NVML Destroy: %w", ErrMIGInUse, ret)
	}
	return fmt.Errorf("NVML Destroy: %w", ret)
}

type foundGpuInstance struct {
	handle nvml.GpuInstance
	info   nvml.GpuInstanceInfo
}

// gpuInstances lists the GPU's GPU instances by start.
func (m *MIGManager) gpuInstances(d migDevice) ([]foundGpuInstance, error) {
	profiles, err := m.gpuInstanceProfiles(d)
	if err != nil {
		return nil, err
	}
	var found []foundGpuInstance
	for _, profile := range profiles {
		handles, ret := d.handle.GetGpuInstances(&profile)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML GetGpuInstances(%s): %w", d.profileName(int(profile.Id)), ret)
		}
		for _, handle := range handles {
			info, ret := handle.GetInfo()
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("NVML GpuInstance GetInfo: %w", ret)
			}
			found = append(found, foundGpuInstance{handle: handle, info: info})
		}
	}
	slices.SortFunc(found, func(a, b foundGpuInstance) int { return cmp.Compare(a.info.Placement.Start, b.info.Placement.Start) })
	return found, nil
}

type foundComputeInstance struct {
	handle nvml.ComputeInstance
	info   nvml.ComputeInstanceInfo
}

// computeInstancesOf lists a GPU instance's compute instances by id, over every compute
// instance profile it offers.
func computeInstancesOf(gi foundGpuInstance) ([]foundComputeInstance, error) {
	var found []foundComputeInstance
	var seenProfiles []uint32
	for profileEnum := 0; profileEnum < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; profileEnum++ {
		profile, ret := gi.handle.GetComputeInstanceProfileInfo(profileEnum, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS || slices.Contains(seenProfiles, profile.Id) {
			continue // not offered by this GPU instance
		}
		seenProfiles = append(seenProfiles, profile.Id)
		handles, ret := gi.handle.GetComputeInstances(&profile)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU instance %d: NVML GetComputeInstances(compute profile %d): %w", gi.info.Id, profile.Id, ret)
		}
		for _, handle := range handles {
			info, ret := handle.GetInfo()
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("GPU instance %d: NVML ComputeInstance GetInfo: %w", gi.info.Id, ret)
			}
			found = append(found, foundComputeInstance{handle: handle, info: info})
		}
	}
	slices.SortFunc(found, func(a, b foundComputeInstance) int { return cmp.Compare(a.info.Id, b.info.Id) })
	return found, nil
}

// migDeviceKey names a MIG device by its GPU instance and compute instance ids.
type migDeviceKey struct{ giid, ciid uint32 }

// migDeviceUUIDs maps the GPU's MIG devices to their UUIDs. NVML numbers MIG devices
// 0..GetMaxMigDeviceCount-1 with gaps (ERROR_NOT_FOUND) and renumbers them as instances
// come and go, so the ids, not the index, name one.
func migDeviceUUIDs(d migDevice) (map[migDeviceKey]string, error) {
	count, ret := d.handle.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML GetMaxMigDeviceCount: %w", ret)
	}
	uuids := map[migDeviceKey]string{}
	for i := 0; i < count; i++ {
		handle, ret := d.handle.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML GetMigDeviceHandleByIndex(%d): %w", i, ret)
		}
		giid, ret := handle.GetGpuInstanceId()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("MIG device %d: NVML GetGpuInstanceId: %w", i, ret)
		}
		ciid, ret := handle.GetComputeInstanceId()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("MIG device %d: NVML GetComputeInstanceId: %w", i, ret)
		}
		uuid, ret := handle.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("MIG device %d: NVML GetUUID: %w", i, ret)
		}
		uuids[migDeviceKey{uint32(giid), uint32(ciid)}] = uuid
	}
	return uuids, nil
}
