package gcs

import (
	"context"
	"os"
	"testing"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/pending"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func issueQueues(t *testing.T) *queues.Config {
	t.Helper()
	data, err := os.ReadFile("../admission/queues/testdata/issue-example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := queues.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// createIn makes a detached group of n one-GPU bundles in a namespace.
func (f *twoPhaseFixture) createIn(namespace, strategy, priority string, n int) (string, error) {
	req := &pb.CreatePlacementGroupRequest{Strategy: strategy, Lifetime: lifetimeDetached, Namespace: namespace, Priority: priority}
	for range n {
		req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: map[string]float64{"GPU": 1}})
	}
	reply, err := f.m.CreatePlacementGroup(context.Background(), req)
	if err != nil {
		return "", err
	}
	return reply.PlacementGroup.PlacementGroupId, nil
}

// The issue's cohort scenario on 3 nodes × 8 GPUs: research (nominal 8, may borrow 8)
// runs 4 PACK groups of 4 GPUs (16, 8 borrowed from prod's idle quota); the fifth waits
// with QuotaExceeded; prod's groups are admitted as research's finish.
func TestCohortBorrowingAdmitsUpToTheBorrowingLimit(t *testing.T) {
	f := &twoPhaseFixture{t: t}
	*f = *newTwoPhaseFixture(t, "a", "b", "c")
	f.nodes.total = map[string]float64{"CPU": 64, "GPU": 8}
	f.queues = issueQueues(t)
	f.m = f.newManager()
	var research []string
	for range 5 {
		id, err := f.createIn("research", "PACK", "training", 4)
		if err != nil {
			t.Fatal(err)
		}
		research = append(research, id)
		f.settle()
	}
	for _, id := range research[:4] {
		f.checkCreatedIsWhole(id)
		if got := f.m.info(id).Queue; got != "research" {
			t.Fatalf("queue %q, want research (from the namespace)", got)
		}
	}
	fifth := f.m.info(research[4])
	if fifth.State != pb.PlacementGroupState_PENDING || fifth.PendingReasonCode != string(pending.QuotaExceeded) ||
		fifth.Stats.SchedulingState != pb.SchedulingState_QUEUED {
		t.Fatalf("fifth research group: %v %q %v, want PENDING, QuotaExceeded, QUEUED", fifth.State, fifth.PendingReasonCode, fifth.Stats.SchedulingState)
	}
	// prod asks for 8 GPUs: 8 are free on the cluster, but research borrows prod's quota.
	prod, err := f.createIn("prod", "PACK", "", 4)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.checkCreatedIsWhole(prod) // prod's nominal quota is 16, none of it used by prod
	if info := f.m.info(prod); info.Queue != "prod" {
		t.Fatalf("queue %q, want prod", info.Queue)
	}
	// research's groups finish: the waiting one is admitted within research's limit.
	for _, id := range research[:2] {
		if err := f.m.remove(id, removedByOwner); err != nil {
			t.Fatal(err)
		}
	}
	f.settle()
	f.settle()
	f.checkCreatedIsWhole(research[4])

	// Unknown queue or priority class: InvalidArgument naming the field.
	if _, err := f.createIn("research", "PACK", "no-such-class", 1); err == nil {
		t.Fatal("an unknown priority class was accepted")
	}
	req := &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: lifetimeDetached, Queue: "nope",
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"GPU": 1}}}}
	if _, err := f.m.CreatePlacementGroup(context.Background(), req); err == nil {
		t.Fatal("an unknown queue was accepted")
	}
}

// With declared runtimes a waiting gang's reservation is timed (EASY backfill in the
// GCS): on 8 GPUs, 4 run for 100 s; an 8-GPU gang waits for them; 2 GPUs that end in
// 50 s start beside it, 2 GPUs without an end or that run 200 s wait (they would delay
// the gang). Without declared ends every smaller GPU group waited.
func TestDeclaredRuntimesLetSmallGroupsBackfillAroundAWaitingGang(t *testing.T) {
	f := &twoPhaseFixture{t: t}
	*f = *newTwoPhaseFixture(t, "a")
	f.nodes.total = map[string]float64{"CPU": 64, "GPU": 8}
	cfg, err := queues.Load([]byte("queues:\n  - name: team\n    namespaces: [\"team\"]\n    resources:\n      GPU: {nominalQuota: 64}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f.queues = cfg
	f.m = f.newManager()
	create := func(gpus int, runtime int64) string {
		t.Helper()
		req := &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: lifetimeDetached, Namespace: "team", MaxRuntimeS: runtime}
		for range gpus {
			req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: map[string]float64{"GPU": 1}})
		}
		reply, err := f.m.CreatePlacementGroup(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return reply.PlacementGroup.PlacementGroupId
	}
	running := create(4, 100)
	f.settle()
	f.checkCreatedIsWhole(running)
	gang := create(8, 3600)
	endsInTime := create(2, 50)
	endless := create(2, 0)
	endsLate := create(2, 200)
	f.settle()
	f.settle()
	f.checkCreatedIsWhole(endsInTime)
	if info := f.m.info(gang); info.State != pb.PlacementGroupState_PENDING {
		t.Fatalf("the gang: %v, want PENDING until the 100 s group ends", info.State)
	}
	for name, id := range map[string]string{"no declared end": endless, "ending after the gang's time": endsLate} {
		if info := f.m.info(id); info.State != pb.PlacementGroupState_PENDING || info.PendingReasonCode != string(pending.BlockedByReservation) {
			t.Fatalf("2 GPUs %s: %v %q, want PENDING with BlockedByReservation", name, info.State, info.PendingReasonCode)
		}
	}
}
