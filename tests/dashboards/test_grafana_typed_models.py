"""Second opinion: every dashboard decodes through grafana-foundation-sdk's typed models
and loses no key on the way (see typed_models.py for what that proves)."""

from __future__ import annotations

import copy

import pytest

from obs_iac.generators.grafana.generator import GrafanaDashboardsConfig, service_dashboard
from obs_iac.labels import LabelNaming
from obs_iac.pipeline import Render
from tests.dashboards.typed_models import decode, lost_keys


def test_every_generated_dashboard_round_trips(boards: dict[str, dict]) -> None:
    for uid, board in boards.items():
        typed = decode(board)
        assert typed.uid == uid
        assert typed.schema_version == board["schemaVersion"]
        assert lost_keys(board) == [], uid


def test_four_layer_dashboard_round_trips(rendered: Render) -> None:
    from test_grafana_generator import _four_layer_plan

    plan, rows = _four_layer_plan(rendered)
    board = service_dashboard(
        plan, plan.service("recomm-v2"), rows, LabelNaming(), GrafanaDashboardsConfig()
    )
    assert lost_keys(board) == []


def test_unknown_and_misspelt_keys_are_reported(boards: dict[str, dict]) -> None:
    board = copy.deepcopy(boards["obs-iac-recomm-v2"])
    board["panels"][1]["gridpos"] = board["panels"][1].pop("gridPos")  # wrong case
    board["sharedCrosshair"] = True  # pre-schema-16 key
    lost = lost_keys(board)
    assert "panels/1/gridpos" in lost
    assert "sharedCrosshair" in lost


def test_structurally_wrong_json_does_not_decode(boards: dict[str, dict]) -> None:
    board = copy.deepcopy(boards["obs-iac-recomm-v2"])
    del board["panels"][1]["type"]
    with pytest.raises(KeyError):
        decode(board)


@pytest.mark.parametrize(
    "kind", ["timeseries", "stat", "table", "logs", "bargauge", "gauge", "heatmap"]
)
def test_every_panel_kind_round_trips(kind: str, rendered: Render) -> None:
    from tests.dashboards.helpers import panel, row

    plan = rendered.plan
    svc = plan.service("recomm-v2")
    ds = "loki" if kind == "logs" else "prometheus"
    expr = '{business_sla_id="recomm_v2"}' if ds == "loki" else "vector(1)"
    rows = [row(svc.name, "business", panel("p", expr, kind=kind, ds=ds, unit="percentunit"))]
    board = service_dashboard(plan, svc, rows, LabelNaming(), GrafanaDashboardsConfig())
    (content,) = [p for p in board["panels"] if p["type"] != "row"]
    assert content["type"] == kind
    assert content["fieldConfig"]["defaults"]["unit"] == "percentunit"
    assert lost_keys(board) == []
