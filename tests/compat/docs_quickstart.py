"""Ray docs, "Placement Groups" (doc_code/placement_group_example.py): create, wait, the
pending group, an actor scheduled to the group, a second actor on bundle 0, and removal,
with the example's actors kept. The compat cluster has no GPUs, so {"CPU": 1} stands in for
the example's {"CPU": 1, "GPU": 1} bundle and the second actor asks num_cpus=0 without
num_gpus=1 (it still shares bundle 0 with the first, as the example's does)."""

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
    wait_until,
)

connect("compat-docs-quickstart")
# Reserve a placement group of 1 bundle that reserves 1 CPU.
pg = placement_group([{"CPU": 1}])
# Wait until placement group is created.
record("get_ready", ray.get(pg.ready(), timeout=10) == pg)
# You can also use ray.wait.
ready, unready = ray.wait([pg.ready()], timeout=10)
record("ray_wait", [len(ready), len(unready)])
# You can look at placement group states using this API.
row = placement_group_table(pg)
record("table_state", row["state"])
record("table_bundles", row["bundles"])
record("table_strategy", row["strategy"])
# Cannot create this placement group because no node has {"GPU": 2}.
pending_pg = placement_group([{"CPU": 1}, {"GPU": 2}])
# This raises the timeout exception!
outcome("pending_get_times_out", lambda: ray.get(pending_pg.ready(), timeout=5))
record("pending_state", placement_group_table(pending_pg)["state"])


@ray.remote(num_cpus=1)
class Actor:
    def __init__(self):
        pass

    def ready(self):
        pass


# Create an actor to a placement group.
actor = Actor.options(
    scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg,
    )
).remote()

# Verify the actor is scheduled.
record("actor_ready", ray.get(actor.ready.remote(), timeout=10))


@ray.remote(num_cpus=0)
class Actor:  # noqa: F811 (the example redefines it)
    def __init__(self):
        pass

    def ready(self):
        pass


# Create the second actor on the first bundle of index 0.
actor2 = Actor.options(
    scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg,
        placement_group_bundle_index=0,
    )
).remote()

# Verify that the second actor is scheduled.
record("actor2_ready", ray.get(actor2.ready.remote(), timeout=10))
# The bundle's one CPU is the first actor's: a third CPU actor in it cannot start.
actor3 = Actor.options(num_cpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(
    placement_group=pg, placement_group_bundle_index=0)).remote()
outcome("bundle_full_times_out", lambda: ray.get(actor3.ready.remote(), timeout=3))

# This API is asynchronous.
remove_placement_group(pg)
# Wait until placement group is killed.
record("removed", wait_until("REMOVED", lambda: placement_group_table(pg)["state"] == "REMOVED"))
record("removed_state", placement_group_table(pg)["state"])
remove_placement_group(pending_pg)
finish()
