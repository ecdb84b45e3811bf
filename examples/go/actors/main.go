// Command actors walks through raygo's actors from Go: a counter actor inside a
// STRICT_PACK placement group, where it landed (node, worker pid and the GPUs its
// worker sees), calls that run in order, and what removing the group does to it.
//
//	RAYGO_ADDRESS=127.0.0.1:6380 go run ./examples/go/actors            # CPU bundles
//	RAYGO_ADDRESS=127.0.0.1:6380 go run ./examples/go/actors -gpus 1    # one GPU per bundle
//
// The same program is the driver and, started by the raylets, the workers: everything
// registered before sdk.Connect runs in the workers, and Connect never returns there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/raygo-dev/raygo/sdk"
)

// Counter is the actor: its state lives in one worker process.
type Counter struct{ n int }

// Add adds d and returns the new count.
func (c *Counter) Add(d int) int {
	c.n += d
	return c.n
}

// Where reports, from inside the worker, where the actor runs and which GPUs CUDA
// would use.
func (c *Counter) Where() WorkerView {
	w, _ := sdk.CurrentWorker()
	return WorkerView{NodeID: w.NodeID, PID: w.PID, CUDAVisibleDevices: os.Getenv("CUDA_VISIBLE_DEVICES"),
		CUDADeviceOrder: os.Getenv("CUDA_DEVICE_ORDER"), Bundle: w.BundleIndex}
}

// WorkerView is what Counter.Where returns (msgpack-encoded on the way back).
type WorkerView struct {
	NodeID             string
	PID                int
	CUDAVisibleDevices string
	CUDADeviceOrder    string
	Bundle             int
}

func init() {
	sdk.RegisterActor("Counter", func(start int) *Counter { return &Counter{n: start} })
}

func main() {
	gpus := flag.Float64("gpus", 0, "GPUs per bundle (and per actor); 0 for CPU-only clusters")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./examples/go/actors [-gpus N]\n\nA counter actor in a STRICT_PACK group on the cluster at RAYGO_ADDRESS (default 127.0.0.1:6380).\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*gpus); err != nil {
		fmt.Fprintln(os.Stderr, "actors:", err)
		os.Exit(1)
	}
}

func run(gpus float64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{})
	if err != nil {
		return err
	}
	defer client.Close()
	fmt.Printf("Connected to %s as job %s\n", client.Address(), client.JobID())

	bundle := sdk.Bundle{"CPU": 1}
	if gpus > 0 {
		bundle["GPU"] = gpus
	}
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{bundle, bundle}, sdk.StrictPack)
	if err != nil {
		return err
	}
	info, err := pg.Ready(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\nSTRICT_PACK group %s is %s:\n", pg.ID, info.State)
	for _, b := range info.Bundles {
		fmt.Printf("  bundle %d %v -> node %s, CUDA_VISIBLE_DEVICES=%q\n", b.Index, b.Resources, short(b.NodeID), b.CUDAVisibleDevices)
	}

	// One counter per bundle; each holds its bundle's CPU (and GPUs) while it lives.
	var counters []*sdk.Actor
	for i := range info.Bundles {
		counter, err := client.CreateActor(ctx, "Counter", sdk.Args(100*i), sdk.InPlacementGroup(pg, i),
			sdk.WithCPUs(1), sdk.WithGPUs(gpus), sdk.WithMaxRestarts(1))
		if err != nil {
			return err
		}
		counters = append(counters, counter)
	}
	for i, counter := range counters {
		ref, err := counter.Call(ctx, "Where")
		if err != nil {
			return err
		}
		var where WorkerView
		if err := sdk.Get(ctx, ref, &where); err != nil {
			return err
		}
		fmt.Printf("\nactor %s (Counter, bundle %d) runs on node %s in worker pid %d\n", counters[i].ID, where.Bundle, short(where.NodeID), where.PID)
		fmt.Printf("  inside the worker: CUDA_VISIBLE_DEVICES=%q CUDA_DEVICE_ORDER=%s\n", where.CUDAVisibleDevices, where.CUDADeviceOrder)
	}

	// Calls through one handle run in the order made, even when sent without waiting.
	var refs []*sdk.ObjectRef
	for d := 1; d <= 5; d++ {
		ref, err := counters[0].Call(ctx, "Add", d)
		if err != nil {
			return err
		}
		refs = append(refs, ref)
	}
	fmt.Print("\nfive Add calls sent at once, results in order:")
	for _, ref := range refs {
		var n int
		if err := sdk.Get(ctx, ref, &n); err != nil {
			return err
		}
		fmt.Printf(" %d", n)
	}
	fmt.Println()

	// Removing the group kills the actors inside it.
	if err := pg.Remove(ctx); err != nil {
		return err
	}
	fmt.Printf("\nremoved group %s\n", pg.ID)
	for _, counter := range counters {
		_, err := counter.Ready(ctx)
		if !errors.Is(err, sdk.ErrActorDied) {
			return fmt.Errorf("actor %s after its group was removed: %v, want it DEAD", counter.ID, err)
		}
		info, err := counter.Info(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("  actor %s: %s (%s)\n", counter.ID, info.State, info.DeathCause)
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
