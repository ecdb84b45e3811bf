package main

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/raygo-dev/raygo/autoscaler"
)

// raygoPlan is raygo's plan for the set as node counts per type.
func raygoPlan(set DemandSet) (map[string]int, error) {
	in, err := raygoInput(set)
	if err != nil {
		return nil, err
	}
	return launchCounts(autoscaler.Decide(in)), nil
}

// ratioStats gathers raygo's cost ÷ another planner's, set by set.
type ratioStats struct {
	ratios                 []float64
	raygoTotal, otherTotal float64
}

func (s *ratioStats) add(raygo, other float64) {
	s.ratios = append(s.ratios, raygo/other)
	s.raygoTotal += raygo
	s.otherTotal += other
}

func (s *ratioStats) mean() float64 {
	sum := 0.0
	for _, r := range s.ratios {
		sum += r
	}
	return sum / float64(len(s.ratios))
}

func (s *ratioStats) above(limit float64) int {
	n := 0
	for _, r := range s.ratios {
		if r > limit+1e-9 {
			n++
		}
	}
	return n
}

func bench(name string, value float64, unit string) {
	fmt.Printf("BENCH %s %.4g %s\n", name, value, unit)
}

func runEval(args []string) error {
	flags := flag.NewFlagSet("eval", flag.ContinueOnError)
	setsPath := flags.String("sets", "sets.json", "demand sets from gen")
	plansPath := flags.String("plans", "plans.json", "Ray's and the optimum's plans")
	verbose := flags.Bool("v", false, "print every set's costs and every shortfall's reason")
	dearer := flags.Bool("dearer", false, "print every set where raygo's plan costs more than Ray's, with both plans")
	if err := flags.Parse(args); err != nil {
		return err
	}
	var file SetFile
	if err := readJSON(*setsPath, &file); err != nil {
		return err
	}
	var plans Plans
	if err := readJSON(*plansPath, &plans); err != nil {
		return err
	}
	sets := file.Sets
	n := len(sets)

	// raygo's plan is computed again here, not read from gen's output: the figure is
	// of the planner as built now.
	raygo := make([]map[string]int, n)
	raygoFits := make([]bool, n)
	raygoShort := 0
	planMillis := make([]float64, n)
	for i, set := range sets {
		start := time.Now()
		counts, err := raygoPlan(set)
		planMillis[i] = float64(time.Since(start).Microseconds()) / 1000
		if err != nil {
			return fmt.Errorf("set %d: %w", i, err)
		}
		raygo[i] = counts
		if err := checkPlan(set, counts); err != nil {
			raygoShort++
			if *verbose {
				fmt.Printf("set %d raygo %v: %v\n", i, counts, err)
			}
			continue
		}
		raygoFits[i] = true
	}
	bench("autoscaler_raygo_shortfall_pct", 100*float64(raygoShort)/float64(n), "pct")
	// The planner's time per set (the input built and the decision; nearest rank).
	slices.Sort(planMillis)
	bench("autoscaler_cost_plan_p50_ms", planMillis[(n+1)/2-1], "ms")
	bench("autoscaler_cost_plan_p99_ms", planMillis[(n*99+99)/100-1], "ms")
	bench("autoscaler_cost_plan_max_ms", planMillis[n-1], "ms")

	for _, ray := range []struct {
		name    string
		entries []PlanEntry
	}{{"v1", plans.RayV1}, {"v2", plans.RayV2}} {
		if len(ray.entries) != n {
			return fmt.Errorf("ray_%s: %d plans for %d sets", ray.name, len(ray.entries), n)
		}
		var stats ratioStats
		short, refused := 0, 0
		for i, entry := range ray.entries {
			if entry.Error != "" {
				refused++
				short++
				if *verbose {
					fmt.Printf("set %d ray %s raised: %s\n", i, ray.name, entry.Error)
				}
				continue
			}
			if err := checkPlan(sets[i], entry.Counts); err != nil {
				short++
				if *verbose {
					fmt.Printf("set %d ray %s %v: %v\n", i, ray.name, entry.Counts, err)
				}
				continue
			}
			rayCost := cost(sets[i], entry.Counts)
			if !raygoFits[i] || rayCost == 0 {
				continue
			}
			stats.add(cost(sets[i], raygo[i]), rayCost)
			if *dearer && cost(sets[i], raygo[i]) > rayCost+1e-9 {
				fmt.Printf("dearer set %d: raygo %.4f %s; ray %s %.4f %s\n", i, cost(sets[i], raygo[i]),
					sortedCounts(raygo[i]), ray.name, rayCost, sortedCounts(entry.Counts))
			}
			if *verbose {
				fmt.Printf("set %d raygo %.4f ray %s %.4f\n", i, cost(sets[i], raygo[i]), ray.name, rayCost)
			}
		}
		bench("autoscaler_ray_"+ray.name+"_shortfall_pct", 100*float64(short)/float64(n), "pct")
		if refused > 0 {
			bench("autoscaler_ray_"+ray.name+"_raised_sets", float64(refused), "sets")
		}
		if len(stats.ratios) == 0 {
			fmt.Printf("autoscaler_cost_vs_ray_%s not measured: no set where both plans fit\n", ray.name)
			continue
		}
		bench("autoscaler_cost_vs_ray_"+ray.name, stats.mean(), "ratio")
		bench("autoscaler_cost_vs_ray_"+ray.name+"_max", slices.Max(stats.ratios), "ratio")
		bench("autoscaler_cost_vs_ray_"+ray.name+"_total", stats.raygoTotal/stats.otherTotal, "ratio")
		bench("autoscaler_cost_vs_ray_"+ray.name+"_compared", float64(len(stats.ratios)), "sets")
		bench("autoscaler_cost_vs_ray_"+ray.name+"_worse_sets", float64(stats.above(1)), "sets")
		fmt.Printf("goal (ray %s): <= 1.0 on every set: %s; < 0.9 on average: %s\n", ray.name,
			met(stats.above(1) == 0), met(stats.mean() < 0.9))
	}

	evalOptimum(sets, raygo, raygoFits, plans.Optimum, *verbose)
	return nil
}

func evalOptimum(sets []DemandSet, raygo []map[string]int, raygoFits []bool, entries []PlanEntry, verbose bool) {
	if len(entries) == 0 {
		fmt.Println("autoscaler_cost_vs_optimum not measured: no MIP results")
		return
	}
	var stats ratioStats
	unproven, noSolution, checkerMisses := 0, 0, 0
	for _, entry := range entries {
		set := sets[entry.Set]
		if entry.Error != "" || entry.Status == "Infeasible" {
			noSolution++
			if verbose {
				fmt.Printf("set %d optimum: %s %s\n", entry.Set, entry.Status, entry.Error)
			}
			continue
		}
		// Where HiGHS did not prove optimality, the best dual bound stands in for the
		// optimum: the ratio is then an upper bound on the true one.
		denominator := entry.Objective
		if entry.Status != "Optimal" {
			unproven++
			denominator = entry.Bound
		}
		if entry.Counts != nil && checkPlan(set, entry.Counts) != nil {
			// The MIP's plan has a packing; placement's greedy pass did not find it.
			checkerMisses++
			if verbose {
				fmt.Printf("set %d optimum %v: %v\n", entry.Set, entry.Counts, checkPlan(set, entry.Counts))
			}
		}
		if !raygoFits[entry.Set] || denominator <= 0 {
			continue
		}
		stats.add(cost(set, raygo[entry.Set]), denominator)
		if verbose {
			fmt.Printf("set %d raygo %.4f optimum %.4f (%s) raygo %v optimum %v\n", entry.Set,
				cost(set, raygo[entry.Set]), denominator, entry.Status, sortedCounts(raygo[entry.Set]), sortedCounts(entry.Counts))
		}
	}
	bench("autoscaler_optimum_unproven_sets", float64(unproven), "sets")
	if noSolution > 0 {
		bench("autoscaler_optimum_unsolved_sets", float64(noSolution), "sets")
	}
	bench("autoscaler_optimum_placement_misses", float64(checkerMisses), "sets")
	if len(stats.ratios) == 0 {
		fmt.Println("autoscaler_cost_vs_optimum not measured: no set with both a fitting raygo plan and a MIP bound")
		return
	}
	bench("autoscaler_cost_vs_optimum", stats.mean(), "ratio")
	bench("autoscaler_cost_vs_optimum_max", slices.Max(stats.ratios), "ratio")
	bench("autoscaler_cost_vs_optimum_total", stats.raygoTotal/stats.otherTotal, "ratio")
	bench("autoscaler_cost_vs_optimum_compared", float64(len(stats.ratios)), "sets")
	bench("autoscaler_cost_vs_optimum_above_1.05_sets", float64(stats.above(1.05)), "sets")
	fmt.Printf("goal (optimum): <= 1.05 on average: %s\n", met(stats.mean() <= 1.05))
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func sortedCounts(counts map[string]int) string {
	out := ""
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if counts[name] > 0 {
			out += fmt.Sprintf("%s×%d ", name, counts[name])
		}
	}
	return out
}
