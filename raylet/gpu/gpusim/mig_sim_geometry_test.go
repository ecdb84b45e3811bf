package gpusim

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/placement"
)

func h100(t *testing.T, name string, start int) simInstance {
	t.Helper()
	profile, ok := mig.H100_80GB.Profile(name)
	if !ok {
		t.Fatalf("no H100 profile %s", name)
	}
	return simInstance{profile: profile, start: start}
}

func TestSimGeometryRefusesWhatHardwareRefuses(t *testing.T) {
	cases := []struct {
		name      string
		instances func(t *testing.T) []simInstance
		want      string // "" when valid
	}{
		{"empty", func(t *testing.T) []simInstance { return nil }, ""},
		{"seven 1g", func(t *testing.T) []simInstance {
			var out []simInstance
			for start := range 7 {
				out = append(out, h100(t, "1g.10gb", start))
			}
			return out
		}, ""},
		{"3g twice", func(t *testing.T) []simInstance {
			return []simInstance{h100(t, "3g.40gb", 0), h100(t, "3g.40gb", 4)}
		}, ""},
		{"start not allowed", func(t *testing.T) []simInstance { return []simInstance{h100(t, "2g.20gb", 1)} }, "cannot start"},
		{"overlap", func(t *testing.T) []simInstance {
			return []simInstance{h100(t, "4g.40gb", 0), h100(t, "1g.20gb", 2)}
		}, "overlaps"},
		{"4g and 3g fill the GPU", func(t *testing.T) []simInstance {
			return []simInstance{h100(t, "4g.40gb", 0), h100(t, "3g.40gb", 4), h100(t, "1g.10gb", 6)}
		}, "overlaps"},
		{"no 1g starts at memory slice 7", func(t *testing.T) []simInstance {
			return []simInstance{h100(t, "4g.40gb", 0), h100(t, "2g.20gb", 4), h100(t, "1g.10gb", 6), h100(t, "1g.10gb", 7)}
		}, "cannot start"},
		{"three 2g and a 1g", func(t *testing.T) []simInstance {
			return []simInstance{h100(t, "2g.20gb", 0), h100(t, "2g.20gb", 2), h100(t, "2g.20gb", 4), h100(t, "1g.10gb", 6)}
		}, ""},
		{"more 1g.20gb than its max of 4", func(t *testing.T) []simInstance {
			return []simInstance{h100(t, "1g.20gb", 0), h100(t, "1g.20gb", 2), h100(t, "1g.20gb", 4), h100(t, "1g.20gb", 6), h100(t, "1g.20gb", 6)}
		}, "overlaps"},
		{"second media extension", func(t *testing.T) []simInstance {
			return []simInstance{h100(t, "1g.10gb+me", 0), h100(t, "1g.10gb+me", 1)}
		}, "more than 1 instances of 1g.10gb+me"},
		{"other model's profile", func(t *testing.T) []simInstance {
			p, _ := mig.A100_40GB.Profile("1g.5gb")
			return []simInstance{{profile: p, start: 0}}
		}, "not a H100-80GB profile"},
	}
	for _, c := range cases {
		err := checkSimGeometry(mig.H100_80GB, c.instances(t))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// The simulator's geometry and the scheduler's allocator are written apart; on random
// slot maps they must agree on every start of every profile, so a bug in either shows.
func TestSimGeometryAgreesWithTheAllocator(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 2000 {
		model := mig.Models()[rng.IntN(len(mig.Models()))]
		profiles := model.Profiles()
		var instances []simInstance
		slotMap := placement.MIGGPU{Model: model}
		for range rng.IntN(6) {
			profile := profiles[rng.IntN(len(profiles))]
			starts := simFeasibleStarts(model, instances, profile)
			if len(starts) == 0 {
				continue
			}
			start := starts[rng.IntN(len(starts))]
			instances = append(instances, simInstance{profile: profile, start: start})
			slotMap.Instances = append(slotMap.Instances, placement.MIGInstance{ProfileID: profile.ID, Start: start, State: placement.MIGHeld})
		}
		if err := slotMap.Validate(); err != nil {
			t.Fatalf("round %d: the simulator built a map the allocator refuses: %v", round, err)
		}
		for _, profile := range profiles {
			feasible, err := placement.FeasibleMIGPlacements(slotMap, profile)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			var allocator []int
			for _, p := range feasible {
				allocator = append(allocator, p.Start)
			}
			if sim := simFeasibleStarts(model, instances, profile); !slices.Equal(sim, allocator) {
				t.Fatalf("round %d, %s on %v: simulator allows starts %v, allocator %v", round, profile, slotMap, sim, allocator)
			}
		}
	}
}
