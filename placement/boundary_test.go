package placement_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The placement core stays pure (DESIGN.md boundaries): nothing from the control plane
// in its dependencies, and no clock, randomness, I/O or concurrency among its imports.
func TestPlacementStaysPure(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	list := func(args ...string) []string {
		out, err := exec.Command(goTool, append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	const module = "github.com/raygo-dev/raygo/"
	for _, dependency := range list("-deps", module+"placement") {
		for _, forbidden := range []string{"gcs", "raylet", "sdk", "autoscaler", "cmd"} {
			if dependency == module+forbidden || strings.HasPrefix(dependency, module+forbidden+"/") {
				t.Errorf("placement depends on %s", dependency)
			}
		}
	}
	for _, imported := range list("-f", `{{join .Imports " "}}`, module+"placement") {
		switch imported {
		case "time", "math/rand", "math/rand/v2", "crypto/rand", "os", "io", "net", "sync", "sync/atomic", "unsafe":
			t.Errorf("placement imports %s: it takes time and randomness as inputs and does no I/O", imported)
		}
	}
}
