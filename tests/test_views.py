"""Fleet views (docs/plugins.md, "Fleet views"): every built-in fleet-level plugin declares
the part of each service's plan it reads, and the render engine caches its output on
those views. ``assert_view_holds`` checks each declaration on a fleet edited in many ways:
wherever the views stay the same, the output must too (else the cache would serve a stale
file). The edits are those a platform team makes every day, and a threshold change (the
bench's incremental edit) must leave every view as it was."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.fleet import make_fleet
from obs_iac.lint.engine import LintInputs
from obs_iac.plan.views import numbers_masked
from obs_iac.testing import ScopeFleet, ViewResult, assert_view_holds, compile_workspace
from tests.test_scope import GENERATORS, RULES

INPUTS = LintInputs(today=dt.date(2026, 6, 1))
EDITED = "svc_00001.py"


def _fleet_level(plugin: Any) -> bool:
    scope = getattr(plugin, "scope", "fleet")
    if hasattr(plugin, "code"):
        return scope == "plan"
    return scope == "fleet" or getattr(plugin, "generate_fleet", None) is not None


FLEET_LEVEL = {
    name: plugin for name, plugin in {**GENERATORS, **RULES}.items() if _fleet_level(plugin)
}


def test_every_builtin_fleet_level_plugin_declares_a_view() -> None:
    # Without one, any edit to any service would assemble the whole plan and rerun it.
    assert FLEET_LEVEL, "no fleet-level plugin found"
    missing = [name for name, p in FLEET_LEVEL.items() if getattr(p, "fleet_view", None) is None]
    assert missing == []


def _sub(pattern: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        edited, count = re.subn(pattern, new, text, count=1)
        assert count == 1, f"{pattern!r} not found in {EDITED}"
        return edited

    return edit


def _add_suppression(text: str) -> str:
    text = text.replace("from obs_iac import GpuFleet, service", "from obs_iac import *", 1)
    return text.replace(
        "    gpu=GpuFleet(",
        "    suppress=[Suppression(code='promql/label-flow', reason='known', "
        "until='2026-01-01')],\n    gpu=GpuFleet(",
        1,
    )


def _switch_wiring(text: str) -> str:
    otlp = '"resource_attributes": "prometheus-otlp",'
    if otlp in text:
        return text.replace(otlp, '"resource_attributes": "collector-exporter",', 1)
    text = re.sub(r'\s*"collector_metrics_target": "[^"]+",', "", text, count=1)
    return text.replace('"resource_attributes": "collector-exporter",', otlp, 1)


EDITS: dict[str, Callable[[str], str]] = {
    "threshold": _sub(r"profiling=", "temperature_limit_celsius=91,\n        profiling="),
    "slo objective": _sub(r"objective=99\.0", "objective=98.5"),
    "freshness": _sub(r'max_age="[^"]+"', 'max_age="2h"'),
    "team": _sub(r'team="[^"]+"', 'team="team-99"'),
    "description": _sub(r'objective="[^"]+"', 'objective="A renamed synthetic service"'),
    "runbook": _sub(r"runbooks\.example\.com", "wiki.example.com"),
    "rank prefix": _sub(r'"rank_prefix": "[^"]+"', '"rank_prefix": "pytorch-rank-prefix"'),
    "log extracts": _sub(r'"extract": \([^)]*\)', '"extract": ("xid",)'),
    "extra fields": _sub(r"extra_fields=\(", "extra_fields=('DCGM_FI_DEV_SM_CLOCK', "),
    "wiring": _switch_wiring,
    "sla id": _sub(r'sla_id="[^"]+"', 'sla_id="svc_renamed"'),
    "name": _sub(r'name="svc-00001"', 'name="svc-00001-b"'),
    "expired suppression": _add_suppression,
}


@pytest.fixture(scope="module")
def base_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fleet(tmp_path_factory.mktemp("views") / "repo", 6)


@pytest.fixture(scope="module")
def base_fleet(base_repo: Path) -> ScopeFleet:
    return compile_workspace(base_repo)


@pytest.fixture(scope="module")
def results(
    base_repo: Path, base_fleet: ScopeFleet, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], ViewResult]:
    """(edit, plugin) -> what assert_view_holds found; it raises on a broken contract."""
    out: dict[tuple[str, str], ViewResult] = {}
    for label, edit in [*EDITS.items(), ("removed service", None)]:
        root = tmp_path_factory.mktemp("edited") / "repo"
        shutil.copytree(base_repo, root)
        target = root / "blueprints" / EDITED
        if edit is None:
            target.unlink()
        else:
            target.write_text(edit(target.read_text()))
        edited = compile_workspace(root)
        for name, plugin in FLEET_LEVEL.items():
            out[(label, name)] = assert_view_holds(base_fleet, edited, plugin, lint_inputs=INPUTS)
    return out


@pytest.mark.parametrize("name", sorted(FLEET_LEVEL))
def test_view_holds_on_every_edit(name: str, results: dict[tuple[str, str], ViewResult]) -> None:
    mine = {edit: r for (edit, plugin), r in results.items() if plugin == name}
    assert len(mine) == len(EDITS) + 1
    # The bench's edit: a threshold moves, and no fleet-level plugin has to run again.
    assert mine["threshold"].views_equal, f"{name}: a threshold edit changes its view"
    # And the view is not a constant: removing a service always changes it.
    assert not mine["removed service"].views_equal


def test_views_follow_what_each_plugin_reads(results: dict[tuple[str, str], ViewResult]) -> None:
    def changed(edit: str) -> set[str]:
        return {p for (e, p), r in results.items() if e == edit and not r.views_equal}

    assert {"alloy", "promtail", "logs/sla-stream-label"} <= changed("rank prefix")
    assert "otel-wiring" in changed("wiring")
    assert "grafana-dashboards" in changed("description")
    assert "lint/expired-suppression" in changed("expired suppression")
    # The inhibit analysis reads alert labels, which carry the team.
    assert {"alertmanager-operator", "inhibit-matrix", "inhibit/cycle"} <= changed("team")
    # A view that changed where the output did not is only a cache miss; where the output
    # changed the view must have (assert_view_holds): some edits must change output.
    assert any(not r.output_equal for r in results.values())


@pytest.mark.parametrize(
    ("expr", "masked"),
    [
        ("DCGM_FI_DEV_GPU_TEMP > 85", "DCGM_FI_DEV_GPU_TEMP > N"),
        ('x{gpu="7"} >= 1.5e3', 'x{gpu="7"} >= N'),
        ("rate(x_total[5m]) * 100 > 0.25", "rate(x_total[5m]) * N > N"),
        ("topk(10, sum by (job) (up))", "topk(N, sum by (job) (up))"),
        (
            "histogram_quantile(0.99, rate(h_bucket[1h30m]))",
            "histogram_quantile(N, rate(h_bucket[1h30m]))",
        ),
        ("a:rate5m offset 1d < .5", "a:rate5m offset 1d < N"),
        # Where a string could hide a quote, nothing is masked: a wider view is safe.
        ("x{a='1'} > 2", "x{a='1'} > 2"),
        ('x{a="1\\"2"} > 3', 'x{a="1\\"2"} > 3'),
        ("x > 2 # comment 3", "x > 2 # comment 3"),
    ],
)
def test_numbers_are_masked_only_outside_strings(expr: str, masked: str) -> None:
    assert numbers_masked(expr) == masked
