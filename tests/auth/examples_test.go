package auth

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/tests/harness"
)

// The Go examples run with the token, as a user with auth on runs them (RAYGO_AUTH_TOKEN
// in the environment), and without it exit non-zero naming the variable to set.
func TestTheGoExamplesRunWithTheToken(t *testing.T) {
	a := cluster(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		example string
		want    []string
	}{
		{"actors", []string{"results in order: 1 3 6 10 15", "DEAD (placement group removed)"}},
		{"tasks", []string{"12 square tasks done", "add(square(1), square(2)) = 5", "division by zero"}},
	} {
		bin := filepath.Join(dir, tc.example)
		harness.GoBuild(t, "github.com/raygo-dev/raygo/examples/go/"+tc.example, bin)
		stdout, stderr, code := harness.Run(t, bin, nil, "RAYGO_ADDRESS="+a.c.GCSAddress, "RAYGO_AUTH_TOKEN="+a.admin)
		if code != 0 {
			t.Fatalf("examples/go/%s with the token exited %d:\n%s\n%s", tc.example, code, stdout, stderr)
		}
		for _, want := range tc.want {
			if !strings.Contains(stdout, want) {
				t.Errorf("examples/go/%s output lacks %q:\n%s", tc.example, want, stdout)
			}
		}
		stdout, stderr, code = harness.Run(t, bin, nil, "RAYGO_ADDRESS="+a.c.GCSAddress)
		if code == 0 || !strings.Contains(stderr, "RAYGO_AUTH_TOKEN") {
			t.Errorf("examples/go/%s without the token: exit %d:\n%s\n%s; want a failure naming RAYGO_AUTH_TOKEN", tc.example, code, stdout, stderr)
		}
	}
}
