package gcs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func oneGPU() resources.Set { return resources.Set{resources.GPU: resources.AmountScale} }

// Leases outside groups share their queue's quota with its groups, in the group ledger:
// prod's namespace maps to prod (16 GPUs, no borrowing); a 12-GPU group and 4 leases
// fill it, a fifth lease and a second group wait with QuotaExceeded; a returned lease
// lets the fifth in; a restart restores charges whatever the quota; a job's end returns
// its task leases; without queues nothing is charged.
func TestLeasesShareTheQueueQuotaWithGroups(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b")
	f.nodes.total = map[string]float64{"CPU": 64, "GPU": 8}
	f.queues = issueQueues(t)
	f.m = f.newManager()
	big, err := f.createIn("prod", "SPREAD", "", 12)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.checkCreatedIsWhole(big)

	lease := func(id string) leaseWork { return leaseWork{id: id, namespace: "prod", resources: oneGPU()} }
	var first []leaseWork
	for _, id := range []string{actorLeaseID("a1"), actorLeaseID("a2"), taskLeaseID("job1", "t1"), taskLeaseID("job1", "t2"), actorLeaseID("a5")} {
		first = append(first, lease(id))
	}
	for i := range first {
		first[i].arrival = int64(i)
	}
	d := f.m.admitLeases(first)
	if !d.enabled || len(d.admitted) != 4 || d.admitted[actorLeaseID("a1")] != "prod" {
		t.Fatalf("admitted %v, want the first four in prod", d.admitted)
	}
	if got := d.waiting[actorLeaseID("a5")]; got.reason != pending.QuotaExceeded || got.queue != "prod" {
		t.Fatalf("fifth lease waits with %v, want QuotaExceeded in prod", got)
	}
	usage := f.m.admission.ledger.Usage()["prod"][resources.GPU]
	if usage != 16*resources.AmountScale {
		t.Fatalf("prod's GPU usage %v, want 16", usage)
	}
	// A group of the queue is held back by the leases' charges too.
	second, err := f.createIn("prod", "PACK", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	f.waitPending(second, pending.QuotaExceeded) // beside the leases
	// Asked again, an admitted lease stays admitted (charged once).
	if again := f.m.admitLeases(first[:1]); again.admitted[actorLeaseID("a1")] != "prod" {
		t.Fatalf("an admitted lease asked again: %v", again)
	}
	f.m.returnLeases([]string{actorLeaseID("a1")})
	if d := f.m.admitLeases(first[4:]); d.admitted[actorLeaseID("a5")] != "prod" {
		t.Fatalf("the fifth lease after one returned: %v", d)
	}
	// A job's end returns its task leases, not its actors' (they die on their own).
	f.m.onJobDead(&pb.JobInfo{JobId: "job1"})
	for _, id := range []string{taskLeaseID("job1", "t1"), taskLeaseID("job1", "t2")} {
		if f.m.admission.ledger.Holds(id) {
			t.Fatalf("%s still charged after its job ended", id)
		}
	}
	if !f.m.admission.ledger.Holds(actorLeaseID("a2")) {
		t.Fatal("an actor's charge was returned with the job's task leases")
	}
	f.waitCreated(second) // once the job's leases were returned

	// A restarted GCS charges what the actor table says ran, over the quota if it must.
	f.m = f.newManager()
	if _, err := f.m.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	var restored []leaseWork
	for i := range 20 {
		w := lease(actorLeaseID(string(rune('a' + i))))
		w.queue = "prod"
		restored = append(restored, w)
	}
	f.m.restoreLeases(restored)
	if got := f.m.admission.ledger.Usage()["prod"][resources.GPU]; got != (12+1+20)*resources.AmountScale {
		t.Fatalf("prod's GPU usage after restoring 20 leases beside the two groups: %v, want 33", got)
	}

	// Without queues nothing is charged and everything may start.
	f.queues = nil
	f.m = f.newManager()
	if d := f.m.admitLeases(first); d.enabled || len(d.waiting) != 0 {
		t.Fatalf("without queues: %+v", d)
	}
}

// An actor's charge survives a GCS restart: its ALIVE row names its queue, and the next
// GCS charges it again before it admits anything, so a new actor that would pass the
// quota waits with QuotaExceeded.
func TestActorChargesSurviveAGCSRestart(t *testing.T) {
	st := keepOpenStore{store.NewMemory()}
	ctx := context.Background()
	withQueues := func(c *Config) {
		c.ReconnectGrace = time.Hour
		c.Queues = []byte("queues: [{name: team, namespaces: [team], resources: {CPU: {nominalQuota: 2}}}]\n")
	}
	f := newActorFixture(t, st, withQueues)
	alive := &pb.NodeInfo{NodeId: "node-alive", RayletAddress: "127.0.0.1:1", State: pb.NodeState_ALIVE, ResourcesTotal: map[string]float64{"CPU": 8}}
	raw, _ := proto.Marshal(alive)
	if err := st.Put(ctx, store.TableNodes, alive.NodeId, raw); err != nil {
		t.Fatal(err)
	}
	row := &pb.ActorInfo{ActorId: "aa", JobId: f.jobID, ClassName: "Counter", Namespace: "team", State: pb.ActorState_ACTOR_ALIVE,
		NodeId: "node-alive", Pid: 42, WorkerId: "w-aa", Address: "127.0.0.1:2", BundleIndex: -1, Queue: "team",
		RequiredResources: map[string]float64{"CPU": 1}, SchedulingStrategy: &pb.SchedulingStrategy{Kind: strategyDefault}, StartTimeMs: 1, ExecutableSha256: f.sha}
	raw, _ = proto.Marshal(row)
	if err := st.Put(ctx, store.TableActors, row.ActorId, raw); err != nil {
		t.Fatal(err)
	}
	f.s.Stop()

	second := startGCS(t, st, withQueues)
	reply, err := (queueService{m: second.pgs}).ListQueues(ctx, &pb.ListQueuesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var usage float64
	for _, q := range reply.Queues {
		for _, r := range q.Resources {
			if q.Queue == "team" && r.Resource == "CPU" {
				usage = r.Usage
			}
		}
	}
	if usage != 1 {
		t.Fatalf("team's CPU usage after the restart: %g, want the ALIVE actor's 1", usage)
	}
	c := dialActors(t, second.Address())
	created, err := c.actors.CreateActor(ctx, f.request(func(r *pb.CreateActorRequest) { r.RequiredResources = map[string]float64{"CPU": 2} }))
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the new actor waits for quota", func() error {
		got, err := c.actors.GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: created.Actor.ActorId})
		if err != nil {
			return err
		}
		if got.Actor.PendingReasonCode != string(pending.QuotaExceeded) {
			return fmt.Errorf("%v %q %q", got.Actor.State, got.Actor.PendingReasonCode, got.Actor.PendingReason)
		}
		return nil
	})
}
