"""A real local raygo cluster for the tests: `bin/raygo start --block` heads and raylets on
free loopback ports with their own temp dir, stopped at the end (and killed by the kernel if
pytest dies first). Helpers poll with a deadline instead of sleeping.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

import pytest

import raygo
from raygo.util.placement_group import placement_group_table, remove_placement_group, PlacementGroup
from raygo._ids import PlacementGroupID

ROOT = Path(__file__).resolve().parents[2]
RAYGO_BIN = Path(os.environ.get("RAYGO_BIN", ROOT / "bin" / "raygo"))
# Short enough that a driver killed without shutdown loses its groups within seconds; the
# client renews every third of it.
JOB_LEASE_TIMEOUT_S = 4

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent(cmd: List[str]) -> List[str]:
    """cmd, made to get SIGKILL when pytest dies, so that no node outlives the tests.

    util-linux's setpriv sets the parent-death signal and execs cmd. (A preexec_fn would do
    it too, but forking a process that runs gRPC threads with Python code in the child is
    what gRPC's fork handlers warn about, and it lost node starts now and then.)
    """
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *cmd] if setpriv else cmd


def poll(what: str, check: Callable[[], T], timeout: float = 20.0, interval: float = 0.05) -> T:
    """Calls check until it returns something truthy; fails naming what after timeout."""
    deadline = time.monotonic() + timeout
    last: T = check()
    while not last:
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")
        time.sleep(interval)
        last = check()
    return last


class Node:
    """One `raygo start --block` process and what it reported in its ready file."""

    def __init__(self, proc: subprocess.Popen, record: Dict[str, object], log: Path) -> None:
        self.proc = proc
        self.record = record
        self.log = log
        self.node_id = str(record["node_id"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Cluster:
    """A head and raylets sharing one GCS on loopback."""

    def __init__(self, temp_dir: Path) -> None:
        if not RAYGO_BIN.exists():
            pytest.fail(f"{RAYGO_BIN} not found: run `make build` first (or set RAYGO_BIN)")
        self.temp_dir = temp_dir
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # The head's dashboard port (/metrics): a free one, so clusters never compete for 8265.
        self.dashboard_port = free_port()
        self.nodes: List[Node] = []

    def _start(self, args: List[str]) -> Node:
        ready = self.temp_dir / f"ready-{uuid.uuid4().hex[:8]}.json"
        log = ready.with_suffix(".out")
        cmd = [str(RAYGO_BIN), "start", "--block", "--temp-dir", str(self.temp_dir), "--ready-file", str(ready), *args]
        with open(log, "wb") as out:
            proc = subprocess.Popen(_die_with_parent(cmd), stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                record = json.loads(ready.read_text())
                break
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"{' '.join(cmd)} did not come up (exit status {proc.wait()}):\n{log.read_text()}")
            time.sleep(0.05)
        node = Node(proc, record, log)
        self.nodes.append(node)
        return node

    def start_head(self, *args: str) -> Node:
        if "--dashboard-port" not in args:
            args = ("--dashboard-port", str(self.dashboard_port), *args)
        return self._start(["--head", "--port", str(self.port), *args])

    def add_node(self, *args: str) -> Node:
        return self._start(["--address", self.address, *args])

    def remove_node(self, node: Node) -> None:
        node.stop()
        self.nodes.remove(node)

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()
        self.nodes.clear()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Head (4 CPUs, zone a) + three raylets (4 CPUs each; zones b, c, c; the last one spot)."""
    c = Cluster(tmp_path_factory.mktemp("raygo"))
    try:
        c.start_head("--num-cpus", "4", "--labels", "zone=a", "--job-lease-timeout", f"{JOB_LEASE_TIMEOUT_S}s")
        c.add_node("--num-cpus", "4", "--labels", "zone=b", "--node-name", "worker-1")
        c.add_node("--num-cpus", "4", "--labels", "zone=c", "--node-name", "worker-2")
        c.add_node("--num-cpus", "4", "--labels", "zone=c,market=spot", "--node-name", "worker-3")
        yield c
    finally:
        c.stop()


def alive_cpus() -> float:
    return sum(n["Resources"].get("CPU", 0.0) for n in raygo.nodes() if n["Alive"])


def remove_every_live_group() -> None:
    for row in placement_group_table().values():
        if row["state"] != "REMOVED":
            remove_placement_group(PlacementGroup(PlacementGroupID.from_hex(row["placement_group_id"])))


@pytest.fixture(autouse=True)
def disconnected_after_each_test() -> Iterator[None]:
    """A test that fails while connected does not leave the next one connected."""
    yield
    raygo.shutdown()


@pytest.fixture
def driver(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """This process connected as a driver in a namespace of its own; afterwards every live
    group is removed and the cluster's CPUs are all free again, so tests do not interfere.
    """
    monkeypatch.setenv("RAYGO_ADDRESS", cluster.address)
    raygo.init(namespace=f"test-{uuid.uuid4().hex[:8]}")
    try:
        yield cluster
    finally:
        if not raygo.is_initialized():
            raygo.init(namespace="cleanup")
        remove_every_live_group()
        poll("every CPU free after the test", lambda: raygo.available_resources().get("CPU") == alive_cpus())
        raygo.shutdown()


def start_auth_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Tuple[Cluster, str, Path]:
    """Starts a head (start flags args) with RAYGO_AUTH_MODE=token and a new cluster token in
    RAYGO_AUTH_TOKEN, HOME a new directory (so no token file but the test's); returns the
    cluster, the token and HOME. The caller stops the cluster."""
    token = secrets.token_hex(32)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RAYGO_AUTH_MODE", "token")
    monkeypatch.setenv("RAYGO_AUTH_TOKEN", token)
    monkeypatch.delenv("RAYGO_AUTH_TOKEN_PATH", raising=False)
    cluster = Cluster(tmp_path / "cluster")
    cluster.temp_dir.mkdir()
    cluster.start_head(*args)
    return cluster, token, home


def run_driver(cluster: Cluster, code: str, *extra_env: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs code as a separate driver process (RAYGO_ADDRESS set) and returns its result."""
    env = dict(os.environ, RAYGO_ADDRESS=cluster.address, PYTHONUNBUFFERED="1")
    for item in extra_env:
        key, _, value = item.partition("=")
        env[key] = value
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )


def nodes_by_id() -> Dict[str, Dict[str, object]]:
    return {n["NodeID"]: n for n in raygo.nodes() if n["Alive"]}


def table_state(pg: PlacementGroup) -> Optional[str]:
    return placement_group_table(pg).get("state")
