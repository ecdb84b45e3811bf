package integration

import (
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/tests/harness"
)

// `raygo list actors` on a fresh cluster: an empty JSON list, the table header, and bad
// input refused with exit status 2. Actors themselves are covered by the actor tests.
func TestCLIListsActors(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "1")

	stdout, stderr, code := c.Run("list", "actors", "--format", "json")
	if code != 0 {
		t.Fatalf("list actors --format json: exit %d: %s", code, stderr)
	}
	if strings.TrimSpace(stdout) != "[]" {
		t.Errorf("list actors --format json on a fresh cluster: %q, want []", stdout)
	}

	table, stderr, code := c.Run("list", "actors")
	if code != 0 {
		t.Fatalf("list actors: exit %d: %s", code, stderr)
	}
	for _, column := range []string{"ACTOR_ID", "CLASS_NAME", "NAME", "STATE", "NODE_ID", "PID", "RESTARTS"} {
		if !strings.Contains(table, column) {
			t.Errorf("table header lacks %s:\n%s", column, table)
		}
	}

	_, stderr, code = c.Run("list", "actors", "--format", "yaml")
	if code != 2 || !strings.Contains(stderr, "--format") || !strings.Contains(stderr, "yaml") {
		t.Errorf("list actors --format yaml: exit %d, stderr %q; want 2 naming --format and yaml", code, stderr)
	}
	help, _, code := c.Run("list", "--help")
	if code != 0 || !strings.Contains(help, "actors") {
		t.Errorf("list --help (exit %d) does not name actors:\n%s", code, help)
	}
}
