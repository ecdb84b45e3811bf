package actorstasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Saver is an actor with a Checkpoint method: its count survives a preemption through
// the file it checkpoints to.
type Saver struct {
	dir      string
	count    int
	restored bool
}

func (s *Saver) Add(d int) int { s.count += d; return s.count }

// State is the count, whether the constructor restored it, and the worker's pid.
func (s *Saver) State() [3]int {
	restored := 0
	if s.restored {
		restored = 1
	}
	return [3]int{s.count, restored, os.Getpid()}
}

// Checkpoint writes the count and checkpointing-<pid>, then waits (until its deadline)
// for the test to create the file release, then writes checkpointed-by-<pid>: the test
// looks at the cluster while a checkpoint runs.
func (s *Saver) Checkpoint(ctx context.Context) error {
	pid := strconv.Itoa(os.Getpid())
	if err := os.WriteFile(filepath.Join(s.dir, "count"), []byte(strconv.Itoa(s.count)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "checkpointing-"+pid), nil, 0o644); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(s.dir, "release")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return os.WriteFile(filepath.Join(s.dir, "checkpointed-by-"+pid), nil, 0o644)
}

var _ sdk.Checkpointer = (*Saver)(nil)

func init() {
	sdk.RegisterActor("Saver", func(dir string) (*Saver, error) {
		s := &Saver{dir: dir}
		raw, err := os.ReadFile(filepath.Join(dir, "count"))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			if s.count, err = strconv.Atoi(string(raw)); err != nil {
				return nil, err
			}
			s.restored = true
		}
		return s, nil
	})
	// sleepOnce writes its pid to marker and sleeps the first time; when retried (the
	// marker exists) it returns at once.
	sdk.RegisterTask("sleepOnce", func(ms int, marker string) (int, error) {
		if _, err := os.Stat(marker); err == nil {
			return os.Getpid(), nil
		}
		if err := os.WriteFile(marker, []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
			return 0, err
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return os.Getpid(), nil
	})
}

// preemptionQueues: one queue of 2 CPUs whose higher-priority work evicts its
// lower-priority work; batch work has 10 minutes to checkpoint.
const preemptionQueues = `queues:
  - name: team
    namespaces: ["team"]
    resources:
      CPU: {nominalQuota: 2}
    preemption:
      withinClusterQueue: LowerPriority
priorityClasses:
  - {name: batch, value: 50, gracePeriod: 10m}
`

// A preempted group's Go actor with a Checkpoint method checkpoints before its worker is
// stopped: while it runs, the group holds its bundles and its workers run, and `raygo
// list placement-groups` and `raygo status` show the notice; the group is released when it
// returned (long before the 10-minute deadline). When the group is placed again, the actor
// restarts per max_restarts, restores its state and answers calls, and the group's task
// retries per max_retries.
func TestAPreemptedActorCheckpointsThenRestartsAndItsTaskRetries(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(file, []byte(preemptionQueues), 0o644); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "4", "--queues", file)
	ctx := testContext(t)
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress, Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })

	victim, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}}, sdk.Pack, sdk.WithPriority("batch"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	saver, err := client.CreateActor(ctx, "Saver", sdk.Args(dir), sdk.InPlacementGroup(victim, 0), sdk.WithCPUs(1), sdk.WithMaxRestarts(1))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := result[int](saver.Call(ctx, "Add", 5)); err != nil || n != 5 {
		t.Fatalf("Add(5) = %d, %v", n, err)
	}
	before, err := result[[3]int](saver.Call(ctx, "State"))
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "task-ran")
	task, err := client.Submit(ctx, "sleepOnce", sdk.Args(600_000, marker), sdk.InPlacementGroup(victim, 1), sdk.WithMaxRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	var taskPID int
	harness.Eventually(t, 30*time.Second, "the task runs", func() error {
		raw, err := os.ReadFile(marker)
		if err == nil {
			_, err = fmt.Sscan(string(raw), &taskPID)
		}
		return err
	})
	c.CheckInvariants("the victim's actor and task run")

	// The preemptor needs the queue's 2 CPUs: the batch group is evicted.
	preemptor, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 2}}, sdk.Pack, sdk.WithPriority("training-high"))
	if err != nil {
		t.Fatal(err)
	}
	// While the actor checkpoints, the victim holds its bundles, and `raygo list
	// placement-groups` and `raygo status` show it being preempted.
	harness.Eventually(t, 30*time.Second, "the actor checkpoints", func() error {
		_, err := os.Stat(filepath.Join(dir, "checkpointing-"+strconv.Itoa(before[2])))
		return err
	})
	row, err := victim.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != "CREATED" || row.Bundles[0].NodeID == "" || row.LastPreemption == nil || row.LastPreemption.Acknowledged ||
		row.LastPreemption.Reason != "InClusterQueue" || row.LastPreemption.PreemptorID != preemptor.ID {
		t.Fatalf("victim during its actor's checkpoint: %s, bundle 0 on %q, notice %+v; want CREATED, placed, noticed by %s",
			row.State, row.Bundles[0].NodeID, row.LastPreemption, preemptor.ID)
	}
	if !alive(before[2]) || !alive(taskPID) {
		t.Fatal("the victim's workers stopped before the actor's checkpoint returned")
	}
	noticeText := "InClusterQueue by pg_" + preemptor.ID[:12]
	if stdout, stderr, code := c.Run("list", "placement-groups"); code != 0 || !strings.Contains(stdout, "1x "+noticeText) {
		t.Fatalf("raygo list placement-groups (exit %d) does not show the notice %q:\n%s%s", code, noticeText, stdout, stderr)
	}
	if stdout, stderr, code := c.Run("status"); code != 0 || !strings.Contains(stdout, "Being preempted:") ||
		!strings.Contains(stdout, "pg_"+victim.ID[:12]) || !strings.Contains(stdout, noticeText) {
		t.Fatalf("raygo status (exit %d) does not show the victim being preempted:\n%s%s", code, stdout, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := preemptor.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpointed-by-"+strconv.Itoa(before[2]))); err != nil {
		t.Fatalf("the preemptor runs but the actor's worker (pid %d) did not checkpoint: %v", before[2], err)
	}
	row, err = victim.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != "PENDING" || row.PendingReasonCode != "Preempted" || row.LastPreemption == nil ||
		!row.LastPreemption.Acknowledged || time.Now().After(row.LastPreemption.Deadline) {
		t.Fatalf("victim: %s %q %+v; want PENDING Preempted, released by the acknowledgement before its deadline", row.State, row.PendingReasonCode, row.LastPreemption)
	}
	harness.Eventually(t, 15*time.Second, "the victim's workers are stopped", func() error {
		for _, pid := range []int{before[2], taskPID} {
			if alive(pid) {
				return fmt.Errorf("worker pid %d still runs", pid)
			}
		}
		return nil
	})
	c.CheckInvariants("the preemptor runs, the victim is queued")

	// The preemptor goes; the victim runs again, its actor restarted from its checkpoint.
	if err := preemptor.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	waitForActor(t, saver, "restarted", func(a *sdk.ActorInfo) bool { return a.State == "ALIVE" && a.NumRestarts == 1 })
	after, err := result[[3]int](saver.Call(ctx, "State"))
	if err != nil {
		t.Fatal(err)
	}
	if after[0] != 5 || after[1] != 1 || after[2] == before[2] {
		t.Fatalf("after the restart the actor says count %d, restored %d, pid %d; want 5 restored from its checkpoint in a new worker (was pid %d)",
			after[0], after[1], after[2], before[2])
	}
	retried, err := result[int](task, nil)
	if err != nil {
		t.Fatalf("the victim's task after the group runs again: %v", err)
	}
	if retried == taskPID {
		t.Fatalf("the task returned from its first worker (pid %d), which the eviction stopped", taskPID)
	}
	c.CheckInvariants("the victim runs again")
}
