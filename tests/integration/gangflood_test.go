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

// A 64-GPU gang under a flood of 1-GPU groups, on real processes: a GCS and eight
// raylets of 8 simulated GPUs, one queue without quota limits. The flood (development,
// max_runtime_s=3, a backlog kept waiting) fills all 64 GPUs; then a training-high gang
// of 64 one-GPU bundles arrives. It becomes the reservation holder and, as every running
// group declared its end, smaller groups backfill only where they end by the
// reservation's time — none can, as they all run as long as the running ones — so the
// gang starts once the running groups end. Asserted as ordering: the gang starts, and
// at most a handful of flood groups (those already being committed when it arrived)
// start between its arrival and its start; a BestEffortFIFO admission (Kueue's, no
// reservation) would let the flood take every freed GPU and the gang would wait for as
// long as the flood lasts.
func TestGangUnderFloodStartsOnRealProcesses(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(file, []byte("queues: [{name: team, namespaces: [\"team\"]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "2", "--queues", file)
	for range 8 {
		c.AddNode("--gpu-sim", "dgx-h100", "--num-cpus", "8")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress, Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := rpcutil.Dial(c.GCSAddress, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	queuesClient := pb.NewQueueServiceClient(conn)
	groupsClient := pb.NewPlacementGroupServiceClient(conn)
	teamGPUs := func() (usage float64, pending int32, err error) {
		reply, err := queuesClient.ListQueues(ctx, &pb.ListQueuesRequest{})
		if err != nil {
			return 0, 0, err
		}
		gpus, waiting := queueGPUs(reply)
		return gpus["team"], waiting["team"], nil
	}

	const backlog = 16
	stop := make(chan struct{})
	var flood sync.WaitGroup
	flood.Add(1)
	go func() {
		defer flood.Done()
		for round := 0; round < 3000; round++ {
			select {
			case <-stop:
				return
			default:
			}
			_, pending, err := teamGPUs()
			if err != nil {
				return
			}
			for i := pending; i < backlog; i++ {
				if _, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 1}}, sdk.Pack,
					sdk.WithPriority("development"), sdk.WithMaxRuntime(3*time.Second)); err != nil {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() {
		close(stop)
		flood.Wait()
	}()
	harness.Eventually(t, 60*time.Second, "the flood holds all 64 GPUs", func() error {
		usage, _, err := teamGPUs()
		if err != nil {
			return err
		}
		if usage != 64 {
			return fmt.Errorf("team holds %g GPUs", usage)
		}
		return nil
	})

	bundles := make([]sdk.Bundle, 64)
	for i := range bundles {
		bundles[i] = sdk.Bundle{"GPU": 1}
	}
	gang, err := client.CreatePlacementGroup(ctx, bundles, sdk.Pack, sdk.WithPriority("training-high"), sdk.WithMaxRuntime(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer waitCancel()
	if _, err := gang.Ready(waitCtx); err != nil {
		t.Fatalf("the gang under the flood: %v", err)
	}

	reply, err := groupsClient.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var gangRow *pb.PlacementGroupInfo
	for _, g := range reply.PlacementGroups {
		if g.PlacementGroupId == gang.ID {
			gangRow = g
		}
	}
	if gangRow == nil || gangRow.RunningSinceMs == 0 {
		t.Fatalf("the gang's row: %v", gangRow)
	}
	arrived, started := gangRow.Stats.GetCreationRequestReceivedMs(), gangRow.RunningSinceMs
	var between int
	var latestEnd int64
	for _, g := range reply.PlacementGroups {
		if g.PlacementGroupId == gang.ID || g.RunningSinceMs == 0 {
			continue
		}
		if g.RunningSinceMs > arrived && g.RunningSinceMs < started {
			between++
		}
		if g.RunningSinceMs <= arrived {
			latestEnd = max(latestEnd, g.RunningSinceMs+g.MaxRuntimeS*1000)
		}
	}
	t.Logf("the gang arrived at %d, started %d ms later; the work running at its arrival declared its latest end %d ms after it; %d flood groups started in between",
		arrived, started-arrived, latestEnd-arrived, between)
	if between > 8 {
		t.Fatalf("%d flood groups started between the gang's arrival and its start: backfill delayed the gang", between)
	}
}

// queueGPUs reads each queue's GPU usage and pending count from a ListQueues reply.
func queueGPUs(reply *pb.ListQueuesReply) (usage map[string]float64, pending map[string]int32) {
	usage, pending = map[string]float64{}, map[string]int32{}
	for _, q := range reply.Queues {
		pending[q.Queue] = q.Pending
		for _, r := range q.Resources {
			if r.Resource == "GPU" {
				usage[q.Queue] = r.Usage
			}
		}
	}
	return usage, pending
}
