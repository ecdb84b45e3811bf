"""Ray docs, "Remove Placement Groups (Free Reserved Resources)"."""

from compat_lib import connect, finish, placement_group, placement_group_table, record, ray, wait_until

connect("compat-docs-remove")
free = ray.available_resources()["CPU"]
pg = placement_group([{"CPU": 2}])
ray.get(pg.ready())
record("reserved", wait_until("reserved", lambda: ray.available_resources().get("CPU") == free - 2))
# This API is asynchronous.
ray.util.remove_placement_group(pg)
# Wait until placement group is killed.
record("removed", wait_until("REMOVED", lambda: placement_group_table(pg)["state"] == "REMOVED"))
record("table_state", placement_group_table(pg)["state"])
record("released", wait_until("released", lambda: ray.available_resources().get("CPU") == free))
finish()
