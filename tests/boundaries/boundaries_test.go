// Package boundaries checks, with `go list`, every package boundary that DESIGN.md sets.
package boundaries

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/raygo-dev/raygo"

type goPackage struct {
	path    string   // import path relative to the module ("placement/migsim")
	imports []string // direct imports, full paths
	deps    []string // transitive dependencies, full paths
}

// listPackages runs go list once over the whole module.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, "./...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var packages []goPackage
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Split(line, "|")
		if len(fields) != 3 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		packages = append(packages, goPackage{path: rel, imports: strings.Fields(fields[1]), deps: strings.Fields(fields[2])})
	}
	if len(packages) < 10 {
		t.Fatalf("go list found only %d packages: is this the raygo module?", len(packages))
	}
	return packages
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// under reports whether a full import path is the module folder rel or inside it.
func under(importPath, rel string) bool {
	full := module + "/" + rel
	return importPath == full || strings.HasPrefix(importPath, full+"/")
}

func inside(p goPackage, folders ...string) bool {
	for _, f := range folders {
		if p.path == f || strings.HasPrefix(p.path, f+"/") {
			return true
		}
	}
	return false
}

// ioPackages may not be imported by the pure core: it does no I/O.
var ioPackages = []string{"os", "os/exec", "os/signal", "io", "io/fs", "io/ioutil", "bufio", "net", "net/http", "syscall", "google.golang.org/grpc"}

// nondeterministicPackages may not be imported by the placement decision code itself: time
// and randomness are inputs, and it runs no goroutines. Simulators in sub-packages may use a
// seeded generator and durations.
var nondeterministicPackages = []string{"time", "math/rand", "math/rand/v2", "crypto/rand", "sync", "sync/atomic", "unsafe"}

// decisionPackages are the decision code itself, held to nondeterministicPackages.
var decisionPackages = []string{"placement", "admission", "admission/queues", "admission/preemption"}

// vocabulary is the leaf packages every part shares: what a resource, a MIG profile, a
// label and a field error are.
var vocabulary = []string{"internal/fielderr", "internal/resources", "internal/mig", "internal/nodelabel", "internal/pending"}

func TestDesignBoundaries(t *testing.T) {
	packages := listPackages(t)
	services := []string{"gcs", "raylet", "sdk", "autoscaler"}
	for _, p := range packages {
		// 1. placement/, admission/ and their sub-packages (the pure decision cores): no
		// control-plane package, no I/O.
		if inside(p, "placement", "admission") {
			for _, dep := range p.deps {
				for _, forbidden := range append(services, "cmd", "tests", "examples") {
					if under(dep, forbidden) {
						t.Errorf("%s depends on %s: the scheduling core knows nothing of the control plane", p.path, dep)
					}
				}
				for _, io := range []string{"net", "net/http", "os/exec", "google.golang.org/grpc"} {
					if dep == io {
						t.Errorf("%s depends on %s: the scheduling core does no I/O", p.path, dep)
					}
				}
			}
			for _, imported := range p.imports {
				if slices.Contains(ioPackages, imported) {
					t.Errorf("%s imports %s: the scheduling core does no I/O", p.path, imported)
				}
				if slices.Contains(decisionPackages, p.path) && slices.Contains(nondeterministicPackages, imported) {
					t.Errorf("%s imports %s: it takes time and randomness as inputs and starts no goroutines", p.path, imported)
				}
			}
		}
		// 1b. The autoscaler's planner (the package autoscaler itself, not its loop or
		// providers) is as pure: no I/O, no clock or randomness (it names durations only).
		if p.path == "autoscaler" {
			for _, imported := range p.imports {
				if slices.Contains(ioPackages, imported) || (imported != "time" && slices.Contains(nondeterministicPackages, imported)) {
					t.Errorf("%s imports %s: the planner is pure", p.path, imported)
				}
				if imported == module+"/autoscaler/reconciler" || strings.HasPrefix(imported, module+"/autoscaler/provider") {
					t.Errorf("%s imports %s: the planner knows nothing of the loop around it", p.path, imported)
				}
			}
		}
		// 2. gcs, raylet, sdk and the autoscaler meet only over protos/.
		for _, service := range services {
			if !inside(p, service) {
				continue
			}
			for _, dep := range p.deps {
				for _, other := range append(services, "cmd", "tests", "examples") {
					if other != service && under(dep, other) {
						t.Errorf("%s depends on %s: %s and %s meet only over protos/", p.path, dep, service, other)
					}
				}
			}
		}
		// 3. placement makes decisions and only the GCS and the autoscaler ask it for them:
		// the shared vocabulary (resources, MIG tables, labels) lives in leaf packages.
		// internal/pbplacement, the one reading of a node's wire GPUs in placement's
		// terms, serves those two alone. admission/preemption asks placement too, on a
		// copy of the caller's snapshot: whether a preemptor fits once victims are gone is
		// placement's answer, not a second rule.
		if !inside(p, "placement", "gcs", "autoscaler", "tests", "internal/pbplacement", "admission/preemption") {
			for _, imported := range p.imports {
				if under(imported, "placement") {
					t.Errorf("%s imports %s: only gcs and the autoscaler call the scheduler; use the vocabulary in internal/resources, internal/mig, internal/nodelabel", p.path, imported)
				}
			}
		}
		if !inside(p, "gcs", "autoscaler", "tests", "cmd") {
			for _, imported := range p.imports {
				if under(imported, "internal/pbplacement") {
					t.Errorf("%s imports %s: it serves the GCS and the autoscaler only", p.path, imported)
				}
			}
		}
		if inside(p, "sdk", "raylet") {
			for _, dep := range p.deps {
				if under(dep, "placement") {
					t.Errorf("%s depends on %s: only gcs and the autoscaler call the scheduler", p.path, dep)
				}
			}
		}
		// 4. The vocabulary packages are leaves: no I/O, nothing of raygo but each other.
		if inside(p, vocabulary...) {
			for _, imported := range p.imports {
				if slices.Contains(ioPackages, imported) || slices.Contains(nondeterministicPackages, imported) {
					t.Errorf("%s imports %s: the shared vocabulary is pure", p.path, imported)
				}
				if rel, ok := strings.CutPrefix(imported, module+"/"); ok && !slices.ContainsFunc(vocabulary, func(v string) bool { return rel == v }) {
					t.Errorf("%s imports %s: the shared vocabulary imports nothing of raygo but itself", p.path, imported)
				}
			}
		}
		// 5. examples use only the public SDK.
		if inside(p, "examples") {
			for _, imported := range p.imports {
				if strings.HasPrefix(imported, module+"/") && imported != module+"/sdk" {
					t.Errorf("%s imports %s: examples use only the public sdk", p.path, imported)
				}
			}
		}
	}
}

// The Python examples use the public client only, never its private modules.
func TestPythonExamplesUsePublicClient(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "examples", "python", "*.py"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Python examples found under examples/python (%v)", err)
	}
	private := regexp.MustCompile(`^\s*(from|import)\s+raygo\.(_\w+|.*\._\w+)`)
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		scanner := bufio.NewScanner(f)
		for line := 1; scanner.Scan(); line++ {
			if private.MatchString(scanner.Text()) {
				t.Errorf("%s:%d imports a private module of the client: %s", filepath.Base(file), line, strings.TrimSpace(scanner.Text()))
			}
		}
		f.Close()
	}
}
