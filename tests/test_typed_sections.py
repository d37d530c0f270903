"""Typed pack sections (issue 22, part 4): importable models, did-you-mean on unknown
keys at every depth, strict types, the ratio-for-percent SLO objective, and Python's
own NameError suggestion. Each bad case keeps the bad-input contract (exit 2, located,
generated/ untouched) through render_bad."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import obs_iac
from obs_iac.blueprint.suggest import model_at, unknown_key_hint
from obs_iac.packs.slo.models import SloSection
from tests.conftest import RunCli, blueprint_source, line_of
from tests.test_bad_input import BAD, render_bad

FRAMEWORK = '{"world_size": 8, "step_time_budget_seconds": 1.5}'
FRESHNESS = (
    'FreshnessSli(last_success=Series(name="m_last_success_timestamp_seconds", '
    'type="gauge", unit="timestamp_seconds", labels=("business_sla_id",)), max_age="15m")'
)


def _with_imports(source: str, *names: str) -> str:
    head = "from obs_iac import GpuFleet, service"
    extra = "from obs_iac import " + ", ".join(names) + "\n"
    slo = "from obs_iac.packs.slo import FreshnessSli, Series, Slo\n"
    return source.replace(head, head + "\n" + extra + slo, 1)


def test_every_section_model_is_importable_from_obs_iac() -> None:
    for name in ("Framework", "Logs", "Inhibitions", "Dashboards", "Waiver", "PanelOverride"):
        model = getattr(obs_iac, name)
        assert model.model_config.get("frozen") and model.model_config.get("extra") == "forbid"
        assert name in obs_iac.__all__


def test_typed_sections_render_like_dicts(run_cli: RunCli, rendered: Path) -> None:
    """A typed model and the dict it stands for are the same blueprint."""
    as_dict = blueprint_source(framework=FRAMEWORK, logs='{"runtime": "docker"}')
    (rendered / BAD).write_text(as_dict, encoding="utf-8")
    assert run_cli(["render"], rendered).exit_code == 0
    before = {p: p.read_bytes() for p in sorted((rendered / "generated").rglob("*")) if p.is_file()}
    typed = _with_imports(
        blueprint_source(
            framework="Framework(world_size=8, step_time_budget_seconds=1.5)",
            logs='Logs(runtime="docker")',
        ),
        "Framework",
        "Logs",
    )
    (rendered / BAD).write_text(typed, encoding="utf-8")
    result = run_cli(["render"], rendered)
    assert result.exit_code == 0, result.output
    after = {p: p.read_bytes() for p in sorted((rendered / "generated").rglob("*")) if p.is_file()}
    assert after == before


@pytest.mark.parametrize(
    ("field", "value", "path", "suggestion"),
    [
        ("gpu", 'GpuFleet(model="A100", count=8, driver_version="535.129.03", profling=True)',
         "gpu.profling", "'profiling'"),
        ("framework", '{"world_size": 8, "step_time_budget_seconds": 1, '
         '"thresholds": {"data_load_shar": 0.2}}',
         "framework.thresholds.data_load_shar", "'data_load_share'"),
        ("logs", '{"drop": [{"expression": "x", "reason": "y", "reasn": "z"}]}',
         "logs.drop.0.reasn", "'reason'"),
        ("inhibitions", '{"disable": [{"name": "x", "reason": "why not", "reasom": 1}]}',
         "inhibitions.disable.0.reasom", "'reason'"),
        ("dashboards", '{"overrides": {"temperature": {"widht": 6}}}',
         "dashboards.overrides.temperature.widht", "'width'"),
        ("slo", '[{"name": "a", "objective": 99.0, "sli": {"kind": "freshness", '
         '"last_success": {"name": "m", "type": "gauge", "unit": "s", '
         '"labels": ["business_sla_id"], "hlp": "x"}, "max_age": "5m"}}]',
         "slo.0.sli.freshness.last_success.hlp", "'help'"),
    ],
)  # fmt: skip
def test_unknown_key_at_any_depth_gets_did_you_mean(
    run_cli: RunCli, rendered: Path, field: str, value: str, path: str, suggestion: str
) -> None:
    source = blueprint_source(**{field: value})
    result = render_bad(run_cli, rendered, source)
    assert f"{path}: unknown field" in result.stderr
    assert f"did you mean {suggestion}?" in result.stderr
    assert f"{BAD}:{line_of(source, field + '=')}:" in result.stderr


def test_unknown_key_far_from_any_field_lists_the_fields() -> None:
    hint = unknown_key_hint(obs_iac.Logs, ("zzzz",))
    assert hint is not None and hint.startswith("fields of Logs: ") and "runtime" in hint


def test_model_at_follows_root_models_tags_and_containers() -> None:
    from obs_iac.packs.slo.models import Series

    assert model_at(SloSection, (0, "sli", "latency", "histogram")) is Series
    assert model_at(SloSection, (0, "sli", "nosuchkind")) is None


@pytest.mark.parametrize(
    ("field", "value", "path", "expected"),
    [
        ("gpu", 'GpuFleet(model="A100", count="16", driver_version="535.129.03")',
         "gpu.count", "valid integer (got '16')"),
        ("gpu", 'GpuFleet(model="A100", count=True, driver_version="535.129.03")',
         "gpu.count", "valid integer (got True)"),
        ("gpu", 'GpuFleet(model="A100", count=8, driver_version="535.129.03", profiling=1)',
         "gpu.profiling", "valid boolean (got 1)"),
        ("framework", '{"world_size": "8", "step_time_budget_seconds": 1.5}',
         "framework.world_size", "valid integer (got '8')"),
        ("logs", '{"max_lines": 12.0}', "logs.max_lines", "valid integer (got 12.0)"),
    ],
)  # fmt: skip
def test_no_silent_coercion(
    run_cli: RunCli, rendered: Path, field: str, value: str, path: str, expected: str
) -> None:
    result = render_bad(run_cli, rendered, blueprint_source(**{field: value}))
    assert f"{path}: Input should be a {expected}" in result.stderr


def test_lists_still_work_where_tuples_are_declared() -> None:
    fleet = obs_iac.GpuFleet(
        model="A100", count=8, driver_version="535.129.03", extra_fields=["DCGM_FI_DEV_GPU_UTIL"]
    )
    assert fleet.extra_fields == ("DCGM_FI_DEV_GPU_UTIL",)
    with pytest.raises(ValidationError):
        obs_iac.GpuFleet(model="A100", count=8.0, driver_version="535.129.03")


@pytest.mark.parametrize(("given", "meant"), [("0.999", "99.9"), ("0.995", "99.5"), ("1", "100")])
def test_objective_given_as_a_ratio_gets_one_error(
    run_cli: RunCli, rendered: Path, given: str, meant: str
) -> None:
    slo = f'[Slo(name="fresh", objective={given}, sli={FRESHNESS})]'
    source = _with_imports(blueprint_source(slo=slo), "Logs")
    result = render_bad(run_cli, rendered, source)
    assert result.stderr.count("error[") == 1, result.stderr
    assert f"did you mean {meant} (percent)?" in result.stderr
    # A model built inside a list of a keyword is reported at its place in the service.
    assert "slo.0.objective: objective" in result.stderr
    assert "unreachable" not in result.stderr
    assert f"{BAD}:{line_of(source, 'objective=' + given)}:" in result.stderr


def test_objective_as_a_percent_is_accepted(run_cli: RunCli, rendered: Path) -> None:
    slo = f'[Slo(name="fresh", objective=99.9, sli={FRESHNESS})]'
    (rendered / BAD).write_text(_with_imports(blueprint_source(slo=slo), "Logs"), "utf-8")
    result = run_cli(["render"], rendered)
    assert result.exit_code == 0, result.output


def test_name_error_keeps_pythons_did_you_mean(run_cli: RunCli, rendered: Path) -> None:
    source = blueprint_source(gpu='GpuFleat(model="A100", count=8, driver_version="535.129.03")')
    result = render_bad(run_cli, rendered, source)
    assert "NameError: name 'GpuFleat' is not defined. Did you mean: 'GpuFleet'?" in result.stderr
    assert f"{BAD}:{line_of(source, 'GpuFleat')}:" in result.stderr
