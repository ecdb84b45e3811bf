"""Ray docs, "Placement Groups" → "[Advanced] Child Tasks and Actors": a parent scheduled
with placement_group_capture_child_tasks=True runs its child in the group although the
child names no strategy; a child with PlacementGroupSchedulingStrategy(placement_group=None)
leaves the group. Ray's example runs on a 2-CPU cluster, where the second child cannot start
(its get times out); the compat cluster has room outside the group, so the script records
where each child ran instead, and what get_current_placement_group() says at each level."""

from compat_lib import (
    PlacementGroupSchedulingStrategy,
    connect,
    finish,
    get_current_placement_group,
    placement_group,
    placement_group_table,
    ray,
    record,
    remove_placement_group,
)

connect("compat-docs-capture-child-tasks")

# Create a placement group.
pg = placement_group([{"CPU": 2}])
ray.get(pg.ready(), timeout=30)
node = placement_group_table(pg)["bundles_to_node_id"][0]


def where():
    context = ray.get_runtime_context()
    current = get_current_placement_group()
    return {
        "in_group": context.get_placement_group_id() == pg.id.hex(),
        "on_bundle_node": context.get_node_id() == node,
        "current_is_group": current is not None and current.id == pg.id,
        "captures": context.should_capture_child_tasks_in_placement_group,
    }


@ray.remote(num_cpus=1)
def child():
    import time

    time.sleep(0.5)
    return where()


@ray.remote(num_cpus=1)
def parent():
    # The child task is scheduled to the same placement group as its parent,
    # although it didn't specify the PlacementGroupSchedulingStrategy.
    return where(), ray.get(child.remote())


# Since the child and parent use 1 CPU each, the placement group
# bundle {"CPU": 2} is fully occupied.
record("captured", ray.get(
    parent.options(
        scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_capture_child_tasks=True
        )
    ).remote(),
    timeout=60,
))


@ray.remote
def parent_opting_out():
    return where(), ray.get(
        child.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=None)
        ).remote()
    )


# The child leaves the group (on Ray's 2-CPU cluster it could not be scheduled at all).
record("opted_out", ray.get(
    parent_opting_out.options(
        scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_capture_child_tasks=True
        )
    ).remote(),
    timeout=60,
))


@ray.remote(num_cpus=1)
def parent_without_capture():
    return where(), ray.get(child.remote())


# Without capture the child runs outside the group.
record("not_captured", ray.get(
    parent_without_capture.options(scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg)).remote(),
    timeout=60,
))
record("driver_current_group", get_current_placement_group() is None)
remove_placement_group(pg)
finish()
