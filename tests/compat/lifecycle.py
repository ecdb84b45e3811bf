"""ready / wait / get, PENDING -> CREATED -> REMOVED, and what removal releases."""

from compat_lib import (
    PlacementGroup, connect, finish, get_current_placement_group, node_pattern, outcome, placement_group,
    placement_group_table, record, remove_placement_group, ray, wait_until,
)

connect("compat-lifecycle")
total_cpus = ray.cluster_resources()["CPU"]
record("cluster_cpus", total_cpus)

pg = placement_group([{"CPU": 1}, {"CPU": 1, "GPU": 0}])
got = ray.get(pg.ready(), timeout=60)
record("get_ready_returns_the_group", got == pg and got.id == pg.id)
record("bundle_specs", pg.bundle_specs)
record("bundle_count", pg.bundle_count)
record("wait_created", pg.wait(5))
record("state_created", placement_group_table(pg)["state"])
record("get_list", [g == pg for g in ray.get([pg.ready(), pg.ready()], timeout=30)])
ref = pg.ready()
record("ray_wait_created", [len(part) for part in ray.wait([ref], timeout=30)])
record("cpus_reserved", wait_until("reservation", lambda: ray.available_resources().get("CPU") == total_cpus - 2))
record("current_placement_group", get_current_placement_group() is None)

# A group no node can ever hold.
big = placement_group([{"CPU": 1000}])
record("pending_wait", big.wait(1))
outcome("pending_get", lambda: ray.get(big.ready(), timeout=0.5))
record("pending_ray_wait", [len(part) for part in ray.wait([big.ready()], timeout=0.5)])
record("pending_state", placement_group_table(big)["state"])
record("pending_scheduling_state", wait_until(
    "a scheduling verdict",
    lambda: placement_group_table(big)["stats"]["scheduling_state"] not in ("QUEUED", "SCHEDULING_STARTED") and
    placement_group_table(big)["stats"]["scheduling_state"]))
record("pending_nodes", node_pattern(big))

# Removal.
pending_ref = big.ready()
remove_placement_group(big)
outcome("ready_after_remove_of_pending", lambda: ray.get(pending_ref, timeout=10))
remove_placement_group(pg)
record("removed_state", wait_until("REMOVED", lambda: placement_group_table(pg)["state"] == "REMOVED"))
record("removed_scheduling_state", placement_group_table(pg)["stats"]["scheduling_state"])
outcome("remove_twice", lambda: remove_placement_group(pg))
outcome("ready_after_remove", lambda: ray.get(pg.ready(), timeout=10))
outcome("wait_after_remove", lambda: pg.wait(2))
record("cpus_released", wait_until("release", lambda: ray.available_resources().get("CPU") == total_cpus))
stranger = PlacementGroup(ray.PlacementGroupID.from_random())
outcome("remove_unknown", lambda: remove_placement_group(stranger))
record("table_unknown", placement_group_table(stranger))
outcome("wait_unknown", lambda: stranger.wait(1), normalize=lambda ok: {"returned": ok})
outcome("remove_none", lambda: remove_placement_group(None))

finish()
