package sdk

import "errors"

// Errors the client returns; match them with errors.Is.
var (
	// ErrInvalidArgument wraps the server's message for bad input (the field is named).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: no placement group with that id or name.
	ErrNotFound = errors.New("not found")
	// ErrRemoved: the placement group was removed.
	ErrRemoved = errors.New("placement group removed")
	// ErrUnavailable: the GCS could not be reached.
	ErrUnavailable = errors.New("GCS unavailable")
	// ErrClosed: the client was closed; its waiting tasks fail with it.
	ErrClosed = errors.New("client closed")
	// ErrAlreadyExists: a live actor already has that name in the namespace.
	ErrAlreadyExists = errors.New("already exists")
	// ErrTaskFailed: a task's worker died (or could not be leased) more often than the
	// task's retries allow.
	ErrTaskFailed = errors.New("task failed")
	// ErrUnschedulable: the task can never run where it must (a hard node affinity to
	// a node that is dead or too small).
	ErrUnschedulable = errors.New("task unschedulable")
	// ErrActorDied: the actor is DEAD (the error says why), or its worker died during a
	// call that had no retries left.
	ErrActorDied = errors.New("actor died")
)
