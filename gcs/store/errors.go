package store

import "errors"

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("store: closed")
