"""Shared fixtures: a throwaway GitOps repo, CLI runners and tree fingerprints."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from obs_iac.cli import main

REPO = Path(__file__).resolve().parents[1]
OBS_IAC = Path(sys.executable).with_name("obs-iac")

PYPROJECT = """\
[project]
name = "gitops-under-test"
version = "0"

[tool.obs-iac]
blueprints = "blueprints"
output = "generated"
{extra}"""

# The minimal service every test starts from; values are Python source, one keyword per
# line, so a test knows the line each field is written on.
BASE_FIELDS: dict[str, str] = {
    "name": '"svc-a"',
    "team": '"team-a"',
    "sla_id": '"svc_a"',
    "objective": '"Batch scored within 10 minutes"',
    "runbook_base_url": '"https://runbooks.example.com/svc-a"',
    "gpu": 'GpuFleet(model="A100-SXM4-80GB", count=8, driver_version="535.129.03")',
}


@pytest.fixture(scope="session", autouse=True)
def _promtool_verdicts_shared(tmp_path_factory: pytest.TempPathFactory) -> None:
    """promtool verdicts are kept in a folder all pytest-xdist workers of the run share."""
    from tests import promtool_runs
    from tests.venvs import shared_dir

    promtool_runs.SHARED = shared_dir(tmp_path_factory) / "promtool-verdicts"


def blueprint_source(**fields: str | None) -> str:
    """A blueprint calling service() once; ``None`` drops a field, other values replace it."""
    lines = ["from obs_iac import GpuFleet, service", "", "service("]
    for key, value in {**BASE_FIELDS, **fields}.items():
        if value is not None:
            lines.append(f"    {key}={value},")
    lines.append(")")
    return "\n".join(lines) + "\n"


def line_of(source: str, needle: str) -> int:
    """1-based line of the first line containing ``needle``."""
    for number, text in enumerate(source.splitlines(), start=1):
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} not in source")


def tree_digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones included) -> sha256 of its bytes."""
    if not folder.exists():
        return {}
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


RunCli = Callable[..., CliResult]


def _run_in_process(args: Sequence[str], cwd: Path) -> CliResult:
    runner = CliRunner()
    result = runner.invoke(main, ["--root", str(cwd), *args], catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"obs-iac {' '.join(args)} escaped with {result.exception!r}")
    return CliResult(result.exit_code, result.stdout, result.stderr)


def _run_subprocess(args: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> CliResult:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    proc = subprocess.run(
        [str(OBS_IAC), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def run_cli() -> RunCli:
    """``run_cli(args, cwd)``: obs-iac in-process (click's CliRunner) against repo ``cwd``."""
    return _run_in_process


@pytest.fixture
def run_subprocess() -> Callable[..., CliResult]:
    """``run_subprocess(args, cwd, env=None)``: the installed console script, as users run it."""
    if not OBS_IAC.exists():
        pytest.fail(f"{OBS_IAC} is missing; run `make venv`")
    return _run_subprocess


def make_repo(root: Path, blueprints: Path | None = None, extra_config: str = "") -> Path:
    """A GitOps repo at ``root``: a copy of ``blueprints`` and a minimal pyproject.toml."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(blueprints or REPO / "blueprints", root / "blueprints")
    (root / "pyproject.toml").write_text(PYPROJECT.format(extra=extra_config), encoding="utf-8")
    return root


@pytest.fixture
def gitops(tmp_path: Path) -> Path:
    """A GitOps repo holding a copy of the example blueprints, not yet rendered."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def rendered(gitops: Path) -> Path:
    """The example repo after one successful ``obs-iac render``."""
    result = _run_in_process(["render"], gitops)
    assert result.exit_code == 0, result.output
    return gitops


GOLDEN = Path(__file__).parent / "golden"
# The "examples" case is this repository itself: blueprints/ in, the committed
# generated/ out. A copy under tests/golden would only be state to keep in sync.
GOLDEN_CASES = (
    "examples",
    *sorted(p.name for p in GOLDEN.iterdir() if (p / "blueprints").is_dir()),
)


def golden_blueprints(case: str) -> Path:
    return REPO / "blueprints" if case == "examples" else GOLDEN / case / "blueprints"


def golden_expected(case: str) -> Path:
    return REPO / "generated" if case == "examples" else GOLDEN / case / "expected"
