package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/raylet"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Ray Train, Tune and vLLM pin a bundle to a node with Ray's implicit resources
// (node:<ip>, node:__internal_head__); bundles may ask for object_store_memory. Groups
// asking for them are placed where Ray places them, and a node no one has keeps its
// group waiting as infeasible.
func TestGroupsPinnedWithImplicitNodeResources(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	head := c.AddRayletWith(func(cfg *raylet.Config) { cfg.IsHead, cfg.Resources["CPU"] = true, 2 })
	other := c.AddRayletWith(func(cfg *raylet.Config) { cfg.NodeIP, cfg.Resources["CPU"] = "127.0.0.2", 2 })
	client := connect(t, c)
	ctx := testContext(t)

	pinned, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{
		{"CPU": 1, resources.NodeIPPrefix + "127.0.0.2": 0.001},
		{"CPU": 1, resources.HeadNode: 0.001},
		{"CPU": 1, resources.ObjectStoreMemory: 1 << 20},
	}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	got := nodesOf(ready(t, pinned))
	if got[0] != other.NodeID() || got[1] != head.NodeID() {
		t.Fatalf("bundles on %v, want bundle 0 on %s (node:127.0.0.2) and bundle 1 on the head %s", got, other.NodeID(), head.NodeID())
	}

	// Two head-node bundles of 0.6 cannot share the one head: the resource is real, not a label.
	twoHeads, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{resources.HeadNode: 0.6}, {resources.HeadNode: 0.6}}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	nowhere, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1, resources.NodeIPPrefix + "127.0.0.9": 0.001}}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	for _, pg := range []*sdk.PlacementGroup{twoHeads, nowhere} {
		harness.Eventually(t, 10*time.Second, "group INFEASIBLE", func() error {
			info, err := pg.Table(ctx)
			if err != nil {
				return err
			}
			if info.State != "PENDING" || info.SchedulingState != "INFEASIBLE" {
				return fmt.Errorf("state %s / %s, want PENDING / INFEASIBLE", info.State, info.SchedulingState)
			}
			return nil
		})
	}

	// Ray's table keeps a removed group's last node ids.
	if err := pinned.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := pinned.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if removed := nodesOf(info); info.State != "REMOVED" || removed[0] != other.NodeID() || removed[1] != head.NodeID() {
		t.Fatalf("after removal: state %s, nodes %v; want REMOVED with the last nodes %v", info.State, removed, got)
	}
	// ... while its resources are free again.
	harness.Eventually(t, 10*time.Second, "the head's CPUs free", func() error {
		if free := head.Node().ResourcesAvailable["CPU"]; free != 2 {
			return fmt.Errorf("head has %v CPUs free, want 2", free)
		}
		return nil
	})
}
