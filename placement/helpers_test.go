package placement_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/placement"
)

// resources parses "GPU=1 CPU=8" into a ResourceSet; it panics on a malformed spec
// (a bug in the test).
func resources(spec string) placement.ResourceSet {
	wire := map[string]float64{}
	for _, field := range strings.Fields(spec) {
		name, value, ok := strings.Cut(field, "=")
		amount, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			panic("bad resource spec " + spec)
		}
		wire[name] = amount
	}
	set, err := placement.ResourceSetFromFloat(wire)
	if err != nil {
		panic(err)
	}
	return set
}

// node is an alive node with the node-id label; available "" means idle.
func node(id, total, available string) placement.Node {
	if available == "" {
		available = total
	}
	return placement.Node{
		ID:        placement.NodeID(id),
		Total:     resources(total),
		Available: resources(available),
		Labels:    map[string]string{placement.NodeIDLabel: id},
		Alive:     true,
	}
}

func draining(n placement.Node) placement.Node { n.Draining = true; return n }
func dead(n placement.Node) placement.Node     { n.Alive = false; return n }

func labeled(n placement.Node, keyValues ...string) placement.Node {
	for i := 0; i+1 < len(keyValues); i += 2 {
		n.Labels[keyValues[i]] = keyValues[i+1]
	}
	return n
}

func bundles(specs ...string) []placement.ResourceSet {
	out := make([]placement.ResourceSet, len(specs))
	for i, spec := range specs {
		out[i] = resources(spec)
	}
	return out
}

func selectors(t *testing.T, wire ...map[string]string) []placement.LabelSelector {
	t.Helper()
	out := make([]placement.LabelSelector, len(wire))
	for i, w := range wire {
		selector, err := placement.ParseLabelSelector(w)
		if err != nil {
			t.Fatalf("selector %v: %v", w, err)
		}
		out[i] = selector
	}
	return out
}

func snapshotOf(t *testing.T, nodes ...placement.Node) *placement.Snapshot {
	t.Helper()
	snapshot, err := placement.NewSnapshot(nodes)
	if err != nil {
		t.Fatalf("NewSnapshot: %v", err)
	}
	return snapshot
}
