// Package store holds the GCS's state behind one small interface with two backends:
// an in-memory map (the default, embedded, lost with the process) and Redis through
// go-redis (durable: a restarted GCS reloads every table).
//
// Data model: named tables of key → value. Values are opaque bytes (the GCS encodes
// protobuf messages). In Redis every table is one hash named "<namespace>:<table>".
package store

import (
	"context"
)

// Table names used by the GCS. A table is created on first write.
const (
	TableNodes           = "nodes"
	TableJobs            = "jobs"
	TableKV              = "kv"
	TableMeta            = "meta"
	TablePlacementGroups = "placement_groups"
	TableActors          = "actors"
	// TableQueues holds the running queue configuration (YAML) under "config".
	TableQueues = "queues"
	// TableExecutables holds worker executables: a manifest under "<sha256>" and the
	// bytes under "<sha256>/<chunk index, zero-padded>", written in one Apply.
	TableExecutables = "executables"
	// TableNodeSecrets holds, per node id, the SHA-256 of the secret the GCS issued at
	// the node's first registration.
	TableNodeSecrets = "node_secrets"
	// TableAutoscaler holds the request_resources constraint (a ClusterResourceConstraint)
	// under "cluster_resource_constraint".
	TableAutoscaler = "autoscaler"
	// TableAuthTokens holds the scoped tokens issued (raygo auth issue), by id: each
	// one's scope, creation time and SHA-256, never the token.
	TableAuthTokens = "auth_tokens"
)

// OpKind says what one Op of a batch does.
type OpKind int

const (
	// OpPut sets Table[Key] = Value.
	OpPut OpKind = iota + 1
	// OpDelete removes Table[Key]; deleting a missing key is not an error.
	OpDelete
)

// Op is one write of an atomic batch (see Store.Apply).
type Op struct {
	Kind  OpKind
	Table string
	Key   string
	Value []byte
}

// Store is the GCS state store.
//
// Concurrency: every method is safe for concurrent use. Apply is atomic: other callers
// observe either none or all of its ops. A returned value slice belongs to the caller.
type Store interface {
	// Get returns the value of table[key]; found is false when the key is absent.
	Get(ctx context.Context, table, key string) (value []byte, found bool, err error)
	// GetAll returns every key and value of a table (empty map for an unknown table).
	GetAll(ctx context.Context, table string) (map[string][]byte, error)
	// Put sets table[key] = value.
	Put(ctx context.Context, table, key string, value []byte) error
	// PutIfAbsent sets table[key] = value only when the key is absent and reports
	// whether it did.
	PutIfAbsent(ctx context.Context, table, key string, value []byte) (added bool, err error)
	// Delete removes keys from a table and returns how many existed.
	Delete(ctx context.Context, table string, keys ...string) (deleted int, err error)
	// Keys returns the keys of a table that start with prefix, sorted.
	Keys(ctx context.Context, table, prefix string) ([]string, error)
	// Apply runs a batch of puts and deletes, over any tables, atomically.
	Apply(ctx context.Context, ops []Op) error
	// Increment adds delta to the integer stored at table[key] (0 when absent) and
	// returns the new value. The GCS epoch is kept this way.
	Increment(ctx context.Context, table, key string, delta int64) (int64, error)
	// Name is "memory" or "redis".
	Name() string
	// Close releases the backend's connections. Close of the memory store drops its data.
	Close() error
}
