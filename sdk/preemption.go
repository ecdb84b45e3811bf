package sdk

import (
	"context"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PreemptionNotice tells a running group that it is being preempted: evicted to make
// room for other work. Its bundles are released when the hook returns, or at Deadline
// at the latest; the group then waits in its queue again and runs again once admitted.
type PreemptionNotice struct {
	// Reason is Kueue's eviction reason: InClusterQueue, InCohortReclamation or
	// InCohortReclaimWhileBorrowing.
	Reason string
	// PreemptorID is the pending group the eviction makes room for.
	PreemptorID string
	// Time is when the notice was given; Deadline when the bundles are released
	// without an acknowledgement (Time + the priority class's gracePeriod).
	Time, Deadline time.Time
	// Acknowledged is set on a table row once the hook returned or the deadline passed.
	Acknowledged bool
}

func noticeFromProto(n *pb.PreemptionNotice) *PreemptionNotice {
	if n == nil {
		return nil
	}
	return &PreemptionNotice{Reason: n.Reason, PreemptorID: n.PreemptorId, Time: time.UnixMilli(n.TimeMs),
		Deadline: time.UnixMilli(n.DeadlineMs), Acknowledged: n.Acknowledged}
}

// noticePollWait is how long one WaitPreemptionNotice call waits for a notice.
const noticePollWait = 30 * time.Second

// OnPreemption runs hook each time the group is told it is being preempted, with a
// context that ends at the notice's deadline: checkpoint there. When hook returns (its
// error changes nothing: the deadline would release the group anyway) the GCS is told,
// and the group's bundles are released at once (once the Checkpoint of the group's Go
// actors that have one returned too: see Checkpointer). A goroutine long-polls the GCS until
// stop is called, the group is removed or the client is closed.
func (pg *PlacementGroup) OnPreemption(hook func(ctx context.Context, notice PreemptionNotice) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-pg.client.stopRenewal:
		case <-ctx.Done():
		}
		cancel()
	}()
	go pg.watchPreemption(ctx, hook)
	return cancel
}

func (pg *PlacementGroup) watchPreemption(ctx context.Context, hook func(ctx context.Context, notice PreemptionNotice) error) {
	for ctx.Err() == nil {
		reply, err := pg.client.pgs.WaitPreemptionNotice(ctx, &pb.WaitPreemptionNoticeRequest{PlacementGroupId: pg.ID, WaitMs: noticePollWait.Milliseconds()})
		switch code := status.Code(err); {
		case err == nil:
		case code == codes.NotFound || code == codes.FailedPrecondition:
			return // removed: nothing more to hear
		default:
			select { // the GCS is restarting or unreachable: ask again shortly
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if reply.Notice == nil {
			continue
		}
		pg.mu.Lock()
		pg.created = nil // it will not be CREATED for long: Ready asks the GCS again
		pg.mu.Unlock()
		notice := noticeFromProto(reply.Notice)
		hookCtx, cancel := context.WithDeadline(ctx, notice.Deadline)
		_ = hook(hookCtx, *notice)
		cancel()
		_, _ = pg.client.pgs.AckPreemptionNotice(ctx, &pb.AckPreemptionNoticeRequest{PlacementGroupId: pg.ID, TimeMs: reply.Notice.TimeMs})
	}
}
