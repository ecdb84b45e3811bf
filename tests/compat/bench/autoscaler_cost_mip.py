"""The integer optimum of the autoscaler cost benchmark's demand sets (make bench-ray),
with HiGHS's MIP solver (highspy, tests/compat/requirements-bench.txt).

    autoscaler_cost_mip.py SETS_JSON PLANS_JSON --first 200 --time-limit 10

Reads Ray's plans from PLANS_JSON and writes it back with an "optimum" list: for each
of the first sets, node counts per type, HiGHS's model status, the incumbent's cost and
the best dual bound.

The model, for one set (empty cluster, every demand pending):
  - y[t,k] in {0,1}: instance k of node type t is launched; k < K[t], y[t,k] >= y[t,k+1]
    (instances of a type are interchangeable);
  - tasks and the bundles of PACK and SPREAD groups are free (those strategies are best
    effort): n[s,t,k] >= 0 integer instances of shape s on instance (t,k), summing to
    the shape's count;
  - a STRICT_SPREAD group: x[g,s,t,k] in {0,1}, each bundle on one instance, at most
    one of the group's bundles per instance;
  - a STRICT_PACK group: all its bundles on one instance (their sum as one shape) and,
    when it asks for GPUs, in one NVLink island of it: z[g,t,k,i] in {0,1}, the GPUs of
    the STRICT_PACK groups in island i at most the island's size;
  - per instance and resource, what is placed is at most the type's amount × y[t,k];
  - minimize the sum of price[t] × y[t,k].
K[t] is the fewest of: the type's max_workers; the demand units that fit the type (an
optimal plan launches no empty node); and, when raygo's plan fits (so its cost C bounds
the optimum), floor(C / price[t]). The caps cut no optimal solution.
"""

import argparse
import json
import math
import sys

import highspy

EPS = 1e-9


def fits(shape, resources):
    return all(resources.get(r, 0) + EPS >= v for r, v in shape.items() if v > 0)


def add_shape(total, shape):
    for r, v in shape.items():
        total[r] = total.get(r, 0) + v


def solve(demand_set, time_limit):
    types = demand_set["types"]
    groups = demand_set["groups"] or []
    # Free shapes: tasks and PACK/SPREAD bundles, merged by shape.
    free = {}
    for task in demand_set["tasks"]:
        key = tuple(sorted(task["shape"].items()))
        free[key] = free.get(key, 0) + task["count"]
    spreads, packs = [], []
    for group in groups:
        if group["strategy"] in ("PACK", "SPREAD"):
            for bundle in group["bundles"]:
                key = tuple(sorted(bundle.items()))
                free[key] = free.get(key, 0) + 1
        elif group["strategy"] == "STRICT_SPREAD":
            shapes = {}
            for bundle in group["bundles"]:
                key = tuple(sorted(bundle.items()))
                shapes[key] = shapes.get(key, 0) + 1
            spreads.append(shapes)
        else:
            combined = {}
            for bundle in group["bundles"]:
                add_shape(combined, bundle)
            packs.append(combined)

    def pack_islands(t, shape):
        """Indices of the islands of type t that can hold a STRICT_PACK group's GPUs."""
        gpus = shape.get("GPU", 0)
        return [i for i, size in enumerate(t.get("gpu_islands") or []) if size + EPS >= gpus]

    def pack_fits(t, shape):
        return fits(shape, t["resources"]) and (
            shape.get("GPU", 0) <= 0 or len(pack_islands(t, shape)) > 0
        )

    bound = None
    if demand_set.get("raygo_fits"):
        bound = sum(demand_set["raygo"].get(t["name"], 0) * t["price"] for t in types)
    caps = []
    for t in types:
        units = sum(c for key, c in free.items() if fits(dict(key), t["resources"]))
        units += sum(c for g in spreads for key, c in g.items() if fits(dict(key), t["resources"]))
        units += sum(1 for shape in packs if pack_fits(t, shape))
        cap = min(t["max_workers"], units)
        if bound is not None and t["price"] > 0:
            cap = min(cap, int(math.floor(bound / t["price"] + 1e-6)))
        caps.append(cap)

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", 1e-6)
    h.setOptionValue("threads", 1)
    integer = highspy.HighsVarType.kInteger

    y = {}
    usage = {}  # (t, k, resource) -> list of (coefficient, variable)
    for ti, t in enumerate(types):
        for k in range(caps[ti]):
            y[ti, k] = h.addVariable(lb=0, ub=1, obj=t["price"], type=integer)
            if k > 0:
                h.addConstr(y[ti, k - 1] - y[ti, k] >= 0)

    def use(ti, k, shape, var, times=1.0):
        for r, v in shape.items():
            if v > 0:
                usage.setdefault((ti, k, r), []).append((v * times, var))

    for key, count in free.items():
        shape = dict(key)
        placed = []
        for ti, t in enumerate(types):
            if not fits(shape, t["resources"]):
                continue
            for k in range(caps[ti]):
                n = h.addVariable(lb=0, ub=count, type=integer)
                h.addConstr(n - count * y[ti, k] <= 0)
                use(ti, k, shape, n)
                placed.append(n)
        if not placed:
            return None
        h.addConstr(sum(placed) == count)
    for group in spreads:
        per_instance = {}
        for key, count in group.items():
            shape = dict(key)
            placed = []
            for ti, t in enumerate(types):
                if not fits(shape, t["resources"]):
                    continue
                for k in range(caps[ti]):
                    x = h.addVariable(lb=0, ub=1, type=integer)
                    use(ti, k, shape, x)
                    placed.append(x)
                    per_instance.setdefault((ti, k), []).append(x)
            if not placed:
                return None
            h.addConstr(sum(placed) == count)
        for (ti, k), xs in per_instance.items():
            h.addConstr(sum(xs) - y[ti, k] <= 0)
    island_load = {}  # (t, k, island) -> list of (gpus, variable)
    for shape in packs:
        placed = []
        for ti, t in enumerate(types):
            if not pack_fits(t, shape):
                continue
            islands = pack_islands(t, shape) if shape.get("GPU", 0) > 0 else [None]
            for k in range(caps[ti]):
                for i in islands:
                    z = h.addVariable(lb=0, ub=1, type=integer)
                    use(ti, k, shape, z)
                    placed.append(z)
                    if i is not None:
                        island_load.setdefault((ti, k, i), []).append((shape["GPU"], z))
        if not placed:
            return None
        h.addConstr(sum(placed) == 1)
    for (ti, k, i), terms in island_load.items():
        size = types[ti]["gpu_islands"][i]
        h.addConstr(sum(g * z for g, z in terms) - size * y[ti, k] <= 0)
    for (ti, k, r), terms in usage.items():
        capacity = types[ti]["resources"].get(r, 0)
        h.addConstr(sum(c * v for c, v in terms) - capacity * y[ti, k] <= 0)

    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    bound = info.mip_dual_bound
    entry = {"set": demand_set["id"], "status": status, "counts": None,
             "objective": 0.0, "bound": bound if math.isfinite(bound) else 0.0}
    if info.primal_solution_status == 2:  # a feasible incumbent exists
        values = h.getSolution().col_value
        counts = {}
        for (ti, k), var in y.items():
            if values[var.index] > 0.5:
                counts[types[ti]["name"]] = counts.get(types[ti]["name"], 0) + 1
        entry["counts"] = counts
        entry["objective"] = info.objective_function_value
    return entry


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("sets")
    parser.add_argument("plans")
    parser.add_argument("--first", type=int, default=200)
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args()
    with open(args.sets) as f:
        sets = json.load(f)["sets"][: args.first]
    with open(args.plans) as f:
        plans = json.load(f)
    optimum = []
    for demand_set in sets:
        entry = solve(demand_set, args.time_limit)
        if entry is None:
            entry = {"set": demand_set["id"], "counts": None, "status": "Infeasible",
                     "error": "a demand fits no node type"}
        optimum.append(entry)
    plans["optimum"] = optimum
    with open(args.plans, "w") as f:
        json.dump(plans, f)
    statuses = {}
    for entry in optimum:
        statuses[entry["status"]] = statuses.get(entry["status"], 0) + 1
    print("optimum: %d sets, statuses %s" % (len(optimum), statuses), file=sys.stderr)


if __name__ == "__main__":
    main()
