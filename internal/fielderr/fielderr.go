// Package fielderr is the error every validation in raygo returns: which field of the
// input is wrong, what is wrong with it, and a sentinel to test with errors.Is. The
// resource, MIG, label and placement-group checks all build on it, so a message reads the
// same wherever the input came from.
package fielderr

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every validation sentinel in raygo: input that is wrong and
// changed nothing. Services map it to gRPC InvalidArgument.
var ErrInvalid = errors.New("invalid request")

// Error is a validation error about one field of the input. Error() is
// "field: problem", e.g. `bundles[0]["GPU"]: amount must be a finite number >= 0, got -1`,
// and is meant to be returned to the user as is (gRPC InvalidArgument).
type Error struct {
	// Field is the path of the offending value in the request, in the wire names:
	// `bundles[2]`, `bundles[0]["GPU"]`, `strategy`, `bundle_label_selector[1]["zone"]`.
	Field string
	// Problem says what is wrong, with the offending value.
	Problem string
	// Err is the sentinel (an error wrapping ErrInvalid, or another package's sentinel).
	Err error
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error for field with a formatted problem.
func New(sentinel error, field, format string, args ...any) *Error {
	return &Error{Field: field, Problem: fmt.Sprintf(format, args...), Err: sentinel}
}

// WithPrefix puts prefix in front of err's field path: `["GPU"]` under `bundles[0]`
// becomes `bundles[0]["GPU"]`. Errors that are not *Error are wrapped with the prefix.
func WithPrefix(err error, prefix string) error {
	var fieldErr *Error
	if !errors.As(err, &fieldErr) {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	field := prefix
	switch {
	case fieldErr.Field == "":
	case strings.HasPrefix(fieldErr.Field, "["):
		field += fieldErr.Field
	default:
		field += "." + fieldErr.Field
	}
	return &Error{Field: field, Problem: fieldErr.Problem, Err: fieldErr.Err}
}
