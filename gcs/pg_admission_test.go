package gcs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/invariants"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
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

// Property: after any seeded sequence of creates, removes, node deaths (and a new node
// in their place) and GCS restarts, the quota ledger equals the sum of what the table
// says is admitted (every group neither PENDING nor REMOVED, charged its bundles), and
// no queue is over its limit (the invariant checker's quota rule finds nothing).
func TestQuotaAccountingEqualsTheAdmittedWorkAfterAnySequence(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			f := &twoPhaseFixture{t: t}
			*f = *newTwoPhaseFixture(t, "n0", "n1", "n2")
			f.nodes.total = map[string]float64{"CPU": 64, "GPU": 8}
			f.queues = issueQueues(t)
			f.m = f.newManager()
			nextNode := 3
			var live []string
			for step := range 40 {
				switch op := rng.IntN(10); {
				case op < 5:
					namespace := []string{"research", "prod", "research-x"}[rng.IntN(3)]
					id, err := f.createIn(namespace, []string{"PACK", "SPREAD", "STRICT_PACK"}[rng.IntN(3)], "", 1+rng.IntN(4))
					if err != nil {
						t.Fatal(err)
					}
					live = append(live, id)
				case op < 7 && len(live) > 0:
					i := rng.IntN(len(live))
					if err := f.m.remove(live[i], removedByOwner); err != nil {
						t.Fatal(err)
					}
					live = slices.Delete(live, i, i+1)
				case op < 9:
					f.nodes.mu.Lock()
					dead := f.nodes.alive[rng.IntN(len(f.nodes.alive))]
					f.nodes.mu.Unlock()
					f.nodes.kill(dead)
					f.m.onNodeDead(dead)
					f.nodes.mu.Lock()
					f.nodes.alive = append(f.nodes.alive, fmt.Sprintf("n%d", nextNode))
					f.nodes.mu.Unlock()
					nextNode++
					f.m.nodesChanged()
				default:
					f.settle()
					restarted := f.newManager()
					prepared, err := restarted.load(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					f.m = restarted
					restarted.recoverPrepared(prepared)
				}
				f.settle()
				f.settle()
				checkLedgerMatchesTable(t, f.m, step)
			}
		})
	}
}

// checkLedgerMatchesTable compares the ledger with the table's admitted groups, and
// checks the quota invariant on the table.
func checkLedgerMatchesTable(t *testing.T, m *pgManager, step int) {
	t.Helper()
	m.mu.Lock()
	ledger := m.admission.ledger.Usage()
	var groups []*pb.PlacementGroupInfo
	for _, e := range m.groups {
		groups = append(groups, proto.Clone(e.info).(*pb.PlacementGroupInfo))
	}
	m.mu.Unlock()
	fromTable := map[string]resources.Set{}
	for _, g := range groups {
		if g.State == pb.PlacementGroupState_PENDING || g.State == pb.PlacementGroupState_REMOVED {
			continue
		}
		for _, b := range g.Bundles {
			set, err := resources.SetFromFloat(b.UnitResources)
			if err != nil {
				t.Fatal(err)
			}
			fromTable[g.Queue] = fromTable[g.Queue].Add(set)
		}
	}
	for _, queue := range []string{"research", "prod"} {
		if !ledger[queue].Equal(fromTable[queue]) {
			t.Fatalf("step %d: queue %s: ledger %v, the table's admitted groups %v", step, queue, ledger[queue], fromTable[queue])
		}
	}
	reply, err := (queueService{m: m}).ListQueues(context.Background(), &pb.ListQueuesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if overruns := invariants.CheckQuotas(groups, nil, reply.Queues); len(overruns) > 0 {
		t.Fatalf("step %d: %v", step, overruns)
	}
}
