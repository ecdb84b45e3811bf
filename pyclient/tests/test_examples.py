"""The walk-through in examples/python runs against a cluster and uses only the public API."""

from __future__ import annotations

import ast
import subprocess

from conftest import RAYGO_BIN, ROOT, Cluster, run_driver, start_auth_cluster

EXAMPLES = sorted((ROOT / "examples" / "python").glob("*.py"))


def test_examples_use_only_the_public_api() -> None:
    assert EXAMPLES
    for path in EXAMPLES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                assert not any(part.startswith("_") for part in name.split(".")[1:]), f"{path.name} imports {name}"


def test_placement_groups_walk_through(cluster: Cluster) -> None:
    result = run_driver(cluster, (ROOT / "examples" / "python" / "placement_groups.py").read_text())
    assert result.returncode == 0, result.stdout + result.stderr
    for strategy in ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"):
        assert f"\n{strategy}: CREATED" in result.stdout
    assert "Done: every group removed" in result.stdout


def test_autoscaling_example(tmp_path) -> None:
    """examples/python/autoscaling.py on the cluster of examples/autoscaler/local-gpu.yaml:
    the 8-GPU STRICT_PACK is placed on a node the autoscaler launched for it."""
    c = Cluster(tmp_path)
    try:
        c.start_head("--num-cpus", "2", "--autoscaling-config", str(ROOT / "examples" / "autoscaler" / "local-gpu.yaml"))
        result = run_driver(c, (ROOT / "examples" / "python" / "autoscaling.py").read_text(), timeout=180)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "GPU nodes before: none" in result.stdout
        assert "STRICT_PACK of 8 GPUs CREATED after" in result.stdout and "on 1 node(s)" in result.stdout
    finally:
        c.stop()
        # The nodes the autoscaler launched are their own sessions under the temp dir.
        subprocess.run([str(RAYGO_BIN), "stop", "--temp-dir", str(tmp_path), "--grace", "5s"], check=False, capture_output=True)


def test_placement_groups_walk_through_with_the_token(tmp_path, monkeypatch) -> None:
    """With auth on, the walk-through runs with RAYGO_AUTH_TOKEN and fails naming it without."""
    c, _, _ = start_auth_cluster(tmp_path, monkeypatch, "--num-cpus", "8")
    try:
        code = (ROOT / "examples" / "python" / "placement_groups.py").read_text()
        result = run_driver(c, code)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Done: every group removed" in result.stdout
        monkeypatch.delenv("RAYGO_AUTH_TOKEN")
        result = run_driver(c, code)
        assert result.returncode != 0 and "RAYGO_AUTH_TOKEN" in result.stderr, result.stdout + result.stderr
    finally:
        c.stop()
