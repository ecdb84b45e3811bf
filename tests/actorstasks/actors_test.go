package actorstasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Actors land in their bundle: the node and the GPUs their worker sees, checked from
// inside the worker; calls through one handle run in order; a request larger than its
// bundle is rejected naming the bundle; removing the group kills the actor.
func TestActorsRunInTheirBundle(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "2")
	gpuNode := c.AddNode("--gpu-sim", "dgx-h100", "--num-cpus", "8")
	client := connect(t, c)
	ctx := testContext(t)

	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1, "GPU": 2}, {"CPU": 1, "GPU": 2}}, sdk.StrictPack)
	if err != nil {
		t.Fatal(err)
	}
	info, err := pg.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.InPlacementGroup(pg, 0), sdk.WithGPUs(3)); !errors.Is(err, sdk.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "bundle 0 of placement group "+pg.ID) {
		t.Fatalf("actor asking 3 GPUs of a 2-GPU bundle: %v, want ErrInvalidArgument naming bundle 0", err)
	}
	counter, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.InPlacementGroup(pg, 1), sdk.WithCPUs(1), sdk.WithGPUs(2))
	if err != nil {
		t.Fatal(err)
	}
	where, err := result[WorkerView](counter.Call(ctx, "Where"))
	if err != nil {
		t.Fatal(err)
	}
	bundle := info.Bundles[1]
	if where.NodeID != gpuNode.NodeID || bundle.NodeID != gpuNode.NodeID {
		t.Errorf("actor on node %s, bundle on %s; want both on the GPU node %s", where.NodeID, bundle.NodeID, gpuNode.NodeID)
	}
	if where.CUDAVisibleDevices != bundle.CUDAVisibleDevices || where.CUDADeviceOrder != "PCI_BUS_ID" {
		t.Errorf("inside the worker CUDA_VISIBLE_DEVICES=%q CUDA_DEVICE_ORDER=%q; want the bundle's %q and PCI_BUS_ID",
			where.CUDAVisibleDevices, where.CUDADeviceOrder, bundle.CUDAVisibleDevices)
	}
	if where.PlacementGroupID != pg.ID || where.Bundle != 1 {
		t.Errorf("worker reports bundle %s[%d], want %s[1]", where.PlacementGroupID, where.Bundle, pg.ID)
	}
	actorInfo, err := counter.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if actorInfo.PID != where.PID || actorInfo.NodeID != gpuNode.NodeID || actorInfo.PlacementGroupID != pg.ID || actorInfo.CUDAVisibleDevices != bundle.CUDAVisibleDevices {
		t.Errorf("actor table row %+v does not match the worker %+v", actorInfo, where)
	}

	// A task in the other bundle gets one of that bundle's GPUs.
	task, err := result[WorkerView](client.Submit(ctx, "where", nil, sdk.InPlacementGroup(pg, 0), sdk.WithGPUs(1)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(","+info.Bundles[0].CUDAVisibleDevices+",", ","+task.CUDAVisibleDevices+",") || task.CUDAVisibleDevices == "" {
		t.Errorf("task in bundle 0 sees CUDA_VISIBLE_DEVICES=%q; want one of the bundle's %q", task.CUDAVisibleDevices, info.Bundles[0].CUDAVisibleDevices)
	}

	// Ordered calls: sent without waiting, they still run one after the other.
	const calls = 200
	refs := make([]*sdk.ObjectRef, calls)
	for i := range refs {
		if refs[i], err = counter.Call(ctx, "Add", 1); err != nil {
			t.Fatal(err)
		}
	}
	for i, ref := range refs {
		var n int
		if err := sdk.Get(ctx, ref, &n); err != nil {
			t.Fatal(err)
		}
		if n != i+1 {
			t.Fatalf("call %d returned %d: calls ran out of order", i, n)
		}
	}

	// The CLI lists it with Ray's state fields.
	out, stderr, code := c.Run("list", "actors", "--format", "json")
	if code != 0 {
		t.Fatalf("raygo list actors: exit %d: %s", code, stderr)
	}
	row := findActorRow(t, out, counter.ID)
	if row["state"] != "ALIVE" || row["class_name"] != "Counter" || row["node_id"] != gpuNode.NodeID ||
		row["placement_group_id"] != pg.ID || fmt.Sprint(row["pid"]) != fmt.Sprint(where.PID) {
		t.Errorf("raygo list actors row %v", row)
	}

	// Removing the group kills the actor and its worker.
	if err := pg.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := counter.Ready(ctx); !errors.Is(err, sdk.ErrActorDied) || !strings.Contains(err.Error(), "placement group removed") {
		t.Fatalf("actor after its group was removed: %v, want ErrActorDied (placement group removed)", err)
	}
	if _, err := result[int](counter.Call(ctx, "Add", 1)); !errors.Is(err, sdk.ErrActorDied) {
		t.Errorf("call to a dead actor: %v, want ErrActorDied", err)
	}
	harness.Eventually(t, 15*time.Second, "the removed actor's worker exits", func() error {
		if alive(where.PID) {
			return fmt.Errorf("worker pid %d still runs", where.PID)
		}
		return nil
	})
	out, _, _ = c.Run("list", "actors", "--format", "json")
	if row := findActorRow(t, out, counter.ID); row["state"] != "DEAD" || !strings.Contains(fmt.Sprint(row["death_cause"]), "placement group removed") {
		t.Errorf("dead actor row %v, want DEAD with its death cause", row)
	}
}

// waitForActor polls the actor's row until want holds.
func waitForActor(t *testing.T, actor *sdk.Actor, what string, want func(*sdk.ActorInfo) bool) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, "actor "+actor.ID+" "+what, func() error {
		info, err := actor.Info(testContext(t))
		if err != nil {
			return err
		}
		if !want(info) {
			return fmt.Errorf("actor is %s after %d restarts (%s%s)", info.State, info.NumRestarts, info.PendingReason, info.DeathCause)
		}
		return nil
	})
}

func findActorRow(t *testing.T, listJSON, actorID string) map[string]any {
	t.Helper()
	var rows []map[string]any
	if err := json.Unmarshal([]byte(listJSON), &rows); err != nil {
		t.Fatalf("raygo list actors --format json: %v\n%s", err, listJSON)
	}
	for _, row := range rows {
		if row["actor_id"] == actorID {
			return row
		}
	}
	t.Fatalf("actor %s not in raygo list actors:\n%s", actorID, listJSON)
	return nil
}

// An actor whose worker is SIGKILLed restarts (fresh state, new pid) while it has
// restarts left; after that its callers get ErrActorDied with the cause.
func TestActorRestartsAfterWorkerKill(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "4")
	client := connect(t, c)
	ctx := testContext(t)

	counter, err := client.CreateActor(ctx, "Counter", sdk.Args(10), sdk.WithMaxRestarts(1))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := result[int](counter.Call(ctx, "Add", 1)); err != nil || n != 11 {
		t.Fatalf("Add(1) = %d, %v; want 11", n, err)
	}
	first, err := counter.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitForActor(t, counter, "restarted once", func(a *sdk.ActorInfo) bool { return a.State == "ALIVE" && a.NumRestarts == 1 })
	// The next call goes to the restarted actor: constructed again, so 10 + 1.
	if n, err := result[int](counter.Call(ctx, "Add", 1)); err != nil || n != 11 {
		t.Fatalf("Add(1) after the restart = %d, %v; want 11 (fresh state)", n, err)
	}
	second, err := counter.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.NumRestarts != 1 || second.PID == first.PID {
		t.Fatalf("after one kill: num_restarts %d pid %d (first pid %d)", second.NumRestarts, second.PID, first.PID)
	}
	if err := syscall.Kill(second.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitForActor(t, counter, "DEAD", func(a *sdk.ActorInfo) bool { return a.State == "DEAD" })
	ref, err := counter.Call(ctx, "Add", 1)
	if err != nil {
		t.Fatal(err)
	}
	err = sdk.Get(ctx, ref, nil)
	if !errors.Is(err, sdk.ErrActorDied) || !strings.Contains(err.Error(), "max_restarts=1") {
		t.Fatalf("call after the restarts ran out: %v, want ErrActorDied naming max_restarts=1", err)
	}
	info, err := counter.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != "DEAD" || info.NumRestarts != 1 {
		t.Fatalf("actor %+v, want DEAD after 1 restart", info)
	}
}

// A handle that still knows an incarnation which died before its call (here, one
// found by name through another client, which follows no restarts until its first
// call) sends the call to the restarted actor: a call that never reached a worker does
// not count against max_task_retries (0 here).
func TestACallToAnIncarnationThatDiedBeforeItGoesToTheRestartedActor(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "4")
	client := connect(t, c)
	ctx := testContext(t)
	counter, err := client.CreateActor(ctx, "Counter", sdk.Args(10), sdk.WithMaxRestarts(1), sdk.ActorName("restarting"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := counter.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := connect(t, c).GetActor(ctx, "restarting")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitForActor(t, counter, "restarted once", func(a *sdk.ActorInfo) bool { return a.State == "ALIVE" && a.NumRestarts == 1 })
	if n, err := result[int](stale.Call(ctx, "Add", 1)); err != nil || n != 11 {
		t.Fatalf("Add(1) through the handle that knew the dead worker = %d, %v; want 11 from the restarted actor", n, err)
	}
}

// A method call whose worker dies is sent again to the restarted actor when the
// actor allows task retries; the constructor's and methods' errors reach the caller.
func TestActorErrorsAndTaskRetries(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "4")
	client := connect(t, c)
	ctx := testContext(t)

	broken, err := client.CreateActor(ctx, "Broken", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broken.Ready(ctx); !errors.Is(err, sdk.ErrActorDied) || !strings.Contains(err.Error(), "no constructor for you") {
		t.Fatalf("actor whose constructor fails: %v, want ErrActorDied with the constructor's error", err)
	}

	counter, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.WithMaxRestarts(-1), sdk.WithMaxTaskRetries(1), sdk.ActorName("retrying"))
	if err != nil {
		t.Fatal(err)
	}
	var taskErr *sdk.TaskError
	ref, err := counter.Call(ctx, "Fail")
	if err != nil {
		t.Fatal(err)
	}
	if err := sdk.Get(ctx, ref, nil); !errors.As(err, &taskErr) || taskErr.Message != "counter says no" || taskErr.Type != "*errors.errorString" {
		t.Fatalf("method error: %v", err)
	}
	if _, err := counter.Call(ctx, "Nope"); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("unknown method: %v", err)
	}
	if _, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.ActorName("retrying")); !errors.Is(err, sdk.ErrAlreadyExists) {
		t.Fatalf("second actor with a live actor's name: %v, want ErrAlreadyExists", err)
	}
	byName, err := client.GetActor(ctx, "retrying")
	if err != nil || byName.ID != counter.ID {
		t.Fatalf("GetActor: %v %v", byName, err)
	}

	info, err := counter.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Kill the worker while the call runs: the method writes a marker file first.
	marker := filepath.Join(t.TempDir(), "sleeping")
	slow, err := byName.Call(ctx, "Sleep", 3000, marker)
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the call runs", func() error {
		_, err := os.Stat(marker)
		return err
	})
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var out string
	if err := sdk.Get(ctx, slow, &out); err != nil || out != "slept" {
		t.Fatalf("call retried on the restarted actor: %q %v", out, err)
	}
	after, err := counter.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.NumRestarts < 1 || after.PID == info.PID {
		t.Fatalf("actor not restarted: %+v", after)
	}
	if err := counter.Kill(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := counter.Ready(ctx); !errors.Is(err, sdk.ErrActorDied) {
		t.Fatalf("after Kill(noRestart): %v", err)
	}

	// An actor no node can hold today waits, and raygo status says why.
	waiting, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.WithGPUs(1))
	if err != nil {
		t.Fatal(err)
	}
	waitForActor(t, waiting, "pending with a reason", func(a *sdk.ActorInfo) bool { return a.State == "PENDING_CREATION" && a.PendingReason != "" })
	status, stderr, code := c.Run("status")
	if code != 0 || !strings.Contains(status, "Actors\n") || !strings.Contains(status, "actor_"+waiting.ID[:12]+" Counter PENDING_CREATION: ") {
		t.Fatalf("raygo status (exit %d, %s) does not list the pending actor with its reason:\n%s", code, stderr, status)
	}
}

// Detached actors outlive their driver and its executable; the driver's other actors
// die with its job.
func TestDetachedActorOutlivesDriver(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "4")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The driver is a copy of this test binary, deleted once it exited (as `go run`
	// deletes its temporary binary).
	driver := filepath.Join(t.TempDir(), "driver")
	raw, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(driver, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(driver)
	cmd.Env = append(os.Environ(), envDriver+"=detached", "RAYGO_ADDRESS="+c.GCSAddress)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("driver: %v\n%s", err, out)
	}
	if err := os.Remove(driver); err != nil {
		t.Fatal(err)
	}
	client := connect(t, c)
	ctx := testContext(t)
	keeper, err := client.GetActor(ctx, "keeper")
	if err != nil {
		t.Fatalf("detached actor after its driver exited: %v\ndriver output:\n%s", err, out)
	}
	if n, err := result[int](keeper.Call(ctx, "Add", 1)); err != nil || n != 2 {
		t.Fatalf("detached counter Add(1) = %d, %v; want 2 (state kept)", n, err)
	}
	actors, err := client.ListActors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ephemeral *sdk.ActorInfo
	for _, a := range actors {
		if a.Name == "ephemeral" {
			ephemeral = a
		}
	}
	if ephemeral == nil {
		t.Fatalf("the driver's non-detached actor is not listed: %v", actors)
	}
	harness.Eventually(t, 15*time.Second, "the finished job's actor is DEAD", func() error {
		a, err := client.ListActors(ctx)
		if err != nil {
			return err
		}
		for _, row := range a {
			if row.ID == ephemeral.ID && row.State == "DEAD" && strings.Contains(row.DeathCause, "job") {
				return nil
			}
		}
		return fmt.Errorf("ephemeral actor %s not DEAD", ephemeral.ID)
	})
	if err := keeper.Kill(ctx, true); err != nil {
		t.Fatal(err)
	}
}

const envDriver = "RAYGO_TEST_DRIVER"

// runAsDriverIfAsked runs the test binary as a plain driver program when the test above
// starts it so; otherwise it runs the tests.
func runAsDriverIfAsked(m *testing.M) int {
	if os.Getenv(envDriver) != "detached" {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer client.Close()
	for _, spec := range []struct {
		name string
		opts []sdk.Option
	}{{"keeper", []sdk.Option{sdk.ActorName("keeper"), sdk.DetachedActor()}}, {"ephemeral", []sdk.Option{sdk.ActorName("ephemeral")}}} {
		actor, err := client.CreateActor(ctx, "Counter", sdk.Args(0), spec.opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ref, err := actor.Call(ctx, "Add", 1)
		if err == nil {
			err = sdk.Get(ctx, ref, nil)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("%s: actor %s\n", spec.name, actor.ID)
	}
	return 0
}

// An actor whose node dies restarts on the node its bundle moved to; the dead node's
// workers die with their raylet.
func TestActorFollowsItsBundleToAnotherNode(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "1")
	first := c.AddNode("--num-cpus", "2")
	second := c.AddNode("--num-cpus", "2")
	client := connect(t, c)
	ctx := testContext(t)

	// Two CPUs fit only on the two worker nodes.
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 2}}, sdk.StrictPack)
	if err != nil {
		t.Fatal(err)
	}
	info, err := pg.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counter, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.InPlacementGroup(pg, 0), sdk.WithCPUs(2), sdk.WithMaxRestarts(1))
	if err != nil {
		t.Fatal(err)
	}
	before, err := result[WorkerView](counter.Call(ctx, "Where"))
	if err != nil {
		t.Fatal(err)
	}
	if before.NodeID != info.Bundles[0].NodeID {
		t.Fatalf("actor on %s, its bundle on %s", before.NodeID, info.Bundles[0].NodeID)
	}
	doomed, survivor := first, second
	if before.NodeID == second.NodeID {
		doomed, survivor = second, first
	}
	doomed.Kill()
	harness.Eventually(t, 15*time.Second, "the dead node's worker exits with its raylet", func() error {
		if alive(before.PID) {
			return fmt.Errorf("worker pid %d still runs", before.PID)
		}
		return nil
	})
	waitForActor(t, counter, "restarted on the surviving node", func(a *sdk.ActorInfo) bool {
		return a.State == "ALIVE" && a.NumRestarts == 1 && a.NodeID == survivor.NodeID
	})
	after, err := result[WorkerView](counter.Call(ctx, "Where"))
	if err != nil {
		t.Fatal(err)
	}
	if after.NodeID != survivor.NodeID || after.Bundle != 0 || after.PlacementGroupID != pg.ID {
		t.Fatalf("after the node died the actor runs on %s in bundle %s[%d]; want node %s, bundle %s[0]", after.NodeID, after.PlacementGroupID, after.Bundle, survivor.NodeID, pg.ID)
	}
	moved, err := pg.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if moved.Bundles[0].NodeID != survivor.NodeID {
		t.Fatalf("bundle 0 on %s after the node died, want %s", moved.Bundles[0].NodeID, survivor.NodeID)
	}
}

// A MIG bundle's worker sees the slice's MIG device UUID as CUDA_VISIBLE_DEVICES.
func TestWorkerInMIGBundleSeesItsSlice(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "2")
	c.AddNode("--num-cpus", "4", "--gpu-sim", "dgx-h100", "--mig", "0:on")
	client := connect(t, c)
	ctx := testContext(t)
	const slice = "nvidia.com/mig-1g.10gb"
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{slice: 1, "CPU": 1}}, sdk.StrictPack)
	if err != nil {
		t.Fatal(err)
	}
	info, err := pg.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uuid := info.Bundles[0].CUDAVisibleDevices
	if !strings.HasPrefix(uuid, "MIG-") {
		t.Fatalf("MIG bundle has CUDA_VISIBLE_DEVICES %q", uuid)
	}
	w, err := result[WorkerView](client.Submit(ctx, "where", nil, sdk.InPlacementGroup(pg, 0), sdk.WithResources(map[string]float64{slice: 1})))
	if err != nil {
		t.Fatal(err)
	}
	if w.CUDAVisibleDevices != uuid || w.CUDADeviceOrder != "PCI_BUS_ID" {
		t.Fatalf("task in the MIG bundle sees CUDA_VISIBLE_DEVICES=%q CUDA_DEVICE_ORDER=%q, want %q", w.CUDAVisibleDevices, w.CUDADeviceOrder, uuid)
	}
}
