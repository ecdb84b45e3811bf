package sdk

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Checkpointer is an actor type that saves its state before its worker is stopped by a
// preemption. When the actor runs in a placement group that is preempted, Checkpoint is
// called in the actor's worker with a context that ends at the notice's deadline, after
// the call running then (actors run one call at a time), and the group's bundles are not
// released before it returns (nor before the owner's OnPreemption hook, if any,
// returned), or until the deadline. The actor restarts per its max_restarts once the
// group is placed again; restore the state in its constructor.
type Checkpointer interface {
	Checkpoint(ctx context.Context) error
}

// envGCSAddress is the GCS a worker's raylet belongs to (the raylet sets it).
const envGCSAddress = "RAYGO_GCS_ADDRESS"

// checkpointListener is the listener id an actor's watcher gives the GCS.
func checkpointListener(actorID string) string { return "actor:" + actorID }

// watchCheckpoint long-polls the GCS for the group's preemption notices and checkpoints
// the actor on each. It runs for the worker's life (the worker ends with the eviction);
// it stops when the group is removed.
func (w *workerService) watchCheckpoint(pgID, actorID string, actor Checkpointer) {
	conn, err := rpcutil.Dial(os.Getenv(envGCSAddress), rpcutil.DialOptions{})
	if err != nil {
		w.logf("actor %s: no GCS connection for its Checkpoint: %v", actorID, err)
		return
	}
	defer conn.Close()
	pgs := pb.NewPlacementGroupServiceClient(conn)
	listener := checkpointListener(actorID)
	ctx := context.Background()
	for {
		reply, err := pgs.WaitPreemptionNotice(ctx, &pb.WaitPreemptionNoticeRequest{PlacementGroupId: pgID, WaitMs: noticePollWait.Milliseconds(), ListenerId: listener})
		switch code := status.Code(err); {
		case err == nil:
		case code == codes.NotFound || code == codes.FailedPrecondition:
			return
		default:
			time.Sleep(time.Second) // the GCS is restarting or unreachable: ask again shortly
			continue
		}
		if reply.Notice == nil {
			continue
		}
		deadline := time.UnixMilli(reply.Notice.DeadlineMs)
		if err := w.checkpoint(actor, deadline); err != nil {
			w.logf("actor %s: Checkpoint before preemption: %v", actorID, err)
		}
		_, _ = pgs.AckPreemptionNotice(ctx, &pb.AckPreemptionNoticeRequest{PlacementGroupId: pgID, TimeMs: reply.Notice.TimeMs, ListenerId: listener})
	}
}

// checkpoint calls the actor's Checkpoint between its calls, before deadline.
func (w *workerService) checkpoint(actor Checkpointer, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for !w.mu.TryLock() { // a call is running: the actor's calls run one at a time
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	defer w.mu.Unlock()
	return actor.Checkpoint(ctx)
}

// logf writes to the worker's stderr, which the raylet keeps in the worker's log file.
func (w *workerService) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "raygo worker %s: %s\n", w.id, fmt.Sprintf(format, args...))
}
