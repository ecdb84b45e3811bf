"""1,000 one-CPU groups on a 16-CPU cluster: creation returns once each is accepted (most
stay PENDING), and removing them all releases everything.
"""

from __future__ import annotations

import time

import raygo
from raygo.util import placement_group, placement_group_table, remove_placement_group

from conftest import Cluster, poll

COUNT = 1000


def test_a_thousand_groups_created_and_removed(driver: Cluster) -> None:
    started = time.monotonic()
    groups = [placement_group([{"CPU": 1}]) for _ in range(COUNT)]
    create_s = time.monotonic() - started
    # Accepted, not placed: the cluster holds 16 of them at most.
    assert create_s < 30, f"creating {COUNT} groups took {create_s:.1f} s"
    assert len({pg.id for pg in groups}) == COUNT
    table = placement_group_table()
    states = [table[pg.id.hex()]["state"] for pg in groups]
    assert set(states) <= {"PENDING", "PREPARED", "CREATED"}
    poll("16 of them to be created", lambda: sum(
        placement_group_table(pg)["state"] == "CREATED" for pg in groups[:32]) == 16, timeout=30)
    assert "CPU" not in raygo.available_resources()

    started = time.monotonic()
    for pg in groups:
        remove_placement_group(pg)
    remove_s = time.monotonic() - started
    assert remove_s < 60, f"removing {COUNT} groups took {remove_s:.1f} s"
    table = placement_group_table()
    # Removed groups stay listed as REMOVED (the GCS keeps at most 1,000 of them).
    assert all(table.get(pg.id.hex(), {"state": "REMOVED"})["state"] == "REMOVED" for pg in groups)
    poll("all 16 CPUs free again", lambda: raygo.available_resources().get("CPU") == 16.0)
    print(f"\n{COUNT} groups: created in {create_s:.2f} s, removed in {remove_s:.2f} s")
