package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/sdk"
)

// Counter is the chaos load's actor: a number that grows by each Add.
type Counter struct{ n int }

// Add adds d and returns the sum.
func (c *Counter) Add(d int) int { c.n += d; return c.n }

func init() {
	sdk.RegisterTask("square", func(x int) int { return x * x })
	sdk.RegisterActor("Counter", func(start int) *Counter { return &Counter{n: start} })
}

// TestMain serves tasks and actors when a raylet starts this test binary as a worker.
func TestMain(m *testing.M) {
	sdk.ServeIfWorker()
	os.Exit(m.Run())
}

// taskSlot is the resource a chaos task holds while it runs: the worker nodes offer a
// few, so tasks run beside placement groups that may hold every CPU.
const taskSlot = "chaos_task_slot"

// maxActors bounds the actors alive at once (each is a worker process).
const maxActors = 4

// sdkLoad is the tasks and actors of the chaos load, driven through the Go SDK with
// this test binary as the driver and as the workers.
type sdkLoad struct {
	client *sdk.Client
	rng    *rand.Rand
	// actors were created (CreateActor answered) and not killed; killed had their kill
	// answered.
	actors map[string]*sdk.Actor
	killed map[string]*sdk.Actor
	// pending are the submitted tasks not yet resolved, with the answer each must give.
	pending []pendingTask
	// Counts for the report.
	tasksSubmitted, tasksCorrect, tasksFailed int
	firstTaskError                            error
	actorsCreated, actorCalls                 int
}

type pendingTask struct {
	ref    *sdk.ObjectRef
	want   int
	cancel context.CancelFunc // ends the task's context (it lives until resolved)
}

// taskLife bounds a task's context: the SDK gives a task up when the context that
// submitted it ends.
const taskLife = 5 * time.Minute

func newSDKLoad(t *testing.T, gcsAddress string, rng *rand.Rand) *sdkLoad {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: gcsAddress})
	if err != nil {
		t.Fatalf("connect the chaos driver: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return &sdkLoad{client: client, rng: rng, actors: map[string]*sdk.Actor{}, killed: map[string]*sdk.Actor{}}
}

// operate submits a task, or creates, calls or kills an actor. Requests that fail
// during a fault are not acknowledged and count for nothing.
func (l *sdkLoad) operate() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch r := l.rng.IntN(10); {
	case r < 5:
		x := l.rng.IntN(1000)
		taskCtx, cancelTask := context.WithTimeout(context.Background(), taskLife)
		ref, err := l.client.Submit(taskCtx, "square", sdk.Args(x), sdk.WithCPUs(0), sdk.WithResources(map[string]float64{taskSlot: 1}), sdk.WithMaxRetries(5))
		if err != nil {
			cancelTask()
			return
		}
		l.pending = append(l.pending, pendingTask{ref, x * x, cancelTask})
		l.tasksSubmitted++
	case r < 7 && len(l.actors) < maxActors:
		a, err := l.client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.DetachedActor(), sdk.WithMaxRestarts(-1))
		if err == nil {
			l.actors[a.ID] = a
			l.actorsCreated++
		}
	case r < 9 && len(l.actors) > 0:
		a := l.actors[l.someActor()]
		if ref, err := a.Call(ctx, "Add", 1); err == nil {
			var n int
			if sdk.Get(ctx, ref, &n) == nil {
				l.actorCalls++
			}
		}
	case len(l.actors) > 0:
		id := l.someActor()
		if l.actors[id].Kill(ctx, true) == nil {
			l.killed[id] = l.actors[id]
			delete(l.actors, id)
		}
	}
}

func (l *sdkLoad) someActor() string {
	ids := slices.Sorted(maps.Keys(l.actors))
	return ids[l.rng.IntN(len(ids))]
}

// settled checks that every submitted task has resolved (a wrong answer fails the
// test), every live actor is ALIVE and answers a call, and every killed actor is DEAD.
func (l *sdkLoad) settled(t *testing.T) error {
	for len(l.pending) > 0 {
		p := l.pending[0]
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var got int
		err := sdk.Get(ctx, p.ref, &got)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("task %s not resolved yet", p.ref.ID())
		case err != nil:
			l.tasksFailed++
			if l.firstTaskError == nil {
				l.firstTaskError = err
			}
		case got != p.want:
			t.Fatalf("task %s answered %d, want %d", p.ref.ID(), got, p.want)
		default:
			l.tasksCorrect++
		}
		p.cancel()
		l.pending = l.pending[1:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for id, a := range l.actors {
		info, err := a.Info(ctx)
		if err != nil {
			return err
		}
		switch info.State {
		case "ALIVE":
		case "DEAD":
			return fmt.Errorf("LOST: acknowledged actor %s is DEAD: %s", id, info.DeathCause)
		default:
			return fmt.Errorf("actor %s is %s", id, info.State)
		}
		ref, err := a.Call(ctx, "Add", 0)
		if err != nil {
			return err
		}
		var n int
		if err := sdk.Get(ctx, ref, &n); err != nil {
			return fmt.Errorf("actor %s does not answer: %w", id, err)
		}
	}
	for id, a := range l.killed {
		info, err := a.Info(ctx)
		if err != nil {
			return err
		}
		if info.State != "DEAD" {
			return fmt.Errorf("LOST: acknowledged kill of actor %s, the actor is %s", id, info.State)
		}
	}
	return nil
}

func (l *sdkLoad) report() string {
	s := fmt.Sprintf("tasks acknowledged %d (answered right %d, failed with an error %d); actors created %d, killed %d, calls answered %d",
		l.tasksSubmitted, l.tasksCorrect, l.tasksFailed, l.actorsCreated, len(l.killed), l.actorCalls)
	if l.firstTaskError != nil {
		s += fmt.Sprintf("; first task error: %v", l.firstTaskError)
	}
	return s
}
