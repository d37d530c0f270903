"""Every built-in lint rule: a docs page, and a good and a bad case that prove it works.

Cases live in tests/lint/<area>/<name>/{good,bad}.yml. A case folder may hold a
blueprint (``blueprint.py``, or ``good.blueprint.py``/``bad.blueprint.py``); the case is
then linted inside a throwaway repository built from it (for checks that need a plan:
collector sets, suppressions).
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata as md
import re
import shutil
from pathlib import Path

import pytest

from obs_iac.diagnostics import Severity
from obs_iac.lint.run import run_lint

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TODAY = dt.date(2026, 6, 1)
PYPROJECT = '[tool.obs-iac]\nblueprints = "blueprints"\noutput = "generated"\n'


def registered() -> dict[str, str]:
    """code -> entry point value, for every lint rule obs-iac itself registers."""
    out = {}
    for ep in md.entry_points(group="obs_iac.lint_rules"):
        if ep.dist is not None and ep.dist.name == "obs-iac":
            out[ep.name] = ep.value
    return out


def engine_rules() -> list[str]:
    return sorted(c for c, v in registered().items() if v.startswith("obs_iac.lint.checks."))


def lint_case(tmp_path: Path, code: str, kind: str) -> list[tuple[str, Severity, str]]:
    case = HERE / code
    blueprint = case / f"{kind}.blueprint.py"
    if not blueprint.exists():
        blueprint = case / "blueprint.py"
    root = tmp_path / "outside"
    root.mkdir()
    if blueprint.exists():
        (root / "pyproject.toml").write_text(PYPROJECT)
        (root / "blueprints").mkdir()
        shutil.copy(blueprint, root / "blueprints" / "svc.py")
    target = root / f"{kind}.yml"
    shutil.copy(case / f"{kind}.yml", target)
    # A blueprint per kind means the case is about the plan itself (e.g. suppressions):
    # lint the repository; otherwise lint the rule file (inside the repo if there is one).
    plan_case = (case / f"{kind}.blueprint.py").exists()
    result = run_lint(root, () if plan_case else (target,), TODAY)
    return [
        (d.code, d.severity, d.message)
        for d in result.diagnostics
        if d.severity >= Severity.WARNING
    ]


def test_every_engine_rule_is_registered() -> None:
    assert len(engine_rules()) >= 17


@pytest.mark.parametrize("code", sorted(registered()))
def test_every_rule_has_a_docs_page(code: str) -> None:
    page = REPO / "docs" / "lint" / f"{code}.md"
    assert page.is_file(), f"lint rule {code} has no docs page at {page.relative_to(REPO)}"


@pytest.mark.parametrize("code", engine_rules())
def test_docs_page_explains_fix_and_suppression(code: str) -> None:
    text = (REPO / "docs" / "lint" / f"{code}.md").read_text(encoding="utf-8")
    assert text.startswith(f"# {code}\n")
    for heading in ("## What", "## Why", "## How to fix", "## How to suppress"):
        assert heading in text, f"docs/lint/{code}.md lacks {heading!r}"


@pytest.mark.parametrize("code", engine_rules())
def test_bad_case_is_reported(code: str, tmp_path: Path) -> None:
    found = lint_case(tmp_path, code, "bad")
    assert any(c == code for c, _s, _m in found), f"{code}: bad.yml gave only {found}"


@pytest.mark.parametrize("code", engine_rules())
def test_good_case_is_clean(code: str, tmp_path: Path) -> None:
    found = lint_case(tmp_path, code, "good")
    assert found == [], f"{code}: good case should have no warnings or errors, got {found}"


def test_docs_index_lists_every_rule() -> None:
    index = (REPO / "docs" / "lint.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\(lint/([a-z0-9-]+/[a-z0-9-]+)\.md\)", index))
    assert set(engine_rules()) <= listed


def test_catalogue_counters_need_total_unless_exporter_native(tmp_path: Path) -> None:
    from obs_iac.lint.checks.naming import CounterTotal
    from obs_iac.lint.engine import LintInputs
    from obs_iac.pipeline import build_plan, open_workspace
    from obs_iac.plan.model import MetricSpec, MetricType
    from obs_iac.plugins import LintContext, NoConfig, discover

    ws = open_workspace(REPO)
    plan = build_plan(ws, discover(ws.config))
    extra = [
        MetricSpec(name=n, type=MetricType.COUNTER, unit="", labels=(), source=src)
        for n, src in (
            ("train_steps", "pytorch"),
            ("DCGM_FI_DEV_X", "dcgm"),
            ("ok_total", "x"),
            ("step_seconds_count", "x"),
            ("step_seconds_sum", "x"),
        )
    ]
    plan = plan.model_copy(update={"metrics": (*plan.metrics, *extra)})
    ctx = LintContext(ws.naming, ws.config, NoConfig(), LintInputs(include_plan=False))
    found = [d.object_path for d in CounterTotal().check(plan, (), ctx)]
    assert found == [("metrics", "train_steps")]
