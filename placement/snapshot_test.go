package placement_test

import (
	"errors"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	"github.com/raygo-dev/raygo/placement/placementsim"
)

func TestNewSnapshotRejectsInconsistentNodes(t *testing.T) {
	cases := []struct {
		name  string
		nodes []placement.Node
		want  string
	}{
		{"empty id", []placement.Node{{Alive: true}}, "nodes[0].id: must not be empty"},
		{"duplicate id", []placement.Node{node("a", "CPU=1", ""), node("b", "CPU=1", ""), node("a", "CPU=1", "")},
			"nodes[2].id: duplicate node id a (also nodes[0])"},
		{"available above total", []placement.Node{node("a", "GPU=8", "GPU=9")}, `nodes[0].available["GPU"]: 9 exceeds total 8`},
		{"available without total", []placement.Node{node("a", "GPU=8", "GPU=1 ssd=1")}, `nodes[0].available["ssd"]: 1 exceeds total 0`},
		{"negative total", []placement.Node{{ID: "a", Total: resources.Set{"GPU": -1}}},
			`nodes[0].total["GPU"]: amount must be a finite number >= 0, got -0.0001`},
		{"node-id label", []placement.Node{labeled(node("a", "CPU=1", ""), nodelabel.NodeID, "b")},
			`nodes[0].labels["ray.io/node-id"]: must equal the node id a, got "b"`},
	}
	for _, c := range cases {
		_, err := placement.NewSnapshot(c.nodes)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error = %v\nwant %s", c.name, err, c.want)
		}
		if !errors.Is(err, placement.ErrInvalidSnapshot) {
			t.Errorf("%s: error does not wrap ErrInvalidSnapshot", c.name)
		}
	}
}

func TestSnapshotCopiesAndSortsNodes(t *testing.T) {
	input := []placement.Node{node("b", "GPU=8 CPU=64", "GPU=2 CPU=64"), dead(node("a", "CPU=4", ""))}
	snapshot := snapshotOf(t, input...)
	input[0].Labels["zone"] = "changed later"
	input[0].Available["GPU"] = 0

	nodes := snapshot.Nodes()
	if len(nodes) != 2 || nodes[0].ID != "a" || nodes[1].ID != "b" || snapshot.NumNodes() != 2 {
		t.Fatalf("Nodes() = %+v, want a then b", nodes)
	}
	b, ok := snapshot.Node("b")
	if !ok || !b.Available.Equal(parseResources("GPU=2 CPU=64")) || b.Labels["zone"] != "" || !b.Alive {
		t.Fatalf("Node(b) = %+v: the snapshot must not share the caller's maps", b)
	}
	total, available := snapshot.ResourceSummary()
	if !total.Equal(parseResources("GPU=8 CPU=64")) || !available.Equal(parseResources("GPU=2 CPU=64")) {
		t.Errorf("ResourceSummary = %s, %s (dead node a must not count)", total, available)
	}
}

func TestReserveAndReleaseAreAllOrNothing(t *testing.T) {
	snapshot := snapshotOf(t, node("a", "GPU=8", "GPU=4"), node("b", "GPU=8", "GPU=1"), dead(node("c", "GPU=8", "")))
	group := bundles("GPU=2", "GPU=2", "GPU=1")
	plan := placement.Plan{Placements: []placement.BundlePlacement{{BundleIndex: 0, NodeID: "a"}, {BundleIndex: 1, NodeID: "a"}, {BundleIndex: 2, NodeID: "b"}}}
	if err := snapshot.Reserve(group, plan); err != nil {
		t.Fatal(err)
	}
	available := func(id placement.NodeID) resources.Amount { n, _ := snapshot.Node(id); return n.Available["GPU"] }
	if available("a") != 0 || available("b") != 0 {
		t.Fatalf("after Reserve: a=%s b=%s, want 0 and 0", available("a"), available("b"))
	}

	tooMuch := placement.Plan{Placements: []placement.BundlePlacement{{BundleIndex: 0, NodeID: "a"}}}
	if err := snapshot.Reserve(group, tooMuch); !errors.Is(err, placement.ErrInsufficientResources) ||
		err.Error() != "placement: insufficient resources: node a: GPU available 0 < 2" {
		t.Errorf("over-reserve error = %v", err)
	}
	onDead := placement.Plan{Placements: []placement.BundlePlacement{{BundleIndex: 2, NodeID: "c"}}}
	if err := snapshot.Reserve(group, onDead); !errors.Is(err, placement.ErrInsufficientResources) {
		t.Errorf("reserve on a dead node error = %v", err)
	}
	unknown := placement.Plan{Placements: []placement.BundlePlacement{{BundleIndex: 2, NodeID: "zz"}}}
	if err := snapshot.Reserve(group, unknown); !errors.Is(err, placement.ErrUnknownNode) {
		t.Errorf("reserve on an unknown node error = %v", err)
	}

	if err := snapshot.Release(group, plan); err != nil {
		t.Fatal(err)
	}
	if available("a") != 40000 || available("b") != 10000 {
		t.Fatalf("after Release: a=%s b=%s, want 4 and 1", available("a"), available("b"))
	}
	// Releasing bundle 0 and 1 again would exceed a's total: nothing changes.
	twice := placement.Plan{Placements: []placement.BundlePlacement{{BundleIndex: 0, NodeID: "a"}, {BundleIndex: 1, NodeID: "b"}}}
	if err := snapshot.Release(bundles("GPU=4", "GPU=8"), twice); !errors.Is(err, placement.ErrInsufficientResources) {
		t.Errorf("double release error = %v", err)
	}
	if available("a") != 40000 {
		t.Errorf("a failed Release changed node a: %s", available("a"))
	}
}

func TestMaxAvailableIsTheLargestFreeAmountOnAnUsableNode(t *testing.T) {
	cpu := func(n int64) resources.Set { return resources.Set{"CPU": resources.Amount(n) * resources.AmountScale} }
	snapshot, err := placement.NewSnapshot([]placement.Node{
		{ID: "a", Total: cpu(8), Available: cpu(3), Alive: true},
		{ID: "b", Total: cpu(8), Available: cpu(5), Alive: true},
		{ID: "c", Total: cpu(16), Available: cpu(16), Alive: true, Draining: true},
		{ID: "d", Total: cpu(16), Available: cpu(16), Alive: false},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := snapshot.MaxAvailable(); !got.Equal(cpu(5)) {
		t.Fatalf("MaxAvailable = %s, want {CPU: 5}: draining and dead nodes take nothing", got)
	}
}

// The quick test and the scheduler agree: on seeded streams over the default fleet kept
// nearly full, whenever CannotFitNow says a request cannot fit, Schedule fails too.
func TestCannotFitNowNeverRejectsWhatScheduleWouldPlace(t *testing.T) {
	rejected := 0
	for seed := range uint64(3) {
		fleet := placementsim.DefaultFleetConfig()
		fleet.Nodes, fleet.Seed = 200, seed+1
		snapshot, err := placementsim.NewFleetSnapshot(fleet)
		if err != nil {
			t.Fatal(err)
		}
		cluster := placementsim.NewCluster(snapshot)
		stream := placementsim.NewRequestStream(seed+7, fleet.Zones)
		for range 1500 {
			request := stream.Next()
			quick := placement.CannotFitNow(request, cluster.Snapshot().MaxAvailable())
			plan, err := placement.Schedule(cluster.Snapshot(), request)
			if quick {
				rejected++
				if err == nil {
					t.Fatalf("seed %d: CannotFitNow rejected a request Schedule placed: %+v", seed, request.Bundles)
				}
				continue
			}
			if err == nil {
				if _, err := cluster.Place(request, plan); err != nil {
					t.Fatal(err)
				}
			}
			// Keep the fleet nearly full: free the oldest groups past 95% of GPUs.
			for groups := cluster.Groups(); len(groups) > 0 && busyFraction(cluster.Snapshot()) > 0.95; groups = groups[1:] {
				if err := cluster.Remove(groups[0].ID); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if rejected < 10 {
		t.Fatalf("the streams exercised the quick rejection only %d times", rejected)
	}
}

func busyFraction(snapshot *placement.Snapshot) float64 {
	total, available := snapshot.ResourceSummary()
	return 1 - float64(available["GPU"])/float64(total["GPU"])
}
