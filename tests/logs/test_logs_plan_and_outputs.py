"""The plan's stage order and label discipline; Loki rules and the dashboard's logs row."""

from __future__ import annotations

import re

import yaml

from obs_iac.packs.logs import MAX_LABELS, RANK_LABEL, build_stages
from obs_iac.packs.logs.section import LogsSection
from obs_iac.pipeline import Render
from obs_iac.plan.model import (
    LabelDropStage,
    LabelsStage,
    LogPipeline,
    MultilineStage,
    StructuredMetadataStage,
)

ORDER = [
    "runtime",
    "rank-separation",
    "multiline",
    "extract",
    "labels",
    "structured-metadata",
    "drop",
    "limit",
]


def _pipeline(rendered: Render, service: str) -> LogPipeline:
    (pipeline,) = [p for p in rendered.plan.log_pipelines if p.service == service]
    return pipeline


def test_roles_follow_the_documented_order(rendered: Render) -> None:
    for pipeline in rendered.plan.log_pipelines:
        roles = [s.role for s in pipeline.stages]
        assert roles == sorted(roles, key=ORDER.index), pipeline.service
        assert roles[0] == "runtime"
        assert roles.index("rank-separation") < roles.index("multiline")


def test_temporary_rank_label_lives_only_around_multiline(rendered: Render) -> None:
    stages = _pipeline(rendered, "recomm-v2").stages
    set_at = next(
        i for i, s in enumerate(stages) if isinstance(s, LabelsStage) and RANK_LABEL in s.values
    )
    multiline = next(i for i, s in enumerate(stages) if isinstance(s, MultilineStage))
    dropped = next(
        i for i, s in enumerate(stages) if isinstance(s, LabelDropStage) and RANK_LABEL in s.names
    )
    metadata = next(
        i
        for i, s in enumerate(stages)
        if isinstance(s, StructuredMetadataStage) and "framework_pytorch_rank" in s.values
    )
    assert set_at < multiline < dropped < metadata


def test_stream_labels_are_bounded_and_few(rendered: Render) -> None:
    high = {"framework_pytorch_rank", "framework_pytorch_local_rank", "resource_gpu_id",
            "k8s_pod_name", "pod", "exception_class", RANK_LABEL}  # fmt: skip
    for pipeline in rendered.plan.log_pipelines:
        assert "business_sla_id" in pipeline.stream_labels
        assert len(pipeline.stream_labels) <= MAX_LABELS
        assert not high & set(pipeline.stream_labels)
        assert "k8s_pod_name" in pipeline.structured_metadata
        for name in pipeline.stream_labels:
            assert re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name)


def test_plan_is_agent_neutral_json(rendered: Render) -> None:
    dumped = rendered.plan.model_dump(mode="json")
    kinds = {s["kind"] for p in dumped["log_pipelines"] for s in p["stages"]}
    assert kinds <= {"runtime", "regex", "json", "multiline", "labels", "static_labels",
                     "label_drop", "structured_metadata", "drop", "limit"}  # fmt: skip


def test_no_runtime_stage_for_plain_files() -> None:
    stages = build_stages(LogsSection(runtime="none"), "x", "x")
    assert stages[0].role == "multiline"


def test_loki_rules_alert_on_cuda_oom_burst_per_sla(rendered: Render) -> None:
    doc = yaml.safe_load(rendered.files["loki/rules/recomm-v2.rules.yml"])
    (group,) = doc["groups"]
    rules = {r["alert"]: r for r in group["rules"]}
    assert rules["CudaOutOfMemoryBurst"]["expr"] == (
        'sum by (business_sla_id) (count_over_time({business_sla_id="recomm_v2"} '
        '|= "CUDA out of memory" [5m])) > 3'
    )
    assert "NcclWatchdogTimeout" in rules
    for rule in rules.values():
        _check_logql(rule["expr"])
        assert rule["annotations"]["runbook_url"].startswith("https://runbooks.example.com/")


def _check_logql(expr: str) -> None:
    """A structural LogQL check: balanced brackets outside strings, a stream selector with
    equality matchers, line filters with quoted strings, and a range inside the call."""
    depth = {"(": 0, "{": 0, "[": 0}
    closing = {")": "(", "}": "{", "]": "["}
    for token in re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr):
        if token in depth:
            depth[token] += 1
        elif token in closing:
            depth[closing[token]] -= 1
            assert depth[closing[token]] >= 0, expr
    assert all(v == 0 for v in depth.values()), expr
    selector = re.search(r"\{([^}]*)\}", expr)
    assert selector is not None
    for matcher in selector.group(1).split(", "):
        assert re.fullmatch(r'[a-zA-Z_][a-zA-Z0-9_]*(=|!=|=~|!~)"[^"]*"', matcher), matcher
    assert re.search(r'\} (\|= "[^"]+" )?\[\d+[smh]\]\)\)', expr), expr


def test_dashboard_logs_row_uses_loki_queries(rendered: Render) -> None:
    rows = [r for r in rendered.plan.dashboard_rows if r.layer == "logs"]
    assert {r.service for r in rows} == {"recomm-v2", "image-classify-v3"}
    for row in rows:
        kinds = {p.kind for p in row.panels}
        assert "logs" in kinds and "timeseries" in kinds
        for panel in row.panels:
            for query in panel.queries:
                assert query.datasource == "loki"
                assert '{business_sla_id="' in query.expr


def test_bounded_stream_labels_resolve_to_their_canonical_names() -> None:
    from obs_iac.logs_sim import run_pipeline
    from obs_iac.packs.logs import final_stream_labels

    section = LogsSection(
        runtime="none", stream_labels=("namespace", "k8s.container.name", "nccl_op_type")
    )
    labels = final_stream_labels(section)
    assert {"k8s_namespace_name", "k8s_container_name", "nccl_op_type"} <= set(labels)
    assert "namespace" not in labels
    line = (
        "[rank1]:[E131 12:10:09.456789012 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=7, OpType=BROADCAST, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600001 milliseconds before timing out."
    )
    (record,) = run_pipeline(
        build_stages(section, "x", "x"), [line], {"namespace": "ns", "container": "c"}
    )
    assert set(record.labels) == set(labels) - {"level"}
    assert record.labels["nccl_op_type"] == "BROADCAST"
    assert "nccl_op_type" not in record.metadata


def test_rendering_twice_gives_the_same_bytes(rendered: Render) -> None:
    from obs_iac.pipeline import open_workspace, render
    from tests.logs.logs_helpers import ROOT

    again = render(open_workspace(ROOT))
    ours = [p for p in rendered.files if p.startswith(("alloy/", "promtail/", "loki/"))]
    assert len(ours) == 6
    assert {p: again.files[p] for p in ours} == {p: rendered.files[p] for p in ours}
