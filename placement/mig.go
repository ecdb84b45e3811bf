// MIG geometry: the NVIDIA Multi-Instance GPU placement tables of the GPU models raygo
// carves, and the allocator that chooses where a slice goes (mig_allocator.go).
//
// A MIG GPU has 8 memory slices and 7 compute slices. A GPU instance of a profile takes
// a contiguous range of memory slices [start, start+size) and some compute slices; the
// profile fixes the size, the compute, the starts it may take, and how many instances
// of it a GPU may hold. Source: NVIDIA's MIG User Guide ("Supported MIG Profiles" and
// the `nvidia-smi mig -lgipp` listings), gathered in shared/reference/mig-profiles.md.
// The four supported models share one geometry; only the profile names (their memory
// in GB) differ, so `nvidia.com/mig-1g.10gb` is a 2-memory-slice profile on an
// A100-40GB and a 1-slice profile on an H100-80GB. Profiles are resolved per GPU.
//
// The tables are NVIDIA's, not go-nvml's mock tables: the mock reports enum indices as
// profile ids and its H100 placements differ from real hardware.
//
// What lives here:
//   - MIGModel (MIGModelOfDevice maps an NVML device name to it) and MIGProfile (one
//     row of a model's table: NVML profile id, slices, valid starts, max instances);
//   - resource names: MIGResourcePrefix, MIGProfileName, MIGModelsWithProfile and
//     CheckMIGResource, whose errors become gRPC InvalidArgument;
//   - in mig_allocator.go, a GPU's slot map (MIGGPU: held and idle instances), the
//     feasible placements of a profile, and PlanMIG, which picks the GPU and the start
//     across a set of GPUs: reuse an idle instance, carve in free slices choosing the
//     start that keeps the largest profiles placeable (best fit) or the lowest start
//     (first fit, for comparison), or destroy idle instances to make room.

package placement

import (
	"fmt"
	"slices"
	"strings"
)

// MIG GPU dimensions, the same on every supported model.
const (
	// MIGMemorySlices is the number of memory slices of a MIG GPU; a placement's start
	// and size count them.
	MIGMemorySlices = 8
	// MIGComputeSlices is the number of compute slices (groups of SMs): the compute
	// slices of a GPU's instances add up to at most this.
	MIGComputeSlices = 7
)

// MIGResourcePrefix starts the resource name of every MIG profile:
// "nvidia.com/mig-1g.10gb", as NVIDIA's Kubernetes device plugin names them.
const MIGResourcePrefix = "nvidia.com/mig-"

// MIGModel names a GPU model by its MIG tables: "H100-80GB".
type MIGModel string

// The GPU models with MIG tables. An H100 NVL (94 GB) or a GH200 has other profiles and
// is not one of them.
const (
	MIGModelA100_40GB  MIGModel = "A100-40GB"
	MIGModelA100_80GB  MIGModel = "A100-80GB"
	MIGModelH100_80GB  MIGModel = "H100-80GB"
	MIGModelH200_141GB MIGModel = "H200-141GB"
)

// migModels lists the supported models in the order messages name them.
var migModels = []MIGModel{MIGModelA100_40GB, MIGModelA100_80GB, MIGModelH100_80GB, MIGModelH200_141GB}

// MIGModels returns the supported models.
func MIGModels() []MIGModel { return slices.Clone(migModels) }

// migShape is one row of the geometry shared by every model.
type migShape struct {
	id              int // NVML GPU instance profile id on real hardware (nvidia-smi mig -lgip)
	compute         int // compute slices
	memory          int // memory slices: the placement size
	maxInstances    int
	starts          uint8 // bit s set: s is a valid start memory slice
	mediaExtensions bool  // a "+me" profile: at most one per GPU
}

func startMask(starts ...int) uint8 {
	var mask uint8
	for _, start := range starts {
		mask |= 1 << start
	}
	return mask
}

// migShapes is the MIG User Guide's table, rows in its order. Every valid start keeps
// the range inside the 8 slices; memory slice 7 is reached only by the 2-slice 1g
// profile at 6, the 3g at 4 and the 7g.
var migShapes = [...]migShape{
	{id: 19, compute: 1, memory: 1, maxInstances: 7, starts: startMask(0, 1, 2, 3, 4, 5, 6)},
	{id: 20, compute: 1, memory: 1, maxInstances: 1, starts: startMask(0, 1, 2, 3, 4, 5, 6), mediaExtensions: true},
	{id: 15, compute: 1, memory: 2, maxInstances: 4, starts: startMask(0, 2, 4, 6)},
	{id: 14, compute: 2, memory: 2, maxInstances: 3, starts: startMask(0, 2, 4)},
	{id: 9, compute: 3, memory: 4, maxInstances: 2, starts: startMask(0, 4)},
	{id: 5, compute: 4, memory: 4, maxInstances: 1, starts: startMask(0)},
	{id: 0, compute: 7, memory: 8, maxInstances: 1, starts: startMask(0)},
}

const migShapeCount = len(migShapes)

// migProfileNames are each model's names for the rows of migShapes.
var migProfileNames = map[MIGModel][migShapeCount]string{
	MIGModelA100_40GB:  {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
	MIGModelA100_80GB:  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
	MIGModelH100_80GB:  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
	MIGModelH200_141GB: {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
}

// migProfileTables holds every model's profiles, built once from the two tables above.
var migProfileTables = buildMIGProfileTables()

func buildMIGProfileTables() map[MIGModel][]MIGProfile {
	tables := make(map[MIGModel][]MIGProfile, len(migProfileNames))
	for model, names := range migProfileNames {
		profiles := make([]MIGProfile, migShapeCount)
		for i, shape := range migShapes {
			profiles[i] = MIGProfile{
				Model:           model,
				ID:              shape.id,
				Name:            names[i],
				ComputeSlices:   shape.compute,
				MemorySlices:    shape.memory,
				MaxInstances:    shape.maxInstances,
				MediaExtensions: shape.mediaExtensions,
				shape:           i,
			}
		}
		tables[model] = profiles
	}
	return tables
}

// MIGProfile is one GPU instance profile of one model: a row of its placement table.
// Values come from the tables (MIGModel.Profiles, Profile, ProfileByID); the zero value
// is no profile.
type MIGProfile struct {
	Model MIGModel
	// ID is the NVML GPU instance profile id real hardware reports (nvmlGpuInstanceProfileInfo_t.id,
	// the ID column of `nvidia-smi mig -lgip`): 19, 20, 15, 14, 9, 5, 0.
	ID int
	// Name is the model's name for it: "1g.10gb", "1g.10gb+me".
	Name string
	// ComputeSlices and MemorySlices are what an instance takes; MemorySlices is the
	// size of its placement.
	ComputeSlices int
	MemorySlices  int
	// MaxInstances is the most instances of the profile one GPU holds.
	MaxInstances int
	// MediaExtensions: a "+me" profile, with the GPU's media engines (NVDEC, NVJPG,
	// OFA); at most one per GPU.
	MediaExtensions bool

	shape int // row of migShapes
}

// ResourceName is the profile as a bundle requests it: "nvidia.com/mig-1g.10gb".
func (p MIGProfile) ResourceName() string { return MIGResourcePrefix + p.Name }

// ValidStarts returns the memory slices an instance of the profile may start at,
// ascending.
func (p MIGProfile) ValidStarts() []int {
	var starts []int
	for start := range MIGMemorySlices {
		if p.IsValidStart(start) {
			starts = append(starts, start)
		}
	}
	return starts
}

// IsValidStart reports whether an instance of the profile may start at memory slice
// start.
func (p MIGProfile) IsValidStart(start int) bool {
	return p.Model != "" && start >= 0 && start < MIGMemorySlices && migShapes[p.shape].starts&(1<<start) != 0
}

// Placement is the NVML placement of an instance starting at start.
func (p MIGProfile) Placement(start int) MIGPlacement {
	return MIGPlacement{Start: start, Size: p.MemorySlices}
}

func (p MIGProfile) String() string {
	return fmt.Sprintf("%s %s (profile %d)", p.Model, p.Name, p.ID)
}

// MIGPlacement is NVML's nvmlGpuInstancePlacement_t: memory slices [Start, Start+Size).
type MIGPlacement struct {
	Start int
	Size  int
}

func (p MIGPlacement) String() string { return fmt.Sprintf("[%d,%d)", p.Start, p.Start+p.Size) }

// Profiles returns the model's table in the MIG User Guide's order (1g up to 7g), or
// nil for an unsupported model.
func (m MIGModel) Profiles() []MIGProfile { return slices.Clone(migProfileTables[m]) }

// Profile returns the model's profile named name ("1g.10gb", "1g.10gb+me").
func (m MIGModel) Profile(name string) (MIGProfile, bool) {
	for _, profile := range migProfileTables[m] {
		if profile.Name == name {
			return profile, true
		}
	}
	return MIGProfile{}, false
}

// ProfileByID returns the model's profile with the NVML profile id.
func (m MIGModel) ProfileByID(id int) (MIGProfile, bool) {
	for _, profile := range migProfileTables[m] {
		if profile.ID == id {
			return profile, true
		}
	}
	return MIGProfile{}, false
}

// ResolveResource returns the model's profile for a resource name
// ("nvidia.com/mig-1g.10gb"); see MIGProfileName for the spellings accepted.
func (m MIGModel) ResolveResource(resource string) (MIGProfile, bool) {
	name, ok := MIGProfileName(resource)
	if !ok {
		return MIGProfile{}, false
	}
	return m.Profile(name)
}

// MIGModelOfDevice returns the model of an NVML device name (nvmlDeviceGetName):
// "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3",
// "NVIDIA H100 PCIe", "NVIDIA H200". The family and the memory size in the name decide;
// an A100 whose name gives no size, an NVL part (H100 NVL is 94 GB, with other
// profiles), other sizes and other families are not supported.
func MIGModelOfDevice(deviceName string) (MIGModel, bool) {
	fields := strings.FieldsFunc(strings.ToUpper(deviceName), func(r rune) bool {
		return r == ' ' || r == '-' || r == '_'
	})
	var family, memory string
	for _, field := range fields {
		switch {
		case field == "A100" || field == "H100" || field == "H200":
			family = field
		case field == "NVL":
			return "", false
		case strings.HasSuffix(field, "GB") && len(field) > 2 && strings.Trim(field[:len(field)-2], "0123456789") == "":
			memory = field
		}
	}
	switch {
	case family == "A100" && memory == "40GB":
		return MIGModelA100_40GB, true
	case family == "A100" && memory == "80GB":
		return MIGModelA100_80GB, true
	case family == "H100" && (memory == "80GB" || memory == ""):
		return MIGModelH100_80GB, true
	case family == "H200" && (memory == "141GB" || memory == ""):
		return MIGModelH200_141GB, true
	default:
		return "", false
	}
}

// IsMIGResource reports whether a resource name is a MIG profile request (starts with
// MIGResourcePrefix), known or not.
func IsMIGResource(resource string) bool { return strings.HasPrefix(resource, MIGResourcePrefix) }

// MIGProfileName returns the profile name of a MIG resource name:
// "nvidia.com/mig-1g.10gb" → "1g.10gb". The Kubernetes device plugin's spelling of a
// media-extension profile, "nvidia.com/mig-1g.10gb.me" ('+' is not allowed in
// Kubernetes resource names), is read as NVIDIA's "1g.10gb+me". It does not check
// that any model has the profile.
func MIGProfileName(resource string) (string, bool) {
	name, ok := strings.CutPrefix(resource, MIGResourcePrefix)
	if !ok || name == "" {
		return "", false
	}
	if base, ok := strings.CutSuffix(name, ".me"); ok {
		name = base + "+me"
	}
	return name, true
}

// MIGModelsWithProfile returns the supported models that have a profile, given by its
// name ("1g.10gb") or its resource name ("nvidia.com/mig-1g.10gb"): [A100-40GB,
// A100-80GB, H100-80GB] for 1g.10gb, none for "3g.99gb".
func MIGModelsWithProfile(profile string) []MIGModel {
	if name, ok := MIGProfileName(profile); ok {
		profile = name
	}
	var models []MIGModel
	for _, model := range migModels {
		if _, ok := model.Profile(profile); ok {
			models = append(models, model)
		}
	}
	return models
}

// CheckMIGResource checks one resource of a bundle: nil unless the name is a MIG
// profile's. A MIG profile must be one that a supported model has (else
// ErrUnknownMIGProfile, naming every model's profiles), and its amount must be 1, or 0
// for none (else ErrInvalidMIGAmount): a bundle gets at most one MIG device. The error
// is a *FieldError whose field is the resource, `["nvidia.com/mig-3g.99gb"]`, for the
// caller to prefix with the bundle (`bundles[0]["nvidia.com/mig-3g.99gb"]: no
// supported GPU model has this MIG profile (A100-40GB has 1g.5gb, …; …)`).
func CheckMIGResource(resource string, amount Amount) error {
	if !IsMIGResource(resource) {
		return nil
	}
	name, _ := MIGProfileName(resource)
	models := MIGModelsWithProfile(name)
	if len(models) == 0 {
		return fieldErrorf(ErrUnknownMIGProfile, resourceField(resource),
			"no supported GPU model has this MIG profile (%s)", describeMIGModels())
	}
	if amount != 0 && amount != AmountScale {
		return fieldErrorf(ErrInvalidMIGAmount, resourceField(resource),
			"a bundle gets at most one MIG device (CUDA uses only the first): amount must be 1, got %s (MIG profile %s of %s)",
			amount, name, joinMIGModels(models))
	}
	return nil
}

// describeMIGModels lists every model's profiles: "A100-40GB has 1g.5gb, …; H100-80GB has …".
func describeMIGModels() string {
	parts := make([]string, len(migModels))
	for i, model := range migModels {
		names := migProfileNames[model]
		parts[i] = string(model) + " has " + strings.Join(names[:], ", ")
	}
	return strings.Join(parts, "; ")
}

func joinMIGModels(models []MIGModel) string {
	parts := make([]string, len(models))
	for i, model := range models {
		parts[i] = string(model)
	}
	return strings.Join(parts, ", ")
}
