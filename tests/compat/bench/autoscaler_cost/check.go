package main

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/raygo-dev/raygo/autoscaler"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// nodeType is the set's type as raygo's planner reads it.
func nodeType(spec TypeSpec) (autoscaler.NodeType, error) {
	total, err := resources.SetFromFloat(spec.Resources)
	if err != nil {
		return autoscaler.NodeType{}, fmt.Errorf("type %s: %w", spec.Name, err)
	}
	return autoscaler.NodeType{Name: spec.Name, Resources: total, GPUIslands: spec.GPUIslands,
		PricePerHour: spec.Price, MaxWorkers: spec.MaxWorkers, IdleTimeout: 5 * time.Minute}, nil
}

func groupRequest(group GroupSpec) (placement.Request, error) {
	request := placement.Request{Strategy: group.Strategy}
	for i, wire := range group.Bundles {
		bundle, err := resources.SetFromFloat(wire)
		if err != nil {
			return placement.Request{}, fmt.Errorf("group %s bundle %d: %w", group.ID, i, err)
		}
		request.Bundles = append(request.Bundles, bundle)
	}
	return request, nil
}

// raygoInput is the set as raygo's planner sees it: a cluster of only its head node,
// which offers no resources (num_cpus=0, the usual head of an autoscaling cluster),
// every demand pending for lack of resources. upscaling_speed is lifted (as it is for
// Ray's planners) so the plan is the whole answer to the demand, not a first step: the
// launch budget for tasks is max(5, speed × running nodes), and the head is the one
// running node.
func raygoInput(set DemandSet) (autoscaler.Input, error) {
	head := autoscaler.NewNode("head", &autoscaler.NodeType{Name: "head"})
	in := autoscaler.Input{MaxUnavailable: 1, UpscalingSpeed: 1e6,
		Nodes: []autoscaler.Node{{ID: "head", Head: true, State: autoscaler.NodeRunning, Placement: head}}}
	for _, spec := range set.Types {
		t, err := nodeType(spec)
		if err != nil {
			return autoscaler.Input{}, err
		}
		in.Types = append(in.Types, t)
		in.MaxWorkers += spec.MaxWorkers
	}
	for _, task := range set.Tasks {
		shape, err := resources.SetFromFloat(task.Shape)
		if err != nil {
			return autoscaler.Input{}, fmt.Errorf("task shape %v: %w", task.Shape, err)
		}
		in.Shapes = append(in.Shapes, autoscaler.ShapeDemand{Shape: shape, Count: task.Count, Reason: pending.NoResources})
	}
	for _, group := range set.Groups {
		request, err := groupRequest(group)
		if err != nil {
			return autoscaler.Input{}, err
		}
		in.Groups = append(in.Groups, autoscaler.GroupDemand{ID: group.ID, Request: request, Reason: pending.NoResources})
	}
	return in, nil
}

// launchCounts is a plan's launches as type → count.
func launchCounts(plan autoscaler.Plan) map[string]int {
	counts := make(map[string]int)
	for _, launch := range plan.Launches {
		counts[launch.Type] += launch.Count
	}
	return counts
}

// checkPlan places all of the set's demand on fresh nodes of the plan's counts with
// raygo's placement core, and returns nil when everything fits, or why not. Groups
// are placed whole (placement.Schedule, then Snapshot.Reserve before the next), tasks
// one by one. Placement is greedy and online, so whether demand fits can depend on the
// order it arrives in; the plan fits when any of these orders places everything:
//  1. groups (STRICT_PACK, STRICT_SPREAD, PACK, SPREAD), then tasks;
//  2. tasks, then groups: the tasks' owners were first;
//  3. the strict groups, then tasks, then PACK and SPREAD groups: the bundles with
//     the least freedom first;
//  4. groups and tasks together, by GPUs then CPUs asked (a group by its total),
//     most first: first fit decreasing, as placement's scoring is best fit (raygo's
//     planner serves demand in about this order);
//  5. the strict groups, then the rest first fit decreasing;
//  6. first fit decreasing by CPUs, then GPUs;
//  7. shuffledOrders shuffles of 4, seeded by the set's id;
//
// each on the nodes in type order and in reverse. Within tasks, GPU tasks and larger shapes go first. The error is the first order's.
func checkPlan(set DemandSet, counts map[string]int) error {
	for name, count := range counts {
		if count > 0 && !slices.ContainsFunc(set.Types, func(t TypeSpec) bool { return t.Name == name }) {
			return fmt.Errorf("plan launches unknown type %s", name)
		}
	}
	// Placement breaks ties by node id: the nodes are tried in type order and in
	// reverse type order (ids prefixed with their rank).
	var forward, reverse []placement.Node
	total := 0
	for _, spec := range set.Types {
		total += counts[spec.Name]
	}
	for _, spec := range set.Types {
		t, err := nodeType(spec)
		if err != nil {
			return err
		}
		for i := range counts[spec.Name] {
			rank := len(forward)
			forward = append(forward, autoscaler.NewNode(placement.NodeID(fmt.Sprintf("%04d-%s-%d", rank, spec.Name, i)), &t))
			reverse = append(reverse, autoscaler.NewNode(placement.NodeID(fmt.Sprintf("%04d-%s-%d", total-1-rank, spec.Name, i)), &t))
		}
	}
	rank := map[placement.Strategy]int{placement.StrategyStrictPack: 0, placement.StrategyStrictSpread: 1,
		placement.StrategyPack: 2, placement.StrategySpread: 3}
	groups := slices.Clone(set.Groups)
	slices.SortStableFunc(groups, func(a, b GroupSpec) int { return cmp.Compare(rank[a.Strategy], rank[b.Strategy]) })
	strict := slices.DeleteFunc(slices.Clone(groups), func(g GroupSpec) bool { return rank[g.Strategy] > 1 })
	loose := slices.DeleteFunc(slices.Clone(groups), func(g GroupSpec) bool { return rank[g.Strategy] <= 1 })
	tasks := slices.Clone(set.Tasks)
	slices.SortStableFunc(tasks, func(a, b TaskSpec) int {
		return cmp.Or(cmp.Compare(b.Shape["GPU"], a.Shape["GPU"]), cmp.Compare(b.Shape["CPU"], a.Shape["CPU"]),
			cmp.Compare(b.Shape["memory"], a.Shape["memory"]))
	})
	orders := [][]step{
		{{groups: groups}, {tasks: tasks}},
		{{tasks: tasks}, {groups: groups}},
		{{groups: strict}, {tasks: tasks}, {groups: loose}},
		decreasing(groups, tasks),
		append([]step{{groups: strict}}, decreasing(loose, tasks)...),
		decreasingBy(groups, tasks, true),
	}
	// Then shuffles of the first-fit-decreasing order, seeded by the set: orders no rule
	// above names still find packings the greedy passes miss.
	rng := rand.New(rand.NewPCG(uint64(set.ID), 0xc4ec))
	for range shuffledOrders {
		order := decreasing(groups, tasks)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		orders = append(orders, order)
	}
	var first error
	for _, nodes := range [][]placement.Node{forward, reverse} {
		for _, order := range orders {
			err := placeAll(nodes, order)
			if err == nil {
				return nil
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// shuffledOrders is how many shuffled orders checkPlan tries after the named ones.
const shuffledOrders = 24

// step is some of the set's demand, placed in slice order.
type step struct {
	groups []GroupSpec
	tasks  []TaskSpec
}

func placeAll(nodes []placement.Node, order []step) error {
	snapshot, err := placement.NewSnapshot(nodes)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	for _, step := range order {
		for _, group := range step.groups {
			request, err := groupRequest(group)
			if err != nil {
				return err
			}
			if err := place(snapshot, request); err != nil {
				return fmt.Errorf("group %s (%s): %w", group.ID, group.Strategy, err)
			}
		}
		for _, task := range step.tasks {
			shape, err := resources.SetFromFloat(task.Shape)
			if err != nil {
				return err
			}
			for i := range task.Count {
				if err := place(snapshot, placement.Request{Bundles: []resources.Set{shape}}); err != nil {
					return fmt.Errorf("task %v (%d of %d): %w", task.Shape, i+1, task.Count, err)
				}
			}
		}
	}
	return nil
}

func place(snapshot *placement.Snapshot, request placement.Request) error {
	plan, err := placement.Schedule(snapshot, request)
	if err != nil {
		return err
	}
	return snapshot.Reserve(request.Bundles, plan)
}

// decreasing is the order of all the set's groups and tasks by GPUs, then CPUs asked
// (a group by its bundles' total), most first.
func decreasing(groups []GroupSpec, tasks []TaskSpec) []step {
	return decreasingBy(groups, tasks, false)
}

// decreasingBy is decreasing, by CPUs first when cpusFirst.
func decreasingBy(groups []GroupSpec, tasks []TaskSpec, cpusFirst bool) []step {
	type unit struct {
		gpus, cpus float64
		step       step
	}
	var units []unit
	for _, group := range groups {
		u := unit{step: step{groups: []GroupSpec{group}}}
		for _, bundle := range group.Bundles {
			u.gpus += bundle["GPU"]
			u.cpus += bundle["CPU"]
		}
		units = append(units, u)
	}
	for _, task := range tasks {
		units = append(units, unit{gpus: task.Shape["GPU"], cpus: task.Shape["CPU"], step: step{tasks: []TaskSpec{task}}})
	}
	slices.SortStableFunc(units, func(a, b unit) int {
		if cpusFirst {
			return cmp.Or(cmp.Compare(b.cpus, a.cpus), cmp.Compare(b.gpus, a.gpus))
		}
		return cmp.Or(cmp.Compare(b.gpus, a.gpus), cmp.Compare(b.cpus, a.cpus))
	})
	order := make([]step, len(units))
	for i, u := range units {
		order[i] = u.step
	}
	return order
}
