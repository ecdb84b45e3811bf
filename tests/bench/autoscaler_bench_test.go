package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/benchgate"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

// reactionYAML is a head and 4-CPU workers that stay while idle (the benchmark launches
// one per trial).
const reactionYAML = `cluster_name: reaction
max_workers: 12
provider:
  type: fake_multinode
head_node_type: head
available_node_types:
  head:
    node_config: {}
    resources: {CPU: 1}
  cpu4:
    node_config: {}
    resources: {CPU: 4}
    max_workers: 12
    idle_timeout_s: 600
`

// instancesLaunched counts the instances in a fake_multinode provider's state file
// (0 while it is missing or being replaced).
func instancesLaunched(state string) int {
	raw, err := os.ReadFile(state)
	if err != nil {
		return 0
	}
	var rows []json.RawMessage
	if json.Unmarshal(raw, &rows) != nil {
		return 0
	}
	return len(rows)
}

// TestBenchAutoscalerReaction measures autoscaler_reaction_ms: from a placement group's
// creation to the launch of the node it needs (the fake_multinode provider's instance
// row written once the node's process runs), with the autoscaler's default 1 s tick.
// Each trial's group needs a new node: the earlier ones are full.
func TestBenchAutoscalerReaction(t *testing.T) {
	benchgate.Require(t)
	const trials = 10
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(reactionYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "1", "--autoscaling-config", path)
	t.Cleanup(func() { c.Run("stop", "--temp-dir", c.TempDir, "--grace", "5s") })
	state := filepath.Join(c.TempDir, "clusters", "reaction", "instances.json")
	launched := func() int { return instancesLaunched(state) }
	pgs := harness.DialPlacementGroups(t, c.GCSAddress)
	var samples []float64
	for i := range trials {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		start := time.Now()
		reply, err := pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: "detached",
			Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 4}}}})
		if err != nil {
			t.Fatal(err)
		}
		for launched() <= i {
			if ctx.Err() != nil {
				t.Fatalf("trial %d: no launch within 90 s", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
		samples = append(samples, float64(time.Since(start).Microseconds())/1000)
		id := reply.PlacementGroup.PlacementGroupId
		harness.Eventually(t, 60*time.Second, "group CREATED", func() error {
			got, err := pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: id})
			if err != nil {
				return err
			}
			if got.PlacementGroup.State != pb.PlacementGroupState_CREATED {
				return fmt.Errorf("state %s", got.PlacementGroup.State)
			}
			return nil
		})
		cancel()
	}
	slices.Sort(samples)
	t.Logf("reaction times (ms): %v", samples)
	fmt.Printf("BENCH autoscaler_reaction_ms %.0f ms\n", samples[len(samples)-1])
	fmt.Printf("BENCH autoscaler_reaction_ms_p50 %.0f ms\n", samples[len(samples)/2])
}

// TestBenchSpotInterruptionToReplacement measures spot_interruption_to_replacement_ms:
// from a spot interruption notice appearing in a node's instance metadata (a loopback
// stand-in, polled every 5 s by the raylet, as AWS advises) to the launch of the
// replacement node for the group it held, through the preemption drain, the GCS moving
// the bundles and the autoscaler's 1 s tick.
func TestBenchSpotInterruptionToReplacement(t *testing.T) {
	benchgate.Require(t)
	const trials = 5
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(reactionYAML, "cluster_name: reaction", "cluster_name: spot", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "1", "--autoscaling-config", path)
	t.Cleanup(func() { c.Run("stop", "--temp-dir", c.TempDir, "--grace", "5s") })
	state := filepath.Join(c.TempDir, "clusters", "spot", "instances.json")
	launched := func() int { return instancesLaunched(state) }
	pgs := harness.DialPlacementGroups(t, c.GCSAddress)
	var samples []float64
	for i := range trials {
		var notice atomic.Value
		metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := notice.Load().(string)
			if body == "" {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(metadata.Close)
		spot := c.AddNode("--num-cpus", "4", "--spot-metadata-url", metadata.URL)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		reply, err := pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: "detached",
			Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 4}}}})
		if err != nil {
			t.Fatal(err)
		}
		id := reply.PlacementGroup.PlacementGroupId
		harness.Eventually(t, 60*time.Second, "group CREATED on the spot node", func() error {
			got, err := pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: id})
			if err != nil {
				return err
			}
			if got.PlacementGroup.State != pb.PlacementGroupState_CREATED || got.PlacementGroup.Bundles[0].NodeId != spot.NodeID {
				return fmt.Errorf("trial %d: state %s on %s, launched %d", i, got.PlacementGroup.State, got.PlacementGroup.Bundles[0].NodeId, launched())
			}
			return nil
		})
		start := time.Now()
		notice.Store(fmt.Sprintf(`{"action": "terminate", "time": %q}`, start.Add(2*time.Minute).UTC().Format(time.RFC3339)))
		for launched() <= i {
			if ctx.Err() != nil {
				t.Fatalf("trial %d: no replacement within 90 s", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
		samples = append(samples, float64(time.Since(start).Microseconds())/1000)
		// The group settles on its replacement before the next trial's spot node joins.
		harness.Eventually(t, 60*time.Second, "group moved off the spot node", func() error {
			got, err := pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: id})
			if err != nil {
				return err
			}
			if got.PlacementGroup.State != pb.PlacementGroupState_CREATED || got.PlacementGroup.Bundles[0].NodeId == spot.NodeID {
				return fmt.Errorf("state %s", got.PlacementGroup.State)
			}
			return nil
		})
		cancel()
	}
	slices.Sort(samples)
	t.Logf("notice to replacement (ms): %v", samples)
	fmt.Printf("BENCH spot_interruption_to_replacement_ms %.0f ms\n", samples[len(samples)/2])
	fmt.Printf("BENCH spot_interruption_to_replacement_ms_max %.0f ms\n", samples[len(samples)-1])
}
