"""ready / wait / get semantics, PENDING -> CREATED -> REMOVED, named lookup, and groups
outliving (or not) the driver that created them.
"""

from __future__ import annotations

import asyncio
import time

import pytest

import raygo
from raygo.exceptions import GetTimeoutError, RaySystemError, TaskPlacementGroupRemoved
from raygo.util import (
    get_current_placement_group,
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from raygo.util.placement_group import PlacementGroup
from raygo import PlacementGroupID

from conftest import Cluster, JOB_LEASE_TIMEOUT_S, poll, run_driver, table_state

INFEASIBLE = [{"CPU": 1000}]


def test_ready_resolves_to_the_group(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1}, {"CPU": 1}])
    got = raygo.get(pg.ready(), timeout=20)
    assert got is pg
    assert got.bundle_specs == pg.bundle_specs
    assert got.id.binary() == pg.id.binary()
    assert pg.wait(10) is True
    assert table_state(pg) == "CREATED"
    # ready() again, once created, resolves at once; a list of refs gives a list.
    assert raygo.get([pg.ready(), pg.ready()], timeout=5) == [pg, pg]


def test_wait_returns_refs_in_order(driver: Cluster) -> None:
    created = placement_group([{"CPU": 1}])
    waiting = placement_group(INFEASIBLE)
    refs = [waiting.ready(), created.ready()]
    ready_refs, not_ready = raygo.wait(refs, num_returns=1, timeout=10)
    assert ready_refs == [refs[1]] and not_ready == [refs[0]]
    ready_refs, not_ready = raygo.wait(refs, num_returns=2, timeout=0.3)
    assert ready_refs == [refs[1]] and not_ready == [refs[0]]
    ready_refs, not_ready = raygo.wait(refs, num_returns=1, timeout=0)
    assert ready_refs == [refs[1]]
    assert raygo.wait([], timeout=0) == ([], [])


def test_pending_group_times_out(driver: Cluster) -> None:
    pg = placement_group(INFEASIBLE, name="pending")
    row = placement_group_table(pg)
    assert row["state"] == "PENDING"
    poll("the scheduler to call it infeasible",
         lambda: placement_group_table(pg)["stats"]["scheduling_state"] == "INFEASIBLE")
    assert "1000" in placement_group_table(pg)["pending_reason"]
    started = time.monotonic()
    assert pg.wait(0.5) is False
    assert time.monotonic() - started >= 0.4
    with pytest.raises(GetTimeoutError):
        raygo.get(pg.ready(), timeout=0.2)
    with pytest.raises(TimeoutError):  # GetTimeoutError is a TimeoutError, as Ray's
        raygo.get([pg.ready()], timeout=0)
    ready_refs, not_ready = raygo.wait([pg.ready()], timeout=0.2)
    assert ready_refs == [] and len(not_ready) == 1


def test_await_ready(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1}])

    async def main() -> PlacementGroup:
        return await pg.ready()

    assert asyncio.run(main()) is pg


def test_ready_of_a_group_removed_while_pending_fails(driver: Cluster) -> None:
    pg = placement_group(INFEASIBLE)
    ref = pg.ready()
    remove_placement_group(pg)
    with pytest.raises(TaskPlacementGroupRemoved):
        raygo.get(ref, timeout=10)
    assert raygo.wait([ref], timeout=0)[0] == [ref]  # a failed ref counts as ready, as in Ray
    with pytest.raises(TaskPlacementGroupRemoved):
        raygo.get(pg.ready(), timeout=10)
    with pytest.raises(Exception, match="does not exist"):
        pg.wait(1)


def test_removal(driver: Cluster) -> None:
    # Removing a group nobody created does nothing, however often.
    stranger = PlacementGroup(PlacementGroupID.from_random())
    for _ in range(3):
        remove_placement_group(stranger)
    assert placement_group_table(stranger) == {}

    total = raygo.available_resources()["CPU"]
    pg = placement_group([{"CPU": 2}, {"CPU": 2}], name="to-remove")
    assert pg.wait(10)
    placed = placement_group_table(pg)
    remove_placement_group(pg)
    row = placement_group_table(pg)
    assert row["state"] == "REMOVED"
    assert row["stats"]["scheduling_state"] == "REMOVED"
    # As Ray's, the row keeps the last node ids; raygo's hardware keys are cleared.
    assert row["bundles_to_node_id"] == placed["bundles_to_node_id"] and all(row["bundles_to_node_id"].values())
    assert row["bundles_to_node_address"] == {0: "", 1: ""}
    for _ in range(3):
        remove_placement_group(pg)
    poll("its CPUs back", lambda: raygo.available_resources()["CPU"] == total)
    # The name is free again; a removed group stays listed as REMOVED.
    again = placement_group([{"CPU": 1}], name="to-remove")
    assert get_placement_group("to-remove") == again
    assert placement_group_table()[pg.id.hex()]["state"] == "REMOVED"
    with pytest.raises(AssertionError):
        remove_placement_group(None)  # type: ignore[arg-type]


def test_named_lookup(driver: Cluster) -> None:
    pg = placement_group([{"CPU": 1}, {"CPU": 1}], name="trainer")
    found = get_placement_group("trainer")
    assert found == pg and found.id == pg.id and hash(found.id) == hash(pg.id)
    assert found.bundle_specs == [{"CPU": 1.0}, {"CPU": 1.0}]
    assert raygo.get(found.ready(), timeout=20) is found
    with pytest.raises(ValueError, match="Failed to look up placement group with name: nobody"):
        get_placement_group("nobody")
    with pytest.raises(ValueError, match="non-empty"):
        get_placement_group("")
    remove_placement_group(pg)
    with pytest.raises(ValueError, match="trainer"):
        get_placement_group("trainer")


def test_names_are_per_namespace(driver: Cluster) -> None:
    namespace = raygo.get_runtime_context().namespace
    # Detached, so that it outlives this job when the test reconnects.
    mine = placement_group([{"CPU": 1}], name="shared-name", lifetime="detached")
    raygo.shutdown()
    raygo.init(namespace=namespace + "-other")
    with pytest.raises(ValueError):
        get_placement_group("shared-name")
    theirs = placement_group([{"CPU": 1}], name="shared-name")
    assert theirs != mine
    raygo.shutdown()
    raygo.init(namespace=namespace)
    assert get_placement_group("shared-name") == mine


def test_no_current_placement_group_in_a_driver(driver: Cluster) -> None:
    assert get_current_placement_group() is None


def test_non_detached_groups_are_removed_when_the_driver_exits(driver: Cluster) -> None:
    # The driver exits without shutdown(): atexit ends its job, and its groups go with it.
    namespace = raygo.get_runtime_context().namespace
    result = run_driver(driver, f"""
        import raygo as ray
        from raygo.util import placement_group
        ray.init(namespace={namespace!r})
        pg = placement_group([{{"CPU": 1}}], name="mortal")
        assert pg.wait(20)
        print(pg.id.hex())
    """)
    assert result.returncode == 0, result.stderr
    pg = PlacementGroup(PlacementGroupID.from_hex(result.stdout.strip()))
    poll("the exited driver's group to be removed", lambda: table_state(pg) == "REMOVED", timeout=10)
    with pytest.raises(ValueError):
        get_placement_group("mortal")


def test_detached_groups_survive_the_driver(driver: Cluster) -> None:
    namespace = raygo.get_runtime_context().namespace
    result = run_driver(driver, f"""
        import raygo as ray
        from raygo.util import placement_group
        ray.init(namespace={namespace!r})
        detached = placement_group([{{"CPU": 1}}], name="immortal", lifetime="detached")
        mortal = placement_group([{{"CPU": 1}}])
        assert ray.get([detached.ready(), mortal.ready()], timeout=20)
        print(detached.id.hex(), mortal.id.hex())
        ray.shutdown()
    """)
    assert result.returncode == 0, result.stderr
    detached_id, mortal_id = result.stdout.split()
    mortal = PlacementGroup(PlacementGroupID.from_hex(mortal_id))
    poll("the non-detached group to be removed", lambda: table_state(mortal) == "REMOVED", timeout=10)
    detached = get_placement_group("immortal")
    assert detached.id.hex() == detached_id
    row = placement_group_table(detached)
    assert row["state"] == "CREATED" and row["is_detached"] is True
    remove_placement_group(detached)
    assert table_state(detached) == "REMOVED"


def test_groups_of_a_killed_driver_go_when_its_lease_expires(driver: Cluster) -> None:
    # SIGKILL: no atexit, no MarkJobFinished; the GCS ends the job when the lease runs out.
    result = run_driver(driver, """
        import os, signal
        import raygo as ray
        from raygo.util import placement_group
        ray.init()
        pg = placement_group([{"CPU": 1}])
        detached = placement_group([{"CPU": 1}], lifetime="detached")
        assert ray.get([pg.ready(), detached.ready()], timeout=20)
        print(pg.id.hex(), detached.id.hex(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert result.returncode == -9, result.stderr
    pg_id, detached_id = result.stdout.split()
    pg = PlacementGroup(PlacementGroupID.from_hex(pg_id))
    detached = PlacementGroup(PlacementGroupID.from_hex(detached_id))
    assert table_state(pg) == "CREATED"
    poll("the lease to expire", lambda: table_state(pg) == "REMOVED", timeout=JOB_LEASE_TIMEOUT_S + 5)
    assert table_state(detached) == "CREATED"


def test_shutdown_fails_outstanding_refs(cluster: Cluster) -> None:
    raygo.init(address=cluster.address)
    pg = placement_group(INFEASIBLE)
    ref = pg.ready()
    raygo.shutdown()  # the job ends: its pending group is removed, the wait is cut
    with pytest.raises((RaySystemError, TaskPlacementGroupRemoved)):
        raygo.get(ref, timeout=10)


@pytest.mark.parametrize("bad", [3, "ref", (1,)])
def test_get_refuses_what_is_not_a_ref(bad: object) -> None:
    with pytest.raises(ValueError, match="ObjectRef"):
        raygo.get(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a raygo.ObjectRef"):
        raygo.get([bad])  # type: ignore[list-item]


def test_wait_and_get_argument_checks(driver: Cluster) -> None:
    ref = placement_group(INFEASIBLE).ready()
    with pytest.raises(TypeError):
        raygo.wait(ref)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unique"):
        raygo.wait([ref, ref], timeout=0)
    with pytest.raises(ValueError, match="num_returns"):
        raygo.wait([ref], num_returns=2)
    with pytest.raises(ValueError, match="number of objects"):
        raygo.wait([ref], num_returns=0)
    with pytest.raises(ValueError, match="nonnegative"):
        raygo.wait([ref], timeout=-1)
    assert raygo.get([], timeout=0) == []


def test_a_gcs_restarted_on_its_empty_memory_store_is_named_in_the_error(tmp_path) -> None:
    """The memory store starts empty with every GCS start: a driver's waits say so, rather
    than 'does not exist', and the log says what was lost."""
    import os
    import signal

    own = Cluster(tmp_path)
    try:
        head = own.start_head("--num-cpus", "1")
        raygo.init(address=own.address)
        pending = placement_group([{"CPU": 100}])
        os.kill(int(head.record["gcs_pid"]), signal.SIGKILL)
        with pytest.raises(RaySystemError, match="memory store"):
            raygo.get(pending.ready(), timeout=30)
        with pytest.raises(RaySystemError, match="memory store"):
            pending.wait(1)
    finally:
        raygo.shutdown()
        own.stop()


def test_a_group_is_removed_after_its_max_runtime(driver) -> None:  # type: ignore[no-untyped-def]
    from raygo.util.placement_group import placement_group, placement_group_table

    with pytest.raises(ValueError, match="max_runtime_s"):
        placement_group([{"CPU": 1}], max_runtime_s=0)
    with pytest.raises(TypeError, match="max_runtime_s"):
        placement_group([{"CPU": 1}], max_runtime_s=1.5)  # type: ignore[arg-type]
    pg = placement_group([{"CPU": 1}], max_runtime_s=1)
    assert pg.wait(timeout_seconds=30)
    assert placement_group_table(pg)["max_runtime_s"] == 1
    row = poll("the group removed after 1 s", lambda: (lambda r: r if r["state"] == "REMOVED" else None)(placement_group_table(pg)))
    assert row["removal_reason"] == "ran for max_runtime_s=1"
