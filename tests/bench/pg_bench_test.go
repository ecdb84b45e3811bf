// Package bench holds end-to-end benchmarks. They run only with RAYGO_BENCH=1 (make
// bench) and print `BENCH <name> <value> <unit>` lines; they assert nothing about time.
package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Placement groups created, ready and removed per second, end to end through gRPC on a
// head + 3 raylets started as processes (in-memory store). Ray's own microbenchmark
// reports about 790 create+remove per second.
func TestPGCreateReadyRemoveBench(t *testing.T) {
	benchgate.Require(t)
	c := harness.StartHead(t, "--num-cpus", "64", "--log-level", "warn")
	for i := 0; i < 3; i++ {
		c.AddNode("--num-cpus", "64", "--log-level", "warn")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	const warmup = 50
	oneCycle := func() error {
		pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}}, sdk.Pack)
		if err != nil {
			return err
		}
		if _, err := pg.Ready(ctx); err != nil {
			return err
		}
		return pg.Remove(ctx)
	}
	for i := 0; i < warmup; i++ {
		if err := oneCycle(); err != nil {
			t.Fatal(err)
		}
	}
	// One client in a loop, as Ray's microbenchmark runs, then 8 concurrent clients.
	for _, run := range []struct {
		name             string
		workers, perWork int
	}{{"pg_create_ready_remove_per_s", 1, 1000}, {"pg_create_ready_remove_8_clients_per_s", 8, 250}} {
		var done atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, run.workers)
		start := time.Now()
		for w := 0; w < run.workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < run.perWork; i++ {
					if err := oneCycle(); err != nil {
						errs <- err
						return
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		fmt.Printf("BENCH %s %.0f ops/s\n", run.name, float64(done.Load())/elapsed.Seconds())
	}
}
