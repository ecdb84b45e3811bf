package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// rayletCPU is what each live raylet itself reports as available CPU.
func rayletCPU(t *testing.T, c *harness.Cluster) (map[string]float64, error) {
	nodes, err := c.Nodes()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, n := range nodes {
		if n.State != pb.NodeState_ALIVE {
			continue
		}
		stats, err := harness.Dial(t, n.RayletAddress).NodeManager.GetNodeStats(context.Background(), &pb.GetNodeStatsRequest{})
		if err != nil {
			return nil, err
		}
		out[n.NodeId] = stats.Node.ResourcesAvailable["CPU"]
	}
	return out, nil
}

func TestStrictSpreadSurvivesANodeKilledWithSIGKILL(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "1")
	for i := 0; i < 3; i++ {
		c.AddNode("--num-cpus", "1")
	}
	ctx := testContext(t)
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}, {"CPU": 1}}, sdk.StrictSpread)
	if err != nil {
		t.Fatal(err)
	}
	before := nodesOf(ready(t, pg))
	if distinct(before) != 3 {
		t.Fatalf("STRICT_SPREAD on %v", before)
	}
	var victim *harness.Node
	lost := -1
	for _, w := range c.Workers {
		for i, n := range before {
			if n == w.NodeID {
				victim, lost = w, i
			}
		}
	}
	victim.Kill()
	var after []string
	harness.Eventually(t, 30*time.Second, "group CREATED again on the remaining nodes", func() error {
		info, err := pg.Table(ctx)
		if err != nil {
			return err
		}
		if info.State != "CREATED" {
			return fmt.Errorf("state %s (%s)", info.State, info.PendingReason)
		}
		after = nodesOf(info)
		if after[lost] == victim.NodeID {
			return fmt.Errorf("bundle %d still on the dead node", lost)
		}
		return nil
	})
	for i := range before {
		if i != lost && after[i] != before[i] {
			t.Errorf("bundle %d moved from %s to %s though its node lived", i, before[i], after[i])
		}
	}
	if distinct(after) != 3 {
		t.Errorf("after rescheduling the bundles share nodes: %v", after)
	}
	// The GCS went through RESCHEDULING (its log records each transition).
	log, err := os.ReadFile(filepath.Join(c.Head.LogDir, "gcs.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"pg_id":"`+pg.ID+`"`) || !strings.Contains(string(log), "placement group RESCHEDULING") {
		t.Errorf("the GCS log shows no RESCHEDULING of %s", pg.ID)
	}
	cpu, err := rayletCPU(t, c)
	if err != nil {
		t.Fatal(err)
	}
	used := 0.0
	for _, v := range cpu {
		used += 1 - v
	}
	if used != 3 {
		t.Fatalf("raylets hold %v CPU of bundles, want exactly 3 (%v)", used, cpu)
	}
}

func TestGCSKilledBetweenPrepareAndCommitNeverDoubleAllocates(t *testing.T) {
	t.Parallel()
	redis := redisserver.Start(t)
	hook := filepath.Join(t.TempDir(), "pause-after-prepare")
	c := harness.StartHeadWithEnv(t, []string{"RAYGO_TEST_PAUSE_AFTER_PREPARE_FILE=" + hook},
		"--store", "redis", "--redis-address", redis.Addr, "--redis-namespace", "prepare-kill", "--num-cpus", "2")
	for i := 0; i < 3; i++ {
		c.AddNode("--num-cpus", "2")
	}
	ctx := testContext(t)
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// An orphan: a bundle prepared on a raylet by this GCS epoch for a group the GCS never
	// recorded (as if the GCS died before persisting PREPARED).
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	harness.PrepareOrphan(t, ctx, c.GCSAddress, nodes[1].RayletAddress, "0rphan")

	if err := os.WriteFile(hook, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}, {"CPU": 1}, {"CPU": 1}}, sdk.Spread, sdk.Detached())
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "the GCS paused between prepare and commit", func() error {
		_, err := os.Stat(hook + ".reached")
		return err
	})
	row, err := pg.Table(ctx)
	if err != nil || row.State != "PREPARED" {
		t.Fatalf("group at the hook: %+v, %v; want PREPARED", row, err)
	}
	gcsPID := c.Head.ReadRecord(t).GCSPID
	if err := killPID(gcsPID); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}

	harness.Eventually(t, 40*time.Second, "group CREATED after the GCS restart", func() error {
		info, err := pg.Table(ctx)
		if err != nil {
			return err
		}
		if info.State != "CREATED" {
			return fmt.Errorf("state %s %s", info.State, info.PendingReason)
		}
		return nil
	})
	var cpu map[string]float64
	harness.Eventually(t, 40*time.Second, "raylets hold exactly the group's 4 bundles (orphan released)", func() error {
		var err error
		if cpu, err = rayletCPU(t, c); err != nil {
			return err
		}
		used := 0.0
		for _, v := range cpu {
			used += 2 - v
		}
		if used != 4 {
			return fmt.Errorf("raylets hold %v CPU of bundles, want 4: %v", used, cpu)
		}
		return nil
	})
	if err := pg.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "nothing leaked after removal", func() error {
		cpu, err := rayletCPU(t, c)
		if err != nil {
			return err
		}
		for node, v := range cpu {
			if v != 2 {
				return fmt.Errorf("node %s has %v of 2 CPU available", node, v)
			}
		}
		return nil
	})
}
