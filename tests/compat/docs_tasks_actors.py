"""Ray docs, "Placement Groups": scheduling tasks and actors to a placement group, with the
tasks and actors kept (the compat cluster has no GPUs, so CPU bundles stand in for
{"CPU": 1, "GPU": 1}), plus what a script sees of their errors."""

import time

from compat_lib import (
    PlacementGroupSchedulingStrategy,
    connect,
    finish,
    outcome,
    placement_group,
    placement_group_table,
    ray,
    record,
    remove_placement_group,
)

connect("compat-docs-tasks-actors")
pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
record("get_ready", ray.get(pg.ready(), timeout=10) == pg)
row = placement_group_table(pg)


@ray.remote(num_cpus=1)
class Actor:
    def __init__(self):
        self.calls = 0

    def ready(self):
        pass

    def node(self):
        self.calls += 1
        return ray.get_runtime_context().get_node_id(), self.calls

    def fail(self):
        raise ValueError("actor method failed")


@ray.remote(num_cpus=1)
def where():
    return ray.get_runtime_context().get_node_id()


@ray.remote
def fail():
    raise KeyError("task failed")


# Create an actor to a placement group.
actor = Actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg)).remote()
# Verify the actor is scheduled.
record("actor_ready", ray.get(actor.ready.remote(), timeout=30))
# An actor and a task in each bundle run on that bundle's node.
in_bundle = {}
for index in range(2):
    strategy = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=index)
    task_node = ray.get(where.options(scheduling_strategy=strategy, num_cpus=0).remote(), timeout=30)
    in_bundle[f"task_{index}"] = task_node == row["bundles_to_node_id"][index]
record("in_bundle", in_bundle)
record("actor_calls_in_order", [ray.get(actor.node.remote(), timeout=30)[1] for _ in range(3)])
# A task that fits no bundle is refused when it is submitted.
outcome("too_big_for_bundle", lambda: where.options(
    num_cpus=2, scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=0)).remote())
# memory= is the logical "memory" resource in bytes ("memory corresponds to memory as used in
# ray.remote"): it fits a bundle that reserves it, and more than the bundle has is refused.
mem_pg = placement_group([{"CPU": 1, "memory": 2**20}])
ray.get(mem_pg.ready(), timeout=30)
mem_strategy = PlacementGroupSchedulingStrategy(placement_group=mem_pg, placement_group_bundle_index=0)
outcome("memory_in_bundle", lambda: ray.get(where.options(memory=2**20, scheduling_strategy=mem_strategy).remote(), timeout=30))
outcome("memory_too_big_for_bundle", lambda: where.options(memory=2**21, scheduling_strategy=mem_strategy).remote())
outcome("memory_in_resources", lambda: where.options(resources={"memory": 1}).remote())
remove_placement_group(mem_pg)
# Exceptions: a RayTaskError that is also the exception's class.
try:
    ray.get(fail.remote(), timeout=30)
except Exception as err:  # noqa: BLE001
    record("task_error", [isinstance(err, ray.exceptions.RayTaskError), isinstance(err, KeyError)])
try:
    ray.get(actor.fail.remote(), timeout=30)
except Exception as err:  # noqa: BLE001
    record("actor_error", [isinstance(err, ray.exceptions.RayTaskError), isinstance(err, ValueError)])
# Removing the group kills the actor in it (Ray kills it after remove_placement_group
# returns, so a call may still be answered first: ask until one fails, a bounded number of times).
remove_placement_group(pg)
died = None
for _ in range(50):
    try:
        ray.get(actor.ready.remote(), timeout=30)
    except Exception as err:  # noqa: BLE001
        died = isinstance(err, ray.exceptions.RayActorError)
        break
    time.sleep(0.2)
record("actor_after_remove", died)
finish()
