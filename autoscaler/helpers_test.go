package autoscaler

import (
	"fmt"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// set builds a resource set from name, amount pairs: set("CPU", 8, "GPU", 1).
func set(pairs ...any) resources.Set {
	out := make(resources.Set)
	for i := 0; i < len(pairs); i += 2 {
		var amount float64
		switch v := pairs[i+1].(type) {
		case int:
			amount = float64(v)
		case float64:
			amount = v
		default:
			panic(fmt.Sprintf("set: amount %v", v))
		}
		out[pairs[i].(string)] = resources.Amount(amount * resources.AmountScale)
	}
	return out
}

// cpuType is a CPU-only node type.
func cpuType(name string, cpus int, price float64) NodeType {
	return NodeType{Name: name, Resources: set("CPU", cpus, "memory", cpus*4), PricePerHour: price,
		MaxWorkers: 100, IdleTimeout: 5 * time.Minute}
}

// gpuType is a node type with GPUs in the given NVLink islands, 8 CPUs per GPU.
func gpuType(name string, price float64, islands ...int) NodeType {
	gpus := 0
	for _, size := range islands {
		gpus += size
	}
	return NodeType{Name: name, Resources: set("CPU", 8*gpus, "GPU", gpus, "memory", 32*gpus), GPUIslands: islands,
		PricePerHour: price, MaxWorkers: 100, IdleTimeout: 5 * time.Minute}
}

// running is a running node of type t with everything free, idle for idle.
func running(id string, t NodeType, idle time.Duration) Node {
	row := NewNode(placement.NodeID(id), &t)
	return Node{ID: id, Type: t.Name, State: NodeRunning, Placement: row, IdleFor: idle}
}

// busy is a running node of type t with nothing free.
func busy(id string, t NodeType) Node {
	node := running(id, t, 0)
	node.Placement.Available = resources.Set{}
	for i := range node.Placement.GPUs {
		node.Placement.GPUs[i].Available = 0
	}
	return node
}

func launching(id string, t NodeType) Node {
	return Node{ID: id, Type: t.Name, State: NodeLaunching}
}

func group(id string, strategy placement.Strategy, bundles ...resources.Set) GroupDemand {
	return GroupDemand{ID: id, Request: placement.Request{Bundles: bundles, Strategy: strategy}, Reason: pending.NoResources}
}

func repeat(n int, bundle resources.Set) []resources.Set {
	out := make([]resources.Set, n)
	for i := range out {
		out[i] = bundle
	}
	return out
}

func shape(s resources.Set, count int) ShapeDemand {
	return ShapeDemand{Shape: s, Count: count, Reason: pending.NoResources}
}

func input(types ...NodeType) Input {
	return Input{Types: types, MaxWorkers: 1000, MaxUnavailable: 1, UpscalingSpeed: 1}
}

func mustSelector(t testing.TB, wire map[string]string) nodelabel.Selector {
	t.Helper()
	selector, err := nodelabel.ParseSelector(wire)
	if err != nil {
		t.Fatal(err)
	}
	return selector
}

// launched is the plan's launches as type → count.
func launched(plan Plan) map[string]int {
	out := make(map[string]int)
	for _, launch := range plan.Launches {
		out[launch.Type] += launch.Count
	}
	return out
}

func terminated(plan Plan) map[string]TerminationCause {
	out := make(map[string]TerminationCause)
	for _, termination := range plan.Terminations {
		out[termination.NodeID] = termination.Cause
	}
	return out
}
