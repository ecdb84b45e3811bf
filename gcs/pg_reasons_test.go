package gcs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// A gang that finds no placement waits as Fragmented when the cluster has its resources
// free in total (the 100 nodes with one free GPU each and an 8-GPU gang), as
// NoResources when it does not, and as Infeasible when no node could ever hold it.
func TestPendingCodeSaysFragmentedWhenTheFreeGPUsAreEnoughInTotal(t *testing.T) {
	// nodes are n 8-GPU nodes (one NVLink island) with `free` GPUs free each.
	nodes := func(n, free int) []placement.Node {
		var out []placement.Node
		for i := range n {
			node := placement.Node{ID: placement.NodeID(fmt.Sprintf("n%03d", i)), Alive: true,
				Total:     resources.Set{resources.CPU: 8 * resources.AmountScale, resources.GPU: 8 * resources.AmountScale},
				Available: resources.Set{resources.CPU: 8 * resources.AmountScale, resources.GPU: resources.Amount(free) * resources.AmountScale}}
			for g := range 8 {
				gpu := placement.GPU{Index: g, NVLinkIsland: 0, Rail: g}
				if g < free {
					gpu.Available = resources.AmountScale
				}
				node.GPUs = append(node.GPUs, gpu)
			}
			out = append(out, node)
		}
		return out
	}
	gang := func(gpus int) placement.Request {
		request := placement.Request{Strategy: placement.StrategyStrictPack}
		for range gpus {
			request.Bundles = append(request.Bundles, resources.Set{resources.GPU: resources.AmountScale})
		}
		return request
	}
	for _, tc := range []struct {
		name    string
		nodes   []placement.Node
		request placement.Request
		want    pending.Reason
	}{
		{"100 nodes with one free GPU each, an 8-GPU gang", nodes(100, 1), gang(8), pending.Fragmented},
		{"two nodes with 4 free each, an 8-GPU gang", nodes(2, 4), gang(8), pending.Fragmented},
		{"7 nodes with one free GPU each, an 8-GPU gang", nodes(7, 1), gang(8), pending.NoResources},
		{"a 16-GPU gang on 8-GPU nodes", nodes(4, 8), gang(16), pending.Infeasible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snapshot, err := placement.NewSnapshot(tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			_, err = placement.Schedule(snapshot, tc.request)
			var unschedulable *placement.UnschedulableError
			if !errors.As(err, &unschedulable) {
				t.Fatalf("Schedule: %v, want an UnschedulableError", err)
			}
			_, available := snapshot.ResourceSummary()
			if got := pendingCode(unschedulable, tc.request, available); got != tc.want {
				t.Fatalf("pending code %q, want %q", got, tc.want)
			}
		})
	}
}
