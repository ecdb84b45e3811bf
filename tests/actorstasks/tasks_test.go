package actorstasks

import (
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

// Tasks fan out over the bundles of a SPREAD group: each runs on its bundle's node and
// holds the bundle's CPU; refs feed other tasks; resources come back after the tasks.
func TestTasksFanOutOverSpreadGroup(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "2")
	c.AddNode("--num-cpus", "2")
	c.AddNode("--num-cpus", "2")
	client := connect(t, c)
	ctx := testContext(t)

	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}, {"CPU": 1}}, sdk.StrictSpread)
	if err != nil {
		t.Fatal(err)
	}
	info, err := pg.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const tasks = 30
	refs := make([]*sdk.ObjectRef, tasks)
	for i := range refs {
		if refs[i], err = client.Submit(ctx, "where", nil, sdk.InPlacementGroup(pg, i%3)); err != nil {
			t.Fatal(err)
		}
	}
	nodes := map[string]bool{}
	for i, ref := range refs {
		var w WorkerView
		if err := sdk.Get(ctx, ref, &w); err != nil {
			t.Fatal(err)
		}
		bundle := info.Bundles[i%3]
		if w.NodeID != bundle.NodeID || w.Bundle != i%3 || w.PlacementGroupID != pg.ID {
			t.Fatalf("task %d ran on node %s bundle %d; its bundle %d is on %s", i, w.NodeID, w.Bundle, i%3, bundle.NodeID)
		}
		if ref.Where().NodeID != w.NodeID || ref.Where().PID != w.PID {
			t.Fatalf("ref.Where() %+v, the worker says %+v", ref.Where(), w)
		}
		nodes[w.NodeID] = true
	}
	if len(nodes) != 3 {
		t.Fatalf("tasks ran on %d nodes, want the 3 of the STRICT_SPREAD group", len(nodes))
	}

	// Refs as arguments: the SDK waits for them and passes their values.
	a, err := client.Submit(ctx, "square", sdk.Args(3))
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Submit(ctx, "square", sdk.Args(4))
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := result[int](client.Submit(ctx, "add", sdk.Args(a, b))); err != nil || sum != 25 {
		t.Fatalf("add(square(3), square(4)) = %d, %v; want 25", sum, err)
	}
	ready, notReady, err := sdk.Wait(ctx, []*sdk.ObjectRef{a, b}, 2)
	if err != nil || len(ready) != 2 || len(notReady) != 0 {
		t.Fatalf("Wait: %d ready, %d not, %v", len(ready), len(notReady), err)
	}

	// Requests that fit no bundle are rejected at once, naming the bundle.
	if _, err := client.Submit(ctx, "where", nil, sdk.InPlacementGroup(pg, 2), sdk.WithCPUs(2)); !errors.Is(err, sdk.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "bundle 2 of placement group "+pg.ID) {
		t.Fatalf("2 CPUs in a 1-CPU bundle: %v", err)
	}
	if _, err := client.Submit(ctx, "where", nil, sdk.InPlacementGroup(pg, -1), sdk.WithGPUs(1)); !errors.Is(err, sdk.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "no bundle of placement group "+pg.ID) {
		t.Fatalf("a GPU from a CPU-only group: %v", err)
	}

	// Removing the group frees its bundles' resources on every node.
	if err := pg.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 15*time.Second, "every CPU is free again", func() error {
		nodes, err := c.Nodes()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.ResourcesAvailable["CPU"] != n.ResourcesTotal["CPU"] {
				return errors.New("node " + n.NodeId + " has " + strconv.FormatFloat(n.ResourcesAvailable["CPU"], 'g', -1, 64) + " CPUs free")
			}
		}
		return nil
	})
}

// A task whose worker dies runs again, up to its retries; its function's errors and
// panics reach the caller without retries.
func TestTaskRetriesAndErrors(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "4")
	client := connect(t, c)
	ctx := testContext(t)

	marker := filepath.Join(t.TempDir(), "died-once")
	pid, err := result[int](client.Submit(ctx, "dieOnce", sdk.Args(marker), sdk.WithMaxRetries(1)))
	if err != nil {
		t.Fatalf("task retried after its worker died: %v", err)
	}
	raw, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	if firstPID, _ := strconv.Atoi(string(raw)); firstPID == pid || alive(firstPID) {
		t.Fatalf("the retry ran in pid %d; the first attempt's worker %d should be dead", pid, firstPID)
	}
	if _, err := result[int](client.Submit(ctx, "dieAlways", nil, sdk.WithMaxRetries(2))); !errors.Is(err, sdk.ErrTaskFailed) || !strings.Contains(err.Error(), "died 3 times (max_retries=2)") {
		t.Fatalf("task whose worker always dies: %v, want ErrTaskFailed after 3 attempts", err)
	}

	var taskErr *sdk.TaskError
	if _, err := result[int](client.Submit(ctx, "divide", sdk.Args(1, 0))); !errors.As(err, &taskErr) ||
		taskErr.Type != "*errors.errorString" || taskErr.Message != "division by zero" || taskErr.Function != "divide" {
		t.Fatalf("function error: %v", err)
	}
	if _, err := result[int](client.Submit(ctx, "panics", nil)); !errors.As(err, &taskErr) || taskErr.Type != "panic" ||
		!strings.Contains(taskErr.Message, "task panicked on purpose") {
		t.Fatalf("panic: %v", err)
	}
	if _, err := client.Submit(ctx, "nope", nil); !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), `no task function "nope"`) {
		t.Fatalf("unregistered task: %v", err)
	}
	if _, err := client.Submit(ctx, "square", sdk.Args("three")); !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), "args[0]") {
		t.Fatalf("wrong argument type: %v", err)
	}
	// Node affinity: on the named node, or unschedulable when it does not exist.
	if w, err := result[WorkerView](client.Submit(ctx, "where", nil, sdk.OnNode(c.Head.NodeID, false))); err != nil || w.NodeID != c.Head.NodeID {
		t.Fatalf("task with affinity to the head ran on %q: %v", w.NodeID, err)
	}
	if _, err := result[WorkerView](client.Submit(ctx, "where", nil, sdk.OnNode(strings.Repeat("ab", 28), false))); !errors.Is(err, sdk.ErrUnschedulable) {
		t.Fatalf("task with hard affinity to an unknown node: %v, want ErrUnschedulable", err)
	}
	// Default resources: a task holds 1 CPU while it runs, and gives it back after.
	if n, err := result[int](client.Submit(ctx, "square", sdk.Args(5))); err != nil || n != 25 {
		t.Fatalf("square(5) = %d, %v", n, err)
	}
	harness.Eventually(t, 15*time.Second, "the tasks' CPUs are free again", func() error {
		nodes, err := c.Nodes()
		if err != nil {
			return err
		}
		if got := nodes[0].ResourcesAvailable["CPU"]; got != 4 {
			return fmt.Errorf("%v of 4 CPUs free", got)
		}
		return nil
	})
}

// Label selectors (sdk.WithLabelSelector, the path Python's label_selector and
// NodeLabelSchedulingStrategy take): a hard selector runs tasks and an actor on the
// matching node, a soft one prefers it, and a malformed one fails naming the key.
func TestTasksAndActorsWithLabelSelectors(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "2", "--labels", "zone=a")
	b := c.AddNode("--num-cpus", "2", "--labels", "zone=b")
	spot := c.AddNode("--num-cpus", "2", "--labels", "zone=b,market=spot")
	client := connect(t, c)
	ctx := testContext(t)

	// A soft selector prefers the matching nodes among those with room now, as the GCS
	// sees them: the CPUs of the tasks before must be back in its view, or the task may
	// rightly go elsewhere.
	allCPUsFree := func() {
		t.Helper()
		harness.Eventually(t, 15*time.Second, "every node's CPUs are free again", func() error {
			nodes, err := c.Nodes()
			if err != nil {
				return err
			}
			for _, n := range nodes {
				if got := n.ResourcesAvailable["CPU"]; got != n.ResourcesTotal["CPU"] {
					return fmt.Errorf("node %s: %v of %v CPUs free", n.NodeId, got, n.ResourcesTotal["CPU"])
				}
			}
			return nil
		})
	}
	runsOn := func(what string, want string, opts ...sdk.Option) {
		t.Helper()
		for i := 0; i < 4; i++ {
			allCPUsFree()
			w, err := result[WorkerView](client.Submit(ctx, "where", nil, opts...))
			if err != nil || w.NodeID != want {
				t.Fatalf("%s: task %d ran on %q (%v), want %s", what, i, w.NodeID, err, want)
			}
		}
	}
	runsOn("hard zone=b, no market", b.NodeID, sdk.WithLabelSelector(map[string]string{"zone": "b", "market": "!exists()"}, nil))
	runsOn("hard market exists", spot.NodeID, sdk.WithLabelSelector(map[string]string{"market": "exists()"}, nil))
	runsOn("soft market=spot", spot.NodeID, sdk.WithLabelSelector(nil, map[string]string{"market": "spot"}))
	runsOn("spread, hard zone=a", c.Head.NodeID, sdk.WithSpread(), sdk.WithLabelSelector(map[string]string{"zone": "in(a,x)"}, nil))

	actor, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.WithLabelSelector(map[string]string{"market": "spot"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if w, err := result[WorkerView](actor.Call(ctx, "Where")); err != nil || w.NodeID != spot.NodeID {
		t.Fatalf("actor with market=spot on %q (%v), want %s", w.NodeID, err, spot.NodeID)
	}
	// The GCS refuses a malformed selector when the driver asks where to lease.
	if _, err := result[WorkerView](client.Submit(ctx, "where", nil, sdk.WithLabelSelector(map[string]string{"zone": "in(a,"}, nil))); err == nil ||
		!strings.Contains(err.Error(), `scheduling_strategy.label_selector["zone"]`) {
		t.Fatalf("malformed selector: %v, want an error naming the key", err)
	}
}
