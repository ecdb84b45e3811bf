package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/poll"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

const teamQueues = `queues:
  - name: team
    namespaces: ["team"]
    resources:
      CPU: {nominalQuota: 2}
`

// A head started with --queues admits groups into their namespace's queue: two 1-CPU
// groups fill team's quota of 2 CPUs, a third waits with QuotaExceeded although the
// node has CPUs free, and is placed once one of the others is removed.
func TestQueuesHoldGroupsBeyondTheirQuota(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "queues.yaml")
	if err := os.WriteFile(file, []byte(teamQueues), 0o644); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "8", "--queues", file)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress, Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var groups []*sdk.PlacementGroup
	for range 3 {
		pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack)
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, pg)
	}
	for _, pg := range groups[:2] {
		if _, err := pg.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the third group waits for quota", func() error {
		info, err := groups[2].Table(ctx)
		if err != nil {
			return err
		}
		if info.State != "PENDING" || info.PendingReasonCode != "QuotaExceeded" || info.Queue != "team" || info.SchedulingState != "QUEUED" {
			return fmt.Errorf("%s %s queue %q %s", info.State, info.PendingReasonCode, info.Queue, info.SchedulingState)
		}
		return nil
	})
	if err := groups[0].Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := groups[2].Ready(ctx); err != nil {
		t.Fatalf("the third group after a removal returned quota: %v", err)
	}
}

// A bad queue file stops the start before anything runs, naming the field.
func TestABadQueueFileStopsTheStart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "queues.yaml")
	bad := strings.Replace(teamQueues, "nominalQuota: 2", "nominalQuota: -2", 1)
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(harness.Binary(t), "start", "--head", "--port", "1", "--queues", file).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(string(out), "nominalQuota") {
		t.Fatalf("%v: %s", err, out)
	}
}
