package gcs

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// Sentinel errors of the GCS. Domain code returns plain errors that wrap one of them
// (errorf); statusOf, at the gRPC boundary, is the one place that maps them to status
// codes. Validation errors wrap fielderr.ErrInvalid.
var (
	// errNotFound: the request names a node, job, group, actor or executable the GCS
	// does not have.
	errNotFound = errors.New("not found")
	// errFailedPrecondition: the object exists but its state forbids the request (a DEAD
	// node, a finished job, a removed group).
	errFailedPrecondition = errors.New("failed precondition")
	// errUnavailable: the store could not be read or written; the request may be retried.
	errUnavailable = errors.New("store unavailable")
	// errNotReady: the caller's deadline passed before the awaited state was reached.
	errNotReady = errors.New("not ready")
	// errDataLoss: the store holds a row the GCS cannot read back.
	errDataLoss = errors.New("data loss")
	// errInternal: the GCS could not do what it should have been able to.
	errInternal = errors.New("internal error")
	// errPermissionDenied: the caller does not hold the credential the request needs (a
	// node's secret).
	errPermissionDenied = errors.New("permission denied")
)

// gcsError is an error whose message goes to the caller as it is, and whose kind is one
// of the sentinels above.
type gcsError struct {
	kind error
	msg  string
}

func (e *gcsError) Error() string { return e.msg }
func (e *gcsError) Unwrap() error { return e.kind }

// errorf returns an error of the given kind with a formatted message.
func errorf(kind error, format string, args ...any) error {
	return &gcsError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// errNoSuchGroup answers a call naming a placement group the GCS does not know.
func errNoSuchGroup(id string) error {
	return errorf(errNotFound, "placement_group_id %s: no such placement group", id)
}

// errGroupRemoved answers a call that needs a live group about one that was removed.
func errGroupRemoved(id string) error {
	return errorf(errFailedPrecondition, "placement_group_id %s: placement group was removed", id)
}

// statusOf maps an error of the GCS's domain code to its gRPC status: the one mapping of
// every GCS service, installed as the server's interceptor. Errors that already carry a
// status (a raylet's answer passed on) keep it.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, fielderr.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, errNotFound):
		code = codes.NotFound
	case errors.Is(err, errFailedPrecondition):
		code = codes.FailedPrecondition
	case errors.Is(err, errUnavailable):
		code = codes.Unavailable
	case errors.Is(err, errNotReady):
		code = codes.DeadlineExceeded
	case errors.Is(err, errDataLoss):
		code = codes.DataLoss
	case errors.Is(err, errInternal):
		code = codes.Internal
	case errors.Is(err, errPermissionDenied):
		code = codes.PermissionDenied
	default:
		if _, ok := status.FromError(err); ok {
			return err
		}
	}
	return status.Error(code, err.Error())
}

// statusInterceptors apply statusOf to every unary and streaming handler's error.
func statusInterceptors() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			reply, err := handler(ctx, req)
			return reply, statusOf(err)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return statusOf(handler(srv, ss))
		}),
	}
}
