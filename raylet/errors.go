package raylet

import (
	"errors"
	"fmt"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// Sentinel errors. The reservation ledger (bundles.go, mig.go), the worker leases and
// pool (leases.go, workers.go) and the executable cache return errors that wrap one of
// these and name the bundle, lease, worker or field; nodeManagerStatus (service.go) is
// the one place that turns them into gRPC codes. Errors of bad input are
// *fielderr.Error values (or wrap one) whose sentinel wraps fielderr.ErrInvalid.
var (
	// ErrNodeDead is returned by Wait when the GCS declared this node DEAD: as in Ray,
	// the raylet then exits and a new raylet joins with a new node id.
	ErrNodeDead = errors.New("the GCS declared this node DEAD")

	// ErrRequired: a required field of a request is empty.
	ErrRequired = fmt.Errorf("%w: required field missing", fielderr.ErrInvalid)
	// ErrInvalidBundle: a bundle of a prepare request can never be reserved as asked
	// (GPU ids that do not match its GPU amount or this node, a MIG resource without a
	// MIG step, a MIG step this node's GPUs cannot carry out).
	ErrInvalidBundle = fmt.Errorf("%w: invalid bundle reservation", fielderr.ErrInvalid)
	// ErrInvalidLease: a worker lease request this node can never grant (a bundle index
	// below -1, more than the node's totals, a MIG slice outside a bundle).
	ErrInvalidLease = fmt.Errorf("%w: invalid worker lease request", fielderr.ErrInvalid)
	// ErrInvalidExecutable: an executable hash that is not 64 lowercase hex characters.
	ErrInvalidExecutable = fmt.Errorf("%w: invalid executable hash", fielderr.ErrInvalid)

	// ErrStaleEpoch: a request from a GCS older than the newest one this raylet has seen.
	ErrStaleEpoch = errors.New("stale GCS epoch")
	// ErrStaleGeneration: a request for an older generation of a bundle than this raylet
	// has seen.
	ErrStaleGeneration = errors.New("stale generation")
	// ErrDraining: the node is draining and takes no new bundles or leases.
	ErrDraining = errors.New("node draining")
	// ErrInsufficientResources: the node's free resources cannot hold a prepare request.
	ErrInsufficientResources = errors.New("insufficient resources")
	// ErrGPUNotFree: the GPUs a bundle asks for (or any GPU, for a fraction) are taken.
	ErrGPUNotFree = errors.New("GPU not free")
	// ErrNotPrepared: a commit names a bundle generation this node does not hold.
	ErrNotPrepared = errors.New("bundle not prepared")
	// ErrBundleNotHeld: a lease names a placement-group bundle this node does not hold
	// committed (not held, only prepared, or released while the lease was granted).
	ErrBundleNotHeld = errors.New("bundle not held")
	// ErrNoRoom: a lease fits the node (or bundle) but not what is free of it now; a
	// lease request that queues waits for room.
	ErrNoRoom = errors.New("no room now")

	// ErrMIGNotReady: a MIG step that the node's MIG GPUs cannot take as they are now
	// (no GPU in MIG mode, the slots held by another bundle, the re-partitioning rate
	// limit reached).
	ErrMIGNotReady = errors.New("MIG step not possible now")

	// ErrStopping: the raylet is stopping.
	ErrStopping = errors.New("raylet stopping")
	// ErrUnknownWorker: a worker id that is not a live worker of this node.
	ErrUnknownWorker = errors.New("unknown worker")
	// ErrWorkerRegistered: a worker registered already, with another address.
	ErrWorkerRegistered = errors.New("worker registered already")
	// ErrWorkerStartTimeout: a worker did not register within WorkerStartTimeout.
	ErrWorkerStartTimeout = errors.New("worker start timed out")
	// ErrWorkerKilled: a worker was killed on purpose before its lease was granted.
	ErrWorkerKilled = errors.New("worker killed before its lease was granted")
	// ErrWorkerFailed: a worker could not start, or exited before it registered.
	ErrWorkerFailed = errors.New("worker failed to start")

	// ErrExecutableNotUploaded: the GCS does not hold the executable a lease names.
	ErrExecutableNotUploaded = errors.New("executable not uploaded")
	// ErrExecutableCorrupt: the executable's bytes do not match its hash or size.
	ErrExecutableCorrupt = errors.New("executable corrupt")
	// ErrExecutableUnavailable: the executable could not be downloaded now; a retry
	// may succeed.
	ErrExecutableUnavailable = errors.New("executable unavailable")
	// ErrInternal: a local failure (disk, process start) or one the GCS reported as
	// internal.
	ErrInternal = errors.New("internal error")
)

// refusal is an error of one of the kinds above whose text is what the caller reads.
// The text keeps the wording of the raylet's replies (it names the bundle, lease or
// worker and does not repeat the sentinel); errors.Is finds both the kind and any error
// the text wraps with %w.
type refusal struct {
	kind error
	err  error
}

func (e *refusal) Error() string   { return e.err.Error() }
func (e *refusal) Unwrap() []error { return []error{e.kind, e.err} }

// refusef returns an error of kind with the text fmt.Errorf(format, args...) gives.
func refusef(kind error, format string, args ...any) error {
	return &refusal{kind: kind, err: fmt.Errorf(format, args...)}
}
