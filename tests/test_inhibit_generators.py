"""The operator CRDs (namespace matcher strategies), the review matrix, base-config errors."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from obs_iac import conventions
from obs_iac.cli import main
from obs_iac.config import RepoConfig
from obs_iac.diagnostics import InputError, Severity
from obs_iac.generators.alertmanager import (
    AlertmanagerConfig,
    AlertmanagerGenerator,
    AlertmanagerOperatorGenerator,
    InhibitMatrixGenerator,
    OperatorConfig,
)
from obs_iac.labels import LabelNaming
from obs_iac.packs.inhibit.analysis import AlertIndex
from obs_iac.packs.inhibit.lint import OperatorGlobal
from obs_iac.plan.model import AlertRule, Plan
from obs_iac.plugins import GeneratorContext, LintContext, NoConfig
from obs_iac.render.serialize import serialize
from tests.inhibit_support import ROOT, example_render


def gen_ctx(settings: Any, repo: RepoConfig | None = None, **inputs: str) -> GeneratorContext:
    return GeneratorContext(
        naming=LabelNaming(), repo=repo or RepoConfig(), settings=settings, inputs=inputs
    )


def operator(plan: Plan, **settings: Any) -> dict[str, Any]:
    arts = AlertmanagerOperatorGenerator().generate(plan, gen_ctx(OperatorConfig(**settings)))
    return {a.path: a for a in arts}


def test_on_namespace_routes_gpu_edges_to_the_global_config() -> None:
    plan = example_render().plan
    out = operator(plan)
    assert list(out) == [conventions.ALERTMANAGER_GLOBAL_INHIBIT_CRD]
    text = serialize(out[conventions.ALERTMANAGER_GLOBAL_INHIBIT_CRD]).decode()
    crd = yaml.safe_load(text)
    assert crd["kind"] == "AlertmanagerConfig"
    assert crd["apiVersion"] == "monitoring.coreos.com/v1alpha1"
    assert len(crd["spec"]["inhibitRules"]) == len(plan.inhibit_edges)
    first = crd["spec"]["inhibitRules"][0]
    assert {m["matchType"] for m in first["sourceMatch"]} <= {"=", "=~", "!=", "!~"}
    assert "no namespace label on GpuNodeDown" in text
    assert text.count("\n  # ") == len(plan.inhibit_edges)  # one explanation per edge


def test_strategy_none_keeps_edges_per_service() -> None:
    plan = example_render().plan
    out = operator(plan, matcher_strategy="None", namespace="team-gpu")
    assert sorted(out) == sorted(conventions.alertmanager_config_crd(s.name) for s in plan.services)
    for art in out.values():
        assert art.data["metadata"]["namespace"] == "team-gpu"
        svc = art.data["metadata"]["labels"]["app.kubernetes.io/part-of"]
        rules = art.data["spec"]["inhibitRules"]
        assert len(rules) == sum(1 for e in plan.inhibit_edges if e.service == svc)


def test_alerts_pinned_to_the_cr_namespace_stay_namespaced() -> None:
    plan = example_render().plan
    pinned = tuple(
        g.model_copy(
            update={
                "rules": tuple(
                    r.model_copy(update={"labels": {**r.labels, "namespace": "monitoring"}})
                    if isinstance(r, AlertRule)
                    else r
                    for r in g.rules
                )
            }
        )
        for g in plan.rule_groups
    )
    out = operator(plan.model_copy(update={"rule_groups": pinned}))
    assert conventions.ALERTMANAGER_GLOBAL_INHIBIT_CRD not in out
    assert len(out) == len(plan.services)


def test_operator_global_lint_good_and_bad() -> None:
    result = example_render()
    arts = result.artifacts

    def lint(repo: RepoConfig) -> list[Any]:
        ctx = LintContext(naming=LabelNaming(), repo=repo, settings=NoConfig())
        return list(OperatorGlobal().check(result.plan, arts, ctx))

    bad = lint(RepoConfig())
    assert len(bad) == len(result.plan.inhibit_edges)
    assert all(d.severity is Severity.INFO for d in bad)
    good = lint(RepoConfig(generators={"alertmanager-operator": {"matcher_strategy": "None"}}))
    assert good == []


def test_matrix_cells_come_from_the_edges() -> None:
    plan = example_render().plan
    (art,) = InhibitMatrixGenerator().generate(plan, gen_ctx(NoConfig()))
    text = art.data
    index = AlertIndex.of_plan(plan)
    for edge in plan.inhibit_edges:
        assert f"`{edge.name}`" in text
    for svc in plan.services:
        assert f"## {svc.name}" in text
    section = text.split("## recomm-v2")[1]
    header = next(line for line in section.splitlines() if line.startswith("| source"))
    cols = [c.strip() for c in header.strip("|").split("|")][1:]
    row = next(line for line in section.splitlines() if line.startswith("| **GpuNodeDown**"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    node_edge = next(
        e
        for e in plan.inhibit_edges
        if e.name == "gpu-node-down-mutes-gpu-alerts" and e.service == "recomm-v2"
    )
    targets = {a.name for a in index.targets(node_edge)}
    for col, cell in zip(cols, cells, strict=True):
        assert (cell == "`business_sla_id`, `host_name`") == (col in targets), col
    # coverage: every critical alert listed, with who inhibits it
    assert "| GpuXidError | GpuNvlinkThroughputDrop (gpu-fault-mutes-gpu-symptoms)" in section


def test_base_config_must_stay_in_the_repo() -> None:
    for bad in ("../alertmanager.yml", "/etc/alertmanager/alertmanager.yml", "base.json"):
        with pytest.raises(ValueError):
            AlertmanagerConfig(base_config=bad)


def test_base_config_yaml_error_is_located() -> None:
    settings = AlertmanagerConfig(base_config="am/base.yml")
    ctx = gen_ctx(settings, **{"am/base.yml": "route:\n  receiver: [unclosed\n"})
    with pytest.raises(InputError) as err:
        list(AlertmanagerGenerator().generate(example_render().plan, ctx))
    (diag,) = err.value.diagnostics
    assert diag.location is not None and diag.location.file == "am/base.yml"
    assert diag.location.line is not None


def test_missing_base_config_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "blueprints", tmp_path / "blueprints")
    (tmp_path / "obs-iac.toml").write_text(
        'output = "out"\n[generators.alertmanager]\nbase_config = "nope/alertmanager.yml"\n'
    )
    result = CliRunner().invoke(main, ["--root", str(tmp_path), "render"])
    assert result.exit_code == 2, result.output
    assert "nope/alertmanager.yml" in result.output
    assert not (tmp_path / "out").exists()


def test_utf8_label_names_need_alertmanager_0_27() -> None:
    plan = example_render().plan
    edge = plan.inhibit_edges[0].model_copy(update={"equal": ("business.sla_id",)})
    dotted = plan.model_copy(update={"inhibit_edges": (edge,)})
    old = gen_ctx(AlertmanagerConfig())
    with pytest.raises(InputError, match="rejects label names"):
        list(AlertmanagerGenerator().generate(dotted, old))
    new = gen_ctx(AlertmanagerConfig(), repo=RepoConfig(alertmanager_min_version="0.27"))
    (art,) = AlertmanagerGenerator().generate(dotted, new)
    assert "- business.sla_id" in art.data


def test_operator_rules_load_in_alertmanager(tmp_path: Path) -> None:
    """The operator turns each {name, value, matchType} into a matcher string; the same
    conversion must give a config amtool accepts, with the same rules as the plain file."""
    from tests.inhibit_support import MINIMAL, amtool_check

    plan = example_render().plan
    out = operator(plan)
    crd = yaml.safe_load(serialize(out[conventions.ALERTMANAGER_GLOBAL_INHIBIT_CRD]).decode())

    def matcher(m: dict[str, str]) -> str:
        value = m["value"].replace("\\", "\\\\").replace('"', '\\"')
        return f'{m["name"]}{m["matchType"]}"{value}"'

    rules = [
        {
            "source_matchers": [matcher(m) for m in r["sourceMatch"]],
            "target_matchers": [matcher(m) for m in r["targetMatch"]],
            "equal": r["equal"],
        }
        for r in crd["spec"]["inhibitRules"]
    ]
    plain = yaml.safe_load(example_render().files[conventions.ALERTMANAGER_INHIBIT_RULES].decode())
    assert rules == plain["inhibit_rules"]
    proc = amtool_check({**MINIMAL, "inhibit_rules": rules}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
