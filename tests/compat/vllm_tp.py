"""Shaped like vLLM's initialize_ray_cluster for tensor parallelism (CPUs stand in for
GPUs): one bundle per worker, the first pinned to the driver's node with node:<ip>, PACK;
then vLLM's checks of the group (bundles per node, the driver node among them)."""

from compat_lib import (connect, finish, get_current_placement_group, placement_group, placement_group_table,
                        record, remove_placement_group, ray)

connect("compat-vllm-tp")
world_size = 4
record("current_group_is_none", get_current_placement_group() is None)
current_ip = ray.util.get_node_ip_address()
specs = [{"CPU": 1.0} for _ in range(world_size)]
specs[0][f"node:{current_ip}"] = 0.001
pg = ray.util.placement_group(specs, strategy="PACK")
# vLLM's _wait_until_pg_ready: ray.wait with a timeout, then ray.get.
ready, _ = ray.wait([pg.ready()], timeout=30)
record("ready", len(ready))
ray.get(pg.ready(), timeout=10)
bundle_specs = pg.bundle_specs
record("bundle_specs", bundle_specs)
record("device_bundles", sum(1 for spec in bundle_specs if spec.get("CPU")))
row = placement_group_table(pg)
node_ids = [row["bundles_to_node_id"][i] for i in range(world_size)]
record("one_node", len(set(node_ids)))
ip_of = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
record("driver_node_in_group", current_ip in {ip_of[n] for n in node_ids})
record("runtime_pg_id", ray.get_runtime_context().get_placement_group_id())
remove_placement_group(pg)
finish()
