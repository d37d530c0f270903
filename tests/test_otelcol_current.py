"""The committed OpenTelemetry Collector configs load in the real collector (`make tools`'
otelcol, release 0.165.0): `otelcol validate` builds every pipeline, so an unknown
component type, a bad key or a dangling pipeline reference fails it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import REPO
from tests.tools import require_tool

GOLDEN = Path(__file__).parent / "golden"


def _configs() -> list[Path]:
    trees = [REPO / "generated", *sorted(p / "expected" for p in GOLDEN.iterdir() if p.is_dir())]
    return [c for tree in trees for c in sorted(tree.glob("otel/*/collector.yaml"))]


def _validate(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("otelcol", "current"), "validate", f"--config=file:{config}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_every_committed_collector_config_validates() -> None:
    configs = _configs()
    assert REPO / "generated/otel/recomm-v2/collector.yaml" in configs
    failures = {
        str(c.relative_to(REPO)): r.stdout + r.stderr
        for c in configs
        if (r := _validate(c)).returncode != 0
    }
    assert not failures, failures


def test_an_unknown_component_fails_validation(tmp_path: Path) -> None:
    config = REPO / "generated/otel/recomm-v2/collector.yaml"
    text = config.read_text()
    assert text.count("span_metrics/obs-iac-recomm-v2:") == 1
    broken = tmp_path / "collector.yaml"
    broken.write_text(text.replace("span_metrics/obs-iac-recomm-v2:", "spanmetricz/x:"))
    result = _validate(broken)
    assert result.returncode != 0
    assert "spanmetricz" in result.stdout + result.stderr
