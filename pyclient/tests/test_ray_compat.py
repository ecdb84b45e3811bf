"""What Ray scripts in the wild rely on beyond placement groups themselves, against a real
cluster: Ray's implicit node resources, the runtime context, ``ray.util.state``, RAY_ADDRESS,
``init``'s address info, and Ray 2.60's newer ``placement_group`` keywords.
"""

from __future__ import annotations

import json
import socket

import pytest

import raygo
from raygo.util import state
from raygo.util.placement_group import (
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)

from conftest import Cluster, poll, run_driver

RAY_ADDRESS_INFO_KEYS = {"node_ip_address", "redis_address", "object_store_address", "raylet_socket_name",
                         "webui_url", "session_dir", "metrics_export_port", "gcs_address", "address",
                         "dashboard_agent_listen_port", "node_id"}


def head_node_id(cluster: Cluster) -> str:
    return cluster.nodes[0].node_id


def test_nodes_have_rays_implicit_resources(driver: Cluster) -> None:
    nodes = [n for n in raygo.nodes() if n["Alive"]]
    assert len(nodes) == 4
    for node in nodes:
        resources = node["Resources"]
        assert resources["node:127.0.0.1"] == 1.0
        assert resources["object_store_memory"] > 0
        assert ("node:__internal_head__" in resources) == (node["NodeID"] == head_node_id(driver))
        assert node["NodeManagerHostname"] == socket.gethostname()
        assert node["NodeName"] in ("127.0.0.1", "worker-1", "worker-2", "worker-3")
    total = raygo.cluster_resources()
    assert total["node:127.0.0.1"] == 4.0 and total["node:__internal_head__"] == 1.0
    assert total["object_store_memory"] == sum(n["Resources"]["object_store_memory"] for n in nodes)


def test_groups_pinned_with_implicit_resources_are_created(driver: Cluster) -> None:
    # The shapes Ray Train, Tune and vLLM use: a sliver of the node's or the head's resource.
    head = placement_group([{"CPU": 1, "node:__internal_head__": 0.001}, {"CPU": 1}])
    ip = placement_group([{"CPU": 1, f"node:{raygo.util.get_node_ip_address()}": 0.001}] * 2, strategy="STRICT_SPREAD")
    store = placement_group([{"CPU": 1, "object_store_memory": 100 * 1024 * 1024}])
    for pg in (head, ip, store):
        assert raygo.get(pg.ready(), timeout=30) == pg
    assert placement_group_table(head)["bundles_to_node_id"][0] == head_node_id(driver)
    assert len(set(placement_group_table(ip)["bundles_to_node_id"].values())) == 2
    # Only one node is the head: two bundles that each need more than half of it wait.
    two_heads = placement_group([{"node:__internal_head__": 0.6}] * 2)
    assert not two_heads.wait(1)
    assert placement_group_table(two_heads)["stats"]["scheduling_state"] == "INFEASIBLE"


def test_runtime_context(driver: Cluster) -> None:
    context = raygo.get_runtime_context()
    job_id = context.get_job_id()
    assert len(job_id) == 8 and int(job_id, 16) >= 0
    assert context.job_id == raygo.JobID.from_hex(job_id)
    # Every node runs on 127.0.0.1: the driver's node is the head, as Ray picks it.
    assert context.get_node_id() == head_node_id(driver)
    assert context.node_id == raygo.NodeID.from_hex(head_node_id(driver))
    assert len(context.get_worker_id()) == 56 and context.get_worker_id() == context.get_worker_id()
    assert context.get_node_labels()["zone"] == "a"
    assert context.get_node_labels()["ray.io/node-id"] == head_node_id(driver)
    assert context.get() == {"job_id": context.job_id, "node_id": context.node_id, "namespace": context.namespace}
    assert context.get_placement_group_id() is None and context.current_placement_group_id.is_nil()
    assert context.get_task_id() is None and context.get_actor_id() is None
    assert context.get_accelerator_ids()["GPU"] == [] and raygo.get_gpu_ids() == []
    assert raygo.util.get_node_ip_address() == "127.0.0.1"
    raygo.shutdown()
    with pytest.raises(RuntimeError, match="not been initialized"):
        context.get_node_id()


def test_ids() -> None:
    node = raygo.NodeID.from_random()
    assert raygo.NodeID.from_hex(node.hex()) == node and len(node.hex()) == 56
    # As Ray's: what is not an id's hex gives the nil id.
    assert raygo.NodeID.from_hex("zz").is_nil() and raygo.NodeID.from_hex("abcd").is_nil()
    assert raygo.JobID.size() == 4 and raygo.WorkerID.size() == 28 and raygo.ActorID.size() == 16
    assert raygo.NodeID.nil() != raygo.WorkerID.nil()


def test_init_address_info(driver: Cluster) -> None:
    raygo.shutdown()
    context = raygo.init(address=driver.address, namespace="address-info")
    info = context.address_info
    assert RAY_ADDRESS_INFO_KEYS <= set(info)
    assert info["address"] == info["gcs_address"] == driver.address
    assert info["node_ip_address"] == "127.0.0.1" and info["node_id"] == head_node_id(driver)
    assert info["webui_url"] == f"127.0.0.1:{driver.dashboard_port}" and info["session_dir"] is None
    assert context["node_id"] == info["node_id"] and len(context) == len(info)


def test_ray_address_is_read(cluster: Cluster) -> None:
    # Run the way Ray users run scripts: RAY_ADDRESS only.
    code = """
        import raygo
        context = raygo.init()
        print(context.address_info["address"])
    """
    result = run_driver(cluster, code, "RAYGO_ADDRESS=", f"RAY_ADDRESS={cluster.address}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == cluster.address
    # RAYGO_ADDRESS comes first; "auto" reads the variables too.
    code = "import raygo; print(raygo.init(address='auto').address_info['address'])"
    result = run_driver(cluster, code, "RAY_ADDRESS=127.0.0.1:1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == cluster.address
    # A Ray Client address is refused naming where it came from.
    result = run_driver(cluster, "import raygo; raygo.init()", "RAYGO_ADDRESS=", "RAY_ADDRESS=ray://127.0.0.1:10001")
    assert result.returncode != 0 and "RAY_ADDRESS 'ray://127.0.0.1:10001'" in result.stderr


def test_strategy_default_and_newer_keywords(driver: Cluster) -> None:
    default = placement_group([{"CPU": 1}], strategy=None)
    assert placement_group_table(default)["strategy"] == "PACK"
    spread = placement_group([{"CPU": 1}] * 2, topology_strategy={"ray.io/node-id": "STRICT_SPREAD"})
    assert placement_group_table(spread)["strategy"] == "STRICT_SPREAD"
    assert spread.wait(10)
    assert len(set(placement_group_table(spread)["bundles_to_node_id"].values())) == 2
    hinted = placement_group([{"CPU": 1}], strategy="STRICT_PACK", _soft_target_node_id=head_node_id(driver))
    assert hinted.wait(10)


def test_named_handles_drop_zero_amounts_as_ray(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1, "GPU": 0}], name="zeros")
    assert pg.bundle_specs == [{"CPU": 1.0, "GPU": 0.0}]  # as requested
    assert get_placement_group("zeros").bundle_specs == [{"CPU": 1.0}]  # from the table
    assert get_placement_group("zeros").bundle_count == 1


def test_state_api(driver: Cluster) -> None:
    # Other tests add and remove nodes; the removed ones stay listed as DEAD, as in Ray.
    nodes = state.list_nodes(filters=[("state", "=", "alive")])
    assert len(nodes) == 4 and {n.state for n in nodes} == {"ALIVE"}
    assert {n.state for n in state.list_nodes()} <= {"ALIVE", "DEAD"}
    head = state.list_nodes(filters=[("is_head_node", "=", True), ("state", "=", "ALIVE")])
    assert [n.node_id for n in head] == [head_node_id(driver)] and head[0]["node_ip"] == "127.0.0.1"
    assert state.get_node(head_node_id(driver)).resources_total["node:__internal_head__"] == 1.0
    assert len(state.list_nodes(limit=2)) == 2
    with pytest.raises(ValueError, match="filter column"):
        state.list_nodes(filters=[("no_such_column", "=", "x")])
    # The head filters and limits (its /api/v0, as raygo list and the dashboard): a field of
    # its rows beyond Ray's is a column too, and its limit is Ray's.
    assert [n.node_id for n in state.list_nodes(filters=[("is_draining", "=", False), ("is_head_node", "=", True)])] == [
        head_node_id(driver)]
    with pytest.raises(ValueError, match="exceeds the supported limit 10000"):
        state.list_nodes(limit=10001)

    pg = placement_group([{"CPU": 1}, {"CPU": 1}], name="listed")
    assert pg.wait(10)
    row = state.get_placement_group(pg.id.hex())
    assert row is not None and row.name == "listed" and row.state == "CREATED"
    assert row.creator_job_id == raygo.get_runtime_context().get_job_id()
    assert [b["bundle_id"]["bundle_index"] for b in row.bundles] == [0, 1]
    assert all(b["node_id"] for b in row.bundles) and row.stats["scheduling_state"] == "FINISHED"
    listed = state.list_placement_groups(filters=[("name", "=", "LISTED"), ("state", "=", "created")])
    assert [g.placement_group_id for g in listed] == [pg.id.hex()]
    assert json.dumps(row.asdict())  # plain data
    remove_placement_group(pg)
    poll("REMOVED in the state API", lambda: state.get_placement_group(pg.id.hex()).state == "REMOVED")

    assert state.get_placement_group("ff" * 18) is None
    # test_actors.py's actors stay listed (DEAD) on the session cluster; this job has none.
    job_id = raygo.get_runtime_context().get_job_id()
    assert state.list_actors(filters=[("job_id", "=", job_id)]) == []
    # The session cluster holds more than the default limit of 100 jobs (and may of actors).
    assert state.summarize_actors()["cluster"]["total_actors"] == len(state.list_actors(limit=10000))
    assert [j.status for j in state.list_jobs(filters=[("job_id", "=", job_id)])] == ["RUNNING"]
    with pytest.raises(state.RayStateApiException, match="task table"):
        state.summarize_tasks()
    with pytest.raises(state.RayStateApiException, match="connected to"):
        state.list_nodes(address="127.0.0.1:1")
