package tracefiles_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/placement/tracereplay"
	"github.com/raygo-dev/raygo/tests/tracefiles"
)

func TestDirNamesAMissingFolder(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-trace-here")
	t.Setenv(tracefiles.EnvDir, missing)
	_, err := tracefiles.Dir()
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), tracefiles.EnvDir) {
		t.Fatalf("error %v, want it to name %s and %s", err, missing, tracefiles.EnvDir)
	}
}

// A small slice of the real trace (the first 150 GPU nodes, the first 1,500 tasks of
// each variant) replays through raygo and two of the paper's policies.
func TestReplayASliceOfTheTrace(t *testing.T) {
	dir, err := tracefiles.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, variant := range tracefiles.Variants {
		nodes, tasks, err := tracefiles.Load(dir, variant)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 1213 || len(tasks) < 8000 {
			t.Fatalf("%s: %d nodes and %d tasks, want the trace's 1,213 GPU nodes and its 8,000+ tasks", variant, len(nodes), len(tasks))
		}
		for _, policy := range []tracereplay.Policy{&tracereplay.Raygo{}, &tracereplay.FGD{}, tracereplay.PaperPolicies()[1]} {
			result, err := tracereplay.Run(tracereplay.DefaultConfig(nodes[:150], tasks[:1500], 42), policy)
			if err != nil {
				t.Fatalf("%s %s: %v", variant, policy.Name(), err)
			}
			if result.Placed == 0 || result.UnallocatedGPUPct < 0 || result.UnallocatedGPUPct > 100 {
				t.Fatalf("%s %s: %+v", variant, policy.Name(), result)
			}
		}
	}
}
