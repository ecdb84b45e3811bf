package placement_test

import (
	"errors"
	"testing"

	"github.com/raygo-dev/raygo/placement"
)

func TestEstimateAllReduce(t *testing.T) {
	snapshot := snapshotOf(t,
		inUnit(dgxH100("d1"), "su-1"), inUnit(dgxH100("d2"), "su-1"), inUnit(dgxH100("d3"), "su-2"),
		inUnit(pciePairs("p"), "su-1"), dgxH100("unlabeled"),
		inUnit(gb200Tray("t1", "rack-1"), "su-1"), inUnit(gb200Tray("t2", "rack-1"), "su-1"),
	)
	on := func(node string, gpus ...int) placement.BundlePlacement {
		return placement.BundlePlacement{NodeID: placement.NodeID(node), GPUIndices: gpus}
	}
	cases := []struct {
		name       string
		placements []placement.BundlePlacement
		gpus       int
		gbps       float64
		bottleneck placement.LinkClass
	}{
		{"one NVSwitch island", []placement.BundlePlacement{on("d1", 0, 1, 2, 3), on("d1", 4, 5, 6, 7)}, 8, 450, placement.LinkNVLink},
		{"an NVLink bridge pair", []placement.BundlePlacement{on("p", 2), on("p", 3)}, 2, 300, placement.LinkNVLink},
		{"two pairs of one node meet over PCIe", []placement.BundlePlacement{on("p", 0, 1), on("p", 2, 3)}, 4, 32, placement.LinkPCIe},
		{"an NVL72 domain across trays", []placement.BundlePlacement{on("t1", 0, 1, 2, 3), on("t2", 0, 1, 2, 3)}, 8, 900, placement.LinkNVLink},
		{"two nodes of one unit on the same rails", []placement.BundlePlacement{on("d1", 2, 5), on("d2", 2, 5)}, 4, 50, placement.LinkRail},
		{"two nodes of one unit on different rails", []placement.BundlePlacement{on("d1", 2), on("d2", 3)}, 2, 25, placement.LinkCrossRail},
		{"two units, aligned: a spine hop", []placement.BundlePlacement{on("d1", 2), on("d3", 2)}, 2, 25, placement.LinkSpine},
		{"a node without a unit label: assume the spine", []placement.BundlePlacement{on("d1", 0), on("unlabeled", 0)}, 2, 25, placement.LinkSpine},
		{"whole nodes: 8 rings, one per rail", []placement.BundlePlacement{on("d1", 0, 1, 2, 3, 4, 5, 6, 7), on("d2", 0, 1, 2, 3, 4, 5, 6, 7)}, 16, 50, placement.LinkRail},
		{"the slowest hop wins: PCIe inside a node beats the rail", []placement.BundlePlacement{on("p", 0, 2), on("d1", 0, 2)}, 4, 32, placement.LinkPCIe},
		{"one GPU: no collective", []placement.BundlePlacement{on("d1", 0)}, 1, 0, placement.LinkNone},
		{"a GPU shared by fractions counts once", []placement.BundlePlacement{on("d1", 0), on("d1", 0)}, 1, 0, placement.LinkNone},
		{"bundles without GPU indices add none", []placement.BundlePlacement{on("d1"), on("d2", 1)}, 1, 0, placement.LinkNone},
	}
	for _, c := range cases {
		got, err := placement.EstimateAllReduce(snapshot, c.placements, placement.DefaultFabricModel())
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.GPUs != c.gpus || got.BusGBps != c.gbps || got.Bottleneck != c.bottleneck {
			t.Errorf("%s: got %v, want %d GPUs, %v GB/s (%s)", c.name, got, c.gpus, c.gbps, c.bottleneck)
		}
	}

	if _, err := placement.EstimateAllReduce(snapshot, []placement.BundlePlacement{on("gone", 0)}, placement.DefaultFabricModel()); !errors.Is(err, placement.ErrUnknownNode) {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := placement.EstimateAllReduce(snapshot, []placement.BundlePlacement{on("d1", 9)}, placement.DefaultFabricModel()); !errors.Is(err, placement.ErrInvalidGPUAssignment) {
		t.Errorf("unknown GPU: %v", err)
	}
	model := placement.DefaultFabricModel()
	model.SpineFactor = 1.5
	if err := model.Validate(); err == nil || err.Error() != "placement: fabric model spine_factor: must be in (0, 1], got 1.5" {
		t.Errorf("Validate: %v", err)
	}
	model = placement.DefaultFabricModel()
	model.RailGBps = 0
	if _, err := placement.EstimateAllReduce(snapshot, nil, model); err == nil || err.Error() != "placement: fabric model rail_gbps: must be > 0, got 0" {
		t.Errorf("EstimateAllReduce with an invalid model: %v", err)
	}
}

// What the scheduler chooses, the model rewards: a rail-aligned SPREAD in one unit keeps
// the full NIC bandwidth where Ray's lowest free GPUs would cross rails.
func TestScheduledPlacementsEstimate(t *testing.T) {
	snapshot := snapshotOf(t, inUnit(dgxH100("a", 0, 1), "su-1"), inUnit(dgxH100("b", 0, 2), "su-1"), inUnit(dgxH100("c", 1, 3), "su-1"))
	plan, err := placement.Schedule(snapshot, placement.Request{Strategy: placement.StrategySpread, Bundles: bundles("GPU=1", "GPU=1", "GPU=1")})
	if err != nil {
		t.Fatal(err)
	}
	aware, err := placement.EstimateAllReduce(snapshot, plan.Placements, placement.DefaultFabricModel())
	if err != nil || aware.BusGBps != 50 || aware.Bottleneck != placement.LinkRail {
		t.Fatalf("scheduled SPREAD: %v, %v; want 50 GB/s on one rail", aware, err)
	}
	lowestFree := []placement.BundlePlacement{
		{BundleIndex: 0, NodeID: "a", GPUIndices: []int{2}}, {BundleIndex: 1, NodeID: "b", GPUIndices: []int{1}}, {BundleIndex: 2, NodeID: "c", GPUIndices: []int{0}},
	}
	if blind, _ := placement.EstimateAllReduce(snapshot, lowestFree, placement.DefaultFabricModel()); blind.BusGBps != 25 || blind.Bottleneck != placement.LinkCrossRail {
		t.Fatalf("lowest free GPUs: %v; want 25 GB/s across rails", blind)
	}
}
