package autoscaler

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

func TestDecide(t *testing.T) {
	dgx := gpuType("dgx8", 20, 8)
	pcie4 := gpuType("pcie4", 8, 4)
	pairs := gpuType("pairs8", 12, 2, 2, 2, 2)
	gpu1 := gpuType("gpu1", 1, 1)
	gpu4 := gpuType("gpu4", 3, 4)
	cpu8 := cpuType("cpu8", 8, 2)
	cpuBig := cpuType("cpu64", 64, 10)
	gpuCheapCPU := gpuType("gpu-cheap", 1, 1) // 8 CPUs for $1: cheaper than cpu8 for CPUs
	idle := 10 * time.Minute

	withMin := func(nt NodeType, min, max int) NodeType { nt.MinWorkers, nt.MaxWorkers = min, max; return nt }
	labelled := func(nt NodeType, labels map[string]string) NodeType { nt.Labels = labels; return nt }
	unavailable := func(nt NodeType) NodeType { nt.Unavailable = true; return nt }

	cases := []struct {
		name  string
		in    func() Input
		check func(t *testing.T, plan Plan)
	}{{
		name: "STRICT_PACK of 8×1 GPU launches one 8-GPU island type, not two 4-GPU nodes or an 8-GPU node of pairs",
		in: func() Input {
			in := input(dgx, pcie4, pairs)
			in.Groups = []GroupDemand{group("pg1", placement.StrategyStrictPack, repeat(8, set("GPU", 1))...)}
			return in
		},
		check: wantLaunches(map[string]int{"dgx8": 1}, "pg1"),
	}, {
		name: "STRICT_SPREAD of 3 launches 3 nodes in one plan",
		in: func() Input {
			in := input(cpu8)
			in.Groups = []GroupDemand{group("spread", placement.StrategyStrictSpread, repeat(3, set("CPU", 1))...)}
			return in
		},
		check: wantLaunches(map[string]int{"cpu8": 3}, "spread"),
	}, {
		name: "a gang no one type holds gets a node of each type it needs (three hdd bundles, one ssd)",
		in: func() Input {
			in := input(labelled(cpu8, map[string]string{"disk": "hdd"}), labelled(cpuType("cpu8-ssd", 8, 3), map[string]string{"disk": "ssd"}))
			hdd := mustSelector(t, map[string]string{"disk": "hdd"})
			ssd := mustSelector(t, map[string]string{"disk": "ssd"})
			g := group("mixed", placement.StrategyStrictSpread, repeat(4, set("CPU", 4))...)
			g.Request.BundleLabelSelectors = []nodelabel.Selector{hdd, hdd, hdd, ssd}
			in.Groups = []GroupDemand{g}
			return in
		},
		check: wantLaunches(map[string]int{"cpu8": 3, "cpu8-ssd": 1}, "mixed"),
	}, {
		name: "STRICT_SPREAD launches only for the bundles no existing node can take",
		in: func() Input {
			in := input(cpu8)
			in.Nodes = []Node{running("a", cpu8, 0), running("b", cpu8, 0)}
			in.Groups = []GroupDemand{group("spread", placement.StrategyStrictSpread, repeat(3, set("CPU", 1))...)}
			return in
		},
		check: wantLaunches(map[string]int{"cpu8": 1}, "spread"),
	}, {
		name: "CPU-only demand never launches a GPU type, even a cheaper one",
		in: func() Input {
			in := input(gpuCheapCPU, cpu8)
			in.Shapes = []ShapeDemand{shape(set("CPU", 4), 1)}
			in.Groups = []GroupDemand{group("cpu-pg", placement.StrategyPack, repeat(2, set("CPU", 2))...)}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			if got := launched(plan); got["gpu-cheap"] != 0 || got["cpu8"] == 0 {
				t.Fatalf("launches %v, want cpu8 only", got)
			}
		},
	}, {
		name: "a 16-GPU STRICT_PACK with only 8-GPU types launches nothing and is infeasible with the island reason",
		in: func() Input {
			in := input(dgx, pcie4)
			in.Groups = []GroupDemand{group("big", placement.StrategyStrictPack, repeat(16, set("GPU", 1))...)}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			if len(plan.Launches) != 0 {
				t.Fatalf("launches %v", plan.Launches)
			}
			want := Infeasible{For: "big", Reason: "STRICT_PACK of 16 GPUs needs one NVLink island of 16 GPUs; the largest of any node type is 8"}
			if !slices.Equal(plan.Infeasible, []Infeasible{want}) {
				t.Fatalf("infeasible %+v, want %+v", plan.Infeasible, want)
			}
		},
	}, {
		name: "a bundle larger than any type is infeasible with a reason naming the resource",
		in: func() Input {
			in := input(dgx)
			in.Shapes = []ShapeDemand{shape(set("CPU", 1000), 2)}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			if len(plan.Launches) != 0 || len(plan.Infeasible) != 1 || plan.Infeasible[0].Limited ||
				plan.Infeasible[0].Reason != "the shape asks for CPU 1000; the most any node type has is 64" {
				t.Fatalf("plan %+v", plan)
			}
		},
	}, {
		name: "a queue at quota with 8 GPUs pending launches nothing",
		in: func() Input {
			in := input(dgx)
			held := group("held", placement.StrategyStrictPack, repeat(8, set("GPU", 1))...)
			held.Reason = pending.QuotaExceeded
			in.Groups = []GroupDemand{held}
			in.Shapes = []ShapeDemand{{Shape: set("GPU", 1), Count: 8, Reason: pending.WaitingForBorrowableQuota}}
			return in
		},
		check: wantEmpty,
	}, {
		name: "a group marked Infeasible is still demand: new node types may hold it",
		in: func() Input {
			in := input(dgx)
			g := group("was-infeasible", placement.StrategyStrictPack, repeat(8, set("GPU", 1))...)
			g.Reason = pending.Infeasible
			in.Groups = []GroupDemand{g}
			return in
		},
		check: wantLaunches(map[string]int{"dgx8": 1}, "was-infeasible"),
	}, {
		name: "request_resources is sized against totals: a busy node counts toward it",
		in: func() Input {
			in := input(cpu8)
			in.Nodes = []Node{busy("a", cpu8)}
			in.Constraint = []resources.Set{set("CPU", 8)}
			return in
		},
		check: wantEmpty,
	}, {
		name: "request_resources launches only what totals lack",
		in: func() Input {
			in := input(cpu8)
			in.Nodes = []Node{busy("a", cpu8)}
			in.Constraint = []resources.Set{set("CPU", 8), set("CPU", 8), set("CPU", 4)}
			return in
		},
		check: wantLaunches(map[string]int{"cpu8": 2}, ForRequestResources),
	}, {
		name: "request_resources keeps the idle nodes it needs",
		in: func() Input {
			in := input(cpu8)
			in.Nodes = []Node{running("a", cpu8, idle), running("b", cpu8, idle)}
			in.Constraint = []resources.Set{set("CPU", 8)}
			in.MaxUnavailable = 2
			return in
		},
		check: func(t *testing.T, plan Plan) {
			if len(plan.Terminations) != 1 || len(plan.Launches) != 0 {
				t.Fatalf("plan %+v: want one of two idle nodes kept for request_resources", plan)
			}
		},
	}, {
		name: "global max_workers: launching nodes count, the head does not; a gang it stops is Limited",
		in: func() Input {
			in := input(cpu8)
			in.MaxWorkers = 3
			head := busy("head", cpu8)
			head.Head, head.Type = true, "head"
			in.Nodes = []Node{head, busy("a", cpu8), launching("l", cpu8)}
			in.Groups = []GroupDemand{group("spread", placement.StrategyStrictSpread, repeat(3, set("CPU", 8))...)}
			in.Shapes = []ShapeDemand{shape(set("CPU", 8), 3)}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			if got := launched(plan); got["cpu8"] != 1 {
				t.Fatalf("launches %v, want 1 for the shape (3 workers allowed, 2 exist; the gang needs 2)", got)
			}
			limited := map[string]bool{}
			for _, inf := range plan.Infeasible {
				limited[inf.For] = inf.Limited
			}
			if !limited["spread"] || !limited["shape:{CPU: 8}"] {
				t.Fatalf("infeasible %+v: want the gang and the shape Limited", plan.Infeasible)
			}
		},
	}, {
		name: "per-type max_workers: a type at its max is passed over for the next cheapest",
		in: func() Input {
			in := input(withMin(cpu8, 0, 1), cpuBig)
			in.Nodes = []Node{busy("a", withMin(cpu8, 0, 1))}
			in.Groups = []GroupDemand{group("spread", placement.StrategyStrictSpread, repeat(2, set("CPU", 8))...)}
			return in
		},
		check: wantLaunches(map[string]int{"cpu64": 2}, "spread"),
	}, {
		name: "per-type max_workers: a gang takes what its type's max allows and the next cheapest type for the rest",
		in: func() Input {
			in := input(withMin(cpu8, 0, 1), cpuBig)
			in.Groups = []GroupDemand{group("spread", placement.StrategyStrictSpread, repeat(2, set("CPU", 8))...)}
			return in
		},
		check: wantLaunches(map[string]int{"cpu8": 1, "cpu64": 1}, "spread"),
	}, {
		name: "min_workers are launched without demand",
		in: func() Input {
			in := input(withMin(cpu8, 2, 10))
			in.Nodes = []Node{busy("a", withMin(cpu8, 2, 10))}
			return in
		},
		check: wantLaunches(map[string]int{"cpu8": 1}, ForMinWorkers),
	}, {
		name: "demand bin-packs onto min_workers nodes",
		in: func() Input {
			in := input(withMin(cpu8, 1, 10))
			in.Shapes = []ShapeDemand{shape(set("CPU", 2), 4)}
			return in
		},
		check: wantLaunches(map[string]int{"cpu8": 1}, ForMinWorkers),
	}, {
		name: "idle scale-down takes at most max_unavailable, the longest idle first",
		in: func() Input {
			in := input(cpu8)
			for i := range 10 {
				in.Nodes = append(in.Nodes, running(string(rune('a'+i)), cpu8, time.Duration(10+i)*time.Minute))
			}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			want := []Termination{{NodeID: "j", Type: "cpu8", Cause: CauseIdle}}
			if !slices.Equal(plan.Terminations, want) {
				t.Fatalf("terminations %+v, want %+v", plan.Terminations, want)
			}
		},
	}, {
		name: "a node idle for less than its timeout is kept",
		in: func() Input {
			in := input(cpu8)
			in.Nodes = []Node{running("a", cpu8, time.Minute)}
			return in
		},
		check: wantEmpty,
	}, {
		name: "the head, nodes of unknown type and min_workers nodes are kept however idle",
		in: func() Input {
			minType := withMin(cpu8, 1, 10)
			in := input(minType)
			in.MaxUnavailable = 10
			head := running("head", minType, time.Hour)
			head.Head = true
			unknown := running("byhand", cpu8, time.Hour)
			unknown.Type = ""
			in.Nodes = []Node{head, unknown, running("a", minType, time.Hour)}
			return in
		},
		check: wantEmpty,
	}, {
		name: "an idle node the plan places pending demand on is kept",
		in: func() Input {
			in := input(cpu8)
			in.Nodes = []Node{running("a", cpu8, idle)}
			in.Shapes = []ShapeDemand{shape(set("CPU", 2), 1)}
			return in
		},
		check: wantEmpty,
	}, {
		name: "two 1-GPU tasks get two 1-GPU nodes when cheaper than one 4-GPU node",
		in: func() Input {
			in := input(gpu1, gpu4)
			in.Shapes = []ShapeDemand{shape(set("GPU", 1), 2)}
			return in
		},
		check: wantLaunches(map[string]int{"gpu1": 2}, "shape:{GPU: 1}"),
	}, {
		name: "four 1-GPU tasks get one 4-GPU node when cheaper than four 1-GPU nodes",
		in: func() Input {
			in := input(gpu1, gpu4)
			in.Shapes = []ShapeDemand{shape(set("GPU", 1), 4)}
			return in
		},
		check: wantLaunches(map[string]int{"gpu4": 1}, "shape:{GPU: 1}"),
	}, {
		name: "upscaling_speed caps task launches at max(5, speed × running) but not placement groups",
		in: func() Input {
			in := input(cpu8)
			in.UpscalingSpeed = 1
			in.Shapes = []ShapeDemand{shape(set("CPU", 8), 20)}
			in.Groups = []GroupDemand{group("spread", placement.StrategyStrictSpread, repeat(10, set("CPU", 8))...)}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			if got := launched(plan); got["cpu8"] != 15 {
				t.Fatalf("launches %v, want 10 for the group + 5 for tasks", got)
			}
		},
	}, {
		name: "upscaling_speed scales with running nodes",
		in: func() Input {
			in := input(cpu8)
			in.UpscalingSpeed = 2
			for i := range 4 {
				in.Nodes = append(in.Nodes, busy(string(rune('a'+i)), cpu8))
			}
			in.Shapes = []ShapeDemand{shape(set("CPU", 8), 20)}
			return in
		},
		check: wantLaunches(map[string]int{"cpu8": 8}, "shape:{CPU: 8}"),
	}, {
		name: "a label selector picks the labelled type, though dearer",
		in: func() Input {
			in := input(labelled(cpuType("zone-a", 8, 5), map[string]string{"zone": "a"}),
				labelled(cpuType("zone-b", 8, 1), map[string]string{"zone": "b"}))
			in.Shapes = []ShapeDemand{{Shape: set("CPU", 1), Count: 1, LabelSelector: map[string]string{"zone": "a"}, Reason: pending.NoResources}}
			sel := mustSelector(t, map[string]string{"zone": "a"})
			g := group("pg-a", placement.StrategyPack, set("CPU", 1))
			g.Request.BundleLabelSelectors = []nodelabel.Selector{sel}
			in.Groups = []GroupDemand{g}
			return in
		},
		check: wantLaunches(map[string]int{"zone-a": 1}, "pg-a"),
	}, {
		name: "a label selector no type matches is infeasible",
		in: func() Input {
			in := input(labelled(cpuType("zone-a", 8, 5), map[string]string{"zone": "a"}))
			in.Shapes = []ShapeDemand{{Shape: set("CPU", 1), Count: 1, LabelSelector: map[string]string{"zone": "c"}, Reason: pending.NoResources}}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			if len(plan.Launches) != 0 || len(plan.Infeasible) != 1 || !strings.Contains(plan.Infeasible[0].Reason, "matches no node type") {
				t.Fatalf("plan %+v", plan)
			}
		},
	}, {
		name: "launching nodes absorb demand before new launches",
		in: func() Input {
			in := input(dgx)
			in.Nodes = []Node{launching("i-1", dgx)}
			in.Groups = []GroupDemand{group("pg", placement.StrategyStrictPack, repeat(8, set("GPU", 1))...)}
			return in
		},
		check: wantEmpty,
	}, {
		name: "later demand bin-packs onto nodes planned for earlier demand",
		in: func() Input {
			in := input(dgx)
			in.Groups = []GroupDemand{group("six", placement.StrategyStrictPack, repeat(6, set("GPU", 1))...)}
			in.Shapes = []ShapeDemand{shape(set("GPU", 1), 2)}
			return in
		},
		check: wantLaunches(map[string]int{"dgx8": 1}, "six"),
	}, {
		name: "a CPU-only STRICT_PACK rides the spare CPUs of the GPU node a GPU task launches",
		in: func() Input {
			in := input(cpuType("cpu64", 64, 5.12), gpuType("gpu4", 6.59, 1, 1, 1, 1))
			in.Shapes = []ShapeDemand{shape(set("CPU", 8, "GPU", 4), 1)}
			in.Groups = []GroupDemand{group("cpu-pack", placement.StrategyStrictPack,
				set("CPU", 1, "memory", 6), set("CPU", 1), set("CPU", 3), set("CPU", 1, "memory", 3), set("CPU", 6, "memory", 25))}
			return in
		},
		check: wantLaunches(map[string]int{"gpu4": 1}, "shape:{CPU: 8, GPU: 4}"),
	}, {
		name: "a dearer node for a gang wins when later tasks fit its leftovers",
		in: func() Input {
			in := input(gpuType("island4", 9.66, 4), gpuType("single4", 7.26, 1, 1, 1, 1), gpuType("twin4", 13.35, 4, 4))
			in.Groups = []GroupDemand{group("pack3", placement.StrategyStrictPack,
				set("CPU", 4, "GPU", 1), set("CPU", 4, "GPU", 1), set("CPU", 4, "GPU", 1), set("CPU", 2))}
			in.Shapes = []ShapeDemand{shape(set("CPU", 16, "GPU", 2), 2)}
			return in
		},
		check: wantLaunches(map[string]int{"twin4": 1}, "pack3"),
	}, {
		name: "a STRICT_SPREAD served before the tasks shares its two nodes with them instead of a third node",
		in: func() Input {
			in := input(cpuType("cpu4", 4, 0.17), cpuType("cpu48", 48, 2.29))
			in.Shapes = []ShapeDemand{shape(set("CPU", 24), 2)}
			in.Groups = []GroupDemand{group("spread2", placement.StrategyStrictSpread, set("CPU", 12), set("CPU", 6))}
			return in
		},
		check: wantLaunches(map[string]int{"cpu48": 2}, "spread2"),
	}, {
		name: "a gang of GPU and CPU-only bundles gets a GPU node and a CPU node when cheaper than two GPU nodes",
		in: func() Input {
			in := input(gpuType("gpu1", 3, 1), cpuType("cpu8", 8, 0.5))
			in.Groups = []GroupDemand{group("mixed", placement.StrategyStrictSpread, set("CPU", 8, "GPU", 1), set("CPU", 8))}
			return in
		},
		check: wantLaunches(map[string]int{"gpu1": 1, "cpu8": 1}, "mixed"),
	}, {
		name: "a shape's remainder goes on a smaller type: five tasks on a big node and one on a small one",
		in: func() Input {
			in := input(cpuType("cpu64", 64, 2.57), cpuType("cpu16", 16, 0.87), cpuType("cpu48", 48, 1.77))
			in.Shapes = []ShapeDemand{shape(set("CPU", 12), 6)}
			return in
		},
		check: wantLaunches(map[string]int{"cpu64": 1, "cpu16": 1}, "shape:{CPU: 12}"),
	}, {
		name: "price ties go to the higher priority",
		in: func() Input {
			a, b := cpuType("a", 8, 2), cpuType("b", 8, 2)
			b.Priority = 5
			in := input(a, b)
			in.Shapes = []ShapeDemand{shape(set("CPU", 1), 1)}
			return in
		},
		check: wantLaunches(map[string]int{"b": 1}, "shape:{CPU: 1}"),
	}, {
		name: "an unavailable type is skipped; demand only it holds is Limited",
		in: func() Input {
			in := input(unavailable(dgx), pcie4)
			in.Groups = []GroupDemand{group("pg", placement.StrategyStrictPack, repeat(8, set("GPU", 1))...)}
			in.Shapes = []ShapeDemand{shape(set("GPU", 1), 1)}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			if got := launched(plan); !maps.Equal(got, map[string]int{"pcie4": 1}) {
				t.Fatalf("launches %v", got)
			}
			if len(plan.Infeasible) != 1 || plan.Infeasible[0].For != "pg" || !plan.Infeasible[0].Limited {
				t.Fatalf("infeasible %+v", plan.Infeasible)
			}
		},
	}, {
		name: "MIG profiles: a type holds them when its resources list them",
		in: func() Input {
			migType := NodeType{Name: "a100-mig", Resources: set("CPU", 32, "nvidia.com/mig-1g.5gb", 7), PricePerHour: 4, MaxWorkers: 10}
			in := input(cpu8, migType)
			in.Shapes = []ShapeDemand{shape(set("CPU", 1, "nvidia.com/mig-1g.5gb", 1), 9)}
			in.Groups = []GroupDemand{group("mig-pg", placement.StrategyPack, set("nvidia.com/mig-3g.20gb", 1))}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			if got := launched(plan); !maps.Equal(got, map[string]int{"a100-mig": 2}) {
				t.Fatalf("launches %v", got)
			}
			if len(plan.Infeasible) != 1 || plan.Infeasible[0].Reason != "bundle 0 asks for MIG profile 3g.20gb, which no node type offers" {
				t.Fatalf("infeasible %+v", plan.Infeasible)
			}
		},
	}, {
		name: "nodes above a type's max_workers are terminated, idle ones first",
		in: func() Input {
			capped := withMin(cpu8, 0, 1)
			in := input(capped)
			in.Nodes = []Node{busy("a", capped), running("b", capped, time.Second), busy("c", capped)}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			want := map[string]TerminationCause{"b": CauseMaxWorkers, "a": CauseMaxWorkers}
			if got := terminated(plan); !maps.Equal(got, want) {
				t.Fatalf("terminations %v, want %v", got, want)
			}
		},
	}, {
		name: "an idle node of a type no longer configured is terminated as outdated",
		in: func() Input {
			in := input(cpu8)
			old := running("old", cpuType("retired", 8, 1), time.Second)
			in.Nodes = []Node{old, busy("old-busy", cpuType("retired", 8, 1))}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			want := map[string]TerminationCause{"old": CauseOutdated}
			if got := terminated(plan); !maps.Equal(got, want) {
				t.Fatalf("terminations %v, want %v", got, want)
			}
		},
	}, {
		name: "launches are merged per type and sorted by type name",
		in: func() Input {
			in := input(withMin(cpu8, 1, 10), dgx)
			in.Shapes = []ShapeDemand{shape(set("CPU", 8), 2)}
			in.Groups = []GroupDemand{group("pg", placement.StrategyStrictPack, repeat(8, set("GPU", 1, "CPU", 8))...)}
			return in
		},
		check: func(t *testing.T, plan Plan) {
			want := []Launch{{Type: "cpu8", Count: 2, For: []string{ForMinWorkers, "shape:{CPU: 8}"}}, {Type: "dgx8", Count: 1, For: []string{"pg"}}}
			if len(plan.Launches) != 2 || plan.Launches[0].Type != "cpu8" || plan.Launches[0].Count != 2 ||
				!slices.Equal(plan.Launches[0].For, want[0].For) || plan.Launches[1].Type != "dgx8" {
				t.Fatalf("launches %+v, want %+v", plan.Launches, want)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			plan := Decide(in)
			tc.check(t, plan)
		})
	}
}

func wantEmpty(t *testing.T, plan Plan) {
	t.Helper()
	if len(plan.Launches) != 0 || len(plan.Terminations) != 0 || len(plan.Infeasible) != 0 {
		t.Fatalf("plan %+v, want nothing", plan)
	}
}

// wantLaunches checks the launches by type, that forName is among their demand, and
// that nothing is infeasible.
func wantLaunches(want map[string]int, forName string) func(t *testing.T, plan Plan) {
	return func(t *testing.T, plan Plan) {
		t.Helper()
		if got := launched(plan); !maps.Equal(got, want) {
			t.Fatalf("launches %+v, want %v", plan.Launches, want)
		}
		found := false
		for _, launch := range plan.Launches {
			found = found || slices.Contains(launch.For, forName)
		}
		if !found {
			t.Fatalf("launches %+v: none for %s", plan.Launches, forName)
		}
		if len(plan.Infeasible) != 0 {
			t.Fatalf("infeasible %+v", plan.Infeasible)
		}
	}
}
