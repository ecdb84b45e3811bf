package placement_test

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Random sequences of MIG requests, releases and destroys on small sets of MIG GPUs of
// every model (sometimes two models on one node), checked after every step against an
// oracle built from the independent copy of the MIG User Guide's table in mig_test.go:
//   - every instance valid for its model: a profile of the table, a start in its valid
//     list, the table's size; memory ranges never overlap; compute slices <= 7; at most
//     one "+me"; no profile above its max instances; SliceUsage adds up;
//   - PlanMIG's outcome is right: a reused instance is idle and of the profile; a carve
//     fits; an idle instance of the profile is always reused first; idle instances are
//     destroyed only when no GPU has room without, and then as few as any placement
//     needs; ErrMIGNoRoom only when no placement exists even with every idle instance
//     destroyed; ErrMIGProfileUnsupported only when no GPU's model has the profile;
//     first fit takes the lowest GPU and start, best fit a partitioned GPU before an
//     empty one;
//   - FeasibleMIGPlacements lists exactly the placements the oracle accepts.
//
// Best fit accepting at least as much as first fit is not an invariant (no online
// policy dominates another on every sequence), so it is not asserted; the benchmark
// measures it on a stream.
//
// Seeded and bounded: a failure prints the model, seed and step to replay.
func TestMIGInvariantsUnderRandomOperations(t *testing.T) {
	const (
		seeds = 25
		steps = 250
	)
	outcomes := map[string]int{}
	for modelIndex, model := range mig.Models() {
		for seed := range uint64(seeds) {
			rng := rand.New(rand.NewPCG(seed, uint64(modelIndex)))
			gpus := randomMIGGPUs(rng, model)
			for step := range steps {
				operation, err := randomMIGOperation(rng, gpus, outcomes)
				if err == nil {
					err = checkMIGGPUs(gpus)
				}
				if err != nil {
					t.Fatalf("%s seed %d step %d (%s): %v\n%s", model, seed, step, operation, err, describeMIGGPUs(gpus))
				}
			}
		}
	}
	t.Logf("outcomes: %v", outcomes)
	for _, path := range []string{"reuse idle", "carve", "carve after destroying", "no room", "unsupported", "unknown profile",
		"release", "destroy", "feasible placements", "best fit", "first fit", "two models"} {
		if outcomes[path] == 0 {
			t.Errorf("no %q: the generator no longer exercises it", path)
		}
	}
}

// randomMIGGPUs is one to three GPUs of the model, and one of another model a fifth of
// the time.
func randomMIGGPUs(rng *rand.Rand, model mig.Model) []placement.MIGGPU {
	gpus := make([]placement.MIGGPU, 1+rng.IntN(3))
	for i := range gpus {
		gpus[i] = placement.MIGGPU{Index: 10 + i, Model: model}
	}
	if rng.IntN(5) == 0 {
		models := mig.Models()
		gpus = append(gpus, placement.MIGGPU{Index: 20, Model: models[rng.IntN(len(models))]})
	}
	return gpus
}

func randomMIGOperation(rng *rand.Rand, gpus []placement.MIGGPU, outcomes map[string]int) (string, error) {
	if len(gpus) > 1 && gpus[len(gpus)-1].Model != gpus[0].Model {
		outcomes["two models"]++
	}
	switch op := rng.IntN(20); {
	case op < 11:
		return randomMIGRequest(rng, gpus, outcomes)
	case op < 16:
		g := rng.IntN(len(gpus))
		if k, ok := randomInstance(rng, gpus[g], placement.MIGHeld); ok {
			outcomes["release"]++
			start := gpus[g].Instances[k].Start
			return fmt.Sprintf("release GPU %d start %d", gpus[g].Index, start), gpus[g].Release(start)
		}
		return "release (nothing held)", nil
	case op < 18:
		g := rng.IntN(len(gpus))
		if k, ok := randomInstance(rng, gpus[g], placement.MIGIdle); ok {
			outcomes["destroy"]++
			start := gpus[g].Instances[k].Start
			return fmt.Sprintf("destroy GPU %d start %d", gpus[g].Index, start), gpus[g].Destroy(start)
		}
		return "destroy (nothing idle)", nil
	default:
		gpu := gpus[rng.IntN(len(gpus))]
		profiles := gpu.Model.Profiles()
		profile := profiles[rng.IntN(len(profiles))]
		outcomes["feasible placements"]++
		operation := fmt.Sprintf("feasible placements of %s on GPU %d", profile.Name, gpu.Index)
		got, err := placement.FeasibleMIGPlacements(gpu, profile)
		if err != nil {
			return operation, err
		}
		var want []mig.Placement
		for start := range mig.MemorySlices {
			if oracleFits(gpu.Model, gpu.Instances, 0, profile.Name, start) {
				want = append(want, mig.Placement{Start: start, Size: migReferenceRowOf(gpu.Model, profile.Name).memory})
			}
		}
		if !slices.Equal(got, want) {
			return operation, fmt.Errorf("FeasibleMIGPlacements = %v, oracle %v", got, want)
		}
		return operation, nil
	}
}

func randomInstance(rng *rand.Rand, gpu placement.MIGGPU, state placement.MIGInstanceState) (int, bool) {
	var candidates []int
	for k, instance := range gpu.Instances {
		if instance.State == state {
			candidates = append(candidates, k)
		}
	}
	if len(candidates) == 0 {
		return 0, false
	}
	return candidates[rng.IntN(len(candidates))], true
}

// randomMIGRequest asks for a profile of the GPUs' model mostly, sometimes of another
// model or of none, plans it with a random policy, checks the plan against the oracle
// and applies it.
func randomMIGRequest(rng *rand.Rand, gpus []placement.MIGGPU, outcomes map[string]int) (string, error) {
	var name string
	switch r := rng.IntN(40); {
	case r == 0:
		name = "3g.99gb"
	case r < 4:
		models := mig.Models()
		names := migReferenceNames[models[rng.IntN(len(models))]]
		name = names[rng.IntN(len(names))]
	default:
		names := migReferenceNames[gpus[0].Model]
		// Small profiles more often, so GPUs fill up and fragment.
		weights := []int{8, 2, 5, 4, 3, 1, 1}
		name = names[weightedIndex(rng, weights)]
	}
	policy := placement.MIGBestFit
	if rng.IntN(2) == 0 {
		policy = placement.MIGFirstFit
	}
	operation := fmt.Sprintf("%s request %s", policy, name)
	step, err := placement.PlanMIG(gpus, mig.ResourcePrefix+name, policy)
	if err := checkMIGPlan(gpus, name, policy, step, err, outcomes); err != nil {
		return operation, err
	}
	if err != nil {
		return operation, nil
	}
	operation += ": " + step.String()
	for i := range gpus {
		if gpus[i].Index == step.GPU {
			return operation, gpus[i].Apply(step)
		}
	}
	return operation, fmt.Errorf("step for GPU %d, not given", step.GPU)
}

func weightedIndex(rng *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	r := rng.IntN(total)
	for i, w := range weights {
		if r < w {
			return i
		}
		r -= w
	}
	return len(weights) - 1
}

// checkMIGPlan checks PlanMIG's answer against the oracle.
func checkMIGPlan(gpus []placement.MIGGPU, name string, policy placement.MIGPolicy, step placement.MIGStep, err error, outcomes map[string]int) error {
	hasProfile := func(gpu placement.MIGGPU) bool { return slices.Contains(migReferenceNames[gpu.Model], name) }
	known := false
	for _, names := range migReferenceNames {
		known = known || slices.Contains(names, name)
	}
	// The oracle's view: reusable idle instances, and per GPU the fewest idle
	// instances to destroy for some placement (-1: none even with all destroyed).
	reusable := false
	minDestroy := make([]int, len(gpus))
	for i, gpu := range gpus {
		minDestroy[i] = -1
		if !hasProfile(gpu) {
			continue
		}
		id := migReferenceRowOf(gpu.Model, name).id
		var idle []int
		for k, instance := range gpu.Instances {
			if instance.State == placement.MIGIdle {
				idle = append(idle, k)
				reusable = reusable || instance.ProfileID == id
			}
		}
		for subset := range 1 << len(idle) {
			var destroyed uint
			for j, k := range idle {
				if subset&(1<<j) != 0 {
					destroyed |= 1 << k
				}
			}
			for start := range mig.MemorySlices {
				if oracleFits(gpu.Model, gpu.Instances, destroyed, name, start) {
					if n := bits.OnesCount(destroyed); minDestroy[i] < 0 || n < minDestroy[i] {
						minDestroy[i] = n
					}
				}
			}
		}
	}
	fewest := -1
	for _, n := range minDestroy {
		if n >= 0 && (fewest < 0 || n < fewest) {
			fewest = n
		}
	}

	switch {
	case !known:
		outcomes["unknown profile"]++
		if !errors.Is(err, resources.ErrUnknownMIGProfile) {
			return fmt.Errorf("unknown profile %s: %v, %v", name, step, err)
		}
		return nil
	case !slices.ContainsFunc(gpus, hasProfile):
		outcomes["unsupported"]++
		if !errors.Is(err, placement.ErrMIGProfileUnsupported) {
			return fmt.Errorf("no GPU has %s: %v, %v", name, step, err)
		}
		return nil
	case fewest < 0 && !reusable:
		outcomes["no room"]++
		if !errors.Is(err, placement.ErrMIGNoRoom) {
			return fmt.Errorf("no room for %s even with idle instances destroyed, got %v, %v", name, step, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("the oracle finds room for %s (fewest destroyed %d, reusable %v): %v", name, fewest, reusable, err)
	}

	g := slices.IndexFunc(gpus, func(gpu placement.MIGGPU) bool { return gpu.Index == step.GPU })
	if g < 0 || !hasProfile(gpus[g]) || step.Profile.Name != name || step.Profile.Model != gpus[g].Model {
		return fmt.Errorf("step %v on a GPU without %s", step, name)
	}
	gpu := gpus[g]
	switch {
	case step.Action == placement.MIGReuseIdle:
		outcomes["reuse idle"]++
		want := placement.MIGInstance{ProfileID: step.Profile.ID, Start: step.Start, State: placement.MIGIdle}
		if !slices.Contains(gpu.Instances, want) || len(step.Destroy) > 0 {
			return fmt.Errorf("reuse %v: no such idle instance", step)
		}
	case reusable:
		return fmt.Errorf("%v while an idle %s could be reused", step, name)
	case step.Action != placement.MIGCarve:
		return fmt.Errorf("step %v: unknown action", step)
	default:
		var destroyed uint
		for _, instance := range step.Destroy {
			k := slices.Index(gpu.Instances, instance)
			if k < 0 || instance.State != placement.MIGIdle {
				return fmt.Errorf("%v destroys %+v, not an idle instance of the GPU", step, instance)
			}
			destroyed |= 1 << k
		}
		if !oracleFits(gpu.Model, gpu.Instances, destroyed, name, step.Start) {
			return fmt.Errorf("%v does not fit", step)
		}
		if len(step.Destroy) != fewest {
			return fmt.Errorf("%v destroys %d idle instances; %d would do", step, len(step.Destroy), fewest)
		}
		if fewest > 0 {
			outcomes["carve after destroying"]++
		} else {
			outcomes["carve"]++
		}
		if fewest > 0 {
			break
		}
		switch policy {
		case placement.MIGFirstFit:
			outcomes["first fit"]++
			for i := range g + 1 {
				for start := range mig.MemorySlices {
					if (i < g || start < step.Start) && hasProfile(gpus[i]) && oracleFits(gpus[i].Model, gpus[i].Instances, 0, name, start) {
						return fmt.Errorf("first fit took %v; GPU %d start %d fits", step, gpus[i].Index, start)
					}
				}
			}
		case placement.MIGBestFit:
			outcomes["best fit"]++
			if len(gpu.Instances) == 0 {
				for _, other := range gpus {
					if len(other.Instances) > 0 && hasProfile(other) && slices.ContainsFunc([]int{0, 1, 2, 3, 4, 5, 6, 7}, func(start int) bool {
						return oracleFits(other.Model, other.Instances, 0, name, start)
					}) {
						return fmt.Errorf("best fit took the empty GPU %d; partitioned GPU %d has room", gpu.Index, other.Index)
					}
				}
			}
		}
	}
	return nil
}

func migReferenceRowOf(model mig.Model, name string) migReferenceRow {
	return migReferenceRows[slices.Index(migReferenceNames[model], name)]
}

func migReferenceRowByID(id int) (migReferenceRow, bool) {
	for _, row := range migReferenceRows {
		if row.id == id {
			return row, true
		}
	}
	return migReferenceRow{}, false
}

// oracleFits reports whether the named profile can be carved at start next to the
// instances not in destroyed (a bit set per instance index), by the reference table.
func oracleFits(model mig.Model, instances []placement.MIGInstance, destroyed uint, name string, start int) bool {
	row := migReferenceRowOf(model, name)
	if !slices.Contains(row.starts, start) || start+row.memory > mig.MemorySlices {
		return false
	}
	compute, media, same := row.compute, 0, 0
	for k, instance := range instances {
		if destroyed&(1<<k) != 0 {
			continue
		}
		other, _ := migReferenceRowByID(instance.ProfileID)
		if instance.Start < start+row.memory && start < instance.Start+other.memory {
			return false
		}
		compute += other.compute
		if other.mediaExtensions {
			media++
		}
		if other.id == row.id {
			same++
		}
	}
	return compute <= mig.ComputeSlices && !(row.mediaExtensions && media > 0) && same < row.maxInstances
}

// checkMIGGPUs checks every GPU's slot map against the reference table.
func checkMIGGPUs(gpus []placement.MIGGPU) error {
	for _, gpu := range gpus {
		var covered [mig.MemorySlices]bool
		compute, media := 0, 0
		count := map[int]int{}
		var usage placement.MIGSliceUsage
		for _, instance := range gpu.Instances {
			row, ok := migReferenceRowByID(instance.ProfileID)
			switch {
			case !ok:
				return fmt.Errorf("GPU %d: profile id %d is not in the table", gpu.Index, instance.ProfileID)
			case !slices.Contains(row.starts, instance.Start) || instance.Start+row.memory > mig.MemorySlices:
				return fmt.Errorf("GPU %d: profile %d at start %d, valid starts %v", gpu.Index, row.id, instance.Start, row.starts)
			case instance.State != placement.MIGHeld && instance.State != placement.MIGIdle:
				return fmt.Errorf("GPU %d: instance state %v", gpu.Index, instance.State)
			}
			for slice := instance.Start; slice < instance.Start+row.memory; slice++ {
				if covered[slice] {
					return fmt.Errorf("GPU %d: memory slice %d covered twice", gpu.Index, slice)
				}
				covered[slice] = true
			}
			compute += row.compute
			count[row.id]++
			if row.mediaExtensions {
				media++
			}
			if count[row.id] > row.maxInstances {
				return fmt.Errorf("GPU %d: %d instances of profile %d, max %d", gpu.Index, count[row.id], row.id, row.maxInstances)
			}
			if instance.State == placement.MIGHeld {
				usage.Held += row.memory
			} else {
				usage.Idle += row.memory
			}
		}
		if compute > mig.ComputeSlices {
			return fmt.Errorf("GPU %d: %d compute slices", gpu.Index, compute)
		}
		if media > 1 {
			return fmt.Errorf("GPU %d: %d media-extension instances", gpu.Index, media)
		}
		if err := gpu.Validate(); err != nil {
			return err
		}
		for slice, taken := range covered {
			if taken {
				continue
			}
			usage.Free++
			usable := false
			for _, name := range migReferenceNames[gpu.Model] {
				row := migReferenceRowOf(gpu.Model, name)
				for _, start := range row.starts {
					usable = usable || (start <= slice && slice < start+row.memory && oracleFits(gpu.Model, gpu.Instances, 0, name, start))
				}
			}
			if !usable {
				usage.Unusable++
			}
		}
		if got, err := gpu.SliceUsage(); err != nil || got != usage {
			return fmt.Errorf("GPU %d: SliceUsage() = %+v, %v; oracle %+v", gpu.Index, got, err, usage)
		}
	}
	return nil
}

func describeMIGGPUs(gpus []placement.MIGGPU) string {
	text := ""
	for _, gpu := range gpus {
		text += gpu.String() + "\n"
	}
	return text
}
