package gcs

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/gcs/reservertest"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// teamQueues is one queue of 8 GPUs whose work evicts its own lower-priority work.
const teamQueues = `
queues:
  - name: team
    namespaces: ["team"]
    resources:
      GPU: {nominalQuota: 8}
    preemption:
      withinClusterQueue: LowerPriority
priorityClasses:
  - {name: pinned, value: 100, preemptible: false}
  - {name: quick, value: 100, gracePeriod: 5s}
`

// newPreemptionFixture is one node of 8 GPUs under teamQueues, on the fixture's clock.
func newPreemptionFixture(t *testing.T) *twoPhaseFixture {
	t.Helper()
	f := newTwoPhaseFixture(t, "a")
	f.nodes.total = map[string]float64{"CPU": 64, "GPU": 8}
	cfg, err := queues.Load([]byte(teamQueues))
	if err != nil {
		t.Fatal(err)
	}
	f.queues = cfg
	f.m = f.newManager()
	return f
}

// running creates a group of n GPUs in the team queue and waits until it is CREATED.
func (f *twoPhaseFixture) running(priority string, n int) string {
	f.t.Helper()
	id, err := f.createIn("team", "PACK", priority, n)
	if err != nil {
		f.t.Fatal(err)
	}
	f.settle()
	f.checkCreatedIsWhole(id)
	return id
}

// waitPending waits (running rounds) until the group is PENDING with the reason.
func (f *twoPhaseFixture) waitPending(id string, reason pending.Reason) *pb.PlacementGroupInfo {
	f.t.Helper()
	var info *pb.PlacementGroupInfo
	poll.Until(f.t, 10*time.Second, 5*time.Millisecond, fmt.Sprintf("group %s PENDING %s", id[:8], reason), func() error {
		f.m.scheduleRound()
		info = f.m.info(id)
		if info.State != pb.PlacementGroupState_PENDING || info.PendingReasonCode != string(reason) {
			return fmt.Errorf("%v %q", info.State, info.PendingReasonCode)
		}
		return nil
	})
	return info
}

// waitCreated runs rounds until the group is CREATED and whole on the raylets.
func (f *twoPhaseFixture) waitCreated(id string) {
	f.t.Helper()
	poll.Until(f.t, 10*time.Second, 5*time.Millisecond, fmt.Sprintf("group %s CREATED", id[:8]), func() error {
		f.m.scheduleRound()
		if info := f.m.info(id); info.State != pb.PlacementGroupState_CREATED {
			return fmt.Errorf("%v %q", info.State, info.PendingReasonCode)
		}
		return nil
	})
	f.settle()
	f.checkCreatedIsWhole(id)
}

// The within-queue case: a training-high group evicts the lowest-priority group
// of its full queue; the victim's row shows the notice, its hook's acknowledgement
// releases it, it waits with Preempted while the preemptor runs, and it runs again once
// the preemptor is removed. Quotas and gangs hold at every step.
func TestHigherPriorityGroupPreemptsTheLowestAfterTheHookAcknowledges(t *testing.T) {
	f := newPreemptionFixture(t)
	low := f.running("development", 4)
	mid := f.running("training", 4)
	start := f.clock.Now()

	// The owner's long poll, started before anything happens.
	notices := make(chan *pb.PreemptionNotice, 1)
	go func() {
		reply, err := f.m.WaitPreemptionNotice(context.Background(), &pb.WaitPreemptionNoticeRequest{PlacementGroupId: low, WaitMs: 10_000})
		if err != nil {
			t.Error(err)
		}
		notices <- reply.GetNotice()
	}()

	high, err := f.createIn("team", "PACK", "training-high", 4)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.settle()
	info := f.m.info(high)
	if info.State != pb.PlacementGroupState_PENDING || info.PendingReasonCode != string(pending.PreemptionDelay) {
		t.Fatalf("preemptor: %v %q, want PENDING PreemptionDelay", info.State, info.PendingReasonCode)
	}
	notice := <-notices
	if notice == nil || notice.Reason != "InClusterQueue" || notice.PreemptorId != high ||
		notice.DeadlineMs != start.Add(time.Duration(queues.DefaultGracePeriod)).UnixMilli() {
		t.Fatalf("notice %v, want InClusterQueue by %s, deadline now+30s", notice, high)
	}
	row := f.m.info(low)
	if row.State != pb.PlacementGroupState_CREATED || row.Preemptions != 1 || row.LastPreemption.GetPreemptorId() != high {
		t.Fatalf("victim row: %v preemptions=%d last=%v", row.State, row.Preemptions, row.LastPreemption)
	}
	if stored := f.stored(low); stored.Preemptions != 1 {
		t.Fatal("the notice is not persisted")
	}
	// Nothing else moved: mid untouched, high not placed before low is released.
	f.checkCreatedIsWhole(mid)
	f.checkCreatedIsWhole(low)
	for _, held := range f.raylets.HeldAnywhere() {
		for _, b := range held {
			if b.PlacementGroupID == high {
				t.Fatalf("the preemptor holds %v before its victim is released", b)
			}
		}
	}
	checkLedgerMatchesTable(t, f.m, 0)

	// The hook returns: the victim is released and queued again; the preemptor runs.
	if _, err := f.m.AckPreemptionNotice(context.Background(), &pb.AckPreemptionNoticeRequest{PlacementGroupId: low, TimeMs: notice.TimeMs}); err != nil {
		t.Fatal(err)
	}
	row = f.waitPending(low, pending.Preempted)
	if !row.LastPreemption.Acknowledged || row.Name != "" || row.Priority != 100 || row.Queue != "team" {
		t.Fatalf("evicted row %v", row)
	}
	for _, b := range row.Bundles {
		if b.NodeId != "" {
			t.Fatalf("evicted group still places bundle %d on %s", b.BundleIndex, b.NodeId)
		}
	}
	f.waitCreated(high)
	f.checkCreatedIsWhole(mid)
	checkLedgerMatchesTable(t, f.m, 1)

	// The preemptor leaves: the victim runs again, same id.
	if err := f.m.remove(high, removedByOwner); err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.waitCreated(low)
	checkLedgerMatchesTable(t, f.m, 2)
	if got := f.m.info(low).Preemptions; got != 1 {
		t.Fatalf("preemptions %d, want 1", got)
	}
}

// quickVictimNoticed is a preemption fixture whose team queue runs a "quick" group
// (gracePeriod 5 s) and a "training" one, 4 GPUs each, when a "training-high" group of 4
// GPUs arrives: the quick one is noticed. It returns the victim and the preemptor.
func quickVictimNoticed(t *testing.T) (f *twoPhaseFixture, low, high string) {
	f = newPreemptionFixture(t)
	low = f.running("quick", 4)
	f.running("training", 4)
	high, err := f.createIn("team", "PACK", "training-high", 4)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.settle()
	return f, low, high
}

// Without an acknowledgement the victim is released at its deadline: its class's
// gracePeriod after the notice, not before.
func TestAVictimWithoutAHookIsReleasedAtItsDeadline(t *testing.T) {
	f, low, high := quickVictimNoticed(t)
	row := f.m.info(low)
	if row.LastPreemption == nil || row.LastPreemption.DeadlineMs-row.LastPreemption.TimeMs != 5000 {
		t.Fatalf("notice %v, want a 5 s deadline", row.LastPreemption)
	}
	f.clock.Advance(4 * time.Second)
	f.settle()
	f.settle()
	if info := f.m.info(low); info.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("released before its deadline: %v", info.State)
	}
	f.clock.Advance(2 * time.Second)
	f.waitPending(low, pending.Preempted)
	f.waitCreated(high)
	checkLedgerMatchesTable(t, f.m, 0)
}

// A victim whose cancel the raylet does not confirm (a partition) stays held, and its
// preemptor waits, until the raylet confirms: the cancel is sent again meanwhile.
func TestAVictimIsReleasedOnlyOnceTheRayletConfirmsItsCancel(t *testing.T) {
	f, low, high := quickVictimNoticed(t)
	f.raylets.FailOn(reservertest.Cancel, "a", errors.New("connection timed out"))
	f.clock.Advance(6 * time.Second)
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the victim's cancel sent again", func() error {
		f.m.scheduleRound()
		if n := f.cancelsOf(low); n < 2 {
			return fmt.Errorf("%d cancel calls", n)
		}
		return nil
	})
	f.settle()
	if info := f.m.info(low); info.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("the victim was released (%v) before the raylet confirmed its cancel", info.State)
	}
	if info := f.m.info(high); info.State == pb.PlacementGroupState_CREATED {
		t.Fatalf("the preemptor was placed in room the raylet still holds for the victim: %v", f.raylets.Held("a"))
	}
	f.raylets.FailOn(reservertest.Cancel, "a", nil)
	f.waitPending(low, pending.Preempted)
	f.waitCreated(high)
	checkLedgerMatchesTable(t, f.m, 0)
}

// Non-preemptible classes are never evicted, nor work of equal priority under
// LowerPriority: the waiting group keeps admission's reason.
func TestNonPreemptibleAndEqualPriorityGroupsAreNeverEvicted(t *testing.T) {
	f := newPreemptionFixture(t)
	pinned := f.running("pinned", 4)
	peer := f.running("training", 4)
	waiting, err := f.createIn("team", "PACK", "training", 4)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.clock.Advance(time.Hour) // well past every delay and deadline
		f.settle()
	}
	if info := f.m.info(waiting); info.State != pb.PlacementGroupState_PENDING || info.PendingReasonCode != string(pending.QuotaExceeded) {
		t.Fatalf("equal priority: %v %q, want PENDING QuotaExceeded", info.State, info.PendingReasonCode)
	}
	high, err := f.createIn("team", "PACK", "training-high", 4)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.settle()
	// training-high may evict peer (training), never pinned.
	if info := f.m.info(pinned); info.Preemptions != 0 {
		t.Fatalf("a non-preemptible group got a notice: %v", info.LastPreemption)
	}
	if info := f.m.info(peer); info.Preemptions != 1 || info.LastPreemption.PreemptorId != high {
		t.Fatalf("peer: %d notices, last %v; want one from %s", info.Preemptions, info.LastPreemption, high)
	}
	if info := f.m.info(waiting); info.Preemptions != 0 {
		t.Fatal("a pending group got a notice")
	}
}

// cohortQueues is the cohort: research borrows prod's idle quota, prod takes it
// back (reclaimWithinCohort: Any).
const cohortQueues = `
cohorts:
  - name: ml
queues:
  - name: research
    cohort: ml
    namespaces: ["research"]
    resources:
      GPU: {nominalQuota: 8, borrowingLimit: 8}
  - name: prod
    cohort: ml
    namespaces: ["prod"]
    resources:
      GPU: {nominalQuota: 16, borrowingLimit: 0}
    preemption:
      reclaimWithinCohort: Any
`

// The reclaim on 3 nodes × 8 GPUs: research runs three 4-GPU groups (4 GPUs
// borrowed); prod's first 8-GPU group is admitted at once, its second reclaims exactly
// research's last-admitted group.
func TestAQueueReclaimsWhatItLentFromTheLastAdmittedBorrower(t *testing.T) {
	f := newTwoPhaseFixture(t, "a", "b", "c")
	f.nodes.total = map[string]float64{"CPU": 64, "GPU": 8}
	cfg, err := queues.Load([]byte(cohortQueues))
	if err != nil {
		t.Fatal(err)
	}
	f.queues = cfg
	f.m = f.newManager()
	var research []string
	for range 3 {
		id, err := f.createIn("research", "PACK", "training", 4)
		if err != nil {
			t.Fatal(err)
		}
		f.settle()
		f.checkCreatedIsWhole(id)
		research = append(research, id)
		f.clock.Advance(time.Second) // admitted one after the other
	}
	first, err := f.createIn("prod", "PACK", "training-high", 8)
	if err != nil {
		t.Fatal(err)
	}
	f.waitCreated(first)
	second, err := f.createIn("prod", "PACK", "training-high", 8)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.settle()
	for i, id := range research {
		info := f.m.info(id)
		want := int32(0)
		if i == 2 {
			want = 1
		}
		if info.Preemptions != want {
			t.Fatalf("research[%d]: %d notices (%v), want %d; preemptor %v %q", i, info.Preemptions, info.LastPreemption, want,
				f.m.info(second).State, f.m.info(second).PendingReason)
		}
	}
	if n := f.m.info(research[2]).LastPreemption; n.Reason != "InCohortReclamation" || n.PreemptorId != second {
		t.Fatalf("notice %v", n)
	}
	if _, err := f.m.AckPreemptionNotice(context.Background(), &pb.AckPreemptionNoticeRequest{PlacementGroupId: research[2]}); err != nil {
		t.Fatal(err)
	}
	f.waitPending(research[2], pending.Preempted)
	f.waitCreated(second)
	checkLedgerMatchesTable(t, f.m, 0)
	for _, id := range []string{first, second} {
		if err := f.m.remove(id, removedByOwner); err != nil {
			t.Fatal(err)
		}
	}
	f.settle()
	f.waitCreated(research[2])
	checkLedgerMatchesTable(t, f.m, 1)
}

// A notice outlives a GCS restart: the restarted GCS releases the victim at the
// deadline the first one set.
func TestANoticeRunsOnAcrossAGCSRestart(t *testing.T) {
	f := newPreemptionFixture(t)
	low := f.running("development", 4)
	f.running("training", 4)
	high, err := f.createIn("team", "PACK", "training-high", 4)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.settle()
	if f.m.info(low).LastPreemption == nil {
		t.Fatal("no notice")
	}
	restarted := f.newManager()
	prepared, err := restarted.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.m = restarted
	restarted.recoverPrepared(prepared)
	f.settle()
	if info := f.m.info(low); info.State != pb.PlacementGroupState_CREATED {
		t.Fatalf("released before the deadline: %v", info.State)
	}
	f.clock.Advance(15 * time.Second)
	f.settle()
	f.settle()
	f.m.mu.Lock()
	var noticed []string
	for id, e := range f.m.groups {
		if id != low && e.info.Preemptions != 0 {
			noticed = append(noticed, id[:8])
		}
	}
	f.m.mu.Unlock()
	if len(noticed) > 0 {
		t.Fatalf("the restarted GCS noticed %v too: the preemptor waits for its victim", noticed)
	}
	f.clock.Advance(16 * time.Second)
	f.waitPending(low, pending.Preempted)
	f.waitCreated(high)
	checkLedgerMatchesTable(t, f.m, 0)
}

// waitQueues is one queue whose quota (16 GPUs) is more than its one 8-GPU node holds:
// what holds its work back is capacity, which the autoscaler can add.
const waitQueues = `
queues:
  - name: team
    namespaces: ["team"]
    resources:
      GPU: {nominalQuota: 16}
    preemption:
      withinClusterQueue: LowerPriority
      preemptionDelay: 1m
`

func newWaitFixture(t *testing.T) *twoPhaseFixture {
	t.Helper()
	f := newTwoPhaseFixture(t, "a")
	f.nodes.total = map[string]float64{"CPU": 64, "GPU": 8}
	cfg, err := queues.Load([]byte(waitQueues))
	if err != nil {
		t.Fatal(err)
	}
	f.queues = cfg
	f.m = f.newManager()
	return f
}

// checkNoticedOnceBy fails unless the group got exactly one notice, from preemptor.
func (f *twoPhaseFixture) checkNoticedOnceBy(id, preemptor string) {
	f.t.Helper()
	if info := f.m.info(id); info.Preemptions != 1 || info.LastPreemption.GetPreemptorId() != preemptor {
		f.t.Fatalf("group %s: %d notices, last %v; want one from %s", id[:8], info.Preemptions, info.LastPreemption, preemptor)
	}
}

// checkNoNotices fails when any group got a preemption notice.
func (f *twoPhaseFixture) checkNoNotices(ids ...string) {
	f.t.Helper()
	for _, id := range ids {
		if info := f.m.info(id); info.Preemptions != 0 || info.State != pb.PlacementGroupState_CREATED {
			f.t.Fatalf("group %s: %v with %d notices (last %v), want CREATED and never noticed", id[:8], info.State, info.Preemptions, info.LastPreemption)
		}
	}
}

// Wait or preempt: a preemptor whose new node the autoscaler expects within the queue's
// preemptionDelay waits for it (WaitingForNewNode) and evicts nothing, also past the
// delay while the node is due; once the node is later than expected by more than the
// delay, it preempts.
func TestAPreemptorWaitsForANewNodeDueWithinItsDelay(t *testing.T) {
	f := newWaitFixture(t)
	low := f.running("development", 4)
	mid := f.running("training", 4)
	high, err := f.createIn("team", "PACK", "training-high", 4)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	if info := f.m.info(high); info.PendingReasonCode != string(pending.NoResources) {
		t.Fatalf("before any estimate: %q, want NoResources (within its delay)", info.PendingReasonCode)
	}
	due := f.clock.Now().Add(20 * time.Second)
	f.m.newCapacityReported(map[string]time.Time{high: due})
	f.waitPending(high, pending.WaitingForNewNode)
	f.checkNoNotices(low, mid)

	// Past the preemption delay, the node 10 s late: it still waits (the autoscaler
	// reports every tick).
	f.clock.Advance(70 * time.Second)
	f.m.newCapacityReported(map[string]time.Time{high: due})
	f.settle()
	f.settle()
	if info := f.m.info(high); info.PendingReasonCode != string(pending.WaitingForNewNode) {
		t.Fatalf("node 10 s late: %q, want WaitingForNewNode", info.PendingReasonCode)
	}
	f.checkNoNotices(low, mid)

	// Later than expected by more than the delay: waiting on would never end.
	f.clock.Advance(15 * time.Second)
	f.m.newCapacityReported(map[string]time.Time{high: due})
	f.waitPending(high, pending.PreemptionDelay)
	f.checkNoticedOnceBy(low, high)
	checkLedgerMatchesTable(t, f.m, 0)
}

// The converse: new nodes expected later than the delay do not hold preemption back; it
// preempts as soon as the delay has passed, and a new estimate within the delay that
// comes meanwhile is not waited for once victims are chosen.
func TestAPreemptorPreemptsWhenTheNewNodeComesAfterItsDelay(t *testing.T) {
	f := newWaitFixture(t)
	low := f.running("development", 4)
	mid := f.running("training", 4)
	high, err := f.createIn("team", "PACK", "training-high", 4)
	if err != nil {
		t.Fatal(err)
	}
	f.m.newCapacityReported(map[string]time.Time{high: f.clock.Now().Add(10 * time.Minute)})
	f.settle()
	f.settle()
	if info := f.m.info(high); info.PendingReasonCode != string(pending.NoResources) {
		t.Fatalf("within its delay: %q, want NoResources", info.PendingReasonCode)
	}
	f.checkNoNotices(low, mid)
	f.clock.Advance(61 * time.Second)
	f.m.newCapacityReported(map[string]time.Time{high: f.clock.Now().Add(9 * time.Minute)})
	f.waitPending(high, pending.PreemptionDelay)
	f.checkNoticedOnceBy(low, high)
	if info := f.m.info(mid); info.Preemptions != 0 {
		t.Fatalf("mid noticed too: %v (one 4-GPU victim is the minimal set)", info.LastPreemption)
	}
}

func TestNewCapacityInIsKnownWhileFreshAndNotLateByMoreThanTheDelay(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	report := newCapacityReport{expected: map[string]time.Time{"pg": t0.Add(20 * time.Second)}, received: t0}
	for _, c := range []struct {
		name  string
		id    string
		now   time.Time
		want  time.Duration
		known bool
	}{
		{"due in 20 s", "pg", t0, 20 * time.Second, true},
		{"other group", "other", t0, 0, false},
		{"due now", "pg", t0.Add(20 * time.Second), 0, true},
		{"late by the delay", "pg", t0.Add(20*time.Second + time.Minute), 0, true},
		{"late by more than the delay", "pg", t0.Add(20*time.Second + time.Minute + time.Millisecond), 0, false},
	} {
		fresh := report
		fresh.received = c.now
		got, known := newCapacityIn(fresh, c.id, time.Minute, c.now)
		if got != c.want || known != c.known {
			t.Errorf("%s: %s %v, want %s %v", c.name, got, known, c.want, c.known)
		}
	}
	if _, known := newCapacityIn(report, "pg", time.Hour, t0.Add(newCapacityStale+time.Second)); known {
		t.Error("a report older than newCapacityStale: want unknown")
	}
}

// A notice waits for every listener that was polling when it was given (the owner's
// hook and the group's Go actors with a Checkpoint method): one acknowledgement of two
// releases nothing; the second releases the group.
func TestANoticeWaitsForEveryListenerPollingWhenItWasGiven(t *testing.T) {
	f := newPreemptionFixture(t)
	low := f.running("development", 4)
	f.running("training", 4)
	notices := make(chan *pb.PreemptionNotice, 2)
	for _, listener := range []string{"", "actor:a1"} {
		go func() {
			reply, err := f.m.WaitPreemptionNotice(context.Background(), &pb.WaitPreemptionNoticeRequest{PlacementGroupId: low, WaitMs: 10_000, ListenerId: listener})
			if err != nil {
				t.Error(err)
			}
			notices <- reply.GetNotice()
		}()
	}
	poll.Until(t, 10*time.Second, time.Millisecond, "two listeners polling", func() error {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		if n := len(f.m.groups[low].listeners); n != 2 {
			return fmt.Errorf("%d listeners", n)
		}
		return nil
	})
	high, err := f.createIn("team", "PACK", "training-high", 4)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.settle()
	notice := <-notices
	<-notices
	if notice == nil || notice.PreemptorId != high {
		t.Fatalf("notice %v, want one from %s", notice, high)
	}
	if _, err := f.m.AckPreemptionNotice(context.Background(), &pb.AckPreemptionNoticeRequest{PlacementGroupId: low, TimeMs: notice.TimeMs}); err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.settle()
	if info := f.m.info(low); info.State != pb.PlacementGroupState_CREATED || info.LastPreemption.Acknowledged {
		t.Fatalf("released after the owner's acknowledgement while the actor's is missing: %v %v", info.State, info.LastPreemption)
	}
	f.checkCreatedIsWhole(low)
	if _, err := f.m.AckPreemptionNotice(context.Background(), &pb.AckPreemptionNoticeRequest{PlacementGroupId: low, TimeMs: notice.TimeMs, ListenerId: "actor:a1"}); err != nil {
		t.Fatal(err)
	}
	f.waitPending(low, pending.Preempted)
	f.waitCreated(high)
	checkLedgerMatchesTable(t, f.m, 0)
}
