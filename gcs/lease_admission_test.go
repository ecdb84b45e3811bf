package gcs

import (
	"context"
	"testing"

	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
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
