"""User mistakes in the logs section: a located diagnostic and exit code 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BLUEPRINT = """from obs_iac import GpuFleet, service

service(
    name="svc-a",
    team="ml",
    sla_id="svc_a",
    objective="trains on time",
    runbook_base_url="https://runbooks.example.com/svc-a",
    gpu=GpuFleet(model="A100-SXM4-80GB", count=8, driver_version="535.129.03"),
    logs={{
        "runtime": "cri",
{body}
    }},
)
"""
FIRST_BODY_LINE = 12


def _run(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "blueprints").mkdir(exist_ok=True)
    (tmp_path / "blueprints" / "svc.py").write_text(BLUEPRINT.format(body=body))
    return subprocess.run(
        [sys.executable, "-m", "obs_iac.cli", "--root", str(tmp_path), "render", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("body", "code", "line", "words"),
    [
        (
            '        "format": "custom",\n        "record_start": r"^(?=\\d{4})\\S+",',
            "logs/invalid-regex",
            FIRST_BODY_LINE + 1,
            "lookahead",
        ),
        (
            '        "format": "custom",\n        "record_start": r"^\\d*",',
            "logs/invalid-regex",
            FIRST_BODY_LINE + 1,
            "matches the empty string",
        ),
        (
            '        "format": "custom",\n        "record_start": r"\\d{4}-\\d{2}-\\d{2} ",',
            "logs/unanchored-record-start",
            FIRST_BODY_LINE + 1,
            "not anchored",
        ),
        (
            '        "drop": ({"expression": r"^(a)\\1", "reason": "dup"},),',
            "logs/invalid-regex",
            FIRST_BODY_LINE,
            "backreference",
        ),
        (
            '        "static_labels": {"app.kubernetes.io/name": "trainer"},',
            "logs/invalid-label-name",
            FIRST_BODY_LINE,
            "not a valid Loki label name",
        ),
        (
            '        "stream_labels": ("framework.pytorch.rank",),',
            "logs/high-cardinality-label",
            FIRST_BODY_LINE,
            "must not be a Loki stream label",
        ),
        (
            '        "stream_labels": ("k8s.pod.name",),',
            "logs/high-cardinality-label",
            FIRST_BODY_LINE,
            "must not be a Loki stream label",
        ),
        (
            '        "stream_labels": ("resource_gpu_id",),',
            "logs/high-cardinality-label",
            FIRST_BODY_LINE,
            "must not be a Loki stream label",
        ),
        (
            '        "stream_labels": ("nccl_op_typo",),',
            "logs/unknown-key",
            FIRST_BODY_LINE,
            "nothing in this pipeline produces",
        ),
        (
            '        "incoming_labels": {"pod": "k8s.pod"},',
            "logs/unknown-key",
            FIRST_BODY_LINE,
            "not a canonical key",
        ),
        (
            '        "drop_labels": ("9lives",),',
            "logs/invalid-label-name",
            FIRST_BODY_LINE,
            "not a valid Loki label name",
        ),
        (
            '        "static_labels": {"business_sla_id": "other"},',
            "logs/reserved-label",
            FIRST_BODY_LINE,
            "set by the logs pack",
        ),
        (
            '        "static_labels": {f"extra_{i}": "x" for i in range(12)},',
            "logs/too-many-labels",
            FIRST_BODY_LINE,
            "Loki rejects more than 15",
        ),
    ],
)
def test_bad_logs_section_is_a_located_diagnostic(
    tmp_path: Path, body: str, code: str, line: int, words: str
) -> None:
    result = _run(tmp_path, body)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"[{code}]" in result.stderr
    assert f"blueprints/svc.py:{line}" in result.stderr
    assert words in result.stderr
    assert "help:" in result.stderr
    assert not (tmp_path / "generated").exists()


def test_good_section_renders_both_agents(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        '        "format": "custom",\n        "record_start": r"^(?P<level>[IWEF])\\d{4} ",',
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "generated" / "alloy" / "svc-a.alloy").is_file()
    assert (tmp_path / "generated" / "promtail" / "svc-a.yml").is_file()
