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

// classInput is randomInput with what class plans take: a STRICT_SPREAD of equal
// bundles (a STRICT_PACK, PACK or SPREAD may mix: half the PACK and SPREAD gangs do),
// some gangs with a label selector.
func classInput(rng *rand.Rand, types []NodeType) Input {
	in := randomInput(rng, types)
	for i := range in.Groups {
		request := &in.Groups[i].Request
		if request.Strategy == placement.StrategyStrictSpread || request.Strategy != placement.StrategyStrictPack && rng.IntN(2) == 0 {
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
// The last 4 seeds give a third of the PACK and SPREAD gangs a trainer's bundle
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

// TestGangsOfUnlikeBundlesArePlannedByClasses: a large input with a PACK or SPREAD gang
// of unlike bundles (a trainer's CPU bundle before its workers' GPU bundles) is still
// planned by classes, and the gang is served whole; a STRICT_SPREAD of unlike bundles
// sends the plan node by node. (TestClassPlanProperties checks such plans' invariants.)
func TestGangsOfUnlikeBundlesArePlannedByClasses(t *testing.T) {
	for _, c := range []struct {
		strategy  placement.Strategy
		byClasses bool
	}{
		{placement.StrategyPack, true},
		{placement.StrategySpread, true},
		{placement.StrategyStrictSpread, false},
	} {
		in := sizedBenchInput(3, 4*minClassDemands, 20)
		g := group("pg-trainer", c.strategy, set("CPU", 1), set("GPU", 1, "CPU", 4), set("GPU", 1, "CPU", 4), set("GPU", 1, "CPU", 4))
		g.Reason = pending.NoResources
		in.Groups = append(in.Groups, g)
		p := greedy(in, newTypeCache(), nil, servingOrder)
		if (p.classes != nil) != c.byClasses {
			t.Errorf("%s: planned by classes %t, want %t", c.strategy, p.classes != nil, c.byClasses)
		}
		if p.served["pg-trainer"] != 1 {
			t.Errorf("%s: the gang is not served", c.strategy)
		}
		for _, inf := range p.plan().Infeasible {
			if inf.For == "pg-trainer" {
				t.Errorf("%s: the gang is reported unheld: %s", c.strategy, inf.Reason)
			}
		}
	}
}
