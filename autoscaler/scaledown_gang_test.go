package autoscaler

import (
	"testing"
	"time"
)

// TestScaleDownNeverTakesANodeThatHoldsAGang: a node holding bundles of a running gang
// is busy for the GCS (IdleFor 0) even when nothing runs in the bundles, so idle and
// outdated scale-down never take it, whatever max_unavailable allows, while an idle node
// beside it goes.
func TestScaleDownNeverTakesANodeThatHoldsAGang(t *testing.T) {
	gpu8 := gpuType("gpu8", 98, 8)
	holding := func(id string, t NodeType) Node {
		node := running(id, t, 0)
		// Four of the eight GPUs are a gang's bundles, reserved and unused.
		for i := range 4 {
			node.Placement.GPUs[i].Available = 0
		}
		node.Placement.Available = set("CPU", 32, "GPU", 4, "memory", 128)
		return node
	}
	for _, tc := range []struct {
		name  string
		nodes func() []Node
		want  map[string]TerminationCause
	}{{
		name:  "gang nodes of a configured type stay; the idle one goes",
		nodes: func() []Node { return []Node{holding("a", gpu8), holding("b", gpu8), running("idle", gpu8, time.Hour)} },
		want:  map[string]TerminationCause{"idle": CauseIdle},
	}, {
		name: "a gang node of a type no longer configured stays",
		nodes: func() []Node {
			retired := gpuType("retired", 98, 8)
			return []Node{holding("a", retired), holding("b", gpu8)}
		},
		want: map[string]TerminationCause{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(gpu8)
			in.MaxUnavailable = 10
			in.Nodes = tc.nodes()
			got := terminated(Decide(in))
			if len(got) != len(tc.want) {
				t.Fatalf("terminations %v, want %v", got, tc.want)
			}
			for id, cause := range tc.want {
				if got[id] != cause {
					t.Fatalf("terminations %v, want %v", got, tc.want)
				}
			}
		})
	}
}
