"""Prometheus 3's promtool (the current stack, built by `make tools`) on the committed output.

test_promtool.py checks everything with the floor's promtool 2.42. Here the same committed
files go through promtool 3, one call over many files: every rule file of generated/ and of
every golden case, a scrape config carrying every relabel fragment, and the unit tests of
the `utf8-naming` golden case. (The unit tests of generated/ are left to the floor: they
cost about a minute of CPU per promtool run.) That case quotes UTF-8 label names
(`{"business.sla_id"="..."}`), which only Prometheus 3 parses, so promtool 2.42 cannot
check it at all (asserted below); with promtool 3 its rules load and its tests pass.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.conftest import REPO
from tests.tools import require_tool

GOLDEN = Path(__file__).parent / "golden"
UTF8 = GOLDEN / "utf8-naming" / "expected" / "prometheus"


def _promtool(
    *args: str, stack: str = "current", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    tool = require_tool("promtool", "current" if stack == "current" else "floor")
    return subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


def _outputs() -> list[Path]:
    """generated/ and every golden case's expected tree."""
    return [REPO / "generated", *sorted(p / "expected" for p in GOLDEN.iterdir() if p.is_dir())]


def _rule_files() -> list[Path]:
    return [f for out in _outputs() for f in sorted((out / "prometheus/rules").glob("*.yml"))]


def test_the_utf8_case_is_among_the_files() -> None:
    files = _rule_files()
    assert UTF8 / "rules/llm-h100.rules.yml" in files
    assert REPO / "generated/prometheus/rules/recomm-v2.rules.yml" in files


def test_check_rules_on_every_committed_rule_file() -> None:
    files = _rule_files()
    result = _promtool("check", "rules", *map(str, files))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files)


def test_check_config_with_every_relabel_fragment(tmp_path: Path) -> None:
    jobs = []
    for number, out in enumerate(_outputs()):
        for fragment in sorted((out / "prometheus/relabel").glob("*.metric_relabel_configs.yml")):
            jobs.append(
                {
                    "job_name": f"dcgm-exporter-{number}-{fragment.name.split('.')[0]}",
                    "static_configs": [{"targets": ["10.0.0.1:9400"]}],
                    "metric_relabel_configs": yaml.safe_load(fragment.read_text())[
                        "metric_relabel_configs"
                    ],
                }
            )
    assert any("utf8" not in j["job_name"] for j in jobs) and len(jobs) >= 3
    config = {
        "global": {"scrape_interval": "30s", "evaluation_interval": "1m"},
        "rule_files": [str(p) for p in _rule_files()],
        "scrape_configs": jobs,
    }
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = _promtool("check", "config", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_utf8_naming_unit_tests_pass() -> None:
    tests = sorted(p.name for p in (UTF8 / "tests").glob("*.test.yml"))
    assert tests
    result = _promtool("test", "rules", *tests, cwd=UTF8 / "tests")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(tests)


def test_utf8_naming_unit_tests_catch_a_mutated_threshold(tmp_path: Path) -> None:
    copy = tmp_path / "prometheus"
    shutil.copytree(UTF8, copy)
    rules = copy / "rules/llm-h100.rules.yml"
    old = 'celsius{"business.sla_id"="llm_h100"} > 85'
    text = rules.read_text()
    assert text.count(old) == 1
    rules.write_text(text.replace(old, old.replace("> 85", "> 99")))
    result = _promtool("test", "rules", "llm-h100.test.yml", cwd=copy / "tests")
    assert result.returncode != 0
    assert "hot GPU fires" in result.stdout + result.stderr


def test_floor_promtool_cannot_load_utf8_names() -> None:
    """Why the utf8-naming case needs the current stack: promtool 2.42 rejects its rules."""
    result = _promtool("check", "rules", str(UTF8 / "rules/llm-h100.rules.yml"), stack="floor")
    assert result.returncode != 0
    assert 'parse error: unexpected string "\\"business.' in result.stdout + result.stderr
