"""dashboard/* lint rules: good (the generated examples) and bad cases per rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from obs_iac.diagnostics import Diagnostic
from obs_iac.labels import LabelNaming
from obs_iac.lint.dashboard import (
    DashboardGrid,
    DashboardLegendLabels,
    DashboardPanelIds,
    DashboardUid,
    DashboardVariables,
    dashboard_queries,
)
from obs_iac.pipeline import Render
from obs_iac.plugins import LintContext, LintRule, NoConfig, discover
from obs_iac.render.artifact import Artifact
from tests.dashboards.conftest import REPO

RULES: list[type[LintRule]] = [
    DashboardUid,
    DashboardPanelIds,
    DashboardGrid,
    DashboardVariables,
    DashboardLegendLabels,
]


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


def _panel(board: dict[str, Any], title: str) -> dict[str, Any]:
    return next(p for p in board["panels"] if p.get("title") == title)


def test_a_gap_at_the_end_of_a_line_is_reported(rendered: Render, board: dict[str, Any]) -> None:
    _panel(board, "GPU waste rate (idle share)")["gridPos"].update(w=10)
    diags = run(DashboardGrid, rendered, board_art(board))
    assert [d.message for d in diags] == [
        "row 'Hardware (DCGM)': the line at y=51 leaves columns 22-23 empty"
    ]


def test_a_short_panel_beside_a_tall_one_is_reported(
    rendered: Render, board: dict[str, Any]
) -> None:
    _panel(board, "GPU utilisation")["gridPos"].update(h=12)
    diags = run(DashboardGrid, rendered, board_art(board))
    assert any("differ in height (8, 12)" in d.message for d in diags)


def test_legend_naming_a_label_the_series_lacks(rendered: Render, board: dict[str, Any]) -> None:
    """The bug that made the per-SLA "GPU waste rate" legend read "/"."""
    target = _panel(board, "GPU waste rate (idle share)")["targets"][0]
    target["legendFormat"] = "{{host_name}}/{{resource_gpu_id}}"
    (diag,) = run(DashboardLegendLabels, rendered, board_art(board))
    assert diag.code == "dashboard/legend-labels"
    assert "names host_name, resource_gpu_id" in diag.message
    assert "(they have: business_sla_id)" in diag.message
    assert diag.location is not None and diag.location.file == "blueprints/x.py"


def test_legend_after_an_aggregation_follows_by(rendered: Render, board: dict[str, Any]) -> None:
    panel = _panel(board, "Stage time p95 (slowest rank)")
    assert run(DashboardLegendLabels, rendered, board_art(board)) == []
    panel["targets"][0]["legendFormat"] = "{{span_name}} rank {{framework_pytorch_rank}}"
    (diag,) = run(DashboardLegendLabels, rendered, board_art(board))
    assert "names framework_pytorch_rank" in diag.message
    assert "(they have: span_name)" in diag.message


def test_legend_on_an_unknown_series_is_not_judged(rendered: Render, board: dict[str, Any]) -> None:
    target = _panel(board, "GPU utilisation")["targets"][0]
    target["expr"] = "some_hand_written_metric"
    target["legendFormat"] = "{{anything}}"
    assert run(DashboardLegendLabels, rendered, board_art(board)) == []


def test_table_with_a_legend_or_a_column_that_is_not_there(
    rendered: Render, boards: dict[str, dict]
) -> None:
    fleet = copy.deepcopy(boards["obs-iac-fleet-overview"])
    assert run(DashboardLegendLabels, rendered, board_art(fleet)) == []
    table = _panel(fleet, "SLO status per SLA")
    table["targets"][0]["legendFormat"] = "Objective"
    organize = table["transformations"][1]["options"]
    organize["renameByName"]["cluster"] = "Cluster"
    diags = run(DashboardLegendLabels, rendered, board_art(fleet))
    assert [d.message for d in diags] == [
        "table panel 'SLO status per SLA': query A has the legend 'Objective', which a "
        "table never shows",
        "table panel 'SLO status per SLA': the column 'cluster' is no label of its queries' "
        "series (they have: business_sla_id, slo)",
    ]
