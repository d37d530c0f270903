"""Patterns survive each output syntax byte for byte: Alloy strings and YAML."""

from __future__ import annotations

import pytest
import yaml

from obs_iac.generators.alloy import alloy_string, quoted, render_pipeline
from obs_iac.generators.promtail import scrape_config
from obs_iac.pipeline import Render
from obs_iac.plan.model import DropStage, LogPipeline, RegexStage, SourceRef, StaticLabelsStage
from obs_iac.render.artifact import Artifact
from obs_iac.render.serialize import serialize
from tests.logs.logs_helpers import (
    decode_alloy_string,
    parse_alloy_process,
    stages_from_alloy,
    stages_from_promtail,
)

TRICKY = [
    r"^\[rank(?P<rank>\d+)\]: Traceback \(most recent call last\):$",
    r'^"(?P<quoted>[^"\\]*(?:\\.[^"\\]*)*)"',
    r"^`(?P<tick>[^`]+)` \\ \x41\t",
    "^tab\there (?P<x>y)",
    r"^# not a comment: {braces} 'single' ${NOT_ENV}",
    r"^ünïcödé (?P<k>\p{Greek}+)",
    r"^\\\\server\\share$",
]


@pytest.mark.parametrize("value", [*TRICKY, "", "a\nb", "\x7f\x01", '\\"'])
def test_alloy_string_literals_round_trip(value: str) -> None:
    assert decode_alloy_string(alloy_string(value)) == value
    assert decode_alloy_string(quoted(value)) == value


def test_regexes_use_raw_strings_unless_they_hold_a_backtick() -> None:
    assert alloy_string(r"^\d+") == r"`^\d+`"
    assert alloy_string("^`x`") == '"^`x`"'


def _pipeline() -> LogPipeline:
    return LogPipeline(
        service="svc",
        sla_id="svc_sla",
        pack="test",
        stages=(
            *(RegexStage(role="extract", expression=p) for p in TRICKY),
            StaticLabelsStage(role="labels", values={"business_sla_id": "svc_sla"}),
            DropStage(role="drop", expression=TRICKY[1], source="a,b", reason="r"),
        ),
        stream_labels=("business_sla_id",),
        structured_metadata=(),
        source=SourceRef(file="blueprints/svc.py", line=1),
    )


def test_tricky_patterns_round_trip_through_alloy() -> None:
    text = render_pipeline(_pipeline(), ("loki.write.default.receiver",))
    label, attrs, _ = parse_alloy_process(text)
    assert label == "svc"
    assert attrs["forward_to"] == ["loki.write.default.receiver"]
    assert stages_from_alloy(text)[: len(TRICKY)] == [
        RegexStage(role="extract", expression=p) for p in TRICKY
    ]
    drop = stages_from_alloy(text)[-1]
    assert isinstance(drop, DropStage) and drop.expression == TRICKY[1] and drop.source == "a,b"


def test_tricky_patterns_round_trip_through_promtail_yaml() -> None:
    art = Artifact(
        "promtail/svc.yml",
        "yaml",
        {"scrape_configs": [scrape_config(_pipeline(), "/var/log/pods")]},
        "promtail",
    )
    text = serialize(art).decode()
    got = [s for s in stages_from_promtail(text) if isinstance(s, RegexStage)]
    assert [s.expression for s in got] == TRICKY


def test_generated_files_hold_exactly_the_planned_patterns(rendered: Render) -> None:
    for pipeline in rendered.plan.log_pipelines:
        planned = [
            getattr(s, "expression", None) or getattr(s, "firstline", None)
            for s in pipeline.stages
            if hasattr(s, "expression") or hasattr(s, "firstline")
        ]
        for reader, path in (
            (stages_from_alloy, f"alloy/{pipeline.service}.alloy"),
            (stages_from_promtail, f"promtail/{pipeline.service}.yml"),
        ):
            stages = reader(rendered.files[path].decode())
            got = [
                getattr(s, "expression", None) or getattr(s, "firstline", None)
                for s in stages
                if hasattr(s, "expression") or hasattr(s, "firstline")
            ]
            assert got == planned, path
            assert [type(s).__name__ for s in stages] == [type(s).__name__ for s in pipeline.stages]


def test_promtail_stage_items_have_one_key_each(rendered: Render) -> None:
    doc = yaml.safe_load(rendered.files["promtail/recomm-v2.yml"])
    (job,) = doc["scrape_configs"]
    assert job["job_name"] == "obs-iac/recomm-v2"
    assert all(len(item) == 1 for item in job["pipeline_stages"])
    keep = job["relabel_configs"][0]
    assert keep == {
        "source_labels": ["__meta_kubernetes_pod_label_business_sla_id"],
        "regex": "recomm_v2",
        "action": "keep",
    }
