"""Where GPU bundles live: a node with 8 simulated H100s (`raygo start --gpu-sim dgx-h100`)
joins the session cluster for the test, and the table says which GPUs each bundle holds.
Skipped with a bin/raygo that cannot simulate GPUs.
"""

from __future__ import annotations

import subprocess
from typing import Dict, Iterator

import pytest

import raygo
from raygo.util import placement_group, placement_group_table

from conftest import RAYGO_BIN, Cluster, Node, nodes_by_id, poll


def _gpu_sim_supported() -> bool:
    if not RAYGO_BIN.exists():
        return False
    help_text = subprocess.run([str(RAYGO_BIN), "start", "--help"], capture_output=True, text=True, check=False)
    return "dgx-h100" in help_text.stdout + help_text.stderr


pytestmark = pytest.mark.skipif(not _gpu_sim_supported(), reason="bin/raygo has no --gpu-sim dgx-h100")


@pytest.fixture
def gpu_node(driver: Cluster) -> Iterator[Node]:
    node = driver.add_node("--num-cpus", "16", "--gpu-sim", "dgx-h100", "--node-name", "gpu-1")
    try:
        poll("the GPU node in the node table", lambda: node.node_id in nodes_by_id())
        yield node
    finally:
        driver.remove_node(node)
        poll("the GPU node to be dead", lambda: node.node_id not in nodes_by_id())


def test_gpu_bundles_name_their_devices(gpu_node: Node) -> None:
    node = nodes_by_id()[gpu_node.node_id]
    assert node["Resources"]["GPU"] == 8.0
    gpus: Dict[int, Dict[str, object]] = {gpu["index"]: gpu for gpu in node["GPUs"]}  # type: ignore[index]
    assert sorted(gpus) == list(range(8))
    assert node["Labels"]["ray.io/accelerator-type"] == "H100"

    pg = placement_group([{"GPU": 2, "CPU": 2}, {"GPU": 1, "CPU": 1}, {"CPU": 1}], strategy="STRICT_PACK")
    assert raygo.get(pg.ready(), timeout=20) is pg
    row = placement_group_table(pg)
    assert set(row["bundles_to_node_id"].values()) == {gpu_node.node_id}
    assert row["bundles_to_node_address"][0] == node["RayletAddress"]

    held = []
    for index, count in ((0, 2), (1, 1)):
        ids = row["bundles_to_gpu_ids"][index]
        assert len(ids) == count and all(i in gpus for i in ids)
        assert row["bundles_to_device_uuids"][index] == [gpus[i]["uuid"] for i in ids]
        visible = row["bundles_to_cuda_visible_devices"][index].split(",")
        assert visible == [str(i) for i in ids] or visible == [gpus[i]["uuid"] for i in ids]
        held += ids
    assert len(set(held)) == 3, "two bundles were given the same GPU"
    # The CPU-only bundle holds no device.
    assert row["bundles_to_gpu_ids"][2] == []
    assert row["bundles_to_device_uuids"][2] == []
    assert row["bundles_to_cuda_visible_devices"][2] == ""
    poll("the GPUs reserved", lambda: raygo.available_resources().get("GPU") == 5.0)
