"""grafanalib is imported in the dashboard generator alone (design rule)."""

from __future__ import annotations

import ast

from tests.dashboards.conftest import REPO


def test_only_the_generator_imports_grafanalib() -> None:
    importers = set()
    for path in sorted((REPO / "obs_iac").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "grafanalib" or n.startswith("grafanalib.") for n in names):
                importers.add(path.relative_to(REPO).as_posix())
    assert importers == {"obs_iac/generators/grafana/generator.py"}
