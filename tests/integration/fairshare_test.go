package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// fairShareQueues is the fair-share scenario: a, b and c own nothing and borrow
// everything from pool, which holds all 24 GPUs and submits nothing.
const fairShareQueues = `fairSharing: {enable: true}
cohorts: [{name: c}]
queues:
  - {name: pool, cohort: c, resources: {GPU: {nominalQuota: 24}}}
  - {name: a, cohort: c, fairSharing: {weight: %d}, resources: {GPU: {nominalQuota: 0}}}
  - {name: b, cohort: c, resources: {GPU: {nominalQuota: 0}}}
  - {name: c, cohort: c, resources: {GPU: {nominalQuota: 0}}}
`

// Fair share on real processes: a GCS and three raylets of 8 simulated GPUs; a, b and c
// each flood the cluster with 1-GPU groups that run 2 s (max_runtime_s) while each keeps
// a backlog. Over the samples taken while every queue waits, Jain's index of the three
// queues' mean GPU usage is at least 0.95; with a's fair-sharing weight raised to 2
// (raygo queues apply, the flood going on), a holds 1.7 to 2.3 times b's GPUs. Only
// ratios are asserted; the samples are spaced by sleeps, and bounded in number.
func TestFairShareOnRealProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "queues.yaml")
	writeWeight := func(weight int) {
		if err := os.WriteFile(file, fmt.Appendf(nil, fairShareQueues, weight), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeWeight(1)
	c := harness.StartHead(t, "--num-cpus", "2", "--queues", file)
	for range 3 {
		c.AddNode("--gpu-sim", "dgx-h100", "--num-cpus", "8")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := rpcutil.Dial(c.GCSAddress, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitForGPUs(t, c, 24)
	queuesClient := pb.NewQueueServiceClient(conn)

	// The flood: each queue keeps at least backlog groups waiting, in rounds that
	// interleave the queues so none wins arrival ties.
	names := []string{"a", "b", "c"}
	const backlog = 12
	stop := make(chan struct{})
	var flood sync.WaitGroup
	flood.Add(1)
	go func() {
		defer flood.Done()
		for round := 0; round < 2000; round++ {
			select {
			case <-stop:
				return
			default:
			}
			reply, err := queuesClient.ListQueues(ctx, &pb.ListQueuesRequest{})
			if err != nil {
				return
			}
			_, waiting := queueGPUs(reply)
			for i := 0; i < backlog; i++ {
				for _, q := range names {
					if int(waiting[q]) > i {
						continue
					}
					if _, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 1}}, sdk.Pack, sdk.WithQueue(q), sdk.WithMaxRuntime(2*time.Second)); err != nil {
						return
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() {
		close(stop)
		flood.Wait()
	}()

	// meanUsage samples the queues' GPU usage, keeping only samples where every queue
	// has groups waiting (the cluster is contended), after skipping the first skip ones.
	meanUsage := func(skip, keep int) []float64 {
		t.Helper()
		sums := make([]float64, len(names))
		kept := 0
		for sample := 0; sample < skip+keep*4 && kept < keep; sample++ {
			time.Sleep(250 * time.Millisecond)
			reply, err := queuesClient.ListQueues(ctx, &pb.ListQueuesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if sample < skip {
				continue
			}
			usage, waiting := queueGPUs(reply)
			contended := true
			for _, q := range names {
				contended = contended && waiting[q] > 0
			}
			if !contended {
				continue
			}
			for i, q := range names {
				sums[i] += usage[q]
			}
			kept++
		}
		if kept < keep {
			t.Fatalf("only %d of %d samples found every queue waiting", kept, keep)
		}
		for i := range sums {
			sums[i] /= float64(kept)
		}
		return sums
	}

	equal := meanUsage(16, 40)
	if j := jainIndex(equal); j < 0.95 || equal[0]+equal[1]+equal[2] < 20 {
		t.Fatalf("equal weights: mean GPUs a, b, c = %v, Jain %.3f; want >= 0.95 with the GPUs in use", equal, j)
	}
	writeWeight(2)
	if stdout, stderr, code := c.Run("queues", "apply", file); code != 0 {
		t.Fatalf("queues apply: exit %d: %s%s", code, stdout, stderr)
	}
	// A few runtimes for the mix to follow the new weight, then the samples.
	weighted := meanUsage(24, 40)
	if ratio := weighted[0] / weighted[1]; ratio < 1.7 || ratio > 2.3 {
		t.Fatalf("a's weight 2: mean GPUs a, b, c = %v, a/b = %.2f; want in [1.7, 2.3]", weighted, ratio)
	}
	t.Logf("equal weights: %v (Jain %.3f); a weighted 2: %v (a/b %.2f)", equal, jainIndex(equal), weighted, weighted[0]/weighted[1])
}

func jainIndex(x []float64) float64 {
	var sum, squares float64
	for _, v := range x {
		sum += v
		squares += v * v
	}
	if squares == 0 {
		return 0
	}
	return sum * sum / (float64(len(x)) * squares)
}
