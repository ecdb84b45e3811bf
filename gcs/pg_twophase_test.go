package gcs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/gcs/reservertest"
	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Unit tests of the placement-group manager's two-phase reservation, through the
// in-memory raylets of reservertest and the memory store: every failure point of the
// design's path of a placement group, and the recovery step that answers it.

var (
	_ BundleReserver = (*reservertest.Fake)(nil)
	_ BundleReserver = (*reservertest.Caller)(nil)
)

// testNodes is a node table: the alive nodes, by id, each with 4 CPUs.
type testNodes struct {
	mu    sync.Mutex
	alive []string
	// total is every node's resources; nil: 4 CPUs.
	total map[string]float64
}

func (n *testNodes) schedulingNodes() []*pb.NodeInfo { return n.aliveNodes() }

func (n *testNodes) noteWork(string) {}

func (n *testNodes) draining(string) bool { return false }

func (n *testNodes) aliveNodes() []*pb.NodeInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*pb.NodeInfo, len(n.alive))
	total := n.total
	if total == nil {
		total = map[string]float64{"CPU": 4}
	}
	for i, id := range n.alive {
		out[i] = &pb.NodeInfo{NodeId: id, State: pb.NodeState_ALIVE, RayletAddress: "raylet-" + id,
			ResourcesTotal: total, ResourcesAvailable: total}
	}
	return out
}

func (n *testNodes) kill(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.alive = slices.DeleteFunc(n.alive, func(a string) bool { return a == id })
}

func (n *testNodes) rayletAddress(id string) string                 { return "raylet-" + id }
func (n *testNodes) applyResourceReport(string, *pb.ResourceReport) {}
func (n *testNodes) rayletClient(string) (pb.NodeManagerServiceClient, error) {
	return nil, errors.New("the placement-group manager calls raylets only through its BundleReserver")
}

// stoppableStore is one GCS process's connection to the store: once stopped (the
// process was killed) its writes fail and change nothing.
type stoppableStore struct {
	store.Store
	mu      sync.Mutex
	stopped bool
}

var errProcessKilled = errors.New("the GCS process was killed")

func (s *stoppableStore) stop() { s.setStopped(true) }

func (s *stoppableStore) setStopped(stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = stopped
}

func (s *stoppableStore) Put(ctx context.Context, table, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errProcessKilled
	}
	return s.Store.Put(ctx, table, key, value)
}

func (s *stoppableStore) Delete(ctx context.Context, table string, keys ...string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return 0, errProcessKilled
	}
	return s.Store.Delete(ctx, table, keys...)
}

func (s *stoppableStore) Apply(ctx context.Context, ops []store.Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errProcessKilled
	}
	return s.Store.Apply(ctx, ops)
}

type noJobs struct{}

func (noJobs) get(string) *pb.JobInfo { return nil }

type twoPhaseFixture struct {
	t        *testing.T
	store    store.Store
	nodes    *testNodes
	raylets  *reservertest.Fake
	caller   *reservertest.Caller // the current manager's connection to the raylets
	writer   *stoppableStore      // and to the store
	clock    *fakeClock
	queues   *queues.Config // set before newManager: admission on
	m        *pgManager
	listener *recordingGroupListener
}

type recordingGroupListener struct {
	mu               sync.Mutex
	created, removed []string
}

func (l *recordingGroupListener) onPlacementGroupRemoved(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removed = append(l.removed, id)
}

func (l *recordingGroupListener) onPlacementGroupCreated(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.created = append(l.created, id)
}

// saw waits until the listener was told of the group as want says.
func (l *recordingGroupListener) saw(t *testing.T, id string, wantCreated, wantRemoved bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "listeners told", func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if slices.Contains(l.created, id) != wantCreated || slices.Contains(l.removed, id) != wantRemoved {
			return fmt.Errorf("created %v, removed %v", l.created, l.removed)
		}
		return nil
	})
}

func newTwoPhaseFixture(t *testing.T, nodes ...string) *twoPhaseFixture {
	f := &twoPhaseFixture{t: t, store: store.NewMemory(), nodes: &testNodes{alive: nodes}, raylets: reservertest.New(),
		clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}}
	f.m = f.newManager()
	return f
}

// newManager is a manager on the fixture's store and raylets: a GCS (re)started. The
// previous manager's connections to the raylets and to the store stop, as a killed
// GCS's would.
func (f *twoPhaseFixture) newManager() *pgManager {
	if f.caller != nil {
		// The store first: a call the stopped caller releases must find the process's
		// writes already refused.
		f.writer.stop()
		f.caller.Stop()
	}
	f.caller = f.raylets.Caller()
	f.writer = &stoppableStore{Store: f.store}
	m := newPGManager(pgDeps{queues: f.queues, store: f.writer, nodes: f.nodes, jobs: noJobs{}, reserver: f.caller, now: f.clock.Now, log: zerolog.Nop()})
	f.listener = &recordingGroupListener{}
	m.subscribe(f.listener)
	return m
}

// create makes a detached group of n one-CPU bundles.
func (f *twoPhaseFixture) create(strategy string, n int) string {
	f.t.Helper()
	req := &pb.CreatePlacementGroupRequest{Strategy: strategy, Lifetime: lifetimeDetached}
	for range n {
		req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: map[string]float64{"CPU": 1}})
	}
	reply, err := f.m.CreatePlacementGroup(context.Background(), req)
	if err != nil {
		f.t.Fatal(err)
	}
	return reply.PlacementGroup.PlacementGroupId
}

// round runs one scheduling round once every retry is due.
func (f *twoPhaseFixture) round() {
	f.clock.Advance(retryBackoffMax)
	f.m.scheduleRound()
}

// stored is the group's row in the store.
func (f *twoPhaseFixture) stored(id string) *pb.PlacementGroupInfo {
	f.t.Helper()
	raw, found, err := f.store.Get(context.Background(), store.TablePlacementGroups, id)
	if err != nil || !found {
		f.t.Fatalf("group %s not in the store (%v)", id, err)
	}
	info := &pb.PlacementGroupInfo{}
	if err := proto.Unmarshal(raw, info); err != nil {
		f.t.Fatal(err)
	}
	return info
}

// waitState waits until the manager and the store both say the group is in state.
func (f *twoPhaseFixture) waitState(id string, state pb.PlacementGroupState) *pb.PlacementGroupInfo {
	f.t.Helper()
	var info *pb.PlacementGroupInfo
	poll.Until(f.t, 10*time.Second, 5*time.Millisecond, fmt.Sprintf("group %s %s", id[:8], state), func() error {
		info = f.m.info(id)
		if info == nil || info.State != state {
			return fmt.Errorf("in memory: %v (%s)", info.GetState(), info.GetPendingReason())
		}
		if stored := f.stored(id); stored.State != state {
			return fmt.Errorf("stored: %v", stored.State)
		}
		return nil
	})
	return info
}

// waitHeld waits until the raylets hold exactly want committed bundles of the group and
// nothing else of it.
func (f *twoPhaseFixture) waitHeld(id string, want int) {
	f.t.Helper()
	poll.Until(f.t, 10*time.Second, 5*time.Millisecond, fmt.Sprintf("raylets hold %d committed bundles of %s", want, id[:8]), func() error {
		committed, other := 0, []string{}
		for _, held := range f.raylets.HeldAnywhere() {
			for _, b := range held {
				switch {
				case b.PlacementGroupID != id:
					other = append(other, b.String())
				case b.Committed:
					committed++
				default:
					other = append(other, b.String())
				}
			}
		}
		if committed != want || len(other) > 0 {
			return fmt.Errorf("%d committed, and %v", committed, other)
		}
		return nil
	})
}

// checkCreatedIsWhole: the group is CREATED with every bundle on a node, each held
// committed there (no partial gang).
func (f *twoPhaseFixture) checkCreatedIsWhole(id string) {
	f.t.Helper()
	info := f.waitState(id, pb.PlacementGroupState_CREATED)
	for _, b := range info.Bundles {
		held := f.raylets.Held(b.NodeId)
		if b.NodeId == "" || !slices.ContainsFunc(held, func(h reservertest.Bundle) bool {
			return h.PlacementGroupID == id && h.Index == b.BundleIndex && h.Generation == b.Generation && h.Committed
		}) {
			f.t.Fatalf("CREATED group's bundle %d on %q generation %d is not held committed there: %v", b.BundleIndex, b.NodeId, b.Generation, held)
		}
	}
}

func TestTwoPhaseCommitCreatesTheWholeGroup(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b", "c")
	id := f.create("STRICT_SPREAD", 3)
	f.round()
	f.checkCreatedIsWhole(id)
	f.waitHeld(id, 3)
	f.listener.saw(t, id, true, false)
}

func TestPrepareFailingOnOneNodeCancelsEverywhereAndRequeues(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b", "c")
	f.raylets.FailOn(reservertest.Prepare, "b", errors.New("out of CPU"))
	id := f.create("STRICT_SPREAD", 3)
	f.round()
	info := f.waitState(id, pb.PlacementGroupState_PENDING)
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the failure recorded", func() error {
		info = f.m.info(id)
		if info.Stats.SchedulingState != pb.SchedulingState_FAILED_TO_COMMIT_RESOURCES || !strings.Contains(info.PendingReason, "node b") {
			return fmt.Errorf("%v %q", info.Stats.SchedulingState, info.PendingReason)
		}
		return nil
	})
	f.waitHeld(id, 0) // a and c prepared, then cancelled
	f.raylets.FailOn(reservertest.Prepare, "b", nil)
	f.round()
	f.checkCreatedIsWhole(id)
	f.waitHeld(id, 3)
}

func TestCommitFailingCancelsEverywhereAndRequeues(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b", "c")
	f.raylets.FailOn(reservertest.Commit, "c", errors.New("raylet restarting"))
	id := f.create("SPREAD", 3)
	f.round()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "re-queued after the failed commit", func() error {
		info := f.m.info(id)
		if info.State != pb.PlacementGroupState_PENDING || !strings.Contains(info.PendingReason, "commit") {
			return fmt.Errorf("%v %q", info.State, info.PendingReason)
		}
		return nil
	})
	f.waitHeld(id, 0)
	if info := f.stored(id); info.State == pb.PlacementGroupState_CREATED {
		t.Fatal("stored CREATED with a failed commit")
	}
	f.raylets.FailOn(reservertest.Commit, "c", nil)
	f.round()
	f.checkCreatedIsWhole(id)
}

// The undo of a failed prepare whose cancel a raylet did not confirm (lost to a
// partition) sends it again until it is, and the room stays held in the view meanwhile,
// apart from the group: the group is placed again at once, at a newer generation, which
// the raylet takes in place of the bundle it still holds.
func TestAnUndoneReservationsUnconfirmedCancelIsSentAgainAndItsRoomHeld(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b")
	f.round()
	f.raylets.FailOn(reservertest.Prepare, "b", errors.New("raylet restarting"))
	f.raylets.FailOn(reservertest.Cancel, "a", errors.New("connection timed out"))
	id := f.create("STRICT_SPREAD", 2)
	f.round()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the undo's cancel to a sent again", func() error {
		if n := f.cancelsOf(id); n < 3 { // a and b, then a again
			return fmt.Errorf("%d cancel calls", n)
		}
		return nil
	})
	if held := f.raylets.Held("a"); len(held) != 1 || held[0].Committed || held[0].Generation != 1 {
		t.Fatalf("raylet a holds %v, want the undone bundle prepared at generation 1", held)
	}
	f.checkViewAvailable("a", 3, "with the undone bundle held")
	f.checkViewMatchesRebuilt("with the undone bundle held")

	f.raylets.FailOn(reservertest.Prepare, "b", nil)
	f.round()
	f.checkCreatedIsWhole(id)
	for _, b := range f.m.info(id).Bundles {
		if b.NodeId == "a" && b.Generation != 2 {
			t.Fatalf("bundle %d placed again on a at generation %d, want 2 (newer than the undone one's)", b.BundleIndex, b.Generation)
		}
	}
	f.waitHeld(id, 2) // raylet a took generation 2 in place of 1
	f.checkViewAvailable("a", 2, "with the group placed and the undo unconfirmed")
	f.checkViewMatchesRebuilt("with the group placed and the undo unconfirmed")

	f.raylets.FailOn(reservertest.Cancel, "a", nil)
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the undo released once its cancel was confirmed", func() error {
		f.round()
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		if len(f.m.undos) > 0 {
			return fmt.Errorf("undos %v", f.m.undos)
		}
		return nil
	})
	f.round()
	f.checkViewAvailable("a", 3, "after the undo's cancel was confirmed")
	f.checkViewMatchesRebuilt("after the undo's cancel was confirmed")
	f.waitHeld(id, 2)
}

// checkViewAvailable: the scheduler's view gives node that many CPUs free.
func (f *twoPhaseFixture) checkViewAvailable(node string, cpus float64, when string) {
	f.t.Helper()
	f.m.viewMu.Lock()
	defer f.m.viewMu.Unlock()
	n, ok := f.m.view.snapshot.Node(placement.NodeID(node))
	if !ok {
		f.t.Fatalf("%s: node %s not in the view", when, node)
	}
	if got := n.Available["CPU"]; got != resources.Amount(cpus*float64(resources.AmountScale)) {
		f.t.Fatalf("%s: node %s has %s free in the view, want CPU %v", when, node, n.Available, cpus)
	}
}

func TestRemoveWhilePreparedReleasesEverything(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b")
	release := f.caller.Hold(reservertest.Commit)
	id := f.create("PACK", 2)
	f.round()
	f.waitState(id, pb.PlacementGroupState_PREPARED)
	if err := f.m.remove(id, removedByOwner); err != nil {
		t.Fatal(err)
	}
	release(nil) // the commits that were held now reach the raylets
	f.waitState(id, pb.PlacementGroupState_REMOVED)
	f.waitHeld(id, 0)
	f.listener.saw(t, id, false, true)
}

func TestNodeDeathWhilePreparedPlacesTheGroupElsewhere(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b", "c", "d")
	release := f.caller.Hold(reservertest.Commit)
	id := f.create("STRICT_SPREAD", 3)
	f.round()
	prepared := f.waitState(id, pb.PlacementGroupState_PREPARED)
	dead := prepared.Bundles[1].NodeId
	f.nodes.kill(dead)
	f.raylets.SetDown(dead, true)
	f.m.onNodeDead(dead)
	release(nil) // the commit to the dead node fails
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "re-queued", func() error {
		if info := f.m.info(id); info.State != pb.PlacementGroupState_PENDING || info.Stats.SchedulingState != pb.SchedulingState_FAILED_TO_COMMIT_RESOURCES {
			return fmt.Errorf("%v %v", info.State, info.Stats.SchedulingState)
		}
		return nil
	})
	f.round()
	info := f.waitState(id, pb.PlacementGroupState_CREATED)
	for _, b := range info.Bundles {
		if b.NodeId == dead {
			t.Fatalf("bundle %d placed on the dead node", b.BundleIndex)
		}
	}
	f.checkCreatedIsWhole(id)
	f.waitHeld(id, 3)
}

func TestRestartAfterPreparedCommitsTheGroup(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b", "c")
	release := f.caller.Hold(reservertest.Commit)
	id := f.create("STRICT_SPREAD", 3)
	f.round()
	f.waitState(id, pb.PlacementGroupState_PREPARED)

	// The GCS dies here: its held commits never reach a raylet, and it does nothing more
	// (newManager stops its connection; its store writes end with it, as below).
	_ = release
	restarted := f.newManager()
	prepared, err := restarted.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(prepared) != 1 || prepared[0].info.PlacementGroupId != id {
		t.Fatalf("reloaded PREPARED groups: %d, want the one", len(prepared))
	}
	f.m = restarted
	restarted.recoverPrepared(prepared)
	f.checkCreatedIsWhole(id)
	f.waitHeld(id, 3)
}

// preparedWhenTheGCSDies is a fixture on nodes a, b and c whose GCS dies with a
// STRICT_SPREAD group of three bundles PREPARED (its commits held, never sent); while it
// is down, the raylet of the group's third bundle restarts and loses what it held. It
// returns the group's row.
func preparedWhenTheGCSDies(t *testing.T) (*twoPhaseFixture, *pb.PlacementGroupInfo) {
	f := newTwoPhaseFixture(t, "a", "b", "c")
	release := f.caller.Hold(reservertest.Commit)
	id := f.create("STRICT_SPREAD", 3)
	f.round()
	prepared := f.waitState(id, pb.PlacementGroupState_PREPARED)
	_ = release // the GCS dies with its commits held
	lost := prepared.Bundles[2].NodeId
	f.raylets.SetDown(lost, true)
	f.raylets.SetDown(lost, false)
	return f, prepared
}

// restartAndRecover starts a GCS on the fixture's store and raylets, which reloads the
// table and recovers the PREPARED groups.
func (f *twoPhaseFixture) restartAndRecover() {
	f.t.Helper()
	f.m = f.newManager()
	groups, err := f.m.load(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	f.m.recoverPrepared(groups)
}

func TestRestartAfterPreparedWithARefusingNodeRequeues(t *testing.T) {
	f, prepared := preparedWhenTheGCSDies(t)
	id := prepared.PlacementGroupId
	f.restartAndRecover()
	f.waitState(id, pb.PlacementGroupState_PENDING)
	f.waitHeld(id, 0) // the two commits that went through were cancelled
	f.round()
	f.checkCreatedIsWhole(id)
	f.waitHeld(id, 3)
}

// A recovered group whose commit a node refuses is queued again only once every raylet
// confirmed the cancel of what it holds: until then it stays PREPARED, its bundles held.
func TestRestartAfterPreparedRequeuesOnceTheCancelsAreConfirmed(t *testing.T) {
	f, prepared := preparedWhenTheGCSDies(t)
	id, kept := prepared.PlacementGroupId, prepared.Bundles[0].NodeId
	f.raylets.FailOn(reservertest.Cancel, kept, errors.New("connection timed out"))
	f.restartAndRecover()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the cancel to "+kept+" sent again", func() error {
		if n := cancelsTo(f.raylets, kept); n < 2 {
			return fmt.Errorf("%d cancel calls", n)
		}
		return nil
	})
	f.round()
	if info := f.m.info(id); info.State != pb.PlacementGroupState_PREPARED {
		t.Fatalf("%v before %s confirmed the cancel, want PREPARED (its bundles held)", info.State, kept)
	}
	f.checkViewMatchesRebuilt("while the cancel is unconfirmed")
	f.raylets.FailOn(reservertest.Cancel, kept, nil)
	f.waitState(id, pb.PlacementGroupState_PENDING)
	f.round()
	f.checkCreatedIsWhole(id)
	f.waitHeld(id, 3)
}

func TestStaleEpochRefusalRequeuesAndHoldsNothing(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b")
	// A raylet that has seen a newer GCS refuses this one's calls (rpcutil's epoch check).
	f.raylets.FailOn(reservertest.Prepare, "a", errors.New("rpc error: code = FailedPrecondition desc = stale GCS epoch 3, this raylet follows epoch 4"))
	id := f.create("STRICT_SPREAD", 2)
	f.round()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "re-queued with the refusal", func() error {
		if info := f.m.info(id); info.State != pb.PlacementGroupState_PENDING || !strings.Contains(info.PendingReason, "stale GCS epoch") {
			return fmt.Errorf("%v %q", info.State, info.PendingReason)
		}
		return nil
	})
	f.waitHeld(id, 0)
}

func TestReconnectedRayletReleasesWhatTheGCSDoesNotKnow(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b")
	id := f.create("STRICT_PACK", 2)
	f.round()
	created := f.waitState(id, pb.PlacementGroupState_CREATED)
	node := created.Bundles[0].NodeId
	f.raylets.Plant(node, &pb.BundleKey{PlacementGroupId: "0rphan", BundleIndex: 0, Generation: 1})
	f.m.onNodeConnected(&pb.NodeInfo{NodeId: node})
	f.waitHeld(id, 2)
}

// A removal the store could not save is refused, and changes nothing: answered OK, it
// came back CREATED after a restart with none of its bundles held.
func TestRemovalIsAcknowledgedOnlyOncePersisted(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b")
	id := f.create("STRICT_SPREAD", 2)
	f.round()
	f.checkCreatedIsWhole(id)

	f.writer.setStopped(true) // the store is down
	_, err := f.m.RemovePlacementGroup(context.Background(), &pb.RemovePlacementGroupRequest{PlacementGroupId: id})
	if status.Code(statusOf(err)) != codes.Unavailable || !strings.Contains(err.Error(), "not removed") {
		t.Fatalf("removal while the store is down: %v, want Unavailable saying it was not removed", err)
	}
	f.checkCreatedIsWhole(id)
	f.waitHeld(id, 2)

	f.writer.setStopped(false)
	if _, err := f.m.RemovePlacementGroup(context.Background(), &pb.RemovePlacementGroupRequest{PlacementGroupId: id}); err != nil {
		t.Fatal(err)
	}
	f.waitState(id, pb.PlacementGroupState_REMOVED)
	f.waitHeld(id, 0)
}

// A group that fails for an internal reason (its two-phase reservation failed on a
// raylet) says so with code Internal and backs off alone: a group queued behind it is
// placed in the same rounds, and the failed one is placed once the raylet recovers.
func TestAGroupFailingForAnInternalReasonNeverBlocksOthers(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b")
	f.raylets.FailOn(reservertest.Prepare, "b", errors.New("raylet b: disk full"))
	failing := f.create("STRICT_SPREAD", 2) // needs a and b
	f.round()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the failure recorded as internal", func() error {
		if info := f.m.info(failing); info.PendingReasonCode != string(pending.Internal) || !strings.Contains(info.PendingReason, "disk full") {
			return fmt.Errorf("reason %q %q", info.PendingReasonCode, info.PendingReason)
		}
		return nil
	})
	// Queued behind it, on a (ties go to the lower node id): placed while it keeps failing.
	behind := f.create("PACK", 1)
	for range 3 {
		f.round()
	}
	f.waitState(behind, pb.PlacementGroupState_CREATED)
	// Its backoff may have ended meanwhile: an attempt in flight clears the reason until
	// the prepare fails again, so the reason is awaited; the state is never other than
	// PENDING while b fails.
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the failing group still failing as internal", func() error {
		info := f.m.info(failing)
		if info.State != pb.PlacementGroupState_PENDING {
			t.Fatalf("the failing group is %v", info.State)
		}
		if info.PendingReasonCode != string(pending.Internal) {
			return fmt.Errorf("reason %q", info.PendingReasonCode)
		}
		return nil
	})
	f.raylets.FailOn(reservertest.Prepare, "b", nil)
	f.round()
	f.checkCreatedIsWhole(failing)
}

// A group that asks for max_runtime_s is removed once it has run (been CREATED) that
// long, saying why; one that ran past it while the GCS was down is removed as the next
// GCS loads it. A negative or overlong max_runtime_s is refused, naming it.
func TestAGroupIsRemovedAfterItsMaxRuntime(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	for _, bad := range []int64{-1, maxRuntimeLimitS + 1} {
		_, err := f.m.CreatePlacementGroup(context.Background(), &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: lifetimeDetached, MaxRuntimeS: bad,
			Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}}})
		if status.Code(statusOf(err)) != codes.InvalidArgument || !strings.Contains(err.Error(), "max_runtime_s") {
			t.Fatalf("max_runtime_s %d: %v, want InvalidArgument naming it", bad, err)
		}
	}
	create := func(seconds int64) string {
		reply, err := f.m.CreatePlacementGroup(context.Background(), &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: lifetimeDetached, MaxRuntimeS: seconds,
			Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		return reply.PlacementGroup.PlacementGroupId
	}
	short, long := create(1), create(3600)
	f.round()
	for _, id := range []string{short, long} {
		if info := f.waitState(id, pb.PlacementGroupState_CREATED); info.RunningSinceMs != f.clock.Now().UnixMilli() {
			t.Fatalf("group %s: %v since %d, want CREATED since now", id, info.State, info.RunningSinceMs)
		}
	}
	eventually(t, 10*time.Second, "the 1-second group removed", func() error {
		if info := f.m.info(short); info.State != pb.PlacementGroupState_REMOVED || info.RemovalReason != "ran for max_runtime_s=1" {
			return fmt.Errorf("%v %q", info.State, info.RemovalReason)
		}
		return nil
	})
	if got := f.stored(short); got.State != pb.PlacementGroupState_REMOVED || got.RemovalReason != "ran for max_runtime_s=1" {
		t.Fatalf("stored row: %v %q", got.State, got.RemovalReason)
	}
	if info := f.m.info(long); info.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("the 1-hour group: %v", info.State)
	}
	// The GCS is down for two hours: the next one removes the 1-hour group as it loads it.
	f.clock.Advance(2 * time.Hour)
	restarted := f.newManager()
	if _, err := restarted.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.m = restarted
	eventually(t, 10*time.Second, "the 1-hour group removed by the restarted GCS", func() error {
		if info := f.m.info(long); info.State != pb.PlacementGroupState_REMOVED || info.RemovalReason != "ran for max_runtime_s=3600" {
			return fmt.Errorf("%v %q", info.State, info.RemovalReason)
		}
		return nil
	})
}
