"""dashboard/* lint rules: good (the generated examples) and bad cases per rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from obs_iac.diagnostics import Diagnostic
from obs_iac.labels import LabelNaming
from obs_iac.lint.dashboard import (
    DashboardGrid,
    DashboardPanelIds,
    DashboardUid,
    DashboardVariables,
    dashboard_queries,
)
from obs_iac.pipeline import Render
from obs_iac.plugins import LintContext, LintRule, NoConfig, discover
from obs_iac.render.artifact import Artifact
from tests.dashboards.conftest import REPO

RULES: list[type[LintRule]] = [DashboardUid, DashboardPanelIds, DashboardGrid, DashboardVariables]


def run(rule: type[LintRule], rendered: Render, *arts: Artifact) -> list[Diagnostic]:
    ctx = LintContext(naming=LabelNaming(), repo=None, settings=NoConfig())  # type: ignore[arg-type]
    return list(rule().check(rendered.plan, arts or rendered.artifacts, ctx))


def board_art(board: dict[str, Any], name: str = "x") -> Artifact:
    return Artifact(f"grafana/dashboards/{name}.json", "json", board, "test", ("blueprints/x.py",))


@pytest.fixture()
def board(boards: dict[str, dict]) -> dict[str, Any]:
    return copy.deepcopy(boards["obs-iac-recomm-v2"])


@pytest.mark.parametrize("rule", RULES)
def test_good_generated_dashboards_pass(rule: type[LintRule], rendered: Render) -> None:
    assert run(rule, rendered) == []


@pytest.mark.parametrize("rule", RULES)
def test_rule_is_registered_and_documented(rule: type[LintRule]) -> None:
    names = {p.name for p in discover().lint_rules}
    assert rule.code in names
    page = REPO / "docs" / "lint" / f"{rule.code}.md"
    assert page.is_file(), f"{rule.code} needs a docs page at {page}"
    assert rule.code in page.read_text()


@pytest.mark.parametrize("uid", ["has space", "x" * 41, "dots.are.bad", ""])
def test_bad_uid(uid: str, rendered: Render, board: dict[str, Any]) -> None:
    board["uid"] = uid
    (diag,) = run(DashboardUid, rendered, board_art(board))
    assert diag.code == "dashboard/uid"
    assert diag.location is not None and diag.location.file == "blueprints/x.py"


def test_duplicate_uid(rendered: Render, board: dict[str, Any]) -> None:
    diags = run(DashboardUid, rendered, board_art(board, "a"), board_art(board, "b"))
    assert [d.message for d in diags] == [
        f"grafana/dashboards/b.json: uid {board['uid']!r} is also used by grafana/dashboards/a.json"
    ]


def test_duplicate_panel_ids(rendered: Render, board: dict[str, Any]) -> None:
    board["panels"][2]["id"] = board["panels"][1]["id"]
    (diag,) = run(DashboardPanelIds, rendered, board_art(board))
    assert "share id" in diag.message


def test_panel_wider_than_grid(rendered: Render, board: dict[str, Any]) -> None:
    board["panels"][2]["gridPos"].update(x=12, w=13)
    diags = run(DashboardGrid, rendered, board_art(board))
    assert any("leaves the 24-column grid" in d.message for d in diags)


def test_overlapping_panels(rendered: Render, board: dict[str, Any]) -> None:
    board["panels"][2]["gridPos"].update(x=6)  # onto the first panel of the line
    diags = run(DashboardGrid, rendered, board_art(board))
    assert [d.message for d in diags if "overlap" in d.message]


def test_unused_variable(rendered: Render, board: dict[str, Any]) -> None:
    board["templating"]["list"].append(
        {"name": "cluster", "type": "custom", "query": "a,b", "hide": 0}
    )
    (diag,) = run(DashboardVariables, rendered, board_art(board))
    assert diag.message == "template variable 'cluster' is defined but no query uses it"


def test_unresolved_variable(rendered: Render, board: dict[str, Any]) -> None:
    board["panels"][1]["targets"][0]["expr"] += " * on() group_left vector($nope)"
    (diag,) = run(DashboardVariables, rendered, board_art(board))
    assert "$nope is referenced" in diag.message


def test_builtin_variables_resolve(rendered: Render, board: dict[str, Any]) -> None:
    board["panels"][1]["targets"][0]["expr"] = "rate(x[$__rate_interval])"
    assert run(DashboardVariables, rendered, board_art(board)) == []


def test_query_hook_lists_every_query(rendered: Render) -> None:
    queries = list(dashboard_queries(rendered.artifacts))
    kinds = {r.layer: r for r in rendered.plan.dashboard_rows}
    expected = {"prometheus"} | ({"loki"} if "logs" in kinds else set())
    assert {q.datasource for q in queries} == expected
    assert any(q.uid == "obs-iac-recomm-v2" and "gpu_waste" in q.expr for q in queries)


def test_docs_dir_has_no_orphan_pages() -> None:
    pages = {p.stem for p in (REPO / "docs" / "lint" / "dashboard").glob("*.md")}
    assert pages == {r.code.split("/")[1] for r in RULES}
