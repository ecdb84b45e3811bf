"""The walk-through in examples/python runs against a cluster and uses only the public API."""

from __future__ import annotations

import ast

from conftest import ROOT, Cluster, run_driver

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
