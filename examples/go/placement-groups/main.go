// Command placement-groups walks through raygo's placement groups from Go: one group of
// each strategy, where its bundles landed, then removal.
//
//	RAYGO_ADDRESS=127.0.0.1:6380 go run ./examples/go/placement-groups
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/raygo-dev/raygo/sdk"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "placement-groups:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{})
	if err != nil {
		return err
	}
	defer client.Close()
	fmt.Printf("Connected to %s as job %s\n", client.Address(), client.JobID())

	bundles := []sdk.Bundle{{"CPU": 1}, {"CPU": 1}, {"CPU": 1}}
	for _, strategy := range []sdk.Strategy{sdk.Pack, sdk.Spread, sdk.StrictPack, sdk.StrictSpread} {
		pg, err := client.CreatePlacementGroup(ctx, bundles, strategy, sdk.WithName("demo-"+strings.ToLower(string(strategy))))
		if err != nil {
			return err
		}
		info, err := pg.Ready(ctx)
		if err != nil {
			return err
		}
		nodes := map[string]bool{}
		fmt.Printf("\n%-13s %s: %s in %.1f ms\n", strategy, pg.ID, info.State, info.EndToEndCreationLatencyMs)
		for _, b := range info.Bundles {
			nodes[b.NodeID] = true
			fmt.Printf("  bundle %d %v -> node %s (raylet %s)\n", b.Index, b.Resources, b.NodeID[:12], b.NodeAddress)
		}
		fmt.Printf("  %d bundles on %d node(s)\n", len(info.Bundles), len(nodes))
		if err := pg.Remove(ctx); err != nil {
			return err
		}
	}

	// GPU topology: a tensor-parallel group inside one NVLink island, and a data-parallel
	// group across nodes on one rail. Each bundle gets its GPUs and CUDA_VISIBLE_DEVICES.
	for _, gpuGroup := range []struct {
		title    string
		bundles  []sdk.Bundle
		strategy sdk.Strategy
	}{
		{"tensor parallel: 4 GPUs in one NVLink island", []sdk.Bundle{{"GPU": 1}, {"GPU": 1}, {"GPU": 1}, {"GPU": 1}}, sdk.StrictPack},
		{"data parallel: 1 GPU on each of 2 nodes, rail-aligned", []sdk.Bundle{{"GPU": 1}, {"GPU": 1}}, sdk.StrictSpread},
	} {
		pg, err := client.CreatePlacementGroup(ctx, gpuGroup.bundles, gpuGroup.strategy)
		if err != nil {
			return err
		}
		ok, err := pg.Wait(ctx, 10*time.Second)
		if err != nil {
			return err
		}
		if !ok { // a cluster without GPU nodes
			fmt.Printf("\n%s: not placed (no GPU nodes?)\n", gpuGroup.title)
			if err := pg.Remove(ctx); err != nil {
				return err
			}
			continue
		}
		info, err := pg.Table(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("\n%s (%s):\n", gpuGroup.title, gpuGroup.strategy)
		for _, b := range info.Bundles {
			fmt.Printf("  bundle %d -> node %s GPU %v CUDA_VISIBLE_DEVICES=%s UUID %v\n",
				b.Index, b.NodeID[:12], b.GPUIDs, b.CUDAVisibleDevices, b.DeviceUUIDs)
		}
		if err := pg.Remove(ctx); err != nil {
			return err
		}
	}

	// MIG: two 1g.10gb slices, carved on a GPU in MIG mode (raygo start --mig ...).
	slice := sdk.Bundle{"nvidia.com/mig-1g.10gb": 1}
	migGroup, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{slice, slice}, sdk.Pack)
	if err != nil {
		return err
	}
	if ok, err := migGroup.Wait(ctx, 3*time.Second); err != nil {
		return err
	} else if ok {
		info, err := migGroup.Table(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("\nMIG slices (PACK of 2 × nvidia.com/mig-1g.10gb):\n")
		for _, b := range info.Bundles {
			fmt.Printf("  bundle %d -> node %s parent GPU %v CUDA_VISIBLE_DEVICES=%s\n", b.Index, b.NodeID[:12], b.GPUIDs, b.CUDAVisibleDevices)
		}
	} else {
		fmt.Printf("\nMIG slices: not placed (no node runs a GPU in MIG mode)\n")
	}
	if err := migGroup.Remove(ctx); err != nil {
		return err
	}

	// A group no node can hold today is accepted and waits, with its reason.
	big, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1000}}, sdk.StrictPack)
	if err != nil {
		return err
	}
	if ok, err := big.Wait(ctx, time.Second); err != nil || ok {
		return fmt.Errorf("the 1000-CPU group: ready=%v err=%v, want a pending group", ok, err)
	}
	info, err := big.Table(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\nSTRICT_PACK {CPU: 1000}: %s / %s\n  %s\n", info.State, info.SchedulingState, info.PendingReason)
	return big.Remove(ctx)
}
