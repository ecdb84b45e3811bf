package placement_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

const (
	mig1g10gb = "nvidia.com/mig-1g.10gb"
	mig1g20gb = "nvidia.com/mig-1g.20gb"
)

// migNode is an idle node with 64 CPUs and one MIG GPU per slot map given (GPU i has
// index i), of model; no whole GPUs.
func migNode(id string, model mig.Model, slotMaps ...[]placement.MIGInstance) placement.Node {
	n := node(id, "CPU=64", "")
	for i, instances := range slotMaps {
		n.MIGGPUs = append(n.MIGGPUs, placement.MIGGPU{Index: i, Model: model, Instances: instances})
	}
	return n
}

// migBundles is count bundles of {resource: 1, CPU: 2}.
func migBundles(resource string, count int) []resources.Set {
	specs := make([]string, count)
	for i := range specs {
		specs[i] = resource + "=1 CPU=2"
	}
	return bundles(specs...)
}

func TestScheduleMIGBundles(t *testing.T) {
	emptyH100 := []placement.MIGInstance(nil)
	tests := []struct {
		name     string
		nodes    []placement.Node
		bundles  []resources.Set
		strategy placement.Strategy
		// want checks a plan; wantKind and wantReason an unschedulable outcome.
		want       func(t *testing.T, plan placement.Plan)
		wantKind   placement.UnschedulableKind
		wantReason map[placement.NodeID]placement.ReasonCode
	}{
		{
			name:    "one H100 takes 7 1g.10gb bundles of one PACK group, each its own slot",
			nodes:   []placement.Node{migNode("a", mig.H100_80GB, emptyH100)},
			bundles: migBundles(mig1g10gb, 7),
			want: func(t *testing.T, plan placement.Plan) {
				starts := map[int]bool{}
				for _, p := range plan.Placements {
					if p.NodeID != "a" || p.MIG == nil || p.MIG.Action != placement.MIGCarve || fmt.Sprint(p.GPUIndices) != "[0]" {
						t.Fatalf("placement %+v, want a carve on GPU 0 of node a", p)
					}
					starts[p.MIG.Start] = true
				}
				if len(starts) != 7 {
					t.Fatalf("starts %v, want 7 distinct", starts)
				}
			},
		},
		{
			name:    "an idle instance of the profile is reused",
			nodes:   []placement.Node{migNode("a", mig.H100_80GB, []placement.MIGInstance{held(h100MIG3g40, 0), idle(h100MIG1g10, 5)})},
			bundles: migBundles(mig1g10gb, 1),
			want: func(t *testing.T, plan placement.Plan) {
				step := plan.Placements[0].MIG
				if step == nil || step.Action != placement.MIGReuseIdle || step.Start != 5 || len(step.Destroy) != 0 {
					t.Fatalf("step %v, want reuse idle at 5", step)
				}
			},
		},
		{
			name:    "an idle instance of another profile is destroyed when its slots are needed",
			nodes:   []placement.Node{migNode("a", mig.H100_80GB, []placement.MIGInstance{held(h100MIG3g40, 0), idle(h100MIG3g40, 4)})},
			bundles: migBundles(mig1g20gb, 1),
			want: func(t *testing.T, plan placement.Plan) {
				step := plan.Placements[0].MIG
				if step == nil || step.Action != placement.MIGCarve || step.Start < 4 ||
					fmt.Sprint(step.Destroy) != fmt.Sprint([]placement.MIGInstance{idle(h100MIG3g40, 4)}) {
					t.Fatalf("step %v, want a carve at 4 or 6 after destroying the idle 3g.40gb at 4", step)
				}
			},
		},
		{
			name: "a profile no MIG GPU of the node has is infeasible",
			nodes: []placement.Node{
				migNode("a", mig.A100_40GB, emptyH100), // A100-40GB has 1g.10gb, not 1g.20gb
				node("b", "CPU=64", ""),
			},
			bundles:  migBundles(mig1g20gb, 1),
			wantKind: placement.Infeasible,
			wantReason: map[placement.NodeID]placement.ReasonCode{
				"a": placement.ReasonMIGProfileUnsupported, "b": placement.ReasonMIGProfileUnsupported,
			},
		},
		{
			name:       "the other resources of a MIG bundle are checked as before",
			nodes:      []placement.Node{migNode("a", mig.H100_80GB, emptyH100)},
			bundles:    bundles(mig1g10gb + "=1 CPU=128"),
			wantKind:   placement.Infeasible,
			wantReason: map[placement.NodeID]placement.ReasonCode{"a": placement.ReasonInsufficientTotal},
		},
		{
			name: "STRICT_PACK of 3 MIG bundles lands on one node, by node not by NVLink island",
			nodes: []placement.Node{
				migNode("a", mig.H100_80GB, []placement.MIGInstance{held(h100MIG3g40, 0), held(h100MIG1g20, 4)}), // room for one 1g.10gb
				migNode("b", mig.H100_80GB, emptyH100),
				dgxH100("c"),
			},
			bundles:  migBundles(mig1g10gb, 3),
			strategy: placement.StrategyStrictPack,
			want: func(t *testing.T, plan placement.Plan) {
				for _, p := range plan.Placements {
					if p.NodeID != "b" || p.MIG == nil {
						t.Fatalf("placement %+v, want node b with a MIG step", p)
					}
				}
			},
		},
		{
			name: "STRICT_PACK that no node's MIG GPUs can hold waits with the reason",
			nodes: []placement.Node{
				migNode("a", mig.H100_80GB, []placement.MIGInstance{held(h100MIG3g40, 0), held(h100MIG1g20, 4)}),
			},
			bundles:    migBundles(mig1g10gb, 2),
			strategy:   placement.StrategyStrictPack,
			wantKind:   placement.NotNow,
			wantReason: map[placement.NodeID]placement.ReasonCode{"a": placement.ReasonMIGNoRoom},
		},
		{
			name: "SPREAD puts MIG bundles on two MIG nodes",
			nodes: []placement.Node{
				migNode("a", mig.H100_80GB, emptyH100),
				migNode("b", mig.H100_80GB, emptyH100),
			},
			bundles:  migBundles(mig1g10gb, 2),
			strategy: placement.StrategySpread,
			want: func(t *testing.T, plan placement.Plan) {
				if plan.Placements[0].NodeID == plan.Placements[1].NodeID {
					t.Fatalf("plan %+v, want two nodes", plan)
				}
			},
		},
		{
			name: "a node with an idle instance of the profile is preferred",
			nodes: []placement.Node{
				migNode("a", mig.H100_80GB, emptyH100),
				migNode("b", mig.H100_80GB, []placement.MIGInstance{held(h100MIG1g10, 0)}),
				migNode("c", mig.H100_80GB, []placement.MIGInstance{idle(h100MIG1g10, 3)}),
			},
			bundles: migBundles(mig1g10gb, 1),
			want: func(t *testing.T, plan placement.Plan) {
				if p := plan.Placements[0]; p.NodeID != "c" || p.MIG.Action != placement.MIGReuseIdle {
					t.Fatalf("placement %+v, want reuse on node c", p)
				}
			},
		},
		{
			name: "a partitioned GPU is preferred to an empty one",
			nodes: []placement.Node{
				migNode("a", mig.H100_80GB, emptyH100),
				migNode("b", mig.H100_80GB, []placement.MIGInstance{held(h100MIG1g10, 0)}),
			},
			bundles: migBundles(mig1g10gb, 1),
			want: func(t *testing.T, plan placement.Plan) {
				if p := plan.Placements[0]; p.NodeID != "b" {
					t.Fatalf("placement %+v, want node b", p)
				}
			},
		},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			snapshot := snapshotOf(t, test.nodes...)
			request := placement.Request{Bundles: test.bundles, Strategy: test.strategy}
			plan, err := placement.Schedule(snapshot, request)
			if test.want == nil {
				var unschedulable *placement.UnschedulableError
				if !errors.As(err, &unschedulable) || unschedulable.Kind != test.wantKind {
					t.Fatalf("Schedule = %+v, %v; want %v", plan, err, test.wantKind)
				}
				for id, code := range test.wantReason {
					reasons := unschedulable.NodeReasons[id]
					if len(reasons) == 0 || reasons[len(reasons)-1].Code != code {
						t.Errorf("node %s reasons %v, want %s", id, reasons, code)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			test.want(t, plan)
			// Every plan reserves as it is, and releases back.
			if err := snapshot.Reserve(test.bundles, plan); err != nil {
				t.Fatalf("Reserve: %v", err)
			}
			if err := snapshot.Release(test.bundles, plan); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
}

// An H100 in MIG mode holds seven 1g.10gb; an eighth group waits until the first is
// released, and then reuses an idle instance.
func TestMIGEighthGroupWaitsThenReusesAReleasedInstance(t *testing.T) {
	snapshot := snapshotOf(t, migNode("a", mig.H100_80GB, nil))
	group := placement.Request{Bundles: migBundles(mig1g10gb, 7)}
	plan, err := placement.Schedule(snapshot, group)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	if err := snapshot.Reserve(group.Bundles, plan); err != nil {
		t.Fatalf("Reserve: %v", err)
	}

	eighth := placement.Request{Bundles: migBundles(mig1g10gb, 1)}
	_, err = placement.Schedule(snapshot, eighth)
	var unschedulable *placement.UnschedulableError
	if !errors.As(err, &unschedulable) || unschedulable.Kind != placement.NotNow {
		t.Fatalf("eighth group: %v, want NotNow", err)
	}
	if reasons := unschedulable.NodeReasons["a"]; len(reasons) != 1 || reasons[0].Code != placement.ReasonMIGNoRoom ||
		reasons[0].String() != "no room on the MIG GPUs for nvidia.com/mig-1g.10gb now" {
		t.Fatalf("reasons %v, want %s", reasons, placement.ReasonMIGNoRoom)
	}

	if err := snapshot.Release(group.Bundles, plan); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// Released twice: the CPUs would catch it; the slot map does too.
	migOnly := make([]resources.Set, len(group.Bundles))
	for i := range migOnly {
		migOnly[i] = parseResources(mig1g10gb + "=1")
	}
	if err := snapshot.Release(migOnly, plan); !errors.Is(err, placement.ErrInvalidGPUAssignment) {
		t.Fatalf("second Release: %v, want ErrInvalidGPUAssignment", err)
	}
	node, _ := snapshot.Node("a")
	for _, instance := range node.MIGGPUs[0].Instances {
		if instance.State != placement.MIGIdle {
			t.Fatalf("after Release: %s, want every instance idle", node.MIGGPUs[0])
		}
	}
	if len(node.MIGGPUs[0].Instances) != 7 {
		t.Fatalf("after Release: %s, want 7 idle instances", node.MIGGPUs[0])
	}

	plan, err = placement.Schedule(snapshot, eighth)
	if err != nil {
		t.Fatalf("eighth group after release: %v", err)
	}
	if step := plan.Placements[0].MIG; step == nil || step.Action != placement.MIGReuseIdle {
		t.Fatalf("step %v, want reuse idle", step)
	}
}

func TestReserveRejectsMIGStepsThatDoNotFit(t *testing.T) {
	snapshot := snapshotOf(t, migNode("a", mig.H100_80GB, []placement.MIGInstance{held(h100MIG1g10, 0)}), node("b", "CPU=8", ""))
	request := placement.Request{Bundles: migBundles(mig1g10gb, 1)}
	profile := h100MIG1g10
	tests := []struct {
		name      string
		placement placement.BundlePlacement
	}{
		{"no step", placement.BundlePlacement{NodeID: "a", GPUIndices: []int{0}}},
		{"held slot", placement.BundlePlacement{NodeID: "a", GPUIndices: []int{0},
			MIG: &placement.MIGStep{Action: placement.MIGCarve, GPU: 0, Profile: profile, Start: 0}}},
		{"GPU index missing", placement.BundlePlacement{NodeID: "a",
			MIG: &placement.MIGStep{Action: placement.MIGCarve, GPU: 0, Profile: profile, Start: 1}}},
		{"node without MIG GPUs", placement.BundlePlacement{NodeID: "b", GPUIndices: []int{0},
			MIG: &placement.MIGStep{Action: placement.MIGCarve, GPU: 0, Profile: profile, Start: 1}}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			before, _ := snapshot.Node("a")
			err := snapshot.Reserve(request.Bundles, placement.Plan{Placements: []placement.BundlePlacement{test.placement}})
			if !errors.Is(err, placement.ErrInvalidGPUAssignment) {
				t.Fatalf("Reserve: %v, want ErrInvalidGPUAssignment", err)
			}
			if after, _ := snapshot.Node("a"); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("Reserve changed the node: %+v, was %+v", after, before)
			}
		})
	}
}

func TestNewSnapshotValidatesMIGGPUs(t *testing.T) {
	overlapping := migNode("a", mig.H100_80GB, []placement.MIGInstance{held(h100MIG3g40, 0), idle(h100MIG1g10, 1)})
	alsoWhole := dgxH100("a")
	alsoWhole.MIGGPUs = []placement.MIGGPU{{Index: 3, Model: mig.H100_80GB}}
	for _, n := range []placement.Node{overlapping, alsoWhole} {
		if _, err := placement.NewSnapshot([]placement.Node{n}); !errors.Is(err, placement.ErrInvalidSnapshot) {
			t.Errorf("NewSnapshot(%+v): %v, want ErrInvalidSnapshot", n.MIGGPUs, err)
		}
	}
}
