"""Ray docs, "Placement Strategy": the examples of each strategy on two-CPU bundles."""

from compat_lib import connect, finish, node_pattern, placement_group, placement_group_table, record, ray

connect("compat-docs-strategies")
# Reserve a placement group of 2 bundles that have to be packed on the same node.
pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_PACK")
ray.get(pg.ready(), timeout=30)
record("strict_pack", node_pattern(pg))
ray.util.remove_placement_group(pg)
# Bundles must go to distinct nodes.
pg = placement_group([{"CPU": 2}, {"CPU": 2}, {"CPU": 2}], strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=30)
record("strict_spread", node_pattern(pg))
ray.util.remove_placement_group(pg)
# PACK: best effort (Ray was seen to split two 2-CPU bundles over two free nodes).
pg = placement_group([{"CPU": 2}, {"CPU": 2}], strategy="PACK")
ray.get(pg.ready(), timeout=30)
record("pack_state", placement_group_table(pg)["state"])
record("pack_strategy", placement_group_table(pg)["strategy"])
ray.util.remove_placement_group(pg)
# SPREAD: best effort over distinct nodes.
pg = placement_group([{"CPU": 1}] * 4, strategy="SPREAD")
ray.get(pg.ready(), timeout=30)
record("spread_created", placement_group_table(pg)["state"])
ray.util.remove_placement_group(pg)
finish()
