package integration

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/raygo-dev/raygo/"

// The boundaries of DESIGN.md: placement/ is pure; gcs, raylet, sdk and the autoscaler
// meet only over protos/; examples use only the public sdk.
func TestPackageBoundaries(t *testing.T) {
	t.Parallel()
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		{"placement/...", []string{"gcs", "raylet", "sdk", "autoscaler", "cmd", "tests"}},
		{"gcs/...", []string{"raylet", "sdk", "autoscaler", "cmd", "tests"}},
		{"raylet/...", []string{"gcs", "sdk", "autoscaler", "cmd", "tests"}},
		{"sdk/...", []string{"gcs", "raylet", "autoscaler", "cmd", "tests"}},
		{"autoscaler/...", []string{"gcs", "raylet", "sdk", "cmd", "tests"}},
	}
	for _, rule := range rules {
		out, err := exec.Command("go", "list", "-deps", module+rule.pkg).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "matched no packages") {
				continue // the folder has no Go package yet
			}
			t.Fatalf("go list -deps %s: %v\n%s", rule.pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			rel, ok := strings.CutPrefix(dep, module)
			if !ok {
				continue
			}
			for _, f := range rule.forbidden {
				if rel == f || strings.HasPrefix(rel, f+"/") {
					t.Errorf("%s depends on %s: DESIGN.md forbids %s → %s", rule.pkg, dep, strings.TrimSuffix(rule.pkg, "/..."), f)
				}
			}
		}
	}
	if t.Failed() {
		return
	}
	// placement must stay free of I/O: no net, os/exec or time.Now-driven packages.
	out, err := exec.Command("go", "list", "-deps", module+"placement/...").CombinedOutput()
	if err == nil {
		for _, dep := range strings.Fields(string(out)) {
			switch dep {
			case "net", "os/exec", "net/http", "google.golang.org/grpc":
				t.Errorf("placement depends on %s: it must do no I/O", dep)
			}
		}
	}
}
