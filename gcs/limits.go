package gcs

import (
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// Size limits of what a client stores in the GCS, so that one request cannot take the
// GCS's memory or break every client that lists the table (gRPC's 4 MiB receive limit).
// The README's "Limits" table lists them; the Python client checks the same.
const (
	// maxNameBytes bounds names, namespaces and KV keys.
	maxNameBytes = 1024
	// maxKVValueBytes bounds one KV value.
	maxKVValueBytes = 1 << 20
	// maxObjectBytes bounds one object a Python driver or worker keeps in the GCS: at
	// most maxObjectBytes / maxKVValueBytes chunks of one KV value each.
	maxObjectBytes = 100 << 20
)

// checkObjectChunk refuses a chunk of a GCS-held object (KV namespace "obj", key
// "Object:<job id>:<object id>:<chunk index>") past maxObjectBytes, naming the limit.
func checkObjectChunk(key string) error {
	colon := strings.LastIndexByte(key, ':')
	index, err := strconv.Atoi(key[colon+1:])
	if !strings.HasPrefix(key, objectKeyPrefix) || colon < 0 || err != nil || index < 0 {
		return fielderr.New(fielderr.ErrInvalid, "key", "an object's chunk is %s<job id>:<object id>:<chunk index>, got %q", objectKeyPrefix, key)
	}
	if index >= maxObjectBytes/maxKVValueBytes {
		return fielderr.New(fielderr.ErrInvalid, "value", "objects held by the GCS are at most %d bytes (100 MiB); chunk %d of %d bytes would pass it",
			maxObjectBytes, index, maxKVValueBytes)
	}
	return nil
}

// checkName refuses a name, namespace or key longer than maxNameBytes or holding a NUL
// byte (which the tables use to join a namespace and a name).
func checkName(field, value string) error {
	if len(value) > maxNameBytes {
		return fielderr.New(fielderr.ErrInvalid, field, "must be at most %d bytes, got %d", maxNameBytes, len(value))
	}
	if strings.Contains(value, "\x00") {
		return fielderr.New(fielderr.ErrInvalid, field, "must not contain a NUL byte")
	}
	return nil
}
