package gcs

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// A client that chose its group's id may send the create again (its answer was lost):
// the GCS answers the group it made, in whatever state, and never makes a second one.
func TestCreateWithAClientChosenIDIsIdempotent(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	id := strings.Repeat("ab", placementGroupIDBytes) + "00000000"
	create := func(namespace string) (*pb.PlacementGroupInfo, error) {
		reply, err := f.m.CreatePlacementGroup(context.Background(), &pb.CreatePlacementGroupRequest{
			PlacementGroupId: id, Strategy: "PACK", Lifetime: lifetimeDetached, Namespace: namespace,
			Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}},
		})
		return reply.GetPlacementGroup(), err
	}
	live := func() int {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		return len(f.m.groups)
	}
	for _, want := range []pb.PlacementGroupState{pb.PlacementGroupState_PENDING, pb.PlacementGroupState_PENDING} {
		info, err := create("")
		if err != nil || info.PlacementGroupId != id || info.State != want {
			t.Fatalf("create: %v, %v", info, err)
		}
	}
	if n := live(); n != 1 {
		t.Fatalf("%d live groups after the same create twice, want 1", n)
	}
	f.round()
	f.checkCreatedIsWhole(id)
	if info, err := create(""); err != nil || info.State != pb.PlacementGroupState_CREATED || live() != 1 {
		t.Fatalf("create of a CREATED group again: %v, %v, %d live", info, err, live())
	}
	f.waitHeld(id, 1)
	if err := f.m.remove(id, removedByOwner); err != nil {
		t.Fatal(err)
	}
	if info, err := create(""); err != nil || info.State != pb.PlacementGroupState_REMOVED || live() != 0 {
		t.Fatalf("create of a removed group again: %v, %v, %d live", info, err, live())
	}
	// Another creator's id is refused, as are ids of another shape.
	if _, err := create("elsewhere"); status.Code(statusOf(err)) != codes.InvalidArgument || !strings.Contains(err.Error(), "another group's id") {
		t.Fatalf("create with another namespace's id: %v", err)
	}
	for _, bad := range []string{"abc", strings.ToUpper(id), strings.Repeat("ab", placementGroupIDBytes) + "00000001", id + "00"} {
		id = bad
		if _, err := create(""); status.Code(statusOf(err)) != codes.InvalidArgument || !strings.Contains(err.Error(), "placement_group_id") {
			t.Fatalf("create with id %q: %v", bad, err)
		}
	}
}
