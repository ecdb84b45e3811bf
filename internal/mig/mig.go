// Package mig holds the NVIDIA Multi-Instance GPU vocabulary that every part of raygo
// shares: the GPU models raygo carves, their profile tables (NVML profile id, slices,
// valid starts, max instances) and the resource names that ask for a profile. It makes no
// decision: where a slice goes is the scheduler's (placement), carving it the raylet's.
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
package mig

import (
	"fmt"
	"slices"
	"strings"
)

// MIG GPU dimensions, the same on every supported model.
const (
	// MemorySlices is the number of memory slices of a MIG GPU; a placement's start
	// and size count them.
	MemorySlices = 8
	// ComputeSlices is the number of compute slices (groups of SMs): the compute
	// slices of a GPU's instances add up to at most this.
	ComputeSlices = 7
)

// ResourcePrefix starts the resource name of every MIG profile:
// "nvidia.com/mig-1g.10gb", as NVIDIA's Kubernetes device plugin names them.
const ResourcePrefix = "nvidia.com/mig-"

// Model names a GPU model by its MIG tables: "H100-80GB".
type Model string

// The GPU models with MIG tables. An H100 NVL (94 GB) or a GH200 has other profiles and
// is not one of them.
const (
	A100_40GB  Model = "A100-40GB"
	A100_80GB  Model = "A100-80GB"
	H100_80GB  Model = "H100-80GB"
	H200_141GB Model = "H200-141GB"
)

// supportedModels lists the supported models in the order messages name them.
var supportedModels = []Model{A100_40GB, A100_80GB, H100_80GB, H200_141GB}

// Models returns the supported models.
func Models() []Model { return slices.Clone(supportedModels) }

// Shape is one row of the geometry shared by every model: the MIG User Guide's table
// without the names, which differ per model (Profile carries them).
type Shape struct {
	ID              int   // NVML GPU instance profile id on real hardware (nvidia-smi mig -lgip)
	Compute         int   // compute slices
	Memory          int   // memory slices: the placement size
	MaxInstances    int   // most instances of the row on one GPU
	Starts          uint8 // bit s set: s is a valid start memory slice
	MediaExtensions bool  // a "+me" profile: at most one per GPU
}

func startMask(starts ...int) uint8 {
	var mask uint8
	for _, start := range starts {
		mask |= 1 << start
	}
	return mask
}

// shapes is the MIG User Guide's table, rows in its order. Every valid start keeps
// the range inside the 8 slices; memory slice 7 is reached only by the 2-slice 1g
// profile at 6, the 3g at 4 and the 7g.
var shapes = [...]Shape{
	{ID: 19, Compute: 1, Memory: 1, MaxInstances: 7, Starts: startMask(0, 1, 2, 3, 4, 5, 6)},
	{ID: 20, Compute: 1, Memory: 1, MaxInstances: 1, Starts: startMask(0, 1, 2, 3, 4, 5, 6), MediaExtensions: true},
	{ID: 15, Compute: 1, Memory: 2, MaxInstances: 4, Starts: startMask(0, 2, 4, 6)},
	{ID: 14, Compute: 2, Memory: 2, MaxInstances: 3, Starts: startMask(0, 2, 4)},
	{ID: 9, Compute: 3, Memory: 4, MaxInstances: 2, Starts: startMask(0, 4)},
	{ID: 5, Compute: 4, Memory: 4, MaxInstances: 1, Starts: startMask(0)},
	{ID: 0, Compute: 7, Memory: 8, MaxInstances: 1, Starts: startMask(0)},
}

// ShapeCount is the number of rows (profiles) of every model's table.
const ShapeCount = len(shapes)

// Shapes returns the rows, in the MIG User Guide's order; Profile.Row indexes them.
func Shapes() [ShapeCount]Shape { return shapes }

// profileNames are each model's names for the rows of shapes.
var profileNames = map[Model][ShapeCount]string{
	A100_40GB:  {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
	A100_80GB:  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
	H100_80GB:  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
	H200_141GB: {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
}

// profileTables holds every model's profiles, built once from the two tables above.
var profileTables = buildProfileTables()

func buildProfileTables() map[Model][]Profile {
	tables := make(map[Model][]Profile, len(profileNames))
	for model, names := range profileNames {
		profiles := make([]Profile, ShapeCount)
		for i, shape := range shapes {
			profiles[i] = Profile{
				Model:           model,
				ID:              shape.ID,
				Name:            names[i],
				ComputeSlices:   shape.Compute,
				MemorySlices:    shape.Memory,
				MaxInstances:    shape.MaxInstances,
				MediaExtensions: shape.MediaExtensions,
				row:             i,
			}
		}
		tables[model] = profiles
	}
	return tables
}

// Profile is one GPU instance profile of one model: a row of its placement table.
// Values come from the tables (Model.Profiles, Profile, ProfileByID); the zero value
// is no profile.
type Profile struct {
	Model Model
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

	row int // index in Shapes()
}

// Row is the profile's row in Shapes(): the same for a profile on every model.
func (p Profile) Row() int { return p.row }

// ResourceName is the profile as a bundle requests it: "nvidia.com/mig-1g.10gb".
func (p Profile) ResourceName() string { return ResourcePrefix + p.Name }

// ValidStarts returns the memory slices an instance of the profile may start at,
// ascending.
func (p Profile) ValidStarts() []int {
	var starts []int
	for start := range MemorySlices {
		if p.IsValidStart(start) {
			starts = append(starts, start)
		}
	}
	return starts
}

// IsValidStart reports whether an instance of the profile may start at memory slice
// start.
func (p Profile) IsValidStart(start int) bool {
	return p.Model != "" && start >= 0 && start < MemorySlices && shapes[p.row].Starts&(1<<start) != 0
}

// Placement is the NVML placement of an instance starting at start.
func (p Profile) Placement(start int) Placement {
	return Placement{Start: start, Size: p.MemorySlices}
}

func (p Profile) String() string {
	return fmt.Sprintf("%s %s (profile %d)", p.Model, p.Name, p.ID)
}

// Placement is NVML's nvmlGpuInstancePlacement_t: memory slices [Start, Start+Size).
type Placement struct {
	Start int
	Size  int
}

func (p Placement) String() string { return fmt.Sprintf("[%d,%d)", p.Start, p.Start+p.Size) }

// Supported reports whether the model is one of Models().
func (m Model) Supported() bool {
	_, ok := profileTables[m]
	return ok
}

// Profiles returns the model's table in the MIG User Guide's order (1g up to 7g), or
// nil for an unsupported model.
func (m Model) Profiles() []Profile { return slices.Clone(profileTables[m]) }

// Profile returns the model's profile named name ("1g.10gb", "1g.10gb+me").
func (m Model) Profile(name string) (Profile, bool) {
	for _, profile := range profileTables[m] {
		if profile.Name == name {
			return profile, true
		}
	}
	return Profile{}, false
}

// ProfileByID returns the model's profile with the NVML profile id.
func (m Model) ProfileByID(id int) (Profile, bool) {
	for _, profile := range profileTables[m] {
		if profile.ID == id {
			return profile, true
		}
	}
	return Profile{}, false
}

// ResolveResource returns the model's profile for a resource name
// ("nvidia.com/mig-1g.10gb"); see ProfileName for the spellings accepted.
func (m Model) ResolveResource(resource string) (Profile, bool) {
	name, ok := ProfileName(resource)
	if !ok {
		return Profile{}, false
	}
	return m.Profile(name)
}

// ModelOfDevice returns the model of an NVML device name (nvmlDeviceGetName):
// "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3",
// "NVIDIA H100 PCIe", "NVIDIA H200". The family and the memory size in the name decide;
// an A100 whose name gives no size, an NVL part (H100 NVL is 94 GB, with other
// profiles), other sizes and other families are not supported.
func ModelOfDevice(deviceName string) (Model, bool) {
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
		return A100_40GB, true
	case family == "A100" && memory == "80GB":
		return A100_80GB, true
	case family == "H100" && (memory == "80GB" || memory == ""):
		return H100_80GB, true
	case family == "H200" && (memory == "141GB" || memory == ""):
		return H200_141GB, true
	default:
		return "", false
	}
}

// IsResource reports whether a resource name is a MIG profile request (starts with
// ResourcePrefix), known or not.
func IsResource(resource string) bool { return strings.HasPrefix(resource, ResourcePrefix) }

// ProfileName returns the profile name of a MIG resource name:
// "nvidia.com/mig-1g.10gb" → "1g.10gb". The Kubernetes device plugin's spelling of a
// media-extension profile, "nvidia.com/mig-1g.10gb.me" ('+' is not allowed in
// Kubernetes resource names), is read as NVIDIA's "1g.10gb+me". It does not check
// that any model has the profile.
func ProfileName(resource string) (string, bool) {
	name, ok := strings.CutPrefix(resource, ResourcePrefix)
	if !ok || name == "" {
		return "", false
	}
	if base, ok := strings.CutSuffix(name, ".me"); ok {
		name = base + "+me"
	}
	return name, true
}

// ModelsWithProfile returns the supported models that have a profile, given by its
// name ("1g.10gb") or its resource name ("nvidia.com/mig-1g.10gb"): [A100-40GB,
// A100-80GB, H100-80GB] for 1g.10gb, none for "3g.99gb".
func ModelsWithProfile(profile string) []Model {
	if name, ok := ProfileName(profile); ok {
		profile = name
	}
	var models []Model
	for _, model := range supportedModels {
		if _, ok := model.Profile(profile); ok {
			models = append(models, model)
		}
	}
	return models
}

// DescribeModels lists every model's profiles: "A100-40GB has 1g.5gb, …; H100-80GB has …".
func DescribeModels() string {
	parts := make([]string, len(supportedModels))
	for i, model := range supportedModels {
		names := profileNames[model]
		parts[i] = string(model) + " has " + strings.Join(names[:], ", ")
	}
	return strings.Join(parts, "; ")
}

func JoinModels(models []Model) string {
	parts := make([]string, len(models))
	for i, model := range models {
		parts[i] = string(model)
	}
	return strings.Join(parts, ", ")
}
