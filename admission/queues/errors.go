package queues

import (
	"errors"
	"fmt"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// Sentinels of the queue configuration; every one wraps fielderr.ErrInvalid.
var (
	// ErrInvalidConfig: the file is not a valid queue configuration (syntax, unknown
	// field, bad value, broken reference). Nothing of it is applied.
	ErrInvalidConfig = fmt.Errorf("invalid queue configuration: %w", fielderr.ErrInvalid)
	// ErrNamespaceConflict: two queues claim the same namespace, or two globs can match
	// one namespace.
	ErrNamespaceConflict = fmt.Errorf("namespace claimed twice: %w", ErrInvalidConfig)
	// ErrUnknownQueue: a workload names a queue the configuration does not have.
	ErrUnknownQueue = errors.New("unknown queue")
	// ErrUnknownPriorityClass: a workload names a priority class the configuration does
	// not have.
	ErrUnknownPriorityClass = errors.New("unknown priority class")
)
