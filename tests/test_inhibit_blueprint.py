"""The `inhibitions` blueprint section: add / override / disable edges, and located
errors (exit 2, nothing written) for mistakes only the blueprint can make."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from obs_iac import conventions
from obs_iac.cli import main
from obs_iac.diagnostics import Severity
from obs_iac.pipeline import Render, open_workspace, render
from tests.inhibit_support import amtool_check, config_with_rules

BLUEPRINT = """\
from obs_iac import GpuFleet, service

service(
    name="train-a",
    team="ml",
    sla_id="train_a",
    objective="Training finishes on time",
    runbook_base_url="https://runbooks.example.com/train-a",
    gpu=GpuFleet(model="H100-SXM5-80GB", count=8, driver_version="550.54.15", profiling=True),
    inhibitions={inhibitions},
)
"""


def repo(tmp_path: Path, inhibitions: str) -> Path:
    root = tmp_path / "repo"
    (root / "blueprints").mkdir(parents=True)
    (root / "blueprints" / "train_a.py").write_text(BLUEPRINT.format(inhibitions=inhibitions))
    (root / "obs-iac.toml").write_text('output = "out"\n')
    return root


def run_cli(root: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--root", str(root), "render"])
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def rendered(root: Path) -> Render:
    return render(open_workspace(root))


def edge_names(result: Render) -> list[str]:
    return [e.name for e in result.plan.inhibit_edges]


def test_add_override_disable(tmp_path: Path) -> None:
    root = repo(
        tmp_path,
        """{
        "add": [{
            "name": "nvlink-drop-mutes-util-low",
            "reason": "a collective stalled on a degraded link idles the GPU",
            "source_alerts": ["GpuNvlinkThroughputDrop"],
            "target_alerts": ["GpuUtilizationLow"],
            "equal": ["business_sla_id", "host_name", "resource_gpu_id"],
        }],
        "override": [{
            "name": "gpu-node-down-mutes-gpu-alerts",
            "reason": "only mute the symptoms, keep hardware faults visible",
            "target_alerts": ["GpuTemperatureHigh", "GpuUtilizationLow"],
        }],
        "disable": [{"name": "gpu-hot-mutes-util-low", "reason": "we want both"}],
    }""",
    )
    result = rendered(root)
    assert edge_names(result) == [
        "gpu-fault-mutes-gpu-symptoms",
        "gpu-node-down-mutes-gpu-alerts",
        "nvlink-drop-mutes-util-low",
    ]
    node = next(e for e in result.plan.inhibit_edges if e.name == "gpu-node-down-mutes-gpu-alerts")
    assert [(m.name, m.op, m.value) for m in node.target_matchers] == [
        ("alertname", "=~", "GpuTemperatureHigh|GpuUtilizationLow"),
        ("service", "=", "train-a"),
    ]
    assert node.reason.startswith("only mute")
    assert node.source is not None and node.source.line is not None and node.source.line > 10
    assert [f for f in result.findings if f.severity is not Severity.INFO] == []
    proc = amtool_check(
        config_with_rules(result.files[conventions.ALERTMANAGER_INHIBIT_RULES].decode()),
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _fails(tmp_path: Path, inhibitions: str) -> str:
    root = repo(tmp_path, inhibitions)
    code, output = run_cli(root)
    assert code == 2, output
    assert not (root / "out").exists(), "nothing may be written on bad input"
    assert "blueprints/train_a.py:" in output
    return output


ADD = """{{"add": [{{"name": "x", "reason": "test", "source_alerts": [{src}],
    "target_alerts": ["GpuUtilizationLow"], "source_matchers": [{sm}], "equal": [{eq}]}}]}}"""


def test_unknown_alert_is_located_with_did_you_mean(tmp_path: Path) -> None:
    out = _fails(tmp_path, ADD.format(src='"GpuTemperatureHihg"', sm="", eq='"host_name"'))
    assert "inhibit/blueprint" in out
    assert "no alert 'GpuTemperatureHihg'" in out and "did you mean 'GpuTemperatureHigh'" in out
    # line 10 holds `inhibitions={"add": [{... "source_alerts": [...]`: the name itself
    # (column > 1), not the service() call on line 3
    assert "train_a.py:10:" in out and "train_a.py:10:1:" not in out


def test_invalid_regex(tmp_path: Path) -> None:
    out = _fails(
        tmp_path,
        ADD.format(src='"GpuTemperatureHigh"', sm="'layer=~\"hard(ware\"'", eq='"host_name"'),
    )
    assert "invalid regex" in out and "missing )" in out


def test_unknown_label(tmp_path: Path) -> None:
    out = _fails(tmp_path, ADD.format(src='"GpuTemperatureHigh"', sm="", eq='"hostname_typo"'))
    assert "carries a label 'hostname_typo'" in out


def test_unknown_edge_name_in_disable(tmp_path: Path) -> None:
    out = _fails(tmp_path, '{"disable": [{"name": "gpu-hot-mutes-util-lo", "reason": "x y"}]}')
    assert "did you mean 'gpu-hot-mutes-util-low'" in out


def test_dotted_canonical_key_is_mapped_with_a_warning(tmp_path: Path) -> None:
    root = repo(
        tmp_path, ADD.format(src='"GpuTemperatureHigh"', sm="", eq='"host.name", "resource.gpu.id"')
    )
    result = rendered(root)
    added = next(e for e in result.plan.inhibit_edges if e.name == "x")
    assert added.equal == ("host_name", "resource_gpu_id")
    dotted = [f for f in result.findings if f.code == "inhibit/dotted-label"]
    assert len(dotted) == 2
    assert all(f.severity.label == "warning" for f in dotted)
    assert "'host.name'" in dotted[0].message and "'host_name'" in dotted[0].message
    assert dotted[0].location is not None and dotted[0].location.line == 11
    rules = yaml.safe_load(result.files[conventions.ALERTMANAGER_INHIBIT_RULES].decode())
    assert all("." not in label for r in rules["inhibit_rules"] for label in r["equal"])


def test_underscore_spelling_has_no_warning(tmp_path: Path) -> None:
    root = repo(tmp_path, ADD.format(src='"GpuTemperatureHigh"', sm="", eq='"host_name"'))
    assert [f for f in rendered(root).findings if f.code == "inhibit/dotted-label"] == []


def test_unparsable_matcher_and_service_matcher(tmp_path: Path) -> None:
    out = _fails(
        tmp_path / "a",
        ADD.format(src='"GpuTemperatureHigh"', sm="'layer~hardware'", eq='"host_name"'),
    )
    assert "is not a matcher" in out
    out = _fails(
        tmp_path / "b",
        ADD.format(src='"GpuTemperatureHigh"', sm="'service=\"other\"'", eq='"host_name"'),
    )
    assert "a service matcher is not allowed" in out
