"""Preemption with a Python hook, on real processes: the issue's cohort scenario.

research (nominal 8 GPUs, may borrow 8) runs three 4-GPU groups (12 GPUs, 4 borrowed from
prod); prod (nominal 16, reclaimWithinCohort: Any) submits two 8 x {GPU: 1} PACK groups at
training-high. The first is admitted at once; the second reclaims exactly research's
last-admitted group (InCohortReclamation), whose hook runs while its bundles are still
held; once the hook returns the group waits (Preempted), and it runs again when prod's
groups are removed.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Iterator, List

import pytest

import raygo
from raygo.util import placement_group, placement_group_table, remove_placement_group
from raygo.util.placement_group import PreemptionNotice

from conftest import RAYGO_BIN, Cluster, nodes_by_id, poll

QUEUES = """\
cohorts:
  - name: ml
queues:
  - name: research
    cohort: ml
    namespaces: ["research"]
    resources:
      GPU: {nominalQuota: 8, borrowingLimit: 8}
  - name: prod
    cohort: ml
    namespaces: ["prod"]
    resources:
      GPU: {nominalQuota: 16, borrowingLimit: 0}
    preemption:
      reclaimWithinCohort: Any
"""


@pytest.fixture(scope="module")
def queued_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A head with the queues above and three raylets of 8 GPUs each."""
    temp = tmp_path_factory.mktemp("raygo-preemption")
    queues = temp / "queues.yaml"
    queues.write_text(QUEUES)
    c = Cluster(temp)
    try:
        c.start_head("--num-cpus", "4", "--queues", str(queues))
        for i in range(3):
            c.add_node("--num-cpus", "8", "--num-gpus", "8", "--node-name", f"gpu-{i}")
        raygo.init(address=c.address, namespace="research")
        poll("three GPU nodes", lambda: sum(n["Resources"].get("GPU", 0) for n in nodes_by_id().values()) == 24)
        raygo.shutdown()
        yield c
    finally:
        c.stop()


def _row(pg):  # type: ignore[no-untyped-def]
    return placement_group_table(pg)


def check_invariants(cluster: Cluster, step: str) -> None:
    """`raygo debug check-invariants` finds nothing: no partial gang, no double
    allocation, no leak, every queue within its quota."""
    out = subprocess.run(
        [str(RAYGO_BIN), "debug", "check-invariants", "--address", cluster.address, "--views", "2", "--interval", "200ms"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, f"after {step}: check-invariants exit {out.returncode}: {out.stdout}{out.stderr}"


def test_reclaim_runs_the_victims_hook_before_its_bundles_are_released(queued_cluster: Cluster) -> None:
    raygo.init(address=queued_cluster.address, namespace="research")
    research = []
    for _ in range(3):
        pg = placement_group([{"GPU": 1}] * 4, strategy="PACK", priority="training")
        assert pg.wait(30)
        research.append(pg)
    victim = research[-1]
    check_invariants(queued_cluster, "research runs three groups")

    seen: List[PreemptionNotice] = []
    held_during_hook: List[str] = []
    hooked = threading.Event()

    def checkpoint(notice: PreemptionNotice) -> None:
        row = _row(victim)
        held_during_hook.append(row["state"])
        assert all(row["bundles_to_node_id"].values()), "bundles released before the hook returned"
        seen.append(notice)
        hooked.set()

    # Every research group has a hook; only the last admitted may be chosen.
    wrongly_hooked: List[PreemptionNotice] = []
    for pg in research[:-1]:
        pg.on_preemption(wrongly_hooked.append)
    victim.on_preemption(checkpoint)

    first = placement_group([{"GPU": 1}] * 8, strategy="PACK", queue="prod", priority="training-high")
    assert first.wait(30), _row(first)
    check_invariants(queued_cluster, "prod's first group runs")
    second = placement_group([{"GPU": 1}] * 8, strategy="PACK", queue="prod", priority="training-high")
    assert hooked.wait(30), {k: _row(second)[k] for k in ("state", "pending_reason", "pending_reason_code")}
    notice = seen[0]
    assert notice.reason == "InCohortReclamation"
    assert notice.preemptor_id == second.id.hex()
    assert 29 <= notice.deadline - notice.time <= 31  # the default gracePeriod, 30 s
    assert held_during_hook == ["CREATED"]

    assert second.wait(30), _row(second)
    row = poll("the victim queued as Preempted", lambda: (r := _row(victim))["state"] == "PENDING" and r)
    assert row["pending_reason_code"] == "Preempted"
    assert row["preemptions"] == 1 and row["last_preemption"].acknowledged
    assert not any(row["bundles_to_node_id"].values())
    for pg in research[:-1]:
        assert _row(pg)["state"] == "CREATED"
    assert not wrongly_hooked
    check_invariants(queued_cluster, "the victim is queued, prod's groups run")

    remove_placement_group(first)
    remove_placement_group(second)
    assert victim.wait(30), _row(victim)
    assert _row(victim)["preemptions"] == 1
    check_invariants(queued_cluster, "the victim runs again")
    for pg in research:
        remove_placement_group(pg)
