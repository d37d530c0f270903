"""The dashboards pack: blueprint overrides, and located diagnostics for bad ones."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from obs_iac.cli import main

BLUEPRINT = """from obs_iac import GpuFleet, service

service(
    name="demo",
    team="ml",
    sla_id="demo_sla",
    objective="Demo answers within 1 second",
    runbook_base_url="https://runbooks.example.com/demo",
    gpu=GpuFleet(model="A100-SXM4-80GB", count=8, driver_version="535.129.03"),
    dashboards={DASHBOARDS},
)
"""


def repo(tmp_path: Path, dashboards: str) -> Path:
    (tmp_path / "blueprints").mkdir()
    (tmp_path / "blueprints" / "demo.py").write_text(BLUEPRINT.replace("{DASHBOARDS}", dashboards))
    return tmp_path


def render(root: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--root", str(root), "render"])
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def board(root: Path) -> dict:
    return json.loads((root / "generated/grafana/dashboards/obs-iac-demo.json").read_text())


def test_overrides_resize_and_hide_panels(tmp_path: Path) -> None:
    root = repo(
        tmp_path,
        '{"overrides": {"gpu-utilization": {"width": 24, "height": 6}, '
        '"xid-errors": {"hide": True}}}',
    )
    code, out = render(root)
    assert code == 0, out
    panels = {p["title"]: p for p in board(root)["panels"]}
    assert panels["GPU utilisation"]["gridPos"] == {"x": 0, "y": 1, "w": 24, "h": 6}
    assert "XID errors (last code)" not in panels
    assert panels["GPU waste rate (idle share)"]["gridPos"]["y"] == 7


def test_override_of_unknown_panel_is_located(tmp_path: Path) -> None:
    root = repo(tmp_path, '{"overrides": {"gpu-temprature": {"width": 6}}}')
    code, out = render(root)
    assert code == 2, out
    assert "error[dashboard/unknown-panel]" in out
    assert "blueprints/demo.py:10" in out
    assert "did you mean 'temperature'?" in out
    assert not (root / "generated").exists()


def test_override_wider_than_grid_is_located(tmp_path: Path) -> None:
    root = repo(tmp_path, '{"overrides": {"temperature": {"width": 30}}}')
    code, out = render(root)
    assert code == 2, out
    assert "blueprints/demo.py:10" in out
    assert "24" in out


def test_unknown_override_field_is_rejected(tmp_path: Path) -> None:
    root = repo(tmp_path, '{"overrides": {"temperature": {"colour": "red"}}}')
    code, out = render(root)
    assert code == 2, out
    assert "colour" in out


def test_pack_reports_duplicate_keys_across_packs(tmp_path: Path) -> None:
    from obs_iac.load import load_blueprints
    from obs_iac.packs.dashboards import DashboardsPack
    from obs_iac.plan.compile import validate_services
    from obs_iac.plugins import Contribution, discover
    from tests.dashboards.helpers import panel, row

    root = repo(tmp_path, "{}")
    (svc,) = validate_services(load_blueprints(root, "blueprints"), discover())
    draft = Contribution(
        dashboard_rows=[
            row("demo", "hardware", panel("gpu-utilization", "vector(1)"), pack="gpu"),
            row("demo", "framework", panel("gpu-utilization", "vector(2)"), pack="pytorch"),
        ]
    )
    (diag,) = DashboardsPack().finalize(svc, draft, None).diagnostics  # type: ignore[arg-type]
    assert diag.code == "dashboard/duplicate-panel-key"
    assert "gpu, pytorch" in diag.message
    assert diag.location is not None and diag.location.file.endswith("demo.py")
