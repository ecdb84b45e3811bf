package gpusim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/raygo-dev/raygo/internal/mig"
)

// SimMIGGPU is the MIG state of one simulated GPU as its simulated driver holds it: what a
// test checks after carving or destroying through NVML.
type SimMIGGPU struct {
	// Index is the GPU's NVML index; UUID its "GPU-…" UUID.
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	// Model names the MIG table the GPU follows.
	Model      mig.Model `json:"model"`
	MIGEnabled bool      `json:"mig_enabled"`
	// GPUInstances by GIID.
	GPUInstances []SimGPUInstance `json:"gpu_instances"`
}

// SimGPUInstance is a simulated GPU instance.
type SimGPUInstance struct {
	GIID int `json:"giid"`
	// ProfileID is the NVML profile id (mig.Profile.ID).
	ProfileID int `json:"profile_id"`
	// Start and Size place it in memory slices: [Start, Start+Size).
	Start int `json:"start"`
	Size  int `json:"size"`
	// ComputeInstances by CIID.
	ComputeInstances []SimComputeInstance `json:"compute_instances"`
}

// SimComputeInstance is a simulated compute instance and its MIG device.
type SimComputeInstance struct {
	CIID int `json:"ciid"`
	// ProfileID is the compute instance profile (NVML_COMPUTE_INSTANCE_PROFILE_*).
	ProfileID int `json:"profile_id"`
	// Start and Size place it among its GPU instance's compute slices.
	Start      int    `json:"start"`
	Size       int    `json:"size"`
	DeviceUUID string `json:"device_uuid"`
}

// SimulatedMIGState returns the MIG state of a simulated machine's GPUs (lib from
// Simulate), by index; none for a model without MIG tables. ok is false when lib is not
// a simulated NVML.
func SimulatedMIGState(lib nvml.Interface) (gpus []SimMIGGPU, ok bool) {
	server, ok := lib.(*simServer)
	if !ok {
		return nil, false
	}
	if server.mig == nil {
		return nil, true
	}
	server.mig.mu.Lock()
	defer server.mig.mu.Unlock()
	for _, g := range server.mig.gpus {
		gpus = append(gpus, g.stateLocked())
	}
	return gpus, true
}

// ReadSimulatedMIGState reads the MIG state a simulated node keeps in
// SimOptions.MIGStateFile, for a test or tool in another process.
func ReadSimulatedMIGState(path string) ([]SimMIGGPU, error) {
	file, err := readSimMIGStateFile(path)
	if err != nil {
		return nil, err
	}
	gpus := make([]SimMIGGPU, len(file.GPUs))
	for i, g := range file.GPUs {
		gpus[i] = g.SimMIGGPU
	}
	return gpus, nil
}

// simMIGStateFile is the JSON of SimOptions.MIGStateFile.
type simMIGStateFile struct {
	Version int              `json:"version"`
	GPUs    []simMIGStateGPU `json:"gpus"`
}

const simMIGStateVersion = 1

type simMIGStateGPU struct {
	SimMIGGPU
	// UUIDsIssued keeps MIG device UUIDs unique across restarts of the simulated node.
	UUIDsIssued uint64 `json:"uuids_issued"`
}

func readSimMIGStateFile(path string) (simMIGStateFile, error) {
	var file simMIGStateFile
	data, err := os.ReadFile(path)
	if err != nil {
		return file, fmt.Errorf("simulated MIG state: %w", err)
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return file, fmt.Errorf("simulated MIG state %s: %w", path, err)
	}
	if file.Version != simMIGStateVersion {
		return file, fmt.Errorf("simulated MIG state %s: version %d, want %d", path, file.Version, simMIGStateVersion)
	}
	return file, nil
}

func (g *simMIGGPU) stateLocked() SimMIGGPU {
	state := SimMIGGPU{Index: g.index, UUID: g.device.UUID, Model: g.model, MIGEnabled: g.enabled, GPUInstances: []SimGPUInstance{}}
	for _, gi := range g.gpuInstances {
		instance := SimGPUInstance{GIID: gi.id, ProfileID: gi.profile.ID, Start: gi.start, Size: gi.profile.MemorySlices,
			ComputeInstances: []SimComputeInstance{}}
		for _, ci := range gi.computeInstances {
			instance.ComputeInstances = append(instance.ComputeInstances, SimComputeInstance{
				CIID: ci.id, ProfileID: ci.profileID, Start: ci.start, Size: ci.slices, DeviceUUID: ci.migDevice.uuid,
			})
		}
		state.GPUInstances = append(state.GPUInstances, instance)
	}
	return state
}

// persistLocked writes the state file, whole, through a rename so that a reader never
// sees half of it.
func (s *simMIG) persistLocked() error {
	if s.stateFile == "" {
		return nil
	}
	file := simMIGStateFile{Version: simMIGStateVersion}
	for _, g := range s.gpus {
		file.GPUs = append(file.GPUs, simMIGStateGPU{SimMIGGPU: g.stateLocked(), UUIDsIssued: g.uuidsIssued})
	}
	data, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.stateFile), 0o755); err != nil {
		return err
	}
	tmp := s.stateFile + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.stateFile)
}

// load restores the state file, when there is one: the MIG mode and instances of each
// GPU, as a machine keeps them while its raylet restarts. The file must be this
// machine's (same GPU UUIDs, so the same SimOptions.Seed) and keep the geometry.
func (s *simMIG) load() error {
	file, err := readSimMIGStateFile(s.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, saved := range file.GPUs {
		if err := s.restore(saved); err != nil {
			return fmt.Errorf("simulated MIG state %s: GPU %d: %w", s.stateFile, saved.Index, err)
		}
	}
	return nil
}

func (s *simMIG) restore(saved simMIGStateGPU) error {
	if saved.Index < 0 || saved.Index >= len(s.gpus) {
		return fmt.Errorf("no such GPU: the machine has %d", len(s.gpus))
	}
	g := s.gpus[saved.Index]
	switch {
	case saved.UUID != g.device.UUID:
		return fmt.Errorf("saved for GPU %s, this machine's is %s (another SimOptions.Seed)", saved.UUID, g.device.UUID)
	case saved.Model != g.model:
		return fmt.Errorf("saved for a %s, this machine's is a %s", saved.Model, g.model)
	case !saved.MIGEnabled && len(saved.GPUInstances) > 0:
		return errors.New("GPU instances with MIG mode off")
	}
	var carved []simInstance
	uuids := map[string]bool{}
	var gpuInstances []*simGPUInstance
	for _, savedGI := range saved.GPUInstances {
		profile, ok := g.model.ProfileByID(savedGI.ProfileID)
		if !ok || savedGI.Size != profile.MemorySlices {
			return fmt.Errorf("GPU instance %d: no %s profile %d of size %d", savedGI.GIID, g.model, savedGI.ProfileID, savedGI.Size)
		}
		if savedGI.GIID < 0 || slices.ContainsFunc(gpuInstances, func(gi *simGPUInstance) bool { return gi.id == savedGI.GIID }) {
			return fmt.Errorf("GPU instance id %d repeated or negative", savedGI.GIID)
		}
		carved = append(carved, simInstance{profile: profile, start: savedGI.Start})
		gi := g.newGpuInstance(savedGI.GIID, profile, savedGI.Start)
		for _, savedCI := range savedGI.ComputeInstances {
			size, ret := gi.computeProfile(savedCI.ProfileID)
			switch {
			case ret != nvml.SUCCESS || size != savedCI.Size:
				return fmt.Errorf("GPU instance %d, compute instance %d: no compute profile %d of %d slices in a %s", savedGI.GIID, savedCI.CIID, savedCI.ProfileID, savedCI.Size, profile.Name)
			case !gi.computeRangeFreeLocked(savedCI.Start, size):
				return fmt.Errorf("GPU instance %d, compute instance %d: compute slices [%d,%d) overlap another or leave the %d of a %s", savedGI.GIID, savedCI.CIID, savedCI.Start, savedCI.Start+size, profile.ComputeSlices, profile.Name)
			case savedCI.DeviceUUID == "" || uuids[savedCI.DeviceUUID]:
				return fmt.Errorf("GPU instance %d, compute instance %d: MIG device UUID %q empty or repeated", savedGI.GIID, savedCI.CIID, savedCI.DeviceUUID)
			case savedCI.CIID < 0 || slices.ContainsFunc(gi.computeInstances, func(ci *simComputeInstance) bool { return ci.id == savedCI.CIID }):
				return fmt.Errorf("GPU instance %d: compute instance id %d repeated or negative", savedGI.GIID, savedCI.CIID)
			}
			uuids[savedCI.DeviceUUID] = true
			gi.insertComputeInstanceLocked(gi.newComputeInstance(savedCI.CIID, savedCI.ProfileID, savedCI.Start, size, savedCI.DeviceUUID))
		}
		gpuInstances = append(gpuInstances, gi)
	}
	if err := checkSimGeometry(g.model, carved); err != nil {
		return err
	}
	g.enabled = saved.MIGEnabled
	g.uuidsIssued = saved.UUIDsIssued
	for _, gi := range gpuInstances {
		g.insertGpuInstanceLocked(gi)
	}
	return nil
}
