"""Shaped like Ray Train's and Ray Data's controllers, which stay on the head node: a bundle
pinned with node:__internal_head__, and one pinned to the driver's own node by its IP."""

from compat_lib import connect, finish, node_pattern, placement_group, placement_group_table, record, remove_placement_group, ray

connect("compat-train-head")
head = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and "node:__internal_head__" in n["Resources"])
pg = placement_group([{"CPU": 1, "node:__internal_head__": 0.001}, {"CPU": 2}, {"CPU": 2}], strategy="PACK")
ray.get(pg.ready(), timeout=30)
row = placement_group_table(pg)
record("controller_on_head", row["bundles_to_node_id"][0] == head)
record("bundles", row["bundles"])
remove_placement_group(pg)
ip = ray.util.get_node_ip_address()
record("driver_ip", ip)
pg = placement_group([{"CPU": 1, f"node:{ip}": 0.001}], strategy="STRICT_PACK")
ray.get(pg.ready(), timeout=30)
record("pinned_by_ip", placement_group_table(pg)["state"])
remove_placement_group(pg)
# Asking for the whole head resource twice: only one node is the head.
pg = placement_group([{"node:__internal_head__": 1}, {"node:__internal_head__": 1}])
record("two_heads_wait", pg.wait(2))
record("two_heads_nodes", node_pattern(pg))
remove_placement_group(pg)
finish()
