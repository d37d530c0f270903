"""Dashboard panel queries go through the same label flow as rules."""

from __future__ import annotations

from pathlib import Path

from obs_iac.lint.checks.dcgm import FieldNotCollected
from obs_iac.lint.checks.labels import DidYouMean
from obs_iac.lint.engine import LintInputs, corpus_for
from obs_iac.pipeline import build_plan, generate, open_workspace
from obs_iac.plugins import LintContext, NoConfig, discover
from obs_iac.render.artifact import Artifact


def board(expr: str) -> Artifact:
    data = {
        "uid": "x",
        "title": "x",
        "panels": [
            {
                "id": 1,
                "title": "GPU",
                "datasource": {"type": "prometheus", "uid": "${ds}"},
                "targets": [{"expr": expr, "refId": "A"}],
            }
        ],
    }
    return Artifact("grafana/dashboards/x.json", "json", data, "test", ("blueprints/recomm_v2.py",))


def test_panel_queries_are_checked(rendered: Path) -> None:
    ws = open_workspace(rendered)
    plugins = discover(ws.config)
    plan = build_plan(ws, plugins)
    artifacts = (
        *generate(ws, plan, plugins),
        board('avg by (gpu_id) (rate(DCGM_FI_DEV_SM_CLOCK{gpu_id=~"$gpu"}[$__rate_interval]))'),
    )
    ctx = LintContext(ws.naming, ws.config, NoConfig(), LintInputs())
    found = list(DidYouMean().check(plan, artifacts, ctx))
    assert {d.location.file for d in found if d.location} == {"generated/grafana/dashboards/x.json"}
    assert {d.message.split(":")[0] for d in found} == {"panel 'GPU' (A)"}
    missing = list(FieldNotCollected().check(plan, artifacts, ctx))
    assert [d.object_path[0] for d in missing] == ["recomm-v2"]
    assert corpus_for(plan, artifacts, ctx).units
