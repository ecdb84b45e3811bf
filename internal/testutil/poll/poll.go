// Package poll waits in tests for a condition with a deadline instead of a sleep: the
// one polling loop shared by the unit tests of gcs and raylet and by tests/harness.
package poll

import (
	"testing"
	"time"
)

// Until calls check every interval until it returns nil, and returns how long that
// took; when timeout passes first it fails the test with what and check's last error.
func Until(t testing.TB, timeout, interval time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}
