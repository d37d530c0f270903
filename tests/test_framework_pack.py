"""The framework pack: wiring, catalogue, rules, alerts (promtool), diagnostics."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from obs_iac import conventions
from obs_iac.cli import main
from obs_iac.conventions import FrameworkRecords as FR
from obs_iac.packs.framework import versions
from obs_iac.packs.framework.wiring import OtelWiring, encode_value
from obs_iac.pipeline import Render, open_workspace, render
from obs_iac.plan.model import AlertRule, Plan
from obs_iac.promql import parse, referenced_metrics
from tests.conftest import PYPROJECT
from tests.promtool_runs import assert_promtool_passes

REPO = Path(__file__).resolve().parent.parent

CANONICAL = (
    "business_sla_id",
    "host_name",
    "resource_gpu_id",
    "framework_pytorch_rank",
    "nccl_group_id",
    "nccl_rank",
)

BLUEPRINT = """\
from obs_iac import GpuFleet, service

service(
    name="trainer",
    team="ml",
    sla_id="trainer_v1",
    objective="Model trained nightly",
    runbook_base_url="https://runbooks.example.com/trainer",
    gpu=GpuFleet(
        model="A100-SXM4-80GB",
        count=16,
        driver_version="535.129.03",
    ),
    framework={{
{framework}
    }},
)
"""

DEFAULT_FRAMEWORK = """\
        "world_size": 16,
        "ranks_per_node": 8,
        "step_time_budget_seconds": 2.0,
"""


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is required under CI")
        pytest.skip(f"{name} is not installed")
    return path


def write_repo(
    root: Path, framework: str = DEFAULT_FRAMEWORK, prometheus: str | None = "2.55"
) -> Path:
    """A one-service repo. Prometheus 2.55 by default, where 'auto' takes the OTLP route
    these tests mostly look at; None leaves the repository floor (2.42)."""
    (root / "blueprints").mkdir(parents=True, exist_ok=True)
    (root / "blueprints" / "trainer.py").write_text(BLUEPRINT.format(framework=framework))
    if prometheus is not None:
        extra = f'prometheus_min_version = "{prometheus}"\n'
        (root / "pyproject.toml").write_text(PYPROJECT.format(extra=extra))
    return root


def render_repo(
    root: Path, framework: str = DEFAULT_FRAMEWORK, prometheus: str | None = "2.55"
) -> Render:
    return render(open_workspace(write_repo(root, framework, prometheus)))


def wiring_of(plan: Plan, service: str = "trainer") -> OtelWiring:
    (found,) = [w for w in plan.extensions["framework/otel-wiring"] if w.service == service]
    assert isinstance(found, OtelWiring)
    return found


def bad_json(root: Path, framework: str, prometheus: str | None = "2.55") -> list[dict[str, Any]]:
    write_repo(root, framework, prometheus)
    result = CliRunner().invoke(main, ["--root", str(root), "render", "--format", "json"])
    assert result.exit_code == 2, result.output
    payload = json.loads(result.stdout[result.stdout.index("{") :])
    diags: list[dict[str, Any]] = payload["diagnostics"]
    return diags


def line_of(root: Path, needle: str) -> int:
    lines = (root / "blueprints" / "trainer.py").read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if needle in text)


# -- catalogue and wiring ---------------------------------------------------------------


def test_catalogue_records_exact_spanmetrics_series(tmp_path: Path) -> None:
    result = render_repo(tmp_path)
    bucket = result.plan.metric("traces_span_metrics_duration_milliseconds_bucket")
    assert bucket is not None and bucket.type.value == "histogram"
    assert bucket.unit == "milliseconds"
    expected = {
        "le",
        "span_name",
        "service_name",
        "span_kind",
        "status_code",
        "job",
        "instance",
        # contrib >= 0.152 turns includeCollectorInstanceID on by default.
        "collector_instance_id",
        *CANONICAL,
    }
    assert set(bucket.labels) == expected
    calls = result.plan.metric("traces_span_metrics_calls_total")
    assert calls is not None and set(calls.labels) == expected - {"le"}
    for suffix in ("sum", "count"):
        assert result.plan.metric(f"traces_span_metrics_duration_milliseconds_{suffix}")
    # The seed's name is not what the connector emits.
    assert result.plan.metric("otel_span_duration_seconds_count") is None


def test_collector_version_and_gates_change_the_label_set(tmp_path: Path) -> None:
    old = render_repo(
        tmp_path / "a", DEFAULT_FRAMEWORK + '        "collector_version": "0.140.0",\n'
    )
    w = wiring_of(old.plan)
    assert "collector_instance_id" not in w.labels
    assert w.component_type == "spanmetrics"
    collector = yaml.safe_load(old.files[conventions.otel_collector_config("trainer")])
    assert list(collector["exporters"]) == ["otlphttp/obs-iac-trainer"]  # renamed in 0.144
    gated = render_repo(
        tmp_path / "b",
        DEFAULT_FRAMEWORK
        + '        "feature_gates": ["-connector.spanmetrics.includeCollectorInstanceID",'
        ' "+spanmetrics.statusCodeConvention.useOtelPrefix"],\n',
    )
    w = wiring_of(gated.plan)
    assert "collector_instance_id" not in w.labels
    assert "otel_status_code" in w.labels and "status_code" not in w.labels
    assert w.component_type == "span_metrics"
    collector = yaml.safe_load(gated.files[conventions.otel_collector_config("trainer")])
    assert list(collector["exporters"]) == ["otlp_http/obs-iac-trainer"]
    rules = gated.files[conventions.rule_file("trainer")].decode()
    assert 'otel_status_code="ERROR"' in rules


def test_seconds_unit_renames_series_and_drops_the_conversion(tmp_path: Path) -> None:
    result = render_repo(tmp_path, DEFAULT_FRAMEWORK + '        "duration_unit": "s",\n')
    assert result.plan.metric("traces_span_metrics_duration_seconds_bucket") is not None
    assert result.plan.metric("traces_span_metrics_duration_milliseconds_bucket") is None
    group = next(g for g in result.plan.rule_groups if g.pack == "framework")
    p95 = next(r for r in group.rules if getattr(r, "record", "") == FR.STAGE_P95)
    assert "/ 1000" not in p95.expr
    assert "traces_span_metrics_duration_seconds_bucket" in p95.expr


def test_custom_namespace_and_stages(tmp_path: Path) -> None:
    framework = DEFAULT_FRAMEWORK + textwrap.indent(
        '"spanmetrics_namespace": "train.spans",\n'
        '"stages": ["data_load", "forward", "backward", "grad.sync", "optimizer"],\n'
        '"allreduce_stage": "grad.sync",\n',
        " " * 8,
    )
    result = render_repo(tmp_path, framework)
    assert result.plan.metric("train_spans_calls_total") is not None
    rules = result.files[conventions.rule_file("trainer")].decode()
    # A dot in a stage is escaped for the regex, and the backslash doubled for PromQL.
    assert "grad\\\\.sync" in rules
    collector = yaml.safe_load(result.files[conventions.otel_collector_config("trainer")])
    (connector,) = collector["connectors"].values()
    assert connector["namespace"] == "train.spans"


def test_every_framework_query_parses_and_touches_only_catalogued_series(tmp_path: Path) -> None:
    result = render_repo(tmp_path)
    known = {m.name for m in result.plan.metrics}
    exprs = [
        (getattr(r, "record", None) or getattr(r, "alert", ""), r.expr)
        for g in result.plan.rule_groups
        if g.pack == "framework"
        for r in g.rules
    ]
    exprs += [
        (p.key, q.expr)
        for row in result.plan.dashboard_rows
        if row.layer == "framework"
        for p in row.panels
        for q in p.queries
    ]
    assert len(exprs) > 20
    for owner, expr in exprs:
        parse(expr)
        missing = referenced_metrics(expr) - known
        assert not missing, f"{owner} reads uncatalogued {sorted(missing)}"


def test_recorded_series_carry_the_labels_the_catalogue_says(tmp_path: Path) -> None:
    plan = render_repo(tmp_path).plan
    rank = plan.metric(FR.RANK_GPU_UTILIZATION)
    assert rank is not None and set(rank.labels) == set(CANONICAL)
    group = plan.metric(FR.GROUP_ALLREDUCE_P95)
    assert group is not None and set(group.labels) == {"business_sla_id", "nccl_group_id"}
    share = plan.metric(FR.STAGE_SHARE)
    assert share is not None and set(share.labels) == {*CANONICAL, "span_name"}


def test_env_file_percent_encodes_and_fixes_the_sla_id(tmp_path: Path) -> None:
    assert encode_value("a b,c=d%e") == "a%20b%2Cc%3Dd%25e"
    assert encode_value("recomm_v2") == "recomm_v2"
    result = render_repo(tmp_path)
    env = result.files[conventions.otel_env_file("trainer")].decode()
    line = next(x for x in env.splitlines() if x.startswith("OTEL_RESOURCE_ATTRIBUTES="))
    pairs = dict(p.split("=", 1) for p in line.split("=", 1)[1].split(","))
    assert pairs["business.sla_id"] == "trainer_v1"
    assert pairs["framework.pytorch.rank"] == "${RANK}"
    assert pairs["resource.gpu.id"] == "${OBS_IAC_GPU_ID}"
    assert "OTEL_SERVICE_NAME=trainer" in env


def test_launcher_exports_validated_attributes(tmp_path: Path) -> None:
    sh = require_tool("sh")
    result = render_repo(tmp_path)
    script = tmp_path / "launch.sh"
    script.write_bytes(result.files[conventions.otel_launcher_script("trainer")])
    env = {"PATH": os.environ["PATH"], "RANK": "9", "LOCAL_RANK": "1", "NODE_NAME": "node-2"}
    out = subprocess.run(
        [sh, str(script), "sh", "-c", 'echo "$OTEL_RESOURCE_ATTRIBUTES"'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pairs = dict(p.split("=", 1) for p in out.split(","))
    assert pairs == {
        "business.sla_id": "trainer_v1",
        "host.name": "node-2",
        "resource.gpu.id": "nvidia1",
        "framework.pytorch.rank": "9",
        "nccl.group_id": "dp0",
        "nccl.rank": "9",
        "service.instance.id": "node-2-rank9",
    }
    env["OBS_IAC_GPU_ID"] = "gpu-001"  # the red line: never a different value format
    failed = subprocess.run([sh, str(script), "true"], env=env, capture_output=True, text=True)
    assert failed.returncode == 64 and "resource.gpu.id" in failed.stderr


def test_otlp_path_emits_promotion_and_otlphttp_exporter(tmp_path: Path) -> None:
    result = render_repo(tmp_path)
    fragment = yaml.safe_load(result.files[conventions.prometheus_otlp_fragment()])
    assert fragment == {
        "otlp": {
            "promote_resource_attributes": sorted(
                [
                    "business.sla_id",
                    "framework.pytorch.rank",
                    "host.name",
                    "nccl.group_id",
                    "nccl.rank",
                    "resource.gpu.id",
                ]
            )
        }
    }
    collector = yaml.safe_load(result.files[conventions.otel_collector_config("trainer")])
    (exporter,) = collector["exporters"].values()
    assert exporter["metrics_endpoint"].endswith("/api/v1/otlp/v1/metrics")
    (connector,) = collector["connectors"].values()
    assert [d["name"] for d in connector["dimensions"]] == [
        "business.sla_id",
        "host.name",
        "resource.gpu.id",
        "framework.pytorch.rank",
        "nccl.group_id",
        "nccl.rank",
    ]
    assert connector["histogram"]["unit"] == "ms"
    pipelines = collector["service"]["pipelines"]
    (connector_id,) = collector["connectors"]
    assert any(connector_id in p.get("exporters", []) for p in pipelines.values())
    assert any(connector_id in p.get("receivers", []) for p in pipelines.values())
    assert conventions.prometheus_collector_scrape("trainer") not in result.files


def test_exporter_path_emits_resource_constant_labels_and_scrape(tmp_path: Path) -> None:
    result = render_repo(
        tmp_path, DEFAULT_FRAMEWORK + '        "resource_attributes": "collector-exporter",\n'
    )
    collector = yaml.safe_load(result.files[conventions.otel_collector_config("trainer")])
    (exporter,) = collector["exporters"].values()
    assert "business.sla_id" in exporter["resource_constant_labels"]["included"]
    scrape = yaml.safe_load(result.files[conventions.prometheus_collector_scrape("trainer")])
    assert scrape["scrape_configs"][0]["honor_labels"] is True
    assert conventions.prometheus_otlp_fragment() not in result.files
    assert "otel_scope_name" in wiring_of(result.plan).labels


def test_buckets_cover_four_times_the_budget(tmp_path: Path) -> None:
    result = render_repo(
        tmp_path,
        DEFAULT_FRAMEWORK.replace(
            '"step_time_budget_seconds": 2.0', '"step_time_budget_seconds": 20'
        ),
    )
    assert max(wiring_of(result.plan).buckets_ms) >= 80_000


# -- alerts, inhibition, dashboard ----------------------------------------------------------


def framework_alerts(plan: Plan) -> dict[str, AlertRule]:
    return {
        r.alert: r
        for g in plan.rule_groups
        if g.pack == "framework"
        for r in g.rules
        if isinstance(r, AlertRule)
    }


def test_alerts_have_routing_labels_and_both_kinds_of_tests(tmp_path: Path) -> None:
    alerts = framework_alerts(render_repo(tmp_path).plan)
    assert set(alerts) == {
        "TrainingDataLoaderStarvingGpu",
        "NcclAllreduceP95Regression",
        "TrainingStragglerRank",
        "TrainingStepTimeOverBudget",
        "NcclCollectiveErrors",
    }
    for alert in alerts.values():
        assert alert.labels["layer"] == "framework"
        assert {"severity", "team", "service"} <= set(alert.labels)
        kinds = {case.expect_firing for case in alert.tests}
        assert kinds == {True, False}, alert.alert


def test_cross_layer_join_is_tested_with_both_layers_and_a_label_mismatch(tmp_path: Path) -> None:
    alert = framework_alerts(render_repo(tmp_path).plan)["TrainingDataLoaderStarvingGpu"]
    assert "gpu:dcgm_gpu_utilization:ratio" not in alert.expr  # via the rank-level record
    mismatch = next(c for c in alert.tests if "resource_gpu_id" in c.name)
    assert not mismatch.expect_firing
    gpu = [s for s, _ in mismatch.input_series if s.startswith("DCGM_FI_DEV_GPU_UTIL")]
    spans = [s for s, _ in mismatch.input_series if s.startswith("traces_span_metrics")]
    assert gpu and spans
    assert all('resource_gpu_id="nvidia1"' in s for s in gpu)
    assert all('resource_gpu_id="nvidia0"' in s for s in spans)
    firing = next(c for c in alert.tests if c.expect_firing)
    assert firing.exp_labels["resource_gpu_id"] == "nvidia0"
    assert firing.exp_labels["span_name"] == "data_load"


def test_inhibit_edge_equal_labels_exist_on_both_sides(tmp_path: Path) -> None:
    plan = render_repo(tmp_path).plan
    edges = {e.name: e for e in plan.inhibit_edges if e.pack == "framework"}
    edge = edges["trainer-nccl-cause-inhibits-framework-slowness"]
    assert edge.equal == ("business_sla_id", "nccl_group_id")
    alerts = framework_alerts(plan)
    source = {m.value for m in edge.source_matchers if m.name == "alertname"}
    target = {m.value for m in edge.target_matchers if m.name == "alertname"}
    assert source == {"NcclCollectiveErrors|TrainingStragglerRank"}
    # The step-time budget page is never muted by a lower-severity cause.
    assert target == {"NcclAllreduceP95Regression"}
    for name in (*source.pop().split("|"), *target.pop().split("|")):
        firing = next(c for c in alerts[name].tests if c.expect_firing)
        assert set(edge.equal) <= set(firing.exp_labels), name


def test_cross_layer_inhibit_edges_target_the_gpu_idle_alert(tmp_path: Path) -> None:
    plan = render_repo(tmp_path).plan
    edges = {e.name: e for e in plan.inhibit_edges if e.pack == "framework"}
    loader = edges["trainer-data-loader-inhibits-gpu-idle"]
    assert loader.equal == ("business_sla_id", "host_name", "resource_gpu_id")
    gpu_alerts = {
        r.alert: r
        for g in plan.rule_groups
        if g.pack == "gpu"
        for r in g.rules
        if isinstance(r, AlertRule)
    }
    (target,) = [m.value for m in loader.target_matchers if m.name == "alertname"]
    gpu_firing = next(c for c in gpu_alerts[target].tests if c.expect_firing)
    framework_firing = next(
        c for c in framework_alerts(plan)["TrainingDataLoaderStarvingGpu"].tests if c.expect_firing
    )
    for label in loader.equal:
        # Same label on both sides, and the same value for the GPU both tests describe.
        assert gpu_firing.exp_labels[label] == framework_firing.exp_labels[label], label
    nccl = edges["trainer-nccl-errors-inhibit-gpu-idle"]
    assert nccl.equal == ("business_sla_id",)


def test_dashboard_row_is_abstract_with_units(tmp_path: Path) -> None:
    plan = render_repo(tmp_path).plan
    (row,) = [r for r in plan.dashboard_rows if r.layer == "framework"]
    keys = {p.key for p in row.panels}
    assert {
        "framework-stage-p95",
        "framework-stage-share",
        "framework-rank-skew",
        "framework-steps-per-second",
    } <= keys
    units = {p.key: p.unit for p in row.panels}
    assert units["framework-stage-share"] == "percentunit"
    assert units["framework-stage-p95"] == "s"


def test_service_without_framework_section_gets_no_framework_output(tmp_path: Path) -> None:
    (tmp_path / "blueprints").mkdir()
    text = BLUEPRINT.format(framework="").replace("    framework={\n\n    },\n", "")
    assert "framework" not in text
    (tmp_path / "blueprints" / "trainer.py").write_text(text)
    result = render(open_workspace(tmp_path))
    assert not any(path.startswith("otel/") for path in result.files)
    assert all(g.pack != "framework" for g in result.plan.rule_groups)


def test_render_is_deterministic(tmp_path: Path) -> None:
    first = render_repo(tmp_path / "a").files
    second = render_repo(tmp_path / "b").files
    assert first == second


# -- promtool ---------------------------------------------------------------------------------


def run_promtool(files: dict[str, bytes], out: Path) -> None:
    require_tool("promtool")
    for path, data in files.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    tests = sorted((out / "prometheus" / "tests").glob("*.test.yml"))
    assert tests
    assert_promtool_passes(tests)


def test_promtool_passes_for_the_example_blueprints(tmp_path: Path) -> None:
    shutil.copytree(REPO / "blueprints", tmp_path / "blueprints")
    result = render(open_workspace(tmp_path))
    names = {a.alert for a in framework_alerts(result.plan).values()}
    assert len(names) == 5
    run_promtool(dict(result.files), tmp_path / "out")


def test_promtool_passes_with_tuned_thresholds_and_seconds(tmp_path: Path) -> None:
    framework = DEFAULT_FRAMEWORK + textwrap.indent(
        '"duration_unit": "s",\n'
        '"feature_gates": ["+spanmetrics.statusCodeConvention.useOtelPrefix"],\n'
        '"resource_attributes": "collector-exporter",\n'
        '"thresholds": {"data_load_share": 0.6, "gpu_utilization_low": 0.2,\n'
        '               "straggler_ratio": 2.5, "allreduce_regression_ratio": 3,\n'
        '               "baseline_offset": "2h"},\n',
        " " * 8,
    )
    result = render_repo(tmp_path, framework)
    run_promtool(dict(result.files), tmp_path / "out")


def test_promtool_catches_a_join_that_drops_the_gpu_label(tmp_path: Path) -> None:
    """The cross-layer test really depends on the join: widening it to ignore the GPU
    makes the 'another resource_gpu_id' case fire, and promtool fails."""
    result = render_repo(tmp_path)
    files = dict(result.files)
    path = conventions.rule_file("trainer")
    broken = (
        files[path]
        .decode()
        .replace(
            "+ on (business_sla_id, host_name, resource_gpu_id) group_left ()\n"
            "      max by (business_sla_id, host_name, resource_gpu_id)",
            "+ on (business_sla_id, host_name) group_left ()\n"
            "      max by (business_sla_id, host_name)",
        )
    )
    assert broken != files[path].decode()
    files[path] = broken.encode()
    with pytest.raises(AssertionError, match="another resource_gpu_id"):
        run_promtool(files, tmp_path / "out")


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "code", "needle"),
    [
        (
            DEFAULT_FRAMEWORK + '        "stages": ["data_load", "Forward Pass", "allreduce"],\n',
            "blueprint/invalid",
            '"stages"',
        ),
        (
            DEFAULT_FRAMEWORK.replace('"world_size": 16', '"world_size": 0'),
            "blueprint/invalid",
            '"world_size"',
        ),
        (
            DEFAULT_FRAMEWORK.replace('"world_size": 16', '"world_size": 32'),
            "framework/ranks-exceed-gpus",
            '"world_size"',
        ),
        (
            DEFAULT_FRAMEWORK.replace('"world_size": 16', '"world_size": 12'),
            "framework/ranks-per-node",
            '"ranks_per_node"',
        ),
        (
            DEFAULT_FRAMEWORK + '        "collector_version": "0.100.0",\n',
            "framework/collector-names",
            '"collector_version"',
        ),
        (
            DEFAULT_FRAMEWORK
            + '        "feature_gates": ["+connector.spanmetrics.legacyMetricNames"],\n',
            "framework/collector-names",
            '"feature_gates"',
        ),
        (
            DEFAULT_FRAMEWORK
            + '        "collector_version": "0.120.0",\n'
            + '        "feature_gates": ["connector.spanmetrics.includeCollectorInstanceID"],\n',
            "framework/unknown-feature-gate",
            '"feature_gates"',
        ),
        (
            DEFAULT_FRAMEWORK
            + '        "collector_version": "0.150.0",\n'
            + '        "resource_attributes": "collector-exporter",\n',
            "framework/collector-option",
            '"resource_attributes"',
        ),
        (
            DEFAULT_FRAMEWORK + '        "stages": ["forward", "backward", "allreduce"],\n',
            "framework/unknown-stage",
            # data_load_stage is defaulted, so it has no line of its own: the section's.
            "framework={",
        ),
    ],
    ids=[
        "invalid-span-name",
        "world-size-zero",
        "ranks-exceed-gpus",
        "ranks-per-node",
        "collector-too-old",
        "legacy-names-gate",
        "gate-not-in-release",
        "exporter-option-too-new",
        "unknown-data-load-stage",
    ],
)
def test_bad_input_is_a_located_diagnostic_with_exit_2(
    tmp_path: Path, framework: str, code: str, needle: str
) -> None:
    diags = bad_json(tmp_path, framework)
    codes = {d["code"] for d in diags}
    assert code in codes, diags
    diag = next(d for d in diags if d["code"] == code)
    assert diag["location"]["file"] == "blueprints/trainer.py"
    assert diag["hint"]
    assert diag["location"]["line"] == line_of(tmp_path, needle), diag


def test_invalid_stage_points_at_the_offending_item(tmp_path: Path) -> None:
    framework = DEFAULT_FRAMEWORK + textwrap.indent(
        '"stages": [\n    "data_load",\n    "forward pass",\n    "allreduce",\n],\n', " " * 8
    )
    diags = bad_json(tmp_path, framework)
    (diag,) = [d for d in diags if "stages" in d["message"]]
    assert diag["location"]["line"] == line_of(tmp_path, '"forward pass"')


# -- version table ----------------------------------------------------------------------------


def test_version_table_encodes_the_checked_thresholds() -> None:
    assert versions.floor() == "0.109.0"
    assert versions.default_namespace("0.108.0") == ""
    assert versions.default_namespace("0.109.0") == "traces.span.metrics"
    gate = versions.gate("include_collector_instance_id")
    assert not gate.enabled("0.135.0", ())
    assert not gate.enabled("0.140.0", ())
    assert gate.enabled("0.140.0", ("+connector.spanmetrics.includeCollectorInstanceID",))
    assert gate.enabled("0.152.0", ())
    assert not gate.enabled("0.152.0", ("-connector.spanmetrics.includeCollectorInstanceID",))
    legacy = ("+connector.spanmetrics.legacyMetricNames",)
    assert versions.effective_namespace("0.160.0", "traces.span.metrics", legacy) == ""
    assert versions.effective_namespace("0.160.0", "my.ns", legacy) == "my.ns"
    for entry in versions.table()["gates"].values():
        assert entry["source"] and entry["verified"]


# -- the instrumentation guide ------------------------------------------------------------


def test_guide_snippet_matches_the_generated_wiring() -> None:
    """The guide's script sets exactly the per-process keys the env file expects and
    names its spans as the default stages."""
    import ast
    import re

    from obs_iac.packs.framework.model import DEFAULT_STAGES
    from obs_iac.packs.framework.wiring import PROCESS_ATTRIBUTES

    guide = (REPO / "docs" / "framework.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, flags=re.S)
    script = next(b for b in blocks if "TracerProvider" in b)
    tree = ast.parse(script)
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    for key, _var in PROCESS_ATTRIBUTES:
        assert key in strings, key
    assert "service.instance.id" in strings  # the catalogue's `instance` label
    spans = {
        n.args[0].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and getattr(n.func, "id", "") == "timed"
        and isinstance(n.args[0], ast.Constant)
    }
    assert spans == {"train_step", *DEFAULT_STAGES}


# -- version gates: the OTLP route on the Prometheus floor --------------------------------


def test_auto_route_on_the_2_42_floor_is_the_scraped_exporter(tmp_path: Path) -> None:
    result = render_repo(tmp_path, prometheus=None)
    assert wiring_of(result.plan).resource_attributes == "collector-exporter"
    assert conventions.prometheus_otlp_fragment() not in result.files
    collector = yaml.safe_load(result.files[conventions.otel_collector_config("trainer")])
    (exporter,) = collector["exporters"]
    assert exporter.startswith("prometheus/")
    assert conventions.prometheus_collector_scrape("trainer") in result.files


def test_explicit_otlp_route_below_2_55_is_a_render_error(tmp_path: Path) -> None:
    framework = DEFAULT_FRAMEWORK + '        "resource_attributes": "prometheus-otlp",\n'
    diags = bad_json(tmp_path, framework, prometheus="2.47")
    [diag] = [d for d in diags if d["code"] == "framework/prometheus-version"]
    assert "otlp.promote_resource_attributes" in diag["message"]
    assert "2.55.0" in diag["message"] and "2.47" in diag["message"]
    assert "--web.enable-otlp-receiver in 3.0.0" in diag["message"]
    assert diag["location"]["line"] == line_of(tmp_path, '"resource_attributes"')
    assert "prometheus_min_version" in diag["hint"]
    assert not (tmp_path / "generated").exists()


def test_explicit_otlp_route_from_2_55_renders(tmp_path: Path) -> None:
    framework = DEFAULT_FRAMEWORK + '        "resource_attributes": "prometheus-otlp",\n'
    result = render_repo(tmp_path, framework, prometheus="2.55")
    assert conventions.prometheus_otlp_fragment() in result.files
