"""ray.nodes(), ray.cluster_resources(), ray.available_resources() and label selectors."""

from compat_lib import (
    RAY_NODE_KEYS, connect, finish, node_pattern, placement_group, placement_group_table, record,
    remove_placement_group, ray, wait_until,
)

connect("compat-cluster-state")
nodes = [n for n in ray.nodes() if n["Alive"]]
record("alive_nodes", len(nodes))
record("node_keys", sorted(RAY_NODE_KEYS & set().union(*(set(n) for n in nodes))))
record("node_cpus", sorted(n["Resources"]["CPU"] for n in nodes))
record("node_id_label", all(n["Labels"].get("ray.io/node-id") == n["NodeID"] for n in nodes))
record("zones", sorted(n["Labels"].get("zone", "") for n in nodes))
record("node_id_length", sorted({len(n["NodeID"]) for n in nodes}))
total = ray.cluster_resources()
record("cluster_cpus", total["CPU"])
record("has_memory", total.get("memory", 0) > 0)
record("no_gpu_key_without_gpus", "GPU" not in total)
def reserved_cpus(expected):
    """CPUs in use compared with the start, once they reach expected (or after 30 s).

    Relative, because Ray now and then keeps a CPU of an earlier script's group for a while.
    """
    wait_until(f"{expected} CPUs in use", lambda: free_at_start - ray.available_resources().get("CPU", 0) == expected)
    return free_at_start - ray.available_resources().get("CPU", 0)


free_at_start = ray.available_resources().get("CPU", 0)
pg = placement_group([{"CPU": 2}, {"CPU": 1.5}], strategy="SPREAD")
ray.get(pg.ready(), timeout=60)
record("reserved_by_the_group", reserved_cpus(3.5))
remove_placement_group(pg)
record("reserved_after_removal", reserved_cpus(0.0))

# Per-bundle label selectors.
zone_of = {n["NodeID"]: n["Labels"].get("zone") for n in nodes}
pg = placement_group([{"CPU": 1}, {"CPU": 1}, {"CPU": 1}], strategy="SPREAD",
                     bundle_label_selector=[{"zone": "a"}, {"zone": "b"}, {"zone": "in(c)"}])
ray.get(pg.ready(), timeout=60)
row = placement_group_table(pg)
record("selector_zones", [zone_of[row["bundles_to_node_id"][i]] for i in range(3)])
remove_placement_group(pg)
target = next(n for n in nodes if n["Labels"].get("zone") == "b")
pg = placement_group([{"CPU": 1}], bundle_label_selector=[{"ray.io/node-id": target["NodeID"]}])
ray.get(pg.ready(), timeout=60)
record("node_id_selector", placement_group_table(pg)["bundles_to_node_id"][0] == target["NodeID"])
record("node_id_selector_pattern", node_pattern(pg))
remove_placement_group(pg)

finish()
