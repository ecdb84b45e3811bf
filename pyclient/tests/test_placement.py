"""Where bundles land, per strategy and label selector, and what the table says about it.

The session cluster: head (zone a) and three raylets (zones b, c, c; the last one spot),
4 CPUs each.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Tuple

import pytest

import raygo
from raygo.util import placement_group, placement_group_table, remove_placement_group
from raygo._proto import placement_group_pb2 as pg_pb2
from raygo.exceptions import TaskPlacementGroupRemoved
from raygo.util.placement_group import PlacementGroup

from conftest import Cluster, nodes_by_id, poll, table_state


def placed_nodes(pg: PlacementGroup) -> List[str]:
    row = placement_group_table(pg)
    return [row["bundles_to_node_id"][i] for i in range(len(row["bundles"]))]


def ready(pg: PlacementGroup) -> PlacementGroup:
    got = raygo.get(pg.ready(), timeout=20)
    assert got is pg
    return got


def test_pack_keeps_bundles_on_one_node_when_one_fits(driver: Cluster) -> None:
    pg = ready(placement_group([{"CPU": 2}, {"CPU": 2}], strategy="PACK"))
    assert len(set(placed_nodes(pg))) == 1


def test_pack_spills_over_when_no_node_fits_all(driver: Cluster) -> None:
    pg = ready(placement_group([{"CPU": 3}, {"CPU": 3}], strategy="PACK"))
    assert len(set(placed_nodes(pg))) == 2


def test_strict_pack_uses_one_node(driver: Cluster) -> None:
    pg = ready(placement_group([{"CPU": 1, "memory": 50 * 1024 * 1024}, {"CPU": 3}], strategy="STRICT_PACK"))
    assert len(set(placed_nodes(pg))) == 1


def test_strict_pack_that_fits_no_single_node_waits(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 3}, {"CPU": 3}], strategy="STRICT_PACK")
    assert not pg.wait(1)
    row = placement_group_table(pg)
    assert row["state"] == "PENDING"
    assert row["bundles_to_node_id"] == {0: "", 1: ""}
    assert row["pending_reason"]


def test_spread_uses_distinct_nodes(driver: Cluster) -> None:
    pg = ready(placement_group([{"CPU": 1}] * 3, strategy="SPREAD"))
    assert len(set(placed_nodes(pg))) == 3


def test_spread_reuses_nodes_when_they_run_out(driver: Cluster) -> None:
    pg = ready(placement_group([{"CPU": 1}] * 6, strategy="SPREAD"))
    assert len(set(placed_nodes(pg))) == 4


def test_strict_spread_uses_distinct_nodes(driver: Cluster) -> None:
    pg = ready(placement_group([{"CPU": 2}] * 4, strategy="STRICT_SPREAD"))
    assert len(set(placed_nodes(pg))) == 4


def test_strict_spread_with_more_bundles_than_nodes_waits(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1}] * 5, strategy="STRICT_SPREAD")
    ref = pg.ready()
    ready_refs, not_ready = raygo.wait([ref], timeout=1)
    assert (ready_refs, not_ready) == ([], [ref])
    row = placement_group_table(pg)
    assert row["state"] == "PENDING"
    assert row["stats"]["scheduling_state"] in ("INFEASIBLE", "NO_RESOURCES")


def test_bundle_label_selector(driver: Cluster) -> None:
    pg = ready(placement_group(
        [{"CPU": 1}, {"CPU": 1}, {"CPU": 1}],
        strategy="SPREAD",
        bundle_label_selector=[{"zone": "a"}, {"market": "spot"}, {"zone": "in(b,c)", "market": "!spot"}],
    ))
    nodes = nodes_by_id()
    labels = [nodes[node_id]["Labels"] for node_id in placed_nodes(pg)]
    assert labels[0]["zone"] == "a"
    assert labels[1].get("market") == "spot"
    assert labels[2]["zone"] in ("b", "c") and labels[2].get("market") != "spot"


def test_selector_on_the_node_id_label(driver: Cluster) -> None:
    target = next(n for n in raygo.nodes() if n["Alive"] and n["NodeName"] == "worker-2")
    pg = ready(placement_group([{"CPU": 1}], bundle_label_selector=[{"ray.io/node-id": target["NodeID"]}]))
    assert placed_nodes(pg) == [target["NodeID"]]


def test_table_row_has_rays_keys_and_where_bundles_live(driver: Cluster) -> None:
    bundles = [{"CPU": 2, "GPU": 0}, {"CPU": 1}]
    pg = placement_group(bundles, strategy="SPREAD", name="table-row")
    ready(pg)
    row = placement_group_table(pg)
    assert row["placement_group_id"] == pg.id.hex()
    assert row["name"] == "table-row"
    assert row["strategy"] == "SPREAD"
    assert row["state"] == "CREATED"
    assert row["bundles"] == {0: {"CPU": 2.0}, 1: {"CPU": 1.0}}  # zero amounts left out, as Ray
    assert set(row["stats"]) == {"end_to_end_creation_latency_ms", "scheduling_latency_ms",
                                 "scheduling_attempt", "highest_retry_delay_ms", "scheduling_state"}
    assert row["stats"]["scheduling_state"] == "FINISHED"
    assert row["stats"]["scheduling_attempt"] >= 1
    nodes = nodes_by_id()
    for index in (0, 1):
        node = nodes[row["bundles_to_node_id"][index]]
        assert row["bundles_to_node_address"][index] == node["RayletAddress"]
        # CPU-only bundles: no GPUs.
        assert row["bundles_to_gpu_ids"][index] == []
        assert row["bundles_to_device_uuids"][index] == []
        assert row["bundles_to_cuda_visible_devices"][index] == ""
    assert row["is_detached"] is False
    # The whole table is keyed by id.
    assert placement_group_table()[pg.id.hex()] == row


def test_bundle_specs_and_count(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1, "GPU": 0}, {"CPU": 2}])
    assert pg.bundle_specs == [{"CPU": 1.0, "GPU": 0.0}, {"CPU": 2.0}]
    assert pg.bundle_count == 2
    # A handle made from the id alone asks the GCS.
    same = PlacementGroup(pg.id)
    assert same.bundle_count == 2 and same == pg and hash(same) == hash(pg)


def test_reservations_show_in_available_resources(driver: Cluster) -> None:
    before = raygo.available_resources()["CPU"]
    pg = ready(placement_group([{"CPU": 2}, {"CPU": 1.5}], strategy="SPREAD"))
    poll("reserved CPUs to show", lambda: raygo.available_resources()["CPU"] == before - 3.5)
    remove_placement_group(pg)
    poll("released CPUs to show", lambda: raygo.available_resources()["CPU"] == before)


def test_topology_is_passed_through(driver: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    client = raygo._worker.global_client()
    sent: Dict[str, str] = {}
    for method in ("create_placement_group", "create_placement_group_async"):

        def spy(request, original=getattr(client, method)):  # type: ignore[no-untyped-def]
            sent["topology"] = request.topology
            return original(request)

        monkeypatch.setattr(client, method, spy)
    pg = ready(placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_PACK", topology="node"))
    assert sent["topology"] == "node"
    assert len(set(placed_nodes(pg))) == 1
    placement_group([{"CPU": 1}], strategy="STRICT_PACK")
    assert sent["topology"] == ""


def test_pending_group_is_created_when_a_node_that_fits_joins(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1, "accelerator_x": 1}])
    assert table_state(pg) == "PENDING"
    assert raygo.wait([pg.ready()], timeout=0.3)[0] == []
    node = driver.add_node("--num-cpus", "2", "--resources", '{"accelerator_x": 1}')
    try:
        assert raygo.get(pg.ready(), timeout=20) is pg
        assert table_state(pg) == "CREATED"
        assert placed_nodes(pg) == [node.node_id]
    finally:
        remove_placement_group(pg)
        driver.remove_node(node)
        poll("the extra node to be dead", lambda: node.node_id not in nodes_by_id())


def test_a_group_that_fits_is_ready_when_create_returns(driver: Cluster) -> None:
    import pickle

    pg = placement_group([{"CPU": 1}])
    # The GCS answers the create once the group is CREATED: nothing more to wait for.
    assert pg._create is not None and pg._create.result(timeout=30).state == pg_pb2.PlacementGroupState.CREATED
    assert pg._created_now() and pg._created
    assert placement_group_table(pg)["state"] == "CREATED"
    assert raygo.get(pg.ready(), timeout=0) is pg
    assert pg.wait(0)
    # A copy sent elsewhere asks the GCS again, and removal through the handle forgets it.
    copy = pickle.loads(pickle.dumps(pg))
    assert copy == pg and not copy._created and copy.wait(5)
    remove_placement_group(pg)
    assert not pg._created


def test_a_group_that_cannot_fit_returns_at_once_with_its_reason(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1000}])
    assert not pg._created
    row = placement_group_table(pg)
    assert row["state"] == "PENDING" and "1000" in row["pending_reason"]
    remove_placement_group(pg)


def test_a_removal_returns_at_once_and_every_later_call_sees_it(driver: Cluster) -> None:
    client = raygo._worker.global_client()
    pg = placement_group([{"CPU": 1}])
    assert raygo.get(pg.ready(), timeout=30) is pg
    remove_placement_group(pg)
    assert placement_group_table(pg)["state"] == "REMOVED"
    with pytest.raises(TaskPlacementGroupRemoved):
        raygo.get(pg.ready(), timeout=30)
    # Removed while its create is still in flight: the removal follows the create.
    early = placement_group([{"CPU": 1}])
    remove_placement_group(early)
    assert placement_group_table(early)["state"] == "REMOVED"
    # A name is free again for the next call.
    named = placement_group([{"CPU": 1}], name="reused")
    remove_placement_group(named)
    again = placement_group([{"CPU": 1}], name="reused")
    assert raygo.util.get_placement_group("reused") == again != named
    remove_placement_group(again)
    client.flush()
    assert client.in_flight() == 0


class _Recorder:
    """Stands in front of one of the client's real stub methods and records each request
    and the thread that sent it (calls and futures go through to the GCS)."""

    def __init__(self, method: Any) -> None:
        self._method = method
        self.sent: List[Tuple[Any, str]] = []

    def __call__(self, request: Any, **kwargs: Any) -> Any:
        self.sent.append((request, threading.current_thread().name))
        return self._method(request, **kwargs)

    def future(self, request: Any, **kwargs: Any) -> Any:
        self.sent.append((request, threading.current_thread().name))
        return self._method.future(request, **kwargs)


def test_a_driver_making_one_group_at_a_time_makes_one_call_per_group(
    driver: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The removal waits for the next create as long as it takes here, so that which call
    # carries it does not depend on the machine's speed.
    monkeypatch.setattr(raygo._gcs, "REMOVAL_RIDE_S", 3600.0)
    client = raygo._worker.global_client()
    creates = _Recorder(client._create_pg)
    removes = _Recorder(client._pgs.RemovePlacementGroup)
    monkeypatch.setattr(client, "_create_pg", creates)
    monkeypatch.setattr(client._pgs, "RemovePlacementGroup", removes)
    groups = []
    for _ in range(5):
        pg = placement_group([{"CPU": 0.01}])
        ready(pg)
        remove_placement_group(pg)
        groups.append(pg)
    # Each create went on the driver's own thread and carried the removal before it; none
    # went alone.
    assert [thread for _, thread in creates.sent] == [threading.current_thread().name] * 5
    assert [list(request.remove_placement_group_ids) for request, _ in creates.sent] == [[]] + [
        [pg.id.hex()] for pg in groups[:-1]
    ]
    assert removes.sent == []
    # Any other call sends the last removal first, and sees it.
    assert placement_group_table(groups[-1])["state"] == "REMOVED"
    assert [request.placement_group_id for request, _ in removes.sent] == [groups[-1].id.hex()]
    rows = placement_group_table()
    assert all(rows[pg.id.hex()]["state"] == "REMOVED" for pg in groups)


def test_a_removal_no_create_takes_is_sent_on_its_own(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1}])
    ready(pg)
    remove_placement_group(pg)
    # The driver makes no other call: another connection sees the group removed.
    other = raygo._gcs.GcsClient(driver.address, "observer", connect_timeout_s=10)
    try:
        poll("the removal applied without another call of its driver",
             lambda: other.get_placement_group(pg.id.hex()).state == pg_pb2.PlacementGroupState.REMOVED)
    finally:
        other.close()


def test_groups_created_at_once_get_the_ids_their_handles_have(driver: Cluster) -> None:
    # More at once than the client's sender threads take: the rest go as gRPC futures.
    groups = [placement_group([{"CPU": 0.01}]) for _ in range(48)]
    assert raygo.get([pg.ready() for pg in groups], timeout=60) == groups
    rows = placement_group_table()
    assert all(rows[pg.id.hex()]["state"] == "CREATED" for pg in groups)
    assert len({pg.id for pg in groups}) == len(groups)
    job = raygo._worker.global_client().job_id
    assert all(pg.id.hex().endswith(job) for pg in groups)
    for pg in groups:
        remove_placement_group(pg)
    rows = placement_group_table()
    assert all(rows[pg.id.hex()]["state"] == "REMOVED" for pg in groups)


def test_groups_created_at_once_queue_in_the_order_they_were_asked_for(driver: Cluster) -> None:
    # Sent on several threads and as gRPC futures, they reach the GCS in any order; their
    # numbers make it queue them as asked (the table lists groups in queue order).
    groups = [placement_group([{"CPU": 1000}]) for _ in range(48)]
    wanted = [pg.id.hex() for pg in groups]
    listed = [pg_id for pg_id in placement_group_table() if pg_id in set(wanted)]
    assert listed == wanted
    for pg in groups:
        remove_placement_group(pg)
