package store

import "errors"

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("store: closed")

// ErrStoreLost is returned by every call once the Redis store found that the server no
// longer holds what it acknowledged: it came back empty, or with a different store, or
// rolled back (its write sequence went backwards). The GCS must stop rather than serve
// a partial or old table.
var ErrStoreLost = errors.New("store: the Redis server lost acknowledged writes")
