"""A walk-through of raygo's placement groups from Python, with Ray's API.

It is a Ray script: with its imports changed from `raygo` to `ray` it runs on Ray too (the
raygo-only keys, such as `bundles_to_node_address`, are read with .get).

    make venv && RAYGO_ADDRESS=127.0.0.1:6380 .venv/bin/python examples/python/placement_groups.py

Needs a running cluster (`bin/raygo start --head`, plus nodes) with a few free CPUs.
"""

import sys

import raygo as ray
from raygo.util.placement_group import (
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from raygo.util.scheduling_strategies import PlacementGroupSchedulingStrategy


def show(pg, title):
    """Prints where each bundle of a created group lives, by node name and raylet address."""
    row = placement_group_table(pg)
    names = {n["NodeID"]: n["NodeName"] + (" (head)" if n.get("IsHeadNode") else "") for n in ray.nodes()}
    print(f"\n{title}: {row['state']} in {row['stats']['end_to_end_creation_latency_ms']:.1f} ms")
    for index, resources in row["bundles"].items():
        node_id = row["bundles_to_node_id"][index]
        address = row.get("bundles_to_node_address", {}).get(index, "")
        print(f"  bundle {index} {resources} -> {names.get(node_id, '?')} ({node_id[:12]}, raylet {address})")
        visible = row.get("bundles_to_cuda_visible_devices", {}).get(index, "")
        if visible:  # raygo only: the bundle's devices, to launch its worker on
            uuids = row["bundles_to_device_uuids"][index]
            print(f"    GPUs {row['bundles_to_gpu_ids'][index]} ({', '.join(u[:12] for u in uuids)}), "
                  f"CUDA_VISIBLE_DEVICES={visible}")
    print(f"  {len(row['bundles'])} bundles on {len(set(row['bundles_to_node_id'].values()))} node(s)")


def main():
    ray.init(namespace="placement-groups-example")
    alive = [n for n in ray.nodes() if n["Alive"]]
    print(f"Connected: {len(alive)} node(s) alive, resources {ray.cluster_resources()}")

    # One group per strategy; each returns once the GCS accepted it, ready() once it is placed.
    spread = min(3, len(alive))
    for strategy in ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"):
        pg = placement_group([{"CPU": 1}] * spread, strategy=strategy)
        ray.get(pg.ready(), timeout=30)
        show(pg, strategy)
        remove_placement_group(pg)

    # GPU bundles, when the cluster has GPUs: the table names each bundle's devices.
    if ray.cluster_resources().get("GPU", 0) >= 4:
        pg = placement_group([{"GPU": 2, "CPU": 1}, {"GPU": 1, "CPU": 1}, {"GPU": 1, "CPU": 1}],
                             strategy="STRICT_PACK")
        ray.get(pg.ready(), timeout=30)
        show(pg, "STRICT_PACK with GPUs")
        remove_placement_group(pg)

    # ray.wait over several groups, and a bundle pinned by label: here the head's node id.
    head = next((n for n in alive if n.get("IsHeadNode")), alive[0])
    pinned = placement_group([{"CPU": 1}], bundle_label_selector=[{"ray.io/node-id": head["NodeID"]}])
    packed = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_PACK")
    ready, not_ready = ray.wait([pinned.ready(), packed.ready()], num_returns=2, timeout=30)
    print(f"\nray.wait: {len(ready)} ready, {len(not_ready)} not ready")
    show(pinned, "pinned to the head node by label")
    strategy = PlacementGroupSchedulingStrategy(packed, placement_group_bundle_index=1)
    print(f"  a task for bundle {strategy.placement_group_bundle_index} of {packed.id.hex()[:12]} "
          f"would run on {placement_group_table(packed)['bundles_to_node_id'][1][:12]}")
    remove_placement_group(pinned)
    remove_placement_group(packed)

    # A group no node can hold today is accepted and waits (PENDING), with its reason.
    big = placement_group([{"CPU": 1000}], strategy="STRICT_PACK")
    if big.wait(timeout_seconds=1):
        sys.exit("a 1000-CPU group was created: expected it to wait")
    try:
        ray.get(big.ready(), timeout=0.5)
    except ray.exceptions.GetTimeoutError:
        print("\nray.get(pg.ready(), timeout=0.5) timed out, as expected")
    row = placement_group_table(big)
    print(f"STRICT_PACK {{CPU: 1000}}: {row['state']} / {row['stats']['scheduling_state']}")
    if row.get("pending_reason"):
        print(f"  {row['pending_reason']}")
    remove_placement_group(big)

    # Bad input is a ValueError before anything reaches the cluster.
    try:
        placement_group([{"CPU": 0}])
    except ValueError as err:
        print(f"\nplacement_group([{{'CPU': 0}}]) -> ValueError: {err}")

    # A named, detached group outlives this driver; another driver finds it by name.
    keeper = placement_group([{"CPU": 1}], name="example-keeper", lifetime="detached")
    assert get_placement_group("example-keeper") == keeper
    print(f"\nnamed detached group example-keeper: {keeper.id.hex()}; removing it")
    remove_placement_group(keeper)
    print(f"  state now {placement_group_table(keeper)['state']}")

    ray.shutdown()
    print("\nDone: every group removed, the driver's job finished.")


if __name__ == "__main__":
    main()
