package gpusim

import (
	"fmt"

	"github.com/raygo-dev/raygo/internal/mig"
)

// The simulated hardware keeps the MIG geometry with its own check, written from NVIDIA's
// rules over the shared tables (internal/mig) and never through the scheduler's allocator:
// a geometry bug in the allocator must be refused here, as real hardware would refuse it.

// simInstance is one carved GPU instance as the geometry sees it.
type simInstance struct {
	profile mig.Profile
	start   int
}

// checkSimGeometry tells whether a GPU of model may hold these instances at once, and if
// not, the first rule broken: a start the profile does not allow, memory slices two
// instances share, more than 7 compute slices, more instances of a profile than it
// allows, or a second media-extension instance.
func checkSimGeometry(model mig.Model, instances []simInstance) error {
	var memory [mig.MemorySlices]int // instance index + 1 covering each memory slice
	compute, media := 0, 0
	perProfile := map[int]int{}
	for i, in := range instances {
		p := in.profile
		if p.Model != model {
			return fmt.Errorf("instance %d: profile %s is not a %s profile", i, p, model)
		}
		if !p.IsValidStart(in.start) {
			return fmt.Errorf("instance %d: %s cannot start at memory slice %d (valid: %v)", i, p.Name, in.start, p.ValidStarts())
		}
		for slice := in.start; slice < in.start+p.MemorySlices; slice++ {
			if slice >= mig.MemorySlices {
				return fmt.Errorf("instance %d: %s at %d runs past memory slice %d", i, p.Name, in.start, mig.MemorySlices-1)
			}
			if memory[slice] != 0 {
				return fmt.Errorf("instance %d: %s at %d overlaps instance %d on memory slice %d", i, p.Name, in.start, memory[slice]-1, slice)
			}
			memory[slice] = i + 1
		}
		if compute += p.ComputeSlices; compute > mig.ComputeSlices {
			return fmt.Errorf("instance %d: %s needs %d compute slices, %d of %d are taken", i, p.Name, p.ComputeSlices, compute-p.ComputeSlices, mig.ComputeSlices)
		}
		if perProfile[p.ID]++; perProfile[p.ID] > p.MaxInstances {
			return fmt.Errorf("instance %d: more than %d instances of %s", i, p.MaxInstances, p.Name)
		}
		if p.MediaExtensions {
			if media++; media > 1 {
				return fmt.Errorf("instance %d: a second media-extension instance (%s)", i, p.Name)
			}
		}
	}
	return nil
}

// simFeasibleStarts lists, lowest first, the starts at which one more instance of
// profile keeps the geometry.
func simFeasibleStarts(model mig.Model, instances []simInstance, profile mig.Profile) []int {
	var starts []int
	trial := append(instances[:len(instances):len(instances)], simInstance{profile: profile})
	for _, start := range profile.ValidStarts() {
		trial[len(trial)-1].start = start
		if checkSimGeometry(model, trial) == nil {
			starts = append(starts, start)
		}
	}
	return starts
}
