"""Shared helpers for the SLO pack tests: throwaway repositories and the CLI."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from obs_iac.cli import main
from obs_iac.pipeline import Render, open_workspace, render

PYPROJECT = '[tool.obs-iac]\nblueprints = "blueprints"\noutput = "generated"\n'

HEADER = """\
from obs_iac import GpuFleet, service
from obs_iac.packs.slo import (
    BurnAlert, ErrorRatioSli, FreshnessSli, LatencySli, Series, Slo, ThroughputSli,
)

REQ = Series(name="req_total", type="counter", unit="requests",
             labels=("business_sla_id", "job"))
ERR = Series(name="req_errors_total", type="counter", unit="requests",
             labels=("business_sla_id", "job"))
LAT = Series(name="req_duration_seconds", type="histogram", unit="seconds",
             labels=("business_sla_id", "job"), buckets=(0.1, 0.25, 0.5))
FRESH = Series(name="job_last_success_timestamp_seconds", type="gauge",
               unit="timestamp_seconds", labels=("business_sla_id", "job"))
"""


def service_call(slos: str) -> str:
    return (
        "service(\n"
        '    name="svc",\n'
        '    team="t",\n'
        '    sla_id="svc_a",\n'
        '    objective="x",\n'
        '    runbook_base_url="https://r.example.com/svc",\n'
        '    gpu=GpuFleet(model="A100-SXM4-80GB", count=1, driver_version="535.129.03"),\n'
        "    slo=[\n" + textwrap.indent(textwrap.dedent(slos).strip("\n"), "        ") + "\n"
        "    ],\n"
        ")\n"
    )


def make_repo(root: Path, blueprint: str) -> Path:
    (root / "blueprints").mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (root / "blueprints" / "svc.py").write_text(blueprint, encoding="utf-8")
    return root


def render_repo(root: Path) -> Render:
    return render(open_workspace(root))


def cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(root), *args])


def require_tool(name: str) -> str:
    """Tests that need a real tool fail under CI when it is missing, and skip elsewhere."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is required under CI but is not installed")
        pytest.skip(f"{name} is not installed")
    return path


def line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in the blueprint")
