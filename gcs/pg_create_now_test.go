package gcs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// A create whose caller waits for the first attempt is placed inside the call, without
// a scheduling round, when nothing waits ahead of it; otherwise the loop's order holds.
// No round runs in these tests unless they call f.round().

// createWaiting sends a create that waits for the group's first attempt and carries
// removals; it returns the group's row as answered.
func (f *twoPhaseFixture) createWaiting(cpus float64, remove ...string) (*pb.PlacementGroupInfo, error) {
	f.t.Helper()
	reply, err := f.m.CreatePlacementGroup(context.Background(), &pb.CreatePlacementGroupRequest{
		Strategy: "PACK", Lifetime: lifetimeDetached, WaitFirstAttemptMs: 50, RemovePlacementGroupIds: remove,
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": cpus}}},
	})
	return reply.GetPlacementGroup(), err
}

func TestACreateThatWaitsIsPlacedInItsOwnCall(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	f.round() // the view is built once, as the running loop does at start
	for range 3 {
		info, err := f.createWaiting(1)
		if err != nil || info.State != pb.PlacementGroupState_CREATED {
			t.Fatalf("create answered %v (%s), %v; want CREATED without a round", info.GetState(), info.GetPendingReason(), err)
		}
		f.checkCreatedIsWhole(info.PlacementGroupId)
	}
	// The view counted what it placed: a fourth CPU fits, a fifth does not, and waits
	// for the loop, which says why.
	if info, err := f.createWaiting(1); err != nil || info.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("fourth create: %v, %v", info.GetState(), err)
	}
	info, err := f.createWaiting(1)
	if err != nil || info.State != pb.PlacementGroupState_PENDING {
		t.Fatalf("fifth create on a full node: %v, %v; want PENDING", info.GetState(), err)
	}
	f.round()
	if got := f.m.info(info.PlacementGroupId); got.PendingReasonCode == "" {
		t.Fatalf("after a round the fifth group says no reason: %v", got)
	}
}

func TestACreateIsPlacedInItsCallOnlyWhenNothingWaitsAheadOfIt(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	f.round()
	// A group of another shape, queued and not tried yet, goes first.
	ahead := f.create("PACK", 1)
	info, err := f.createWaiting(2)
	if err != nil || info.State != pb.PlacementGroupState_PENDING {
		t.Fatalf("create behind a group not tried yet: %v, %v; want PENDING", info.GetState(), err)
	}
	f.round()
	f.checkCreatedIsWhole(ahead)
	f.checkCreatedIsWhole(info.PlacementGroupId)
	// A shape that cannot fit and is parked holds nobody back.
	parked, err := f.createWaiting(100)
	if err != nil || parked.State != pb.PlacementGroupState_PENDING {
		t.Fatalf("a group larger than the node: %v, %v", parked.GetState(), err)
	}
	f.round()
	if info, err := f.createWaiting(1); err != nil || info.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("create behind a parked shape: %v, %v; want CREATED", info.GetState(), err)
	}
}

func TestRemovalsRidingOnACreateAreAppliedBeforeIt(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	f.round()
	first, err := f.createWaiting(3)
	if err != nil || first.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("first: %v, %v", first.GetState(), err)
	}
	// The node has 4 CPUs: the second group fits once the first is removed, and the
	// loop places it once the raylet confirmed the cancel.
	second, err := f.createWaiting(3, first.PlacementGroupId, "unknown-ids-are-no-error")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.stored(first.PlacementGroupId); got.State != pb.PlacementGroupState_REMOVED || got.RemovalReason != removedByOwner {
		t.Fatalf("the group removed before the create is stored %v (%q)", got.State, got.RemovalReason)
	}
	f.listener.saw(t, first.PlacementGroupId, true, true)
	// The second group is placed in its own call if the cancel was confirmed by then,
	// else by the loop.
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the first group released", func() error {
		for node, held := range f.raylets.HeldAnywhere() {
			for _, b := range held {
				if b.PlacementGroupID == first.PlacementGroupId {
					return fmt.Errorf("node %s holds %s", node, b)
				}
			}
		}
		return nil
	})
	f.round()
	f.checkCreatedIsWhole(second.PlacementGroupId)
}

func TestACreateWhoseRemovalCannotBeSavedDoesNothing(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	f.round()
	first, err := f.createWaiting(1)
	if err != nil {
		t.Fatal(err)
	}
	f.writer.setStopped(true)
	_, err = f.createWaiting(1, first.PlacementGroupId)
	if status.Code(statusOf(err)) != codes.Unavailable || !errors.Is(err, errUnavailable) {
		t.Fatalf("create carrying a removal the store refused: %v, want Unavailable", err)
	}
	f.writer.setStopped(false)
	f.m.mu.Lock()
	live := len(f.m.groups)
	f.m.mu.Unlock()
	if got := f.m.info(first.PlacementGroupId); got.State != pb.PlacementGroupState_CREATED || live != 1 {
		t.Fatalf("after the refused create: first %v, %d live groups; want it CREATED and alone", got.State, live)
	}
}

// liveJob is a job table of one live job.
type liveJob string

func (j liveJob) get(id string) *pb.JobInfo {
	if id != string(j) {
		return nil
	}
	return &pb.JobInfo{JobId: id, Namespace: "ns"}
}

// A removal riding on a numbered create is applied after the creates numbered before it,
// even when the create that made the group arrives after the one carrying its removal.
func TestARemovalRidingOnANumberedCreateWaitsForTheCreatesBeforeIt(t *testing.T) {
	const job = "01000000"
	f := newTwoPhaseFixture(t, "a")
	f.m.jobs = liveJob(job)
	f.round()
	first, second := strings.Repeat("ab", placementGroupIDBytes)+job, strings.Repeat("cd", placementGroupIDBytes)+job
	create := func(id string, seq int64, remove ...string) error {
		_, err := f.m.CreatePlacementGroup(context.Background(), &pb.CreatePlacementGroupRequest{
			PlacementGroupId: id, CreatorJobId: job, ClientSeq: seq, Strategy: "PACK", WaitFirstAttemptMs: 50,
			RemovePlacementGroupIds: remove, Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}},
		})
		return err
	}
	secondDone := make(chan error, 1)
	go func() { secondDone <- create(second, 2, first) }()
	poll.Until(t, 10*time.Second, time.Millisecond, "the second create waits for the first", func() error {
		f.m.order.mu.Lock()
		defer f.m.order.mu.Unlock()
		if f.m.order.jobs[job] == nil {
			return errors.New("not waiting yet")
		}
		return nil
	})
	if err := create(first, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
	if got := f.m.info(first); got.GetState() != pb.PlacementGroupState_REMOVED {
		t.Fatalf("the group whose removal rode on the next create is %v, want REMOVED", got.GetState())
	}
	f.checkCreatedIsWhole(second)
}
