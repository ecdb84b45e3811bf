"""Label selectors on Python tasks and actors (Ray's ``label_selector`` option and
``NodeLabelSchedulingStrategy``) on the session cluster, whose nodes are labelled: head
zone=a, worker-1 zone=b, worker-2 zone=c, worker-3 zone=c and market=spot.
"""

from __future__ import annotations

import pytest

import raygo
from raygo.exceptions import GetTimeoutError
from raygo.util.scheduling_strategies import DoesNotExist, Exists, In, NodeLabelSchedulingStrategy, NotIn

from conftest import Cluster, poll


@raygo.remote(num_cpus=1)
def node_id() -> str:
    return raygo.get_runtime_context().get_node_id()


@raygo.remote
class Where:
    def node_id(self) -> str:
        return raygo.get_runtime_context().get_node_id()


def node_named(name: str) -> str:
    return next(n["NodeID"] for n in raygo.nodes() if n["Alive"] and n["NodeName"] == name)


def head_id() -> str:
    return next(n["NodeID"] for n in raygo.nodes() if n["Alive"] and n["Labels"].get("zone") == "a")


@pytest.mark.parametrize("options, node", [
    pytest.param(dict(label_selector={"zone": "b"}), "worker-1", id="label_selector-value"),
    pytest.param(dict(label_selector={"zone": "in(c)", "market": "!spot"}), "worker-2", id="label_selector-not"),
    pytest.param(dict(scheduling_strategy=NodeLabelSchedulingStrategy({"market": Exists()})), "worker-3", id="exists"),
    pytest.param(dict(scheduling_strategy=NodeLabelSchedulingStrategy({"zone": NotIn("a", "b"), "market": DoesNotExist()})), "worker-2", id="notin-doesnotexist"),
    pytest.param(dict(scheduling_strategy=NodeLabelSchedulingStrategy({"zone": In("b", "x")})), "worker-1", id="in"),
])
def test_task_with_a_hard_selector_runs_on_the_matching_node(driver: Cluster, options: dict, node: str) -> None:
    want = node_named(node)
    assert raygo.get([node_id.options(**options).remote() for _ in range(6)], timeout=120) == [want] * 6


def all_cpus_free(node_id: str) -> bool:
    """Whether the GCS sees every CPU of the node free (the leases of earlier tasks
    returned and reported)."""
    from raygo._worker import global_client

    node = next(n for n in global_client().all_nodes() if n.node_id == node_id)
    return node.resources_available.get("CPU", 0.0) == node.resources_total.get("CPU", -1.0)


def test_task_with_a_soft_selector_prefers_the_matching_node(driver: Cluster) -> None:
    # Without it, DEFAULT packs onto the least loaded nodes in id order; with it worker-1
    # comes first while it has room: room the GCS sees once the earlier tests' leases
    # there are back.
    want = node_named("worker-1")
    poll("worker-1's CPUs all free", lambda: all_cpus_free(want))
    strategy = NodeLabelSchedulingStrategy({}, soft={"zone": In("b")})
    assert [raygo.get(node_id.options(scheduling_strategy=strategy).remote(), timeout=120) for _ in range(4)] == [want] * 4


def test_soft_selector_no_node_matches_still_runs(driver: Cluster) -> None:
    strategy = NodeLabelSchedulingStrategy({}, soft={"zone": In("mars")})
    assert raygo.get(node_id.options(scheduling_strategy=strategy).remote(), timeout=120) in {n["NodeID"] for n in raygo.nodes() if n["Alive"]}


def test_impossible_hard_selector_waits_and_says_why(driver: Cluster) -> None:
    # No node is in zone mars: the task waits (demand for the autoscaler, as Ray's
    # infeasible tasks), and a get that times out names the selector.
    ref = node_id.options(label_selector={"zone": "mars"}).remote()
    with pytest.raises(GetTimeoutError, match=r"no ALIVE node matches label_selector \{zone: mars\}"):
        raygo.get(ref, timeout=3)


def test_malformed_selector_fails_naming_the_key(driver: Cluster) -> None:
    with pytest.raises(ValueError, match=r'label_selector\["zone"\]'):
        raygo.get(node_id.options(label_selector={"zone": "in(a,"}).remote(), timeout=60)
    with pytest.raises(ValueError, match="label_selector"):
        node_id.options(label_selector={"zone": 1})
    with pytest.raises(ValueError, match=r'label_selector\["bad key!"\]'):
        Where.options(label_selector={"bad key!": "a"}).remote()


def test_actor_with_a_selector(driver: Cluster) -> None:
    spot = Where.options(label_selector={"zone": "c", "market": "spot"}).remote()
    assert raygo.get([spot.node_id.remote() for _ in range(3)], timeout=120) == [node_named("worker-3")] * 3
    head = Where.options(scheduling_strategy=NodeLabelSchedulingStrategy({"zone": In("a")})).remote()
    assert raygo.get(head.node_id.remote(), timeout=120) == head_id()
    raygo.kill(spot)
    raygo.kill(head)
