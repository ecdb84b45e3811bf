"""init / shutdown, the job lease, the protocol version, and cluster state."""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time
from typing import List

import grpc
import pytest

import raygo
from raygo._gcs import CHANNEL_OPTIONS, lease_renewal_plan, open_channel
from raygo._proto import gcs_pb2, gcs_pb2_grpc
from raygo._version import PROTOCOL_METADATA_KEY
from raygo.exceptions import RaySystemError

from conftest import Cluster, JOB_LEASE_TIMEOUT_S, free_port, poll


def job_row(cluster: Cluster, job_id: str) -> gcs_pb2.JobInfo:
    """The job's row, read with a raw stub (the public API has no job table)."""
    with grpc.insecure_channel(cluster.address) as channel:
        stub = gcs_pb2_grpc.JobInfoServiceStub(channel)
        reply = stub.GetAllJobInfo(gcs_pb2.GetAllJobInfoRequest(), metadata=[(PROTOCOL_METADATA_KEY, "1")], timeout=10)
    return next(job for job in reply.jobs if job.job_id == job_id)


def test_init_registers_a_job_that_shutdown_finishes(cluster: Cluster) -> None:
    ctx = raygo.init(address=cluster.address, namespace="connect-test")
    try:
        assert raygo.is_initialized()
        job_id = raygo.get_runtime_context().get_job_id()
        assert ctx.address_info["gcs_address"] == cluster.address
        assert ctx["namespace"] == "connect-test" == raygo.get_runtime_context().namespace
        job = job_row(cluster, job_id)
        assert not job.is_dead and job.namespace == "connect-test"
        # The daemon thread renews the lease: the job outlives several lease periods.
        first_renewal = job.last_renewal_ms
        poll("a lease renewal", lambda: job_row(cluster, job_id).last_renewal_ms > first_renewal,
             timeout=JOB_LEASE_TIMEOUT_S)
    finally:
        raygo.shutdown()
    assert not raygo.is_initialized()
    assert job_row(cluster, job_id).is_dead
    raygo.shutdown()  # harmless twice


def test_lease_outlives_its_timeout_while_the_driver_lives(cluster: Cluster) -> None:
    with raygo.init(address=cluster.address):
        job_id = raygo.get_runtime_context().get_job_id()
        time.sleep(JOB_LEASE_TIMEOUT_S + 1)
        assert not job_row(cluster, job_id).is_dead
    assert not raygo.is_initialized()


@pytest.mark.parametrize(
    "last_renewed, now, failures, lease_s, want",
    [
        # Every third of the lease; the renewal may take until the lease would run out.
        (0.0, 0.0, 0, 3.0, (1.0, 2.0)),
        (5.0, 5.5, 0, 3.0, (0.5, 2.0)),
        # The thread woke late: at once, with what is left of the lease.
        (0.0, 1.5, 0, 3.0, (0.0, 1.5)),
        # A renewal failed: the next goes after 0.1 s, doubling per failure, at most a
        # third of the lease; it may always take a third of the lease.
        (0.0, 1.4, 1, 3.0, (0.1, 1.5)),
        (0.0, 2.5, 1, 3.0, (0.1, 1.0)),
        (0.0, 2.0, 3, 3.0, (0.4, 1.0)),
        (0.0, 2.0, 9, 3.0, (1.0, 1.0)),
        # Long past the lease: a third of it apart, each asking the GCS whether it ended the job.
        (0.0, 60.0, 4, 30.0, (0.8, 10.0)),
    ],
)
def test_lease_renewals_are_sent_again_soon_after_a_failure(
    last_renewed: float, now: float, failures: int, lease_s: float, want: "tuple[float, float]"
) -> None:
    wait, timeout = lease_renewal_plan(last_renewed, now, failures, lease_s)
    assert (wait, timeout) == pytest.approx(want)


def test_address_from_environment_and_auto(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYGO_ADDRESS", cluster.address)
    for address in (None, "auto"):
        ctx = raygo.init(address=address)
        assert ctx.address_info["address"] == cluster.address
        raygo.shutdown()


def test_namespace_defaults_to_an_anonymous_one_per_job(cluster: Cluster) -> None:
    with raygo.init(address=cluster.address):
        first = raygo.get_runtime_context().namespace
    with raygo.init(address=cluster.address):
        second = raygo.get_runtime_context().namespace
    assert first and second and first != second


def test_reinit(cluster: Cluster) -> None:
    with raygo.init(address=cluster.address):
        with pytest.raises(RuntimeError, match="init twice"):
            raygo.init(address=cluster.address)
        ctx = raygo.init(address=cluster.address, ignore_reinit_error=True)
        assert ctx.address_info["address"] == cluster.address


def test_auto_connect_on_first_use(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYGO_ADDRESS", cluster.address)
    assert not raygo.is_initialized()
    assert raygo.cluster_resources()["CPU"] >= 16
    assert raygo.is_initialized()
    raygo.shutdown()
    monkeypatch.setenv("RAYGO_ENABLE_AUTO_CONNECT", "0")
    with pytest.raises(RaySystemError, match="raygo.init"):
        raygo.nodes()


def test_connection_error_names_the_address() -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=address):
        raygo.init(address=address, _connect_timeout_s=1)
    assert time.monotonic() - started < 10
    assert not raygo.is_initialized()


@pytest.mark.parametrize("address", ["localhost", "127.0.0.1:", ":6380", "127.0.0.1:http", "127.0.0.1:70000"])
def test_malformed_address(address: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        raygo.init(address=address)


def test_options_that_start_a_local_cluster_are_refused() -> None:
    with pytest.raises(ValueError, match="num_cpus"):
        raygo.init(num_cpus=4)
    with pytest.raises(TypeError, match="bogus"):
        raygo.init(bogus=1)


def test_logging_and_task_options_are_accepted(cluster: Cluster) -> None:
    with raygo.init(address=cluster.address, log_to_driver=False, include_dashboard=False, runtime_env={"pip": []}):
        assert raygo.is_initialized()


class _OtherVersionGCS(gcs_pb2_grpc.NodeInfoServiceServicer):
    """A GCS that speaks protocol version 2."""

    def GetClusterInfo(self, request, context):  # type: ignore[no-untyped-def]
        context.send_initial_metadata(((PROTOCOL_METADATA_KEY, "2"),))
        return gcs_pb2.GetClusterInfoReply(protocol_version=2)


def test_protocol_version_mismatch_names_both_versions() -> None:
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    gcs_pb2_grpc.add_NodeInfoServiceServicer_to_server(_OtherVersionGCS(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(RaySystemError, match=r"client speaks raygo protocol 1, server at .* speaks 2"):
            raygo.init(address=f"127.0.0.1:{port}")
    finally:
        server.stop(None)
    assert not raygo.is_initialized()


def test_every_call_carries_the_protocol_version(cluster: Cluster) -> None:
    # The GCS refuses a call without the header; the client's calls all succeed.
    with grpc.insecure_channel(cluster.address) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            gcs_pb2_grpc.NodeInfoServiceStub(channel).GetClusterInfo(gcs_pb2.GetClusterInfoRequest(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "protocol version" in refused.value.details()
    with raygo.init(address=cluster.address):
        assert raygo.nodes()


def test_cluster_state_has_rays_shapes(driver: Cluster) -> None:
    nodes = raygo.nodes()
    assert len([n for n in nodes if n["Alive"]]) == 4
    for node in nodes:
        for key in ("NodeID", "Alive", "alive", "NodeManagerAddress", "NodeManagerPort", "NodeName",
                    "NodeManagerHostname", "Resources", "Labels", "DeathReasonMessage"):
            assert key in node, key
        assert len(node["NodeID"]) == 56
        assert node["Labels"]["ray.io/node-id"] == node["NodeID"]
        assert node["RayletAddress"].endswith(f":{node['NodeManagerPort']}")
    heads = [n for n in nodes if n["IsHeadNode"] and n["Alive"]]
    assert len(heads) == 1 and heads[0]["Labels"]["zone"] == "a"
    total = raygo.cluster_resources()
    assert total["CPU"] == 16.0
    assert "GPU" not in total  # no node has one: left out, as in Ray
    assert raygo.available_resources()["CPU"] == 16.0


def test_webui_url_is_the_heads_dashboard_port(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import urllib.request

    cluster = Cluster(tmp_path)
    port = free_port()
    cluster.start_head("--num-cpus", "1", "--dashboard-port", str(port))
    try:
        ctx = raygo.init(address=cluster.address)
        assert ctx.address_info["webui_url"] == f"127.0.0.1:{port}" == ctx.dashboard_url
        with urllib.request.urlopen(f"http://{ctx.address_info['webui_url']}/metrics", timeout=10) as reply:
            assert b'raygo_nodes{state="ALIVE"} 1' in reply.read()
    finally:
        raygo.shutdown()
        cluster.stop()


def test_the_state_api_needs_the_heads_dashboard_port(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from raygo.util import state

    cluster = Cluster(tmp_path)
    cluster.start_head("--num-cpus", "1", "--dashboard-port", "-1")
    try:
        raygo.init(address=cluster.address)
        with pytest.raises(state.RayStateApiException, match="serves no dashboard port"):
            state.list_nodes()
    finally:
        raygo.shutdown()
        cluster.stop()


def _http2_pings(frames: bytes) -> int:
    """The PING frames (not their acknowledgements) in a stream of HTTP/2 frames."""
    pings = 0
    while frames:
        assert len(frames) >= 9, f"{len(frames)} bytes left are not an HTTP/2 frame header"
        length = int.from_bytes(frames[:3], "big")
        if frames[3] == 0x6 and not frames[4] & 0x1:
            pings += 1
        assert len(frames) >= 9 + length, f"a frame of {length} bytes is cut short"
        frames = frames[9 + length:]
    return pings


def test_calls_send_no_flow_control_pings() -> None:
    # gRPC probes the bandwidth with a PING after data arrives, on both sides of every
    # small call, unless told not to: the client's channels and its workers' servers are.
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2), options=CHANNEL_OPTIONS)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "test.Echo", {"Call": grpc.unary_unary_rpc_method_handler(lambda request, _: request)}),))
    server_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    # A proxy in between keeps what each side sent.
    listener = socket.create_server(("127.0.0.1", 0))
    sent: List[bytearray] = [bytearray(), bytearray()]  # by the client, by the server

    def pump(src: socket.socket, dst: socket.socket, into: bytearray) -> None:
        try:
            while data := src.recv(65536):
                into.extend(data)
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the other side closed first, at the test's end

    def proxy() -> None:
        client_side, _ = listener.accept()
        server_side = socket.create_connection(("127.0.0.1", server_port))
        threading.Thread(target=pump, args=(server_side, client_side, sent[1]), daemon=True).start()
        pump(client_side, server_side, sent[0])

    threading.Thread(target=proxy, daemon=True).start()
    raw, _ = open_channel(f"127.0.0.1:{listener.getsockname()[1]}", None)
    try:
        call = raw.unary_unary("/test.Echo/Call", request_serializer=lambda b: b, response_deserializer=lambda b: b)
        for i in range(20):
            assert call(b"small %d" % i, timeout=10) == b"small %d" % i
        time.sleep(0.1)  # the client's answer to the last reply, if any
        # Before the shutdown, whose GOAWAY comes with a PING.
        from_client, from_server = bytes(sent[0]), bytes(sent[1])
    finally:
        raw.close()
        server.stop(None)
        listener.close()
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    assert from_client.startswith(preface)
    assert _http2_pings(from_client[len(preface):]) == 0, "the client sent PING frames"
    assert _http2_pings(from_server) == 0, "the server sent PING frames"
