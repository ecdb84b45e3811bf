package sdk

import (
	"context"
	"fmt"
	"reflect"
	"sync"
)

// ObjectRef is the future result of a task or an actor method call. Its value lives
// in the caller's memory (results are small and travel inline, as Ray's small objects
// do). Pass it to Get or Wait, or as an argument of another task or call: the SDK waits
// for it and passes its value.
type ObjectRef struct {
	id   string
	done chan struct{}
	once sync.Once
	// Set before done is closed.
	value []byte
	err   error
	where Placement
}

// Placement says where a task or method call ran.
type Placement struct {
	NodeID   string
	WorkerID string
	PID      int
}

func newObjectRef(id string) *ObjectRef { return &ObjectRef{id: id, done: make(chan struct{})} }

// complete sets the result once; later calls are ignored.
func (r *ObjectRef) complete(value []byte, err error, where Placement) {
	r.once.Do(func() {
		r.value, r.err, r.where = value, err, where
		close(r.done)
	})
}

// ID is the ref's id (the task id of the task that produces it).
func (r *ObjectRef) ID() string { return r.id }

// Ready reports whether the result (or the failure) is in.
func (r *ObjectRef) Ready() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Where tells on which node and worker the producing task ran; zero until Ready.
func (r *ObjectRef) Where() Placement {
	if !r.Ready() {
		return Placement{}
	}
	return r.where
}

// wait blocks until the ref is ready or ctx ends.
func (r *ObjectRef) wait(ctx context.Context) error {
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("object %s not ready: %w", r.id, ctx.Err())
	}
}

// Get waits for ref and decodes its value into out (a pointer), as ray.get. It returns
// the task's failure: a *TaskError for the function's own error or panic, an error
// wrapping ErrActorDied or ErrTaskFailed when the worker died past the retries, or ctx's
// error. out may be nil to only wait.
func Get(ctx context.Context, ref *ObjectRef, out any) error {
	if ref == nil {
		return fmt.Errorf("%w: nil ObjectRef", ErrInvalidArgument)
	}
	if err := ref.wait(ctx); err != nil {
		return err
	}
	if ref.err != nil {
		return ref.err
	}
	if out == nil {
		return nil
	}
	if v := reflect.ValueOf(out); v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("%w: Get needs a non-nil pointer to decode into, got %T", ErrInvalidArgument, out)
	}
	if ref.value == nil {
		return fmt.Errorf("%w: object %s holds no value (the function returns only an error)", ErrInvalidArgument, ref.id)
	}
	if err := decodeValue(ref.value, out); err != nil {
		return fmt.Errorf("object %s: decoding into %T: %w", ref.id, out, err)
	}
	return nil
}

// Wait blocks until numReady of refs are ready (Ray's ray.wait), then returns the ready
// and the not-ready refs, each in the order given. When ctx ends first it returns what
// is ready so far with ctx's error.
func Wait(ctx context.Context, refs []*ObjectRef, numReady int) (ready, notReady []*ObjectRef, err error) {
	if numReady < 0 || numReady > len(refs) {
		return nil, nil, fmt.Errorf("%w: numReady %d: must be between 0 and len(refs) = %d", ErrInvalidArgument, numReady, len(refs))
	}
	split := func() {
		ready, notReady = ready[:0], notReady[:0]
		for _, r := range refs {
			if r.Ready() {
				ready = append(ready, r)
			} else {
				notReady = append(notReady, r)
			}
		}
	}
	for {
		split()
		if len(ready) >= numReady {
			return ready, notReady, nil
		}
		// Block on the first pending ref; the others are checked again after it.
		if err := notReady[0].wait(ctx); err != nil {
			return ready, notReady, ctx.Err()
		}
	}
}

// TaskError is the error a task function or actor method returned, or its panic, as
// the caller sees it. Match with errors.As.
type TaskError struct {
	// Function is the task function's name or "Actor.Method".
	Function string
	// Type is the Go type of the error the function returned ("*errors.errorString"),
	// or "panic".
	Type    string
	Message string
}

func (e *TaskError) Error() string {
	return fmt.Sprintf("%s failed: %s: %s", e.Function, e.Type, e.Message)
}
