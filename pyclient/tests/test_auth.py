"""The cluster token (RAYGO_AUTH_MODE=token): a driver without it is refused with an
AuthenticationError naming RAYGO_AUTH_TOKEN; with it (in the environment or in the token
file) it places groups as usual and reads the state API."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

import raygo
from raygo.exceptions import AuthenticationError
from raygo.util import state
from raygo.util.placement_group import placement_group, remove_placement_group

from conftest import Cluster


def test_a_cluster_with_auth_refuses_a_driver_without_its_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = secrets.token_hex(32)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RAYGO_AUTH_MODE", "token")
    monkeypatch.setenv("RAYGO_AUTH_TOKEN", token)
    monkeypatch.delenv("RAYGO_AUTH_TOKEN_PATH", raising=False)
    cluster = Cluster(tmp_path / "cluster")
    cluster.temp_dir.mkdir()
    cluster.start_head("--num-cpus", "2")
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
    finally:
        raygo.shutdown()
        cluster.stop()
