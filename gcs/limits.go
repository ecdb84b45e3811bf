package gcs

import (
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
)

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
