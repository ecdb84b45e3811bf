package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// benchCounter is the actor of the actor-call benchmark.
type benchCounter struct{ n int }

func (c *benchCounter) Add(d int) int { c.n += d; return c.n }

func init() {
	sdk.RegisterTask("noop", func(x int) int { return x })
	sdk.RegisterActor("BenchCounter", func() *benchCounter { return &benchCounter{} })
}

// This test binary is also the benchmark's worker executable.
func TestMain(m *testing.M) {
	sdk.ServeIfWorker()
	os.Exit(m.Run())
}

// Ray's microbenchmark figures for one client: about 1,950 synchronous actor calls/s
// ("1:1 actor calls sync") and 7,700 asynchronous tasks/s ("single client tasks async").
// Here: a head node with 8 CPUs started as processes on loopback, the memory store.
func TestActorAndTaskBench(t *testing.T) {
	benchgate.Require(t)
	c := harness.StartHead(t, "--num-cpus", "8", "--log-level", "warn")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	counter, err := client.CreateActor(ctx, "BenchCounter", nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func() error {
		ref, err := counter.Call(ctx, "Add", 1)
		if err != nil {
			return err
		}
		return sdk.Get(ctx, ref, nil)
	}
	for i := 0; i < 200; i++ { // warm-up: worker started, connections open
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	const calls = 5000
	start := time.Now()
	for i := 0; i < calls; i++ {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("BENCH actor_calls_sync_per_s %.0f calls/s\n", calls/time.Since(start).Seconds())

	submitAll := func(n int) error {
		refs := make([]*sdk.ObjectRef, n)
		for i := range refs {
			if refs[i], err = client.Submit(ctx, "noop", sdk.Args(i)); err != nil {
				return err
			}
		}
		_, _, err := sdk.Wait(ctx, refs, n)
		for _, ref := range refs {
			if err == nil {
				err = sdk.Get(ctx, ref, nil)
			}
		}
		return err
	}
	if err := submitAll(1000); err != nil { // warm-up: the 8 workers started
		t.Fatal(err)
	}
	const tasks = 20000
	start = time.Now()
	if err := submitAll(tasks); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("BENCH tasks_async_per_s %.0f tasks/s\n", tasks/time.Since(start).Seconds())
}
