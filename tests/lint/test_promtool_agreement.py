"""On syntax and file structure obs-iac must never accept what `promtool check rules`
rejects. The corpus (tests/lint/corpus/{good,bad}) is checked against the real promtool
in the same run, so the expectation is promtool's, not ours."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from obs_iac.lint.run import run_lint
from tests.tools import require_tool

CORPUS = Path(__file__).resolve().parent / "corpus"
FILES = sorted(CORPUS.glob("*/*.yml"))
STRUCTURAL = ("rules/structure", "rules/duplicate-group", "promql/syntax", "input/")


def promtool_accepts(path: Path) -> bool:
    tool = require_tool("promtool")
    proc = subprocess.run(
        [tool, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    return proc.returncode == 0


def structural_findings(path: Path, tmp_path: Path) -> list[str]:
    result = run_lint(tmp_path, (path,))
    return [
        f"{d.code}: {d.message}"
        for d in result.diagnostics
        if d.code.startswith(STRUCTURAL) and d.severity.label == "error"
    ]


def test_corpus_is_large_enough() -> None:
    assert len(FILES) >= 40
    assert len(list(CORPUS.glob("good/*.yml"))) >= 20
    assert len(list(CORPUS.glob("bad/*.yml"))) >= 20


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_agrees_with_promtool(path: Path, tmp_path: Path) -> None:
    accepted = promtool_accepts(path)
    # The folder says what the file is meant to show; promtool must agree with it, or the
    # case proves nothing.
    assert accepted == (path.parent.name == "good"), f"promtool disagrees with {path.name}"
    findings = structural_findings(path, tmp_path)
    if not accepted:
        assert findings, f"promtool rejects {path.name} but obs-iac lint accepts it"
    else:
        assert not findings, f"promtool accepts {path.name}; obs-iac reports {findings}"
