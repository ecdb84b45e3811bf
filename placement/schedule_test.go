package placement_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/placement"
)

// scheduleCase is one decision: nodes and request in, either the bundle → node map or
// the failure kind (and optionally its exact message and some node reasons) out.
type scheduleCase struct {
	name    string
	nodes   []placement.Node
	request placement.Request
	// want maps bundle index → node id; nil when the request must fail.
	want        map[int]string
	wantKind    placement.UnschedulableKind
	wantMessage string
	wantReasons map[placement.NodeID][]placement.ReasonCode
}

func runScheduleCases(t *testing.T, cases []scheduleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snapshot := snapshotOf(t, c.nodes...)
			plan, err := placement.Schedule(snapshot, c.request)
			if c.want != nil {
				if err != nil {
					t.Fatalf("Schedule failed: %v", err)
				}
				got := map[int]string{}
				for _, p := range plan.Placements {
					got[p.BundleIndex] = string(p.NodeID)
				}
				if !reflect.DeepEqual(got, c.want) {
					t.Fatalf("plan = %v, want %v", got, c.want)
				}
				return
			}
			var unschedulable *placement.UnschedulableError
			if !errors.As(err, &unschedulable) {
				t.Fatalf("Schedule = %v, %v; want an *UnschedulableError", plan, err)
			}
			if unschedulable.Kind != c.wantKind {
				t.Errorf("kind = %v, want %v (%v)", unschedulable.Kind, c.wantKind, err)
			}
			wantSentinel := map[placement.UnschedulableKind]error{placement.Infeasible: placement.ErrInfeasible, placement.NotNow: placement.ErrNotNow}[c.wantKind]
			if !errors.Is(err, wantSentinel) {
				t.Errorf("error does not wrap %v", wantSentinel)
			}
			if c.wantMessage != "" && err.Error() != c.wantMessage {
				t.Errorf("message:\n got %s\nwant %s", err, c.wantMessage)
			}
			for id, wantCodes := range c.wantReasons {
				var codes []placement.ReasonCode
				for _, reason := range unschedulable.NodeReasons[id] {
					codes = append(codes, reason.Code)
				}
				if !reflect.DeepEqual(codes, wantCodes) {
					t.Errorf("reasons of node %s = %v, want %v", id, codes, wantCodes)
				}
			}
		})
	}
}

func TestSchedulePack(t *testing.T) {
	runScheduleCases(t, []scheduleCase{
		{
			name:    "whole group on the best-fitting node",
			nodes:   []placement.Node{node("a", "GPU=8 CPU=64", ""), node("b", "GPU=8 CPU=64", "GPU=3 CPU=40"), node("c", "GPU=8 CPU=64", "GPU=2 CPU=64")},
			request: placement.Request{Strategy: placement.StrategyPack, Bundles: bundles("GPU=1 CPU=8", "GPU=1 CPU=8")},
			want:    map[int]string{0: "c", 1: "c"}, // c is left with 0 GPUs, b with 1, a with 6
		},
		{
			name:    "spills over to as few nodes as possible",
			nodes:   []placement.Node{node("a", "GPU=8", "GPU=2"), node("b", "GPU=8", "GPU=5"), node("c", "GPU=8", "GPU=4"), node("d", "GPU=8", "GPU=1")},
			request: placement.Request{Strategy: placement.StrategyPack, Bundles: bundles("GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1")},
			// b takes 5, then 2 remain: a takes exactly 2 (best fit among nodes taking both).
			want: map[int]string{0: "b", 1: "b", 2: "b", 3: "b", 4: "b", 5: "a", 6: "a"},
		},
		{
			name:    "zero of a resource is not a demand",
			nodes:   []placement.Node{node("a", "CPU=4", "")},
			request: placement.Request{Bundles: bundles("CPU=1 GPU=0")},
			want:    map[int]string{0: "a"},
		},
		{
			name:        "not now: fits the totals but not what is free",
			nodes:       []placement.Node{node("a", "GPU=8", "GPU=1"), node("b", "GPU=8", "GPU=2")},
			request:     placement.Request{Strategy: placement.StrategyPack, Bundles: bundles("GPU=4")},
			wantKind:    placement.NotNow,
			wantMessage: "not now: bundle 0 {GPU: 4} fits no node: node a: GPU available 1 < 4; node b: GPU available 2 < 4",
		},
		{
			name:        "infeasible: a bundle larger than any node",
			nodes:       []placement.Node{node("a", "GPU=8 CPU=64", ""), node("b", "GPU=8 CPU=64", "GPU=0 CPU=0")},
			request:     placement.Request{Strategy: placement.StrategyPack, Bundles: bundles("GPU=1", "GPU=16")},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: bundle 1 {GPU: 16} fits no node: 2 nodes (a, b): GPU total 8 < 16",
			wantReasons: map[placement.NodeID][]placement.ReasonCode{"a": {placement.ReasonInsufficientTotal}},
		},
		{
			name:        "infeasible: every bundle fits a node, not all of them together",
			nodes:       []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", "")},
			request:     placement.Request{Strategy: placement.StrategyPack, Bundles: bundles("GPU=8", "GPU=8", "GPU=8")},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: bundle 2 {GPU: 8} fits no node: 2 nodes (a, b): GPU total 8, 0 left beside this group's other bundles, < 8",
		},
		{
			name:        "a resource no node has",
			nodes:       []placement.Node{node("a", "GPU=8", "")},
			request:     placement.Request{Bundles: bundles("TPU=1")},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: bundle 0 {TPU: 1} fits no node: node a: TPU total 0 < 1",
		},
		{
			name:        "an empty cluster",
			request:     placement.Request{Bundles: bundles("CPU=1")},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: bundle 0 {CPU: 1} fits no node: the cluster has no nodes",
		},
	})
}

func TestScheduleSpread(t *testing.T) {
	runScheduleCases(t, []scheduleCase{
		{
			name:    "one bundle per node, best fit first",
			nodes:   []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", "GPU=1"), node("c", "GPU=8", "GPU=2")},
			request: placement.Request{Strategy: placement.StrategySpread, Bundles: bundles("GPU=1", "GPU=1")},
			want:    map[int]string{0: "b", 1: "c"},
		},
		{
			name:    "reuses nodes once distinct ones run out",
			nodes:   []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", "")},
			request: placement.Request{Strategy: placement.StrategySpread, Bundles: bundles("GPU=1", "GPU=1", "GPU=1", "GPU=1")},
			want:    map[int]string{0: "a", 1: "b", 2: "a", 3: "b"},
		},
		{
			name:    "reuses a node when the unused ones are too small",
			nodes:   []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", "GPU=1")},
			request: placement.Request{Strategy: placement.StrategySpread, Bundles: bundles("GPU=2", "GPU=2")},
			want:    map[int]string{0: "a", 1: "a"},
		},
		{
			name:     "not now",
			nodes:    []placement.Node{node("a", "GPU=8", "GPU=1"), node("b", "GPU=8", "GPU=1")},
			request:  placement.Request{Strategy: placement.StrategySpread, Bundles: bundles("GPU=1", "GPU=1", "GPU=1")},
			wantKind: placement.NotNow,
			wantReasons: map[placement.NodeID][]placement.ReasonCode{
				"a": {placement.ReasonInsufficientAvailable}, "b": {placement.ReasonInsufficientAvailable},
			},
		},
	})
}

func TestScheduleStrictPack(t *testing.T) {
	runScheduleCases(t, []scheduleCase{
		{
			name:    "one node, best fit",
			nodes:   []placement.Node{node("a", "GPU=8 CPU=64", ""), node("b", "GPU=8 CPU=64", "GPU=4 CPU=32")},
			request: placement.Request{Strategy: placement.StrategyStrictPack, Bundles: bundles("GPU=2 CPU=8", "GPU=2 CPU=8")},
			want:    map[int]string{0: "b", 1: "b"},
		},
		{
			name:        "infeasible when no node's total holds the sum",
			nodes:       []placement.Node{node("a", "GPU=8 CPU=64", ""), node("b", "GPU=8 CPU=64", "")},
			request:     placement.Request{Strategy: placement.StrategyStrictPack, Bundles: bundles("GPU=4 CPU=8", "GPU=4 CPU=8", "GPU=4 CPU=8")},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: STRICT_PACK bundles {CPU: 24, GPU: 12} (sum of 3) fit no single node: 2 nodes (a, b): GPU total 8 < 12",
		},
		{
			name:        "a single bundle is reported as the bundle",
			nodes:       []placement.Node{node("abcdef0123456789", "GPU=8", "")},
			request:     placement.Request{Strategy: placement.StrategyStrictPack, Bundles: bundles("GPU=16")},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: bundle 0 {GPU: 16} fits no node: node abcdef01…: GPU total 8 < 16",
		},
		{
			name:     "not now when a node could hold the sum once free",
			nodes:    []placement.Node{node("a", "GPU=8", "GPU=6"), node("b", "GPU=8", "GPU=7")},
			request:  placement.Request{Strategy: placement.StrategyStrictPack, Bundles: bundles("GPU=4", "GPU=4")},
			wantKind: placement.NotNow,
		},
	})
}

func TestScheduleStrictSpread(t *testing.T) {
	runScheduleCases(t, []scheduleCase{
		{
			name:    "distinct nodes",
			nodes:   []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", "GPU=2"), node("c", "GPU=8", "GPU=1")},
			request: placement.Request{Strategy: placement.StrategyStrictSpread, Bundles: bundles("GPU=1", "GPU=1", "GPU=1")},
			want:    map[int]string{0: "c", 1: "b", 2: "a"},
		},
		{
			name:        "infeasible with fewer eligible nodes than bundles",
			nodes:       []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", ""), draining(node("c", "GPU=8", "")), dead(node("d", "GPU=8", ""))},
			request:     placement.Request{Strategy: placement.StrategyStrictSpread, Bundles: bundles("GPU=1", "GPU=1", "GPU=1")},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: STRICT_SPREAD needs 3 distinct nodes, only 2 are eligible: node c: draining; node d: dead",
		},
		{
			name:     "infeasible when only one node is big enough for two bundles",
			nodes:    []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=2", "")},
			request:  placement.Request{Strategy: placement.StrategyStrictSpread, Bundles: bundles("GPU=4", "GPU=4")},
			wantKind: placement.Infeasible,
			wantReasons: map[placement.NodeID][]placement.ReasonCode{
				"a": {placement.ReasonAlreadyHoldsBundle}, "b": {placement.ReasonInsufficientTotal},
			},
		},
		{
			name:     "not now",
			nodes:    []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", "GPU=0")},
			request:  placement.Request{Strategy: placement.StrategyStrictSpread, Bundles: bundles("GPU=1", "GPU=1")},
			wantKind: placement.NotNow,
		},
	})
}

func TestScheduleRespectsNodeState(t *testing.T) {
	runScheduleCases(t, []scheduleCase{
		{
			name:    "draining and dead nodes take no bundles",
			nodes:   []placement.Node{draining(node("a", "GPU=8", "")), dead(node("b", "GPU=8", "")), node("c", "GPU=8", "GPU=1")},
			request: placement.Request{Bundles: bundles("GPU=1")},
			want:    map[int]string{0: "c"},
		},
		{
			// Draining nodes are not part of "today's cluster": only other nodes help.
			name:        "a group only a draining node could hold is infeasible",
			nodes:       []placement.Node{draining(node("a", "GPU=8", "")), node("b", "GPU=4", "")},
			request:     placement.Request{Bundles: bundles("GPU=8")},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: bundle 0 {GPU: 8} fits no node: node a: draining; node b: GPU total 4 < 8",
		},
	})
}

func TestScheduleGPUBundlesFirstAndCPUWorkAvoidsIdleGPUs(t *testing.T) {
	runScheduleCases(t, []scheduleCase{
		{
			// Bundle 0 is placed after bundle 1 even though it comes first; and it prefers
			// the node without GPUs.
			name:    "STRICT_SPREAD",
			nodes:   []placement.Node{node("a", "GPU=1 CPU=4", ""), node("b", "CPU=4", "")},
			request: placement.Request{Strategy: placement.StrategyStrictSpread, Bundles: bundles("CPU=1", "GPU=1 CPU=1")},
			want:    map[int]string{0: "b", 1: "a"},
		},
		{
			name:    "CPU-only work goes to nodes whose GPUs are busy",
			nodes:   []placement.Node{node("a", "GPU=8 CPU=64", ""), node("b", "GPU=8 CPU=64", "GPU=0 CPU=32"), node("c", "GPU=8 CPU=64", "GPU=4 CPU=16")},
			request: placement.Request{Bundles: bundles("CPU=8")},
			want:    map[int]string{0: "b"},
		},
		{
			name:    "larger GPU bundles are placed before smaller ones",
			nodes:   []placement.Node{node("a", "GPU=8", "GPU=4"), node("b", "GPU=8", "GPU=1")},
			request: placement.Request{Strategy: placement.StrategySpread, Bundles: bundles("GPU=1", "GPU=4")},
			want:    map[int]string{0: "b", 1: "a"},
		},
	})
}

func TestScheduleLabelSelectors(t *testing.T) {
	nodes := []placement.Node{
		labeled(node("a", "GPU=8", ""), "ray.io/accelerator-type", "A100", "zone", "z1"),
		labeled(node("b", "GPU=8", ""), "ray.io/accelerator-type", "H100", "zone", "z1"),
		labeled(node("c", "GPU=8", ""), "ray.io/accelerator-type", "H100", "zone", "z2"),
		node("d", "GPU=8", ""),
	}
	runScheduleCases(t, []scheduleCase{
		{
			name:  "exact, in, negated and node-id selectors",
			nodes: nodes,
			request: placement.Request{
				Strategy: placement.StrategyStrictSpread,
				Bundles:  bundles("GPU=1", "GPU=1", "GPU=1", "GPU=1"),
				BundleLabelSelectors: selectors(t,
					map[string]string{"ray.io/accelerator-type": "A100"},
					map[string]string{"zone": "in(z2,z3)"},
					map[string]string{"ray.io/accelerator-type": "!in(A100,H100)"}, // matches d, which lacks the label
					map[string]string{nodelabel.NodeID: "b"},
				),
			},
			want: map[int]string{0: "a", 1: "c", 2: "d", 3: "b"},
		},
		{
			name:  "STRICT_PACK needs a node matching every bundle's selector",
			nodes: nodes,
			request: placement.Request{
				Strategy:             placement.StrategyStrictPack,
				Bundles:              bundles("GPU=1", "GPU=1"),
				BundleLabelSelectors: selectors(t, map[string]string{"zone": "z1"}, map[string]string{"ray.io/accelerator-type": "!A100"}),
			},
			want: map[int]string{0: "b", 1: "b"},
		},
		{
			name:  "no matching node is infeasible, with the label named",
			nodes: nodes,
			request: placement.Request{
				Bundles:              bundles("GPU=1"),
				BundleLabelSelectors: selectors(t, map[string]string{"ray.io/accelerator-type": "in(B200,GB200)"}),
			},
			wantKind: placement.Infeasible,
			wantMessage: `infeasible: bundle 0 {GPU: 1} fits no node: 2 nodes (b, c): label "ray.io/accelerator-type" is "H100", selector wants in(B200,GB200); ` +
				`node a: label "ray.io/accelerator-type" is "A100", selector wants in(B200,GB200); node d: no label "ray.io/accelerator-type", selector wants in(B200,GB200)`,
			wantReasons: map[placement.NodeID][]placement.ReasonCode{"d": {placement.ReasonLabelMismatch}},
		},
		{
			name: "a matching node that is busy is not now",
			nodes: []placement.Node{
				labeled(node("a", "GPU=8", "GPU=0"), "zone", "z1"),
				labeled(node("b", "GPU=8", ""), "zone", "z2"),
			},
			request: placement.Request{
				Bundles:              bundles("GPU=1"),
				BundleLabelSelectors: selectors(t, map[string]string{"zone": "z1"}),
			},
			wantKind: placement.NotNow,
			wantReasons: map[placement.NodeID][]placement.ReasonCode{
				"a": {placement.ReasonInsufficientAvailable}, "b": {placement.ReasonLabelMismatch},
			},
		},
	})
}

func TestScheduleRescheduling(t *testing.T) {
	runScheduleCases(t, []scheduleCase{
		{
			name:  "STRICT_SPREAD: lost bundles avoid nodes holding the others",
			nodes: []placement.Node{node("a", "GPU=8", "GPU=7"), node("b", "GPU=8", "GPU=7"), node("c", "GPU=8", "")},
			request: placement.Request{
				Strategy:      placement.StrategyStrictSpread,
				Bundles:       bundles("GPU=1", "GPU=1", "GPU=1"),
				PlacedBundles: map[int]placement.NodeID{0: "a", 2: "b"},
			},
			want: map[int]string{1: "c"},
		},
		{
			name:  "STRICT_SPREAD: infeasible when only holders remain",
			nodes: []placement.Node{node("a", "GPU=8", "GPU=7"), node("b", "GPU=8", "GPU=7")},
			request: placement.Request{
				Strategy:      placement.StrategyStrictSpread,
				Bundles:       bundles("GPU=1", "GPU=1", "GPU=1"),
				PlacedBundles: map[int]placement.NodeID{0: "a", 2: "b"},
			},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: STRICT_SPREAD needs 1 distinct nodes, only 0 are eligible: 2 nodes (a, b): already holds a bundle of this group",
		},
		{
			name:  "STRICT_PACK: lost bundles go to the node holding the others",
			nodes: []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", "GPU=4")},
			request: placement.Request{
				Strategy:      placement.StrategyStrictPack,
				Bundles:       bundles("GPU=2", "GPU=2", "GPU=2"),
				PlacedBundles: map[int]placement.NodeID{1: "b"},
			},
			want: map[int]string{0: "b", 2: "b"},
		},
		{
			name:  "STRICT_PACK: not now when the holder is busy, with the others named",
			nodes: []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", "GPU=2")},
			request: placement.Request{
				Strategy:      placement.StrategyStrictPack,
				Bundles:       bundles("GPU=2", "GPU=2", "GPU=2"),
				PlacedBundles: map[int]placement.NodeID{1: "b"},
			},
			wantKind:    placement.NotNow,
			wantMessage: "not now: STRICT_PACK bundles {GPU: 4} (sum of 2) fit no single node: node a: the group's other bundles are on node b; node b: GPU available 2 < 4",
		},
		{
			name:  "STRICT_PACK: infeasible when the holder's total cannot take them beside the others",
			nodes: []placement.Node{node("a", "GPU=8", ""), node("b", "GPU=8", "GPU=2")},
			request: placement.Request{
				Strategy:      placement.StrategyStrictPack,
				Bundles:       bundles("GPU=4", "GPU=6"),
				PlacedBundles: map[int]placement.NodeID{1: "b"},
			},
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: bundle 0 {GPU: 4} fits no node: node a: the group's other bundles are on node b; node b: GPU total 8, 2 left beside this group's other bundles, < 4",
		},
		{
			name:  "PACK: lost bundles prefer nodes holding the others",
			nodes: []placement.Node{node("a", "GPU=8", "GPU=1"), node("b", "GPU=8", "GPU=6")},
			request: placement.Request{
				Strategy:      placement.StrategyPack,
				Bundles:       bundles("GPU=1", "GPU=1"),
				PlacedBundles: map[int]placement.NodeID{0: "b"},
			},
			want: map[int]string{1: "b"}, // a would be the better fit for a new group
		},
		{
			name:  "SPREAD: lost bundles prefer nodes not holding the others",
			nodes: []placement.Node{node("a", "GPU=8", "GPU=1"), node("b", "GPU=8", "GPU=6")},
			request: placement.Request{
				Strategy:      placement.StrategySpread,
				Bundles:       bundles("GPU=1", "GPU=1"),
				PlacedBundles: map[int]placement.NodeID{0: "a"},
			},
			want: map[int]string{1: "b"},
		},
		{
			name:    "nothing left to place",
			nodes:   []placement.Node{node("a", "GPU=8", "")},
			request: placement.Request{Bundles: bundles("GPU=1"), PlacedBundles: map[int]placement.NodeID{0: "a"}},
			want:    map[int]string{},
		},
	})

	_, err := placement.Schedule(snapshotOf(t, node("a", "GPU=8", "")), placement.Request{
		Bundles: bundles("GPU=1", "GPU=1"), PlacedBundles: map[int]placement.NodeID{0: "gone"},
	})
	if !errors.Is(err, placement.ErrUnknownNode) || err.Error() != "placed_bundles[0]: node gone: placement: node not in snapshot" {
		t.Errorf("placed bundle on an unknown node: %v", err)
	}
}

// ray-project/ray#35409: small groups scattered over every node block a later
// STRICT_PACK of a whole node. Best fit keeps whole nodes whole.
func TestSmallGroupsDoNotFragmentWholeNodes(t *testing.T) {
	snapshot := snapshotOf(t, node("a", "GPU=8 CPU=64", ""), node("b", "GPU=8 CPU=64", ""), node("c", "GPU=8 CPU=64", ""), node("d", "GPU=8 CPU=64", ""))
	small := placement.Request{Strategy: placement.StrategyPack, Bundles: bundles("GPU=1 CPU=4")}
	for i := range 8 {
		plan, err := placement.Schedule(snapshot, small)
		if err != nil {
			t.Fatalf("small group %d: %v", i, err)
		}
		if err := snapshot.Reserve(small.Bundles, plan); err != nil {
			t.Fatal(err)
		}
	}
	whole := placement.Request{Strategy: placement.StrategyStrictPack, Bundles: bundles("GPU=4 CPU=8", "GPU=4 CPU=8")}
	for i := range 3 {
		plan, err := placement.Schedule(snapshot, whole)
		if err != nil {
			t.Fatalf("whole-node group %d after 8 small groups: %v", i, err)
		}
		if err := snapshot.Reserve(whole.Bundles, plan); err != nil {
			t.Fatal(err)
		}
	}
}

func TestScheduleIsDeterministicAndBreaksTiesByNodeID(t *testing.T) {
	nodes := []placement.Node{node("c", "GPU=8", ""), node("a", "GPU=8", ""), node("b", "GPU=8", "")}
	request := placement.Request{Strategy: placement.StrategySpread, Bundles: bundles("GPU=1", "GPU=1")}
	first, err := placement.Schedule(snapshotOf(t, nodes...), request)
	if err != nil {
		t.Fatal(err)
	}
	want := placement.Plan{Placements: []placement.BundlePlacement{{BundleIndex: 0, NodeID: "a"}, {BundleIndex: 1, NodeID: "b"}}}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("plan = %+v, want %+v", first, want)
	}
	for range 20 {
		again, _ := placement.Schedule(snapshotOf(t, nodes[2], nodes[0], nodes[1]), request)
		if !reflect.DeepEqual(again, first) {
			t.Fatalf("decision changed: %+v then %+v", first, again)
		}
	}
	if id, ok := first.NodeOf(1); !ok || id != "b" {
		t.Errorf("NodeOf(1) = %v, %v", id, ok)
	}
}

func TestScheduleDoesNotModifyTheSnapshot(t *testing.T) {
	snapshot := snapshotOf(t, node("a", "GPU=8", "GPU=3"), node("b", "GPU=8", ""))
	before := snapshot.Nodes()
	for _, strategy := range []placement.Strategy{placement.StrategyPack, placement.StrategySpread, placement.StrategyStrictPack, placement.StrategyStrictSpread} {
		placement.Schedule(snapshot, placement.Request{Strategy: strategy, Bundles: bundles("GPU=2", "GPU=2")})
	}
	if after := snapshot.Nodes(); !reflect.DeepEqual(before, after) {
		t.Fatalf("Schedule changed the snapshot: %+v → %+v", before, after)
	}
}

func TestUnschedulableMessageGroupsNodesByWhatItShows(t *testing.T) {
	nodes := []placement.Node{node("a", "GPU=8", "GPU=1"), node("b", "GPU=4", "GPU=1"), node("c", "GPU=2", "GPU=1")}
	_, err := placement.Schedule(snapshotOf(t, nodes...), placement.Request{Bundles: bundles("GPU=2")})
	want := "not now: bundle 0 {GPU: 2} fits no node: 3 nodes (a, b, …): GPU available 1 < 2"
	if err == nil || err.Error() != want {
		t.Fatalf("message:\n got %v\nwant %s", err, want)
	}
}

func TestUnschedulableMessageSummarizesManyNodes(t *testing.T) {
	var nodes []placement.Node
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
		nodes = append(nodes, node(id, "GPU=8", ""))
	}
	nodes = append(nodes, draining(node("n6", "GPU=8", "")), dead(node("n7", "GPU=8", "")), node("n8", "GPU=2", ""), node("n9", "CPU=1", ""))
	_, err := placement.Schedule(snapshotOf(t, nodes...), placement.Request{Bundles: bundles("GPU=16")})
	want := "infeasible: bundle 0 {GPU: 16} fits no node: 5 nodes (n1, n2, …): GPU total 8 < 16; " +
		"node n6: draining; node n7: dead; 2 more nodes with other reasons"
	if err == nil || err.Error() != want {
		t.Fatalf("message:\n got %v\nwant %s", err, want)
	}
}
