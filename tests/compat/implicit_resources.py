"""Ray's implicit node resources: node:<ip> on every node, node:__internal_head__ on the
head, object_store_memory; in ray.nodes(), the cluster totals, and groups that ask for them."""

from compat_lib import connect, finish, node_pattern, placement_group, placement_group_table, record, remove_placement_group, ray, wait_until

connect("compat-implicit")
nodes = [n for n in ray.nodes() if n["Alive"]]
record("resource_names", sorted(sorted(k for k in n["Resources"] if k != "memory") for n in nodes))
record("node_ip_amounts", sorted(n["Resources"]["node:127.0.0.1"] for n in nodes))
record("object_store_per_node", sorted(n["Resources"]["object_store_memory"] for n in nodes))
total = ray.cluster_resources()
record("totals", {k: v for k, v in total.items() if k.startswith("node:") or k == "object_store_memory"})
head = next(n["NodeID"] for n in nodes if "node:__internal_head__" in n["Resources"])
record("hostname_set", all(n["NodeManagerHostname"] for n in nodes))
record("hostname_same", len({n["NodeManagerHostname"] for n in nodes}))
cases = {
    "head": [{"CPU": 1, "node:__internal_head__": 0.01}],
    "ip": [{"CPU": 1, "node:127.0.0.1": 0.01}] * 4,
    "object_store": [{"object_store_memory": 50 * 1024 * 1024}, {"object_store_memory": 50 * 1024 * 1024}],
}
for name, bundles in cases.items():
    pg = placement_group(bundles, strategy="SPREAD" if name == "ip" else "PACK")
    record(f"{name}_ready", ray.get(pg.ready(), timeout=30) == pg)
    if name == "head":
        record("head_bundle_on_head", placement_group_table(pg)["bundles_to_node_id"][0] == head)
    remove_placement_group(pg)
# The reserved head resource shows up as used while held.
pg = placement_group([{"node:__internal_head__": 0.5}])
ray.get(pg.ready(), timeout=30)
record("head_available_while_held", wait_until("head resource held", lambda: ray.available_resources().get("node:__internal_head__") == 0.5))
remove_placement_group(pg)
# More than a node has stays pending.
pg = placement_group([{"node:127.0.0.1": 2}])
record("too_much_wait", pg.wait(2))
record("too_much_state", placement_group_table(pg)["state"])
record("too_much_nodes", node_pattern(pg))
remove_placement_group(pg)
pg = placement_group([{"object_store_memory": 200 * 1024 * 1024}])
record("store_too_big_wait", pg.wait(2))
remove_placement_group(pg)
finish()
