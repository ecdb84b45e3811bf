"""Shaped like Ray Train with ScalingConfig(placement_strategy="STRICT_SPREAD") and with
"SPREAD": one worker per node, then a group too large for the cluster that Train waits on."""

from compat_lib import connect, finish, node_pattern, placement_group, placement_group_table, record, remove_placement_group, ray

connect("compat-train-spread")
pg = placement_group([{"CPU": 1}] * 4, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=60)
record("strict_spread", node_pattern(pg))
remove_placement_group(pg)
pg = placement_group([{"CPU": 3}] * 4, strategy="SPREAD")
ray.get(pg.ready(), timeout=60)
record("spread_3cpu", sorted(node_pattern(pg)))
remove_placement_group(pg)
# More workers than nodes under STRICT_SPREAD: Train's wait times out.
pg = placement_group([{"CPU": 1}] * 5, strategy="STRICT_SPREAD")
ready, _ = ray.wait([pg.ready()], timeout=3)
record("too_many_ready", len(ready))
record("too_many_state", placement_group_table(pg)["state"])
remove_placement_group(pg)
finish()
