package integration

import (
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// raygo debug check-invariants reads a real cluster: clean while groups are CREATED,
// and it names a reservation no group owns.
func TestCheckInvariantsCommand(t *testing.T) {
	t.Parallel()
	bin := harness.Binary(t)
	c := harness.StartHead(t, "--num-cpus", "2")
	c.AddNode("--num-cpus", "2")
	ctx := testContext(t)
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}}, sdk.StrictSpread, sdk.Detached())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	check := []string{"debug", "check-invariants", "--address", c.GCSAddress, "--views", "2", "--interval", "100ms"}
	stdout, stderr, code := harness.Run(t, bin, check)
	if code != 0 || !strings.Contains(stdout, "No invariant broken") {
		t.Fatalf("clean cluster: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	// A ghost: a bundle prepared on a raylet for a group the GCS never had.
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	harness.PrepareOrphan(t, ctx, c.GCSAddress, nodes[0].RayletAddress, "ghost")
	stdout, stderr, code = harness.Run(t, bin, check)
	if code != 1 || !strings.Contains(stdout, "leak: node "+nodes[0].NodeId+" holds bundle ghost[0] (prepared)") || !strings.Contains(stderr, "1 invariant violations") {
		t.Fatalf("a ghost reservation: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
