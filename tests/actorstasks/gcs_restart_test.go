package actorstasks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Nothing lost: with the Redis store, a GCS SIGKILLed and restarted by the head's
// supervisor still knows every actor; a live actor keeps its worker and its state.
func TestActorsSurviveGCSRestart(t *testing.T) {
	t.Parallel()
	redis := redisserver.Start(t)
	c := harness.StartHead(t, "--store", "redis", "--redis-address", redis.Addr, "--redis-namespace", "actors-restart", "--num-cpus", "4")
	client := connect(t, c)
	ctx := testContext(t)

	counter, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.ActorName("survivor"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := result[int](counter.Call(ctx, "Add", 1)); err != nil || n != 1 {
		t.Fatalf("Add(1) = %d, %v", n, err)
	}
	before, err := counter.Ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(c.Head.ReadRecord(t).GCSPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 40*time.Second, "the restarted GCS lists the actor ALIVE on its worker", func() error {
		actors, err := client.ListActors(ctx)
		if err != nil {
			return err
		}
		for _, a := range actors {
			if a.ID == counter.ID && a.State == "ALIVE" && a.PID == before.PID {
				return nil
			}
		}
		return fmt.Errorf("actor %s not ALIVE on pid %d: %+v", counter.ID, before.PID, actors)
	})
	if n, err := result[int](counter.Call(ctx, "Add", 1)); err != nil || n != 2 {
		t.Fatalf("Add(1) after the GCS restart = %d, %v; want 2 (same worker, state kept)", n, err)
	}
	byName, err := client.GetActor(ctx, "survivor")
	if err != nil || byName.ID != counter.ID {
		t.Fatalf("GetActor after the GCS restart: %v, %v", byName, err)
	}
	// Tasks and new actors work on the restarted GCS.
	if n, err := result[int](client.Submit(ctx, "square", sdk.Args(6))); err != nil || n != 36 {
		t.Fatalf("square(6) after the GCS restart = %d, %v", n, err)
	}
	if _, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.ActorName("survivor")); !errors.Is(err, sdk.ErrAlreadyExists) {
		t.Fatalf("the name of a reloaded live actor is taken: %v, want ErrAlreadyExists", err)
	}
}

// Removing a placement group kills the tasks running inside it: their Get fails and
// their workers are gone.
func TestRemovingGroupKillsItsTasks(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "4")
	client := connect(t, c)
	ctx := testContext(t)
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "running")
	ref, err := client.Submit(ctx, "sleepy", sdk.Args(60_000, marker), sdk.InPlacementGroup(pg, 0))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	harness.Eventually(t, 30*time.Second, "the task runs", func() error {
		raw, err := os.ReadFile(marker)
		if err == nil {
			_, err = fmt.Sscan(string(raw), &pid)
		}
		return err
	})
	if err := pg.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sdk.Get(ctx, ref, nil); !errors.Is(err, sdk.ErrRemoved) {
		t.Fatalf("Get of a task whose group was removed: %v, want ErrRemoved", err)
	}
	harness.Eventually(t, 15*time.Second, "the task's worker is gone", func() error {
		if alive(pid) {
			return fmt.Errorf("worker pid %d still runs", pid)
		}
		return nil
	})
}
