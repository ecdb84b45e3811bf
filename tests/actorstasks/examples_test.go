package actorstasks

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/tests/harness"
)

// The Go examples a new user copies run against a cluster at RAYGO_ADDRESS and exit 0.
func TestGoExamplesRun(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "4")
	c.AddNode("--num-cpus", "4", "--gpu-sim", "dgx-h100")
	c.AddNode("--num-cpus", "4")
	dir := t.TempDir()
	for _, tc := range []struct {
		example string
		args    []string
		want    []string
	}{
		{"actors", []string{"-gpus", "1"}, []string{
			`inside the worker: CUDA_VISIBLE_DEVICES="0" CUDA_DEVICE_ORDER=PCI_BUS_ID`,
			"results in order: 1 3 6 10 15",
			"DEAD (placement group removed)",
		}},
		{"tasks", nil, []string{"12 square tasks done", "add(square(1), square(2)) = 5", "division by zero"}},
	} {
		bin := filepath.Join(dir, tc.example)
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/raygo-dev/raygo/examples/go/"+tc.example).CombinedOutput(); err != nil {
			t.Fatalf("go build examples/go/%s: %v\n%s", tc.example, err, out)
		}
		stdout, stderr, code := harness.Run(t, bin, tc.args, "RAYGO_ADDRESS="+c.GCSAddress)
		if code != 0 {
			t.Fatalf("examples/go/%s exited %d:\n%s\n%s", tc.example, code, stdout, stderr)
		}
		for _, want := range tc.want {
			if !strings.Contains(stdout, want) {
				t.Errorf("examples/go/%s output lacks %q:\n%s", tc.example, want, stdout)
			}
		}
	}
}
