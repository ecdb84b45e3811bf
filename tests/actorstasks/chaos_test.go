package actorstasks

import (
	"fmt"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// A seeded, bounded run of actors and tasks in placement groups while actor workers
// are SIGKILLed at random: with unlimited restarts and call retries every call
// answers, and once every group is removed no worker process is left and every CPU
// is free (no leak).
func TestChaosWorkerKillsLeaveNothingBehind(t *testing.T) {
	t.Parallel()
	const seed, rounds = 7, 12
	rng := rand.New(rand.NewSource(seed))
	c := harness.StartHead(t, "--num-cpus", "2")
	c.AddNode("--num-cpus", "4")
	c.AddNode("--num-cpus", "4")
	client := connect(t, c)
	ctx := testContext(t)

	type member struct {
		pg     *sdk.PlacementGroup
		actors []*sdk.Actor
	}
	var groups []member
	pids := map[int]bool{}
	for g := 0; g < 3; g++ {
		pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}}, sdk.Spread)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pg.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		m := member{pg: pg}
		for b := 0; b < 2; b++ {
			actor, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.InPlacementGroup(pg, b), sdk.WithCPUs(0.5),
				sdk.WithMaxRestarts(-1), sdk.WithMaxTaskRetries(-1))
			if err != nil {
				t.Fatal(err)
			}
			m.actors = append(m.actors, actor)
		}
		groups = append(groups, m)
	}
	for round := 0; round < rounds; round++ {
		m := groups[rng.Intn(len(groups))]
		actor := m.actors[rng.Intn(len(m.actors))]
		info, err := actor.Ready(ctx)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		pids[info.PID] = true
		// Calls and tasks in flight while the worker dies.
		call, err := actor.Call(ctx, "Add", 1)
		if err != nil {
			t.Fatal(err)
		}
		task, err := client.Submit(ctx, "where", nil, sdk.InPlacementGroup(m.pg, -1), sdk.WithCPUs(0.5))
		if err != nil {
			t.Fatal(err)
		}
		if rng.Intn(3) > 0 {
			_ = syscall.Kill(info.PID, syscall.SIGKILL)
		}
		// Restarts and call retries are unlimited: the call answers, killed or not.
		if err := sdk.Get(ctx, call, nil); err != nil {
			t.Fatalf("round %d: call: %v", round, err)
		}
		var w WorkerView
		if err := sdk.Get(ctx, task, &w); err != nil {
			t.Fatalf("round %d: task: %v", round, err)
		}
		pids[w.PID] = true
	}
	for _, m := range groups {
		for _, actor := range m.actors {
			if info, err := actor.Ready(ctx); err == nil {
				pids[info.PID] = true
			}
		}
		if err := m.pg.Remove(ctx); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, 30*time.Second, "no worker left and every CPU free", func() error {
		for pid := range pids {
			if alive(pid) {
				return fmt.Errorf("worker pid %d still runs", pid)
			}
		}
		nodes, err := c.Nodes()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.ResourcesAvailable["CPU"] != n.ResourcesTotal["CPU"] {
				return fmt.Errorf("node %s: %v of %v CPUs free", n.NodeId, n.ResourcesAvailable["CPU"], n.ResourcesTotal["CPU"])
			}
		}
		return nil
	})
	actors, err := client.ListActors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range actors {
		if a.State != "DEAD" || a.DeathCause != "placement group removed" {
			t.Errorf("actor %s: %s (%s), want DEAD with its group", a.ID, a.State, a.DeathCause)
		}
	}
}
