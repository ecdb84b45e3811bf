package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

func TestCLIListsPlacementGroupsAndStatusShowsWhyTheyWait(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "2")
	ctx := testContext(t)
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	created, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 0.5}}, sdk.Pack, sdk.WithName("small"))
	if err != nil {
		t.Fatal(err)
	}
	ready(t, created)
	waiting, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 64}}, sdk.StrictPack, sdk.WithName("huge"))
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "huge is INFEASIBLE", func() error {
		info, err := waiting.Table(ctx)
		if err == nil && info.SchedulingState != "INFEASIBLE" {
			err = fmt.Errorf("scheduling state %s", info.SchedulingState)
		}
		return err
	})

	stdout, stderr, code := c.Run("list", "placement-groups", "--format", "json")
	if code != 0 {
		t.Fatalf("list placement-groups: exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("list placement-groups JSON: %v\n%s", err, stdout)
	}
	for _, key := range []string{"placement_group_id", "name", "state", "strategy", "is_detached", "bundles", "stats"} {
		if _, ok := rows[0][key]; !ok {
			t.Errorf("row lacks Ray's field %q", key)
		}
	}
	first := rows[0]
	if first["placement_group_id"] != created.ID || first["state"] != "CREATED" || first["strategy"] != "PACK" || first["is_detached"] != false {
		t.Errorf("first row: %v", first)
	}
	bundles := first["bundles"].([]any)
	b1 := bundles[1].(map[string]any)
	if b1["bundle_index"] != 1.0 || b1["node_id"] != c.Head.NodeID || b1["unit_resources"].(map[string]any)["CPU"] != 0.5 {
		t.Errorf("bundle 1: %v", b1)
	}
	stats := first["stats"].(map[string]any)
	for _, key := range []string{"end_to_end_creation_latency_ms", "scheduling_latency_ms", "scheduling_attempt", "scheduling_state"} {
		if _, ok := stats[key]; !ok {
			t.Errorf("stats lack %q: %v", key, stats)
		}
	}
	if stats["scheduling_state"] != "FINISHED" || rows[1]["state"] != "PENDING" || rows[1]["bundles"].([]any)[0].(map[string]any)["node_id"] != nil {
		t.Errorf("states: %v / %v", stats, rows[1])
	}

	status, _, code := c.Run("status")
	if code != 0 || !strings.Contains(status, "1 CREATED, 1 PENDING") || !strings.Contains(status, "huge") ||
		!strings.Contains(status, "INFEASIBLE") || !strings.Contains(status, "CPU total 2 < 64") {
		t.Fatalf("status does not show the waiting group and why:\n%s", status)
	}
	if !strings.Contains(status, "1.5/2.0 CPU") {
		t.Errorf("status resource usage does not count the bundles:\n%s", status)
	}
	table, _, _ := c.Run("list", "placement-groups")
	if !strings.Contains(table, created.ID) || !strings.Contains(table, "STRICT_PACK") {
		t.Errorf("table output:\n%s", table)
	}
}
