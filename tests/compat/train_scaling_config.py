"""Shaped like Ray Train's worker group: ScalingConfig(num_workers=3,
resources_per_worker={"CPU": 1}) becomes one PACK group of a trainer bundle and one bundle per
worker; Train then ranks workers by node (world rank, node rank, local rank) from the table."""

from compat_lib import connect, finish, placement_group, placement_group_table, record, remove_placement_group, ray

connect("compat-train")
num_workers, per_worker = 3, {"CPU": 1}
trainer_resources = {"CPU": 1}
bundles = [trainer_resources] + [dict(per_worker) for _ in range(num_workers)]
pg = placement_group(bundles, strategy="PACK")
ray.get(pg.ready(), timeout=100)
row = placement_group_table(pg)
workers = [row["bundles_to_node_id"][i + 1] for i in range(num_workers)]
node_rank = {}
for node in workers:
    node_rank.setdefault(node, len(node_rank))
local = {}
ranks = []
for node in workers:
    ranks.append((node_rank[node], local.get(node, 0)))
    local[node] = local.get(node, 0) + 1
record("nodes_used", len(node_rank))
record("local_world_sizes", sorted(local.values()))
record("ranks", ranks)
record("bundle_count", pg.bundle_count)
record("bundle_specs", pg.bundle_specs)
# Train's address lookup: NodeManagerAddress of each worker's node.
addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
record("worker_addresses", sorted({addresses[node] for node in workers}))
remove_placement_group(pg)
finish()
