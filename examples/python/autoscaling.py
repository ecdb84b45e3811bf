"""The autoscaler from Python, with Ray's API: a gang no node can hold makes the cluster grow.

    bin/raygo up examples/autoscaler/local-gpu.yaml --yes
    RAYGO_ADDRESS=127.0.0.1:6380 .venv/bin/python examples/python/autoscaling.py
    bin/raygo down examples/autoscaler/local-gpu.yaml --yes

It is a Ray script: with its imports changed from `raygo` to `ray` it runs on a Ray cluster
whose autoscaler has an 8-GPU node type.
"""

import sys
import time

import raygo as ray
from raygo.autoscaler.sdk import request_resources
from raygo.util.placement_group import placement_group, placement_group_table, remove_placement_group


def gpu_nodes():
    return sorted(n["NodeName"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU", 0) > 0)


def main():
    ray.init(address="auto")
    print("GPU nodes before:", gpu_nodes() or "none")

    # Eight GPUs in one NVLink island: only a new 8-GPU node can hold it.
    start = time.monotonic()
    pg = placement_group([{"GPU": 1, "CPU": 1}] * 8, strategy="STRICT_PACK", lifetime="detached")
    if not pg.wait(120):
        print("the group was not placed within 120 s:", placement_group_table(pg).get("pending_reason"))
        return 1
    row = placement_group_table(pg)
    nodes = set(row["bundles_to_node_id"].values())
    print(f"STRICT_PACK of 8 GPUs CREATED after {time.monotonic() - start:.1f} s on {len(nodes)} node(s)")
    print("GPU nodes now:", gpu_nodes())

    # request_resources keeps room for 8 more CPUs, running work counting toward it.
    request_resources(bundles=[{"CPU": 4}, {"CPU": 4}])
    print("asked the autoscaler to keep room for two 4-CPU bundles; `raygo status` shows it")

    remove_placement_group(pg)
    request_resources()  # clears it
    print("group removed and request cleared: idle nodes go after their idle timeout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
