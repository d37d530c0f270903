"""Every bad input of issue 2: exit 2, a located message with field path and hint, no
traceback, and generated/ byte-for-byte unchanged."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult, RunCli, blueprint_source, line_of, tree_digest
from tests.tools import require_tool

BAD = "blueprints/zz_bad.py"


def render_bad(run_cli: RunCli, repo: Path, source: str, name: str = BAD) -> CliResult:
    """Adds one bad blueprint to a rendered repo, renders, and checks the invariants every
    bad input shares."""
    before = tree_digest(repo / "generated")
    assert before, "the fixture repo must already be rendered"
    (repo / name).write_text(source, encoding="utf-8")
    result = run_cli(["render"], repo)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "internal error" not in result.output
    assert tree_digest(repo / "generated") == before
    assert "help: " in result.stderr
    return result


def diagnostics_json(run_cli: RunCli, repo: Path) -> list[dict[str, Any]]:
    result = run_cli(["render", "--format", "json"], repo)
    assert result.exit_code == 2, result.output
    payload = json.loads(result.stdout)
    diags: list[dict[str, Any]] = payload["diagnostics"]
    assert diags and all(d["hint"] for d in diags)
    return diags


def test_python_syntax_error(run_cli: RunCli, rendered: Path) -> None:
    source = 'from obs_iac import service\n\nservice(name="x",\n    team="t"\n'
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:3:" in result.stderr
    assert "error[blueprint/syntax]" in result.stderr
    assert "never closed" in result.stderr


def test_unknown_field(run_cli: RunCli, rendered: Path) -> None:
    gpu = 'GpuFleet(model="A100-SXM4-80GB", count=8, driver_version="535.129.03", colour=1)'
    source = blueprint_source(gpu=gpu)
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'colour=1')}:" in result.stderr
    assert "gpu.colour: unknown field" in result.stderr
    assert "obs-iac schema" in result.stderr


def test_wrong_type(run_cli: RunCli, rendered: Path) -> None:
    gpu = (
        "GpuFleet(\n"
        '        model="A100-SXM4-80GB",\n'
        '        count="many",\n'
        '        driver_version="535.129.03",\n'
        "    )"
    )
    source = blueprint_source(gpu=gpu)
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'count=')}:" in result.stderr
    assert "gpu.count: Input should be a valid integer" in result.stderr
    assert "help: expected type: a valid integer" in result.stderr


def test_invalid_model_outside_a_service_call(run_cli: RunCli, rendered: Path) -> None:
    source = (
        "from obs_iac import GpuFleet\n\n"
        'fleet = GpuFleet(model="A100", count=0, driver_version="535.129.03")\n'
    )
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:3:" in result.stderr
    assert "GpuFleet.count: Input should be greater than or equal to 1" in result.stderr


def test_unknown_gpu_model(run_cli: RunCli, rendered: Path) -> None:
    gpu = 'GpuFleet(model="RTX-9090", count=8, driver_version="535.129.03")'
    source = blueprint_source(gpu=gpu)
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'RTX-9090')}:" in result.stderr
    assert "gpu.model: unknown GPU model 'RTX-9090'" in result.stderr


def test_no_service_declared(run_cli: RunCli, gitops: Path) -> None:
    for blueprint in (gitops / "blueprints").glob("*.py"):
        blueprint.unlink()
    result = run_cli(["render"], gitops)
    assert result.exit_code == 2
    assert "error[blueprint/empty]: blueprints/ has no blueprint files" in result.stderr
    assert not (gitops / "generated").exists()


def test_wrong_type_of_core_field(run_cli: RunCli, rendered: Path) -> None:
    source = blueprint_source(objective="42")
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'objective=')}:" in result.stderr
    assert "objective: Input should be a valid string" in result.stderr
    assert "in: svc-a" in result.stderr


def test_duplicate_sla_id_shows_both_locations(run_cli: RunCli, rendered: Path) -> None:
    source = blueprint_source(name='"other-service"', sla_id='"recomm_v2"')
    result = render_bad(run_cli, rendered, source)
    first = line_of((rendered / "blueprints/recomm_v2.py").read_text(), "sla_id=")
    second = line_of(source, "sla_id=")
    assert "business.sla_id 'recomm_v2' is declared twice" in result.stderr
    assert f"blueprints/recomm_v2.py:{first}:" in result.stderr
    assert f"{BAD}:{second}:" in result.stderr
    diags = [d for d in diagnostics_json(run_cli, rendered) if d["code"] == "blueprint/duplicate"]
    assert len(diags) == 1
    assert diags[0]["location"]["file"] == BAD
    assert diags[0]["location"]["line"] == second
    assert diags[0]["related"] == [f"blueprints/recomm_v2.py:{first}:12"]
    assert diags[0]["object_path"] == ["other-service", "sla_id"]


@pytest.mark.parametrize("sla_id", ["Recomm-V2", "1st", "svc_a\n", "a" * 64, ""])
def test_sla_id_breaking_its_pattern(run_cli: RunCli, rendered: Path, sla_id: str) -> None:
    source = blueprint_source(sla_id=repr(sla_id))
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'sla_id=')}:" in result.stderr
    assert "sla_id:" in result.stderr
    assert "does not match the expected pattern" in result.stderr


def test_unknown_dcgm_field_with_suggestions(run_cli: RunCli, rendered: Path) -> None:
    bogus = "DCGM_FI_DEV_SM__STALL_INST_FETCH_REASON_CYCLES"
    gpu = (
        'GpuFleet(model="A100-SXM4-80GB", count=8, driver_version="535.129.03",\n'
        f'        extra_fields=("DCGM_FI_DEV_MEM_COPY_UTIL", "{bogus}"))'
    )
    source = blueprint_source(gpu=gpu)
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, bogus)}:" in result.stderr
    assert f"gpu.extra_fields[1]: '{bogus}' is not a DCGM field" in result.stderr
    assert "in: svc-a > gpu > extra_fields[1]" in result.stderr
    (diag,) = diagnostics_json(run_cli, rendered)
    assert diag["code"] == "gpu/unknown-field"
    suggestions = diag["hint"].split("did you mean ", 1)[1].split("?", 1)[0].split(", ")
    from obs_iac.catalog import dcgm

    assert 1 <= len(suggestions) <= 3
    assert all(s in dcgm.catalog() for s in suggestions)


def test_profiling_field_without_dcp(run_cli: RunCli, rendered: Path) -> None:
    gpu = (
        'GpuFleet(model="A100-SXM4-80GB", count=8, driver_version="535.129.03",\n'
        '        profiling=False, extra_fields=("DCGM_FI_PROF_SM_OCCUPANCY",))'
    )
    source = blueprint_source(gpu=gpu)
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'DCGM_FI_PROF_SM_OCCUPANCY')}:" in result.stderr
    assert "error[gpu/profiling-disabled]" in result.stderr
    assert "gpu.extra_fields[0]: DCGM_FI_PROF_SM_OCCUPANCY is a profiling" in result.stderr
    assert "gpu.profiling=True" in result.stderr


def test_field_the_exporter_does_not_accept(run_cli: RunCli, rendered: Path) -> None:
    gpu = (
        'GpuFleet(model="A100-SXM4-80GB", count=8, driver_version="535.129.03",\n'
        '        extra_fields=("DCGM_FI_DEV_GPU_UTIL_RATIO",))'
    )
    result = render_bad(run_cli, rendered, blueprint_source(gpu=gpu))
    assert "error[gpu/field-not-accepted]" in result.stderr
    assert "use DCGM_FI_DEV_GPU_UTIL (same field id" in result.stderr


def test_service_name_escaping_the_output_folder(
    run_cli: RunCli, rendered: Path, tmp_path: Path
) -> None:
    outside_before = sorted(p.name for p in tmp_path.iterdir())
    source = blueprint_source(name='"../x"')
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'name=')}:" in result.stderr
    assert "name: '../x' does not match the expected pattern" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before


@pytest.mark.parametrize("field", ["sla_id", "team"])
@pytest.mark.parametrize("value", ['svc"a', "svc\\a", "svc\na", 'a"} or vector(1) #'])
def test_label_values_with_quotes_backslashes_newlines_are_rejected(
    run_cli: RunCli, rendered: Path, field: str, value: str
) -> None:
    source = blueprint_source(**{field: repr(value)})
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, field + '=')}:" in result.stderr
    assert f"{field}: {value!r} does not match the expected pattern" in result.stderr


def test_section_no_pack_claims_suggests_core_field(run_cli: RunCli, rendered: Path) -> None:
    source = blueprint_source(objectve='"typo"')
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'objectve=')}:" in result.stderr
    assert "objectve: no installed pack claims a section of this name" in result.stderr
    assert "did you mean 'objective'?" in result.stderr


def test_section_no_pack_claims_suggests_installed_section(run_cli: RunCli, rendered: Path) -> None:
    source = blueprint_source(log='{"level": "debug"}')
    result = render_bad(run_cli, rendered, source)
    assert "log: no installed pack claims a section of this name" in result.stderr
    assert "did you mean 'logs'?" in result.stderr
    assert re.search(r"installed sections: [a-z, ]*\blogs\b", result.stderr)


def test_blueprint_that_raises(run_cli: RunCli, rendered: Path) -> None:
    source = blueprint_source() + 'raise RuntimeError("boom")\n'
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'raise')}:" in result.stderr
    assert "the blueprint raised RuntimeError: boom" in result.stderr


@pytest.mark.parametrize("code", ["0", "1", '"bye"'])
def test_blueprint_that_exits(run_cli: RunCli, rendered: Path, code: str) -> None:
    """sys.exit(0) in a blueprint must not end obs-iac with success and nothing checked."""
    source = "import sys\n\n" + blueprint_source() + f"sys.exit({code})\n"
    result = render_bad(run_cli, rendered, source)
    assert f"{BAD}:{line_of(source, 'sys.exit')}:" in result.stderr
    assert "the blueprint called exit(" in result.stderr
    check = run_cli(["render", "--check"], rendered)
    assert check.exit_code == 2


def test_blueprint_that_is_not_utf8(run_cli: RunCli, rendered: Path) -> None:
    before = tree_digest(rendered / "generated")
    (rendered / BAD).write_bytes(b"# caf\xe9\nx = 1\n")
    result = run_cli(["render"], rendered)
    assert result.exit_code == 2
    assert f"{BAD}: error[blueprint/unreadable]" in result.stderr
    assert "Traceback" not in result.output
    assert tree_digest(rendered / "generated") == before


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('naming = "fancy"\n', "[tool.obs-iac] naming: Input should be 'classic' or 'utf8'"),
        ("colour = 1\n", "[tool.obs-iac] colour: Extra inputs are not permitted"),
        ('output = "../elsewhere"\n', "[tool.obs-iac] output: Value error, must be a folder"),
    ],
)
def test_invalid_repo_config(run_cli: RunCli, rendered: Path, config: str, expected: str) -> None:
    pyproject = rendered / "pyproject.toml"
    text = pyproject.read_text()
    if config.startswith("output"):
        text = text.replace('output = "generated"\n', "")
    pyproject.write_text(text + config)
    before = tree_digest(rendered / "generated")
    result = run_cli(["render"], rendered)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert expected in result.stderr
    line = line_of(pyproject.read_text(), config.split(" ")[0] + " =")
    assert f"pyproject.toml:{line}: error[config/invalid]" in result.stderr
    assert "help: " in result.stderr
    assert tree_digest(rendered / "generated") == before
    assert not (rendered.parent / "elsewhere").exists()


def test_several_mistakes_are_reported_together_in_source_order(
    run_cli: RunCli, rendered: Path
) -> None:
    gpu = (
        'GpuFleet(model="A100-SXM4-80GB", count=8, driver_version="535.129.03",\n'
        '        extra_fields=("DCGM_FI_NOPE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_ALSO_NOPE"))'
    )
    render_bad(run_cli, rendered, blueprint_source(gpu=gpu))
    diags = diagnostics_json(run_cli, rendered)
    assert [d["object_path"][-1] for d in diags] == [
        "extra_fields[0]",
        "extra_fields[1]",
        "extra_fields[2]",
    ]
    columns = [d["location"]["column"] for d in diags]
    assert columns == sorted(columns)


def test_obs_iac_toml_with_broken_syntax(run_cli: RunCli, rendered: Path) -> None:
    before = tree_digest(rendered / "generated")
    (rendered / "obs-iac.toml").write_text('blueprints = "blueprints"\nnaming = \n')
    result = run_cli(["render"], rendered)
    assert result.exit_code == 2
    assert "obs-iac.toml:2:10: error[config/syntax]: obs-iac.toml is not valid TOML" in (
        result.stderr
    )
    assert "Traceback" not in result.output
    assert tree_digest(rendered / "generated") == before


def test_bad_input_through_the_console_script(run_subprocess: Any, rendered: Path) -> None:
    """The exit code as a shell sees it, not as CliRunner reports it."""
    before = tree_digest(rendered / "generated")
    (rendered / BAD).write_text(blueprint_source(sla_id='"Bad-Id"'))
    result = run_subprocess(["render"], rendered)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "does not match the expected pattern" in result.stderr
    assert tree_digest(rendered / "generated") == before


# Free text is neither rejected nor able to change anything: it is escaped on the way out.
OBJECTIVE = 'p95 "fast" \\ under 2s\nsecond line {{ $labels.job }} }} {{ end }}\n\ttabbed'


def test_free_text_with_quotes_backslashes_newlines_round_trips(
    run_cli: RunCli, rendered: Path
) -> None:
    promtool = require_tool("promtool")
    model = repr('A100-"odd"\\model')
    gpu = f'GpuFleet(model={model}, count=8, driver_version="535.129.03")'
    source = blueprint_source(objective=repr(OBJECTIVE), gpu=gpu)
    (rendered / BAD).write_text(source)
    result = run_cli(["render"], rendered)
    assert result.exit_code == 0, result.output
    out = rendered / "generated/prometheus"
    rules = yaml.safe_load((out / "rules/svc-a.rules.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert alerts
    tests = yaml.safe_load((out / "tests/svc-a.test.yml").read_text())
    fired = [a for t in tests["tests"] for c in t["alert_rule_test"] for a in c["exp_alerts"]]
    assert fired
    assert all(a["exp_annotations"]["sla_objective"] == OBJECTIVE for a in fired)
    per_gpu = [a for a in fired if "resource_gpu_id" in a["exp_labels"]]
    assert per_gpu
    assert all(a["exp_labels"]["modelName"] == 'A100-"odd"\\model' for a in per_gpu)
    check = subprocess.run(
        [promtool, "check", "rules", str(out / "rules/svc-a.rules.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    # promtool renders the annotation template and compares it to the raw objective.
    run = subprocess.run(
        [promtool, "test", "rules", "svc-a.test.yml"],
        cwd=out / "tests",
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
