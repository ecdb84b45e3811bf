package integration

import (
	"testing"

	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Every GPU bundle gets concrete GPU indices on its node, and its CUDA_VISIBLE_DEVICES.
func TestGPUBundlesGetConcreteGPUs(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	node := c.AddRaylet(map[string]float64{"CPU": 8, "GPU": 4}, nil)
	client := connect(t, c)
	ctx := testContext(t)
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 1}, {"GPU": 2, "CPU": 1}, {"CPU": 1}, {"GPU": 0.5}, {"GPU": 0.5}}, sdk.StrictPack)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, pg)
	table, err := pg.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	for i, b := range table.Bundles {
		if b.NodeID != node.NodeID() {
			t.Fatalf("bundle %d on %s", i, b.NodeID)
		}
		for _, id := range b.GPUIDs {
			seen[id]++
		}
	}
	if len(table.Bundles[0].GPUIDs) != 1 || len(table.Bundles[1].GPUIDs) != 2 || len(table.Bundles[2].GPUIDs) != 0 {
		t.Fatalf("GPU ids per bundle: %v %v %v", table.Bundles[0].GPUIDs, table.Bundles[1].GPUIDs, table.Bundles[2].GPUIDs)
	}
	if table.Bundles[2].CUDAVisibleDevices != "" {
		t.Errorf("CPU-only bundle has CUDA_VISIBLE_DEVICES %q", table.Bundles[2].CUDAVisibleDevices)
	}
	whole := append(append([]int{}, table.Bundles[0].GPUIDs...), table.Bundles[1].GPUIDs...)
	for _, id := range whole {
		if seen[id] != 1 {
			t.Fatalf("whole GPU %d given to %d bundles", id, seen[id])
		}
	}
	// Two half-GPU bundles share the one GPU left.
	if table.Bundles[3].GPUIDs[0] != table.Bundles[4].GPUIDs[0] {
		t.Errorf("two 0.5-GPU bundles on GPUs %v and %v; best fit shares one", table.Bundles[3].GPUIDs, table.Bundles[4].GPUIDs)
	}
	want := []string{}
	for _, b := range table.Bundles[:2] {
		want = append(want, cudaString(b.GPUIDs))
	}
	if table.Bundles[0].CUDAVisibleDevices != want[0] || table.Bundles[1].CUDAVisibleDevices != want[1] {
		t.Errorf("CUDA_VISIBLE_DEVICES %q %q, want %q %q", table.Bundles[0].CUDAVisibleDevices, table.Bundles[1].CUDAVisibleDevices, want[0], want[1])
	}
	if err := pg.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 4}}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, again) // every GPU was released
	info, err := again.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Bundles[0].CUDAVisibleDevices; got != "0,1,2,3" {
		t.Errorf("4-GPU bundle CUDA_VISIBLE_DEVICES = %q, want 0,1,2,3", got)
	}
}
