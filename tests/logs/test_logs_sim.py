"""The simulator against the upstream stage tests it models (grafana/alloy
internal/component/loki/process/stages/*_test.go), plus the details the pack relies on."""

from __future__ import annotations

from obs_iac.logs_sim import Entry, run_stage
from obs_iac.plan.model import (
    LabelsStage,
    MultilineStage,
    RegexStage,
    RuntimeStage,
    StructuredMetadataStage,
)

START = MultilineStage(role="multiline", firstline="^START")


def _entries(*rows: tuple[str, str]) -> list[Entry]:
    return [Entry(line=line, labels={"value": v}, extracted={"value": v}) for line, v in rows]


def test_multiline_process_like_upstream() -> None:
    out = run_stage(
        START,
        _entries(
            ("not a start line before 1", "label"),
            ("not a start line before 2", "label"),
            ("START line 1", "label"),
            ("not a start line", "label"),
            ("START line 2", "label"),
            ("START line 3", "label"),
        ),
    )
    assert [e.line for e in out] == [
        "not a start line before 1",
        "not a start line before 2",
        "START line 1\nnot a start line",
        "START line 2",
        "START line 3",
    ]


def test_multiline_keeps_one_block_per_label_set_like_upstream() -> None:
    out = run_stage(
        START,
        _entries(
            ("START line 1", "one"),
            ("not a start line 1", "one"),
            ("START line 1", "two"),
            ("not a start line 2", "one"),
            ("START line 2", "two"),
            ("START line 2", "one"),
            ("not a start line 1", "one"),
        ),
    )
    got = sorted((e.labels["value"], e.line) for e in out)
    assert got == [
        ("one", "START line 1\nnot a start line 1\nnot a start line 2"),
        ("one", "START line 2\nnot a start line 1"),
        ("two", "START line 1"),
        ("two", "START line 2"),
    ]


def test_max_lines_flushes_and_the_rest_keeps_the_start_lines_labels() -> None:
    stage = MultilineStage(role="multiline", firstline="^START", max_lines=2)
    entries = _entries(("START a", "x"), ("b", "x"), ("c", "x"), ("START d", "x"))
    entries[0].extracted["rank"] = "7"
    out = run_stage(stage, entries)
    assert [e.line for e in out] == ["START a\nb", "c", "START d"]
    assert out[1].extracted["rank"] == "7"  # the old start line's data, as upstream


def test_regex_writes_every_named_group_and_empty_for_unmatched_ones() -> None:
    stage = RegexStage(role="extract", expression=r"^(?P<a>x)(?P<b>y)?")
    (entry,) = run_stage(stage, [Entry(line="xz")])
    assert entry.extracted == {"a": "x", "b": ""}
    (miss,) = run_stage(stage, [Entry(line="zz", extracted={"a": "kept"})])
    assert miss.extracted == {"a": "kept"}


def test_cri_joins_partial_lines_per_stream_and_passes_other_lines() -> None:
    lines = [
        "2024-01-31T12:00:00.000000001Z stderr P part one, ",
        "2024-01-31T12:00:00.000000002Z stdout F other stream",
        "2024-01-31T12:00:00.000000003Z stderr F part two",
        "not a cri line",
    ]
    out = run_stage(RuntimeStage(role="runtime", format="cri"), [Entry(line=x) for x in lines])
    assert [(e.labels.get("stream"), e.line) for e in out] == [
        ("stdout", "other stream"),
        ("stderr", "part one, part two"),
        (None, "not a cri line"),
    ]


def test_labels_and_structured_metadata_read_extracted_data() -> None:
    entry = Entry(line="x", labels={"pod": "p-1"}, extracted={"pod": "p-1", "rank": "3"})
    (out,) = run_stage(LabelsStage(role="labels", values={"tmp": "rank"}), [entry])
    assert out.labels == {"pod": "p-1", "tmp": "3"}
    (out,) = run_stage(
        StructuredMetadataStage(role="structured-metadata", values={"k8s_pod_name": "pod"}),
        [out],
    )
    # Alloy also moves a label named as a source into metadata.
    assert out.metadata == {"k8s_pod_name": "p-1"} and "pod" not in out.labels
