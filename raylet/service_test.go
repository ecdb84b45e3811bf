package raylet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/raylet/gpu"
)

// Every sentinel has the code the GCS and the SDK act on, and the message is the error's
// text, unchanged.
func TestNodeManagerStatusCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{fielderr.New(ErrRequired, "job_id", "required"), codes.InvalidArgument},
		{refusef(ErrInvalidBundle, "bundle %s: asks for both", bundleID{"pg", 0}), codes.InvalidArgument},
		{fielderr.New(ErrInvalidLease, "bundle_index", "-2"), codes.InvalidArgument},
		{fielderr.New(ErrInvalidExecutable, "executable_sha256", "want lowercase hex"), codes.InvalidArgument},
		{fmt.Errorf("resources%w", fielderr.New(resources.ErrInvalidAmount, `["CPU"]`, "negative")), codes.InvalidArgument},
		{fmt.Errorf("bundle pg[0]: %w", gpu.ErrMIGInvalidStart), codes.InvalidArgument},
		{fmt.Errorf("bundle pg[0]: %w", gpu.ErrMIGUnknownProfile), codes.InvalidArgument},
		{refusef(ErrNotPrepared, "bundle pg[0] generation 1: not prepared on this node"), codes.NotFound},
		{refusef(ErrUnknownWorker, "worker w: not a live worker of node n"), codes.NotFound},
		{refusef(ErrExecutableNotUploaded, "executable_sha256 x: the GCS does not hold it"), codes.NotFound},
		{refusef(ErrNoRoom, "node n: the request asks GPU 0.5: %w", refusef(ErrGPUNotFree, "no GPU has 0.5 free")), codes.ResourceExhausted},
		{fmt.Errorf("%w 1: this raylet has seen epoch 2", ErrStaleEpoch), codes.FailedPrecondition},
		{refusef(ErrStaleGeneration, "bundle pg[0]: stale generation 1"), codes.FailedPrecondition},
		{refusef(ErrDraining, "node n is draining"), codes.FailedPrecondition},
		{refusef(ErrInsufficientResources, "node n: insufficient resources"), codes.FailedPrecondition},
		{fmt.Errorf("bundle pg[0]: %w", refusef(ErrGPUNotFree, "no GPU has 1 free")), codes.FailedPrecondition},
		{refusef(ErrBundleNotHeld, "placement group pg bundle 1 is not held on node n"), codes.FailedPrecondition},
		{refusef(ErrMIGNotReady, "GPU 0: MIG re-partitioning rate limit"), codes.FailedPrecondition},
		{refusef(ErrWorkerRegistered, "worker w registered already"), codes.FailedPrecondition},
		{fmt.Errorf("bundle pg[0]: %w", gpu.ErrMIGSlotsTaken), codes.FailedPrecondition},
		{fmt.Errorf("bundle pg[0]: %w", gpu.ErrMIGModeOff), codes.FailedPrecondition},
		{fmt.Errorf("bundle pg[0]: %w", gpu.ErrMIGInUse), codes.FailedPrecondition},
		{refusef(ErrStopping, "node n: raylet stopping"), codes.Unavailable},
		{refusef(ErrWorkerStartTimeout, "worker w did not call RegisterWorker"), codes.Unavailable},
		{refusef(ErrExecutableUnavailable, "download executable x from the GCS: EOF"), codes.Unavailable},
		{refusef(ErrWorkerKilled, "worker w was killed: job ended before its lease was granted"), codes.Aborted},
		{refusef(ErrExecutableCorrupt, "executable x: the GCS sent no chunk"), codes.DataLoss},
		{refusef(ErrWorkerFailed, "start worker w (/bin/x): %w", fs.ErrPermission), codes.Internal},
		{refusef(ErrInternal, "executable cache: %w", fs.ErrPermission), codes.Internal},
		{fmt.Errorf("bundle pg[0]: %w", gpu.ErrMIGModePending), codes.Internal},
		{errors.New("anything else"), codes.Internal},
		{context.Canceled, codes.Canceled},
		{refusef(context.DeadlineExceeded, "waited for room until the call ended: %s", refusef(ErrNoRoom, "no room")), codes.DeadlineExceeded},
	} {
		got := status.Convert(nodeManagerStatus(c.err))
		if got.Code() != c.want || got.Message() != c.err.Error() {
			t.Errorf("nodeManagerStatus(%q) = %s %q, want %s with the error's text", c.err, got.Code(), got.Message(), c.want)
		}
	}
	if nodeManagerStatus(nil) != nil {
		t.Error("nodeManagerStatus(nil) is not nil")
	}
	// A status returned as is (the fencing interceptor's, a handler's) keeps its code.
	kept := status.Error(codes.PermissionDenied, "no token")
	if got := nodeManagerStatus(kept); got != kept {
		t.Errorf("nodeManagerStatus changed a status error: %v", got)
	}
}

// A refusal is its kind and whatever its text wraps.
func TestRefusalWrapsKindAndCause(t *testing.T) {
	err := refusef(ErrWorkerFailed, "start worker w: %w", fs.ErrNotExist)
	if !errors.Is(err, ErrWorkerFailed) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%v: want both ErrWorkerFailed and fs.ErrNotExist", err)
	}
	if err.Error() != "start worker w: file does not exist" {
		t.Fatalf("text %q", err)
	}
}
