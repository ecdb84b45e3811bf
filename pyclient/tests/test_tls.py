"""Mutual TLS (RAYGO_USE_TLS=1): a driver with the certificate places groups on a cluster
whose every endpoint speaks TLS, the dashboard port HTTPS (the state API reads it); a
plaintext client gets no answer."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest

import raygo
from raygo._proto import gcs_pb2, gcs_pb2_grpc
from raygo._version import PROTOCOL_METADATA_KEY
from raygo.util import state
from raygo.util.placement_group import placement_group, remove_placement_group

from conftest import Cluster

ROOT = Path(__file__).resolve().parents[2]


def test_a_tls_cluster_serves_a_tls_driver_and_refuses_plaintext(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    lines = subprocess.run(["go", "run", "./internal/testutil/tlscerts/gen", str(certs)], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for line in lines:
        name, _, value = line.partition("=")
        monkeypatch.setenv(name, value)
    cluster = Cluster(tmp_path / "cluster")
    cluster.temp_dir.mkdir()
    cluster.start_head("--num-cpus", "2")
    cluster.add_node("--num-cpus", "2")
    try:
        with grpc.insecure_channel(cluster.address) as plain:
            stub = gcs_pb2_grpc.NodeInfoServiceStub(plain)
            with pytest.raises(grpc.RpcError):
                stub.GetClusterInfo(gcs_pb2.GetClusterInfoRequest(), metadata=[(PROTOCOL_METADATA_KEY, "1")], timeout=3)
        context = raygo.init(address=cluster.address)
        pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
        assert pg.wait(timeout_seconds=30)
        assert [row.placement_group_id for row in state.list_placement_groups()] == [pg.id.hex()]
        dashboard = context.dashboard_url
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            opener.open(f"http://{dashboard}/api/v0/placement_groups", timeout=3).read()
        remove_placement_group(pg)
        raygo.shutdown()
        monkeypatch.delenv("RAYGO_TLS_CA_CERT")
        with pytest.raises(ValueError, match="RAYGO_TLS_CA_CERT"):
            raygo.init(address=cluster.address)
    finally:
        raygo.shutdown()
        cluster.stop()
