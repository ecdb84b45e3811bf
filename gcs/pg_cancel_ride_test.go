package gcs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/gcs/reservertest"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// A removed group's cancel rides on the next prepare-and-commit to its node when nothing
// waits for capacity; otherwise, or when no such call comes soon, or when the call
// fails, it goes on its own. Its capacity is reused only once a raylet confirmed it.

// oneStepRaylets gives the in-memory raylets the raylet's one-step call: the riding
// cancels first (also when the prepare is then refused), then prepare and commit. With
// lose set, a call fails without reaching them (lost on the way).
type oneStepRaylets struct {
	*reservertest.Caller
	mu    sync.Mutex
	rode  [][]*pb.BundleKey // the cancels each one-step call carried
	lose  bool
	calls int
}

var _ prepareCommitter = (*oneStepRaylets)(nil)

func (r *oneStepRaylets) PrepareCommit(ctx context.Context, node string, bundles []*pb.BundleReservation, cancel []*pb.BundleKey) ([]*pb.BundleReservation, *pb.ResourceReport, error) {
	r.mu.Lock()
	r.calls++
	r.rode = append(r.rode, cancel)
	lose := r.lose
	r.mu.Unlock()
	if lose {
		return nil, nil, errors.New("connection reset before the raylet read the call")
	}
	if len(cancel) > 0 {
		if _, err := r.Cancel(ctx, node, cancel); err != nil {
			return nil, nil, err
		}
	}
	made, _, err := r.Prepare(ctx, node, bundles)
	if err != nil {
		return nil, nil, err
	}
	report, err := r.Commit(ctx, node, keysOf(bundles))
	return made, report, err
}

func (r *oneStepRaylets) carried() [][]*pb.BundleKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rode)
}

// newRideFixture is a two-phase fixture whose raylets take the one-step call.
func newRideFixture(t *testing.T, nodes ...string) (*twoPhaseFixture, *oneStepRaylets) {
	return newRideFixtureWaiting(t, 0, nodes...)
}

// newRideFixtureWaiting is newRideFixture with a cancel waiting rideWait for a ride
// (zero: cancelRideWait). A test that checks a cancel rides on the next create waits
// long, so that a loaded machine cannot send it on its own first.
func newRideFixtureWaiting(t *testing.T, rideWait time.Duration, nodes ...string) (*twoPhaseFixture, *oneStepRaylets) {
	f := newTwoPhaseFixture(t, nodes...)
	f.m.rides.wait = rideWait
	raylets := &oneStepRaylets{Caller: f.caller}
	f.m.reserver = raylets
	f.round() // the view is built once, as the running loop does at start
	return f, raylets
}

// cancelsTo counts the cancel calls the in-memory raylets got on node.
func cancelsTo(raylets *reservertest.Fake, node string) int {
	n := 0
	for _, call := range raylets.Calls() {
		if call.Step == reservertest.Cancel && call.NodeID == node {
			n++
		}
	}
	return n
}

// cancelsOf counts the cancel calls the raylets got for a group (on their own or riding).
func (f *twoPhaseFixture) cancelsOf(id string) int {
	n := 0
	for _, call := range f.raylets.Calls() {
		if call.Step == reservertest.Cancel && slices.ContainsFunc(call.Keys, func(k *pb.BundleKey) bool { return k.PlacementGroupId == id }) {
			n++
		}
	}
	return n
}

func TestARemovedGroupsCancelRidesOnTheNextCreateToItsNode(t *testing.T) {
	f, raylets := newRideFixtureWaiting(t, time.Minute, "a")
	first, err := f.createWaiting(1)
	if err != nil || first.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("first: %v, %v", first.GetState(), err)
	}
	// The driver's next create carries the removal; the GCS's next call to the node
	// carries the cancel.
	second, err := f.createWaiting(1, first.PlacementGroupId)
	if err != nil || second.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("second: %v, %v", second.GetState(), err)
	}
	carried := raylets.carried()
	if len(carried) != 2 || len(carried[1]) != 1 || carried[1][0].PlacementGroupId != first.PlacementGroupId {
		t.Fatalf("the one-step calls carried the cancels %v; want none, then the first group's bundle", carried)
	}
	if n := f.cancelsOf(first.PlacementGroupId); n != 1 {
		t.Fatalf("the first group was cancelled %d times, want once (riding)", n)
	}
	f.waitHeld(second.PlacementGroupId, 1) // and nothing of the first
	// The view took the first group's CPU back: three more fit on the 4-CPU node.
	if third, err := f.createWaiting(3); err != nil || third.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("three CPUs beside the second group: %v, %v; want CREATED", third.GetState(), err)
	}
	f.checkViewMatchesRebuilt("after the ride")
}

func TestARemovalNoCreateFollowsIsCancelledOnItsOwn(t *testing.T) {
	f, raylets := newRideFixture(t, "a")
	first, err := f.createWaiting(1)
	if err != nil || first.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("first: %v, %v", first.GetState(), err)
	}
	if _, err := f.m.RemovePlacementGroup(context.Background(), &pb.RemovePlacementGroupRequest{PlacementGroupId: first.PlacementGroupId}); err != nil {
		t.Fatal(err)
	}
	f.waitHeld(first.PlacementGroupId, 0)
	raylets.mu.Lock()
	calls := raylets.calls
	raylets.mu.Unlock()
	if n := f.cancelsOf(first.PlacementGroupId); n != 1 || calls != 1 {
		t.Fatalf("%d cancels and %d one-step calls; want the cancel alone, once", n, calls)
	}
	poll.Until(t, 10*time.Second, time.Millisecond, "the group no longer counted as cancelling", func() error {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		if f.m.removed[first.PlacementGroupId].cancelling {
			return errors.New("still cancelling")
		}
		return nil
	})
	f.round() // the view takes the released bundle back
	f.checkViewMatchesRebuilt("after the lone cancel")
}

// A create that needs the capacity a riding cancel holds waits for the cancel, which then
// goes at once on its own: the raylet releases it before the new group is reserved.
func TestCapacityHeldByARidingCancelIsReusedOnlyOnceTheRayletConfirmedIt(t *testing.T) {
	f, _ := newRideFixture(t, "a")
	first, err := f.createWaiting(4)
	if err != nil || first.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("first: %v, %v", first.GetState(), err)
	}
	second, err := f.createWaiting(4, first.PlacementGroupId)
	if err != nil || second.State == pb.PlacementGroupState_CREATED {
		t.Fatalf("a group needing the removed group's unconfirmed CPUs: %v, %v; want it to wait", second.GetState(), err)
	}
	f.waitHeld(first.PlacementGroupId, 0)
	f.round()
	f.checkCreatedIsWhole(second.PlacementGroupId)
	calls := f.raylets.Calls()
	cancel := slices.IndexFunc(calls, func(c reservertest.Call) bool {
		return c.Step == reservertest.Cancel && c.Keys[0].PlacementGroupId == first.PlacementGroupId
	})
	prepare := slices.IndexFunc(calls, func(c reservertest.Call) bool {
		return c.Step == reservertest.Prepare && c.Keys[0].PlacementGroupId == second.PlacementGroupId
	})
	if cancel < 0 || prepare < 0 || cancel > prepare {
		t.Fatalf("calls %v: want the first group's cancel before the second's prepare", calls)
	}
}

// A one-step call that fails (it may not have reached the raylet) sends the cancels it
// carried again on their own.
func TestCancelsOfAFailedOneStepCallAreSentAgainOnTheirOwn(t *testing.T) {
	f, raylets := newRideFixtureWaiting(t, time.Minute, "a")
	first, err := f.createWaiting(1)
	if err != nil || first.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("first: %v, %v", first.GetState(), err)
	}
	raylets.mu.Lock()
	raylets.lose = true
	raylets.mu.Unlock()
	second, err := f.createWaiting(1, first.PlacementGroupId)
	if err != nil || second.State == pb.PlacementGroupState_CREATED {
		t.Fatalf("second, its call lost: %v, %v; want it queued again", second.GetState(), err)
	}
	if carried := raylets.carried(); len(carried) != 2 || len(carried[1]) != 1 {
		t.Fatalf("the one-step calls carried %v; want the first group's cancel on the lost one", carried)
	}
	f.waitHeld(first.PlacementGroupId, 0)
	if n := f.cancelsOf(first.PlacementGroupId); n != 1 {
		t.Fatalf("the first group was cancelled %d times at the raylets, want once (on its own)", n)
	}
	raylets.mu.Lock()
	raylets.lose = false
	raylets.mu.Unlock()
	f.round()
	f.checkCreatedIsWhole(second.PlacementGroupId)
	// The raylet dropped the first group's bundle before the manager records the cancel
	// confirmed, which may come after that round: wait for it, so the check below sees
	// its CPU given back rather than still held.
	f.settle()
	f.checkViewMatchesRebuilt("after the lost call")
}

// cancelling reports whether the removed group still counts as cancelling (its bundles
// held in the view).
func (f *twoPhaseFixture) cancelling(id string) bool {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	e := f.m.removed[id]
	return e != nil && e.cancelling
}

// removedWithCancelUnconfirmed is a fixture with one node, "a", whose raylet fails every
// cancel with failure, after a group of that many {CPU: 1} bundles was created there and removed: it
// returns once the cancel was sent again.
func removedWithCancelUnconfirmed(t *testing.T, bundles int, failure string) (*twoPhaseFixture, string) {
	f := newTwoPhaseFixture(t, "a")
	f.round()
	first := f.create("PACK", bundles)
	f.round()
	f.checkCreatedIsWhole(first)
	f.raylets.FailOn(reservertest.Cancel, "a", errors.New(failure))
	if _, err := f.m.RemovePlacementGroup(context.Background(), &pb.RemovePlacementGroupRequest{PlacementGroupId: first}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the unconfirmed cancel sent again", func() error {
		if n := f.cancelsOf(first); n < 2 {
			return fmt.Errorf("%d cancel calls", n)
		}
		return nil
	})
	return f, first
}

// createNotPlacedUntilCancelled creates a group of four {CPU: 1} bundles, checks that a
// round does not place it in the room the removed group first still holds on "a", then
// lets the raylet confirm first's cancel and waits for it. It returns the new group.
func (f *twoPhaseFixture) createNotPlacedUntilCancelled(first string) string {
	f.t.Helper()
	second := f.create("PACK", 4)
	f.round()
	if info := f.m.info(second); info.State == pb.PlacementGroupState_CREATED {
		f.t.Fatalf("a group was placed in the CPUs the raylet still holds for the removed one: %v", f.raylets.Held("a"))
	}
	f.raylets.FailOn(reservertest.Cancel, "a", nil)
	f.waitCancelled(first, "the cancel confirmed")
	return second
}

// waitCancelled waits until the removed group no longer counts as cancelling.
func (f *twoPhaseFixture) waitCancelled(id, what string) {
	f.t.Helper()
	poll.Until(f.t, 10*time.Second, 5*time.Millisecond, what, func() error {
		if f.cancelling(id) {
			return errors.New("still cancelling")
		}
		return nil
	})
}

// A removal's cancel the raylet did not confirm (lost to a partition) is sent again until
// it is, and the capacity stays held meanwhile: a group placed in room the raylet still
// holds would be refused there on every attempt, and wait for as long.
func TestAnUnconfirmedCancelIsSentAgainAndItsCapacityHeldUntilConfirmed(t *testing.T) {
	f, first := removedWithCancelUnconfirmed(t, 4, "connection timed out")
	if !f.cancelling(first) {
		t.Fatal("the removed group's bundles were released before the raylet confirmed their cancel")
	}
	second := f.createNotPlacedUntilCancelled(first)
	f.round()
	f.checkCreatedIsWhole(second)
	f.waitHeld(second, 4)
	f.checkViewMatchesRebuilt("after the cancel was confirmed")
}

// A node that dies while its cancel is sent again holds nothing: the retries stop and the
// bundles are released.
func TestAnUnconfirmedCancelToANodeThatDiedIsGivenUp(t *testing.T) {
	f, first := removedWithCancelUnconfirmed(t, 2, "connection refused")
	f.nodes.kill("a")
	f.waitCancelled(first, "the cancel given up")
	calls := f.cancelsOf(first)
	time.Sleep(2 * retryBackoffMin)
	if n := f.cancelsOf(first); n != calls {
		t.Fatalf("%d more cancel calls to the dead node", n-calls)
	}
}

// A removed group whose cancel the raylet has not confirmed is not pruned, however old
// or many the removed rows: a view rebuilt without it would give out the CPUs the raylet
// still holds for it.
func TestARemovedGroupStillBeingCancelledIsNotPruned(t *testing.T) {
	f, first := removedWithCancelUnconfirmed(t, 4, "connection timed out")
	f.m.mu.Lock()
	f.m.removed[first].info.RemovedTimeMs = f.m.now().Add(-2 * removedGroupRetention).UnixMilli()
	f.m.lastPrune = time.Time{}
	f.m.mu.Unlock()
	f.m.pruneRemoved()
	f.m.mu.Lock()
	_, kept := f.m.removed[first]
	f.m.mu.Unlock()
	if !kept {
		t.Fatal("the removed group was pruned while its cancel was unconfirmed")
	}
	f.m.viewStale.Store(true) // as a node change would: the view is rebuilt from the rows
	second := f.createNotPlacedUntilCancelled(first)
	f.m.lastPrune = time.Time{}
	f.m.pruneRemoved()
	f.m.mu.Lock()
	_, kept = f.m.removed[first]
	f.m.mu.Unlock()
	if kept {
		t.Fatal("the removed group, its cancel confirmed and older than the retention, was not pruned")
	}
	f.round()
	f.checkCreatedIsWhole(second)
}

// A raylet that refuses a reservation for want of room the GCS's view says it has may
// hold bundles no group owns (an undo's cancel lost to a partition): the GCS has it
// release them, and the group is placed at its next attempt. A call that failed for
// another reason (the raylet unreachable) asks for no reconcile.
func TestARefusedReservationReconcilesTheNode(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	f.round()
	orphan := &pb.BundleKey{PlacementGroupId: "orphan", BundleIndex: 0, Generation: 1}
	f.raylets.Plant("a", orphan)
	reconciles := func() int {
		return len(slices.DeleteFunc(f.raylets.Calls(), func(c reservertest.Call) bool { return c.Step != reservertest.ReleaseUnused }))
	}
	f.raylets.FailOn(reservertest.Prepare, "a", status.Error(codes.Unavailable, "connection refused"))
	group := f.create("PACK", 2)
	f.round()
	if n := reconciles(); n != 0 {
		t.Fatalf("an unreachable raylet was asked to reconcile %d times", n)
	}
	f.raylets.FailOn(reservertest.Prepare, "a", status.Error(codes.FailedPrecondition, "node a: insufficient resources: bundles need {CPU: 2}, available CPU 1"))
	f.m.mu.Lock()
	f.m.queue.wakeAll()
	f.m.mu.Unlock()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the refusing node reconciled", func() error {
		f.round()
		for _, b := range f.raylets.Held("a") {
			if b.PlacementGroupID == orphan.PlacementGroupId {
				return fmt.Errorf("it still holds the orphan (%d reconciles)", reconciles())
			}
		}
		return nil
	})
	f.raylets.FailOn(reservertest.Prepare, "a", nil)
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the group placed", func() error {
		f.m.mu.Lock()
		f.m.queue.wakeAll()
		f.m.mu.Unlock()
		f.round()
		if state := f.m.info(group).State; state != pb.PlacementGroupState_CREATED {
			return fmt.Errorf("it is %v", state)
		}
		return nil
	})
	f.checkCreatedIsWhole(group)
}
