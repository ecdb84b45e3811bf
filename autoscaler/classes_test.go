package autoscaler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/placement"
)

// planWith runs the greedy pass (no cost search) with plans of more than
// classesFrom demands made by classes.
func planWith(t *testing.T, in Input, classesFrom int) (Plan, *planner) {
	t.Helper()
	old := minClassDemands
	minClassDemands = classesFrom
	defer func() { minClassDemands = old }()
	p := greedy(in, newTypeCache(), nil, servingOrder)
	return p.plan(), p
}

// classInput is randomInput with half the gangs other than STRICT_PACK made of one
// bundle repeated (the others mix, as every STRICT_PACK may), some gangs with a label
// selector.
func classInput(rng *rand.Rand, types []NodeType) Input {
	in := randomInput(rng, types)
	for i := range in.Groups {
		request := &in.Groups[i].Request
		if request.Strategy != placement.StrategyStrictPack && rng.IntN(2) == 0 {
			request.Bundles = repeat(len(request.Bundles), request.Bundles[0])
		}
		if rng.IntN(4) == 0 {
			request.BundleLabelSelectors = make([]nodelabel.Selector, len(request.Bundles))
			for b := range request.BundleLabelSelectors {
				request.BundleLabelSelectors[b] = nodelabel.Selector{{Key: "zone", Values: []string{"a"}}}
			}
		}
	}
	return in
}

// TestClassPlanProperties: plans made by classes keep DESIGN.md's invariants (limits,
// terminations, no launch for infeasible or held work, the groups launched for fit the
// planned nodes by placement), and are deterministic.
func TestClassPlanProperties(t *testing.T) {
	byClass := 0
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 11))
		in := classInput(rng, randomTypes(rng, 2+rng.IntN(5)))
		plan, p := planWith(t, in, 0)
		if p.classes != nil {
			byClass++
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			checkLimits(t, in, plan)
			checkTerminations(t, in, plan, p)
			checkNoLaunchForInfeasibleOrHeld(t, in, plan)
			checkPlannedGroupsFit(t, in, plan)
			if again, _ := planWith(t, in, 0); !reflect.DeepEqual(again, plan) {
				t.Fatalf("not deterministic:\n%+v\n%+v", plan, again)
			}
		})
	}
	if byClass < 200 {
		t.Fatalf("only %d of 400 inputs were planned by classes", byClass)
	}
}

// TestClassPlanAgreesWithRows: on seeded medium inputs (the benchmark's mix, 300 to
// 800 demands), the plan made by classes serves every group the node-by-node plan
// serves, reports the same demand unheld, serves every shape it serves and at least as
// many task and actor instances in all (how they share the upscaling budget and the
// leftovers of the nodes launched for groups differs; fewer only when it costs less and
// spent as much of the budget), and costs at most 0.5% more.
//
// The last 4 seeds give a third of the gangs other than STRICT_PACK a trainer's bundle
// (withTrainerBundles): gangs of unlike bundles, planned by classes one run of equal
// bundles after the other.
func TestClassPlanAgreesWithRows(t *testing.T) {
	for seed := range uint64(12) {
		in := sizedBenchInput(seed, 300+int(seed%8)*70, 20+int(seed%8)*5)
		if seed >= 8 {
			in = withTrainerBundles(in)
		}
		rowsPlan, rows := planWith(t, in, math.MaxInt)
		classPlan, classes := planWith(t, in, 0)
		if rows.classes != nil || classes.classes == nil {
			t.Fatal("the two plans were not made the two ways")
		}
		rowsInstances, classInstances := 0, 0
		for name, served := range rows.served {
			if strings.HasPrefix(name, shapePrefix) {
				rowsInstances += served
				classInstances += classes.served[name]
			}
			if served > 0 && classes.served[name] == 0 || !strings.HasPrefix(name, shapePrefix) && classes.served[name] < served {
				t.Errorf("seed %d: %s: %d served by rows, %d by classes", seed, name, served, classes.served[name])
			}
		}
		if unheld(rowsPlan) != unheld(classPlan) {
			t.Errorf("seed %d: unheld by rows:\n%s\nby classes:\n%s", seed, unheld(rowsPlan), unheld(classPlan))
		}
		_, rowsCost := launchTotals(in, rowsPlan)
		_, classCost := launchTotals(in, classPlan)
		// Fewer instances only on the leftovers of fewer nodes: a cheaper plan that
		// spent as much of the upscaling budget on tasks and actors.
		if classInstances < rowsInstances && (classCost >= rowsCost || classes.shapeBudget > rows.shapeBudget) {
			t.Errorf("seed %d: %d task and actor instances served by rows, %d by classes", seed, rowsInstances, classInstances)
		}
		t.Logf("seed %d: %d demands, cost %.2f by rows, %.2f by classes (%+.2f%%), %d and %d instances",
			seed, rows.demands, rowsCost, classCost, 100*(classCost/rowsCost-1), rowsInstances, classInstances)
		if classCost > rowsCost*1.005 {
			t.Errorf("seed %d: classes cost %.2f, rows %.2f", seed, classCost, rowsCost)
		}
	}
}

// unheld lists the plan's unheld demand, sorted.
func unheld(plan Plan) string {
	var lines []string
	for _, inf := range plan.Infeasible {
		lines = append(lines, fmt.Sprintf("%s: %s (limited %t)", inf.For, inf.Reason, inf.Limited))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestGangsOfUnlikeBundlesArePlannedByClasses: a large input with a gang of unlike
// bundles (a trainer's CPU bundle before its workers' GPU bundles) is still planned by
// classes, and the gang is served whole. (TestClassPlanProperties checks such plans'
// invariants.)
func TestGangsOfUnlikeBundlesArePlannedByClasses(t *testing.T) {
	for _, strategy := range []placement.Strategy{placement.StrategyPack, placement.StrategySpread, placement.StrategyStrictSpread} {
		in := sizedBenchInput(3, 4*minClassDemands, 20)
		g := group("pg-trainer", strategy, set("CPU", 1), set("GPU", 1, "CPU", 4), set("GPU", 1, "CPU", 4), set("GPU", 1, "CPU", 4))
		g.Reason = pending.NoResources
		in.Groups = append(in.Groups, g)
		p := greedy(in, newTypeCache(), nil, servingOrder)
		if p.classes == nil {
			t.Errorf("%s: not planned by classes", strategy)
		}
		if p.served["pg-trainer"] != 1 {
			t.Errorf("%s: the gang is not served", strategy)
		}
		for _, inf := range p.plan().Infeasible {
			if inf.For == "pg-trainer" {
				t.Errorf("%s: the gang is reported unheld: %s", strategy, inf.Reason)
			}
		}
	}
}

// TestAStrictSpreadOfUnlikeBundlesByClassesPutsEachOnANodeOfItsOwn: one idle node could
// hold both bundles of a STRICT_SPREAD; planned by classes, one of them gets a new node.
func TestAStrictSpreadOfUnlikeBundlesByClassesPutsEachOnANodeOfItsOwn(t *testing.T) {
	cpu := cpuType("cpu", 8, 1)
	in := Input{Types: []NodeType{cpu}, Nodes: []Node{running("idle", cpu, 0)}, MaxWorkers: 10, MaxUnavailable: 1}
	g := group("pg", placement.StrategyStrictSpread, set("CPU", 1), set("CPU", 2))
	g.Reason = pending.NoResources
	in.Groups = append(in.Groups, g)
	plan, p := planWith(t, in, 0)
	if p.classes == nil {
		t.Fatal("not planned by classes")
	}
	if nodes, _ := launchTotals(in, plan); nodes != 1 {
		t.Errorf("%d nodes launched, want 1: %+v", nodes, plan.Launches)
	}
	checkPlannedGroupsFit(t, in, plan)
}
