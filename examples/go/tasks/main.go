// Command tasks walks through raygo's tasks from Go: a fan-out of tasks over the
// bundles of a SPREAD placement group, where each ran, a task fed by the results of
// others, and a task's error coming back to the caller.
//
//	RAYGO_ADDRESS=127.0.0.1:6380 go run ./examples/go/tasks
//	RAYGO_ADDRESS=127.0.0.1:6380 go run ./examples/go/tasks -bundles 4 -tasks 32
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
	"sort"
	"time"

	"github.com/raygo-dev/raygo/sdk"
)

// Square is what each task of the fan-out returns: its result and where it ran.
type Square struct {
	Input, Output int
	NodeID        string
	PID           int
	Bundle        int
}

func init() {
	sdk.RegisterTask("square", func(x int) Square {
		w, _ := sdk.CurrentWorker()
		return Square{Input: x, Output: x * x, NodeID: w.NodeID, PID: w.PID, Bundle: w.BundleIndex}
	})
	sdk.RegisterTask("add", func(a, b Square) int { return a.Output + b.Output })
	sdk.RegisterTask("divide", func(a, b int) (int, error) {
		if b == 0 {
			return 0, errors.New("division by zero")
		}
		return a / b, nil
	})
}

func main() {
	bundles := flag.Int("bundles", 3, "bundles of the SPREAD group ({CPU: 1} each)")
	tasks := flag.Int("tasks", 12, "tasks to fan out over the bundles")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./examples/go/tasks [-bundles N] [-tasks N]\n\nA fan-out of tasks over a SPREAD group on the cluster at RAYGO_ADDRESS (default 127.0.0.1:6380).\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *bundles < 1 || *tasks < 1 {
		fmt.Fprintln(os.Stderr, "tasks: -bundles and -tasks must be at least 1")
		os.Exit(2)
	}
	if err := run(*bundles, *tasks); err != nil {
		fmt.Fprintln(os.Stderr, "tasks:", err)
		os.Exit(1)
	}
}

func run(bundleCount, taskCount int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{})
	if err != nil {
		return err
	}
	defer client.Close()
	fmt.Printf("Connected to %s as job %s\n", client.Address(), client.JobID())

	bundles := make([]sdk.Bundle, bundleCount)
	for i := range bundles {
		bundles[i] = sdk.Bundle{"CPU": 1}
	}
	pg, err := client.CreatePlacementGroup(ctx, bundles, sdk.Spread)
	if err != nil {
		return err
	}
	defer pg.Remove(context.Background())
	info, err := pg.Ready(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\nSPREAD group %s is %s:\n", pg.ID, info.State)
	for _, b := range info.Bundles {
		fmt.Printf("  bundle %d %v -> node %s\n", b.Index, b.Resources, short(b.NodeID))
	}

	// Fan out: task i goes to bundle i mod bundles; each holds its bundle's CPU while
	// it runs, so a bundle runs one task at a time.
	start := time.Now()
	refs := make([]*sdk.ObjectRef, taskCount)
	for i := range refs {
		if refs[i], err = client.Submit(ctx, "square", sdk.Args(i), sdk.InPlacementGroup(pg, i%bundleCount)); err != nil {
			return err
		}
	}
	results := make([]Square, taskCount)
	for i, ref := range refs {
		if err := sdk.Get(ctx, ref, &results[i]); err != nil {
			return err
		}
	}
	fmt.Printf("\n%d square tasks done in %s:\n", taskCount, time.Since(start).Round(time.Millisecond))
	type where struct {
		node   string
		bundle int
	}
	ran := map[where][]int{}
	for _, r := range results {
		w := where{short(r.NodeID), r.Bundle}
		ran[w] = append(ran[w], r.PID)
	}
	keys := make([]where, 0, len(ran))
	for w := range ran {
		keys = append(keys, w)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].bundle < keys[j].bundle })
	for _, w := range keys {
		fmt.Printf("  bundle %d on node %s: %d tasks, worker pids %v\n", w.bundle, w.node, len(ran[w]), distinct(ran[w]))
	}

	// Refs as arguments: add waits for both squares and gets their values.
	sum, err := client.Submit(ctx, "add", sdk.Args(refs[1], refs[2]))
	if err != nil {
		return err
	}
	var total int
	if err := sdk.Get(ctx, sum, &total); err != nil {
		return err
	}
	fmt.Printf("\nadd(square(1), square(2)) = %d\n", total)

	// A function's error reaches the caller with its type and message.
	bad, err := client.Submit(ctx, "divide", sdk.Args(1, 0))
	if err != nil {
		return err
	}
	var taskErr *sdk.TaskError
	if err := sdk.Get(ctx, bad, nil); !errors.As(err, &taskErr) {
		return fmt.Errorf("divide(1, 0): got %v, want a TaskError", err)
	}
	fmt.Printf("divide(1, 0) failed as expected: %v\n", taskErr)
	return nil
}

func distinct(pids []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, pid := range pids {
		if !seen[pid] {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
