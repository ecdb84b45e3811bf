package placement_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// migReferenceRow is one row of shared/reference/mig-profiles.md (NVIDIA's MIG User
// Guide), typed here again so the tables in mig.go are checked against an independent
// copy.
type migReferenceRow struct {
	id, compute, memory, maxInstances int
	starts                            []int
	mediaExtensions                   bool
}

var migReferenceRows = []migReferenceRow{
	{19, 1, 1, 7, []int{0, 1, 2, 3, 4, 5, 6}, false},
	{20, 1, 1, 1, []int{0, 1, 2, 3, 4, 5, 6}, true},
	{15, 1, 2, 4, []int{0, 2, 4, 6}, false},
	{14, 2, 2, 3, []int{0, 2, 4}, false},
	{9, 3, 4, 2, []int{0, 4}, false},
	{5, 4, 4, 1, []int{0}, false},
	{0, 7, 8, 1, []int{0}, false},
}

var migReferenceNames = map[mig.Model][]string{
	mig.A100_40GB:  {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
	mig.A100_80GB:  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
	mig.H100_80GB:  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
	mig.H200_141GB: {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
}

func TestMIGTablesMatchTheUserGuide(t *testing.T) {
	if got, want := mig.Models(), []mig.Model{mig.A100_40GB, mig.A100_80GB, mig.H100_80GB, mig.H200_141GB}; !slices.Equal(got, want) {
		t.Fatalf("mig.Models() = %v, want %v", got, want)
	}
	for model, names := range migReferenceNames {
		profiles := model.Profiles()
		if len(profiles) != len(migReferenceRows) {
			t.Fatalf("%s: %d profiles, want %d", model, len(profiles), len(migReferenceRows))
		}
		for i, row := range migReferenceRows {
			p := profiles[i]
			got := migReferenceRow{p.ID, p.ComputeSlices, p.MemorySlices, p.MaxInstances, p.ValidStarts(), p.MediaExtensions}
			if !reflect.DeepEqual(got, row) || p.Name != names[i] || p.Model != model {
				t.Errorf("%s row %d: %s %+v, want %s %+v", model, i, p.Name, got, names[i], row)
			}
			if p.ResourceName() != "nvidia.com/mig-"+names[i] {
				t.Errorf("%s: ResourceName() = %q", p, p.ResourceName())
			}
			if byID, ok := model.ProfileByID(row.id); !ok || byID != p {
				t.Errorf("%s: ProfileByID(%d) = %v, %v", model, row.id, byID, ok)
			}
			if byName, ok := model.Profile(names[i]); !ok || byName != p {
				t.Errorf("%s: Profile(%q) = %v, %v", model, names[i], byName, ok)
			}
			for start := -1; start <= mig.MemorySlices; start++ {
				if p.IsValidStart(start) != slices.Contains(row.starts, start) {
					t.Errorf("%s: IsValidStart(%d) = %v", p, start, p.IsValidStart(start))
				}
			}
		}
	}
	if mig.Model("B200").Profiles() != nil {
		t.Error("an unsupported model has profiles")
	}
}

// Shorthands for H100-80GB slot maps.
var (
	h100MIG1g10   = mustMIGProfile("1g.10gb")
	h100MIG1g10me = mustMIGProfile("1g.10gb+me")
	h100MIG1g20   = mustMIGProfile("1g.20gb")
	h100MIG2g20   = mustMIGProfile("2g.20gb")
	h100MIG3g40   = mustMIGProfile("3g.40gb")
	h100MIG4g40   = mustMIGProfile("4g.40gb")
	h100MIG7g80   = mustMIGProfile("7g.80gb")
)

func mustMIGProfile(name string) mig.Profile {
	profile, ok := mig.H100_80GB.Profile(name)
	if !ok {
		panic("no H100 profile " + name)
	}
	return profile
}

func held(profile mig.Profile, start int) placement.MIGInstance {
	return placement.MIGInstance{ProfileID: profile.ID, Start: start, State: placement.MIGHeld}
}

func idle(profile mig.Profile, start int) placement.MIGInstance {
	return placement.MIGInstance{ProfileID: profile.ID, Start: start, State: placement.MIGIdle}
}

func h100GPU(index int, instances ...placement.MIGInstance) placement.MIGGPU {
	return placement.MIGGPU{Index: index, Model: mig.H100_80GB, Instances: instances}
}

func starts(placements []mig.Placement) []int {
	var result []int
	for _, p := range placements {
		result = append(result, p.Start)
	}
	return result
}

func TestFeasibleMIGPlacements(t *testing.T) {
	cases := []struct {
		name    string
		gpu     placement.MIGGPU
		profile mig.Profile
		want    []int
	}{
		{"empty GPU, 7g", h100GPU(0), h100MIG7g80, []int{0}},
		{"empty GPU, 1g never at slice 7", h100GPU(0), h100MIG1g10, []int{0, 1, 2, 3, 4, 5, 6}},
		{"3g at 4 takes slice 7: 1g.20gb at 0, 2", h100GPU(0, held(h100MIG3g40, 4)), h100MIG1g20, []int{0, 2}},
		{"3g at 4: 4g at 0", h100GPU(0, held(h100MIG3g40, 4)), h100MIG4g40, []int{0}},
		{"3g at 4: second 3g at 0", h100GPU(0, held(h100MIG3g40, 4)), h100MIG3g40, []int{0}},
		{"3g at 4: no 7g", h100GPU(0, held(h100MIG3g40, 4)), h100MIG7g80, nil},
		{"4g at 0: 3g at 4", h100GPU(0, held(h100MIG4g40, 0)), h100MIG3g40, []int{4}},
		{"4g at 0: 2g only at 4", h100GPU(0, held(h100MIG4g40, 0)), h100MIG2g20, []int{4}},
		{"4g at 0: 1g at 4, 5, 6", h100GPU(0, held(h100MIG4g40, 0)), h100MIG1g10, []int{4, 5, 6}},
		{"4g and 3g: full", h100GPU(0, held(h100MIG4g40, 0), held(h100MIG3g40, 4)), h100MIG1g10, nil},
		{"idle instances occupy too", h100GPU(0, idle(h100MIG4g40, 0)), h100MIG2g20, []int{4}},
		{"one +me per GPU", h100GPU(0, held(h100MIG1g10me, 0)), h100MIG1g10me, nil},
		{"+me beside 1g", h100GPU(0, held(h100MIG1g10me, 0)), h100MIG1g10, []int{1, 2, 3, 4, 5, 6}},
		{"1g at 6 strands slice 7 for 1g.20gb", h100GPU(0, held(h100MIG1g10, 6)), h100MIG1g20, []int{0, 2, 4}},
		{"three 2g: max instances", h100GPU(0, held(h100MIG2g20, 0), held(h100MIG2g20, 2), held(h100MIG2g20, 4)), h100MIG2g20, nil},
		{"three 2g: 1g.20gb at 6", h100GPU(0, held(h100MIG2g20, 0), held(h100MIG2g20, 2), held(h100MIG2g20, 4)), h100MIG1g20, []int{6}},
	}
	for _, c := range cases {
		got, err := placement.FeasibleMIGPlacements(c.gpu, c.profile)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(starts(got), c.want) {
			t.Errorf("%s: %s: starts %v, want %v", c.name, c.gpu, starts(got), c.want)
		}
		for _, p := range got {
			if p.Size != c.profile.MemorySlices {
				t.Errorf("%s: placement %s of size %d", c.name, p, p.Size)
			}
		}
	}

	a100 := placement.MIGGPU{Model: mig.A100_40GB, Instances: []placement.MIGInstance{{ProfileID: 19, Start: 6, State: placement.MIGHeld}}}
	twoSlice, _ := mig.A100_40GB.Profile("1g.10gb")
	if got, err := placement.FeasibleMIGPlacements(a100, twoSlice); err != nil || !slices.Equal(starts(got), []int{0, 2, 4}) {
		t.Errorf("A100-40GB 1g.10gb beside 1g.5gb at 6: %v, %v", got, err)
	}
	if _, err := placement.FeasibleMIGPlacements(a100, h100MIG1g10); !errors.Is(err, placement.ErrInvalidMIGState) {
		t.Errorf("an H100 profile on an A100: %v", err)
	}
}

func TestMIGGPUValidate(t *testing.T) {
	eight := make([]placement.MIGInstance, 8)
	for i := range eight {
		eight[i] = held(h100MIG1g10, i)
	}
	cases := []struct {
		gpu  placement.MIGGPU
		want string
	}{
		{placement.MIGGPU{Model: "V100"}, "not a MIG GPU model"},
		{h100GPU(0, placement.MIGInstance{ProfileID: 7, Start: 0, State: placement.MIGHeld}), "no profile id 7"},
		{h100GPU(0, held(h100MIG2g20, 1)), "start 1 is not one of [0 2 4]"},
		{h100GPU(0, held(h100MIG1g10, 7)), "start 7 is not one of"},
		{h100GPU(0, held(h100MIG3g40, 0), idle(h100MIG1g10, 3)), "overlaps another instance"},
		{h100GPU(0, held(h100MIG1g10, 2), held(h100MIG1g10, 2)), "overlaps another instance"},
		{h100GPU(0, held(h100MIG1g10me, 0), idle(h100MIG1g10me, 1)), "a second media-extension instance"},
		{h100GPU(0, placement.MIGInstance{ProfileID: 19, Start: 0}), "state MIGInstanceState(0)"},
		{h100GPU(0, eight...), "8 instances, at most 7"},
	}
	for _, c := range cases {
		err := c.gpu.Validate()
		if !errors.Is(err, placement.ErrInvalidMIGState) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want %q", c.gpu, err, c.want)
		}
	}
	full := h100GPU(3, held(h100MIG4g40, 0), idle(h100MIG2g20, 4), held(h100MIG1g20, 6))
	if err := full.Validate(); err != nil {
		t.Errorf("%s: %v", full, err)
	}
	if got, want := full.String(), "GPU 3 H100-80GB: [0,4) held 4g.40gb, [4,6) idle 2g.20gb, [6,8) held 1g.20gb"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestMIGSliceUsage(t *testing.T) {
	seven := make([]placement.MIGInstance, 7)
	for i := range seven {
		seven[i] = held(h100MIG1g10, i)
	}
	cases := []struct {
		gpu  placement.MIGGPU
		want placement.MIGSliceUsage
	}{
		{h100GPU(0), placement.MIGSliceUsage{Free: 8}},
		{h100GPU(0, seven...), placement.MIGSliceUsage{Held: 7, Free: 1, Unusable: 1}},
		{h100GPU(0, held(h100MIG4g40, 0)), placement.MIGSliceUsage{Held: 4, Free: 4}},
		// slice 7 is reached by 1g.20gb at 6 and 3g at 4, both blocked by the 1g at 6
		{h100GPU(0, held(h100MIG3g40, 0), idle(h100MIG2g20, 4), held(h100MIG1g10, 6)), placement.MIGSliceUsage{Held: 5, Idle: 2, Free: 1, Unusable: 1}},
		{h100GPU(0, held(h100MIG3g40, 0), held(h100MIG1g10, 5)), placement.MIGSliceUsage{Held: 5, Free: 3}},
	}
	for _, c := range cases {
		got, err := c.gpu.SliceUsage()
		if err != nil || got != c.want {
			t.Errorf("%s: SliceUsage() = %+v, %v; want %+v", c.gpu, got, err, c.want)
		}
	}
}

func TestPlanMIG(t *testing.T) {
	reuse, carve := placement.MIGReuseIdle, placement.MIGCarve
	type want struct {
		action  placement.MIGAction
		gpu     int
		start   int
		destroy []placement.MIGInstance
	}
	cases := []struct {
		name     string
		gpus     []placement.MIGGPU
		resource string
		policy   placement.MIGPolicy
		want     want
	}{
		// An empty H100: the 1g keeps the 4g (and 3g) at 0 and slice 7, which only a
		// 1g.20gb at 6 or a 3g at 4 reach: a 1g at 6 would strand it.
		{"best fit, empty GPU", []placement.MIGGPU{h100GPU(0)}, "nvidia.com/mig-1g.10gb", placement.MIGBestFit, want{carve, 0, 4, nil}},
		{"best fit: the second 1g beside the first", []placement.MIGGPU{h100GPU(0, held(h100MIG1g10, 4))}, "nvidia.com/mig-1g.10gb", placement.MIGBestFit, want{carve, 0, 5, nil}},
		{"best fit: no slice stranded, even on an emptier GPU",
			[]placement.MIGGPU{h100GPU(0, held(h100MIG3g40, 0), held(h100MIG2g20, 4)), h100GPU(1, held(h100MIG3g40, 0))}, "nvidia.com/mig-1g.10gb", placement.MIGBestFit, want{carve, 1, 4, nil}},
		{"first fit, empty GPU", []placement.MIGGPU{h100GPU(0)}, "nvidia.com/mig-1g.10gb", placement.MIGFirstFit, want{carve, 0, 0, nil}},
		{"best fit: next to the first 1g, keeping the 4g", []placement.MIGGPU{h100GPU(0, held(h100MIG1g10, 6))}, "nvidia.com/mig-1g.10gb", placement.MIGBestFit, want{carve, 0, 4, nil}},
		{"best fit: a 1g.20gb at 6 beside a 4g keeps the 2g at 4", []placement.MIGGPU{h100GPU(0, held(h100MIG4g40, 0))}, "nvidia.com/mig-1g.20gb", placement.MIGBestFit, want{carve, 0, 6, nil}},
		{"best fit: 3g at 4 keeps the 4g", []placement.MIGGPU{h100GPU(0)}, "nvidia.com/mig-3g.40gb", placement.MIGBestFit, want{carve, 0, 4, nil}},
		{"best fit: a partitioned GPU before an empty one",
			[]placement.MIGGPU{h100GPU(0), h100GPU(1, held(h100MIG3g40, 0))}, "nvidia.com/mig-1g.10gb", placement.MIGBestFit, want{carve, 1, 4, nil}},
		{"first fit: the first GPU",
			[]placement.MIGGPU{h100GPU(0), h100GPU(1, held(h100MIG3g40, 0))}, "nvidia.com/mig-1g.10gb", placement.MIGFirstFit, want{carve, 0, 0, nil}},
		{"best fit: the GPU that loses no 3g",
			[]placement.MIGGPU{h100GPU(4, held(h100MIG2g20, 0)), h100GPU(5, held(h100MIG3g40, 0), held(h100MIG1g10, 4))}, "nvidia.com/mig-1g.10gb", placement.MIGBestFit, want{carve, 5, 5, nil}},
		{"7g: the empty GPU", []placement.MIGGPU{h100GPU(0, held(h100MIG1g10, 6)), h100GPU(1)}, "nvidia.com/mig-7g.80gb", placement.MIGBestFit, want{carve, 1, 0, nil}},
		{"an idle instance of the profile first",
			[]placement.MIGGPU{h100GPU(0), h100GPU(1, idle(h100MIG1g10, 3), held(h100MIG2g20, 4))}, "nvidia.com/mig-1g.10gb", placement.MIGBestFit, want{reuse, 1, 3, nil}},
		{"an idle instance first, first fit too",
			[]placement.MIGGPU{h100GPU(0), h100GPU(1, idle(h100MIG1g10, 3))}, "nvidia.com/mig-1g.10gb", placement.MIGFirstFit, want{reuse, 1, 3, nil}},
		{"idle reuse: the busiest GPU",
			[]placement.MIGGPU{h100GPU(0, idle(h100MIG1g10, 0)), h100GPU(1, held(h100MIG4g40, 0), idle(h100MIG1g10, 4))}, "nvidia.com/mig-1g.10gb", placement.MIGBestFit, want{reuse, 1, 4, nil}},
		{"free slices before destroying idle ones",
			[]placement.MIGGPU{h100GPU(0, idle(h100MIG3g40, 0), held(h100MIG3g40, 4)), h100GPU(1)}, "nvidia.com/mig-4g.40gb", placement.MIGBestFit, want{carve, 1, 0, nil}},
		{"idle instances destroyed when nothing else has room",
			[]placement.MIGGPU{h100GPU(0, idle(h100MIG3g40, 0), held(h100MIG3g40, 4))}, "nvidia.com/mig-4g.40gb", placement.MIGBestFit, want{carve, 0, 0, []placement.MIGInstance{idle(h100MIG3g40, 0)}}},
		{"the fewest idle instances destroyed",
			[]placement.MIGGPU{h100GPU(0, held(h100MIG4g40, 0), idle(h100MIG1g10, 4), idle(h100MIG1g10, 5), idle(h100MIG1g20, 6))}, "nvidia.com/mig-2g.20gb", placement.MIGFirstFit,
			want{carve, 0, 4, []placement.MIGInstance{idle(h100MIG1g10, 4), idle(h100MIG1g10, 5)}}},
		{"an idle instance of another profile destroyed",
			[]placement.MIGGPU{h100GPU(0, idle(h100MIG1g10me, 0), held(h100MIG1g10, 1), held(h100MIG1g10, 2), held(h100MIG1g10, 3), held(h100MIG2g20, 4), held(h100MIG1g10, 6))}, "nvidia.com/mig-1g.10gb", placement.MIGBestFit,
			want{carve, 0, 0, []placement.MIGInstance{idle(h100MIG1g10me, 0)}}},
		{"the profile resolved per model",
			[]placement.MIGGPU{{Index: 2, Model: mig.A100_40GB, Instances: []placement.MIGInstance{{ProfileID: 15, Start: 0, State: placement.MIGHeld}}}, h100GPU(3)},
			"nvidia.com/mig-1g.10gb", placement.MIGBestFit, want{carve, 2, 2, nil}}, // 2 slices on an A100-40GB: at 2 it keeps the 3g at 4
		{"a GPU without the profile is skipped",
			[]placement.MIGGPU{{Index: 0, Model: mig.H200_141GB}, h100GPU(1)}, "nvidia.com/mig-1g.10gb", placement.MIGFirstFit, want{carve, 1, 0, nil}},
	}
	for _, c := range cases {
		step, err := placement.PlanMIG(c.gpus, c.resource, c.policy)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got := want{step.Action, step.GPU, step.Start, step.Destroy}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v", c.name, step)
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
			continue
		}
		gpus := slices.Clone(c.gpus)
		for i := range gpus {
			if gpus[i].Index == step.GPU {
				if err := gpus[i].Apply(step); err != nil {
					t.Errorf("%s: Apply(%v): %v", c.name, step, err)
				}
			}
		}
	}
}

func TestPlanMIGErrors(t *testing.T) {
	full := h100GPU(0, held(h100MIG4g40, 0), held(h100MIG3g40, 4))
	cases := []struct {
		name     string
		gpus     []placement.MIGGPU
		resource string
		want     []error
		message  string
	}{
		{"unknown profile", []placement.MIGGPU{h100GPU(0)}, "nvidia.com/mig-3g.99gb", []error{resources.ErrUnknownMIGProfile, placement.ErrInvalidRequest},
			"no supported GPU model has this MIG profile"},
		{"not a MIG resource", []placement.MIGGPU{h100GPU(0)}, "GPU", []error{resources.ErrUnknownMIGProfile}, "not a MIG resource name"},
		{"no GPU of the model", []placement.MIGGPU{h100GPU(0), h100GPU(1)}, "nvidia.com/mig-1g.5gb", []error{placement.ErrMIGProfileUnsupported, placement.ErrInfeasible},
			"MIG profile 1g.5gb: none of the 2 GPUs has it (2 × H100-80GB; it is a profile of A100-40GB)"},
		{"no GPUs", nil, "nvidia.com/mig-1g.10gb", []error{placement.ErrMIGProfileUnsupported}, "no MIG GPUs"},
		{"held instances fill the GPU", []placement.MIGGPU{full}, "nvidia.com/mig-1g.10gb", []error{placement.ErrMIGNoRoom, placement.ErrNotNow}, "held instances leave no room on any of the 1 GPUs"},
		{"a held +me", []placement.MIGGPU{h100GPU(0, held(h100MIG1g10me, 0))}, "nvidia.com/mig-1g.10gb+me", []error{placement.ErrMIGNoRoom}, "MIG profile 1g.10gb+me"},
		{"an invalid slot map", []placement.MIGGPU{h100GPU(0, held(h100MIG1g10, 7))}, "nvidia.com/mig-1g.10gb", []error{placement.ErrInvalidMIGState}, "GPU 0 (H100-80GB): instance 0 (1g.10gb): start 7"},
		{"one index twice", []placement.MIGGPU{h100GPU(1), h100GPU(1)}, "nvidia.com/mig-1g.10gb", []error{placement.ErrInvalidMIGState}, "two GPUs with index 1"},
	}
	for _, c := range cases {
		_, err := placement.PlanMIG(c.gpus, c.resource, placement.MIGBestFit)
		for _, want := range c.want {
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", c.name, err, want)
			}
		}
		if err != nil && !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: %q does not say %q", c.name, err, c.message)
		}
	}
	if _, err := placement.PlanMIG([]placement.MIGGPU{h100GPU(0)}, "nvidia.com/mig-1g.10gb", placement.MIGPolicy(9)); err == nil {
		t.Error("an unknown policy was accepted")
	}
}

func TestMIGGPUApplyReleaseDestroy(t *testing.T) {
	gpu := h100GPU(0)
	step, err := placement.PlanMIG([]placement.MIGGPU{gpu}, "nvidia.com/mig-3g.40gb", placement.MIGBestFit)
	if err != nil {
		t.Fatal(err)
	}
	if err := gpu.Apply(step); err != nil {
		t.Fatal(err)
	}
	before := gpu.String()
	if err := gpu.Apply(step); !errors.Is(err, placement.ErrInvalidMIGState) || gpu.String() != before {
		t.Errorf("the same carve twice: %v; %s", err, gpu)
	}
	if err := gpu.Destroy(step.Start); !errors.Is(err, placement.ErrInvalidMIGState) {
		t.Errorf("destroying a held instance: %v", err)
	}
	other := step
	other.GPU = 5
	if err := gpu.Apply(other); !errors.Is(err, placement.ErrInvalidMIGState) {
		t.Errorf("a step for another GPU: %v", err)
	}
	if err := gpu.Release(step.Start); err != nil {
		t.Fatal(err)
	}
	if err := gpu.Release(step.Start); !errors.Is(err, placement.ErrInvalidMIGState) {
		t.Errorf("releasing an idle instance: %v", err)
	}
	again, err := placement.PlanMIG([]placement.MIGGPU{gpu}, "nvidia.com/mig-3g.40gb", placement.MIGBestFit)
	if err != nil || again.Action != placement.MIGReuseIdle || again.Start != step.Start {
		t.Fatalf("after release: %v, %v; want the idle instance reused", again, err)
	}
	seven, err := placement.PlanMIG([]placement.MIGGPU{gpu}, "nvidia.com/mig-7g.80gb", placement.MIGBestFit)
	if err != nil || len(seven.Destroy) != 1 {
		t.Fatalf("7g over an idle 3g: %v, %v", seven, err)
	}
	if err := gpu.Apply(seven); err != nil {
		t.Fatal(err)
	}
	if got := gpu.String(); got != "GPU 0 H100-80GB: [0,8) held 7g.80gb" {
		t.Errorf("after the 7g: %s", got)
	}
	if err := gpu.Release(0); err != nil {
		t.Fatal(err)
	}
	if err := gpu.Destroy(0); err != nil || len(gpu.Instances) != 0 {
		t.Errorf("destroy: %v, %s", err, gpu)
	}
}

func TestParseRequestChecksMIGResources(t *testing.T) {
	cases := []struct {
		bundle map[string]float64
		want   string // substring of the error; "" means valid
	}{
		{map[string]float64{"nvidia.com/mig-1g.10gb": 1, "CPU": 2}, ""},
		{map[string]float64{"nvidia.com/mig-3g.99gb": 1}, `bundles[0]["nvidia.com/mig-3g.99gb"]: no supported GPU model has this MIG profile`},
		{map[string]float64{"nvidia.com/mig-1g.10gb": 2}, `bundles[0]["nvidia.com/mig-1g.10gb"]: a bundle gets at most one MIG device`},
		{map[string]float64{"nvidia.com/mig-1g.10gb": 1, "nvidia.com/mig-2g.20gb": 1}, "bundles[0]: a bundle gets at most one MIG device"},
	}
	for _, tc := range cases {
		_, err := placement.ParseRequest(placement.RequestSpec{Bundles: []map[string]float64{tc.bundle}, Strategy: "PACK"})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.bundle, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want it to contain %q", tc.bundle, err, tc.want)
		}
	}
}

// An empty GPU holds the User Guide's count of each profile, as the allocator places them
// one after another, and that count is the table's MaxInstances: what a raylet reports
// as the profile's informational total.
func TestMIGCapacityIsMaxInstances(t *testing.T) {
	want := map[string]int{"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
	for name, count := range want {
		profile, ok := mig.H100_80GB.Profile(name)
		if !ok {
			t.Fatalf("H100-80GB has no profile %s", name)
		}
		if got := capacityOfEmptyGPU(profile); got != count {
			t.Errorf("an empty H100 holds %d of %s, want %d", got, name, count)
		}
	}
	for _, model := range mig.Models() {
		for _, profile := range model.Profiles() {
			if got := capacityOfEmptyGPU(profile); got != profile.MaxInstances {
				t.Errorf("%s: an empty GPU holds %d, MaxInstances is %d", profile, got, profile.MaxInstances)
			}
		}
	}
}

// capacityOfEmptyGPU carves the profile on an empty GPU through PlanMIG until it no
// longer fits.
func capacityOfEmptyGPU(profile mig.Profile) int {
	gpu := placement.MIGGPU{Model: profile.Model}
	count := 0
	for {
		step, err := placement.PlanMIG([]placement.MIGGPU{gpu}, profile.ResourceName(), placement.MIGBestFit)
		if err != nil || gpu.Apply(step) != nil {
			return count
		}
		count++
	}
}
