package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// A simulated DGX H100 with MIG on for GPU 0 only: seven 1g.10gb bundles fill GPU 0, an
// eighth waits; removing the seven frees their instances (idle, then destroyed through
// NVML after the idle timeout) and the eighth is placed.
func TestMIGSlicesAreCarvedReusedAndDestroyed(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "1")
	node := c.AddNode("--gpu-sim", "dgx-h100", "--mig", "0:on", "--mig-idle-timeout", "1s", "--num-cpus", "16")
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	info := harness.FindNode(nodes, node.NodeID)
	if info.ResourcesTotal["GPU"] != 7 || len(info.Gpus) != 7 || len(info.MigGpus) != 1 || info.MigGpus[0].Index != 0 {
		t.Fatalf("node with MIG on GPU 0: GPU %v, %d whole GPUs, MIG GPUs %v", info.ResourcesTotal["GPU"], len(info.Gpus), info.MigGpus)
	}
	if info.ResourcesTotal["nvidia.com/mig-1g.10gb"] != 7 || info.ResourcesTotal["nvidia.com/mig-3g.40gb"] != 2 {
		t.Errorf("informational MIG totals: %v", info.ResourcesTotal)
	}
	nvmlState := func() []gpusim.SimGPUInstance {
		t.Helper()
		state, err := gpusim.ReadSimulatedMIGState(filepath.Join(node.SessionDir, "mig-"+node.NodeID+".json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range state {
			if g.Index == 0 {
				return g.GPUInstances
			}
		}
		t.Fatal("no GPU 0 in the simulated NVML state")
		return nil
	}

	ctx := testContext(t)
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	slice := sdk.Bundle{"nvidia.com/mig-1g.10gb": 1}
	seven, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{slice, slice, slice, slice, slice, slice, slice}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	placed := ready(t, seven)
	uuids := map[string]bool{}
	for _, b := range placed.Bundles {
		if b.NodeID != node.NodeID || len(b.GPUIDs) != 1 || b.GPUIDs[0] != 0 || len(b.DeviceUUIDs) != 1 ||
			!strings.HasPrefix(b.DeviceUUIDs[0], "MIG-") || b.CUDAVisibleDevices != b.DeviceUUIDs[0] {
			t.Fatalf("bundle %d: node %s GPUs %v UUIDs %v CUDA_VISIBLE_DEVICES %q", b.Index, b.NodeID, b.GPUIDs, b.DeviceUUIDs, b.CUDAVisibleDevices)
		}
		uuids[b.DeviceUUIDs[0]] = true
	}
	if len(uuids) != 7 || len(nvmlState()) != 7 {
		t.Fatalf("%d distinct MIG devices, %d GPU instances in NVML; want 7 and 7", len(uuids), len(nvmlState()))
	}
	harness.Eventually(t, 10*time.Second, "raygo status shows the MIG slot maps", func() error {
		status, _, _ := c.Run("status")
		if !strings.Contains(status, "MIG: 1 GPU(s) in MIG mode: 7 instance(s) held, 0 idle, 1 memory slice(s) free") ||
			!strings.Contains(status, "Fragmentation (free capacity a request of the shape could not use)") || !strings.Contains(status, "GPUs by model") {
			return fmt.Errorf("status:\n%s", status)
		}
		return nil
	})

	eighth, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{slice}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the eighth slice waits", func() error {
		row, err := eighth.Table(ctx)
		if err != nil {
			return err
		}
		if row.State != "PENDING" || row.SchedulingState != "NO_RESOURCES" {
			return fmt.Errorf("%s / %s: %s", row.State, row.SchedulingState, row.PendingReason)
		}
		return nil
	})
	if err := seven.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	got := ready(t, eighth)
	if !uuids[got.Bundles[0].DeviceUUIDs[0]] {
		t.Errorf("the eighth slice got %v, not one of the released (idle) instances", got.Bundles[0].DeviceUUIDs)
	}
	harness.Eventually(t, 15*time.Second, "idle instances destroyed through NVML", func() error {
		if n := len(nvmlState()); n != 1 {
			return fmt.Errorf("%d GPU instances on GPU 0, want the eighth's alone", n)
		}
		return nil
	})
	if err := eighth.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 15*time.Second, "every instance destroyed after the last release", func() error {
		if n := len(nvmlState()); n != 0 {
			return fmt.Errorf("%d GPU instances left on GPU 0", n)
		}
		return nil
	})
}
