"""Shaped like vLLM's data-parallel launcher: one STRICT_PACK group per DP rank, each pinned
to a node through node:<ip> (all nodes here share 127.0.0.1), created together and waited on
with ray.wait; the ranks that do not fit wait."""

from compat_lib import connect, finish, placement_group, placement_group_table, record, remove_placement_group, ray

connect("compat-vllm-dp")
nodes = [n for n in ray.nodes() if n["Alive"]]
ips = sorted({n["NodeManagerAddress"] for n in nodes})
record("node_ips", ips)
dp_size, per_rank = 5, 3  # 5 ranks of 3 CPUs: 4 fit, one per node
groups = [placement_group([{"CPU": 1.0, f"node:{ips[0]}": 0.001}] + [{"CPU": 1.0}] * (per_rank - 1),
                          strategy="STRICT_PACK", name=f"dp_rank_{rank}") for rank in range(dp_size)]
ready, not_ready = ray.wait([pg.ready() for pg in groups], num_returns=dp_size, timeout=15)
record("ready_ranks", len(ready))
record("waiting_ranks", len(not_ready))
nodes_used = {placement_group_table(pg)["bundles_to_node_id"][0] for pg in groups
              if placement_group_table(pg)["state"] == "CREATED"}
record("distinct_nodes", len(nodes_used))
for pg in groups:
    remove_placement_group(pg)
finish()
