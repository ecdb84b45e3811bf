package placement

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
)

// MIGInstanceState is the state of a carved GPU instance.
type MIGInstanceState uint8

const (
	// MIGHeld: a bundle (prepared or committed) holds the instance.
	MIGHeld MIGInstanceState = iota + 1
	// MIGIdle: carved and free. The same profile reuses it at its slot; another geometry
	// destroys it when it needs its slices (idle capacity never makes a request wait).
	MIGIdle
)

func (s MIGInstanceState) String() string {
	switch s {
	case MIGHeld:
		return "held"
	case MIGIdle:
		return "idle"
	default:
		return fmt.Sprintf("MIGInstanceState(%d)", int(s))
	}
}

// MIGInstance is one carved GPU instance of a MIG GPU's slot map.
type MIGInstance struct {
	// ProfileID is the NVML profile id (mig.Profile.ID) in the GPU's model.
	ProfileID int
	// Start is the first memory slice of its placement; the size is the profile's.
	Start int
	State MIGInstanceState
}

// MIGGPU is the slot map of one GPU in MIG mode, as its raylet reports it: the carved
// instances, held or idle; memory slices no instance covers are free. A valid map
// (Validate) keeps every rule of the geometry: starts valid for their profile, memory
// ranges disjoint, at most 7 compute slices, at most one "+me" instance, no profile
// above its max instances.
type MIGGPU struct {
	// Index names the GPU in a MIGStep: the NVML index on its node, or any id unique
	// among the GPUs given to PlanMIG.
	Index     int
	Model     mig.Model
	Instances []MIGInstance
}

// migShapes are the rows of the MIG tables, copied once: the allocator reads them on
// every step.
var migShapes = mig.Shapes()

const migShapeCount = mig.ShapeCount

// migOccupancy is what a set of instances takes of a GPU.
type migOccupancy struct {
	memory  uint8 // bit s set: memory slice s is covered
	compute int
	media   int // "+me" instances
	count   [migShapeCount]int
}

func rangeMask(start, size int) uint8 { return uint8((1<<size - 1) << start) }

// fits reports whether an instance of the shape can be carved at start: a valid start,
// free memory slices, compute, the media engines and the profile's max instances.
func (o *migOccupancy) fits(shape, start int) bool {
	s := &migShapes[shape]
	return s.Starts&(1<<start) != 0 &&
		o.memory&rangeMask(start, s.Memory) == 0 &&
		o.compute+s.Compute <= mig.ComputeSlices &&
		o.count[shape] < s.MaxInstances &&
		!(s.MediaExtensions && o.media > 0)
}

func (o *migOccupancy) add(shape, start int) {
	s := &migShapes[shape]
	o.memory |= rangeMask(start, s.Memory)
	o.compute += s.Compute
	o.count[shape]++
	if s.MediaExtensions {
		o.media++
	}
}

func (o *migOccupancy) remove(shape, start int) {
	s := &migShapes[shape]
	o.memory &^= rangeMask(start, s.Memory)
	o.compute -= s.Compute
	o.count[shape]--
	if s.MediaExtensions {
		o.media--
	}
}

// placeable is how many more instances of the shape the GPU could take, with nothing
// else carved. Lowest start first is optimal: the placements of one shape have one
// size and the starts are aligned to it (or every slice, for size 1).
func (o migOccupancy) placeable(shape int) int {
	placed := 0
	for start := range mig.MemorySlices {
		if o.fits(shape, start) {
			o.add(shape, start)
			placed++
		}
	}
	return placed
}

// usable is the memory slices that some profile could be carved on now.
func (o *migOccupancy) usable() uint8 {
	var usable uint8
	for shape := range migShapes {
		for start := range mig.MemorySlices {
			if o.fits(shape, start) {
				usable |= rangeMask(start, migShapes[shape].Memory)
			}
		}
	}
	return usable
}

// stranded is how many free memory slices no profile could be carved on now.
func (o *migOccupancy) stranded() int {
	return bits.OnesCount8(^o.memory &^ o.usable())
}

// migShapesLargestFirst orders the shapes for best fit: most memory, then most compute,
// the media-extension profile last (one per GPU; it competes with nothing larger).
var migShapesLargestFirst = func() [migShapeCount]int {
	var order [migShapeCount]int
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order[:], func(a, b int) int {
		sa, sb := &migShapes[a], &migShapes[b]
		switch {
		case sa.MediaExtensions != sb.MediaExtensions:
			if sa.MediaExtensions {
				return 1
			}
			return -1
		case sa.Memory != sb.Memory:
			return sb.Memory - sa.Memory
		default:
			return sb.Compute - sa.Compute
		}
	})
	return order
}()

// capacity is, largest profile first, how many instances of each the GPU could still
// take (each profile alone): what best fit tries to keep.
func (o migOccupancy) capacity() [migShapeCount]int {
	var capacity [migShapeCount]int
	for i, shape := range migShapesLargestFirst {
		capacity[i] = o.placeable(shape)
	}
	return capacity
}

// migResolved is a validated slot map with each instance's row of migShapes.
type migResolved struct {
	shapes [mig.ComputeSlices]int // per instance; a valid map has at most 7
	all    migOccupancy           // held and idle instances
	held   migOccupancy
}

func (g MIGGPU) invalid(format string, args ...any) error {
	return fmt.Errorf("%w: GPU %d (%s): %s", ErrInvalidMIGState, g.Index, g.Model, fmt.Sprintf(format, args...))
}

// resolve validates the slot map; see Validate.
func (g MIGGPU) resolve() (migResolved, error) {
	var resolved migResolved
	if !g.Model.Supported() {
		return resolved, g.invalid("not a MIG GPU model (supported: %s)", mig.JoinModels(mig.Models()))
	}
	if len(g.Instances) > mig.ComputeSlices {
		return resolved, g.invalid("%d instances, at most %d fit", len(g.Instances), mig.ComputeSlices)
	}
	for i, instance := range g.Instances {
		profile, ok := g.Model.ProfileByID(instance.ProfileID)
		if !ok {
			return resolved, g.invalid("instance %d: no profile id %d in the %s table", i, instance.ProfileID, g.Model)
		}
		shape := &migShapes[profile.Row()]
		switch {
		case instance.State != MIGHeld && instance.State != MIGIdle:
			return resolved, g.invalid("instance %d (%s at %d): state %s", i, profile.Name, instance.Start, instance.State)
		case !profile.IsValidStart(instance.Start):
			return resolved, g.invalid("instance %d (%s): start %d is not one of %v", i, profile.Name, instance.Start, profile.ValidStarts())
		case resolved.all.memory&rangeMask(instance.Start, shape.Memory) != 0:
			return resolved, g.invalid("instance %d (%s at %s) overlaps another instance", i, profile.Name, profile.Placement(instance.Start))
		case shape.MediaExtensions && resolved.all.media > 0:
			return resolved, g.invalid("instance %d (%s): a second media-extension instance", i, profile.Name)
		case resolved.all.count[profile.Row()] >= shape.MaxInstances:
			return resolved, g.invalid("instance %d: more than %d instances of %s", i, shape.MaxInstances, profile.Name)
		case resolved.all.compute+shape.Compute > mig.ComputeSlices:
			return resolved, g.invalid("instance %d (%s): more than %d compute slices", i, profile.Name, mig.ComputeSlices)
		}
		resolved.shapes[i] = profile.Row()
		resolved.all.add(profile.Row(), instance.Start)
		if instance.State == MIGHeld {
			resolved.held.add(profile.Row(), instance.Start)
		}
	}
	return resolved, nil
}

// Validate checks that the slot map keeps the geometry of its model; its errors wrap
// ErrInvalidMIGState and name the GPU and the instance.
func (g MIGGPU) Validate() error {
	_, err := g.resolve()
	return err
}

// String shows the slot map: "GPU 3 H100-80GB: [0,2) held 1g.20gb, [4,8) idle 3g.40gb".
func (g MIGGPU) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "GPU %d %s:", g.Index, g.Model)
	instances := slices.Clone(g.Instances)
	slices.SortFunc(instances, func(a, b MIGInstance) int { return a.Start - b.Start })
	for i, instance := range instances {
		if i > 0 {
			b.WriteByte(',')
		}
		if profile, ok := g.Model.ProfileByID(instance.ProfileID); ok {
			fmt.Fprintf(&b, " %s %s %s", profile.Placement(instance.Start), instance.State, profile.Name)
		} else {
			fmt.Fprintf(&b, " start %d %s profile %d", instance.Start, instance.State, instance.ProfileID)
		}
	}
	if len(instances) == 0 {
		b.WriteString(" empty")
	}
	return b.String()
}

// FeasibleMIGPlacements returns where an instance of the profile (of the GPU's model)
// can be carved on the GPU as it is, held and idle instances left in place, lowest
// start first.
func FeasibleMIGPlacements(gpu MIGGPU, profile mig.Profile) ([]mig.Placement, error) {
	resolved, err := gpu.resolve()
	if err != nil {
		return nil, err
	}
	if profile.Model != gpu.Model {
		return nil, gpu.invalid("profile %s is not of the GPU's model", profile)
	}
	var placements []mig.Placement
	for start := range mig.MemorySlices {
		if resolved.all.fits(profile.Row(), start) {
			placements = append(placements, profile.Placement(start))
		}
	}
	return placements, nil
}

// MIGSliceUsage counts a MIG GPU's memory slices.
type MIGSliceUsage struct {
	// Held and Idle are the memory slices of held and of idle instances.
	Held, Idle int
	// Free is the memory slices no instance covers.
	Free int
	// Unusable is the free slices that no profile of the model could be carved on now,
	// held and idle instances left in place: every placement covering the slice
	// overlaps an instance, or the compute slices, the media engines or the profile's
	// max instances are used up (7 × 1g.10gb on an H100 leave slice 7 unusable).
	Unusable int
}

// SliceUsage counts the GPU's memory slices.
func (g MIGGPU) SliceUsage() (MIGSliceUsage, error) {
	resolved, err := g.resolve()
	if err != nil {
		return MIGSliceUsage{}, err
	}
	var usage MIGSliceUsage
	for i, instance := range g.Instances {
		size := migShapes[resolved.shapes[i]].Memory
		if instance.State == MIGHeld {
			usage.Held += size
		} else {
			usage.Idle += size
		}
	}
	usage.Free = mig.MemorySlices - bits.OnesCount8(resolved.all.memory)
	usage.Unusable = resolved.all.stranded()
	return usage, nil
}

// MIGPolicy is how PlanMIG chooses among the placements it may take.
type MIGPolicy uint8

const (
	// MIGBestFit (the zero value): a GPU already partitioned before an empty one, and
	// the placement that strands the fewest free memory slices, then after which the
	// GPU could still take the most instances of the largest profiles (7g, then 4g, 3g,
	// 2g, ...); see PlanMIG.
	MIGBestFit MIGPolicy = iota
	// MIGFirstFit: the first GPU in the order given, the lowest valid start. For
	// comparison (the MIG benchmark) and tests.
	MIGFirstFit
)

func (p MIGPolicy) String() string {
	switch p {
	case MIGBestFit:
		return "best-fit"
	case MIGFirstFit:
		return "first-fit"
	default:
		return fmt.Sprintf("MIGPolicy(%d)", int(p))
	}
}

// MIGAction is what a MIGStep asks the raylet to do.
type MIGAction uint8

const (
	// MIGReuseIdle: take the idle instance of the profile at (GPU, Start); nothing is
	// carved or destroyed.
	MIGReuseIdle MIGAction = iota + 1
	// MIGCarve: destroy the idle instances in Destroy (if any), then carve a GPU
	// instance of the profile at (GPU, Start).
	MIGCarve
)

func (a MIGAction) String() string {
	switch a {
	case MIGReuseIdle:
		return "reuse idle"
	case MIGCarve:
		return "carve"
	default:
		return fmt.Sprintf("MIGAction(%d)", int(a))
	}
}

// MIGStep is where one MIG slice goes and what getting it takes.
type MIGStep struct {
	Action MIGAction
	// GPU is the MIGGPU.Index of the chosen GPU.
	GPU int
	// Profile is the requested profile resolved for that GPU's model.
	Profile mig.Profile
	// Start is the first memory slice of the instance (the placement is
	// Profile.Placement(Start)).
	Start int
	// Destroy lists the idle instances of the GPU to destroy before carving, lowest
	// start first; empty unless held instances and idle ones together leave no room
	// anywhere. Each is a geometry change, which the raylet counts and rate-limits.
	Destroy []MIGInstance
}

func (s MIGStep) String() string {
	text := fmt.Sprintf("%s %s at GPU %d %s", s.Action, s.Profile.Name, s.GPU, s.Profile.Placement(s.Start))
	if len(s.Destroy) > 0 {
		starts := make([]string, len(s.Destroy))
		for i, instance := range s.Destroy {
			starts[i] = fmt.Sprint(instance.Start)
		}
		text += " after destroying the idle instances at " + strings.Join(starts, ", ")
	}
	return text
}

// migCandidate is one way PlanMIG could serve the request.
type migCandidate struct {
	gpu         int // position in PlanMIG's gpus
	start       int
	action      MIGAction
	destroy     uint8 // bit i set: the GPU's Instances[i] is destroyed first
	destroyed   int
	empty       bool               // the GPU has no instance, held or idle
	stranded    int                // free slices that no profile could use after, minus before
	loss        [migShapeCount]int // capacity before - after, largest profile first
	freeCompute int                // compute slices no held instance takes, after
}

// better reports whether c is preferred to other. In order: fewer idle instances
// destroyed (a geometry change costs; idle capacity is used only when nothing else is
// left); an idle instance reused before one carved; then for best fit a GPU already
// partitioned before an empty one, the fewest free slices stranded (left where no
// profile fits: a 1g.10gb at slice 6 strands slice 7, which only 1g.20gb at 6 and 3g
// at 4 reach), the least capacity lost for the largest profiles, the fullest GPU; last
// the GPU order and the lowest start.
func (c *migCandidate) better(other *migCandidate, policy MIGPolicy) bool {
	if c.destroyed != other.destroyed {
		return c.destroyed < other.destroyed
	}
	if c.action != other.action {
		return c.action == MIGReuseIdle
	}
	if policy == MIGBestFit {
		if c.empty != other.empty {
			return !c.empty
		}
		if c.stranded != other.stranded {
			return c.stranded < other.stranded
		}
		if c.loss != other.loss {
			return slices.Compare(c.loss[:], other.loss[:]) < 0
		}
		if c.freeCompute != other.freeCompute {
			return c.freeCompute < other.freeCompute
		}
	}
	if c.gpu != other.gpu {
		return c.gpu < other.gpu
	}
	return c.start < other.start
}

// PlanMIG chooses where one instance of a MIG profile goes among gpus (the MIG GPUs of
// a node, or of any set whose Index values are distinct) and what it takes: reuse an
// idle instance, or carve one, destroying idle instances first when nothing else has
// room. resource is the bundle's resource name ("nvidia.com/mig-1g.10gb"), resolved for
// each GPU's model.
//
// Stages, cheapest first: resolve the profile per GPU (a GPU whose model lacks it is
// skipped); reuse an idle instance of the profile; carve in free slices (held and idle
// instances left in place); only if none of these exists anywhere, carve after
// destroying the idle instances in the way (destroyToCarve), as few as possible. Among
// the candidates of the first stage that has any, the policy picks
// (migCandidate.better). Best fit scores a carve by the free memory slices it
// strands (no profile could be carved on them), then by the instances of each profile,
// largest first, the GPU could take before minus after: it keeps empty GPUs for 7g, 4g
// and 3g halves whole, and slice 7 reachable.
//
// Errors: a resource that is no MIG profile of any supported model, a *fielderr.Error
// wrapping resources.ErrUnknownMIGProfile; no GPU whose model has the profile,
// ErrMIGProfileUnsupported (Infeasible); no room even with idle instances destroyed,
// ErrMIGNoRoom (NotNow); a GPU whose slot map breaks the geometry or two GPUs with
// one Index, ErrInvalidMIGState.
func PlanMIG(gpus []MIGGPU, resource string, policy MIGPolicy) (MIGStep, error) {
	if policy != MIGBestFit && policy != MIGFirstFit {
		return MIGStep{}, fmt.Errorf("placement: PlanMIG: unknown policy %s", policy)
	}
	name, ok := mig.ProfileName(resource)
	if !ok {
		return MIGStep{}, fielderr.New(resources.ErrUnknownMIGProfile, resources.Field(resource), "not a MIG resource name (%s<profile>)", mig.ResourcePrefix)
	}
	if len(mig.ModelsWithProfile(name)) == 0 {
		return MIGStep{}, resources.CheckMIGResource(resource, resources.AmountScale)
	}
	for i := range gpus {
		for j := range i {
			if gpus[i].Index == gpus[j].Index {
				return MIGStep{}, fmt.Errorf("%w: two GPUs with index %d", ErrInvalidMIGState, gpus[i].Index)
			}
		}
	}

	resolved := make([]migResolved, len(gpus))
	profiles := make([]mig.Profile, len(gpus)) // zero Model: the GPU's model lacks the profile
	supported := false
	for i, gpu := range gpus {
		var err error
		if resolved[i], err = gpu.resolve(); err != nil {
			return MIGStep{}, err
		}
		if profile, ok := gpu.Model.Profile(name); ok {
			profiles[i] = profile
			supported = true
		}
	}
	if !supported {
		return MIGStep{}, fmt.Errorf("%w: MIG profile %s: none of the %d GPUs has it (%s; it is a profile of %s)",
			ErrMIGProfileUnsupported, name, len(gpus), describeGPUModels(gpus), mig.JoinModels(mig.ModelsWithProfile(name)))
	}

	var best migCandidate
	found := false
	consider := func(candidate migCandidate) {
		if !found || candidate.better(&best, policy) {
			best, found = candidate, true
		}
	}
	// Stages 1 and 2: reuse, carve in free slices.
	for i, gpu := range gpus {
		profile := profiles[i]
		if profile.Model == "" {
			continue
		}
		state := &resolved[i]
		var before [migShapeCount]int
		strandedBefore := 0
		if policy == MIGBestFit {
			before, strandedBefore = state.all.capacity(), state.all.stranded()
		}
		for _, instance := range gpu.Instances {
			if instance.State == MIGIdle && instance.ProfileID == profile.ID {
				consider(migCandidate{gpu: i, start: instance.Start, action: MIGReuseIdle,
					freeCompute: mig.ComputeSlices - state.held.compute - profile.ComputeSlices})
			}
		}
		for start := range mig.MemorySlices {
			if !state.all.fits(profile.Row(), start) {
				continue
			}
			candidate := migCandidate{gpu: i, start: start, action: MIGCarve, empty: len(gpu.Instances) == 0,
				freeCompute: mig.ComputeSlices - state.held.compute - profile.ComputeSlices}
			if policy == MIGBestFit {
				after := state.all
				after.add(profile.Row(), start)
				candidate.loss = lossOf(before, after.capacity())
				candidate.stranded = after.stranded() - strandedBefore
			}
			consider(candidate)
		}
	}
	// Stage 3: destroy idle instances.
	if !found {
		for i, gpu := range gpus {
			if profiles[i].Model != "" {
				destroyToCarve(gpu, &resolved[i], i, profiles[i], policy, consider)
			}
		}
	}
	if !found {
		return MIGStep{}, fmt.Errorf("%w: MIG profile %s: held instances leave no room on any of the %d GPUs (%s)",
			ErrMIGNoRoom, name, len(gpus), describeGPUModels(gpus))
	}

	gpu := gpus[best.gpu]
	step := MIGStep{Action: best.action, GPU: gpu.Index, Profile: profiles[best.gpu], Start: best.start}
	for k, instance := range gpu.Instances {
		if best.destroy&(1<<k) != 0 {
			step.Destroy = append(step.Destroy, instance)
		}
	}
	slices.SortFunc(step.Destroy, func(a, b MIGInstance) int { return a.Start - b.Start })
	return step, nil
}

// destroyToCarve offers, for every valid start of the profile free of held instances,
// the carve that destroys the idle instances overlapping it. Destroying more never
// helps: with NVIDIA's tables an instance never has more compute slices than memory
// slices, and only instances with fewer reach slice 7, so free memory for a placement
// always comes with the compute slices it needs; an idle "+me" instance in the way of
// a "+me" request is reused before this stage runs.
func destroyToCarve(gpu MIGGPU, state *migResolved, position int, profile mig.Profile, policy MIGPolicy, consider func(migCandidate)) {
	shape := &migShapes[profile.Row()]
	var before [migShapeCount]int
	strandedBefore := 0
	if policy == MIGBestFit {
		before, strandedBefore = state.all.capacity(), state.all.stranded()
	}
	for start := range mig.MemorySlices {
		placement := rangeMask(start, shape.Memory)
		if shape.Starts&(1<<start) == 0 || state.held.memory&placement != 0 {
			continue
		}
		after := state.all
		candidate := migCandidate{gpu: position, start: start, action: MIGCarve,
			freeCompute: mig.ComputeSlices - state.held.compute - profile.ComputeSlices}
		for k, instance := range gpu.Instances {
			if instance.State == MIGIdle && rangeMask(instance.Start, migShapes[state.shapes[k]].Memory)&placement != 0 {
				candidate.destroy |= 1 << k
				candidate.destroyed++
				after.remove(state.shapes[k], instance.Start)
			}
		}
		if !after.fits(profile.Row(), start) {
			continue // a held "+me" instance, or held instances use up the profile
		}
		if policy == MIGBestFit {
			after.add(profile.Row(), start)
			candidate.loss = lossOf(before, after.capacity())
			candidate.stranded = after.stranded() - strandedBefore
		}
		consider(candidate)
	}
}

func lossOf(before, after [migShapeCount]int) [migShapeCount]int {
	var loss [migShapeCount]int
	for i := range loss {
		loss[i] = before[i] - after[i]
	}
	return loss
}

// describeGPUModels counts the GPUs per model: "8 × H100-80GB".
func describeGPUModels(gpus []MIGGPU) string {
	if len(gpus) == 0 {
		return "no MIG GPUs"
	}
	var models []mig.Model
	counts := map[mig.Model]int{}
	for _, gpu := range gpus {
		if counts[gpu.Model] == 0 {
			models = append(models, gpu.Model)
		}
		counts[gpu.Model]++
	}
	parts := make([]string, len(models))
	for i, model := range models {
		parts[i] = fmt.Sprintf("%d × %s", counts[model], model)
	}
	return strings.Join(parts, ", ")
}

// Apply performs a step on the slot map, as the raylet would carve it: the reused
// instance becomes held, or the listed idle instances go and a held instance of the
// profile is added. A step that does not fit the map as it is (another GPU, an
// instance that is not there or not idle, an overlap) is refused with
// ErrInvalidMIGState and the map is left unchanged.
func (g *MIGGPU) Apply(step MIGStep) error {
	if _, err := g.resolve(); err != nil {
		return err
	}
	if step.GPU != g.Index {
		return g.invalid("step is for GPU %d", step.GPU)
	}
	if step.Profile.Model != g.Model {
		return g.invalid("step's profile %s is not of the GPU's model", step.Profile)
	}
	instances := slices.Clone(g.Instances)
	switch step.Action {
	case MIGReuseIdle:
		k := slices.Index(instances, MIGInstance{ProfileID: step.Profile.ID, Start: step.Start, State: MIGIdle})
		if k < 0 {
			return g.invalid("no idle %s at %d to reuse", step.Profile.Name, step.Start)
		}
		instances[k].State = MIGHeld
	case MIGCarve:
		for _, destroyed := range step.Destroy {
			if destroyed.State != MIGIdle {
				return g.invalid("step destroys a %s instance at %d", destroyed.State, destroyed.Start)
			}
			k := slices.Index(instances, destroyed)
			if k < 0 {
				return g.invalid("no idle instance of profile %d at %d to destroy", destroyed.ProfileID, destroyed.Start)
			}
			instances = slices.Delete(instances, k, k+1)
		}
		instances = append(instances, MIGInstance{ProfileID: step.Profile.ID, Start: step.Start, State: MIGHeld})
	default:
		return g.invalid("step action %s", step.Action)
	}
	next := MIGGPU{Index: g.Index, Model: g.Model, Instances: instances}
	if _, err := next.resolve(); err != nil {
		return g.invalid("%s does not fit: %v", step, err)
	}
	g.Instances = instances
	return nil
}

// Release returns the held instance starting at start to the idle pool.
func (g *MIGGPU) Release(start int) error {
	return g.setState(start, MIGHeld, func(instances []MIGInstance, k int) []MIGInstance {
		instances[k].State = MIGIdle
		return instances
	})
}

// Destroy removes the idle instance starting at start (a held one must be released
// first).
func (g *MIGGPU) Destroy(start int) error {
	return g.setState(start, MIGIdle, func(instances []MIGInstance, k int) []MIGInstance {
		return slices.Delete(instances, k, k+1)
	})
}

func (g *MIGGPU) setState(start int, want MIGInstanceState, change func([]MIGInstance, int) []MIGInstance) error {
	k := slices.IndexFunc(g.Instances, func(instance MIGInstance) bool { return instance.Start == start })
	if k < 0 || g.Instances[k].State != want {
		return g.invalid("no %s instance at %d", want, start)
	}
	g.Instances = change(slices.Clone(g.Instances), k)
	return nil
}
