"""Ray docs, "Placement Groups" quickstart (tasks and actors taken out; the compat cluster has
no GPUs, so a custom-free CPU shape stands in for {"CPU": 1, "GPU": 1})."""

from compat_lib import connect, finish, outcome, placement_group, placement_group_table, record, ray

connect("compat-docs-quickstart")
# Reserve a placement group of 1 bundle that reserves 1 CPU.
pg = placement_group([{"CPU": 1}])
# Wait until the placement group is created.
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
finish()
