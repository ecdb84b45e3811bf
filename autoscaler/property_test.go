package autoscaler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

var strategies = []placement.Strategy{placement.StrategyPack, placement.StrategySpread,
	placement.StrategyStrictPack, placement.StrategyStrictSpread}

// randomTypes draws a small catalog of node types: CPU types and GPU types of various
// island layouts, some with limits, some unavailable.
func randomTypes(rng *rand.Rand, count int) []NodeType {
	layouts := [][]int{{8}, {4}, {2, 2, 2, 2}, {1}, {4, 4}}
	var types []NodeType
	for i := range count {
		var t NodeType
		if rng.IntN(3) == 0 {
			t = cpuType(fmt.Sprintf("cpu-%d", i), 4<<rng.IntN(5), float64(1+rng.IntN(10)))
		} else {
			t = gpuType(fmt.Sprintf("gpu-%d", i), float64(1+rng.IntN(40)), layouts[rng.IntN(len(layouts))]...)
		}
		if rng.IntN(4) == 0 {
			t.PricePerHour = 0
		}
		t.Priority = rng.IntN(3)
		t.MinWorkers = rng.IntN(2)
		t.MaxWorkers = t.MinWorkers + rng.IntN(6)
		t.IdleTimeout = time.Duration(rng.IntN(10)) * time.Minute
		t.Unavailable = rng.IntN(8) == 0
		if rng.IntN(4) == 0 {
			t.Labels = map[string]string{"zone": []string{"a", "b"}[rng.IntN(2)]}
		}
		types = append(types, t)
	}
	return types
}

var bundleCatalog = []resources.Set{
	set("CPU", 1), set("CPU", 4), set("CPU", 16), set("GPU", 1), set("GPU", 1, "CPU", 8),
	set("GPU", 2, "CPU", 4), set("GPU", 0.5, "CPU", 1), set("GPU", 4), set("CPU", 200),
}

// randomInput draws a cluster (head, workers of known, unknown and retired types,
// running or launching, busy or idle) with pending groups, shapes and a constraint.
func randomInput(rng *rand.Rand, types []NodeType) Input {
	in := Input{Types: types, MaxUnavailable: 1 + rng.IntN(3), UpscalingSpeed: float64(rng.IntN(3))}
	head := busy("head", cpuType("head", 8, 0))
	head.Head = true
	in.Nodes = append(in.Nodes, head)
	mins := 0
	for _, t := range types {
		mins += t.MinWorkers
	}
	unknown := 0
	for i := range rng.IntN(10) {
		t := types[rng.IntN(len(types))]
		id := fmt.Sprintf("n%02d", i)
		var node Node
		switch rng.IntN(4) {
		case 0:
			node = launching(id, t)
		case 1:
			node = busy(id, t)
		default:
			node = running(id, t, time.Duration(rng.IntN(20))*time.Minute)
		}
		switch rng.IntN(10) {
		case 0:
			node = running(id, t, time.Duration(rng.IntN(20))*time.Minute)
			node.Type = ""
			unknown++
		case 1:
			node = running(id, t, time.Duration(rng.IntN(20))*time.Minute)
			node.Type = "retired"
		}
		in.Nodes = append(in.Nodes, node)
	}
	in.MaxWorkers = unknown + mins + rng.IntN(15)
	for i := range rng.IntN(6) {
		bundles := make([]resources.Set, 1+rng.IntN(8))
		for b := range bundles {
			bundles[b] = bundleCatalog[rng.IntN(len(bundleCatalog))]
		}
		g := group(fmt.Sprintf("pg%d", i), strategies[rng.IntN(len(strategies))], bundles...)
		g.Reason = pending.All[rng.IntN(len(pending.All))]
		in.Groups = append(in.Groups, g)
	}
	for range rng.IntN(5) {
		s := shape(bundleCatalog[rng.IntN(len(bundleCatalog))], 1+rng.IntN(6))
		s.Reason = pending.All[rng.IntN(len(pending.All))]
		if rng.IntN(5) == 0 {
			s.LabelSelector = map[string]string{"zone": "a"}
		}
		in.Shapes = append(in.Shapes, s)
	}
	if rng.IntN(4) == 0 {
		for range 1 + rng.IntN(3) {
			in.Constraint = append(in.Constraint, bundleCatalog[rng.IntN(len(bundleCatalog)-1)])
		}
	}
	return in
}

func TestDecideProperties(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 7))
		in := randomInput(rng, randomTypes(rng, 2+rng.IntN(5)))
		plan, p := decide(in)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			checkLimits(t, in, plan)
			checkTerminations(t, in, plan, p)
			checkNoLaunchForInfeasibleOrHeld(t, in, plan)
			checkPlannedGroupsFit(t, in, plan)
			if again := Decide(in); !reflect.DeepEqual(again, plan) {
				t.Fatalf("not deterministic:\n%+v\n%+v", plan, again)
			}
		})
	}
}

// after counts worker nodes per type once the plan is applied.
func after(in Input, plan Plan) (perType map[string]int, workers int) {
	gone := terminated(plan)
	perType = make(map[string]int)
	for _, node := range in.Nodes {
		if node.Head {
			continue
		}
		if _, ok := gone[node.ID]; !ok {
			perType[node.Type]++
			workers++
		}
	}
	for _, launch := range plan.Launches {
		perType[launch.Type] += launch.Count
		workers += launch.Count
	}
	return perType, workers
}

func checkLimits(t *testing.T, in Input, plan Plan) {
	t.Helper()
	perType, workers := after(in, plan)
	for _, nt := range in.Types {
		if perType[nt.Name] > nt.MaxWorkers {
			t.Fatalf("type %s: %d nodes after the plan, max_workers %d: %+v", nt.Name, perType[nt.Name], nt.MaxWorkers, plan)
		}
	}
	if workers > in.MaxWorkers {
		t.Fatalf("%d workers after the plan, max_workers %d: %+v", workers, in.MaxWorkers, plan)
	}
	for _, launch := range plan.Launches {
		for _, nt := range in.Types {
			if nt.Name == launch.Type && nt.Unavailable {
				t.Fatalf("launched unavailable type %s", nt.Name)
			}
		}
	}
}

func checkTerminations(t *testing.T, in Input, plan Plan, p *planner) {
	t.Helper()
	perType, _ := after(in, plan)
	byID := make(map[string]Node)
	for _, node := range in.Nodes {
		byID[node.ID] = node
	}
	for _, termination := range plan.Terminations {
		node := byID[termination.NodeID]
		if node.Head || node.Type == "" {
			t.Fatalf("terminated %+v (head or unknown type)", node)
		}
		if p.pool.pinned[placement.NodeID(node.ID)] {
			t.Fatalf("terminated %s, on which the plan places demand", node.ID)
		}
		for _, nt := range in.Types {
			if nt.Name == node.Type && perType[nt.Name] < nt.MinWorkers {
				t.Fatalf("terminated %s: type %s left with %d < min_workers %d", node.ID, nt.Name, perType[nt.Name], nt.MinWorkers)
			}
		}
	}
	voluntary := 0
	for _, termination := range plan.Terminations {
		if termination.Cause != CauseMaxWorkers {
			voluntary++
			// Voluntary scale-down takes only running nodes the GCS reports idle: never
			// one that holds bundles of a running gang.
			if node := byID[termination.NodeID]; node.State != NodeRunning || node.IdleFor <= 0 {
				t.Fatalf("%s terminated %+v, which is not an idle running node", termination.Cause, node)
			}
		}
	}
	if voluntary > max(1, in.MaxUnavailable) {
		t.Fatalf("%d voluntary terminations, max_unavailable %d", voluntary, in.MaxUnavailable)
	}
}

func checkNoLaunchForInfeasibleOrHeld(t *testing.T, in Input, plan Plan) {
	t.Helper()
	forNames := make(map[string]bool)
	for _, launch := range plan.Launches {
		for _, name := range launch.For {
			forNames[name] = true
		}
	}
	for _, inf := range plan.Infeasible {
		// request_resources is one name for many bundles: some may launch while
		// another is infeasible.
		if !inf.Limited && forNames[inf.For] && inf.For != ForRequestResources {
			t.Fatalf("launched for infeasible %s (%s)", inf.For, inf.Reason)
		}
	}
	for _, g := range in.Groups {
		if g.Reason.HeldByAdmission() && forNames[g.ID] {
			t.Fatalf("launched for %s, held by admission (%s)", g.ID, g.Reason)
		}
	}
}

// checkPlannedGroupsFit schedules, with placement itself, every group the plan launches
// for, in the planner's order, on the nodes the cluster would have: running nodes as
// they are, launching nodes and the planned ones empty. All must fit together.
func checkPlannedGroupsFit(t *testing.T, in Input, plan Plan) {
	t.Helper()
	types := make(map[string]*NodeType)
	for i := range in.Types {
		types[in.Types[i].Name] = &in.Types[i]
	}
	gone := terminated(plan)
	var rows []placement.Node
	for _, node := range in.Nodes {
		if _, ok := gone[node.ID]; ok {
			continue
		}
		switch {
		case node.State == NodeRunning:
			row := node.Placement
			row.Total, row.Available = countedMIG(row.Total), countedMIG(row.Available)
			rows = append(rows, row)
		case types[node.Type] != nil:
			rows = append(rows, NewNode(placement.NodeID(node.ID), types[node.Type]))
		}
	}
	launchedFor := make(map[string]bool)
	for _, launch := range plan.Launches {
		for i := range launch.Count {
			rows = append(rows, NewNode(placement.NodeID(fmt.Sprintf("check-%s-%d", launch.Type, i)), types[launch.Type]))
		}
		for _, name := range launch.For {
			launchedFor[name] = true
		}
	}
	snapshot, err := placement.NewSnapshot(rows)
	if err != nil {
		t.Fatal(err)
	}
	// In the order the groups came, the order the GCS tries pending groups in.
	groups, _, _ := collectDemand(in)
	for _, d := range arrivalOrder(in, groups) {
		if !launchedFor[d.name] {
			continue
		}
		placed, err := placement.Schedule(snapshot, d.request)
		if err == nil {
			err = snapshot.Reserve(d.request.Bundles, placed)
		}
		if err != nil {
			t.Fatalf("group %s launched for does not fit existing+launching+planned nodes: %v\nplan %+v", d.name, err, plan)
		}
	}
}
