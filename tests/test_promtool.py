"""promtool on everything generated: rules load, generated unit tests pass, the relabel
fragment is a valid scrape config, and the generated tests can fail.

The utf8-naming golden case is left out: promtool 2.42 rejects UTF-8 label names. It is
checked and unit-tested with Prometheus 3's promtool in test_promtool_current.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from obs_iac import pipeline
from obs_iac.render.writer import write
from tests.conftest import REPO, golden_blueprints, make_repo
from tests.promtool_runs import assert_promtool_passes, promtool_test
from tests.tools import require_tool

GOLDEN = Path(__file__).parent / "golden"
PROMTOOL_CASES = ("examples", "no-profiling", "honor-labels")


def _promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("promtool"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh render of every promtool-compatible golden case, in one repo."""
    root = tmp_path_factory.mktemp("fresh")
    repo = make_repo(root / "repo", golden_blueprints("examples"))
    for case in PROMTOOL_CASES[1:]:
        for blueprint in (GOLDEN / case / "blueprints").glob("*.py"):
            shutil.copy(blueprint, repo / "blueprints" / blueprint.name)
    ws = pipeline.open_workspace(repo)
    write(ws.output, pipeline.render(ws).files)
    return ws.output


def _outputs(fresh: Path) -> list[Path]:
    return [REPO / "generated", fresh]


def test_fresh_render_covers_every_case(fresh: Path) -> None:
    rules = sorted(p.name for p in (fresh / "prometheus/rules").glob("*.yml"))
    assert rules == [
        "batch-l40s.rules.yml",
        "image-classify-v3.rules.yml",
        "inference-t4.rules.yml",
        "recomm-v2.rules.yml",
    ]


@pytest.mark.parametrize("which", ["repo", "fresh"])
def test_check_rules(fresh: Path, which: str) -> None:
    out = REPO / "generated" if which == "repo" else fresh
    files = sorted((out / "prometheus/rules").glob("*.yml"))
    assert files
    result = _promtool("check", "rules", *map(str, files))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files)


@pytest.mark.parametrize("which", ["repo", "fresh"])
def test_check_rules_in_prometheusrule_crds(fresh: Path, which: str, tmp_path: Path) -> None:
    out = REPO / "generated" if which == "repo" else fresh
    crds = sorted((out / "kubernetes/prometheusrules").glob("*.yaml"))
    assert crds
    extracted = []
    for crd in crds:
        doc = yaml.safe_load(crd.read_text())
        assert doc["kind"] == "PrometheusRule"
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        target = tmp_path / f"{crd.stem}.rules.yml"
        target.write_text(yaml.safe_dump(doc["spec"]))
        extracted.append(str(target))
    result = _promtool("check", "rules", *extracted)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("which", ["repo", "fresh"])
def test_generated_unit_tests_pass(fresh: Path, which: str) -> None:
    out = REPO / "generated" if which == "repo" else fresh
    tests = sorted((out / "prometheus/tests").glob("*.test.yml"))
    rules = sorted((out / "prometheus/rules").glob("*.yml"))
    # Every rule file has its tests (cases with their own evaluation step get their own file).
    assert {t.name.split(".")[0] for t in tests} == {r.name.split(".")[0] for r in rules}
    assert_promtool_passes(tests)


def test_every_alert_has_a_firing_and_a_silent_test(fresh: Path) -> None:
    for rules_file in sorted((fresh / "prometheus/rules").glob("*.yml")):
        service = rules_file.name.removesuffix(".rules.yml")
        groups = yaml.safe_load(rules_file.read_text())["groups"]
        alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
        firing: set[str] = set()
        silent: set[str] = set()
        for path in sorted((fresh / "prometheus/tests").glob(f"{service}.*test.yml")):
            for test in yaml.safe_load(path.read_text())["tests"]:
                for case in test["alert_rule_test"]:
                    (firing if case["exp_alerts"] else silent).add(case["alertname"])
        assert alerts == firing == silent, service


@pytest.mark.parametrize("which", ["repo", "fresh"])
def test_check_config_with_relabel_fragment(fresh: Path, which: str, tmp_path: Path) -> None:
    out = REPO / "generated" if which == "repo" else fresh
    fragments = sorted((out / "prometheus/relabel").glob("*.metric_relabel_configs.yml"))
    assert fragments
    jobs = []
    for fragment in fragments:
        relabel = yaml.safe_load(fragment.read_text())["metric_relabel_configs"]
        jobs.append(
            {
                "job_name": f"dcgm-exporter-{fragment.name.split('.')[0]}",
                "static_configs": [{"targets": ["10.0.0.1:9400"]}],
                "metric_relabel_configs": relabel,
            }
        )
    config = {
        "global": {"scrape_interval": "30s", "evaluation_interval": "1m"},
        "rule_files": [str(p) for p in sorted((out / "prometheus/rules").glob("*.yml"))],
        "scrape_configs": jobs,
    }
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = _promtool("check", "config", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_servicemonitor_relabelings_mirror_the_scrape_fragment(fresh: Path) -> None:
    camel = {"source_labels": "sourceLabels", "target_label": "targetLabel"}
    for fragment in sorted((fresh / "prometheus/relabel").glob("*.yml")):
        service = fragment.name.split(".")[0]
        plain = yaml.safe_load(fragment.read_text())["metric_relabel_configs"]
        monitor = fresh / f"kubernetes/servicemonitor-relabelings/{service}.yaml"
        twin = yaml.safe_load(monitor.read_text())["metricRelabelings"]
        assert twin == [{camel.get(k, k): v for k, v in rule.items()} for rule in plain]


@pytest.mark.parametrize(
    ("old", "new", "failing_case"),
    [
        # Raising the threshold: the "hot GPU fires" case must now fail.
        (
            'celsius{business_sla_id="recomm_v2"} > 85',
            'celsius{business_sla_id="recomm_v2"} > 99',
            "hot GPU fires",
        ),
        # Raising the idle bound above 60 %: the "busy GPU does not fire" case must fail.
        (
            'ratio{business_sla_id="recomm_v2"} < 0.1',
            'ratio{business_sla_id="recomm_v2"} < 0.7',
            "busy GPU does not fire",
        ),
    ],
)
def test_generated_tests_catch_a_mutated_threshold(
    fresh: Path, tmp_path: Path, old: str, new: str, failing_case: str
) -> None:
    copy = tmp_path / "prometheus"
    shutil.copytree(fresh / "prometheus", copy)
    rules = copy / "rules/recomm-v2.rules.yml"
    text = rules.read_text()
    assert text.count(old) == 1
    rules.write_text(text.replace(old, new))
    assert _promtool("check", "rules", str(rules)).returncode == 0
    test = copy / "tests/recomm-v2.test.yml"
    (verdict,) = promtool_test([test]).values()
    assert not verdict.passed
    assert failing_case in verdict.output
    # The untouched copy still passes, so the failure is the mutation's doing.
    rules.write_text(text)
    assert_promtool_passes([test])
