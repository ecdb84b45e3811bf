package gcs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Unit tests of the incremental scheduler: shapes, parking and waking, the kept view of
// the cluster, bounded reasons. They use the two-phase fixture's 4-CPU nodes.

// createBundles makes a detached group of the given bundles.
func (f *twoPhaseFixture) createBundles(strategy string, bundles ...map[string]float64) string {
	f.t.Helper()
	req := &pb.CreatePlacementGroupRequest{Strategy: strategy, Lifetime: lifetimeDetached}
	for _, b := range bundles {
		req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: b})
	}
	reply, err := f.m.CreatePlacementGroup(context.Background(), req)
	if err != nil {
		f.t.Fatal(err)
	}
	return reply.PlacementGroup.PlacementGroupId
}

// attempts runs one round and returns how many decisions it made.
func (f *twoPhaseFixture) attempts() int {
	f.t.Helper()
	_, n := f.m.scheduleRound()
	return n
}

// settle waits until no two-phase commit runs, then runs a round so the loop has taken
// in every release.
func (f *twoPhaseFixture) settle() {
	f.t.Helper()
	poll.Until(f.t, 10*time.Second, time.Millisecond, "no two-phase commit running", func() error {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		for _, e := range f.m.groups {
			if e.inFlight != nil || e.info.State == pb.PlacementGroupState_PREPARED {
				return fmt.Errorf("group %s %v", e.info.PlacementGroupId[:8], e.info.State)
			}
		}
		for _, e := range f.m.removed {
			if e.cancelling || e.inFlight != nil {
				return fmt.Errorf("group %s cancelling", e.info.PlacementGroupId[:8])
			}
		}
		return nil
	})
	f.m.scheduleRound()
}

func cpu(n float64) map[string]float64 { return map[string]float64{"CPU": n} }

func TestIdenticalPendingGroupsShareOneAttemptAndWaitForAChangeThatHelps(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	full := f.createBundles("PACK", cpu(4))
	f.round()
	f.checkCreatedIsWhole(full)

	var waiting []string
	for range 5 {
		waiting = append(waiting, f.createBundles("PACK", cpu(1)))
	}
	if got := f.attempts(); got != 1 {
		t.Fatalf("5 identical groups that cannot fit: %d decisions, want 1 for the shape", got)
	}
	for _, id := range waiting {
		info := f.m.info(id)
		if info.PendingReasonCode != string(pending.NoResources) || info.PendingReason == "" || info.Stats.SchedulingState != pb.SchedulingState_NO_RESOURCES {
			t.Fatalf("group %s: code %q reason %q state %v, want NoResources with a reason", id[:8], info.PendingReasonCode, info.PendingReason, info.Stats.SchedulingState)
		}
	}
	if got := f.attempts(); got != 0 {
		t.Fatalf("nothing changed: %d decisions, want 0 (the shape is parked)", got)
	}

	// A new group of another shape is tried at once; the parked shape is not.
	other := f.createBundles("PACK", cpu(2))
	if got := f.attempts(); got != 1 {
		t.Fatalf("a new shape: %d decisions, want 1", got)
	}
	if f.m.info(other).PendingReasonCode != string(pending.NoResources) {
		t.Fatalf("the new shape should wait too: %+v", f.m.info(other))
	}

	// Removing the full group frees node a: the waiting groups are placed in arrival
	// order, as many as fit (4 one-CPU groups), and the two-CPU group waits.
	if err := f.m.remove(full, removedByOwner); err != nil {
		t.Fatal(err)
	}
	f.settle()
	for _, id := range waiting[:4] {
		f.checkCreatedIsWhole(id)
	}
	if info := f.m.info(waiting[4]); info.State != pb.PlacementGroupState_PENDING {
		t.Fatalf("the fifth one-CPU group: %v, want PENDING (node a is full)", info.State)
	}
}

func TestAParkedShapeWakesOnlyForANodeThatCouldHoldIt(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	gpu := f.createBundles("PACK", map[string]float64{"GPU": 1})
	big := f.createBundles("PACK", cpu(8))
	if got := f.attempts(); got != 2 {
		t.Fatalf("%d decisions, want 2", got)
	}
	if code := f.m.info(gpu).PendingReasonCode; code != string(pending.Infeasible) {
		t.Fatalf("GPU group on CPU-only nodes: code %q, want Infeasible", code)
	}
	// A 4-CPU node joins: it can hold neither a GPU bundle nor 8 CPUs.
	f.nodes.mu.Lock()
	f.nodes.alive = append(f.nodes.alive, "b")
	f.nodes.mu.Unlock()
	f.m.onNodeRegistered(nil)
	if got := f.attempts(); got != 0 {
		t.Fatalf("a node that cannot help: %d decisions, want 0", got)
	}
	// A one-CPU shape is woken by the same kind of join.
	small := f.createBundles("PACK", cpu(1))
	f.round()
	f.checkCreatedIsWhole(small)
	_ = big
}

func TestAPendingRowStaysSmallWhateverTheClusterSize(t *testing.T) {
	var ids []string
	for i := range 2000 {
		ids = append(ids, fmt.Sprintf("node-%04d-%s", i, "0123456789abcdef0123456789abcdef0123456789abcdef"))
	}
	f := newTwoPhaseFixture(t, ids...)
	id := f.createBundles("STRICT_PACK", cpu(3), cpu(3))
	f.round()
	info := f.m.info(id)
	if len(info.RejectionSummaries) == 0 || info.RejectionSummaries[0].Nodes != 2000 {
		t.Fatalf("rejections %v: want every one of the 2,000 nodes counted", info.RejectionSummaries)
	}
	if size := proto.Size(info); size > 2048 {
		t.Fatalf("pending row is %d bytes at 2,000 nodes, want at most 2,048: %v", size, info)
	}
	if len(info.RejectionSummaries[0].ExampleNodeIds) != maxExampleNodes || info.RejectionSummaries[0].ExampleNodeIds[0] != ids[0] {
		t.Fatalf("examples %v: want the first %d node ids", info.RejectionSummaries[0].ExampleNodeIds, maxExampleNodes)
	}
}

// The kept view must always equal the view built from scratch from the node table and
// the groups: a seeded stream of creates, removals, node deaths and joins, with the
// two-phase commits running, checked after every step.
func TestKeptViewEqualsARebuiltViewOnSeededStreams(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			f := newTwoPhaseFixture(t, "a", "b", "c", "d")
			nextNode := 0
			var live []string
			strategies := []string{"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"}
			for step := range 60 {
				op := rng.IntN(10)
				switch {
				case op < 5:
					var bundles []map[string]float64
					for range 1 + rng.IntN(3) {
						bundles = append(bundles, cpu(float64(1+rng.IntN(2))))
					}
					live = append(live, f.createBundles(strategies[rng.IntN(len(strategies))], bundles...))
				case op < 8 && len(live) > 0:
					i := rng.IntN(len(live))
					if err := f.m.remove(live[i], removedByOwner); err != nil {
						t.Fatal(err)
					}
					live = slices.Delete(live, i, i+1)
				case op == 8:
					f.nodes.mu.Lock()
					alive := slices.Clone(f.nodes.alive)
					f.nodes.mu.Unlock()
					if len(alive) > 1 {
						dead := alive[rng.IntN(len(alive))]
						f.nodes.kill(dead)
						f.m.onNodeDead(dead)
					}
				default:
					nextNode++
					f.nodes.mu.Lock()
					f.nodes.alive = append(f.nodes.alive, fmt.Sprintf("n%d", nextNode))
					f.nodes.mu.Unlock()
					f.m.onNodeRegistered(nil)
				}
				t.Logf("step %d op %d live %d", step, op, len(live))
				f.settle()
				f.checkViewMatchesRebuilt(fmt.Sprintf("step %d", step))
			}
		})
	}
}

// checkViewMatchesRebuilt compares the loop's kept view with one built from scratch.
// Both are read at one moment, under viewMu then mu as the manager takes them. Releases
// recorded since the view last looked (a cancel confirmed after the last round) are
// given back first, as a round and placeNow do before they use the view: until then
// the view lags by design, and a bundle released without being recorded still shows.
func (f *twoPhaseFixture) checkViewMatchesRebuilt(when string) {
	f.t.Helper()
	if f.m.viewStale.Load() {
		f.m.scheduleRound() // the loop would rebuild it before deciding
	}
	nodes := f.nodes.schedulingNodes() // never under mu, as in rebuildView
	f.m.viewMu.Lock()
	defer f.m.viewMu.Unlock()
	f.m.mu.Lock()
	f.m.applyReleasesLocked()
	held := f.m.heldBundlesLocked()
	f.m.mu.Unlock()
	fresh, err := buildView(nodes, held)
	if err != nil {
		f.t.Fatal(err)
	}
	kept := f.m.view.snapshot.Nodes()
	rebuilt := fresh.snapshot.Nodes()
	if len(kept) != len(rebuilt) {
		f.t.Fatalf("%s: kept view has %d nodes, rebuilt %d", when, len(kept), len(rebuilt))
	}
	for i := range kept {
		if kept[i].ID != rebuilt[i].ID || !kept[i].Available.Equal(rebuilt[i].Available) {
			f.t.Fatalf("%s: node %s available %s in the kept view, %s rebuilt", when, kept[i].ID, kept[i].Available, rebuilt[i].Available)
		}
	}
	if len(f.m.view.held) != len(fresh.held) {
		f.t.Fatalf("%s: kept view holds %d bundles, rebuilt %d", when, len(f.m.view.held), len(fresh.held))
	}
}

func TestGetAllPlacementGroupRepliesWithEveryRowInArrivalOrder(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	first := f.createBundles("PACK", cpu(1))
	second := f.createBundles("STRICT_PACK", cpu(9), cpu(1))
	f.round()
	if err := f.m.remove(first, removedByOwner); err != nil {
		t.Fatal(err)
	}
	reply, err := f.m.GetAllPlacementGroup(context.Background(), &pb.GetAllPlacementGroupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// What a client receives: the reply's wire form, decoded.
	raw, err := proto.Marshal(reply)
	if err != nil {
		t.Fatal(err)
	}
	decoded := &pb.GetAllPlacementGroupReply{}
	if err := proto.Unmarshal(raw, decoded); err != nil {
		t.Fatal(err)
	}
	if len(decoded.PlacementGroups) != 2 {
		t.Fatalf("%d rows, want 2", len(decoded.PlacementGroups))
	}
	for i, id := range []string{first, second} {
		if got, want := decoded.PlacementGroups[i], f.m.info(id); !proto.Equal(got, want) {
			t.Fatalf("row %d:\n got %v\nwant %v", i, got, want)
		}
	}
	if decoded.PlacementGroups[0].State != pb.PlacementGroupState_REMOVED || decoded.PlacementGroups[1].PendingReasonCode != string(pending.Infeasible) {
		t.Fatalf("rows %v", decoded.PlacementGroups)
	}
}

func TestLargeTablesAreEncodedInChunksJoinedInOrder(t *testing.T) {
	for _, count := range []int{0, 1, rowsPerEncoder, rowsPerEncoder + 1, 5*rowsPerEncoder/2 + 3} {
		rows := make([]*pb.PlacementGroupInfo, count)
		for i := range rows {
			rows[i] = &pb.PlacementGroupInfo{
				PlacementGroupId: fmt.Sprintf("%036x", i), Name: strings.Repeat("n", i%7), State: pb.PlacementGroupState(i % 5),
				Bundles: []*pb.Bundle{{BundleIndex: int32(i % 3), UnitResources: map[string]float64{"CPU": float64(i), "GPU": 1}}},
			}
		}
		wire, err := encodeRows(rows)
		if err != nil {
			t.Fatal(err)
		}
		decoded := &pb.GetAllPlacementGroupReply{}
		if err := proto.Unmarshal(wire, decoded); err != nil {
			t.Fatal(err)
		}
		if len(decoded.PlacementGroups) != count {
			t.Fatalf("%d rows: decoded %d", count, len(decoded.PlacementGroups))
		}
		for i, row := range decoded.PlacementGroups {
			if !proto.Equal(row, rows[i]) {
				t.Fatalf("%d rows: row %d is %v, want %v", count, i, row, rows[i])
			}
		}
	}
}

func TestTheSchedulerLearnsTheWorkloadFromTheGroupsAsked(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	for range 3 {
		f.createBundles("STRICT_PACK", map[string]float64{"GPU": 2}, map[string]float64{"GPU": 2})
	}
	f.createBundles("PACK", map[string]float64{"GPU": 0.5})
	f.m.mu.Lock()
	d := f.m.workload.Distribution()
	f.m.mu.Unlock()
	// A STRICT_PACK group lands on one node, as one task does: it is one shape of its
	// bundles summed.
	if len(d.Shapes) != 2 || d.Shapes[0].GPUs != 4 || !d.Shapes[0].OneIsland || d.Shapes[0].Weight < 0.74 || d.Shapes[1].GPUFraction == 0 {
		t.Fatalf("learned %+v: want the 4-GPU island shape (3 groups) ahead of the half-GPU one", d.Shapes)
	}
}

func TestCreateCanWaitForTheFirstAttempt(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	stop := make(chan struct{})
	defer close(stop)
	go f.m.loop(stop)
	create := func(cpus float64) *pb.PlacementGroupInfo {
		reply, err := f.m.CreatePlacementGroup(context.Background(), &pb.CreatePlacementGroupRequest{
			Strategy: "PACK", Lifetime: lifetimeDetached, WaitFirstAttemptMs: 5000,
			Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: cpu(cpus)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return reply.PlacementGroup
	}
	if fits := create(1); fits.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("a group that fits: the reply says %v, want CREATED", fits.State)
	}
	if waits := create(8); waits.State != pb.PlacementGroupState_PENDING || waits.PendingReasonCode != string(pending.Infeasible) {
		t.Fatalf("a group that cannot fit: the reply says %v (%q), want PENDING with its reason", waits.State, waits.PendingReasonCode)
	}
}
