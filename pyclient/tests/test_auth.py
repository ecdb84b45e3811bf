"""The cluster token (RAYGO_AUTH_MODE=token): a driver without it is refused with an
AuthenticationError naming RAYGO_AUTH_TOKEN; with it (in the environment or in the token
file) it places groups as usual and reads the state API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import raygo
from raygo.exceptions import AuthenticationError
from raygo.util import state
from raygo.util.placement_group import placement_group, remove_placement_group

from conftest import Cluster, start_auth_cluster


def _issue(cluster: Cluster, scope: str) -> str:
    """`raygo auth issue --scope scope` with the admin token in the environment."""
    import subprocess

    from conftest import RAYGO_BIN

    issued = subprocess.run([str(RAYGO_BIN), "auth", "issue", "--scope", scope, "--address", cluster.address],
                            capture_output=True, text=True, check=True, timeout=60)
    token = issued.stdout.strip()
    assert len(token) == 64 and token not in issued.stderr
    return token


def test_a_cluster_with_auth_refuses_a_driver_without_its_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, token, home = start_auth_cluster(tmp_path, monkeypatch, "--num-cpus", "2")
    try:
        monkeypatch.delenv("RAYGO_AUTH_TOKEN")
        with pytest.raises(AuthenticationError, match="RAYGO_AUTH_TOKEN"):
            raygo.init(address=cluster.address)
        monkeypatch.setenv("RAYGO_AUTH_TOKEN", "not-the-token")
        with pytest.raises(AuthenticationError, match="refused the token"):
            raygo.init(address=cluster.address)

        # The token file, owner-only, as `raygo start --head` saves it.
        monkeypatch.delenv("RAYGO_AUTH_TOKEN")
        token_file = home / ".raygo" / "auth_token"
        token_file.parent.mkdir(mode=0o700)
        token_file.write_text(token + "\n")
        os.chmod(token_file, 0o644)
        with pytest.raises(ValueError, match="chmod 600"):
            raygo.init(address=cluster.address)
        os.chmod(token_file, 0o600)
        raygo.init(address=cluster.address)
        pg = placement_group([{"CPU": 1}], strategy="PACK")
        assert pg.wait(timeout_seconds=30)
        # ray.util.state reads the head's /api/v0, which wants the token too: it sends it.
        assert state.get_placement_group(pg.id.hex()).state == "CREATED"
        remove_placement_group(pg)
        _tasks_run_with_the_token(token)
    finally:
        raygo.shutdown()
        cluster.stop()


def test_a_tenant_token_sees_and_removes_only_its_own_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A namespace:a token from `raygo auth issue`: the driver places groups in its own
    namespace, lists only those (gRPC and the state API), and cannot remove a group of
    namespace b; the admin token can."""
    cluster, admin, _ = start_auth_cluster(tmp_path, monkeypatch, "--num-cpus", "4")
    try:
        tenant = _issue(cluster, "namespace:a")

        raygo.init(address=cluster.address, namespace="b")
        other = placement_group([{"CPU": 1}], strategy="PACK", lifetime="detached")
        assert other.wait(timeout_seconds=30)
        raygo.shutdown()

        monkeypatch.setenv("RAYGO_AUTH_TOKEN", tenant)
        raygo.init(address=cluster.address, namespace="a")
        own = placement_group([{"CPU": 1}], strategy="PACK")
        assert own.wait(timeout_seconds=30)
        listed = {row.placement_group_id for row in state.list_placement_groups()}
        assert listed == {own.id.hex()}, listed
        with pytest.raises(Exception, match="not in this token's namespace:a"):
            remove_placement_group(other)
        remove_placement_group(own)
        raygo.shutdown()

        monkeypatch.setenv("RAYGO_AUTH_TOKEN", admin)
        raygo.init(address=cluster.address)
        assert state.get_placement_group(other.id.hex()).state == "CREATED"
        remove_placement_group(other)
    finally:
        raygo.shutdown()
        cluster.stop()


def _tasks_run_with_the_token(token: str) -> None:
    """A Python task runs (its worker registers and fetches its function with the token
    the raylet gave it, and submits a nested task with it), and the worker's own server
    refuses a call without the token."""
    import grpc

    from raygo._proto import raylet_pb2, raylet_pb2_grpc, worker_pb2, worker_pb2_grpc
    from raygo._version import PROTOCOL_METADATA_KEY, PROTOCOL_VERSION
    from test_tasks import add

    assert raygo.get(add.remote(1, b=2), timeout=60) == 3
    # A nested task: the worker joins its job at the GCS with the token its raylet gave it.
    from test_nested import sum_of_squares

    assert raygo.get(sum_of_squares.remote(3), timeout=120) == 5
    raylet_address = raygo.nodes()[0]["RayletAddress"]
    with grpc.insecure_channel(raylet_address) as channel:
        workers = raylet_pb2_grpc.NodeManagerServiceStub(channel).GetWorkers(
            raylet_pb2.GetWorkersRequest(), timeout=10,
            metadata=[("authorization", "Bearer " + token), (PROTOCOL_METADATA_KEY, str(PROTOCOL_VERSION))]).workers
    assert workers, "the task's worker stays idle in the raylet's pool"
    with grpc.insecure_channel(workers[0].address) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            worker_pb2_grpc.CoreWorkerServiceStub(channel).PushTask(worker_pb2.PushTaskRequest(task_id="x"), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_tenant_token_runs_a_python_task_and_calls_its_actor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver holding only a namespace:a token stores its function under its own job's
    key, leases a worker (the raylet asks the GCS whose the token is and whether the job
    is its own) and runs a task there: the worker takes the token it was leased with, never
    the cluster token its raylet holds. Its actor's worker, leased by the GCS, accepts its
    owner's token (the driver calls it) and the GCS's call that creates it, and holds no
    token of the tenant's nor the cluster token."""
    from test_actors import Counter
    from test_tasks import add

    @raygo.remote
    def environ_token() -> str | None:
        return os.environ.get("RAYGO_AUTH_TOKEN")

    @raygo.remote
    class Environ:
        def __init__(self) -> None:
            # What a tenant's constructor can read of the GCS's call that runs it.
            import inspect

            self.presented = [dict(frame.frame.f_locals["context"].invocation_metadata()).get("authorization", "")
                              for frame in inspect.stack() if "context" in frame.frame.f_locals
                              and hasattr(frame.frame.f_locals["context"], "invocation_metadata")]

        def token(self) -> str | None:
            return os.environ.get("RAYGO_AUTH_TOKEN")

        def gcs_call(self) -> list:
            return self.presented

    cluster, admin, _ = start_auth_cluster(tmp_path, monkeypatch, "--num-cpus", "2")
    try:
        tenant = _issue(cluster, "namespace:a")
        monkeypatch.setenv("RAYGO_AUTH_TOKEN", tenant)
        raygo.init(address=cluster.address, namespace="a")
        assert raygo.get(add.remote(1, b=2), timeout=120) == 3
        counter = Counter.remote(10)
        assert raygo.get(counter.add.remote(5), timeout=120) == 15
        task_token = raygo.get(environ_token.remote(), timeout=120)
        assert task_token != admin, "the tenant's task read the cluster token"
        assert task_token == tenant
        environ = Environ.remote()
        actor_token = raygo.get(environ.token.remote(), timeout=120)
        assert actor_token != admin, "the tenant's actor read the cluster token"
        assert actor_token != tenant
        presented = raygo.get(environ.gcs_call.remote(), timeout=120)
        assert presented and all(p.startswith("Bearer ") for p in presented), presented
        assert "Bearer " + admin not in presented, "the GCS's call to the tenant's actor carried the cluster token"
    finally:
        raygo.shutdown()
        cluster.stop()


def test_python_workers_run_on_a_node_token_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a worker node started with a node token, a Python worker reads its function from
    the KV with the token of the call it runs (a node token reads no function): an admin
    driver's task, and a tenant driver's task and actor call, run there."""
    from test_actors import Counter
    from test_tasks import add

    # every task and actor runs on the node-token node
    cluster, admin, _ = start_auth_cluster(tmp_path, monkeypatch, "--num-cpus", "0")
    try:
        node_token, tenant = _issue(cluster, "node"), _issue(cluster, "namespace:a")
        monkeypatch.setenv("RAYGO_AUTH_TOKEN", node_token)
        cluster.add_node("--num-cpus", "2")
        monkeypatch.setenv("RAYGO_AUTH_TOKEN", admin)
        raygo.init(address=cluster.address)
        assert raygo.get(add.remote(1, b=2), timeout=120) == 3
        raygo.shutdown()
        monkeypatch.setenv("RAYGO_AUTH_TOKEN", tenant)
        raygo.init(address=cluster.address, namespace="a")
        assert raygo.get(add.remote(2, b=2), timeout=120) == 4
        counter = Counter.remote(10)
        assert raygo.get(counter.add.remote(5), timeout=120) == 15
        # The node token its workers hold reaches none of them.
        _refused_with(node_token, admin)
    finally:
        raygo.shutdown()
        cluster.stop()


def _refused_with(token: str, admin: str) -> None:
    """Every worker of the cluster (listed with the admin token) refuses a call carrying token."""
    import grpc

    from raygo._proto import raylet_pb2, raylet_pb2_grpc, worker_pb2, worker_pb2_grpc
    from raygo._version import PROTOCOL_METADATA_KEY, PROTOCOL_VERSION

    version = (PROTOCOL_METADATA_KEY, str(PROTOCOL_VERSION))
    checked = 0
    for node in raygo.nodes():
        with grpc.insecure_channel(node["RayletAddress"]) as channel:
            workers = raylet_pb2_grpc.NodeManagerServiceStub(channel).GetWorkers(
                raylet_pb2.GetWorkersRequest(), timeout=10, metadata=[("authorization", "Bearer " + admin), version]).workers
        for worker in workers:
            with grpc.insecure_channel(worker.address) as channel:
                with pytest.raises(grpc.RpcError) as refused:
                    worker_pb2_grpc.CoreWorkerServiceStub(channel).PushTask(
                        worker_pb2.PushTaskRequest(task_id="x"), timeout=10, metadata=[("authorization", "Bearer " + token), version])
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            checked += 1
    assert checked >= 2, "the task's and the actor's workers"
