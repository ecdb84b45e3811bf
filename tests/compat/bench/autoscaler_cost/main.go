// Command autoscaler_cost measures what raygo's autoscaler plan costs against Ray's two
// planners and against the integer optimum, on seeded demand sets (make bench-ray).
//
//	autoscaler_cost gen -sets 1000 -seed 1 -out sets.json
//	autoscaler_cost eval -sets sets.json -plans plans.json
//
// gen writes the demand sets (node types with resources, NVLink islands, prices and
// max_workers; pending tasks by shape and placement groups of all four strategies),
// each with raygo's plan. Python steps then add Ray's plans (autoscaler_cost_ray.py,
// Ray's planners called in process) and the MIP optimum (autoscaler_cost_mip.py,
// HiGHS) to a plans file; eval checks every plan by placing all the set's demand on
// its nodes with raygo's placement core and prints `BENCH <name> <value> <unit>` lines,
// among them the planner's time per set; eval -dearer also lists each set where raygo's
// plan costs more than Ray's, with both plans' costs and node counts.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	case "gen":
		err = runGen(os.Args[2:])
	case "eval":
		err = runEval(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q, want gen or eval (-h says more)", os.Args[1])
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the mode printed its flags
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "autoscaler_cost:", err)
		os.Exit(1)
	}
}

const usage = `usage: autoscaler_cost MODE [flags]   (MODE -h lists a mode's flags)

  gen    write seeded demand sets, each with raygo's plan
  eval   check raygo's, Ray's and the optimum's plans of the sets and print BENCH lines
`

func runGen(args []string) error {
	flags := flag.NewFlagSet("gen", flag.ContinueOnError)
	count := flags.Int("sets", 1000, "number of demand sets")
	seed := flags.Int64("seed", 1, "generator seed")
	out := flags.String("out", "sets.json", "output file")
	if err := flags.Parse(args); err != nil {
		return err
	}
	file := SetFile{Seed: *seed, Sets: generate(*count, *seed)}
	for i := range file.Sets {
		counts, err := raygoPlan(file.Sets[i])
		if err != nil {
			return fmt.Errorf("set %d: %w", i, err)
		}
		file.Sets[i].Raygo = counts
		file.Sets[i].RaygoFits = checkPlan(file.Sets[i], counts) == nil
	}
	return writeJSON(*out, file)
}

func writeJSON(path string, value any) error {
	data, err := json.MarshalIndent(value, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func readJSON(path string, value any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, value); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
