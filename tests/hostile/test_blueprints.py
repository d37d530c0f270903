"""Blueprints in a box: a time limit, stdout kept apart from the tool's own, every way
out of a blueprint (exit calls, any exception class) a located error, strict types for
counts, rates and free text."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import OBS_IAC, RunCli, blueprint_source, line_of, make_repo


def _repo(tmp_path: Path, source: str, extra_config: str = "") -> Path:
    blueprints = tmp_path / "bp"
    blueprints.mkdir()
    (blueprints / "svc.py").write_text(source)
    return make_repo(tmp_path / "repo", blueprints, extra_config)


def _run(repo: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(OBS_IAC), *args],
        cwd=repo,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_blueprint_that_never_ends_is_stopped(tmp_path: Path) -> None:
    source = blueprint_source() + "while True:\n    pass\n"
    repo = _repo(tmp_path, source, "blueprint_timeout_seconds = 0.5\n")
    result = _run(repo, "render", timeout=30)
    assert result.returncode == 2, result.stderr
    loop = line_of(source, "while True")
    assert f"svc.py:{loop}:" in result.stderr or f"svc.py:{loop + 1}:" in result.stderr
    assert "0.5 s" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_quick_blueprint_is_within_the_default_limit(tmp_path: Path, run_cli: RunCli) -> None:
    repo = _repo(tmp_path, blueprint_source() + "import time\ntime.sleep(0.2)\n")
    assert run_cli(["render"], repo).exit_code == 0


def test_the_time_limit_must_be_positive(tmp_path: Path, run_cli: RunCli) -> None:
    repo = _repo(tmp_path, blueprint_source(), "blueprint_timeout_seconds = 0\n")
    result = run_cli(["render"], repo)
    assert result.exit_code == 2
    assert "blueprint_timeout_seconds" in result.stderr


def test_blueprint_stdout_never_mixes_into_json(tmp_path: Path, run_cli: RunCli) -> None:
    source = (
        "import os, sys\nprint('hello from a blueprint')\nos.write(1, b'raw bytes\\n')\n"
        + blueprint_source()
    )
    repo = _repo(tmp_path, source)
    # The console script: os.write(1, ...) reaches the real file descriptor 1.
    result = _run(repo, "render", "--check", "--format", "json")
    assert result.returncode == 1, result.stderr  # nothing rendered yet: stale
    assert json.loads(result.stdout)["clean"] is False
    assert "hello from a blueprint" in result.stderr and "raw bytes" in result.stderr
    plan = run_cli(["plan", "--format", "json"], repo)
    assert plan.exit_code == 0, plan.output
    json.loads(plan.stdout)
    assert "hello from a blueprint" in plan.stderr


def test_os_exit_in_a_blueprint_is_an_error(tmp_path: Path) -> None:
    """In the console script: on today's code os._exit(0) ends the check with exit 0."""
    source = "import os\n" + blueprint_source() + "os._exit(0)\n"
    result = _run(_repo(tmp_path, source), "render", "--check")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"svc.py:{line_of(source, 'os._exit')}" in result.stderr
    assert "os._exit(0)" in result.stderr


@pytest.mark.parametrize("call", ["sys.exit(0)", "posix._exit(0)"])
def test_other_exit_calls_in_a_blueprint_are_errors(
    tmp_path: Path, run_cli: RunCli, call: str
) -> None:
    source = "import posix, sys\n" + blueprint_source() + call + "\n"
    result = run_cli(["render", "--check"], _repo(tmp_path, source))
    assert result.exit_code == 2, result.output
    assert f"svc.py:{line_of(source, call)}" in result.stderr
    assert "exit" in result.stderr


@pytest.mark.parametrize(
    "raise_",
    [
        "class Stop(BaseException):\n    pass\nraise Stop('stop here')",
        "raise GeneratorExit('odd')",
        "raise MemoryError('no room')",
    ],
)
def test_every_exception_class_is_a_located_error(
    tmp_path: Path, run_cli: RunCli, raise_: str
) -> None:
    source = blueprint_source() + raise_ + "\n"
    repo = _repo(tmp_path, source)
    result = run_cli(["render"], repo)
    assert result.exit_code == 2, result.output
    assert "svc.py:" in result.stderr and "blueprint/error" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        (
            {"gpu": 'GpuFleet(model="A100-SXM4-80GB", count=True, driver_version="535.129.03")'},
            "gpu.count",
        ),
        ({"objective": '"   "'}, "objective"),
        ({"objective": '"\\n\\t"'}, "objective"),
        ({"logs": '{"rate_limit": {"rate": float("inf"), "burst": 10}}'}, "rate"),
        ({"logs": '{"rate_limit": {"rate": 5.0, "burst": True}}'}, "burst"),
        ({"logs": '{"rate_limit": {"rate": float("nan"), "burst": 10}}'}, "rate"),
    ],
)
def test_strict_types_for_counts_rates_and_text(
    tmp_path: Path, run_cli: RunCli, fields: dict[str, str], words: str
) -> None:
    repo = _repo(tmp_path, blueprint_source(**fields))
    result = run_cli(["render"], repo)
    assert result.exit_code == 2, result.output
    assert words in result.stderr


def test_good_counts_rates_and_text_are_accepted(tmp_path: Path, run_cli: RunCli) -> None:
    source = blueprint_source(logs='{"rate_limit": {"rate": 5.0, "burst": 10}}')
    result = run_cli(["render"], _repo(tmp_path, source))
    assert result.exit_code == 0, result.output
