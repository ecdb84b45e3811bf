// Package benchgate keeps benchmarks out of `make test`: they run only under `make bench`,
// which sets RAYGO_BENCH=1, and print `BENCH <name> <value> <unit>` lines.
package benchgate

import (
	"os"
	"testing"
)

// Require skips the calling test unless RAYGO_BENCH=1.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv("RAYGO_BENCH") != "1" {
		t.Skip("benchmark: run with RAYGO_BENCH=1 (make bench)")
	}
}
