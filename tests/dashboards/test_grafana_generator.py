"""The grafana-dashboards generator: structure, drill-down order, variables, stable ids."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from obs_iac.diagnostics import InputError
from obs_iac.generators.grafana.generator import (
    FLEET_UID,
    GrafanaDashboardsConfig,
    fleet_dashboard,
    service_dashboard,
)
from obs_iac.generators.grafana.layout import stable_uid
from obs_iac.labels import LabelNaming
from obs_iac.pipeline import Render
from obs_iac.render.serialize import serialize
from tests.dashboards.helpers import metric, panel, row, with_metrics

NAMING = LabelNaming()
SETTINGS = GrafanaDashboardsConfig()


def content_panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def test_both_examples_and_the_fleet_get_a_dashboard(boards: dict[str, dict]) -> None:
    assert set(boards) == {"obs-iac-recomm-v2", "obs-iac-image-classify-v3", FLEET_UID}


def test_dashboards_are_raw_modern_json(boards: dict[str, dict]) -> None:
    for uid, board in boards.items():
        assert "dashboard" not in board, "file provisioning wants the raw object"
        assert board["title"].strip()
        assert board["schemaVersion"] >= 36
        assert board["graphTooltip"] == 1, "shared crosshair"
        assert "id" not in board
        for p in board["panels"]:
            if p["type"] == "row":
                continue
            assert p["fieldConfig"]["defaults"]["unit"], f"{uid}: {p['title']} has no unit"
            ds = p["datasource"]
            assert set(ds) == {"type", "uid"} and ds["uid"].startswith("${ds_"), ds
            for target in p["targets"]:
                assert target["datasource"]["uid"] == ds["uid"]
                # grafanalib's legacy keys are gone
                assert not {"step", "intervalFactor", "metric", "target"} & set(target)
        names = [a["name"] for a in board["annotations"]["list"]]
        assert "Firing alerts" in names


def test_per_sla_dashboard_filters_by_variables(boards: dict[str, dict]) -> None:
    board = boards["obs-iac-recomm-v2"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["ds_prometheus"]["type"] == "datasource"
    assert variables["ds_prometheus"]["query"] == "prometheus"
    assert variables["business_sla_id"]["current"]["value"] == "recomm_v2"
    assert variables["resource_gpu_id"]["type"] == "query"
    has_logs = any(p.get("type") == "logs" for p in board["panels"])
    assert ("ds_loki" in variables) == has_logs, "a Loki variable exactly when there is a logs row"
    exprs = [t["expr"] for p in content_panels(board) for t in p["targets"]]
    # Constant reference lines (e.g. the step-time budget) select no series.
    selecting = [e for e in exprs if not e.startswith("vector(")]
    assert all('business_sla_id="$business_sla_id"' in e for e in selecting)
    assert not any("recomm_v2" in e for e in exprs), "the literal SLA id is parametrised"
    # The per-SLA waste series has no GPU label, so it must not be filtered by GPU.
    waste = [e for e in exprs if e.startswith("business_sla_id:gpu_waste")]
    assert waste and "resource_gpu_id" not in waste[0]
    util = [e for e in exprs if e.startswith("gpu:dcgm_gpu_utilization:ratio")]
    assert 'resource_gpu_id=~"$resource_gpu_id"' in util[0]


def test_outputs_provisioning_and_configmaps(rendered: Render) -> None:
    files = rendered.files
    prov = yaml.safe_load(files["grafana/provisioning/dashboards.yaml"])
    assert prov["apiVersion"] == 1
    (provider,) = prov["providers"]
    assert provider["type"] == "file" and provider["options"]["path"]
    for uid in ("obs-iac-recomm-v2", "obs-iac-image-classify-v3", FLEET_UID):
        raw = files[f"kubernetes/grafana-dashboards/{uid}.yaml"]
        assert len(raw) < 1024 * 1024
        cm = yaml.safe_load(raw)
        assert cm["kind"] == "ConfigMap"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"  # the string "1"
        assert cm["metadata"]["annotations"]["grafana_folder"] == "obs-iac"
        embedded = json.loads(cm["data"][f"{uid}.json"])
        assert embedded == json.loads(files[f"grafana/dashboards/{uid}.json"])


def _four_layer_plan(rendered: Render) -> tuple[Any, list[Any]]:
    plan = with_metrics(
        rendered.plan,
        metric("sla:slo_error_budget:ratio", "business_sla_id"),
        metric("rank:step_seconds:avg", "business_sla_id", "framework_pytorch_rank"),
    )
    svc = plan.service("recomm-v2")
    # Keep the real hardware rows; the other layers are synthetic so this test does not
    # depend on which packs are installed.
    hardware = [r for r in plan.dashboard_rows if r.service == svc.name and r.layer == "hardware"]
    extra = [
        row(
            svc.name,
            "logs",
            panel(
                "error-logs",
                '{business_sla_id="recomm_v2"} |= "error"',
                ds="loki",
                kind="logs",
                unit="short",
            ),
        ),
        row(
            svc.name,
            "framework",
            panel("step-time", 'rank:step_seconds:avg{business_sla_id="recomm_v2"}'),
        ),
        row(
            svc.name,
            "business",
            panel(
                "budget",
                'sla:slo_error_budget:ratio{business_sla_id="recomm_v2"}',
                unit="percentunit",
            ),
        ),
    ]
    return plan, [*extra, *hardware]


def test_rows_follow_drill_down_order(rendered: Render) -> None:
    plan, rows = _four_layer_plan(rendered)
    board = service_dashboard(plan, plan.service("recomm-v2"), rows, NAMING, SETTINGS)
    titles = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert [t.split(" ")[0] for t in titles] == ["Business", "Framework", "Hardware", "Logs"]
    ys = [p["gridPos"]["y"] for p in board["panels"]]
    assert ys == sorted(ys), "rows are stacked top to bottom in layer order"
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"ds_loki", "framework_pytorch_rank", "resource_gpu_id"} <= variables
    logs = next(p for p in board["panels"] if p["type"] == "logs")
    assert logs["datasource"] == {"type": "loki", "uid": "${ds_loki}"}
    assert logs["targets"][0]["expr"] == '{business_sla_id="$business_sla_id"} |= "error"'
    step = next(p for p in board["panels"] if p["title"] == "Step Time")
    assert 'framework_pytorch_rank=~"$framework_pytorch_rank"' in step["targets"][0]["expr"]


def _positions(board: dict[str, Any]) -> dict[str, tuple[int, dict[str, int]]]:
    return {p["title"]: (p["id"], p["gridPos"]) for p in board["panels"]}


def test_adding_a_panel_renumbers_nothing(rendered: Render) -> None:
    plan, rows = _four_layer_plan(rendered)
    svc = plan.service("recomm-v2")
    before = _positions(service_dashboard(plan, svc, rows, NAMING, SETTINGS))
    # A new panel at the end of the business row, and a whole new row further down.
    grown = [
        r.model_copy(update={"panels": (*r.panels, panel("burn", "vector(1)", unit="none"))})
        if r.layer == "business"
        else r
        for r in rows
    ]
    after = _positions(service_dashboard(plan, svc, grown, NAMING, SETTINGS))
    assert set(after) == set(before) | {"Burn"}
    for title, (pid, _grid) in before.items():
        assert after[title][0] == pid, f"{title} changed id"
    # Panels before the insertion point keep their place (a line's spare columns are
    # shared out, so a panel joining the line narrows its neighbours); ids are distinct.
    assert {k: after["Budget"][1][k] for k in "xy"} == {k: before["Budget"][1][k] for k in "xy"}
    assert len({pid for pid, _ in after.values()}) == len(after)


def test_uids_are_valid_stable_and_distinct_for_long_names() -> None:
    a = stable_uid("obs-iac", "a-very-long-service-name-that-goes-on-and-on-1")
    b = stable_uid("obs-iac", "a-very-long-service-name-that-goes-on-and-on-2")
    for uid in (a, b):
        assert re.fullmatch(r"[a-z0-9-]{1,40}", uid)
    assert a != b
    assert a == stable_uid("obs-iac", "a-very-long-service-name-that-goes-on-and-on-1")
    assert stable_uid("obs-iac", "recomm-v2") == "obs-iac-recomm-v2"


def test_fleet_overview_links_and_slo_table(rendered: Render) -> None:
    board = fleet_dashboard(rendered.plan, NAMING, SETTINGS)
    titles = {p["title"] for p in board["panels"]}
    assert {"GPU waste rate per SLA", "Top wasting services"} <= titles
    has_slo = rendered.plan.metric("business_sla_id_slo:slo_objective:ratio") is not None
    assert ("SLO status per SLA" in titles) == has_slo, "render what exists"
    urls = [link["url"] for link in board["links"] if link["type"] == "link"]
    assert "/d/obs-iac-recomm-v2?var-business_sla_id=recomm_v2" in urls
    assert "/d/obs-iac-image-classify-v3?var-business_sla_id=image_classify_v3" in urls
    if has_slo:
        table = next(p for p in board["panels"] if p["title"] == "SLO status per SLA")
        exprs = [t["expr"] for t in table["targets"]]
        # by (sla, slo): no __name__ column, so the merge joins the three queries' rows.
        assert exprs[0] == "max by (business_sla_id, slo) (business_sla_id_slo:slo_objective:ratio)"
        assert "slo_error_budget_remaining:ratio28d" in exprs[1]
        assert all(t["format"] == "table" and t["instant"] for t in table["targets"])
        assert not any("legendFormat" in t for t in table["targets"])
        merge, organize = table["transformations"]
        assert merge["id"] == "merge" and organize["id"] == "organize"
        assert organize["options"]["renameByName"] == {
            "business_sla_id": "SLA",
            "slo": "SLO",
            "Value #A": "Objective",
            "Value #B": "Budget left",
            "Value #C": "Burn rate 1h",
        }
        assert organize["options"]["excludeByName"] == {"Time": True, "__name__": True}
        units = {
            o["matcher"]["options"]: {p["id"]: p["value"] for p in o["properties"]}
            for o in table["fieldConfig"]["overrides"]
        }
        # A burn rate of 2 is "twice the sustainable rate", never 200 %.
        assert units["Burn rate 1h"]["unit"] == "none"
        assert units["Objective"]["unit"] == units["Budget left"]["unit"] == "percentunit"


def test_duplicate_panel_keys_are_an_input_error(rendered: Render) -> None:
    plan = rendered.plan
    svc = plan.service("recomm-v2")
    rows = [
        row(svc.name, "hardware", panel("same", "vector(1)")),
        row(svc.name, "framework", panel("same", "vector(2)"), pack="other"),
    ]
    with pytest.raises(InputError) as err:
        service_dashboard(plan, svc, rows, NAMING, SETTINGS)
    (diag,) = err.value.diagnostics
    assert diag.code == "dashboard/duplicate-panel-key"
    assert diag.location is not None and diag.location.file.endswith("recomm_v2.py")


def test_output_is_deterministic(rendered: Render) -> None:
    from obs_iac.pipeline import open_workspace, render
    from tests.dashboards.conftest import REPO

    again = render(open_workspace(REPO))
    dash = {k: v for k, v in rendered.files.items() if "grafana" in k}
    assert dash and dash == {k: v for k, v in again.files.items() if "grafana" in k}
    art = next(a for a in rendered.artifacts if a.path.endswith(f"{FLEET_UID}.json"))
    assert serialize(art) == rendered.files[art.path]


def test_configmap_over_the_limit_is_an_input_error(
    rendered: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    from obs_iac.generators.grafana import generator as gen

    monkeypatch.setattr(gen, "CONFIGMAP_LIMIT", 1000)
    board = fleet_dashboard(rendered.plan, NAMING, SETTINGS)
    with pytest.raises(InputError) as err:
        list(gen.GrafanaDashboardsGenerator()._artifacts([(board, ("b.py",))], SETTINGS))
    (diag,) = err.value.diagnostics
    assert diag.code == "dashboard/too-large"
    assert diag.location is not None and diag.location.file == "b.py"


def test_utf8_naming_quotes_labels_and_keeps_variable_names(tmp_path: Path) -> None:
    import re
    import shutil

    from obs_iac.config import RepoConfig
    from obs_iac.pipeline import open_workspace, render
    from obs_iac.promql import parse
    from tests.dashboards.conftest import REPO

    # The examples' hand-written inhibit edge spells labels classically; drop it here.
    shutil.copytree(REPO / "blueprints", tmp_path / "blueprints")
    # The examples' SLO series are declared with classic label names, as their repository
    # uses; drop that section for this UTF-8 render.
    for example in (tmp_path / "blueprints").glob("*.py"):
        text = re.sub(
            r"\n    inhibitions=Inhibitions\(.*?\n    \),", "", example.read_text(), flags=re.S
        )
        example.write_text(re.sub(r"\n    slo=\[.*?\n    \],", "", text, flags=re.S))
    config = RepoConfig(naming="utf8", alertmanager_min_version="0.27")
    result = render(open_workspace(tmp_path, config=config))
    board = next(a.data for a in result.artifacts if a.path.endswith("obs-iac-recomm-v2.json"))
    exprs = [
        t["expr"]
        for p in content_panels(board)
        if p["datasource"]["type"] == "prometheus"
        for t in p["targets"]
    ]
    assert any('"resource.gpu.id"=~"$resource_gpu_id"' in e for e in exprs)
    for expr in exprs:
        parse(expr)
    names = [v["name"] for v in board["templating"]["list"]]
    # Variable names stay classic (they are Grafana identifiers), whatever the label spelling.
    assert {"ds_prometheus", "business_sla_id", "resource_gpu_id"} <= set(names)
    assert all(name.isidentifier() for name in names)
