"""logs/sla-stream-label: good and bad cases, over the plan and over the agent files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from obs_iac.config import RepoConfig
from obs_iac.labels import LabelNaming
from obs_iac.packs.logs.lint import CODE, SlaStreamLabelRule
from obs_iac.pipeline import Render, open_workspace, render
from obs_iac.plan.model import LabelDropStage, StaticLabelsStage
from obs_iac.plugins import LintContext, NoConfig
from tests.logs.logs_helpers import ROOT

RULE = SlaStreamLabelRule()
CTX = LintContext(naming=LabelNaming(), repo=RepoConfig(), settings=NoConfig())


def _findings(rendered: Render) -> list[str]:
    return [d.message for d in RULE.check(rendered.plan, rendered.artifacts, CTX)]


def test_good_the_examples_keep_the_sla_label(rendered: Render) -> None:
    assert _findings(rendered) == []
    assert not [d for d in rendered.findings if d.code == CODE]


def test_bad_a_blueprint_that_drops_the_sla_label(tmp_path: Path) -> None:
    (tmp_path / "blueprints").mkdir()
    source = (ROOT / "blueprints" / "recomm_v2.py").read_text()
    marker = 'rank_prefix="pytorch-rank-prefix",'
    assert marker in source
    bad = source.replace(marker, marker + '\n        drop_labels=("business_sla_id",),')
    (tmp_path / "blueprints" / "recomm_v2.py").write_text(bad)
    result = render(open_workspace(tmp_path))
    found = [d for d in result.findings if d.code == CODE]
    assert len(found) == 1
    assert "without the business_sla_id stream label" in found[0].message
    assert found[0].location is not None and found[0].location.file == "blueprints/recomm_v2.py"


def test_bad_a_pipeline_with_another_services_sla(rendered: Render) -> None:
    pipeline = rendered.plan.log_pipelines[0]
    stages = tuple(
        StaticLabelsStage(role="labels", values={**s.values, "business_sla_id": "someone_else"})
        if isinstance(s, StaticLabelsStage)
        else s
        for s in pipeline.stages
    )
    plan = rendered.plan.model_copy(
        update={"log_pipelines": (pipeline.model_copy(update={"stages": stages}),)}
    )
    messages = [d.message for d in RULE.check(plan, (), CTX)]
    assert any("someone_else" in m for m in messages)
    # The other service now has no pipeline at all.
    assert any("has no log pipeline" in m for m in messages)


def test_bad_a_generated_file_that_loses_the_label(rendered: Render) -> None:
    arts = []
    for art in rendered.artifacts:
        if art.path == "alloy/recomm-v2.alloy":
            art = dataclasses.replace(
                art, data=art.data.replace('business_sla_id = "recomm_v2", ', "")
            )
        if art.path == "promtail/image-classify-v3.yml":
            data = art.data["scrape_configs"][0]
            stages = [*data["pipeline_stages"], {"labeldrop": ["business_sla_id"]}]
            art = dataclasses.replace(
                art, data={"scrape_configs": [{**data, "pipeline_stages": stages}]}
            )
        arts.append(art)
    messages = [d.message for d in RULE.check(rendered.plan, tuple(arts), CTX)]
    assert sorted(m.split(":")[0] for m in messages) == [
        "alloy/recomm-v2.alloy",
        "promtail/image-classify-v3.yml",
    ]


def test_no_pipelines_means_nothing_to_check(rendered: Render) -> None:
    plan = rendered.plan.model_copy(update={"log_pipelines": ()})
    assert list(RULE.check(plan, (), CTX)) == []


def test_label_drop_stage_in_plan_is_caught(rendered: Render) -> None:
    pipeline = rendered.plan.log_pipelines[0]
    stages = (*pipeline.stages, LabelDropStage(role="labels", names=("business_sla_id",)))
    plan = rendered.plan.model_copy(
        update={
            "log_pipelines": (
                pipeline.model_copy(update={"stages": stages}),
                *rendered.plan.log_pipelines[1:],
            )
        }
    )
    assert len(list(RULE.check(plan, (), CTX))) == 1


def test_rule_has_a_docs_page() -> None:
    page = ROOT / "docs" / "lint" / "logs" / "sla-stream-label.md"
    assert page.is_file()
    assert CODE in page.read_text()
