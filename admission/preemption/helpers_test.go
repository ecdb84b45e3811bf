package preemption

import (
	"fmt"
	"testing"

	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

const gpu = resources.AmountScale

// dgx is an idle 8-GPU node, one NVLink island.
func dgx(id string) placement.Node {
	n := placement.Node{
		ID: placement.NodeID(id), Alive: true,
		Total:     resources.Set{"GPU": 8 * gpu, "CPU": 64 * gpu},
		Available: resources.Set{"GPU": 8 * gpu, "CPU": 64 * gpu},
		Labels:    map[string]string{nodelabel.NodeID: id},
	}
	for i := range 8 {
		n.GPUs = append(n.GPUs, placement.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", id, i), Rail: i, Available: gpu})
	}
	return n
}

func gpuBundles(count int, each int64) []resources.Set {
	out := make([]resources.Set, count)
	for i := range out {
		out[i] = resources.Set{"GPU": resources.Amount(each) * gpu}
	}
	return out
}

// cluster is a snapshot with running work reserved on it.
type cluster struct {
	t       testing.TB
	snap    *placement.Snapshot
	running []Running
}

func newCluster(t testing.TB, nodes ...placement.Node) *cluster {
	t.Helper()
	snap, err := placement.NewSnapshot(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, snap: snap}
}

// on runs a gang whose bundles take the given GPUs of one node.
func (c *cluster) on(r Running, node string, gpus ...int) {
	c.t.Helper()
	r.Bundles = nil
	for i, g := range gpus {
		r.Bundles = append(r.Bundles, resources.Set{"GPU": gpu})
		r.Placements = append(r.Placements, placement.BundlePlacement{BundleIndex: i, NodeID: placement.NodeID(node), GPUIndices: []int{g}})
	}
	if err := c.snap.Reserve(r.Bundles, placement.Plan{Placements: r.Placements}); err != nil {
		c.t.Fatal(err)
	}
	c.running = append(c.running, r)
}

// place runs a gang where Schedule puts it; false when it does not fit.
func (c *cluster) place(r Running, request placement.Request) bool {
	plan, err := placement.Schedule(c.snap, request)
	if err != nil {
		return false
	}
	if err := c.snap.Reserve(request.Bundles, plan); err != nil {
		c.t.Fatal(err)
	}
	r.Bundles, r.Placements = request.Bundles, plan.Placements
	c.running = append(c.running, r)
	return true
}

func (c *cluster) usage() map[string]resources.Set {
	out := map[string]resources.Set{}
	for _, r := range c.running {
		sum, _ := resources.SumOf(r.Bundles)
		out[r.Queue] = out[r.Queue].Add(sum)
	}
	return out
}

func (c *cluster) input(config *queues.Config, p Preemptor, now int64) Input {
	return Input{Config: config, Usage: c.usage(), Preemptor: p, Running: c.running, Cluster: c.snap, Now: now}
}

func mustLoad(t testing.TB, yaml string) *queues.Config {
	t.Helper()
	c, err := queues.Load([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func strictPack(gpus int) placement.Request {
	return placement.Request{Strategy: placement.StrategyStrictPack, Bundles: gpuBundles(gpus, 1)}
}

func victimIDs(d Decision) []string {
	var out []string
	for _, v := range d.Victims {
		out = append(out, v.ID)
	}
	return out
}
