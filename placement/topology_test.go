package placement_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// topologyCase is scheduleCase with the GPUs: where each bundle goes and, when wantGPUs
// is set, exactly which GPU indices it gets (bundles missing from wantGPUs must get
// none); or the failure.
type topologyCase struct {
	name     string
	nodes    []placement.Node
	request  placement.Request
	want     map[int]string
	wantGPUs map[int][]int
	// check runs further assertions on a successful plan.
	check       func(t *testing.T, plan placement.Plan)
	wantKind    placement.UnschedulableKind
	wantMessage string
	wantReasons map[placement.NodeID][]placement.ReasonCode
	wantIsland  int // UnschedulableError.IslandGPUs
}

func runTopologyCases(t *testing.T, cases []topologyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snapshot := snapshotOf(t, c.nodes...)
			plan, err := placement.Schedule(snapshot, c.request)
			if c.want != nil {
				if err != nil {
					t.Fatalf("Schedule failed: %v", err)
				}
				gotNodes, gotGPUs := map[int]string{}, map[int][]int{}
				for _, p := range plan.Placements {
					gotNodes[p.BundleIndex] = string(p.NodeID)
					if len(p.GPUIndices) > 0 {
						gotGPUs[p.BundleIndex] = p.GPUIndices
					}
					if len(p.GPUUUIDs) != len(p.GPUIndices) {
						t.Errorf("bundle %d: UUIDs %v do not match indices %v", p.BundleIndex, p.GPUUUIDs, p.GPUIndices)
					}
				}
				if !reflect.DeepEqual(gotNodes, c.want) {
					t.Fatalf("nodes = %v, want %v (GPUs %v)", gotNodes, c.want, gotGPUs)
				}
				if c.wantGPUs != nil && !reflect.DeepEqual(gotGPUs, c.wantGPUs) {
					t.Fatalf("GPUs = %v, want %v", gotGPUs, c.wantGPUs)
				}
				if c.check != nil {
					c.check(t, plan)
				}
				// The plan reserves and releases cleanly against the snapshot it came from.
				if err := snapshot.Reserve(c.request.Bundles, plan); err != nil {
					t.Fatalf("Reserve(plan): %v", err)
				}
				if err := snapshot.Release(c.request.Bundles, plan); err != nil {
					t.Fatalf("Release(plan): %v", err)
				}
				return
			}
			var unschedulable *placement.UnschedulableError
			if !errors.As(err, &unschedulable) {
				t.Fatalf("Schedule = %+v, %v; want an *UnschedulableError", plan, err)
			}
			if unschedulable.Kind != c.wantKind {
				t.Errorf("kind = %v, want %v (%v)", unschedulable.Kind, c.wantKind, err)
			}
			if c.wantMessage != "" && err.Error() != c.wantMessage {
				t.Errorf("message:\n got %s\nwant %s", err, c.wantMessage)
			}
			if unschedulable.IslandGPUs != c.wantIsland {
				t.Errorf("IslandGPUs = %d, want %d", unschedulable.IslandGPUs, c.wantIsland)
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

func strictPack(specs ...string) placement.Request {
	return placement.Request{Strategy: placement.StrategyStrictPack, Bundles: bundles(specs...)}
}

func repeatSpec(count int, spec string) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = spec
	}
	return out
}

func TestStrictPackKeepsWholeGPUsInOneNVLinkIsland(t *testing.T) {
	fourGPUs := strictPack(repeatSpec(4, "GPU=1")...)
	nodeTopology := fourGPUs
	nodeTopology.Topology = placement.TopologyNode
	runTopologyCases(t, []topologyCase{
		{
			name: "two GPUs on one NVLink pair, the pair with room for exactly them",
			// Pairs (0,1) and (2,3) have one GPU free each; Ray's lowest free GPUs would be
			// 1 and 3, joined only by PCIe.
			nodes:    []placement.Node{pciePairs("p", 0, 2)},
			request:  strictPack("GPU=1", "GPU=1"),
			want:     map[int]string{0: "p", 1: "p"},
			wantGPUs: map[int][]int{0: {4}, 1: {5}},
		},
		{
			name:     "a pair that fits exactly before a whole 8-GPU island",
			nodes:    []placement.Node{dgxH100("a"), pciePairs("b")},
			request:  strictPack("GPU=1 CPU=4", "GPU=1 CPU=4"),
			want:     map[int]string{0: "b", 1: "b"},
			wantGPUs: map[int][]int{0: {0}, 1: {1}},
		},
		{
			name:     "four GPUs need an island of four: the half-used DGX, not two pairs",
			nodes:    []placement.Node{pciePairs("a"), dgxH100("b", 0, 1, 2, 3)},
			request:  fourGPUs,
			want:     map[int]string{0: "b", 1: "b", 2: "b", 3: "b"},
			wantGPUs: map[int][]int{0: {4}, 1: {5}, 2: {6}, 3: {7}},
		},
		{
			name:     "CPU-only bundles go with the GPUs",
			nodes:    []placement.Node{pciePairs("a")},
			request:  strictPack("GPU=2", "CPU=16"),
			want:     map[int]string{0: "a", 1: "a"},
			wantGPUs: map[int][]int{0: {0, 1}},
		},
		{
			name:        "infeasible when no island could ever hold the GPUs, said plainly",
			nodes:       []placement.Node{pciePairs("a"), pciePairs("b")},
			request:     fourGPUs,
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: STRICT_PACK needs an NVLink island of 4 GPUs; the largest is 2, on nodes a, b: 2 nodes (a, b): largest NVLink island 2 GPUs < 4",
			wantReasons: map[placement.NodeID][]placement.ReasonCode{"a": {placement.ReasonNVLinkIslandTooSmall}},
			wantIsland:  4,
		},
		{
			name:        "not now when the island is busy",
			nodes:       []placement.Node{dgxH100("a", 0, 1, 2, 3, 4, 5), pciePairs("b")},
			request:     fourGPUs,
			wantKind:    placement.NotNow,
			wantMessage: "not now: STRICT_PACK needs an NVLink island of 4 free GPUs; the largest free is 2, on nodes a, b: node a: GPU available 2 < 4; node b: largest NVLink island 2 GPUs < 4",
			wantIsland:  4,
		},
		{
			name:        "not now when whole GPUs are free but shared by fractions",
			nodes:       []placement.Node{withGPUShares(dgxH100("a", 0, 1, 2, 3), 4, 0.5, 5, 0.5, 6, 0.5, 7, 0.5)},
			request:     strictPack("GPU=1", "GPU=1"),
			wantKind:    placement.NotNow,
			wantMessage: "not now: STRICT_PACK needs an NVLink island of 2 free GPUs; no island has a GPU free: node a: most free GPUs in one NVLink island 0 < 2",
			wantIsland:  2,
		},
		{
			name:     `topology "node" opts out: Ray's one node, spanning pairs`,
			nodes:    []placement.Node{pciePairs("a")},
			request:  nodeTopology,
			want:     map[int]string{0: "a", 1: "a", 2: "a", 3: "a"},
			wantGPUs: map[int][]int{0: {0}, 1: {1}, 2: {2}, 3: {3}},
		},
		{
			name: "no whole GPUs: one node as Ray, the fraction on the node's one free GPU",
			// b fits best; the fraction takes GPU 7, its only free one.
			nodes:    []placement.Node{pciePairs("a"), dgxH100("b", 0, 1, 2, 3, 4, 5, 6)},
			request:  strictPack("CPU=4", "GPU=0.5"),
			want:     map[int]string{0: "b", 1: "b"},
			wantGPUs: map[int][]int{1: {7}},
		},
		{
			name: "a node that does not list its GPUs counts as one island, as before topology",
			// a holds exactly 4 free GPUs (nothing left over); no GPU indices are chosen.
			nodes:   []placement.Node{node("a", "GPU=8 CPU=64", "GPU=4 CPU=64"), dgxH100("b")},
			request: fourGPUs,
			want:    map[int]string{0: "a", 1: "a", 2: "a", 3: "a"},
			check: func(t *testing.T, plan placement.Plan) {
				for _, p := range plan.Placements {
					if len(p.GPUIndices) != 0 {
						t.Errorf("bundle %d got GPU indices %v on a node that lists none", p.BundleIndex, p.GPUIndices)
					}
				}
			},
		},
	})
}

func TestStrictPackAcrossAMultiNodeNVLinkDomain(t *testing.T) {
	rack := []placement.Node{
		gb200Tray("t1", "rack-1", 0, 1), gb200Tray("t2", "rack-1"), gb200Tray("t3", "rack-1"),
		dgxH100("d", 0), // 7 free: too few for 8
	}
	eightAndACPU := strictPack(append(repeatSpec(8, "GPU=1"), "CPU=4")...)
	runTopologyCases(t, []topologyCase{
		{
			name:    "eight GPUs over two trays of one NVL72 rack, the CPU bundle beside them",
			nodes:   rack,
			request: eightAndACPU,
			want:    map[int]string{0: "t2", 1: "t2", 2: "t2", 3: "t2", 4: "t3", 5: "t3", 6: "t3", 7: "t3", 8: "t2"},
			wantGPUs: map[int][]int{
				0: {0}, 1: {1}, 2: {2}, 3: {3}, 4: {0}, 5: {1}, 6: {2}, 7: {3},
			},
		},
		{
			name:    "a group that fits one tray stays on it",
			nodes:   rack,
			request: strictPack("GPU=2", "GPU=2"),
			// Best fit at the island level: the 7-GPU DGX island would keep 3 free, the
			// 10-GPU domain 6, so the DGX wins.
			want: map[int]string{0: "d", 1: "d"},
		},
		{
			name:        "infeasible when the domain is too small",
			nodes:       []placement.Node{gb200Tray("t1", "rack-1"), gb200Tray("t2", "rack-1")},
			request:     strictPack(repeatSpec(12, "GPU=1")...),
			wantKind:    placement.Infeasible,
			wantMessage: "infeasible: STRICT_PACK needs an NVLink island of 12 GPUs; the largest is 8, on nodes t1, t2: 2 nodes (t1, t2): largest NVLink island 8 GPUs < 12",
			wantIsland:  12,
		},
		{
			name:  "rescheduling: lost bundles go to the domain's other trays only",
			nodes: []placement.Node{gb200Tray("t1", "rack-1", 0, 1, 2, 3), gb200Tray("t2", "rack-1"), dgxH100("d")},
			request: placement.Request{
				Strategy:      placement.StrategyStrictPack,
				Bundles:       bundles("GPU=4", "GPU=4"),
				PlacedBundles: map[int]placement.NodeID{0: "t1"},
			},
			want:     map[int]string{1: "t2"},
			wantGPUs: map[int][]int{1: {0, 1, 2, 3}},
		},
		{
			name:  "rescheduling: not now while the domain is full, other nodes named as outside it",
			nodes: []placement.Node{gb200Tray("t1", "rack-1", 0, 1, 2, 3), gb200Tray("t2", "rack-1", 0, 1, 2, 3), dgxH100("d")},
			request: placement.Request{
				Strategy:      placement.StrategyStrictPack,
				Bundles:       bundles("GPU=4", "GPU=4"),
				PlacedBundles: map[int]placement.NodeID{0: "t1"},
			},
			wantKind: placement.NotNow,
			wantReasons: map[placement.NodeID][]placement.ReasonCode{
				"d":  {placement.ReasonNotGroupDomain},
				"t2": {placement.ReasonNVLinkIslandBusy},
			},
			wantIsland: 4,
		},
	})

	_, err := placement.Schedule(snapshotOf(t, rack...), placement.Request{
		Strategy:      placement.StrategyStrictPack,
		Bundles:       bundles("GPU=1", "GPU=1"),
		PlacedBundles: map[int]placement.NodeID{0: "t1", 1: "d"},
	})
	want := "placed_bundles[1]: STRICT_PACK bundles must share one node or one NVLink domain, bundle 0 is on node t1 and this one on node d"
	if !errors.Is(err, placement.ErrInvalidPlacedBundles) || err.Error() != want {
		t.Errorf("placed bundles outside one domain: %v\nwant %s", err, want)
	}
}

func TestPackFillsIslandsBeforeSpilling(t *testing.T) {
	pack := func(specs ...string) placement.Request {
		return placement.Request{Strategy: placement.StrategyPack, Bundles: bundles(specs...)}
	}
	runTopologyCases(t, []topologyCase{
		{
			name:     "one island that holds the group",
			nodes:    []placement.Node{pciePairs("a"), dgxH100("b", 0, 1, 2, 3, 4)},
			request:  pack("GPU=1", "GPU=1", "GPU=1"),
			want:     map[int]string{0: "b", 1: "b", 2: "b"},
			wantGPUs: map[int][]int{0: {5}, 1: {6}, 2: {7}},
		},
		{
			// No island holds 4. Best fit alone would take a (5 free GPUs, one in each
			// pair); b holds the group in two whole pairs.
			name:     "else the node where the group spans the fewest islands",
			nodes:    []placement.Node{pciePairs("a", 1, 3, 5), pciePairs("b", 0, 1)},
			request:  pack(repeatSpec(4, "GPU=1")...),
			want:     map[int]string{0: "b", 1: "b", 2: "b", 3: "b"},
			wantGPUs: map[int][]int{0: {2}, 1: {3}, 2: {4}, 3: {5}},
		},
		{
			name:    "else spill over the fewest nodes",
			nodes:   []placement.Node{dgxH100("a"), dgxH100("b"), dgxH100("c", 0, 1, 2, 3)},
			request: pack(repeatSpec(12, "GPU=1")...),
			want: map[int]string{0: "a", 1: "a", 2: "a", 3: "a", 4: "a", 5: "a", 6: "a", 7: "a",
				8: "c", 9: "c", 10: "c", 11: "c"},
		},
	})
}

func TestSpreadIsRailAlignedInTheFewestScalableUnits(t *testing.T) {
	spread := func(strategy placement.Strategy, specs ...string) placement.Request {
		return placement.Request{Strategy: strategy, Bundles: bundles(specs...)}
	}
	sameRailsEverywhere := func(t *testing.T, plan placement.Plan) {
		for _, p := range plan.Placements[1:] {
			if !reflect.DeepEqual(p.GPUIndices, plan.Placements[0].GPUIndices) {
				t.Errorf("not rail-aligned: %+v", plan.Placements)
			}
		}
	}
	runTopologyCases(t, []topologyCase{
		{
			// Lowest free GPUs would be 2, 1, 0 and 4: four rails.
			name:     "one GPU per node, on the same rail everywhere",
			nodes:    []placement.Node{dgxH100("a", 0, 1), dgxH100("b", 0, 2), dgxH100("c", 1, 3), dgxH100("d", 0, 1, 2, 3)},
			request:  spread(placement.StrategySpread, repeatSpec(4, "GPU=1")...),
			want:     map[int]string{0: "d", 1: "a", 2: "b", 3: "c"},
			wantGPUs: map[int][]int{0: {4}, 1: {4}, 2: {4}, 3: {4}},
		},
		{
			name:    "two GPUs per node, on the same pair of rails everywhere",
			nodes:   []placement.Node{dgxH100("a", 0), dgxH100("b", 7), dgxH100("c", 2, 3)},
			request: spread(placement.StrategyStrictSpread, repeatSpec(3, "GPU=2")...),
			// c first: its island has the fewest free GPUs.
			want:  map[int]string{0: "c", 1: "a", 2: "b"},
			check: sameRailsEverywhere,
		},
		{
			name:     "bundles sharing a node take distinct rails, aligned round by round",
			nodes:    []placement.Node{dgxH100("a"), dgxH100("b")},
			request:  spread(placement.StrategySpread, repeatSpec(4, "GPU=1")...),
			want:     map[int]string{0: "a", 1: "b", 2: "a", 3: "b"},
			wantGPUs: map[int][]int{0: {0}, 1: {0}, 2: {1}, 3: {1}},
		},
		{
			name:     "fractions sharing a node take distinct rails",
			nodes:    []placement.Node{dgxH100("a")},
			request:  spread(placement.StrategySpread, "GPU=0.25", "GPU=0.25"),
			want:     map[int]string{0: "a", 1: "a"},
			wantGPUs: map[int][]int{0: {0}, 1: {1}},
		},
		{
			// Best fit alone would take a1 and b1 (two GPUs free each): two units.
			name:    "fewest scalable units: one unit, breaking no whole island",
			nodes:   oneUnitWithRoom(),
			request: spread(placement.StrategySpread, "GPU=1", "GPU=1"),
			want:    map[int]string{0: "b1", 1: "b2"},
			check:   sameRailsEverywhere,
		},
		{
			// Best fit alone would take b1 (one GPU free) with a1 and a2: two units.
			name: "fewest scalable units before best fit",
			nodes: []placement.Node{
				inUnit(dgxH100("a1", 0, 1, 2, 3, 4, 5), "su-1"), inUnit(dgxH100("a2", 0, 1, 2, 3, 4, 5), "su-1"), inUnit(dgxH100("a3"), "su-1"),
				inUnit(dgxH100("b1", 0, 1, 2, 3, 4, 5, 6), "su-2"),
			},
			request: spread(placement.StrategyStrictSpread, "GPU=1", "GPU=1", "GPU=1"),
			want:    map[int]string{0: "a1", 1: "a2", 2: "a3"},
			check:   sameRailsEverywhere,
		},
		{
			// Both units hold the two without breaking a whole node; su-2 has more partly
			// used nodes (best fit alone would take su-1, the first of two the same size).
			name:    "one-GPU bundles go to the unit where partly used nodes gather",
			nodes:   partlyUsedUnits(),
			request: spread(placement.StrategySpread, "GPU=1", "GPU=1"),
			want:    map[int]string{0: "b1", 1: "b2"},
			check:   sameRailsEverywhere,
		},
		{
			// Best fit alone would take su-2, the unit with fewer whole nodes.
			name:    "whole-node bundles keep out of the unit where partly used nodes gather",
			nodes:   partlyUsedUnits(),
			request: spread(placement.StrategyStrictSpread, "GPU=8", "GPU=8"),
			want:    map[int]string{0: "a3", 1: "a4"},
		},
		{
			name: "spills into a second unit only when one is not enough",
			nodes: []placement.Node{
				inUnit(dgxH100("a1"), "su-1"), inUnit(dgxH100("a2"), "su-1"),
				inUnit(dgxH100("b1"), "su-2"), inUnit(dgxH100("b2"), "su-2"), inUnit(dgxH100("b3"), "su-2"),
			},
			request: spread(placement.StrategyStrictSpread, repeatSpec(4, "GPU=8")...),
			// Two units either way; within them, best fit (a tie: the lower ids).
			want: map[int]string{0: "a1", 1: "a2", 2: "b1", 3: "b2"},
		},
		{
			name: "a second unit is not chosen while one has room",
			nodes: []placement.Node{
				inUnit(dgxH100("a1"), "su-1"), inUnit(dgxH100("a2"), "su-1"),
				inUnit(dgxH100("b1"), "su-2"), inUnit(dgxH100("b2"), "su-2"), inUnit(dgxH100("b3"), "su-2"),
			},
			request: spread(placement.StrategyStrictSpread, repeatSpec(3, "GPU=8")...),
			want:    map[int]string{0: "b1", 1: "b2", 2: "b3"},
		},
		{
			name: "rail numbers are labels, not positions",
			nodes: func() []placement.Node {
				a, b := dgxH100("a", 0), dgxH100("b", 1)
				for i := range a.GPUs {
					a.GPUs[i].Rail, b.GPUs[i].Rail = 900-100*i, 900-100*i // GPU 7 on rail 200
				}
				return []placement.Node{a, b}
			}(),
			request: spread(placement.StrategyStrictSpread, "GPU=1", "GPU=1"),
			want:    map[int]string{0: "a", 1: "b"},
			// Rails 200-700 are free on both; the lowest rail number is GPU 7's.
			wantGPUs: map[int][]int{0: {7}, 1: {7}},
		},
		{
			// Both have 4 free GPUs; on a they are one per pair, on b one island. The
			// target rails are the most free ones, 5 and 7.
			name:     "a multi-GPU bundle on a node where it stays in one island",
			nodes:    []placement.Node{pciePairs("a", 0, 2, 4, 6), dgxH100("b", 0, 1, 2, 3)},
			request:  spread(placement.StrategySpread, "GPU=2"),
			want:     map[int]string{0: "b"},
			wantGPUs: map[int][]int{0: {5, 7}},
		},
	})
}

// Topology "node" is Ray's meaning of each strategy: the same groups as the topology
// cases above, placed by best fit alone.
func TestNodeTopologyPlacesByNodesAlone(t *testing.T) {
	byNodes := func(strategy placement.Strategy, specs ...string) placement.Request {
		return placement.Request{Strategy: strategy, Bundles: bundles(specs...), Topology: placement.TopologyNode}
	}
	runTopologyCases(t, []topologyCase{
		{
			// With GPU topology: rail 4 on every node.
			name:     "SPREAD takes no target rail: each node's lowest free GPU",
			nodes:    []placement.Node{dgxH100("a", 0, 1), dgxH100("b", 0, 2), dgxH100("c", 1, 3), dgxH100("d", 0, 1, 2, 3)},
			request:  byNodes(placement.StrategySpread, repeatSpec(4, "GPU=1")...),
			want:     map[int]string{0: "d", 1: "a", 2: "b", 3: "c"},
			wantGPUs: map[int][]int{0: {4}, 1: {2}, 2: {1}, 3: {0}},
		},
		{
			// With GPU topology: b1 and b2, one unit.
			name:    "SPREAD prefers no scalable unit",
			nodes:   oneUnitWithRoom(),
			request: byNodes(placement.StrategySpread, "GPU=1", "GPU=1"),
			want:    map[int]string{0: "a1", 1: "b1"},
		},
		{
			// With GPU topology: b, where the group spans two whole NVLink pairs.
			name:    "PACK does not fill NVLink islands first",
			nodes:   []placement.Node{pciePairs("a", 1, 3, 5), pciePairs("b", 0, 1)},
			request: byNodes(placement.StrategyPack, repeatSpec(4, "GPU=1")...),
			want:    map[int]string{0: "a", 1: "a", 2: "a", 3: "a"},
		},
	})
}

func TestFractionalGPUsShareOneGPU(t *testing.T) {
	pack := func(specs ...string) placement.Request {
		return placement.Request{Strategy: placement.StrategyPack, Bundles: bundles(specs...)}
	}
	runTopologyCases(t, []topologyCase{
		{
			name:     "two halves share one GPU",
			nodes:    []placement.Node{dgxH100("a")},
			request:  pack("GPU=0.5", "GPU=0.5"),
			want:     map[int]string{0: "a", 1: "a"},
			wantGPUs: map[int][]int{0: {0}, 1: {0}},
		},
		{
			name:     "the partly used GPU with the least room that fits",
			nodes:    []placement.Node{withGPUShares(dgxH100("a", 2, 3, 4, 5, 6, 7), 0, 0.6, 1, 0.3)},
			request:  pack("GPU=0.25"),
			want:     map[int]string{0: "a"},
			wantGPUs: map[int][]int{0: {1}},
		},
		{
			name:     "fractions that do not fit together take separate GPUs",
			nodes:    []placement.Node{dgxH100("a")},
			request:  pack("GPU=0.6", "GPU=0.6", "GPU=0.4"),
			want:     map[int]string{0: "a", 1: "a", 2: "a"},
			wantGPUs: map[int][]int{0: {0}, 1: {1}, 2: {0}},
		},
		{
			name:     "a fraction on a pair, not on a whole 8-GPU island",
			nodes:    []placement.Node{gpuNode("a", 8, func(i int) int { return min(i, 1) })}, // GPU 0 alone, 1-7 one island
			request:  pack("GPU=0.5"),
			want:     map[int]string{0: "a"},
			wantGPUs: map[int][]int{0: {0}},
		},
		{
			name:        "a whole GPU is never a shared one",
			nodes:       []placement.Node{withGPUShares(dgxH100("a", 2, 3, 4, 5, 6, 7), 0, 0.5, 1, 0.5)},
			request:     pack("GPU=1"),
			wantKind:    placement.NotNow,
			wantMessage: "not now: bundle 0 {GPU: 1} fits no node: node a: wholly free GPUs 0 < 1",
		},
		{
			name:        "a fraction needs its amount free on one GPU",
			nodes:       []placement.Node{withGPUShares(dgxH100("a", 2, 3, 4, 5, 6, 7), 0, 0.3, 1, 0.3)},
			request:     pack("GPU=0.5"),
			wantKind:    placement.NotNow,
			wantMessage: "not now: bundle 0 {GPU: 0.5} fits no node: node a: most free on one GPU 0.3 < 0.5",
		},
	})
}

func TestSnapshotChecksGPUs(t *testing.T) {
	withGPUs := func(mutate func(*placement.Node)) []placement.Node {
		n := dgxH100("a")
		mutate(&n)
		return []placement.Node{n}
	}
	cases := []struct {
		name  string
		nodes []placement.Node
		want  string
	}{
		{"count", withGPUs(func(n *placement.Node) { n.GPUs = n.GPUs[:4] }), "nodes[0].gpus: 4 GPUs listed, but total GPU is 8"},
		{"duplicate index", withGPUs(func(n *placement.Node) { n.GPUs[3].Index = 1 }), "nodes[0].gpus[3].index: duplicate GPU index 1 (also gpus[1])"},
		{"negative index", withGPUs(func(n *placement.Node) { n.GPUs[0].Index = -1 }), "nodes[0].gpus[0].index: must be >= 0, got -1"},
		{"island", withGPUs(func(n *placement.Node) { n.GPUs[2].NVLinkIsland = -2 }), "nodes[0].gpus[2].nvlink_island: must be -1 (no NVLink peer) or >= 0, got -2"},
		{"rail", withGPUs(func(n *placement.Node) { n.GPUs[2].Rail = -3 }), "nodes[0].gpus[2].rail: must be -1 (unknown) or >= 0, got -3"},
		{"available", withGPUs(func(n *placement.Node) { n.GPUs[2].Available = 2 * resources.AmountScale }), "nodes[0].gpus[2].available: must be 0..1, got 2"},
		{"too many", []placement.Node{gpuNode("big", placement.MaxGPUsPerNode+1, func(int) int { return 0 })}, "nodes[0].gpus: at most 64 GPUs per node, got 65"},
	}
	for _, c := range cases {
		_, err := placement.NewSnapshot(c.nodes)
		if err == nil || err.Error() != c.want || !errors.Is(err, placement.ErrInvalidSnapshot) {
			t.Errorf("%s: error = %v\nwant %s", c.name, err, c.want)
		}
	}

	// Nodes() returns the GPUs as given, in index order, with what is free.
	input := pciePairs("p", 3)
	input.GPUs[0], input.GPUs[7] = input.GPUs[7], input.GPUs[0]
	got, _ := snapshotOf(t, input).Node("p")
	if len(got.GPUs) != 8 || got.GPUs[0].Index != 0 || got.GPUs[7].NVLinkIsland != 3 || got.GPUs[3].Available != 0 || got.GPUs[7].UUID != "GPU-p-7" {
		t.Errorf("Node(p).GPUs = %+v", got.GPUs)
	}
}

func TestReserveAndReleaseAccountGPUs(t *testing.T) {
	snapshot := snapshotOf(t, dgxH100("a"), node("c", "GPU=8", ""))
	group := bundles("GPU=2", "GPU=0.5", "GPU=0.5", "CPU=1")
	plan := placement.Plan{Placements: []placement.BundlePlacement{
		{BundleIndex: 0, NodeID: "a", GPUIndices: []int{0, 1}},
		{BundleIndex: 1, NodeID: "a", GPUIndices: []int{2}},
		{BundleIndex: 2, NodeID: "a", GPUIndices: []int{2}},
		{BundleIndex: 3, NodeID: "a"},
	}}
	if err := snapshot.Reserve(group, plan); err != nil {
		t.Fatal(err)
	}
	free := func() []resources.Amount {
		a, _ := snapshot.Node("a")
		var out []resources.Amount
		for _, gpu := range a.GPUs[:4] {
			out = append(out, gpu.Available)
		}
		return out
	}
	if got := free(); !reflect.DeepEqual(got, []resources.Amount{0, 0, 0, resources.AmountScale}) {
		t.Fatalf("after Reserve, GPUs 0-3 free %v", got)
	}

	errorCases := []struct {
		name     string
		bundles  []resources.Set
		place    placement.BundlePlacement
		sentinel error
		want     string
	}{
		{"a whole GPU held by fractions", bundles("GPU=1"), placement.BundlePlacement{NodeID: "a", GPUIndices: []int{2}},
			placement.ErrInsufficientResources, "placement: insufficient resources: node a: GPU 2 available 0 < 1"},
		{"too few indices", bundles("GPU=2"), placement.BundlePlacement{NodeID: "a", GPUIndices: []int{5}},
			placement.ErrInvalidGPUAssignment, "placement: invalid GPU assignment: bundle 0 asks 2 GPU on node a, which lists its GPUs: want 2 GPU indices, the plan gives [5]"},
		{"an index twice", bundles("GPU=2"), placement.BundlePlacement{NodeID: "a", GPUIndices: []int{5, 5}},
			placement.ErrInvalidGPUAssignment, "placement: invalid GPU assignment: bundle 0 lists GPU 5 twice"},
		{"an unknown GPU", bundles("GPU=1"), placement.BundlePlacement{NodeID: "a", GPUIndices: []int{8}},
			placement.ErrInvalidGPUAssignment, "placement: invalid GPU assignment: bundle 0: node a has no GPU 8"},
		{"indices on a node that lists none", bundles("GPU=1"), placement.BundlePlacement{NodeID: "c", GPUIndices: []int{0}},
			placement.ErrInvalidGPUAssignment, "placement: invalid GPU assignment: bundle 0 asks 1 GPU on node c, which lists no GPUs: want 0 GPU indices, the plan gives [0]"},
	}
	for _, c := range errorCases {
		err := snapshot.Reserve(c.bundles, placement.Plan{Placements: []placement.BundlePlacement{c.place}})
		if !errors.Is(err, c.sentinel) || err.Error() != c.want {
			t.Errorf("%s: Reserve error = %v\nwant %s", c.name, err, c.want)
		}
	}
	if got := free(); !reflect.DeepEqual(got, []resources.Amount{0, 0, 0, resources.AmountScale}) {
		t.Fatalf("a failed Reserve changed the GPUs: %v", got)
	}

	if err := snapshot.Release(group, plan); err != nil {
		t.Fatal(err)
	}
	if got := free(); !reflect.DeepEqual(got, []resources.Amount{resources.AmountScale, resources.AmountScale, resources.AmountScale, resources.AmountScale}) {
		t.Fatalf("after Release, GPUs 0-3 free %v", got)
	}
	err := snapshot.Release(group[:1], placement.Plan{Placements: plan.Placements[:1]})
	if !errors.Is(err, placement.ErrInsufficientResources) || !strings.Contains(err.Error(), "released twice?") {
		t.Errorf("double release: %v", err)
	}
}

// oneUnitWithRoom is two scalable units of DGX H100 nodes: su-1 with a1 (two GPUs free)
// and an idle a2, su-2 with b1 and b2 (two GPUs free each). Two one-GPU bundles fit su-2
// without breaking a whole node; best fit alone takes a1 and b1.
func oneUnitWithRoom() []placement.Node {
	return []placement.Node{
		inUnit(dgxH100("a1", 0, 1, 2, 3, 4, 5), "su-1"), inUnit(dgxH100("a2"), "su-1"),
		inUnit(dgxH100("b1", 0, 1, 2, 3, 4, 5), "su-2"), inUnit(dgxH100("b2", 0, 1, 2, 3, 4, 5), "su-2"),
	}
}

// partlyUsedUnits is two scalable units of DGX H100 nodes: su-1 with two partly used
// nodes (GPU 0 taken) and four idle ones, su-2 with three partly used and three idle.
func partlyUsedUnits() []placement.Node {
	var nodes []placement.Node
	for _, unit := range []struct {
		name, prefix string
		partly       int
	}{{"su-1", "a", 2}, {"su-2", "b", 3}} {
		for i := range 6 {
			var used []int
			if i < unit.partly {
				used = []int{0}
			}
			nodes = append(nodes, inUnit(dgxH100(unit.prefix+string(rune('1'+i)), used...), unit.name))
		}
	}
	return nodes
}
