// Package ids makes the random hex identifiers of nodes, workers, actors and tasks.
package ids

import (
	"crypto/rand"
	"encoding/hex"
)

// Random returns n random bytes in hex (2n characters). crypto/rand does not fail on
// the platforms raygo runs on.
func Random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
